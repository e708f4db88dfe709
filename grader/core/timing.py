"""The one timing routine of every GPU test and of the bench: samples until the spread is small,
medians compared pair by pair, a verdict that repeats on every regrade.

A *target* is one thing to time (a student's kernel in its worker, a baseline in this process):
`prepare()` readies a sample without being timed (outputs filled with NaN, the L2 flushed),
`run(n)` times `n` launches on the trusted clock and returns seconds, `check()` proves what the
sample's launches wrote (a `WrongOutput` otherwise). `measure` warms every target up, sizes its
sample (`Policy.sample_s`), then takes one sample of each target in turn, round after round,
until every target's median is known to `Policy.spread` or a cap on rounds or seconds is hit.
Round i of two targets is a pair, so a ratio's samples come from the same moment of the machine.

`judge` turns ratios into verdicts: a ratio's 95% interval wholly on one side of its threshold
decides; an interval that straddles it is measured once more (the new rounds pooled with the
old) and, still undecided, decided by the median and marked so (`Verdict.by_median`). A sample
faster than the device's bandwidth allows for the bytes a launch must move is not a pass: it
raises `ImpossibleTime`, the grader's refusal (an `InfrastructureError`).

Inputs and outputs of the timed launches rotate (`variant`, `copy`): launch j of sample s reads
input variant (s + j) % K_IN and writes output copy j % K_OUT, every copy NaN-filled before the
sample. With K_IN = 2 and K_OUT = 3, a copy is never written twice in a row from the same input,
so a kernel that reuses what an earlier launch left in its output computes a wrong result, and
one whose time depends on seeing the same input again never sees it. `last_writes` says which
variant each copy must hold after a sample.

Pure: no numba, no CUDA; the clock and the targets are given, so the tests drive it with a fake
device and a fake clock (tests/unit/core/test_timing.py).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from grader.core.errors import InfrastructureError, SubmissionError

K_IN = 2  # input variants that take turns
K_OUT = 3  # output copies that take turns (coprime with K_IN)
BANDWIDTH_SLACK = 1.10  # a launch may beat the datasheet bandwidth by 10% (boost clocks), no more


@dataclass(frozen=True)
class Policy:
    """How long and how precisely to measure. `spread` is the relative half-width of a median's
    95% interval that ends the sampling; `max_rounds` and `max_s` cap it."""

    sample_s: float = 0.02  # one sample lasts about this long: it swamps the request's round trip
    warmup: int = 2  # samples per target thrown away (compilation, first touch, clocks ramping)
    min_rounds: int = 5
    max_rounds: int = 25
    max_s: float = 30.0  # the whole measurement of one test, all its targets, re-measure included
    spread: float = 0.02
    max_launches: int = 100_000  # per sample
    # at least once round the output copies and back to the first, from the other input: a
    # kernel that reuses what an earlier launch left is caught however long its launches are
    min_launches: int = K_OUT + 1


class Target(Protocol):
    """One thing to time (see the module docstring)."""

    label: str
    min_bytes: int  # bytes one launch must move at least (0: no bound)

    def prepare(self) -> None: ...

    def run(self, launches: int) -> float: ...

    def check(self, launches: int) -> None: ...


class WrongOutput(SubmissionError):
    """A timed launch wrote a wrong result or changed an input: the student's failure (the
    message is feedback), never a time."""


class ImpossibleTime(InfrastructureError):
    """A sample was faster than the device's bandwidth allows: the grader refuses to grade."""


@dataclass(frozen=True)
class Stats:
    """Median and its distribution-free 95% interval (order statistics) of n values."""

    median: float
    low: float
    high: float
    n: int

    @property
    def spread(self) -> float:
        """Relative half-width of the interval."""
        return (self.high - self.low) / (2 * self.median) if self.median > 0 else math.inf


