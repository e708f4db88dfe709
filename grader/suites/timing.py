"""The GPU tests' side of the one timing routine (`grader.core.timing`): a kernel on the kernel
worker as a timing target (the student's, or the grader's own baseline, launched and timed by the
same harness), the device they run on, the NVML watch that discards a throttled round, and what
each test leaves in result.json.

`KernelTarget` stages a kernel on the trusted side's kernel worker with two input variants and
three NaN-filled output copies (`grader.core.timing`'s rotation). Each sample is one
`kernel_run` request: the harness times every launch with CUDA events (all launches queued behind
a hold kernel, the L2 flushed before each when one launch's footprint is under twice the L2) and
reports the host's launch cost beside them; the trusted side keeps its own clock around the
request (`wall_s`), which bounds the events' sum. After every sample it checks what each output
copy holds at indices this process draws (first and last element included) against what the test
expects from the variant that copy was last written from, and that the inputs are unchanged;
`final_check` fetches every copy whole after the last sample. `baseline` is the grader's own
kernel as a `KernelTarget` (`ADD`: one element per thread, a + b), so a baseline and a student's
kernel differ in nothing but the kernel: the same worker, launch path, events, L2 policy and
checks. (Torch in this process would be timed by another path in another kind of process; torch
in the kernel worker would bring torch into the sandbox for one test.) `CallTarget` is the same
contract for a callable in this process (the bench's torch figures), timed by events when given.
`judge` measures and decides, records the figures with the GPU's NVML readings before and after
(`record`, taken by the plugin into the test's `timings` in result.json), and turns a wrong
output into the test's failure.
"""

from __future__ import annotations

import statistics
import time
import types
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from grader.core import kernel_source, nvml, timing
from grader.core.course import Course
from grader.sandbox import protocol
from grader.sandbox.harness import next_hold
from grader.suites.errors import malformed
from grader.suites.launches import KernelLaunch, dims, signature

SAMPLED, CHUNK = 14, 256  # chunks of elements checked per array after each sample
FETCH = 1 << 24  # elements per read-back request of the final check (64 MiB of float32)
_RECORDS: list[dict] = []
Ranges = list[tuple[int, int]]  # [start, stop) ranges of flat element indices


def take_records() -> list[dict]:
    """The timing records of the test that just ran (the plugin takes them once)."""
    out = list(_RECORDS)
    _RECORDS.clear()
    return out


def _ranges(label: str, sample: int, size: int) -> Ranges:
    """Element ranges to check after a sample: the first and last CHUNK elements and SAMPLED
    chunks drawn by this process, the same on every regrade (seeded by the target and the
    sample). Ranges, not single elements: the worker copies device slices, never a whole array."""
    rng = np.random.default_rng(zlib.crc32(f"{label}/{sample}".encode()))
    starts = [0, max(0, size - CHUNK), *(int(x) for x in rng.integers(0, size, size=SAMPLED))]
    return sorted({(s0, min(size, s0 + CHUNK)) for s0 in starts})


def _flat(ranges: Ranges) -> np.ndarray:
    return np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in ranges])


def _mismatch(got: np.ndarray, want: np.ndarray, tol: Any) -> int | None:
    """The first position where got is not want (NaN equals NaN; within tol when given)."""
    same = (
        (got == want) | (np.isnan(got) & np.isnan(want))
        if got.dtype.kind in "fc"
        else (got == want)
    )
    if tol is not None:
        same |= np.abs(got.astype(np.float64) - want) <= tol
    bad = np.flatnonzero(~same)
    return int(bad[0]) if bad.size else None


