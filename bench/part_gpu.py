"""Part 4: the reference kernels on the GPU (only where `grader.core.device.has_gpu()`).

The reference solution of gpu_fundamentals is loaded in this process without the simulator,
and, timed by the one routine of the GPU tests (`grader.core.timing`: each figure the median of
paired rounds until its 95% interval is within 2%, the outputs NaN-filled before each sample,
every output checked; its spread recorded beside it):
`vector_add` at 2^24 and 2^26 elements (12 bytes per element) against torch's `a + b`
(`torch.add(out=)`), `strided_copy` at strides 1 and 33 on 2^24 elements (8 useful bytes per
element) against torch's `clone`; each bandwidth as a fraction of torch's and of the
`course.toml` peak of the detected GPU (matched by name; unlisted: raw GB/s only); then
`coalescing_slowdown(8192)` and the wall time of the GPU-marked hidden tests.

Changed in how it is taken (issue 53): each launch is timed on the GPU between CUDA events, all
of a sample's launches queued behind a hold kernel first (Numba's and torch's launch costs left
out of both figures), the sample's statistic its median launch. Earlier (issue 43): CUDA events
around `repeat` launches, `samples` times, gave way to the GPU tests' own routine; stride 32
became 33 (32 reads one 1/32 of the array, in L2). Earlier: the reference used to be loaded with
`grader.sandbox.harness.load_module` (cell by cell, not a public name); it is now the graded
cells as `grader.core.notebook.graded_text` gives them (at their own lines of the .py),
executed as one module. The same cells run, and the first failure is raised as before.

Contract: `part_gpu(root, quick)` prints the part's table and returns its JSON (`gpu`): on a
machine without a GPU `{"skipped": GPU_SKIPPED}`, else the entries named above with `target`
and `met`. The helpers below the timers (`match_hardware`, `gbs`, `bandwidth_entry`, `row`)
need no GPU, so they are unit-tested on CPU.
"""

from __future__ import annotations

import sys
import time
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
from timing import ASSIGNMENT, ROOT, TARGETS, load, ratio, table, timed_run

from grader.core import device
from grader.core.course import Hardware, load_course
from grader.core.notebook import graded_text

GPU_SKIPPED = "no CUDA GPU on this machine"
HEADERS = ["kernel", "ms", "GB/s", "torch op", "torch GB/s", "vs torch", "vs peak"]
GPU_SUITE = [
    "-m",
    "pytest",
    "tests/hidden/gpu_fundamentals",
    "-m",
    "gpu",
    "--submission",
    "solutions",
    "-q",
    "-p",
    "no:cacheprovider",
]


# ----------------------------------------------------------------------------- no GPU needed


def match_hardware(hardware: Iterable[Hardware], name: str) -> Hardware | None:
    """The course.toml entry of the GPU called `name` (nvidia-smi's, e.g. "NVIDIA A100-SXM4-80GB"):
    either name contains the other, or the name contains the entry's key with spaces for
    underscores, hyphens read as spaces; None when none matches (an A100 PCIe card is not the
    A100 SXM row: its bandwidth differs)."""
    low = name.lower().replace("-", " ")
    for h in hardware:
        full, key = h.name.lower(), h.key.replace("_", " ").lower()
        if full in low or low in full or key in low:
            return h
    return None


def gbs(nbytes: int, ms: float) -> float:
    """Bandwidth in GB/s of nbytes moved in ms milliseconds."""
    return round(nbytes / (ms * 1e-3) / 1e9, 1)


def bandwidth_entry(
    nbytes: int, ms: float, torch_ms: float, torch_op: str, peak: float | None, **extra: Any
) -> dict:
    """One kernel's JSON: its time and bandwidth, torch's (`torch_<op>_ms`, `_gbs`), and the
    kernel's as a fraction of torch's and of the peak (None without a peak)."""
    entry = {
        **extra,
        "ms": round(ms, 4),
        "gbs": gbs(nbytes, ms),
        f"torch_{torch_op}_ms": round(torch_ms, 4),
        f"torch_{torch_op}_gbs": gbs(nbytes, torch_ms),
    }
    entry["vs_torch"] = ratio(entry["gbs"], entry[f"torch_{torch_op}_gbs"])
    entry["vs_peak"] = ratio(entry["gbs"], peak) if peak else None
    return entry


def row(label: str, entry: dict, torch_label: str, torch_op: str) -> list:
    """One line of the part's table from a `bandwidth_entry`."""
    return [
        label,
        f"{entry['ms']:.3f}",
        entry["gbs"],
        torch_label,
        entry[f"torch_{torch_op}_gbs"],
        f"{entry['vs_torch']:.2f}",
        "-" if entry["vs_peak"] is None else f"{entry['vs_peak']:.2f}",
    ]


