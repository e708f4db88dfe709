"""S5.1's tiled matrix multiply: the hidden suite fails the plausible wrong answers.

Mutants of `tiled_intensity` (no reuse, the bytes counted once, the tile squared) are run
through the hidden test itself; kernels that do not stage both operands in shared memory (a
"tiled" kernel that reads global memory like the naive one, or tiles only `a`) are compiled to
PTX for the course GPU in a fresh process and must fail the hidden suite's shared-tile check,
which the reference kernel passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from factories import Facade, hidden_suite, solution_function, solution_region

SIG = "void(float32[:, :], float32[:, :], float32[:, :])"


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


NO_REUSE = """
@cuda.jit
def matmul_tiled(a, b, c):
    x, y = cuda.grid(2)
    if y < c.shape[0] and x < c.shape[1]:
        acc = numba.float32(0.0)
        for k in range(a.shape[1]):
            acc += a[y, k] * b[k, x]
        c[y, x] = acc
"""

ONE_TILE = """
@cuda.jit
def matmul_tiled(a, b, c):
    a_tile = cuda.shared.array((TILE, TILE), numba.float32)
    lane = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * TILE
    col = cuda.blockIdx.x * TILE + lane
    acc = cuda.local.array(TILE, numba.float32)
    for r in range(TILE):
        acc[r] = 0.0
    for k0 in range(0, a.shape[1], TILE):
        for r in range(TILE):
            a_tile[r, lane] = 0.0
            if row0 + r < a.shape[0] and k0 + lane < a.shape[1]:
                a_tile[r, lane] = a[row0 + r, k0 + lane]
        cuda.syncthreads()
        for k in range(TILE):
            if k0 + k < b.shape[0] and col < b.shape[1]:
                for r in range(TILE):
                    acc[r] += a_tile[r, k] * b[k0 + k, col]
        cuda.syncthreads()
    if col < c.shape[1]:
        for r in range(TILE):
            if row0 + r < c.shape[0]:
                c[row0 + r, col] = acc[r]
"""


def _ptx(kernel_source: str) -> str:
    """PTX for the T4 of one kernel, compiled by a fresh process with the real CUDA target."""
    script = textwrap.dedent(
        """
        import sys
        import numba
        from numba import cuda
        TILE = 32
        source = sys.stdin.read()
        namespace = {"cuda": cuda, "numba": numba, "TILE": TILE}
        exec(source, namespace)
        kernel = namespace["matmul_tiled"].py_func
        ptx, _ = cuda.compile_ptx(kernel, sys.argv[1], cc=(7, 5))
        sys.stdout.write(ptx)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run(
        [sys.executable, "-c", script, SIG],
        input=kernel_source,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"no CUDA compiler for PTX here: {done.stderr.strip()[-300:]}")
    return done.stdout


def test_the_reference_kernel_stages_both_tiles(hidden):
    assert hidden.shared_tile_problem(_ptx(solution_region("matmul_tiled"))) is None


@pytest.mark.parametrize("source", [NO_REUSE, ONE_TILE], ids=["no-reuse", "one-tile"])
def test_a_kernel_that_does_not_reuse_fails(hidden, source):
    problem = hidden.shared_tile_problem(_ptx(source))
    assert problem is not None and "two tiles" in problem, problem