class Outputs:
    """What a sample's output copies must hold: for output argument i, `expected[i][v]` after a
    launch on input variant v (NaN where no launch wrote the copy), within `tolerance[i][v]`."""

    def __init__(
        self,
        label: str,
        variants: Sequence[Sequence[Any]],
        expected: dict[int, Sequence[np.ndarray]],
        tolerance: dict[int, Sequence[Any]] | None = None,
    ):
        self.label, self.variants, self.expected = label, variants, expected
        self.tolerance = tolerance or {}

    def check(self, got: dict, sample: int, launches: int, where: dict) -> None:
        """Raise `timing.WrongOutput` naming the first wrong element of the first wrong copy.

        `got`: {"outputs": {arg: {copy: values}}, "inputs": {arg: {variant: values}}}, each the
        flat elements at `where[arg]` (flat indices) of that array."""
        # inputs first: a kernel that changed one makes every later output wrong too
        for i, variants in got.get("inputs", {}).items():
            i = int(i)
            for v, values in variants.items():
                want = np.asarray(self.variants[int(v)][i]).reshape(-1)[where[str(i)]]
                if _mismatch(np.asarray(values).reshape(-1), want, None) is not None:
                    raise timing.WrongOutput(
                        f"{self.label} changed its input (argument {i}) during timed launches; "
                        "a timed kernel must leave its inputs unchanged"
                    )
        writes = timing.last_writes(sample, launches)
        for i, copies in got.get("outputs", {}).items():
            i = int(i)
            at = where[str(i)]
            first = self.expected[i][0]
            for c, values in copies.items():
                v = writes[int(c)]
                full = np.full(1, np.nan, first.dtype) if v is None else self.expected[i][v]
                want = np.broadcast_to(full, first.shape).reshape(-1)[at]
                tol = None
                if v is not None and i in self.tolerance:
                    t = np.asarray(self.tolerance[i][v], dtype=np.float64)
                    tol = t if t.ndim == 0 else t.reshape(-1)[at]
                bad = _mismatch(np.asarray(values).reshape(-1), want, tol)
                if bad is not None:
                    raise timing.WrongOutput(
                        self._said(i, sample, launches, bad, values, want, first.shape, at)
                    )

    def _said(
        self,
        i: int,
        sample: int,
        launches: int,
        bad: int,
        values: np.ndarray,
        want: np.ndarray,
        shape: tuple,
        where: np.ndarray,
    ) -> str:
        flat = int(where[bad])
        at = np.unravel_index(flat, shape)
        got_v, want_v = np.asarray(values).reshape(-1)[bad], want[bad]
        what = (
            "never written (still NaN)"
            if np.isnan(got_v) and not np.isnan(want_v)
            else (f"{got_v!r}, expected {want_v!r}")
        )
        return (
            f"{self.label}: in timed sample {sample + 1} ({launches} launches), output argument "
            f"{i} at index {tuple(int(x) for x in at)} was {what}. Every timed launch must "
            "compute the whole result from its own inputs: the grader fills the outputs with "
            "NaN before each sample and alternates two different inputs, so a kernel that skips "
            "part of the output, reuses an earlier launch's result or writes NaN fails here"
        )


