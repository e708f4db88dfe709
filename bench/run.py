"""Benchmarks: grading speed against nbgrader, class throughput, start-up, and the GPU kernels.

    .venv/bin/python bench/run.py [--quick] [--json out.json] [--parts 1,2,3,4] [--runs N]
    .venv/bin/python bench/run.py --gpu-only --json gpu.json     # part 4 alone, on a GPU machine
    .venv/bin/python bench/run.py --parts 1,2,3 --against DIR    # before (DIR) and after (here)

Parts (each prints a table; all figures go to the JSON file with the date and the machine):

1. one submission, ours vs nbgrader: `grader grade <reference> --assignment gpu_fundamentals`
   and `nbgrader autograde gpu_fundamentals --force` in a temporary nbgrader course directory,
   each in a cold process, runs interleaved, median and spread, ratio nbgrader / ours;
2. class throughput: a synthetic class (copies of the sample class without the student whose
   notebook hangs) through `grader.batch.grade_all` with 1 and 2 jobs: submissions per minute,
   speedup, per-submission cost after 10, 20, 40 submissions and the gradebook write time;
3. start-up: `grader --help`, `grader check gpu_fundamentals`, the sandbox worker's start-up and
   first notebook load (and the PTX worker's), each with its top `python -X importtime` entries;
4. GPU (only where `grader.core.device.has_gpu()`): the reference `vector_add` and `strided_copy`
   against torch's `a + b` and `clone` and the course.toml peak, `coalescing_slowdown(8192)`,
   and the wall time of the GPU-marked hidden tests.

Wall times on a shared machine move with its load, so every figure carries the load average
measured around it, and CPU times (this process's children, from getrusage) are given too.

`--against DIR` (another checkout of the repository, the "before") runs each measurement of parts
1-3 in both trees, interleaved, and adds a table of the two side by side with the ratio after /
before (`bench/compare.py`). Both trees' commands then run as `python -m grader`, and the
in-process measurements (part 2, the worker's start-up) in a child process per tree.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from compare import Tree, compared, side_by_side

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
ASSIGNMENT = "gpu_fundamentals"
STUDENT = "ada"
# The sample class minus eve_hangs: her notebook never returns from launch_config, so every test
# that calls it waits for the 30 s call timeout; that measures the timeout, not the grader.
CLASS_MIX = ("ada_reference", "bob_untouched", "cy_partial", "dan_hardcoded")
TARGETS = {"vs_nbgrader": 3.0, "j2_speedup": 1.6, "vector_add_vs_torch": 0.9}
GPU_SKIPPED = "no CUDA GPU on this machine"

if str(ROOT) not in sys.path:  # running as a script: make `grader` importable from the tree
    sys.path.insert(0, str(ROOT))


# ----------------------------------------------------------------------------- helpers


def load() -> float:
    """1-minute load average."""
    return round(os.getloadavg()[0], 2)


def _cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _cpu_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


CPUACCT_V1 = Path("/sys/fs/cgroup/cpuacct")
CGROUP_V2 = Path("/sys/fs/cgroup")


class CpuGroup:
    """A cgroup of its own for one measured command, where this process may make one: its CPU
    counts every process the command started, the sandboxed workers too. getrusage misses
    those (a worker in its own PID namespace is reaped by bubblewrap's init, whose accounting
    does not reach the grader), so without a cgroup the CPU figure leaves them out."""

    def __init__(self) -> None:
        self.path: Path | None = None
        name = f"grader-bench-{os.getpid()}-{time.monotonic_ns()}"
        for base, procs in ((CPUACCT_V1, "tasks"), (CGROUP_V2, "cgroup.procs")):
            if base == CGROUP_V2 and not (base / "cgroup.controllers").exists():
                continue
            with contextlib.suppress(OSError):
                (base / name).mkdir()
                self.path, self.procs = base / name, procs
                return

    def enter(self) -> None:  # in the child, before exec
        if self.path is not None:
            (self.path / self.procs).write_text(str(os.getpid()))

    def cpu_s(self) -> float | None:
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


def timed_run(cmd: list[str], cwd: Path, env: dict | None = None, timeout: float = 900) -> dict:
    """Run a command in a cold process: wall seconds, CPU seconds of it and every process it
    started (a cgroup's count where one can be made, else getrusage's, workers left out)."""
    group = CpuGroup()
    la0, c0, t0 = load(), _cpu_children(), time.perf_counter()
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
        "cpu_s": round(cpu if cpu is not None else _cpu_children() - c0, 3),
        "cpu_counts": "cgroup (all processes)" if cpu is not None else "getrusage (no workers)",
        "load": [la0, load()],
        "rc": proc.returncode,
        "stdout": proc.stdout,
        "stderr": proc.stderr,
    }


def summary(values: list[float]) -> dict:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "n": len(values),
    }


def ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b > 0 else float("nan")


def table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(out)


def spread(s: dict, unit: str = "s") -> str:
    return f"{s['median']:.2f} {unit} ({s['min']:.2f}-{s['max']:.2f})"


def importtime_top(stderr: str, n: int = 8) -> dict:
    """Top-level imports by cumulative time, and the modules with the most self time."""
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


def _top_text(imp: dict, n: int = 5) -> str:
    return ", ".join(f"{e['module']} {e['cumulative_ms']:.0f}" for e in imp["top_cumulative"][:n])


def versions() -> dict:
    out = {"python": platform.python_version()}
    for dist in (
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
    ):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


def machine() -> dict:
    model = platform.processor() or "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    from grader.core import device

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
    from grader.core.course import load_course
    from grader.demo.samples import build_sample_class

    build_sample_class(load_course(ROOT), dest)
    return dest


# ----------------------------------------------------------------------------- part 1


def nbgrader_course(tmp: Path) -> tuple[Path, dict, float]:
    """A course directory with the solution notebook as source, released and submitted."""
    import jupytext

    env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}"}
    specs = subprocess.run(
        [str(VENV_BIN / "jupyter"), "kernelspec", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if '"python3"' not in specs.stdout:  # nbgrader executes with the python3 kernel of the venv
        subprocess.run(
            [sys.executable, "-m", "ipykernel", "install", "--sys-prefix", "--name", "python3"],
            env=env,
            check=True,
            capture_output=True,
        )
    course = tmp / "nbgrader-course"
    src = course / "source" / ASSIGNMENT
    src.mkdir(parents=True)
    nb = jupytext.read(ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.py")
    jupytext.write(nb, src / f"{ASSIGNMENT}.ipynb", fmt="ipynb")
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        "c.CourseDirectory.course_id = 'bench'\n"
        f"c.CourseDirectory.root = {str(course)!r}\n"
        "c.Execute.timeout = 600\n",
        encoding="utf-8",
    )
    gen = timed_run(
        [str(VENV_BIN / "nbgrader"), "generate_assignment", ASSIGNMENT, "--force"], course, env
    )
    if gen["rc"] != 0:
        raise RuntimeError(f"nbgrader generate_assignment failed:\n{gen['stderr'][-3000:]}")
    sub = course / "submitted" / STUDENT / ASSIGNMENT
    sub.mkdir(parents=True)
    shutil.copyfile(src / f"{ASSIGNMENT}.ipynb", sub / f"{ASSIGNMENT}.ipynb")
    return course, env, gen["wall_s"]


def nbgrader_score(course: Path) -> str:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        s = gb.find_submission(ASSIGNMENT, STUDENT)
        return f"{s.score:g}/{s.max_score:g}"


def _graded(cmd: list[str], cwd: Path, env: dict | None = None) -> dict:
    r = timed_run(cmd, cwd, env)
    if r["rc"] != 0:
        raise RuntimeError(f"grader grade in {cwd} failed:\n{r['stderr'][-3000:]}")
    return r


def part_one_submission(tmp: Path, runs: int, trees: tuple[Tree, Tree] | None = None) -> dict:
    """Part 1: the same reference submission graded by `grader grade` and `nbgrader autograde`
    (and, with `trees`, by the before tree's `grader grade` in the same rounds)."""
    submission = sample_class(tmp / "class") / "ada_reference"
    course, env, setup_s = nbgrader_course(tmp)
    args = ["grade", str(submission), "--assignment", ASSIGNMENT]
    ours_cmd = trees[0].grader(*args) if trees else [str(VENV_BIN / "grader"), *args]
    ours_env = trees[0].env if trees else None
    nbg_cmd = [str(VENV_BIN / "nbgrader"), "autograde", ASSIGNMENT, "--force"]
    ours, nbg, before = [], [], []
    for _ in range(runs):  # interleaved, so that a change of the machine's load hits both
        ours.append(_graded(ours_cmd, ROOT, ours_env))
        if trees:
            before.append(_graded(trees[1].grader(*args), trees[1].root, trees[1].env))
        r = timed_run(nbg_cmd, course, env)
        if r["rc"] != 0:
            raise RuntimeError(f"nbgrader autograde failed:\n{r['stderr'][-3000:]}")
        nbg.append(r)
    m = re.search(r"total (\S+(?: / \S+)?)\s+\(", ours[-1]["stdout"])  # `12.5 / 40` (or `12.5/40`)
    res = {}
    for key, rs, score in (
        ("ours", ours, m.group(1) if m else "?"),
        ("nbgrader", nbg, nbgrader_score(course)),
    ):
        res[key] = {
            "wall_s": summary([r["wall_s"] for r in rs]),
            "cpu_s": summary([r["cpu_s"] for r in rs]),
            "runs": [{"wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "load": r["load"]} for r in rs],
            "score": score,
        }
    res["ours"]["command"] = "grader grade <ada_reference> --assignment gpu_fundamentals"
    res["nbgrader"]["command"] = "nbgrader autograde gpu_fundamentals --force"
    res["nbgrader"]["generate_assignment_s"] = setup_s
    res["ratio"] = ratio(res["nbgrader"]["wall_s"]["median"], res["ours"]["wall_s"]["median"])
    res["cpu_ratio"] = ratio(res["nbgrader"]["cpu_s"]["median"], res["ours"]["cpu_s"]["median"])
    res["target"] = TARGETS["vs_nbgrader"]
    res["met"] = res["ratio"] >= res["target"]
    res["load"] = [load()]
    res["cpu_counts"] = ours[-1]["cpu_counts"]
    print("\n## 1. One submission (gpu_fundamentals, reference), ours vs nbgrader\n")
    rows = [
        [
            k,
            spread(res[k]["wall_s"]),
            spread(res[k]["cpu_s"]),
            res[k]["score"],
            " ".join(f"{r['load'][0]:.1f}" for r in res[k]["runs"]),
        ]
        for k in ("ours", "nbgrader")
    ]
    print(
        table(
            [
                "grader",
                "wall median (min-max)",
                "CPU median (min-max)",
                "score",
                "load avg per run",
            ],
            rows,
        )
    )
    print(
        f"\nratio nbgrader/ours: wall {res['ratio']:.2f}x, CPU {res['cpu_ratio']:.2f}x "
        f"(target {res['target']:g}x: {'met' if res['met'] else 'NOT met'}); "
        f"nbgrader generate_assignment (once) {setup_s:.1f} s; CPU counted by "
        f"{res['cpu_counts']}"
    )
    if trees:
        loads = [x for r in ours + before for x in r["load"]]
        res["before"] = {
            "wall_s": summary([r["wall_s"] for r in before]),
            "cpu_s": summary([r["cpu_s"] for r in before]),
            "runs": [
                {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "load": r["load"]} for r in before
            ],
        }
        res["compare"] = {
            key: compared(res["ours"][key], res["before"][key], loads)
            for key in ("wall_s", "cpu_s")
        }
        _print_compare(
            "1. One submission, before and after",
            trees,
            [
                ("grader grade, wall", "s", res["compare"]["wall_s"]),
                ("grader grade, CPU", "s", res["compare"]["cpu_s"]),
            ],
        )
    return res


def _print_compare(title: str, trees: tuple[Tree, Tree], rows: list[tuple[str, str, dict]]) -> None:
    print(f"\n### {title}\n")
    print(table(*side_by_side(rows, trees[1].commit(), trees[0].commit())))


# ----------------------------------------------------------------------------- part 2


def grade_some(submission: Path, student: str, work_dir: Path, root: str, assignments: list[str]):
    """A grade_one for --quick: grade_submission over fewer assignments (top-level: picklable)."""
    from grader.grading.grade import grade_submission

    return grade_submission(
        Path(submission), root=Path(root), student=student, assignments=assignments
    )


def synthetic_class(sample: Path, dest: Path, n: int) -> Path:
    dest.mkdir(parents=True)
    for i in range(n):
        kind = CLASS_MIX[i % len(CLASS_MIX)]
        shutil.copytree(sample / kind, dest / f"s{i + 1:03d}_{kind}")
    return dest


class _Progress(io.StringIO):
    """grade_all's progress stream: the time at which each submission finished."""

    def __init__(self, t0: float):
        super().__init__()
        self.t0, self.done = t0, []

    def write(self, s: str) -> int:
        if s.startswith("["):
            self.done.append(time.perf_counter() - self.t0)
        return super().write(s)


@contextlib.contextmanager
def _timed_gradebook(times: list[float]):
    import grader.gradebook as gb

    original = gb.record

    def record(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            times.append(time.perf_counter() - t0)

    gb.record = record
    try:
        yield
    finally:
        gb.record = original


def run_batch(klass: Path, out: Path, jobs: int, grade_one, checkpoints: list[int]) -> dict:
    from grader.batch import grade_all
    from grader.core.course import load_course

    course = load_course(ROOT)
    record_s: list[float] = []
    la0, c0, s0, t0 = load(), _cpu_children(), _cpu_self(), time.perf_counter()
    progress = _Progress(t0)
    with _timed_gradebook(record_s):
        outcome = grade_all(
            klass,
            out,
            jobs=jobs,
            grade_one=grade_one,
            course=course,
            progress=progress,
            summary=io.StringIO(),
        )
    wall = time.perf_counter() - t0
    n = len(outcome.results)
    done = progress.done
    per_sub = {str(k): round(done[k - 1] / k, 3) for k in checkpoints if k <= len(done)}
    marginal, prev = {}, 0
    for k in checkpoints:
        if k <= len(done) and k > prev:
            start = done[prev - 1] if prev else 0.0
            marginal[f"{prev + 1}-{k}"] = round((done[k - 1] - start) / (k - prev), 3)
            prev = k
    rec = {str(k): round(record_s[k - 1] * 1e3, 2) for k in checkpoints if k <= len(record_s)}
    return {
        "jobs": jobs,
        "submissions": n,
        "failed": len(outcome.failed),
        "wall_s": round(wall, 2),
        "cpu_s": round(_cpu_children() - c0 + _cpu_self() - s0, 2),
        "per_minute": round(n / wall * 60, 2),
        "seconds_per_submission": round(wall / n, 3),
        "per_submission_after": per_sub,
        "marginal_per_submission": marginal,
        "gradebook_record_ms": rec,
        "load": [la0, load()],
    }


def _batch_probe(grade_entry) -> dict:
    """The batch's isolation probe for grade_entry, as `grader grade-all` hands it to its
    children (run once per batch), where this tree's grade_entry takes one."""
    import inspect

    if "probe" not in inspect.signature(grade_entry).parameters:
        return {}
    from grader.sandbox.isolation import probe

    return {"probe": probe()}


def part_class(
    tmp: Path, n: int, assignments: list[str] | None, trees: tuple[Tree, Tree] | None = None
) -> dict:
    """Part 2: a synthetic class of n submissions with grade_all, 1 and 2 jobs (with `trees`:
    each tree's own run_batch in a child process, the trees in turn for each job count)."""
    from grader.batch import grade_entry

    sample = sample_class(tmp / "sample")
    klass = synthetic_class(sample, tmp / "class", n)
    if assignments:
        grade_one = functools.partial(grade_some, root=str(ROOT), assignments=assignments)
    else:
        grade_one = functools.partial(grade_entry, root=str(ROOT), **_batch_probe(grade_entry))
    checkpoints = sorted({k for k in (10, 20, 40) if k < n} | {n} | ({n // 2} if n < 20 else set()))
    if trees:
        runs = {}
        for jobs in (1, 2):
            for tree in trees:
                runs[tree.label, jobs] = tree.call(
                    "run_batch",
                    klass=klass,
                    out=tmp / f"out-{tree.label}-j{jobs}",
                    jobs=jobs,
                    grade_one={"assignments": assignments},
                    checkpoints=checkpoints,
                )
        j1, j2 = runs[trees[0].label, 1], runs[trees[0].label, 2]
    else:
        j1 = run_batch(klass, tmp / "out-j1", 1, grade_one, checkpoints)
        j2 = run_batch(klass, tmp / "out-j2", 2, grade_one, checkpoints)
    speedup = ratio(j1["wall_s"], j2["wall_s"])
    res = {
        "submissions": n,
        "mix": list(CLASS_MIX),
        "assignments": assignments or "all",
        "j1": j1,
        "j2": j2,
        "speedup": speedup,
        "target": TARGETS["j2_speedup"],
        "met": speedup >= TARGETS["j2_speedup"],
        "per_submission_growth": ratio(
            j2["marginal_per_submission"][list(j2["marginal_per_submission"])[-1]],
            j2["marginal_per_submission"][list(j2["marginal_per_submission"])[0]],
        ),
    }
    print(
        f"\n## 2. Class throughput ({n} submissions: {', '.join(CLASS_MIX)} in turn; "
        f"assignments: {assignments or 'all'})\n"
    )
    rows = [
        [
            f"-j {r['jobs']}",
            f"{r['wall_s']:.1f} s",
            f"{r['per_minute']:.2f}",
            f"{r['seconds_per_submission']:.2f} s",
            f"{r['cpu_s']:.1f} s",
            r["failed"],
            f"{r['load'][0]:.1f}-{r['load'][1]:.1f}",
        ]
        for r in (j1, j2)
    ]
    print(table(["jobs", "wall", "subs/min", "s/sub", "CPU", "failed", "load avg"], rows))
    print(
        f"\nspeedup -j 2 / -j 1: {speedup:.2f}x (target {res['target']:g}x: "
        f"{'met' if res['met'] else 'NOT met'})\n"
    )
    rows = []
    for k in checkpoints:
        rows.append(
            [k]
            + [r["per_submission_after"].get(str(k), "-") for r in (j1, j2)]
            + [r["gradebook_record_ms"].get(str(k), "-") for r in (j1, j2)]
        )
    print(
        table(
            [
                "after k submissions",
                "-j1 s/sub (cumulative)",
                "-j2 s/sub (cumulative)",
                "-j1 gradebook write ms",
                "-j2 gradebook write ms",
            ],
            rows,
        )
    )
    print(
        "marginal s/sub (-j 2): "
        + ", ".join(f"{k}: {v:.2f}" for k, v in j2["marginal_per_submission"].items())
        + f"; last/first block {res['per_submission_growth']:.2f}x"
    )
    if trees:
        b1, b2 = runs[trees[1].label, 1], runs[trees[1].label, 2]
        res["before"] = {"j1": b1, "j2": b2, "speedup": ratio(b1["wall_s"], b2["wall_s"])}
        res["compare"] = {}
        rows = []
        for key, a, b in (("j1", j1, b1), ("j2", j2, b2)):
            for field, unit in (("wall_s", "s"), ("seconds_per_submission", "s"), ("cpu_s", "s")):
                c = compared(summary([a[field]]), summary([b[field]]), [*a["load"], *b["load"]])
                res["compare"][f"{key}_{field}"] = c
                rows.append((f"-j {key[1]} {field.removesuffix('_s').replace('_', ' ')}", unit, c))
        _print_compare("2. Class throughput, before and after", trees, rows)
    return res


# ----------------------------------------------------------------------------- part 3


def _worker_env() -> dict:
    from grader.core import device

    env = {
        **os.environ,
        "GRADER_DEVICE": "gpu" if device.has_gpu() else "cpu",
        "PYTHONPATH": str(ROOT),
    }
    if not device.has_gpu():
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    return env


def spawn_cost(tmp: Path, runs: int) -> dict:
    """What bubblewrap adds to each sandboxed process start: `python -c pass` started bare and
    through `grader.sandbox.spawn.spawn` (namespaces, mounts, scratch tmpfs, setpriv)."""
    from grader.core.course import load_course
    from grader.sandbox.spawn import Sandbox, UidLease, spawn
    from grader.sandbox.spawn import prepare_workdir as _prepare_workdir
    from grader.sandbox.spawn import scrubbed_env as _scrubbed_env

    limits = load_course(ROOT).limits
    work = tmp / "spawn" / "work"
    work.mkdir(parents=True)
    _prepare_workdir(work)
    env = _scrubbed_env(work, gpu=False)
    cmd = [sys.executable, "-P", "-s", "-c", "pass"]
    bare, boxed = [], []
    for _ in range(max(runs, 5)):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True)
        bare.append((time.perf_counter() - t0) * 1e3)
        lease = UidLease() if os.geteuid() == 0 else None
        try:
            box = Sandbox(work, limits, uid=lease.uid if lease else None)
            t0 = time.perf_counter()
            proc = spawn(cmd, box, env, address_space=True)
            if proc.wait(timeout=60) != 0:
                raise RuntimeError("the sandboxed `python -c pass` failed")
            boxed.append((time.perf_counter() - t0) * 1e3)
        finally:
            if lease:
                lease.close()
    b, w = summary(bare), summary(boxed)
    return {
        "bare_ms": b,
        "bubblewrap_ms": w,
        "overhead_ms": round(w["median"] - b["median"], 1),
        "as": "root" if os.geteuid() == 0 else "ordinary user",
    }


def worker_startup(tmp: Path, runs: int) -> dict:
    """The sandboxed worker's start-up + first notebook load, and the PTX worker's first compile."""
    from grader.core import device
    from grader.core.course import load_course
    from grader.grading.intake import prepare
    from grader.sandbox.backend import WorkerBackend
    from grader.sandbox.isolation import probe

    course = load_course(ROOT)
    submission = sample_class(tmp / "class") / "ada_reference"
    t0 = time.perf_counter()
    layers = probe().layers
    probe_s = time.perf_counter() - t0
    first, again, ptx, loads = [], [], [], []
    for i in range(runs):
        work = tmp / f"work{i}"
        intake = prepare(submission, work, course, ROOT / "exercises")
        wb = WorkerBackend(work, intake.notebooks, course.limits, gpu=device.has_gpu())
        try:
            la = load()
            t0 = time.perf_counter()
            reply = wb.request({"assignment": ASSIGNMENT, "op": "has", "name": "vector_add"}, 120)
            t1 = time.perf_counter()
            wb.request({"assignment": ASSIGNMENT, "op": "has", "name": "vector_add"}, 120)
            t2 = time.perf_counter()
            sig = "void(float32[:], float32[:], float32[:])"
            preply = wb.ptx(ASSIGNMENT, "vector_add", sig, (7, 5), 120)
            t3 = time.perf_counter()
        finally:
            wb.close()
        if reply != {"ok": True} or "ok" not in preply:
            raise RuntimeError(f"worker replied {reply!r} / {str(preply)[:300]}")
        first.append(t1 - t0)
        again.append((t2 - t1) * 1e3)
        ptx.append(t3 - t2)
        loads.append(la)
    code = (
        "import os, sys\n"
        "from grader.core import device; device.prepare_numba()\n"
        "import grader.sandbox.worker, grader.sandbox.wire\n"
        "from grader.sandbox.harness import Harness\n"
        f"h = Harness(sys.argv[1], {ASSIGNMENT!r}); assert h.load() == {{'ok': None}}\n"
    )
    nb = tmp / "work0" / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.py"
    imp = subprocess.run(
        [sys.executable, "-X", "importtime", "-P", "-s", "-c", code, str(nb)],
        cwd=tmp,
        env=_worker_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    return {
        "isolation": list(layers),
        "isolation_probe_s": round(probe_s, 3),
        "spawn": spawn_cost(tmp, runs),
        "start_and_load_s": summary(first),
        "roundtrip_ms": summary(again),
        "ptx_worker_first_compile_s": summary(ptx),
        "load": loads,
        "importtime": importtime_top(imp.stderr),
    }


def _startup_before_after(tmp: Path, runs: int, trees: tuple[Tree, Tree]) -> dict:
    """Part 3's figures for both trees, round by round: the two commands, then the worker's
    start-up (each tree's own worker_startup, one run per round, in a child process)."""
    rounds: dict = {t.label: {"help": [], "check": [], "worker": []} for t in trees}
    for i in range(runs):
        for key, args in (("help", ["--help"]), ("check", ["check", ASSIGNMENT])):
            for t in trees:
                rounds[t.label][key].append(timed_run(t.grader(*args), t.root, t.env))
        for t in trees:
            rounds[t.label]["worker"].append(
                t.call("worker_startup", tmp=tmp / f"{t.label}{i}", runs=1)
            )
    out = {}
    for t in trees:
        r = rounds[t.label]
        out[t.label] = {
            key: {
                "wall_s": summary([x["wall_s"] for x in r[key]]),
                "load": [x["load"][0] for x in r[key]],
                "rc": r[key][-1]["rc"],
            }
            for key in ("help", "check")
        }
        for key in ("start_and_load_s", "roundtrip_ms", "ptx_worker_first_compile_s"):
            out[t.label][key] = summary([w[key]["median"] for w in r["worker"]])
        out[t.label]["bubblewrap_ms"] = summary(
            [w["spawn"]["bubblewrap_ms"]["median"] for w in r["worker"]]
        )
        out[t.label]["worker_load"] = [x for w in r["worker"] for x in w["load"]]
    return out


def part_startup(tmp: Path, runs: int, trees: tuple[Tree, Tree] | None = None) -> dict:
    """Part 3: `grader --help`, `grader check gpu_fundamentals`, the worker's start-up (with
    `trees`: also both trees side by side, as `python -m grader`)."""
    grader_bin = str(VENV_BIN / "grader")
    res = {}
    if trees:
        both = _startup_before_after(tmp / "compare", runs, trees)
        after, before = both[trees[0].label], both[trees[1].label]
        res["before"] = before
        res["compare"] = {}
        compare_rows = []
        for key, what, unit in (
            ("help", "python -m grader --help", "s"),
            ("check", "python -m grader check gpu_fundamentals", "s"),
            ("start_and_load_s", "worker start + notebook load", "s"),
            ("roundtrip_ms", "worker round trip (has)", "ms"),
            ("ptx_worker_first_compile_s", "PTX worker start + load + compile", "s"),
            ("bubblewrap_ms", "`python -c pass` in bubblewrap", "ms"),
        ):
            a, b = (
                (after[key], before[key])
                if key in ("help", "check")
                else (
                    {"wall_s": after[key], "load": after["worker_load"]},
                    {"wall_s": before[key], "load": before["worker_load"]},
                )
            )
            c = compared(a["wall_s"], b["wall_s"], [*a["load"], *b["load"]])
            res["compare"][key] = c
            compare_rows.append((what, unit, c))
    for key, args in (("help", ["--help"]), ("check", ["check", ASSIGNMENT])):
        rs = [timed_run([grader_bin, *args], ROOT) for _ in range(runs)]
        imp = timed_run([sys.executable, "-X", "importtime", grader_bin, *args], ROOT)
        res[key] = {
            "command": f"grader {' '.join(args)}",
            "wall_s": summary([r["wall_s"] for r in rs]),
            "cpu_s": summary([r["cpu_s"] for r in rs]),
            "rc": rs[-1]["rc"],
            "load": [r["load"][0] for r in rs],
            "importtime": importtime_top(imp["stderr"]),
        }
    res["worker"] = worker_startup(tmp / "worker", runs)
    print("\n## 3. Start-up\n")
    w = res["worker"]
    rows = [
        ["grader --help", spread(res["help"]["wall_s"]), _top_text(res["help"]["importtime"])],
        [
            "grader check gpu_fundamentals",
            spread(res["check"]["wall_s"]),
            _top_text(res["check"]["importtime"]),
        ],
        ["worker start + notebook load", spread(w["start_and_load_s"]), _top_text(w["importtime"])],
        ["worker round trip (has)", spread(w["roundtrip_ms"], "ms"), ""],
        ["PTX worker start + load + compile", spread(w["ptx_worker_first_compile_s"]), ""],
        ["sandbox isolation probe (once per process)", f"{w['isolation_probe_s']:.2f} s", ""],
        ["`python -c pass`, bare", spread(w["spawn"]["bare_ms"], "ms"), ""],
        [
            f"`python -c pass` in bubblewrap ({w['spawn']['as']})",
            spread(w["spawn"]["bubblewrap_ms"], "ms"),
            f"+{w['spawn']['overhead_ms']:.0f} ms per worker start",
        ],
    ]
    print(table(["what", "wall median (min-max)", "top imports, cumulative ms"], rows))
    for key, label in (("help", "grader --help"), ("check", "grader check"), ("worker", "worker")):
        imp = res[key]["importtime"]
        print(
            f"  most self time, {label}: "
            + ", ".join(f"{e['module']} {e['self_ms']:.0f} ms" for e in imp["top_self"][:4])
        )
    if trees:
        _print_compare("3. Start-up, before and after", trees, compare_rows)
    res["load"] = [load()]
    return res


# ----------------------------------------------------------------------------- part 4


def part_gpu(root: Path = ROOT, quick: bool = False) -> dict:
    """Part 4, self-contained (`bench/run.py --gpu-only`): the reference kernels on the GPU."""
    from grader.core import device

    if not device.has_gpu():
        print(
            f"\n## 4. GPU\n\nskipped: {GPU_SKIPPED} (grader.core.device.has_gpu() is False; run "
            "`.venv/bin/python bench/run.py --gpu-only --json gpu.json` on a GPU machine)"
        )
        return {"skipped": GPU_SKIPPED}
    import numpy as np
    import torch
    from numba import cuda

    from grader.core.course import load_course
    from grader.sandbox.harness import load_module

    ref = load_module(root / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.py", "bench_reference_gpu")
    name = cuda.get_current_device().name
    name = name.decode() if isinstance(name, bytes) else str(name)
    course = load_course(root)
    hw = next(
        (
            h
            for h in course.hardware.values()
            if h.name.lower() in name.lower()
            or name.lower() in h.name.lower()
            or h.key.replace("_", " ").lower() in name.lower()
        ),
        None,
    )
    samples, repeat = (3, 10) if quick else (7, 20)

    def median_ms(run) -> float:
        run()
        cuda.synchronize()
        torch.cuda.synchronize()
        times = []
        for _ in range(samples):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            cuda.synchronize()
            start.record()
            for _ in range(repeat):
                run()
            end.record()
            cuda.synchronize()
            end.synchronize()
            times.append(start.elapsed_time(end) / repeat)
        return float(np.median(times))

    def numba_ms(kernel, blocks, tpb, *args) -> float:
        start, end = cuda.event(), cuda.event()
        kernel[blocks, tpb](*args)  # compiles
        cuda.synchronize()
        times = []
        for _ in range(samples):
            start.record()
            for _ in range(repeat):
                kernel[blocks, tpb](*args)
            end.record()
            end.synchronize()
            times.append(cuda.event_elapsed_time(start, end) / repeat)
        return float(np.median(times))

    def gbs(nbytes: int, ms: float) -> float:
        return round(nbytes / (ms * 1e-3) / 1e9, 1)

    peak = hw.bandwidth_gbs if hw else None
    rows, res = (
        [],
        {
            "device": name,
            "hardware": hw.key if hw else None,
            "peak_bandwidth_gbs": peak,
            "torch": torch.__version__,
        },
    )
    for exp in (24, 26):
        n = 2**exp
        a = cuda.to_device(np.random.rand(n).astype(np.float32))
        b = cuda.to_device(np.random.rand(n).astype(np.float32))
        c = cuda.device_array(n, dtype=np.float32)
        blocks, tpb = ref.launch_config(n)
        ms = numba_ms(ref.vector_add, blocks, tpb, a, b, c)
        assert np.allclose(c.copy_to_host(), a.copy_to_host() + b.copy_to_host())
        ta, tb = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        tc = torch.empty_like(ta)
        tms = median_ms(lambda ta=ta, tb=tb, tc=tc: torch.add(ta, tb, out=tc))
        nbytes = 3 * 4 * n
        entry = {
            "n": n,
            "ms": round(ms, 4),
            "gbs": gbs(nbytes, ms),
            "torch_add_ms": round(tms, 4),
            "torch_add_gbs": gbs(nbytes, tms),
        }
        entry["vs_torch"] = ratio(entry["gbs"], entry["torch_add_gbs"])
        entry["vs_peak"] = ratio(entry["gbs"], peak) if peak else None
        res[f"vector_add_2^{exp}"] = entry
        rows.append(
            [
                f"vector_add n=2^{exp}",
                f"{ms:.3f}",
                entry["gbs"],
                "torch a + b",
                entry["torch_add_gbs"],
                f"{entry['vs_torch']:.2f}",
                f"{entry['vs_peak']:.2f}" if peak else "-",
            ]
        )
        del a, b, c, ta, tb, tc
    n = 2**24
    src = cuda.to_device(np.arange(n, dtype=np.float32))
    dst = cuda.device_array(n, dtype=np.float32)
    blocks, tpb = ref.launch_config(n)
    tx = torch.rand(n, device="cuda")
    tms = median_ms(lambda: tx.clone())
    clone_gbs = gbs(2 * 4 * n, tms)
    for stride in (1, 32):
        ms = numba_ms(ref.strided_copy, blocks, tpb, src, dst, stride)
        entry = {
            "n": n,
            "stride": stride,
            "ms": round(ms, 4),
            "gbs": gbs(2 * 4 * n, ms),
            "torch_clone_ms": round(tms, 4),
            "torch_clone_gbs": clone_gbs,
        }
        entry["vs_torch"] = ratio(entry["gbs"], clone_gbs)
        entry["vs_peak"] = ratio(entry["gbs"], peak) if peak else None
        res[f"strided_copy_stride_{stride}"] = entry
        rows.append(
            [
                f"strided_copy stride {stride}",
                f"{ms:.3f}",
                entry["gbs"],
                "torch clone",
                clone_gbs,
                f"{entry['vs_torch']:.2f}",
                f"{entry['vs_peak']:.2f}" if peak else "-",
            ]
        )
    t0 = time.perf_counter()
    res["coalescing_slowdown_8192"] = round(float(ref.coalescing_slowdown(8192)), 3)
    res["coalescing_slowdown_s"] = round(time.perf_counter() - t0, 2)
    va = res["vector_add_2^24"]["vs_torch"], res["vector_add_2^26"]["vs_torch"]
    res["target"] = TARGETS["vector_add_vs_torch"]
    res["met"] = min(va) >= res["target"]
    suite = timed_run(
        [
            sys.executable,
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
        ],
        root,
        timeout=900,
    )
    tail = (suite["stdout"].strip().splitlines() or [""])[-1]
    res["gpu_suite"] = {
        "wall_s": suite["wall_s"],
        "rc": suite["rc"],
        "summary": tail,
        "load": suite["load"],
    }
    res["load"] = [load()]
    print(
        f"\n## 4. GPU: {name} (course.toml: {hw.key if hw else 'not listed'}, peak "
        f"{f'{peak:g} GB/s' if peak else 'unknown'})\n"
    )
    print(table(["kernel", "ms", "GB/s", "torch op", "torch GB/s", "vs torch", "vs peak"], rows))
    print(
        f"\nvector_add vs torch a + b: {min(va):.2f} (target {res['target']:g}: "
        f"{'met' if res['met'] else 'NOT met'}); coalescing_slowdown(8192) = "
        f"{res['coalescing_slowdown_8192']:.2f}x; GPU suite (-m gpu) {suite['wall_s']:.1f} s: "
        f"{tail}"
    )
    return res


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="small sizes, one run each (for the unit test; figures are noisier)",
    )
    p.add_argument("--json", help="write every figure here")
    p.add_argument("--parts", default="1,2,3,4", help="comma-separated subset of 1,2,3,4")
    p.add_argument("--gpu-only", action="store_true", help="part 4 alone (same as --parts 4)")
    p.add_argument("--runs", type=int, help="runs per timing in parts 1 and 3 (default 5; quick 1)")
    p.add_argument("--class-size", type=int, help="submissions in part 2 (default 40; quick 4)")
    p.add_argument(
        "--against",
        metavar="DIR",
        help="another checkout (the before): parts 1-3 also run there, side by side with this one",
    )
    args = p.parse_args(argv)
    trees = None
    if args.against:
        trees = (Tree.at("after", ROOT), Tree.at("before", Path(args.against)))
        for t in trees:
            t.check()
    parts = {"4"} if args.gpu_only else set(args.parts.split(","))
    runs = args.runs or (1 if args.quick else 5)
    size = args.class_size or (4 if args.quick else 40)
    started = datetime.now(UTC)
    out: dict = {
        "date": started.isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "command": " ".join([".venv/bin/python", "bench/run.py", *(argv or sys.argv[1:])]),
        "machine": machine(),
        "targets": TARGETS,
    }
    if trees:
        out["against"] = {t.label: {"root": str(t.root), "commit": t.commit()} for t in trees}
    m = out["machine"]
    print(
        f"# grader benchmarks, {out['date']}\n{m['cpu']}, {m['cores']} cores, Python "
        f"{m['python']}, {m['device']}; load average {m['load_average']}"
    )
    with tempfile.TemporaryDirectory(prefix="grader-bench-") as scratch:
        tmp = Path(scratch)
        if "1" in parts:
            out["one_submission"] = part_one_submission(tmp / "p1", runs, trees)
        if "2" in parts:  # quick: m9_roofline only, so that a unit test can afford it
            out["class_throughput"] = part_class(
                tmp / "p2", size, ["m9_roofline"] if args.quick else None, trees
            )
        if "3" in parts:
            out["startup"] = part_startup(tmp / "p3", max(runs, 3) if not args.quick else 1, trees)
        if "4" in parts:
            out["gpu"] = part_gpu(ROOT, quick=args.quick)
    out["seconds"] = round((datetime.now(UTC) - started).total_seconds(), 1)
    out["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        print(f"\nfigures written to {args.json} ({out['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
