"""grader.core.timing with a fake clock and a fake device: sampling stops on its spread target,
a verdict near its threshold is measured again and then decided by the median, an impossible
time is the grader's refusal, a sample with a wrong output fails the kernel, and five regrades
of the same kernels with noise injected give the same verdicts.

The fake device runs "kernels" on numpy arrays with the routine's own rotation (two input
variants, three NaN-filled output copies) and charges the fake clock a time per launch from a
cost model, so the red-team kernels of issue 43 show here without a GPU: one that writes part of
its output at full size, one that reuses its previous output, one that writes NaN, one that is
fast when it sees the same input again.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from grader.core import timing
from grader.core.errors import InfrastructureError
from grader.core.timing import Check, Device, Policy
from grader.suites.timing import Outputs

# A small fake GPU keeps the arrays small and a launch near 1 ms (n = 4096 float32 values)
MB = 1e6
DEVICE = Device("fake GPU (100 MB/s)", 100 * MB)


class Clock:
    """The trusted clock, advanced only by the fake device."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Machine:
    """The fake GPU's state: a drift factor that follows an AR(1) in log space (rho, sd), one
    step per sample, shared by every kernel on it (a clock or temperature change slows both)."""

    def __init__(self, rho=0.0, sd=0.0, seed=0):
        self.rho, self.sd, self.state = rho, sd, 0.0
        self.rng = np.random.default_rng(seed)

    def step(self) -> float:
        innovation = self.sd * math.sqrt(1 - self.rho**2)
        self.state = self.rho * self.state + self.rng.normal(0, innovation) if self.sd else 0.0
        return math.exp(self.state)


class FakeKernel:
    """A timing target on a fake device: `body(src, dst)` computes into `dst` (a numpy array
    that holds what the previous launch into that copy left, NaN after `prepare`) and returns
    the bytes it moved; the launch's GPU time is bytes / bandwidth, times noise and the machine's
    drift. The host's launch cost (`launch_s`) is the fake harness's: every launch is queued
    behind a hold that adapts to it, as `grader.sandbox.harness` does, so the events never see
    it; the trusted wall clock sees hold, launches and all."""

    def __init__(
        self,
        label,
        body,
        clock,
        *,
        n=4096,
        bandwidth=32.768 * MB,
        noise=0.0,
        seed=0,
        launch_s=5e-6,
        machine=None,
        warm_l2_bytes=0,
    ):
        self.label, self.body, self.clock = label, body, clock
        self.bandwidth, self.noise, self.launch_s = bandwidth, noise, launch_s
        self.machine, self.warm_l2_bytes = machine or Machine(), warm_l2_bytes
        self.hold = 1e-3
        self.rng = np.random.default_rng(seed)
        gen = np.random.default_rng(123)
        self.inputs = [gen.standard_normal(n).astype(np.float32) for _ in range(timing.K_IN)]
        self.copies = [np.zeros(n, np.float32) for _ in range(timing.K_OUT)]
        self.min_bytes = 8 * n
        self.sample = -1
        self.outputs = Outputs(
            label, [[x, None] for x in self.inputs], {1: [x * 2 for x in self.inputs]}
        )

    def prepare(self) -> None:
        self.sample += 1
        for c in self.copies:
            c[:] = np.nan

    def run(self, launches: int) -> timing.Sample:
        t0, drift, gpu = self.clock(), self.machine.step(), []
        for j in range(launches):
            src = self.inputs[timing.variant(self.sample, j)]
            moved = self.body(src, self.copies[timing.copy(j)])
            jitter = math.exp(self.rng.normal(0, self.noise)) if self.noise else 1.0
            if self.noise and self.rng.random() < 0.05:  # an outlier now and then
                jitter *= 3
            gpu.append(moved / self.bandwidth * jitter * drift)
        enqueue = launches * self.launch_s
        queued = enqueue <= self.hold
        self.clock.now += max(self.hold, enqueue) + sum(gpu)
        self.hold = max(1e-4, 1.5 * enqueue)
        return timing.Sample(gpu, self.clock() - t0, self.launch_s, queued, self.warm_l2_bytes)

    def check(self, launches: int) -> None:
        got = {"outputs": {"1": {str(k): c.copy() for k, c in enumerate(self.copies)}}}
        self.outputs.check(got, self.sample, launches, {"1": np.arange(self.copies[0].size)})