class KernelTarget:
    """A student's kernel on the kernel worker, as a `grader.core.timing.Target`."""

    def __init__(
        self,
        launch: KernelLaunch,
        variants: Sequence[Sequence[Any]],
        expected: dict[int, Sequence[np.ndarray]],
        min_bytes: int,
        tolerance: dict[int, Sequence[Any]] | None = None,
        label: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        source: kernel_source.KernelSource | None = None,
    ):
        self.launch, self.clock = launch, clock
        self.label = label or launch.function.name
        self.min_bytes = int(min_bytes)
        self.outputs = Outputs(self.label, variants, expected, tolerance)
        self.sample = -1  # the sample being taken (`prepare` starts the next)
        s, name = launch.function._student, launch.function.name
        grid, block = dims(launch.grid, "grid"), dims(launch.block, "block")
        args = list(variants[0])
        if source is None:  # the student's: the GPU compiler goes first
            s._ptx(name, signature(args, name), s._cc)
        # every array argument of variant 0 (outputs included), for the read-back's indices
        self.arrays = [a if isinstance(a, np.ndarray) else None for a in args]
        outs = {str(i): [list(args[i].shape), args[i].dtype.str] for i in sorted(expected)}
        sent = [[None if i in expected else a for i, a in enumerate(v)] for v in variants]
        extra = {"grid": grid, "block": block, "variants": sent, "outputs": outs}
        req = (
            s._kernel_req("kernel_stage", name, slot=self.label, **extra)
            if source is None
            else protocol.kernel_request("kernel_stage", source, slot=self.label, **extra)
        )
        self.device = self._ask(req)

    def _ask(self, req: dict) -> Any:
        s, name = self.launch.function._student, self.launch.function.name
        req.setdefault("slot", self.label)
        reply = s._backend.kernel(req, s._kernel_timeout, "run")
        if "error" in reply:  # a timeout or a limit the kernel hit names its [limits] key
            raise s._error(reply["error"], name, "kernel_timeout_s")
        return reply

    def prepare(self) -> None:
        self.sample += 1
        self._ask({"op": "kernel_prepare"})

    def run(self, launches: int) -> timing.Sample:
        t0 = self.clock()
        reply = self._ask({"op": "kernel_run", "repeat": launches, "sample": self.sample})
        wall = reply.get("wall_s")  # the backend's trusted clock around its one exchange
        got = protocol.run_sample(reply.get("ok"), launches)
        if got is None:
            raise malformed("a timed kernel's launch times", self.launch.function.name)
        return timing.Sample(
            got["gpu_s"],
            float(wall) if isinstance(wall, float) else self.clock() - t0,
            got["launch_s"],
            got["queued"],
            got["warm_l2_bytes"],
        )

    def check(self, launches: int) -> None:
        ranges = {
            str(i): _ranges(f"{self.label}/{i}", self.sample, int(a.size))
            for i, a in enumerate(self.arrays)
            if a is not None
        }
        got = self._reply({"op": "kernel_sample", "ranges": ranges})
        self.outputs.check(got, self.sample, launches, {i: _flat(r) for i, r in ranges.items()})

    def _reply(self, req: dict) -> dict:
        got = self._ask(req).get("ok")
        if not (isinstance(got, dict) and isinstance(got.get("outputs"), dict)):
            raise malformed("a timed kernel's read-back", self.launch.function.name)
        return got

    def close(self) -> None:
        """Free the kernel's staging on the worker (its inputs and output copies)."""
        self._ask({"op": "kernel_unstage"})

    def final_check(self, launches: int) -> None:
        """Every element of every output copy and input after the last sample, one array and
        one FETCH-sized range at a time (a reply carries at most 256 MiB)."""
        arrays = [("outputs", i, k) for i in self.outputs.expected for k in range(timing.K_OUT)]
        arrays += [
            ("inputs", i, v)
            for i, a in enumerate(self.arrays)
            if a is not None and i not in self.outputs.expected
            for v in range(timing.K_IN)
        ]
        for part, i, k in arrays:
            size = int(self.arrays[i].size)  # type: ignore[union-attr]
            for start in range(0, size, FETCH):
                r = [(start, min(size, start + FETCH))]
                req = {"op": "kernel_fetch", "part": part, "arg": i, "which": k, "ranges": r}
                values = self._ask(req).get("ok")
                if not isinstance(values, np.ndarray):
                    raise malformed("a timed kernel's read-back", self.launch.function.name)
                got = {part: {str(i): {str(k): values}}}
                self.outputs.check(got, self.sample, launches, {str(i): _flat(r)})


