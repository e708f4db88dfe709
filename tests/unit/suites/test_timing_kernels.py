"""The one timing routine on real kernels, through the trusted side and the kernel host:
in the simulator on CPU (small sizes), on a GPU at full size (`gpu`-marked).

The red team of issue 43, each a transpose a student could hand in: one that writes only part of
its output when the matrix is large, one that reuses its own output from an earlier launch, one
that writes NaN, and one that is fast when it sees the same input again (GPU only: in the
simulator its time means nothing; tests/unit/core/test_timing.py shows it on the fake device).
Each loses the timing test with feedback that says why.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.core import timing
from grader.core.timing import K_IN, Check, Device, Policy
from grader.suites import timing as suite_timing
from grader.suites.student import InProcessBackend, Student
from grader.suites.timing import KernelTarget, judge

HEADER = "import math\nimport numba\nimport numpy as np\nfrom numba import cuda\n"
KERNELS = """
@cuda.jit
def copy(src, dst, stride):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[(i * stride) % src.size]


@cuda.jit
def transpose(src, dst):
    x, y = cuda.grid(2)
    if y < src.shape[0] and x < src.shape[1]:
        dst[x, y] = src[y, x]


@cuda.jit
def partial_when_large(src, dst):
    x, y = cuda.grid(2)
    if src.shape[0] >= 40 and y == src.shape[0] - 1:
        return  # the last row is "never checked" at full size
    if y < src.shape[0] and x < src.shape[1]:
        dst[x, y] = src[y, x]


@cuda.jit
def reuses_previous_output(src, dst):
    x, y = cuda.grid(2)
    if y < src.shape[0] and x < src.shape[1]:
        if not math.isnan(dst[x, y]):
            return  # an earlier launch already wrote this element
        dst[x, y] = src[y, x]


@cuda.jit
def writes_nan(src, dst):
    x, y = cuda.grid(2)
    if y < src.shape[0] and x < src.shape[1]:
        dst[x, y] = math.nan


@cuda.jit
def same_input_fast(src, dst):
    x, y = cuda.grid(2)
    bx = cuda.blockIdx.x * cuda.blockDim.x
    by = cuda.blockIdx.y * cuda.blockDim.y
    if by < src.shape[0] and bx < src.shape[1] and dst[bx, by] == src[by, bx]:
        return  # one probe says this block's tile is already there: skip it
    if y < src.shape[0] and x < src.shape[1]:
        dst[x, y] = src[y, x]
