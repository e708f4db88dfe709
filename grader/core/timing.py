"""The one timing routine of every GPU test and of the bench: each launch timed on the GPU,
paired rounds, and a stopping rule on the ratio that decides, so a verdict repeats on a regrade.

A *target* is one thing to time (a student's kernel in its worker, the grader's baseline kernel
in the same kind of worker): `prepare()` readies a sample without being timed (outputs filled
with NaN), `run(n)` makes `n` launches and returns a `Sample`: each launch's GPU time (CUDA
events recorded around it by the grader's harness, every launch queued behind a hold kernel so
that no event waits on the host's launch path), the trusted process's wall clock around the one
request, and the host's launch cost (reported beside the kernel time, never inside it).
`check()` proves what the sample's launches wrote (a `WrongOutput` otherwise).

`measure` warms every target up, sizes its sample (`Policy.sample_s` of GPU time), then takes
rounds: one sample of each target, in turn, so that a ratio's two times come from the same
moment of the machine (drift common to both cancels in the ratio). A round is discarded when the
`Watch` says the GPU throttled or changed clocks during it, or a sample's launches were not all
queued ahead. Rounds continue until every check's ratio interval (the per-round ratios' median
and the order-statistic interval around it, `median_interval`, at `Policy.coverage` of exact
binomial coverage, widened for the rounds' own autocorrelation) lies wholly on one side of its
threshold, or is within `Policy.spread` of its median, or a cap on rounds or seconds is hit.

`judge` turns ratios into verdicts: an interval wholly on one side decides; one that straddles
its threshold is measured once more (rounds pooled) and, still undecided, decided by the median
and marked so (`Verdict.by_median`). Two times the grader cannot trust are its refusal
(`ImpossibleTime`, an `InfrastructureError`, exit 3), never a student's lost point: a launch
faster than the device's bandwidth allows for the bytes it must move (less what a warm L2 may
hold when the L2 was not flushed before it), and event times that add up to more than the
trusted wall clock saw around their request.

Inputs and outputs of the timed launches rotate (`variant`, `copy`): launch j of sample s reads
input variant (s + j) % K_IN and writes output copy j % K_OUT, every copy NaN-filled before the
sample. With K_IN = 2 and K_OUT = 3, a copy is never written twice in a row from the same input,
so a kernel that reuses what an earlier launch left in its output computes a wrong result, and
one whose time depends on seeing the same input again never sees it. `last_writes` says which
variant each copy must hold after a sample.

Pure: no numba, no CUDA; the clock, the watch and the targets are given, so the tests drive it
with a fake device and a fake clock (tests/unit/core/test_timing.py).
"""

from __future__ import annotations

import dataclasses
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
WALL_SLACK_S = 1e-6  # events and the wall clock tick differently: 1 us of rounding, no more
MAX_RHO = 0.9  # the autocorrelation a run's rounds may be credited with, at most


@dataclass(frozen=True)
class Policy:
    """How long and how precisely to measure. `coverage`: the interval's exact coverage, at
    least; `spread`: an interval this narrow (relative half-width) ends the sampling even when
    it straddles a threshold; `max_rounds`, `max_s`: caps; `max_discarded`: rounds thrown away
    (throttling, a clock change) before the grader refuses."""

    sample_s: float = 0.005  # GPU time of one sample's launches (events: no round trip to swamp)
    warmup: int = 2  # samples per target thrown away (compilation, first touch, clocks ramping)
    min_rounds: int = 6  # the fewest whose range covers the median at >= 95% (96.9%)
    max_rounds: int = 30
    max_s: float = 30.0  # the whole measurement of one test, all its targets, re-measure included
    spread: float = 0.02
    coverage: float = 0.95
    max_discarded: int = 10
    # launches per sample, all queued behind one hold kernel: well inside CUDA's queue of about
    # a thousand pending commands (a launch, two events and a flush each)
    max_launches: int = 200
    # at least once round the output copies and back to the first, from the other input: a
    # kernel that reuses what an earlier launch left is caught however long its launches are
    min_launches: int = K_OUT + 1


@dataclass(frozen=True)
class Sample:
    """One timed request: each launch's GPU seconds (`gpu_s`, events), the trusted clock's
    seconds around the request (`wall_s`), the host's launch cost per launch (`launch_s`, the
    median; None where not measured), whether every launch was queued before the first ran
    (`queued`: False discards the round), and the bytes a launch may have found in a warm L2
    (`warm_l2_bytes`: 0 when the L2 was flushed before every launch)."""

    gpu_s: Sequence[float]
    wall_s: float
    launch_s: float | None = None
    queued: bool = True
    warm_l2_bytes: int = 0

    @property
    def per_launch(self) -> float:
        """The sample's statistic: the median launch (robust to one preempted launch)."""
        return statistics.median(self.gpu_s)