class CallTarget:
    """A callable run in this (trusted) process, e.g. torch's `a + b` in the bench, as a
    `Target`: `launch(variant, copy)` runs it once, `fill()` NaN-fills its output copies and
    flushes the L2, `sync()` waits for the device, `fetch(copy)` returns an output copy as numpy.
    With `events` (make an event, seconds between two) each launch is timed on the GPU between
    two events, and with `hold` (enqueue a GPU sleep of so many seconds) every launch is queued
    behind it first, as the harness does; without events, on this process's clock with a
    `sync()` after each launch."""

    def __init__(
        self,
        label: str,
        launch: Callable[[int, int], Any],
        fill: Callable[[], Any],
        sync: Callable[[], Any],
        fetch: Callable[[int], np.ndarray],
        expected: Sequence[np.ndarray],
        min_bytes: int,
        clock: Callable[[], float] = time.monotonic,
        events: tuple[Callable[[], Any], Callable[[Any, Any], float]] | None = None,
        hold: Callable[[float], Any] | None = None,
    ):
        self.label, self.min_bytes, self.clock = label, int(min_bytes), clock
        self._launch, self._fill, self._sync, self._fetch = launch, fill, sync, fetch
        self.expected, self.events, self.hold = expected, events, hold
        self.hold_s, self.hold_scale = 0.005, 1.5
        self.sample = -1

    def prepare(self) -> None:
        self.sample += 1
        self._fill()
        self._sync()

    def run(self, launches: int) -> timing.Sample:
        if self.events is None:
            return self._run_on_host(launches)
        make, elapsed = self.events
        marks, host = [make() for _ in range(2 * launches + 2)], []
        t0 = self.clock()
        begin = time.perf_counter()
        if self.hold is not None:
            marks[-2].record()
            self.hold(self.hold_s)
            marks[-1].record()
        for j in range(launches):
            marks[2 * j].record()
            h0 = time.perf_counter()
            self._launch(timing.variant(self.sample, j), timing.copy(j))
            host.append(time.perf_counter() - h0)
            marks[2 * j + 1].record()
        span = time.perf_counter() - begin
        self._sync()
        queued = True
        if self.hold is not None:
            held = elapsed(marks[-2], marks[-1])
            queued = span <= held
            self.hold_s, self.hold_scale = next_hold(
                self.hold_s, self.hold_scale, held, span, queued
            )
        gpu = [elapsed(marks[2 * j], marks[2 * j + 1]) for j in range(launches)]
        return timing.Sample(gpu, self.clock() - t0, statistics.median(host), queued)

    def _run_on_host(self, launches: int) -> timing.Sample:
        t0, gpu = self.clock(), []
        for j in range(launches):
            h0 = time.perf_counter()
            self._launch(timing.variant(self.sample, j), timing.copy(j))
            self._sync()
            gpu.append(time.perf_counter() - h0)
        return timing.Sample(gpu, self.clock() - t0, None)

    def check(self, launches: int) -> None:
        writes = timing.last_writes(self.sample, launches)
        for c, v in enumerate(writes):
            got = self._fetch(c)
            want = np.full_like(got, np.nan) if v is None else self.expected[v]
            if _mismatch(got.reshape(-1), np.asarray(want).reshape(-1), None) is not None:
                raise RuntimeError(
                    f"the grader's own baseline {self.label} computed a wrong result"
                )


def device_of(course: Course | None = None) -> tuple[timing.Device, dict]:
    """The device timed kernels run on, with its peak bandwidth (NVML's memory clock and bus
    width, else the course.toml GPU whose name it carries), and the NVML reading it came from."""
    reading = nvml.snapshot()
    name = str(reading.get("name") or "GPU")
    peak = nvml.peak_bandwidth(reading)
    if peak is None and course is not None:
        low = name.lower()
        known = [
            h
            for h in course.hardware.values()
            if h.key.replace("_", " ").lower() in low or h.name.lower() in low
        ]
        peak = max(h.bandwidth_gbs for h in known) * 1e9 if known else None
    return timing.Device(name, peak), reading


