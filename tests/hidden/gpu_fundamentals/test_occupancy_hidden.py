"""Hidden tests for S5.1's occupancy and warp-divergence exercises (never shipped to students).

Launch shapes and branch patterns are drawn at grading time and compared with the reference
solution; the per-SM limits come from the grader's own course.toml, for the T4 and the H100.

Stated rules (grader verify checks that every test here is listed, with a sentence that appears
word for word in the released notebook):

- test_occupancy_random_launches: "When several limits give the same smallest count, name the
  first of them in that order."
- test_occupancy_invalid_arguments: "a value outside its range, or a combination that fits no
  block at all on the SM (say 1,024 threads using 255 registers each), raises `ValueError` naming
  the resource."
- test_divergence_efficiency_random_warps: "Return, as a Python `float`, the useful
  lane-slots divided by the lane-slots spent when each side that some lane takes runs once over
  all 32 lanes: `1.0` when the lanes agree, `0.5` when they split."
- test_divergence_efficiency_invalid: "A sequence whose length is not 32 raises `ValueError`; an
  entry that is not a bool (`1`, `None`, a string) raises `TypeError`."

PYTEST_DONT_REWRITE: pytest leaves these asserts alone, because their messages are what the
student reads as feedback.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.suites.student import StudentError
from grader.suites.testing import expect_value_error

FAST = settings.get_profile("grader-hidden")  # tests/hidden/conftest.py
GPUS = ("T4", "H100_SXM")
KEYS = {"blocks_per_sm", "warps_per_sm", "occupancy", "limited_by"}


def _fits(reference, tpb: int, regs: int, smem: int, sm: dict) -> bool:
    try:
        reference.occupancy(tpb, regs, smem, sm)
    except ValueError:
        return False
    return True


@pytest.mark.points(2)
@FAST
@given(
    gpu=st.sampled_from(GPUS),
    tpb=st.one_of(st.sampled_from([32, 64, 96, 128, 256, 512, 1024]), st.integers(1, 1024)),
    regs=st.one_of(st.sampled_from([0, 16, 32, 40, 64, 96, 128, 255]), st.integers(0, 255)),
    smem_kib=st.one_of(st.just(0), st.integers(1, 64)),
    extra=st.integers(0, 1023),
)
def test_occupancy_random_launches(student, reference, course, gpu, tpb, regs, smem_kib, extra):
    sm = course.hardware[gpu].sm.as_dict()
    smem = min(smem_kib * 1024 + (extra if smem_kib else 0), sm["shared_memory_bytes"])
    if not _fits(reference, tpb, regs, smem, sm):
        return  # covered by test_occupancy_invalid_arguments
    got = student.occupancy(tpb, regs, smem, sm)
    want = reference.occupancy(tpb, regs, smem, sm)
    call = f"occupancy({tpb}, {regs}, {smem}, sm_limits({gpu!r}))"
    assert isinstance(got, dict) and set(got) == KEYS, (
        f"{call} must return a dict with exactly the keys {sorted(KEYS)}, got {got!r}"
    )
    assert type(got["blocks_per_sm"]) is int and type(got["warps_per_sm"]) is int, (
        f"{call}: blocks_per_sm and warps_per_sm must be Python ints, got {got!r}"
    )
    assert type(got["occupancy"]) is float, f"{call}: occupancy must be a Python float, got {got!r}"
    assert got == want, (
        f"{call} returned {got}; expected {want}. Blocks per SM is the smallest of the threads "
        "(whole warps), blocks, registers (per warp, rounded up to the granularity) and shared "
        "memory limits; ties name the first in that order"
    )


@pytest.mark.points(1)
@pytest.mark.parametrize("gpu", GPUS)
def test_occupancy_invalid_arguments(student, course, gpu):
    sm = course.hardware[gpu].sm.as_dict()
    cases = [
        (f"occupancy(0, 32, 0, {gpu})", (0, 32, 0), "threads_per_block must be >= 1"),
        (
            f"occupancy({sm['max_threads'] + 1}, 32, 0, {gpu})",
            (sm["max_threads"] + 1, 32, 0),
            "more threads than an SM holds",
        ),
        (f"occupancy(256, 256, 0, {gpu})", (256, 256, 0), "at most 255 registers per thread"),
        (f"occupancy(256, -1, 0, {gpu})", (256, -1, 0), "registers cannot be negative"),
        (
            f"occupancy(256, 32, {sm['shared_memory_bytes'] + 1}, {gpu})",
            (256, 32, sm["shared_memory_bytes"] + 1),
            "more shared memory than the SM has",
        ),
        (f"occupancy(1024, 255, 0, {gpu})", (1024, 255, 0), "such a block fits no SM"),
    ]
    for what, args, hint in cases:
        expect_value_error(lambda args=args: student.occupancy(*args, sm), what, hint)


@pytest.mark.points(1)
@FAST
@given(
    pattern=st.one_of(
        st.lists(st.booleans(), min_size=32, max_size=32),
        st.sampled_from([[True] * 32, [False] * 32]),
        st.integers(0, 31).map(lambda k: [lane == k for lane in range(32)]),
    ),
    as_array=st.booleans(),
)
def test_divergence_efficiency_random_warps(student, reference, pattern, as_array):
    arg = np.array(pattern, dtype=bool) if as_array else pattern
    got = student.divergence_efficiency(arg)
    want = reference.divergence_efficiency(pattern)
    shown = "".join("T" if v else "F" for v in pattern)
    assert type(got) is float, f"divergence_efficiency must return a Python float, got {got!r}"
    assert got == want, (
        f"divergence_efficiency({shown}{' as a bool array' if as_array else ''}) returned "
        f"{got}; expected {want}: a warp whose lanes all agree runs one side (1.0); one that "
        "splits, however unevenly, runs both sides over all 32 lanes (0.5)"
    )


@pytest.mark.points(1)
def test_divergence_efficiency_invalid(student):
    for what, arg in (("31 lanes", [True] * 31), ("33 lanes", [False] * 33), ("no lanes", [])):
        expect_value_error(
            lambda arg=arg: student.divergence_efficiency(arg),
            f"divergence_efficiency({what})",
            "a warp has exactly 32 lanes",
        )
    for what, arg in (("32 ones", [1] * 32), ("None in lane 3", [True] * 3 + [None] + [True] * 28)):
        try:
            result = student.divergence_efficiency(arg)
        except TypeError:
            continue
        except StudentError as exc:
            pytest.fail(f"divergence_efficiency({what}) raised {exc.exc_type}; expected TypeError")
        pytest.fail(
            f"divergence_efficiency({what}) returned {result!r}; expected TypeError (entries "
            "must be bools)"
        )