def honest(src, dst):
    dst[:] = src * 2
    return 2 * src.nbytes


def slow(src, dst):  # the same result, twice the traffic
    dst[:] = src * 2
    return 4 * src.nbytes


def partial_when_large(src, dst):
    """Writes only 99% of a large output (every element of a small one)."""
    n = src.size if src.size < 1 << 12 else src.size * 99 // 100
    dst[:n] = src[:n] * 2
    return 2 * n * 4


def reuses_previous_output(src, dst):
    """Skips the work when the output already holds a result (an earlier launch's)."""
    if not np.isnan(dst[0]):
        return 8
    dst[:] = src * 2
    return 2 * src.nbytes


def writes_nan(src, dst):
    dst[:] = np.nan
    return dst.nbytes


class SameInputFast:
    """Correct every time, but 100x faster when its output already holds this input's result
    (what a kernel could do by probing its output): slow as `slow` otherwise."""

    def __call__(self, src, dst):
        if dst[0] == src[0] * 2 and dst[-1] == src[-1] * 2:
            return 4 * src.nbytes / 100
        dst[:] = src * 2
        return 4 * src.nbytes


def _judge(subject, baseline, threshold, policy=None, clock=None):
    check = Check("subject vs baseline", subject.label, baseline.label, threshold)
    clock = clock or subject.clock
    return timing.judge([baseline, subject], [check], policy or Policy(), DEVICE, clock)


def test_median_interval_is_the_order_statistics_one():
    shuffled = [7, 2, 9, 4, 1, 10, 5, 3, 8, 6]  # no autocorrelation to speak of
    s = timing.median_interval(shuffled)  # n = 10: ranks 2 and 9 (97.9%)
    assert (s.median, s.low, s.high, s.n) == (5.5, 2, 9, 10)
    assert s.coverage == round(timing.binomial_coverage(10, 2), 4) == 0.9785 and s.rho == 0
    few = timing.median_interval([3.0, 1.0, 2.0])
    assert (few.low, few.high) == (1.0, 3.0) and few.coverage == 0.75  # the range of 3: 75%
    # five rounds never give 95%; six do (the range: 96.9%), the policy's minimum
    assert timing.binomial_coverage(5, 1) == 0.9375 and timing.binomial_coverage(6, 1) > 0.95
    assert Policy().min_rounds == 6
    # a trend (rounds that drift) is credited with its autocorrelation: a wider interval
    trend = timing.median_interval(list(range(1, 11)))
    assert trend.rho > 0.5 and (trend.low, trend.high) == (1, 10) and trend.effective < 10
    assert timing.median_interval([2.0] * 7).spread == 0
    with pytest.raises(ValueError):
        timing.median_interval([])


def test_sampling_stops_on_the_spread_target():
    clock = Clock()
    quiet = FakeKernel("quiet", honest, clock)
    series = timing.measure([quiet], Policy(), DEVICE, clock)
    assert len(series["quiet"].seconds) == Policy().min_rounds  # no noise: spread 0 at once
    # a sample is sample_s of GPU time: 1 ms launches, 5 of them; the host's launch cost
    # (5 us) is not in the kernel's time, it is reported beside it
    assert series["quiet"].launches == math.ceil(Policy().sample_s / 1e-3) == 5
    record = series["quiet"].record()
    assert record["median_ms"] == pytest.approx(1.0) and record["launch_us"] == 5.0
    noisy_clock = Clock()
    noisy = FakeKernel("noisy", honest, noisy_clock, noise=0.2)
    policy = Policy(max_rounds=12)
    got = timing.measure([noisy], policy, DEVICE, noisy_clock)["noisy"]
    assert len(got.seconds) == 12 and got.stats().spread > policy.spread  # capped, not stopped


def test_sampling_stops_at_the_time_cap():
    clock = Clock()
    noisy = FakeKernel("noisy", honest, clock, noise=0.3)
    got = timing.measure([noisy], Policy(max_rounds=10_000, max_s=1.0), DEVICE, clock)["noisy"]
    assert clock.now <= 1.0 + 2 * Policy().sample_s and len(got.seconds) < 10_000