class Target(Protocol):
    """One thing to time (see the module docstring)."""

    label: str
    min_bytes: int  # bytes one launch must move at least (0: no bound)

    def prepare(self) -> None: ...

    def run(self, launches: int) -> Sample: ...

    def check(self, launches: int) -> None: ...


class Watch(Protocol):
    """The GPU's state around a round: `start()` before it, `spoiled()` after it says why the
    round must be discarded (a throttle reason, a clock change), or None."""

    def start(self) -> None: ...

    def spoiled(self) -> str | None: ...


class NoWatch:
    """No NVML: nothing discards a round (the readings before and after are still recorded)."""

    def start(self) -> None:
        return None

    def spoiled(self) -> str | None:
        return None


class WrongOutput(SubmissionError):
    """A timed launch wrote a wrong result or changed an input: the student's failure (the
    message is feedback), never a time."""


class ImpossibleTime(InfrastructureError):
    """A time the grader cannot trust: the grader refuses to grade."""


# ------------------------------------------------------------------------------ the statistics


def binomial_coverage(n: int, k: int) -> float:
    """The exact coverage of [x_(k), x_(n+1-k)] for the median of n independent values:
    1 - 2 P(Binomial(n, 1/2) < k)."""
    return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n


def _rank(n: int, coverage: float) -> int:
    """The largest k >= 1 whose interval covers at `coverage` (1 where none does: n < 6)."""
    k = 1
    while k + 1 <= (n + 1) // 2 and binomial_coverage(n, k + 1) >= coverage:
        k += 1
    return k


def autocorrelation(values: Sequence[float]) -> float:
    """Lag-1 autocorrelation of the logarithms, in the order taken, credited at 0 to MAX_RHO
    (under 8 values: 0, too few to tell), plus 1/n for the estimate's known downward bias."""
    n = len(values)
    if n < 8 or min(values) <= 0:
        return 0.0
    ys = [math.log(v) for v in values]
    mean = sum(ys) / n
    d = [y - mean for y in ys]
    var = sum(x * x for x in d)
    if var == 0:
        return 0.0
    r = sum(a * b for a, b in zip(d, d[1:], strict=False)) / var + 1 / n
    return min(MAX_RHO, max(0.0, r))


@dataclass(frozen=True)
class Stats:
    """Median and an order-statistic interval of n values, with the interval's `coverage` (exact
    binomial, at the `effective` number of independent values) and the autocorrelation `rho`
    that made `effective` smaller than n."""

    median: float
    low: float
    high: float
    n: int
    coverage: float = 0.0
    effective: float = 0.0
    rho: float = 0.0

    @property
    def spread(self) -> float:
        """Relative half-width of the interval."""
        return (self.high - self.low) / (2 * self.median) if self.median > 0 else math.inf