def load_reference(root: Path, name: str = "bench_reference_gpu") -> types.ModuleType:
    """The reference solution's graded cells executed as a module registered as `name`."""
    path = root / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.py"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    exec(compile(graded_text(path), str(path), "exec"), module.__dict__)  # noqa: S102 - trusted
    return module


# ----------------------------------------------------------------------------- GPU timers


class Timers:
    """Numba launches and torch calls timed by the one routine of the GPU tests
    (`grader.core.timing`: samples until the median is known to 2%, an L2 flush and NaN-filled
    outputs before each sample, every timed output checked), each figure a median with its
    interval (`spreads`, by label)."""

    def __init__(self, cuda: Any, torch: Any, quick: bool):
        from grader.core import timing  # lazy: as the module's other GPU imports

        self.cuda, self.torch, self.timing = cuda, torch, timing
        self.policy = timing.Policy(max_rounds=8 if quick else 25, max_s=10 if quick else 30)
        self.spreads: dict[str, dict] = {}
        self.flush = cuda.device_array(256 << 20, dtype=np.uint8)

    def hold(self) -> Any:
        """A one-thread kernel that sleeps so many nanoseconds on the GPU: the launches of a
        sample queue behind it (the harness's own is internal to the grader)."""
        if not hasattr(self, "_hold"):
            cuda = self.cuda

            def hold(ns: int) -> None:
                waited = 0
                while waited < ns:
                    cuda.nanosleep(1000)
                    waited += 1000

            self._hold = cuda.jit("void(int64)")(hold)
        return self._hold

    def _median_ms(self, target: Any) -> float:
        device = self.timing.Device("bench", None)
        series = self.timing.measure([target], self.policy, device)[target.label]
        self.spreads[target.label] = series.record()
        return series.stats().median * 1e3

    def torch_ms(self, label: str, op: Callable, variants: list, expected: list) -> float:
        from grader.suites import torch_target  # lazy: as the module's other GPU imports

        return self._median_ms(torch_target(label, op, variants, expected, 0))

    def numba_ms(
        self,
        label: str,
        kernel: Any,
        blocks: Any,
        tpb: Any,
        variants: list,
        out: int,
        expected: list,
    ) -> float:
        """`kernel[blocks, tpb]` on each variant's arguments (host arrays), argument `out` its
        output: three device copies, NaN-filled before each sample."""
        from numba.cuda.cudadrv import driver  # lazy: the real target only

        from grader.suites import CallTarget  # lazy: as the module's other GPU imports

        cuda = self.cuda
        dev = [[cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in v] for v in variants]
        outs = [cuda.device_array_like(expected[0]) for _ in range(self.timing.K_OUT)]

        def launch(v: int, c: int) -> None:
            args = list(dev[v])
            args[out] = outs[c]
            kernel[blocks, tpb](*args)

        def fill() -> None:
            for o in outs:
                driver.device_memset(o, 0xFF, o.nbytes)
            driver.device_memset(self.flush, 0, self.flush.nbytes)

        target = CallTarget(
            label,
            launch,
            fill,
            cuda.synchronize,
            lambda c: outs[c].copy_to_host(),
            expected,
            0,
            events=(
                lambda: cuda.event(timing=True),
                lambda a, b: cuda.event_elapsed_time(a, b) / 1e3,
            ),
            hold=lambda seconds: self.hold()[1, 1](int(seconds * 1e9)),
        )
        return self._median_ms(target)


def vector_add(ref: Any, t: Timers, peak: float | None, res: dict, rows: list) -> None:
    """`vector_add` at 2^24 and 2^26 against `torch.add(out=)`, every output checked."""
    torch = t.torch
    rng = np.random.default_rng(0)
    for exp in (24, 26):
        n = 2**exp
        a = [rng.random(n, dtype=np.float32) for _ in range(t.timing.K_IN)]
        b = [rng.random(n, dtype=np.float32) for _ in range(t.timing.K_IN)]
        want = [x + y for x, y in zip(a, b, strict=True)]
        blocks, tpb = ref.launch_config(n)
        variants = [[x, y, None] for x, y in zip(a, b, strict=True)]
        ms = t.numba_ms(f"vector_add 2^{exp}", ref.vector_add, blocks, tpb, variants, 2, want)
        pairs = [[x, y] for x, y in zip(a, b, strict=True)]
        tms = t.torch_ms(f"torch add 2^{exp}", torch.add, pairs, want)
        entry = bandwidth_entry(3 * 4 * n, ms, tms, "add", peak, n=n)
        entry["spread"] = t.spreads[f"vector_add 2^{exp}"]["spread"]
        entry["torch_spread"] = t.spreads[f"torch add 2^{exp}"]["spread"]
        res[f"vector_add_2^{exp}"] = entry
        rows.append(row(f"vector_add n=2^{exp}", entry, "torch a + b", "add"))