"""
QUICK = Policy(sample_s=0.01, warmup=1, min_rounds=3, max_rounds=4, max_s=60.0)


@pytest.fixture(scope="module")
def student(tmp_path_factory) -> Student:
    nb = tmp_path_factory.mktemp("timing") / "k.py"
    nb.write_text("# %%\n" + HEADER + KERNELS, encoding="utf-8")
    return Student(InProcessBackend({"k": nb}), "k", kernel_timeout=300)


def _targets(student: Student, name: str, n: int, rng: np.random.Generator):
    srcs = [rng.standard_normal((n, n)).astype(np.float32) for _ in range(K_IN)]
    dst = np.zeros((n, n), np.float32)
    nbytes = 2 * srcs[0].nbytes
    grid = (-(-n // 16), -(-n // 8))
    kernel = KernelTarget(
        getattr(student, name)[grid, (16, 8)],
        [[x, dst] for x in srcs],
        {1: [x.T.copy() for x in srcs]},
        nbytes,
    )
    flat = [x.reshape(-1) for x in srcs]
    copy = KernelTarget(
        student.copy[-(-n * n // 256), 256],
        [[f, dst.reshape(-1), 1] for f in flat],
        {1: flat},
        nbytes,
    )
    return kernel, copy


def test_an_honest_kernel_is_timed_and_recorded(student):
    suite_timing.take_records()
    kernel, copy = _targets(student, "transpose", 24, np.random.default_rng(1))
    check = Check("transpose within 50x the copy", "transpose", "copy", 50.0)
    judged = judge([copy, kernel], [check], Device("simulator", None), QUICK, test="t")
    (v,) = judged.verdicts
    assert v.passed and judged.rounds >= QUICK.min_rounds
    (record,) = suite_timing.take_records()
    assert record["test"] == "t" and [t["label"] for t in record["targets"]] == [
        "copy",
        "transpose",
    ]
    assert all(t["median_ms"] > 0 and t["samples"] >= 3 for t in record["targets"])
    assert record["verdicts"][0]["threshold"] == 50.0 and record["nvml_before"]["available"] in (
        True,
        False,
    )
    assert suite_timing.take_records() == []


@pytest.mark.parametrize(
    "name, said",
    [
        ("partial_when_large", "never written (still NaN)"),
        ("reuses_previous_output", "expected"),
        ("writes_nan", "never written (still NaN)"),
    ],
)
def test_a_red_team_kernel_loses_the_timing_test_with_feedback(student, name, said):
    kernel, copy = _targets(student, name, 48, np.random.default_rng(2))
    check = Check("within 50x the copy", name, "copy", 50.0)
    with pytest.raises(pytest.fail.Exception, match="Every timed launch must compute") as exc:
        judge([copy, kernel], [check], Device("simulator", None), QUICK)
    assert said in str(exc.value) and name in str(exc.value)


def test_the_partial_kernel_is_right_on_a_small_matrix(student):
    """What a single small launch (the simulator's tests) cannot see, the full size shows."""
    kernel, copy = _targets(student, "partial_when_large", 16, np.random.default_rng(3))
    timing.measure([kernel], QUICK, Device("simulator", None))


def test_an_input_changed_by_a_timed_kernel_fails(student, tmp_path):
    nb = tmp_path / "w.py"
    nb.write_text(
        "# %%\n"
        + HEADER
        + """
@cuda.jit
def scribble(src, dst):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i]
        src[i] = 0.0
""",
        encoding="utf-8",
    )
    s = Student(InProcessBackend({"w": nb}), "w", kernel_timeout=300)
    srcs = [np.arange(64, dtype=np.float32) + v for v in range(K_IN)]
    target = KernelTarget(
        s.scribble[1, 64], [[x, np.zeros(64, np.float32)] for x in srcs], {1: srcs}, 0
    )
    with pytest.raises(pytest.fail.Exception, match="changed its input"):
        judge([target], [], Device("simulator", None), QUICK)


# ---------------------------------------------------------------------------------------------
# On a GPU: the same red team at full size, and the kernel that is fast on a repeated input.

FULL = 8192


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["partial_when_large", "reuses_previous_output", "writes_nan"])
def test_red_team_on_the_gpu(student, name):
    kernel, copy = _targets(student, name, FULL, np.random.default_rng(4))
    device, _ = suite_timing.device_of()
    with pytest.raises(pytest.fail.Exception, match="Every timed launch must compute"):
        judge([copy, kernel], [Check("c", name, "copy", 50.0)], device)


@pytest.mark.gpu
def test_a_kernel_fast_on_a_repeated_input_gains_nothing_on_the_gpu(student):
    """Timed the old way (the same input and output every launch) its probe would skip every
    block after the first launch; with the rotation it is exactly as slow as the plain naive
    transpose (both within 20%), and its outputs are right."""
    rng = np.random.default_rng(5)
    honest, _ = _targets(student, "transpose", FULL, rng)
    cheat, copy = _targets(student, "same_input_fast", FULL, rng)  # stages "copy" again
    device, _ = suite_timing.device_of()
    checks = [Check("cheat gains nothing", "same_input_fast", "transpose", 0.8, below=False)]
    (v,) = judge([honest, cheat, copy], checks, device).verdicts
    assert v.passed, timing.describe(v)


def test_the_final_check_reads_back_in_ranges_under_the_reply_cap(student, monkeypatch):
    """At 8192 x 8192 one float32 array is the 256 MiB a reply may carry: the final check reads
    every array back one range at a time (here 100 elements) and still sees every element."""
    monkeypatch.setattr(suite_timing, "FETCH", 100)
    sizes = []
    real = student._backend.kernel

    def kernel(req, timeout, target="run"):
        reply = real(req, timeout, target)
        if req.get("op") == "kernel_fetch":
            sizes.append(reply["ok"].size)
        return reply

    monkeypatch.setattr(student._backend, "kernel", kernel)
    honest, copy = _targets(student, "transpose", 24, np.random.default_rng(6))
    judge([copy, honest], [], Device("simulator", None), QUICK)
    # per kernel: 3 output copies + 2 input variants of 576 elements, in ranges of 100
    assert max(sizes) == 100 and sum(sizes) == 2 * (3 + 2) * 24 * 24
    monkeypatch.setattr(student._backend, "kernel", real)
    partial, copy = _targets(student, "partial_when_large", 48, np.random.default_rng(7))
    with pytest.raises(pytest.fail.Exception, match="still NaN"):
        judge([copy, partial], [], Device("simulator", None), QUICK)


