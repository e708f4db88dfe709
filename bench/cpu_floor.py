"""The CPU floor of one grading under this design: what its processes cost before any work.

A grading is one trusted process and three sandboxed workers that each import numba (the
notebook worker and the kernel worker the simulator where there is no GPU, the compile worker
the real CUDA target, which cannot share a process with the simulator or with student code:
../shared/DESIGN.md, "Grading and its trust boundary"). `cpu_floor` starts each of these kinds
cold and does only the least that kind must do (imports, and the compile worker's first PTX
compile, which pays numba's compiler set-up), with the grader's public names and the libraries
themselves: no notebook, no test, no graded kernel, no bubblewrap, no isolation probe. The sum
is a lower bound of the CPU any grading pays; nbgrader's CPU divided by it is the most a CPU
ratio can reach short of another design, which is what part 1 prints beside the 5x target.

Contract: `cpu_floor(runs)` returns ``{"parts": {kind: summary}, "cpu_s": total of the medians}``
(`timing.summary` spreads, CPU seconds); `floor_table(floor)` is its printed table.
"""

from __future__ import annotations

import os
import sys

from timing import ROOT, summary, timed_run

from grader.core import device
from grader.core.compiler import PROBE_KERNEL, PROBE_SIGNATURE
from grader.core.course import load_course

NUMBA = "import numpy\nfrom numba import cuda\n"  # the simulator or the CUDA target, by environment
# The trusted process imports these before its first test: the CLI and the grading (public
# names), pytest and hypothesis (the suites), jupytext (through the grader's own import of it).
TRUSTED = (
    "import grader.cli, pytest, hypothesis\n"
    "from grader.grading import grade_submission\n"
    "from grader.core.notebook import jupytext_module\n"
    "jupytext_module()\n"
)


def _compile_probe(cc: tuple[int, int]) -> str:
    """The compile worker's least: numba's CUDA target and the compile probe's PTX."""
    return (
        f"{NUMBA}ns = {{}}\nexec({PROBE_KERNEL!r}, ns)\n"
        f"ptx, _ = cuda.compile_ptx(ns['grader_compiler_probe'].py_func, {PROBE_SIGNATURE!r}, "
        f"cc={cc!r})\nassert '.entry' in ptx\n"
    )


def kinds() -> dict[str, tuple[str, dict[str, str]]]:
    """{process kind: (the code it must run, the environment it runs in)}."""
    real = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    # without a GPU the two workers that run kernels run them in the simulator
    target, workers = (
        ("CUDA target", real)
        if device.has_gpu()
        else ("simulator", {**real, "NUMBA_ENABLE_CUDASIM": "1"})
    )
    cc = load_course(ROOT).gpu.compute_capability
    return {
        "trusted grader process: grading, pytest, hypothesis, jupytext imported": (TRUSTED, real),
        f"notebook worker: numpy and numba's {target} imported": (NUMBA, workers),
        f"kernel worker: numpy and numba's {target} imported": (NUMBA, workers),
        "compile worker: numba's CUDA target, the probe's PTX": (_compile_probe(cc), real),
    }


def cpu_floor(runs: int) -> dict:
    """Each kind's CPU in `runs` cold processes (median per kind); the total of the medians."""
    parts: dict[str, dict] = {}
    measured: dict[tuple, dict] = {}
    for kind, (code, env) in kinds().items():
        same = (code, tuple(sorted(env.items())))  # what the process does, and where
        if same in measured:  # the notebook and kernel workers: measured once, counted twice
            parts[kind] = measured[same]
            continue
        cpu = []
        for _ in range(runs):
            r = timed_run([sys.executable, "-c", code], ROOT, env)
            if r["rc"] != 0:
                raise RuntimeError(f"the floor's {kind!r} failed:\n{r['stderr'][-2000:]}")
            cpu.append(r["cpu_s"])
        parts[kind] = measured[same] = summary(cpu)
    return {"parts": parts, "cpu_s": round(sum(p["median"] for p in parts.values()), 3)}


def floor_table(floor: dict) -> tuple[list[str], list[list]]:
    rows = [[kind, f"{p['median']:.2f} s"] for kind, p in floor["parts"].items()]
    return ["process kind, doing the least it must", "CPU (median)"], [
        *rows,
        ["**floor (sum)**", f"**{floor['cpu_s']:.2f} s**"],
    ]