def median_interval(values: Sequence[float]) -> Stats:
    """The median and the interval [x_(k), x_(n+1-k)] that holds it with >= 95% confidence,
    k the largest rank with P(Binomial(n, 1/2) < k) <= 2.5%; under 6 values, the range."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("no values")
    k, tail = 0, 0.0
    while True:
        tail += math.comb(n, k) / 2**n
        if tail > 0.025:
            break
        k += 1
    k = max(k, 1)
    return Stats(statistics.median(xs), xs[k - 1], xs[n - k], n)


@dataclass
class Series:
    """One target's samples: seconds per launch, one per round (warm-up excluded)."""

    label: str
    launches: int
    seconds: list[float] = field(default_factory=list)

    def stats(self) -> Stats:
        return median_interval(self.seconds)

    def record(self) -> dict:
        s = self.stats()
        return {
            "label": self.label,
            "launches_per_sample": self.launches,
            "samples": len(self.seconds),
            "median_ms": round(s.median * 1e3, 6),
            "low_ms": round(s.low * 1e3, 6),
            "high_ms": round(s.high * 1e3, 6),
            "spread": round(s.spread, 4),
        }


@dataclass(frozen=True)
class Check:
    """A verdict on `numerator / denominator` (medians of per-round ratios): it passes when the
    ratio is below `threshold` (`below=True`) or above it."""

    name: str
    numerator: str
    denominator: str
    threshold: float
    below: bool = True


@dataclass(frozen=True)
class Verdict:
    check: Check
    ratio: Stats
    passed: bool
    remeasured: bool
    by_median: bool  # the interval still straddled the threshold: decided by the median

    @property
    def margin(self) -> float:
        """How far the median is from the threshold, as a factor (> 1 on the passing side)."""
        m, t = self.ratio.median, self.check.threshold
        return t / m if self.check.below else m / t

    def record(self) -> dict:
        c = self.check
        return {
            "check": c.name,
            "ratio": f"{c.numerator} / {c.denominator}",
            "threshold": c.threshold,
            "passes_if": "below" if c.below else "above",
            "median": round(self.ratio.median, 6),
            "low": round(self.ratio.low, 6),
            "high": round(self.ratio.high, 6),
            "margin": round(self.margin, 4),
            "passed": self.passed,
            "remeasured": self.remeasured,
            "decided_by_median": self.by_median,
        }


@dataclass
class Judgement:
    series: dict[str, Series]
    verdicts: list[Verdict]
    rounds: int
    elapsed_s: float
    device: dict = field(default_factory=dict)  # what the caller knows: name, bandwidth, clocks

    def record(self) -> dict:
        return {
            "targets": [s.record() for s in self.series.values()],
            "verdicts": [v.record() for v in self.verdicts],
            "rounds": self.rounds,
            "elapsed_s": round(self.elapsed_s, 3),
            "device": self.device,
        }


def variant(sample: int, launch: int) -> int:
    """The input variant launch `launch` of sample `sample` reads."""
    return (sample + launch) % K_IN


def copy(launch: int) -> int:
    """The output copy launch `launch` writes."""
    return launch % K_OUT


def last_writes(sample: int, launches: int) -> list[int | None]:
    """For each output copy, the input variant of the last launch that wrote it in a sample of
    `launches` launches (None: no launch wrote it, it must still be NaN)."""
    out: list[int | None] = [None] * K_OUT
    for j in range(launches):
        out[copy(j)] = variant(sample, j)
    return out


@dataclass(frozen=True)
class Device:
    """What bounds a time from below: the device's peak bandwidth in bytes/s (None: unknown,
    no bound), with its name for the refusal's message."""

    name: str
    peak_bytes_s: float | None


def _impossible(target: Target, per_launch_s: float, device: Device) -> ImpossibleTime | None:
    if not device.peak_bytes_s or not target.min_bytes or per_launch_s <= 0:
        return (
            None
            if per_launch_s > 0
            else ImpossibleTime(
                "a timing the grader cannot trust", f"{target.label}: a sample of {per_launch_s} s"
            )
        )
    fastest = target.min_bytes / (device.peak_bytes_s * BANDWIDTH_SLACK)
    if per_launch_s >= fastest:
        return None
    return ImpossibleTime(
        "a timing the grader cannot trust: faster than the GPU's memory allows",
        f"{target.label} took {per_launch_s * 1e3:.4f} ms per launch, but moving its "
        f"{target.min_bytes:,} bytes takes at least {fastest * 1e3:.4f} ms at "
        f"{device.peak_bytes_s / 1e9:.4g} GB/s x {BANDWIDTH_SLACK} on {device.name}. Either the "
        "clock or the output checks failed; nothing was graded. Staff: rerun `make gpu-check`.",
    )