def test_the_graders_baseline_runs_in_the_same_harness_each_launch_timed(student):
    """`baseline_add` stages the grader's own a + b on the student's kernel worker: each launch
    comes back with its own time (the simulator's clock here, CUDA events on a GPU), the host's
    launch cost beside it, and every timed output checked like a student's."""
    suite_timing.take_records()
    rng = np.random.default_rng(8)
    pairs = [(rng.random(300, dtype=np.float32), rng.random(300, dtype=np.float32)) for _ in "ab"]
    want = [a + b for a, b in pairs]
    base = suite_timing.baseline_add(student, pairs, want, 12 * 300, threads=128)
    assert base.label == "grader a + b" and base.device["ok"]["footprint_bytes"] == 3600
    base.prepare()
    sample = base.run(5)
    assert len(sample.gpu_s) == 5 and all(t > 0 for t in sample.gpu_s)
    assert sample.launch_s > 0 and sample.queued and sample.wall_s >= sum(sample.gpu_s)
    base.check(5)
    judge([base], [], Device("simulator", None), QUICK, test="t")
    (record,) = suite_timing.take_records()
    (entry,) = record["targets"]
    # the median launch can exceed the mean that the wall clock bounds: only the sums compare
    assert entry["launch_us"] > 0 and entry["wall_per_launch_ms"] > 0 and entry["median_ms"] > 0
    assert entry["flush_before_each_launch"] is False  # the simulator has no L2


def test_event_times_the_trusted_clock_contradicts_are_refused(student, monkeypatch):
    """The worker's times are its word: a reply whose launches add up to more than the trusted
    clock saw around the request is the grader's refusal (exit 3), and a reply without one time
    per launch is malformed, never a time."""
    kernel, copy = _targets(student, "transpose", 16, np.random.default_rng(9))
    real = student._backend.kernel

    def squeezed(req, timeout, target="run"):
        reply = real(req, timeout, target)
        if req.get("op") == "kernel_run":
            reply["wall_s"] = sum(reply["ok"]["gpu_s"]) / 10
        return reply

    monkeypatch.setattr(student._backend, "kernel", squeezed)
    with pytest.raises(timing.ImpossibleTime, match="exceed the trusted clock") as exc:
        judge([copy, kernel], [], Device("simulator", None), QUICK)
    assert exc.value.exit_code == 3

    def short(req, timeout, target="run"):
        reply = real(req, timeout, target)
        if req.get("op") == "kernel_run":
            reply["ok"]["gpu_s"] = reply["ok"]["gpu_s"][:-1]
        return reply

    monkeypatch.setattr(student._backend, "kernel", short)
    kernel, copy = _targets(student, "transpose", 16, np.random.default_rng(10))
    with pytest.raises(Exception, match="launch times"):
        judge([copy, kernel], [], Device("simulator", None), QUICK)


def test_the_hold_outlasts_the_host_and_learns_from_a_miss():
    """The next hold is 1.5x the host's enqueue span, corrected for a GPU sleep that held for
    less than asked; a hold that was too short doubles the margin for good."""
    from grader.sandbox.harness import HOLD_MAX_S, next_hold

    asked, scale = next_hold(0.005, 1.5, 0.005, 0.002, queued=True)
    assert (asked, scale) == (pytest.approx(0.003), 1.5)
    # the GPU slept half as long as asked, and the host outran it: twice the margin, twice asked
    asked, scale = next_hold(0.003, 1.5, 0.0015, 0.002, queued=False)
    assert scale == 3.0 and asked == pytest.approx(3.0 * 0.002 / 0.5)
    assert next_hold(0.1, 3.0, 0.1, 10.0, queued=True)[0] == HOLD_MAX_S
