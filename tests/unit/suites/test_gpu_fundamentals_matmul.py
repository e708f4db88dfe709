"""S5.1's tiled matrix multiply: the hidden suite fails the plausible wrong answers.

Mutants of `tiled_intensity` (no reuse, the bytes counted once, the tile squared) are run
through the hidden test itself. The kernels' reuse is graded from the memory model: its fakes
and other correct designs are in tests/corpus/memory_kernels.py (test_memory_lessons.py).
"""

from __future__ import annotations

import pytest
from factories import Facade, hidden_suite, solution_function


@pytest.fixture(scope="module")
def hidden():
    return hidden_suite("gpu_fundamentals/test_matmul_hidden.py", "gf_matmul_hidden")


INTENSITY_MUTANTS = {
    "no reuse (always the naive intensity)": (
        ("return flops / nbytes", "return 2 / (2 * itemsize * 4)"),
    ),
    "bytes of one operand only": (("nbytes = 2 * int(tile) ** 2", "nbytes = int(tile) ** 2"),),
    "the tile squared": (("flops = 2 * int(tile) ** 3", "flops = 2 * int(tile) ** 4"),),
    "an integer answer": (("return flops / nbytes", "return flops // nbytes"),),
}


def test_the_reference_passes(hidden):
    reference = Facade(tiled_intensity=solution_function("tiled_intensity"))
    hidden.test_tiled_intensity_random(student=reference, reference=reference)
    hidden.test_tiled_intensity_invalid(student=reference)


@pytest.mark.parametrize("name", sorted(INTENSITY_MUTANTS))
def test_each_wrong_intensity_fails(hidden, name):
    reference = Facade(tiled_intensity=solution_function("tiled_intensity"))
    mutant = Facade(tiled_intensity=solution_function("tiled_intensity", INTENSITY_MUTANTS[name]))
    with pytest.raises((AssertionError, pytest.fail.Exception)):
        hidden.test_tiled_intensity_random(student=mutant, reference=reference)