def test_a_clear_verdict_is_decided_by_its_interval_once():
    clock = Clock()
    fast, base = FakeKernel("fast", honest, clock), FakeKernel("base", slow, clock)
    (v,) = _judge(fast, base, 0.8).verdicts
    assert v.passed and not v.remeasured and not v.by_median
    assert v.ratio.median == pytest.approx(0.5, rel=0.01) and v.margin == pytest.approx(1.6, 0.02)
    (v,) = _judge(fast, base, 0.4, clock=clock).verdicts
    assert not v.passed and not v.by_median


def test_a_straddling_verdict_is_measured_again_then_decided_by_the_median():
    clock = Clock()
    a = FakeKernel("a", honest, clock, noise=0.15, seed=1)
    b = FakeKernel("b", honest, clock, noise=0.15, seed=2)
    judged = _judge(a, b, 1.0)
    (v,) = judged.verdicts
    assert v.remeasured and v.by_median
    assert v.ratio.low < 1.0 < v.ratio.high
    assert v.passed == (v.ratio.median < 1.0)
    assert len(judged.series["a"].seconds) > Policy().max_rounds  # the re-measure's rounds pooled
    assert "decided by the median" in timing.describe(v)


def test_an_impossible_time_is_the_graders_refusal():
    clock = Clock()
    too_fast = FakeKernel("too fast", honest, clock, bandwidth=500 * MB)  # the device: 100
    base = FakeKernel("base", honest, clock)
    with pytest.raises(timing.ImpossibleTime, match="faster than the GPU's memory allows") as exc:
        _judge(too_fast, base, 2.0)
    assert isinstance(exc.value, InfrastructureError)
    assert "too fast" in str(exc.value) and "fake GPU" in str(exc.value)
    # an unknown peak (no NVML, GPU not in course.toml) bounds nothing
    timing.judge([too_fast], [], Policy(), Device("unknown", None), clock)


@pytest.mark.parametrize(
    "body, said",
    [
        (partial_when_large, "never written (still NaN)"),
        (reuses_previous_output, "expected"),  # it holds the other input's result
        (writes_nan, "never written (still NaN)"),
    ],
    ids=["partial-when-large", "reuses-previous-output", "writes-nan"],
)
def test_a_wrong_timed_output_fails_the_kernel(body, said):
    clock = Clock()
    with pytest.raises(timing.WrongOutput, match="Every timed launch must compute") as exc:
        _judge(FakeKernel("cheat", body, clock), FakeKernel("base", honest, clock), 2.0)
    assert said in str(exc.value)
    # the partial kernel is right on small sizes: only the full size shows it
    small = FakeKernel("small", partial_when_large, Clock(), n=1 << 10)
    timing.measure([small], Policy(), DEVICE, small.clock)


def test_a_sample_with_one_wrong_launch_is_caught():
    """Only the 7th launch of a sample is wrong: its copy is checked after the sample."""
    calls = {"n": 0}

    def once_wrong(src, dst):
        calls["n"] += 1
        dst[:] = src * 2
        if calls["n"] == 7:
            dst[5] = 0.0
        return 2 * src.nbytes

    clock = Clock()
    kernel = FakeKernel("once", once_wrong, clock)
    kernel.prepare()
    kernel.run(9)  # launches 0..8: the 7th (index 6) is the last to write copy 0
    with pytest.raises(timing.WrongOutput, match=r"index \(5,\)"):
        kernel.check(9)


def test_rotation_never_writes_a_copy_twice_from_the_same_input():
    for sample in range(4):
        for j in range(timing.K_OUT, 40):
            assert timing.copy(j) == timing.copy(j - timing.K_OUT)
            assert timing.variant(sample, j) != timing.variant(sample, j - timing.K_OUT)
    assert timing.last_writes(0, 1) == [0, None, None]
    assert timing.last_writes(1, 4) == [0, 0, 1]


