"""What every part of the benchmark shares: where the tree is, timing a cold process, summaries,
tables, the machine's description and the sample class.

Contract: nothing here prints or measures a part; each `part_*` module builds its figures from
these. `timed_run` is the one way a command is timed (wall seconds, CPU seconds of it and of
every process it started, the load average around it); `summary` is the one spread of repeated
figures (`median`, `min`, `max`, `n`) that the JSON, the tables and `compare.compared` read.
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from compare import Tree, side_by_side

from grader.core import device
from grader.core.course import load_course
from grader.demo import build_sample_class

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
ASSIGNMENT = "gpu_fundamentals"
STUDENT = "ada"
TARGETS = {
    "vs_nbgrader": 3.0,
    "vs_nbgrader_cpu": 5.0,
    "j2_speedup": 1.6,
    "vector_add_vs_torch": 0.9,
}
CPUACCT_V1 = Path("/sys/fs/cgroup/cpuacct")
CGROUP_V2 = Path("/sys/fs/cgroup")
VERSIONED = (
    "gpu-course-grader",
    "numpy",
    "numba",
    "numba-cuda",
    "torch",
    "nbgrader",
    "pytest",
    "hypothesis",
    "jupytext",
    "jsonschema",
)


def load() -> float:
    """1-minute load average."""
    return round(os.getloadavg()[0], 2)


def cpu_children() -> float:
    """CPU seconds of this process's waited-for children (getrusage)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def cpu_self() -> float:
    """CPU seconds of this process."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class CpuGroup:
    """A cgroup of its own for one measured command, where this process may make one: its CPU
    counts every process the command started, the sandboxed workers too. getrusage misses
    those (a worker in its own PID namespace is reaped by bubblewrap's init, whose accounting
    does not reach the grader), so without a cgroup the CPU figure leaves them out."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.procs = ""
        name = f"grader-bench-{os.getpid()}-{time.monotonic_ns()}"
        for base, procs in ((CPUACCT_V1, "tasks"), (CGROUP_V2, "cgroup.procs")):
            if base == CGROUP_V2 and not (base / "cgroup.controllers").exists():
                continue
            with contextlib.suppress(OSError):
                (base / name).mkdir()
                self.path, self.procs = base / name, procs
                return

    def enter(self) -> None:
        """Join the group (in the child, before exec)."""
        if self.path is not None:
            (self.path / self.procs).write_text(str(os.getpid()))

    def cpu_s(self) -> float | None:
        """CPU seconds of everything that ran in the group; None without a group."""
        if self.path is None:
            return None
        usage = self.path / "cpuacct.usage"
        if usage.exists():
            return int(usage.read_text()) / 1e9
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6

    def close(self) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.rmdir()


def timed_run(
    cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 900
) -> dict:
    """Run a command in a cold process: wall seconds, CPU seconds of it and every process it
    started (a cgroup's count where one can be made, else getrusage's, workers left out)."""
    group = CpuGroup()
    la0, c0, t0 = load(), cpu_children(), time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            preexec_fn=group.enter,
        )
        wall = time.perf_counter() - t0
        cpu = group.cpu_s()
    finally:
        group.close()
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu if cpu is not None else cpu_children() - c0, 3),
        "cpu_counts": "cgroup (all processes)" if cpu is not None else "getrusage (no workers)",
        "load": [la0, load()],
        "rc": proc.returncode,
        "stdout": proc.stdout,
        "stderr": proc.stderr,
    }


def summary(values: list[float]) -> dict:
    """The spread of repeated figures: median, min, max (3 decimals) and how many."""
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "n": len(values),
    }


def ratio(a: float, b: float) -> float:
    """a / b to 3 decimals; NaN when b is not positive."""
    return round(a / b, 3) if b > 0 else float("nan")


def table(headers: list[str], rows: list[list]) -> str:
    """A plain-text table: columns padded to their widest cell, a dashed rule under the headers."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(out)


def spread(s: dict, unit: str = "s") -> str:
    """A summary as a cell: `1.23 s (1.10-1.40)`."""
    return f"{s['median']:.2f} {unit} ({s['min']:.2f}-{s['max']:.2f})"


def importtime_top(stderr: str, n: int = 8) -> dict:
    """Top-level imports by cumulative time, and the modules with the most self time, from a
    `python -X importtime` stderr."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        try:
            self_us, cum_us, name = line.split(":", 1)[1].split("|")
            rows.append(
                (int(cum_us), int(self_us), (len(name) - len(name.lstrip()) - 1) // 2, name.strip())
            )
        except ValueError:
            continue
    top = sorted((r for r in rows if r[2] == 0), reverse=True)[:n]
    by_self = sorted(rows, key=lambda r: -r[1])[:5]
    return {
        "top_cumulative": [{"module": r[3], "cumulative_ms": round(r[0] / 1e3, 1)} for r in top],
        "top_self": [{"module": r[3], "self_ms": round(r[1] / 1e3, 1)} for r in by_self],
        "total_ms": round(sum(r[0] for r in rows if r[2] == 0) / 1e3, 1),
    }


def top_text(imp: dict, n: int = 5) -> str:
    """The first n top-level imports of an `importtime_top` as one cell."""
    return ", ".join(f"{e['module']} {e['cumulative_ms']:.0f}" for e in imp["top_cumulative"][:n])


def versions() -> dict:
    """Python's and each installed measured package's version."""
    out = {"python": platform.python_version()}
    for dist in VERSIONED:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


def machine() -> dict:
    """The machine the figures were taken on: CPU model, cores, load, platform, device."""
    model = platform.processor() or "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": device.describe(),
        "versions": versions(),
    }


def sample_class(dest: Path) -> Path:
    """The demo's sample class (`grader.demo.build_sample_class`) built into dest."""
    build_sample_class(load_course(ROOT), dest)
    return dest


def print_compare(title: str, trees: tuple[Tree, Tree], rows: list[tuple[str, str, dict]]) -> None:
    """A part's before-and-after table (`compare.side_by_side`), labelled with both commits."""
    print(f"\n### {title}\n")
    print(table(*side_by_side(rows, trees[1].commit(), trees[0].commit())))