def median_interval(
    values: Sequence[float], coverage: float = 0.95, rho: float | None = None
) -> Stats:
    """The median of `values` (in the order taken) and the interval [x_(k), x_(n+1-k)] that
    holds it with at least `coverage`: k from the exact binomial coverage of m = n (1 - rho) /
    (1 + rho) effective values (rho: `autocorrelation` unless given), scaled back to ranks of
    all n. Under 6 effective values the interval is the range, and its coverage says how much
    less it gives."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("no values")
    rho = autocorrelation(values) if rho is None else rho
    m = n * (1 - rho) / (1 + rho)
    whole = max(1, math.floor(m))
    k_m = _rank(whole, coverage)
    k = min(max(1, 1 + math.floor((k_m - 1) * n / whole)), (n + 1) // 2)
    return Stats(
        statistics.median(xs),
        xs[k - 1],
        xs[n - k],
        n,
        round(binomial_coverage(whole, k_m), 4),
        round(m, 2),
        round(rho, 3),
    )


@dataclass
class Series:
    """One target's rounds: the median launch's GPU seconds of each kept round (warm-up and
    discarded rounds excluded), the host's launch cost and the trusted wall clock per launch
    beside them, and why rounds were discarded."""

    label: str
    launches: int
    seconds: list[float] = field(default_factory=list)
    launch_s: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)  # per launch: the request's wall / launches
    discarded: list[str] = field(default_factory=list)

    def stats(self, coverage: float = 0.95) -> Stats:
        return median_interval(self.seconds, coverage)

    def add(self, sample: Sample) -> None:
        self.seconds.append(sample.per_launch)
        self.wall_s.append(sample.wall_s / max(1, len(sample.gpu_s)))
        if sample.launch_s is not None:
            self.launch_s.append(sample.launch_s)

    def record(self) -> dict:
        s = self.stats()
        launch = statistics.median(self.launch_s) if self.launch_s else None
        return {
            "label": self.label,
            "launches_per_sample": self.launches,
            "samples": len(self.seconds),
            "median_ms": round(s.median * 1e3, 6),
            "low_ms": round(s.low * 1e3, 6),
            "high_ms": round(s.high * 1e3, 6),
            "spread": round(s.spread, 4),
            "launch_us": None if launch is None else round(launch * 1e6, 2),
            "wall_per_launch_ms": round(statistics.median(self.wall_s) * 1e3, 6),
            "discarded": len(self.discarded),
        }


@dataclass(frozen=True)
class Check:
    """A verdict on `numerator / denominator` (the median of per-round ratios): it passes when
    the ratio is below `threshold` (`below=True`) or above it."""

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
            "coverage": self.ratio.coverage,
            "effective_rounds": self.ratio.effective,
            "rho": self.ratio.rho,
            "margin": round(self.margin, 4),
            "passed": self.passed,
            "remeasured": self.remeasured,
            "decided_by_median": self.by_median,
        }


@dataclass
class Judgement:
    series: dict[str, Series]
    verdicts: list[Verdict]
    rounds: int  # kept rounds
    elapsed_s: float
    device: dict = field(default_factory=dict)  # what the caller knows: name, bandwidth, clocks

    def record(self) -> dict:
        first = next(iter(self.series.values()), None)
        return {
            "targets": [s.record() for s in self.series.values()],
            "verdicts": [v.record() for v in self.verdicts],
            "rounds": self.rounds,
            "discarded_rounds": len(first.discarded) if first else 0,
            "discarded_why": sorted(set(first.discarded)) if first else [],
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


# ------------------------------------------------------------------------------ the refusals


def _untrusted(target: Target, sample: Sample, launches: int) -> ImpossibleTime | None:
    """Event times the trusted clock contradicts: not one per launch, not positive, or adding
    up to more than the wall time of their own request."""
    gpu = list(sample.gpu_s)
    if len(gpu) != launches or any(not (t > 0 and math.isfinite(t)) for t in gpu):
        return ImpossibleTime(
            "a timing the grader cannot trust",
            f"{target.label}: {len(gpu)} launch times for {launches} launches, smallest "
            f"{min(gpu, default=0.0)} s. Staff: rerun `make gpu-check`.",
        )
    if sum(gpu) <= sample.wall_s + WALL_SLACK_S:
        return None
    return ImpossibleTime(
        "a timing the grader cannot trust: the GPU's times exceed the trusted clock's",
        f"{target.label}: {launches} launches timed {sum(gpu) * 1e3:.4f} ms on the GPU's events "
        f"inside a request the trusted clock saw take {sample.wall_s * 1e3:.4f} ms. Nothing was "
        "graded. Staff: rerun `make gpu-check`.",
    )


def _impossible(target: Target, sample: Sample, device: Device) -> ImpossibleTime | None:
    """A launch faster than the device's bandwidth allows for the bytes it must move from
    memory: `min_bytes`, less what a warm L2 may have held (`Sample.warm_l2_bytes`)."""
    must = max(0, target.min_bytes - sample.warm_l2_bytes)
    fastest_launch = min(sample.gpu_s)
    if not device.peak_bytes_s or not must:
        return None
    fastest = must / (device.peak_bytes_s * BANDWIDTH_SLACK)
    if fastest_launch >= fastest:
        return None
    return ImpossibleTime(
        "a timing the grader cannot trust: faster than the GPU's memory allows",
        f"{target.label} took {fastest_launch * 1e3:.4f} ms in one launch, but moving its "
        f"{must:,} bytes takes at least {fastest * 1e3:.4f} ms at "
        f"{device.peak_bytes_s / 1e9:.4g} GB/s x {BANDWIDTH_SLACK} on {device.name}. Either the "
        "clock or the output checks failed; nothing was graded. Staff: rerun `make gpu-check`.",
    )


def _sample(target: Target, launches: int, device: Device) -> Sample:
    target.prepare()
    sample = target.run(launches)
    target.check(launches)
    refusal = _untrusted(target, sample, launches) or _impossible(target, sample, device)
    if refusal is not None:
        raise refusal
    return sample


# ------------------------------------------------------------------------------ the rounds


def calibrate(target: Target, policy: Policy, device: Device) -> int:
    """Warm the target up and size its sample: launches whose GPU time is about
    `policy.sample_s`, within [min_launches, max_launches]."""
    per = 0.0
    for _ in range(max(1, policy.warmup)):
        per = _sample(target, policy.min_launches, device).per_launch
    wanted = math.ceil(policy.sample_s / per)
    return max(1, policy.min_launches, min(policy.max_launches, wanted))


def _settled(series: dict[str, Series], checks: Sequence[Check], policy: Policy) -> bool:
    """Every check's interval reaches `policy.coverage` (enough effective rounds) and decides it
    or is within `policy.spread`; without checks, every series' own interval is that narrow."""
    if not checks:
        return all(
            (st := s.stats(policy.coverage)).spread <= policy.spread
            and st.coverage >= policy.coverage
            for s in series.values()
        )
    for c in checks:
        stats = ratio(series, c, policy.coverage)
        if stats.coverage < policy.coverage:
            return False
        if _decided(stats, c) is None and stats.spread > policy.spread:
            return False
    return True