def judge(
    targets: Sequence[Any],
    checks: Sequence[timing.Check],
    device: timing.Device,
    policy: timing.Policy | None = None,
    clock: Callable[[], float] = time.monotonic,
    test: str = "",
) -> timing.Judgement:
    """Measure and decide (`grader.core.timing.judge`), check every timed output whole after the
    last sample, and record the figures with NVML's readings before and after. A wrong output
    fails the test with its feedback; an impossible time raises the grader's refusal."""
    before = nvml.snapshot()
    watch = nvml.RoundWatch()
    try:
        judgement = timing.judge(targets, checks, policy or timing.Policy(), device, clock, watch)
        for t in targets:
            if isinstance(t, KernelTarget):
                t.final_check(judgement.series[t.label].launches)
    except timing.WrongOutput as exc:
        import pytest  # lazy: `grader.suites` is imported by processes that never test

        pytest.fail(str(exc), pytrace=False)
    finally:
        watch.close()
        for t in targets:
            if isinstance(t, KernelTarget):
                t.close()
    after = nvml.snapshot()
    record = judgement.record()
    record["device"] = {
        "name": device.name,
        "peak_bandwidth_gbs": round(device.peak_bytes_s / 1e9, 1) if device.peak_bytes_s else None,
    }
    record.update(test=test, nvml_before=before, nvml_after=after, nvml_watch=watch.why or "rounds")
    record["notes"] = [timing.describe(v) for v in judgement.verdicts if v.by_median]
    targets_by = {t.label: t for t in targets}
    for entry in record["targets"]:
        t = targets_by[entry["label"]]
        entry["min_bytes"] = t.min_bytes
        if t.min_bytes:
            entry["gbs"] = round(t.min_bytes / (entry["median_ms"] * 1e-3) / 1e9, 1)
        if isinstance(t, KernelTarget):
            entry.update({k: v for k, v in t.device.get("ok", {}).items()})
    record["slowed_by"] = sorted(set(nvml.slowed(before)) | set(nvml.slowed(after)))
    _RECORDS.append(record)
    return judgement


def torch_target(
    label: str,
    op: Callable[..., Any],
    variants: Sequence[Sequence[np.ndarray]],
    expected: Sequence[np.ndarray],
    min_bytes: int,
) -> CallTarget:
    """A torch baseline as a `CallTarget`: `op(*inputs, out=output)` on the GPU, the inputs of
    each variant copied there once, `timing.K_OUT` output tensors NaN-filled before each sample
    and an L2 flush of twice the device's L2 (at least 256 MiB) written beside them."""
    import torch  # lazy: only a GPU test's trusted process uses it

    ins = [[torch.from_numpy(np.ascontiguousarray(x)).cuda() for x in v] for v in variants]
    like = torch.from_numpy(np.ascontiguousarray(expected[0]))
    outs = [torch.empty(like.shape, dtype=like.dtype, device="cuda") for _ in range(timing.K_OUT)]
    l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0))
    flush = torch.empty(max(256 << 20, 2 * l2), dtype=torch.uint8, device="cuda")

    def fill() -> None:
        for t in outs:
            t.fill_(float("nan"))
        flush.zero_()

    return CallTarget(
        label,
        lambda v, c: op(*ins[v], out=outs[c]),
        fill,
        torch.cuda.synchronize,
        lambda c: outs[c].cpu().numpy(),
        expected,
        min_bytes,
        events=(
            lambda: torch.cuda.Event(enable_timing=True),
            lambda a, b: a.elapsed_time(b) / 1e3,
        ),
        # torch's GPU sleep counts clock cycles: 2 GHz overestimates every course GPU's clock
        hold=lambda seconds: torch.cuda._sleep(int(seconds * 2e9)),
    )


# The grader's own a + b: one element per thread, what the notebook teaches; a baseline staged,
# launched and timed by the same harness as the student's kernel.
ADD = """
from numba import cuda


@cuda.jit
def grader_add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]
"""


def baseline_add(
    student: Any,
    variants: Sequence[Sequence[np.ndarray]],
    expected: Sequence[np.ndarray],
    min_bytes: int,
    threads: int = 256,
    label: str = "grader a + b",
) -> KernelTarget:
    """The grader's `ADD` kernel on the student's kernel worker as a `KernelTarget`: `variants`
    are (a, b) pairs, `expected` each pair's sum; its output is a third argument."""
    n = int(expected[0].size)
    launch = types.SimpleNamespace(
        function=types.SimpleNamespace(_student=student, name="grader_add"),
        grid=-(-n // threads),
        block=threads,
    )
    out = np.empty_like(expected[0])
    return KernelTarget(
        launch,
        [[a, b, out] for a, b in variants],
        {2: list(expected)},
        min_bytes,
        label=label,
        source=kernel_source.extract(ADD, "grader_add"),
    )
