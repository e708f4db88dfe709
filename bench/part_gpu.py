"""Part 4: the reference kernels on the GPU (only where `grader.core.device.has_gpu()`).

The reference solution of gpu_fundamentals is loaded in this process without the simulator,
and, timed with CUDA events (each figure the median of `samples` runs of `repeat` launches):
`vector_add` at 2^24 and 2^26 elements (12 bytes per element) against torch's `a + b`
(`torch.add(out=)`), `strided_copy` at strides 1 and 32 on 2^24 elements (8 useful bytes per
element) against torch's `clone`; each bandwidth as a fraction of torch's and of the
`course.toml` peak of the detected GPU (matched by name; unlisted: raw GB/s only); then
`coalescing_slowdown(8192)` and the wall time of the GPU-marked hidden tests.

Changed in how it is taken: the reference used to be loaded with
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
    """CUDA-event timers of numba launches and torch calls: the median, in ms, of `samples`
    runs of `repeat` calls, after one warm-up call (a numba kernel's compile)."""

    def __init__(self, cuda: Any, torch: Any, quick: bool):
        self.cuda, self.torch = cuda, torch
        self.samples, self.repeat = (3, 10) if quick else (7, 20)

    def torch_ms(self, run: Callable[[], object]) -> float:
        cuda, torch = self.cuda, self.torch
        run()
        cuda.synchronize()
        torch.cuda.synchronize()
        times = []
        for _ in range(self.samples):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            cuda.synchronize()
            start.record()
            for _ in range(self.repeat):
                run()
            end.record()
            cuda.synchronize()
            end.synchronize()
            times.append(start.elapsed_time(end) / self.repeat)
        return float(np.median(times))

    def numba_ms(self, kernel: Any, blocks: Any, tpb: Any, *args: Any) -> float:
        cuda = self.cuda
        start, end = cuda.event(), cuda.event()
        kernel[blocks, tpb](*args)  # compiles
        cuda.synchronize()
        times = []
        for _ in range(self.samples):
            start.record()
            for _ in range(self.repeat):
                kernel[blocks, tpb](*args)
            end.record()
            end.synchronize()
            times.append(cuda.event_elapsed_time(start, end) / self.repeat)
        return float(np.median(times))


def vector_add(ref: Any, t: Timers, peak: float | None, res: dict, rows: list) -> None:
    """`vector_add` at 2^24 and 2^26 against `torch.add(out=)`, checked against numpy."""
    cuda, torch = t.cuda, t.torch
    for exp in (24, 26):
        n = 2**exp
        a = cuda.to_device(np.random.rand(n).astype(np.float32))
        b = cuda.to_device(np.random.rand(n).astype(np.float32))
        c = cuda.device_array(n, dtype=np.float32)
        blocks, tpb = ref.launch_config(n)
        ms = t.numba_ms(ref.vector_add, blocks, tpb, a, b, c)
        assert np.allclose(c.copy_to_host(), a.copy_to_host() + b.copy_to_host())
        ta, tb = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        tc = torch.empty_like(ta)
        tms = t.torch_ms(lambda ta=ta, tb=tb, tc=tc: torch.add(ta, tb, out=tc))
        entry = bandwidth_entry(3 * 4 * n, ms, tms, "add", peak, n=n)
        res[f"vector_add_2^{exp}"] = entry
        rows.append(row(f"vector_add n=2^{exp}", entry, "torch a + b", "add"))
        del a, b, c, ta, tb, tc


def strided_copy(ref: Any, t: Timers, peak: float | None, res: dict, rows: list) -> None:
    """`strided_copy` at strides 1 and 32 on 2^24 elements against torch's `clone`."""
    cuda, torch = t.cuda, t.torch
    n = 2**24
    src = cuda.to_device(np.arange(n, dtype=np.float32))
    dst = cuda.device_array(n, dtype=np.float32)
    blocks, tpb = ref.launch_config(n)
    tx = torch.rand(n, device="cuda")
    tms = t.torch_ms(lambda: tx.clone())
    for stride in (1, 32):
        ms = t.numba_ms(ref.strided_copy, blocks, tpb, src, dst, stride)
        entry = bandwidth_entry(2 * 4 * n, ms, tms, "clone", peak, n=n, stride=stride)
        res[f"strided_copy_stride_{stride}"] = entry
        rows.append(row(f"strided_copy stride {stride}", entry, "torch clone", "clone"))


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


def part_gpu(root: Path = ROOT, quick: bool = False) -> dict:
    """Part 4, self-contained (`bench/run.py --gpu-only`): the reference kernels on the GPU."""
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
    res["gpu_suite"] = gpu_suite(root)
    res["load"] = [load()]
    _print(res, rows, hw)
    return res