def _round(
    targets: Sequence[Target], series: dict[str, Series], device: Device, watch: Watch
) -> str | None:
    """One sample of each target, in turn: kept, or why the round was discarded."""
    watch.start()
    got = {t.label: _sample(t, series[t.label].launches, device) for t in targets}
    late = [label for label, s in got.items() if not s.queued]
    why = watch.spoiled() or (f"{late[0]}'s launches were not all queued ahead" if late else None)
    if why is None:
        for label, sample in got.items():
            series[label].add(sample)
    else:
        for kept in series.values():
            kept.discarded.append(why)
    return why


def measure(
    targets: Sequence[Target],
    policy: Policy,
    device: Device,
    clock: Callable[[], float] = time.monotonic,
    series: dict[str, Series] | None = None,
    deadline: float | None = None,
    checks: Sequence[Check] = (),
    watch: Watch | None = None,
) -> dict[str, Series]:
    """Paired rounds until every check is settled (`_settled`, after `policy.min_rounds` kept
    rounds), `policy.max_rounds` more kept rounds or the deadline; with `series`, more rounds
    appended to those (a re-measure). Too many discarded rounds are the grader's refusal."""
    start = clock()
    deadline = start + policy.max_s if deadline is None else deadline
    watch = watch or NoWatch()
    if series is None:
        series = {t.label: Series(t.label, calibrate(t, policy, device)) for t in targets}
    kept = 0
    while True:
        if _round(targets, series, device, watch) is None:
            kept += 1
        first = next(iter(series.values()))
        if len(first.discarded) > policy.max_discarded:
            raise InfrastructureError(
                "the GPU would not hold its clocks: nothing was graded",
                f"{len(first.discarded)} timing rounds discarded ({sorted(set(first.discarded))})."
                " Staff: check the GPU's cooling and power (nvidia-smi -q -d PERFORMANCE).",
            )
        total = len(first.seconds)
        if kept >= policy.max_rounds or (clock() >= deadline and total):
            return series
        if total >= policy.min_rounds and _settled(series, checks, policy):
            return series


def ratio(series: dict[str, Series], check: Check, coverage: float = 0.95) -> Stats:
    """The per-round ratios of a check's two series, as a median and its interval."""
    a, b = series[check.numerator].seconds, series[check.denominator].seconds
    return median_interval([x / y for x, y in zip(a, b, strict=True)], coverage)


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
    watch: Watch | None = None,
) -> Judgement:
    """Measure the targets until the checks settle, then decide every check: once more when
    one straddles, then by the median (marked)."""
    start = clock()
    deadline = start + policy.max_s
    # The first measurement may use 2/3 of the time, so a re-measure has room.
    first_deadline = start + policy.max_s * 2 / 3
    series = measure(targets, policy, device, clock, None, first_deadline, checks, watch)
    undecided = [c for c in checks if _decided(ratio(series, c, policy.coverage), c) is None]
    if undecided:  # measured again until decided (not merely narrow), rounds pooled
        again = dataclasses.replace(policy, spread=0.0)
        series = measure(targets, again, device, clock, series, deadline, undecided, watch)
    verdicts = []
    for c in checks:
        stats = ratio(series, c, policy.coverage)
        decided = _decided(stats, c)
        by_median = decided is None
        if by_median:
            decided = stats.median < c.threshold if c.below else stats.median > c.threshold
        verdicts.append(Verdict(c, stats, bool(decided), c in undecided, by_median))
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
        f"{c.numerator} / {c.denominator} = {v.ratio.median:.3f} ({v.ratio.coverage:.1%} "
        f"interval {v.ratio.low:.3f}-{v.ratio.high:.3f}, {v.ratio.n} paired rounds); needs "
        f"{'<' if c.below else '>'} {c.threshold:g}.{how}"
    )