def strided_copy(ref: Any, t: Timers, peak: float | None, res: dict, rows: list) -> None:
    """`strided_copy` at strides 1 and 33 on 2^24 elements against torch's `clone` (an odd
    stride reads every element once: see the notebook's §7)."""
    n = 2**24
    rng = np.random.default_rng(1)
    src = [rng.random(n, dtype=np.float32) for _ in range(t.timing.K_IN)]
    blocks, tpb = ref.launch_config(n)
    tms = t.torch_ms("torch clone", lambda x, out: out.copy_(x), [[x] for x in src], src)
    for stride in (1, 33):
        want = [x[(np.arange(n, dtype=np.int64) * stride) % n] for x in src]
        variants = [[x, None, stride] for x in src]
        label = f"strided_copy stride {stride}"
        ms = t.numba_ms(label, ref.strided_copy, blocks, tpb, variants, 1, want)
        entry = bandwidth_entry(2 * 4 * n, ms, tms, "clone", peak, n=n, stride=stride)
        entry["spread"] = t.spreads[label]["spread"]
        res[f"strided_copy_stride_{stride}"] = entry
        rows.append(row(label, entry, "torch clone", "clone"))


def gpu_suite(root: Path) -> dict:
    """The GPU-marked hidden tests against the solutions: wall time, rc, pytest's last line."""
    suite = timed_run([sys.executable, *GPU_SUITE], root, timeout=900)
    tail = (suite["stdout"].strip().splitlines() or [""])[-1]
    return {"wall_s": suite["wall_s"], "rc": suite["rc"], "summary": tail, "load": suite["load"]}


def _print(res: dict, rows: list, hw: Hardware | None) -> None:
    peak = res["peak_bandwidth_gbs"]
    print(
        f"\n## 4. GPU: {res['device']} (course.toml: {hw.key if hw else 'not listed'}, peak "
        f"{f'{peak:g} GB/s' if peak else 'unknown'})\n"
    )
    print(table(HEADERS, rows))
    va = min(res["vector_add_2^24"]["vs_torch"], res["vector_add_2^26"]["vs_torch"])
    suite = res["gpu_suite"]
    print(
        f"\nvector_add vs torch a + b: {va:.2f} (target {res['target']:g}: "
        f"{'met' if res['met'] else 'NOT met'}); coalescing_slowdown(8192) = "
        f"{res['coalescing_slowdown_8192']:.2f}x; GPU suite (-m gpu) {suite['wall_s']:.1f} s: "
        f"{suite['summary']}"
    )


def part_gpu(root: Path = ROOT, quick: bool = False, suite: bool = True) -> dict:
    """Part 4, self-contained (`bench/run.py --gpu-only`): the reference kernels on the GPU;
    `suite=False` leaves out the GPU-marked hidden tests (`make gpu-check` runs them itself)."""
    if not device.has_gpu():
        print(
            f"\n## 4. GPU\n\nskipped: {GPU_SKIPPED} (grader.core.device.has_gpu() is False; run "
            "`.venv/bin/python bench/run.py --gpu-only --json gpu.json` on a GPU machine)"
        )
        return {"skipped": GPU_SKIPPED}
    # Here, not at the top: numba's real CUDA target loads only on a GPU machine (elsewhere the
    # bench runs under the simulator switch), and torch's CUDA import costs seconds the CPU
    # parts should not pay.
    import torch
    from numba import cuda

    ref = load_reference(root)
    name = cuda.get_current_device().name
    name = name.decode() if isinstance(name, bytes) else str(name)
    hw = match_hardware(load_course(root).hardware.values(), name)
    peak = hw.bandwidth_gbs if hw else None
    res: dict = {
        "device": name,
        "hardware": hw.key if hw else None,
        "peak_bandwidth_gbs": peak,
        "torch": torch.__version__,
    }
    rows: list = []
    timers = Timers(cuda, torch, quick)
    vector_add(ref, timers, peak, res, rows)
    strided_copy(ref, timers, peak, res, rows)
    t0 = time.perf_counter()
    res["coalescing_slowdown_8192"] = round(float(ref.coalescing_slowdown(8192)), 3)
    res["coalescing_slowdown_s"] = round(time.perf_counter() - t0, 2)
    res["target"] = TARGETS["vector_add_vs_torch"]
    res["met"] = min(res[f"vector_add_2^{e}"]["vs_torch"] for e in (24, 26)) >= res["target"]
    res["gpu_suite"] = gpu_suite(root) if suite else {"wall_s": 0.0, "rc": 0, "summary": "not run"}
    res["load"] = [load()]
    _print(res, rows, hw)
    return res