def _sample(target: Target, launches: int, device: Device) -> float:
    target.prepare()
    seconds = target.run(launches)
    target.check(launches)
    per_launch = seconds / launches
    refusal = _impossible(target, per_launch, device)
    if refusal is not None:
        raise refusal
    return per_launch


def calibrate(target: Target, policy: Policy, device: Device) -> int:
    """Warm the target up and size its sample: launches that last about `policy.sample_s`."""
    per = 0.0
    for _ in range(max(1, policy.warmup)):
        per = _sample(target, 1, device)
    wanted = math.ceil(policy.sample_s / per)
    return max(1, policy.min_launches, min(policy.max_launches, wanted))


def measure(
    targets: Sequence[Target],
    policy: Policy,
    device: Device,
    clock: Callable[[], float] = time.monotonic,
    series: dict[str, Series] | None = None,
    deadline: float | None = None,
) -> dict[str, Series]:
    """Rounds of one sample per target, in turn, until every median is known to
    `policy.spread` (after `policy.min_rounds`), `policy.max_rounds` or the deadline; with
    `series`, more rounds appended to those (a re-measure)."""
    start = clock()
    deadline = start + policy.max_s if deadline is None else deadline
    if series is None:
        series = {t.label: Series(t.label, calibrate(t, policy, device)) for t in targets}
    rounds = 0
    while True:
        for t in targets:
            s = series[t.label]
            s.seconds.append(_sample(t, s.launches, device))
        rounds += 1
        if rounds >= policy.max_rounds or clock() >= deadline:
            return series
        if rounds >= policy.min_rounds and all(
            s.stats().spread <= policy.spread for s in series.values()
        ):
            return series


def ratio(series: dict[str, Series], check: Check) -> Stats:
    """The per-round ratios of a check's two series, as a median and its interval."""
    a, b = series[check.numerator].seconds, series[check.denominator].seconds
    return median_interval([x / y for x, y in zip(a, b, strict=True)])


def _decided(stats: Stats, check: Check) -> bool | None:
    """True/False when the interval lies wholly on the passing/failing side, else None."""
    lo, hi, t = stats.low, stats.high, check.threshold
    if check.below:
        return True if hi < t else False if lo >= t else None
    return True if lo > t else False if hi <= t else None


def judge(
    targets: Sequence[Target],
    checks: Sequence[Check],
    policy: Policy = Policy(),
    device: Device = Device("unknown device", None),
    clock: Callable[[], float] = time.monotonic,
) -> Judgement:
    """Measure the targets, then decide every check: once more when one straddles, then by the
    median (marked)."""
    start = clock()
    deadline = start + policy.max_s
    # The first measurement may use 2/3 of the time, so a re-measure has room.
    series = measure(targets, policy, device, clock, deadline=start + policy.max_s * 2 / 3)
    undecided = [c for c in checks if _decided(ratio(series, c), c) is None]
    remeasured = bool(undecided)
    if remeasured:
        series = measure(targets, policy, device, clock, series=series, deadline=deadline)
    verdicts = []
    for c in checks:
        stats = ratio(series, c)
        decided = _decided(stats, c)
        by_median = decided is None
        if by_median:
            decided = stats.median < c.threshold if c.below else stats.median > c.threshold
        verdicts.append(Verdict(c, stats, bool(decided), remeasured and c in undecided, by_median))
    rounds = min(len(s.seconds) for s in series.values())
    return Judgement(series, verdicts, rounds, clock() - start, {"name": device.name})


def describe(v: Verdict) -> str:
    """One sentence for the feedback: the measured ratio, its interval, the threshold and how it
    was decided."""
    c = v.check
    how = (
        " It was within the measurement's spread of the threshold, measured again and decided by "
        "the median."
        if v.by_median
        else " Measured twice: it was close to the threshold the first time."
        if v.remeasured
        else ""
    )
    return (
        f"{c.numerator} / {c.denominator} = {v.ratio.median:.3f} (95% interval "
        f"{v.ratio.low:.3f}-{v.ratio.high:.3f}, {v.ratio.n} paired samples); needs "
        f"{'<' if c.below else '>'} {c.threshold:g}.{how}"
    )