def test_a_kernel_fast_on_a_repeated_input_gains_nothing():
    """Timed the old way (one input, every launch) it would look 50x faster than `honest`;
    with the rotation it never sees the same input twice in a row, and fails the bar."""
    clock = Clock()
    cheat, base = FakeKernel("cheat", SameInputFast(), clock), FakeKernel("base", honest, clock)
    (v,) = _judge(cheat, base, 1.5).verdicts
    assert not v.passed and v.ratio.median == pytest.approx(2.0, rel=0.12)
    old_way = SameInputFast()
    src, dst = cheat.inputs[0], np.empty_like(cheat.inputs[0])
    bytes_old = sum(old_way(src, dst) for _ in range(10))
    assert bytes_old < 0.25 * 10 * 2 * src.nbytes  # the old timing: under a quarter of honest


def test_five_regrades_with_noise_give_the_same_verdicts():
    """The same submission graded five times on a noisy fake GPU (20% jitter, 5% outliers at
    3x): its kernels are 25% inside one threshold and 30% outside another, and every regrade
    gives the same verdicts, hence the same score."""
    outcomes = []
    for regrade in range(5):
        clock = Clock()
        kernels = {
            "copy": FakeKernel("copy", honest, clock, noise=0.2, seed=10 * regrade + 1),
            "tiled": FakeKernel(
                "tiled",
                honest,
                clock,
                noise=0.2,
                seed=10 * regrade + 2,
                bandwidth=0.6 * 32.768 * MB,
            ),
            "naive": FakeKernel(
                "naive", slow, clock, noise=0.2, seed=10 * regrade + 3, bandwidth=0.7 * 32.768 * MB
            ),
        }
        checks = [
            Check("tiled at least half the copy", "tiled", "copy", 1 / 0.6 * 1.25),
            Check("naive under twice the copy", "naive", "copy", 2.0),
        ]
        judged = timing.judge(list(kernels.values()), checks, Policy(), DEVICE, clock)
        outcomes.append(tuple(v.passed for v in judged.verdicts))
        points = sum(1 for v in judged.verdicts if v.passed)
        assert points == 1
    assert len(set(outcomes)) == 1 and outcomes[0] == (True, False)


def test_a_judgement_records_every_figure():
    clock = Clock()
    judged = _judge(FakeKernel("a", honest, clock), FakeKernel("b", slow, clock), 0.8)
    record = judged.record()
    (target_b, target_a) = record["targets"]
    assert {"median_ms", "low_ms", "high_ms", "spread", "samples", "launches_per_sample"} <= set(
        target_a
    )
    (verdict,) = record["verdicts"]
    assert verdict["threshold"] == 0.8 and verdict["passed"] and verdict["margin"] > 1
    assert record["rounds"] >= Policy().min_rounds and record["device"]["name"] == DEVICE.name


# ---------------------------------------------------------------------------------------------
# Issue 53: each launch on the GPU's clock, the trusted clock as its bound, the stopping rule on
# the ratio that decides, its coverage measured, and regrades that agree.


def test_the_host_launch_cost_is_reported_beside_the_kernel_time_not_inside_it():
    """A 40 us kernel behind a 50 us launch path (vector_add on an H200 from Numba): timed on
    the host's clock around a batch it would read as the launch path; its events read 40 us,
    and the launch cost is reported beside it. The wall clock per launch still bounds both."""
    clock = Clock()
    fast = FakeKernel("fast", honest, clock, bandwidth=32768 / 40e-6, launch_s=50e-6, n=4096)
    series = timing.measure([fast], Policy(), Device("fake H200", None), clock)["fast"]
    record = series.record()
    assert record["median_ms"] == pytest.approx(0.040) and record["launch_us"] == 50.0
    assert record["wall_per_launch_ms"] > 0.050  # what the old host-clock sample measured


def test_event_times_beyond_the_trusted_wall_clock_are_the_graders_refusal():
    class Liar(FakeKernel):
        def run(self, launches):
            honest_sample = super().run(launches)
            return timing.Sample(honest_sample.gpu_s, sum(honest_sample.gpu_s) / 2, 5e-6)

    clock = Clock()
    with pytest.raises(timing.ImpossibleTime, match="exceed the trusted clock") as exc:
        _judge(Liar("liar", honest, clock), FakeKernel("base", honest, clock), 2.0)
    assert isinstance(exc.value, InfrastructureError) and exc.value.exit_code == 3
    with pytest.raises(timing.ImpossibleTime, match="launch times for"):  # one time missing

        class Short(FakeKernel):
            def run(self, launches):
                got = super().run(launches)
                return timing.Sample(got.gpu_s[:-1], got.wall_s)

        _judge(Short("short", honest, clock), FakeKernel("base", honest, clock), 2.0)


def test_a_warm_l2_run_is_not_refused_but_a_flushed_one_that_beats_memory_is():
    """A launch small enough to run from a warm L2 beats the DRAM bandwidth legitimately: not
    flushed before each launch, it may hold up to the L2's size, so the bound allows it; the
    same time with the L2 flushed before every launch is impossible."""
    device = Device("fake GPU (100 MB/s)", 100 * MB)
    warm = FakeKernel("warm", honest, Clock(), bandwidth=300 * MB, warm_l2_bytes=1 << 20)
    timing.judge([warm], [], Policy(), device, warm.clock)
    flushed = FakeKernel("flushed", honest, Clock(), bandwidth=300 * MB, warm_l2_bytes=0)
    with pytest.raises(timing.ImpossibleTime, match="faster than the GPU's memory allows"):
        timing.judge([flushed], [], Policy(), device, flushed.clock)


class Spoiler:
    """A `timing.Watch` that spoils the rounds it is told to (1-based), and all from `all_from`."""

    def __init__(self, rounds=(), all_from=None):
        self.rounds, self.all_from, self.n = set(rounds), all_from, 0

    def start(self):
        self.n += 1

    def spoiled(self):
        if self.n in self.rounds or (self.all_from and self.n >= self.all_from):
            return "sm_clock_mhz changed from 1980 to 1755 during the round"
        return None


def test_a_throttled_round_is_discarded_and_too_many_are_the_graders_refusal():
    clock = Clock()
    a, b = FakeKernel("a", honest, clock), FakeKernel("b", slow, clock)
    check = Check("a vs b", "a", "b", 0.8)
    judged = timing.judge([b, a], [check], Policy(), DEVICE, clock, Spoiler(rounds=(2, 3)))
    record = judged.record()
    assert record["discarded_rounds"] == 2 and "sm_clock_mhz changed" in record["discarded_why"][0]
    assert judged.rounds == Policy().min_rounds and judged.verdicts[0].passed
    with pytest.raises(InfrastructureError, match="would not hold its clocks"):
        timing.judge([b, a], [check], Policy(), DEVICE, clock, Spoiler(all_from=1))


def test_a_sample_whose_launches_were_not_queued_ahead_discards_its_round():
    """The fake harness's first hold (1 ms) is too short for 200 launches at 50 us: that round
    is discarded, the hold grows, and the next rounds are kept."""
    clock = Clock()
    a = FakeKernel("a", honest, clock, bandwidth=32768 / 20e-6, launch_s=50e-6)
    series = timing.measure([a], Policy(warmup=1, min_launches=4), Device("d", None), clock)
    assert series["a"].launches == 200  # 5 ms / 20 us: capped at max_launches
    # the warm-up adapted the hold to 4 launches; the first 200-launch sample outran it
    assert series["a"].discarded == ["a's launches were not all queued ahead"]
    assert len(series["a"].seconds) == Policy().min_rounds


def _ar1(rng, n, rho, sd):
    x, e = np.empty(n), sd * math.sqrt(1 - rho**2)
    x[0] = rng.normal(0, sd)
    for t in range(1, n):
        x[t] = rho * x[t - 1] + rng.normal(0, e)
    return x


def coverage_experiment(n, drift, runs=800, seed=0, rho=None):
    """Paired rounds of a kernel 2x its baseline, 3% noise each, with drift as an AR(1) (rho
    0.8) in log time: "common" (the machine: both targets in a round alike, sd 5%) or
    "independent" (each target its own, sd 3%). Returns (stated coverage, measured coverage):
    the mean exact coverage the intervals claim, and how often they held the true ratio 2."""
    rng = np.random.default_rng(seed)
    held, claimed = 0, 0.0
    for _ in range(runs):
        common = _ar1(rng, n, 0.8, 0.05) if drift == "common" else 0.0

        def own():
            return _ar1(rng, n, 0.8, 0.03) if drift == "independent" else 0.0

        kernel = 2.0 * np.exp(common + own() + rng.normal(0, 0.03, n))
        base = 1.0 * np.exp(common + own() + rng.normal(0, 0.03, n))
        s = timing.median_interval(list(kernel / base), 0.95, rho)
        held += s.low <= 2.0 <= s.high
        claimed += s.coverage
    return claimed / runs, held / runs


def test_the_ratio_interval_covers_what_it_states_on_the_fake_device(capsys):
    """The coverage experiment (pure NumPy, no kernels): without drift and with drift the
    pairing cancels, each interval holds the true ratio at least as often as its exact binomial
    coverage says (within 2.5 points of Monte Carlo error at 800 runs); with drift of each
    target's own (what pairing cannot cancel) the autocorrelation correction recovers part of
    what the plain order-statistic interval loses."""
    rows = []
    for n in (6, 12, 24):
        for drift in ("none", "common"):
            stated, measured = coverage_experiment(n, drift)
            rows.append((n, drift, stated, measured))
            assert measured >= stated - 0.025 and stated >= 0.95
        stated, measured = coverage_experiment(n, "independent")
        plain_stated, plain = coverage_experiment(n, "independent", rho=0.0)
        rows.append((n, "independent", stated, measured))
        rows.append((n, "independent, uncorrected", plain_stated, plain))
        assert measured >= plain
    with capsys.disabled():
        print("\nrounds  drift                      stated  measured")
        for n, drift, stated, measured in rows:
            print(f"{n:6d}  {drift:26s} {stated:6.3f}  {measured:8.3f}")


def _regrade(seed: int, kernel_bw: float) -> tuple[bool, int, bool]:
    """One grading on a fake H200-like device: a 40 us baseline, a 50 us host launch path,
    5% noise with outliers, machine drift (AR(1), rho 0.8, 5%), and each target's own drift."""
    clock = Clock()
    machine = Machine(rho=0.8, sd=0.05, seed=seed)
    base_bw = 32768 / 40e-6

    def kernel(label, bw, s):
        return FakeKernel(
            label, honest, clock, bandwidth=bw, noise=0.05, seed=s, launch_s=50e-6, machine=machine
        )

    base, student = kernel("base", base_bw, 2 * seed + 1), kernel("student", kernel_bw, 2 * seed)
    check = Check("student at least 60% of base", "student", "base", 1 / 0.6)
    (v,) = timing.judge([base, student], [check], Policy(), Device("fake", None), clock).verdicts
    return v.passed, v.ratio.n, v.by_median


def test_twenty_regrades_of_a_clear_pass_and_a_clear_fail_agree():
    """A kernel at 85% of its baseline (bar 60%: margin 1.4x) and one at 45% (margin 0.75x),
    each graded 20 times on the drifting, noisy fake device: every regrade gives the same
    verdict, decided by the interval (never by the median), in a few rounds."""
    base_bw = 32768 / 40e-6
    passes = [_regrade(seed, 0.85 * base_bw) for seed in range(20)]
    fails = [_regrade(100 + seed, 0.45 * base_bw) for seed in range(20)]
    assert [p for p, _, _ in passes] == [True] * 20
    assert [p for p, _, _ in fails] == [False] * 20
    assert not any(m for _, _, m in passes + fails)
    assert max(n for _, n, _ in passes + fails) <= 12


def test_nvml_spoils_a_round_on_a_clock_change_a_violation_or_a_slowdown():
    from grader.core import nvml

    steady = {"sm_clock_mhz": 1980, "mem_clock_mhz": 2619, "power": 10, "thermal": 0}
    assert nvml.spoiled(steady, dict(steady)) is None
    assert "sm_clock_mhz changed" in nvml.spoiled(steady, {**steady, "sm_clock_mhz": 1755})
    assert "for power" in nvml.spoiled(steady, {**steady, "power": 11})
    assert "hw_thermal_slowdown" in nvml.spoiled(steady, {**steady, "throttle_mask": 0x40})
    assert nvml.spoiled(steady, {**steady, "throttle_mask": 0x1}) is None  # idle is no slowdown
    watch = nvml.RoundWatch()  # here: no GPU, so no NVML: nothing spoiled, and why recorded
    watch.start()
    assert watch.spoiled() is None or watch.handle is not None
    watch.close()
