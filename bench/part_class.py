"""Part 2: class throughput through `grader.batch.grade_all`, with 1 and 2 jobs.

A synthetic class (copies of the sample class's CLASS_MIX in turn) is graded by `grade_all`, the
function behind `grader grade-all` (one spawned process per submission, reports, gradebook), with
`jobs=1` and `jobs=2` into fresh folders. The time each submission finished comes from
grade_all's progress stream. `--quick` grades `m9_roofline` only (`grade_some`).

Changed in how it is taken: the gradebook write after k submissions used to be timed by
replacing `grader.gradebook.record` during the run, but grade_all calls the `record` its module
imported by name, so the replacement never saw a call and the figures were empty. Now, after
each run, the class's results are recorded again one by one, through `grader.gradebook.record`,
into a fresh gradebook (`gradebook_writes`), and the write of the k-th is the figure: the cost
of one write as the gradebook grows, outside the run's wall time.

Contract: `part_class(tmp, n, assignments, trees)` prints the part's tables and returns its JSON
(`class_throughput`): `j1`, `j2` (each `run_batch`'s figures), `speedup`, `target`, `met`,
`per_submission_growth`, and with trees `before` and `compare`. `run_batch` and `grade_some` are
what `compare.Tree.call` runs in a tree's child process (JSON in, JSON out).
"""

from __future__ import annotations

import functools
import inspect
import io
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from compare import Tree, compared
from timing import (
    ROOT,
    TARGETS,
    cpu_children,
    cpu_self,
    load,
    print_compare,
    ratio,
    sample_class,
    summary,
    table,
)

import grader.gradebook as gradebook
from grader.batch import grade_all, grade_entry
from grader.core.course import Course, load_course
from grader.core.results import GradeResult
from grader.grading import grade_submission
from grader.sandbox.isolation import probe

# The sample class minus eve_hangs: her notebook never returns from launch_config, so every test
# that calls it waits for the 30 s call timeout; that measures the timeout, not the grader.
CLASS_MIX = ("ada_reference", "bob_untouched", "cy_partial", "dan_hardcoded")


def grade_some(submission: Path, student: str, work_dir: Path, root: str, assignments: list[str]):
    """A grade_one for --quick: grade_submission over fewer assignments (top-level: picklable)."""
    return grade_submission(
        Path(submission), root=Path(root), student=student, assignments=assignments
    )


def synthetic_class(sample: Path, dest: Path, n: int) -> Path:
    """n submissions, CLASS_MIX in turn, named `s001_ada_reference`, ..."""
    dest.mkdir(parents=True)
    for i in range(n):
        kind = CLASS_MIX[i % len(CLASS_MIX)]
        shutil.copytree(sample / kind, dest / f"s{i + 1:03d}_{kind}")
    return dest


def checkpoints_for(n: int) -> list[int]:
    """The class sizes the per-submission figures are given at: 10, 20, 40 below n, n itself,
    and n // 2 in a class under 20."""
    return sorted({k for k in (10, 20, 40) if k < n} | {n} | ({n // 2} if n < 20 else set()))


class Progress(io.StringIO):
    """grade_all's progress stream: the time at which each submission finished."""

    def __init__(self, t0: float):
        super().__init__()
        self.t0, self.done = t0, []

    def write(self, s: str) -> int:
        if s.startswith("["):
            self.done.append(time.perf_counter() - self.t0)
        return super().write(s)


def gradebook_writes(results: Iterable[GradeResult], course: Course, db: Path) -> list[float]:
    """Seconds of each `grader.gradebook.record` of these results, in order, into a fresh db."""
    times = []
    for result in results:
        t0 = time.perf_counter()
        gradebook.record(db, result, course)
        times.append(time.perf_counter() - t0)
    return times


def per_submission(done: list[float], checkpoints: list[int]) -> tuple[dict, dict]:
    """From the finishing times: seconds per submission after k (cumulative), and per block of
    submissions between checkpoints (marginal, `1-10`, `11-20`, ...)."""
    cumulative = {str(k): round(done[k - 1] / k, 3) for k in checkpoints if k <= len(done)}
    marginal, prev = {}, 0
    for k in checkpoints:
        if k <= len(done) and k > prev:
            start = done[prev - 1] if prev else 0.0
            marginal[f"{prev + 1}-{k}"] = round((done[k - 1] - start) / (k - prev), 3)
            prev = k
    return cumulative, marginal


def run_batch(
    klass: Path, out: Path, jobs: int, grade_one: Callable, checkpoints: list[int]
) -> dict:
    """The class graded once by grade_all with `jobs`: wall, CPU (this process and its children),
    throughput, per-submission cost; then the gradebook write times (`gradebook_writes`)."""
    course = load_course(ROOT)
    la0, c0, s0, t0 = load(), cpu_children(), cpu_self(), time.perf_counter()
    progress = Progress(t0)
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
    cpu = cpu_children() - c0 + cpu_self() - s0
    la1, n = load(), len(outcome.results)
    cumulative, marginal = per_submission(progress.done, checkpoints)
    record_s = gradebook_writes(outcome.results.values(), course, out / "bench-gradebook.db")
    rec = {str(k): round(record_s[k - 1] * 1e3, 2) for k in checkpoints if k <= len(record_s)}
    return {
        "jobs": jobs,
        "submissions": n,
        "failed": len(outcome.failed),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "per_minute": round(n / wall * 60, 2),
        "seconds_per_submission": round(wall / n, 3),
        "per_submission_after": cumulative,
        "marginal_per_submission": marginal,
        "gradebook_record_ms": rec,
        "load": [la0, la1],
    }


def batch_probe(grade_entry: Callable) -> dict:
    """The batch's isolation probe for grade_entry, as `grader grade-all` hands it to its
    children (run once per batch), where this tree's grade_entry takes one."""
    if "probe" not in inspect.signature(grade_entry).parameters:
        return {}
    return {"probe": probe()}


def _print(res: dict, checkpoints: list[int]) -> None:
    j1, j2 = res["j1"], res["j2"]
    print(
        f"\n## 2. Class throughput ({res['submissions']} submissions: {', '.join(CLASS_MIX)} in "
        f"turn; assignments: {res['assignments']})\n"
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
        f"\nspeedup -j 2 / -j 1: {res['speedup']:.2f}x (target {res['target']:g}x: "
        f"{'met' if res['met'] else 'NOT met'})\n"
    )
    rows = [
        [k]
        + [r["per_submission_after"].get(str(k), "-") for r in (j1, j2)]
        + [r["gradebook_record_ms"].get(str(k), "-") for r in (j1, j2)]
        for k in checkpoints
    ]
    headers = ["after k submissions", "-j1 s/sub (cumulative)", "-j2 s/sub (cumulative)"]
    print(table([*headers, "-j1 gradebook write ms", "-j2 gradebook write ms"], rows))
    print(
        "marginal s/sub (-j 2): "
        + ", ".join(f"{k}: {v:.2f}" for k, v in j2["marginal_per_submission"].items())
        + f"; last/first block {res['per_submission_growth']:.2f}x"
    )


def _before_after(res: dict, b1: dict, b2: dict, trees: tuple[Tree, Tree]) -> None:
    """Add `before` and `compare` to the part's JSON and print the side-by-side table."""
    res["before"] = {"j1": b1, "j2": b2, "speedup": ratio(b1["wall_s"], b2["wall_s"])}
    res["compare"] = {}
    rows = []
    for key, a, b in (("j1", res["j1"], b1), ("j2", res["j2"], b2)):
        for field, unit in (("wall_s", "s"), ("seconds_per_submission", "s"), ("cpu_s", "s")):
            c = compared(summary([a[field]]), summary([b[field]]), [*a["load"], *b["load"]])
            res["compare"][f"{key}_{field}"] = c
            rows.append((f"-j {key[1]} {field.removesuffix('_s').replace('_', ' ')}", unit, c))
    print_compare("2. Class throughput, before and after", trees, rows)


def _in_trees(klass: Path, tmp: Path, assignments, checkpoints, trees: tuple[Tree, Tree]) -> dict:
    """Each tree's own run_batch in a child process, the trees in turn for each job count."""
    return {
        (tree.label, jobs): tree.call(
            "run_batch",
            klass=klass,
            out=tmp / f"out-{tree.label}-j{jobs}",
            jobs=jobs,
            grade_one={"assignments": assignments},
            checkpoints=checkpoints,
        )
        for jobs in (1, 2)
        for tree in trees
    }


def part_class(
    tmp: Path, n: int, assignments: list[str] | None, trees: tuple[Tree, Tree] | None = None
) -> dict:
    """Part 2: a synthetic class of n submissions with grade_all, 1 and 2 jobs (with `trees`:
    each tree's own run_batch in a child process, the trees in turn for each job count)."""
    klass = synthetic_class(sample_class(tmp / "sample"), tmp / "class", n)
    if assignments:
        grade_one = functools.partial(grade_some, root=str(ROOT), assignments=assignments)
    else:
        grade_one = functools.partial(grade_entry, root=str(ROOT), **batch_probe(grade_entry))
    checkpoints = checkpoints_for(n)
    if trees:
        runs = _in_trees(klass, tmp, assignments, checkpoints, trees)
        j1, j2 = runs[trees[0].label, 1], runs[trees[0].label, 2]
    else:
        j1 = run_batch(klass, tmp / "out-j1", 1, grade_one, checkpoints)
        j2 = run_batch(klass, tmp / "out-j2", 2, grade_one, checkpoints)
    speedup = ratio(j1["wall_s"], j2["wall_s"])
    blocks = list(j2["marginal_per_submission"].values())
    res = {
        "submissions": n,
        "mix": list(CLASS_MIX),
        "assignments": assignments or "all",
        "j1": j1,
        "j2": j2,
        "speedup": speedup,
        "target": TARGETS["j2_speedup"],
        "met": speedup >= TARGETS["j2_speedup"],
        "per_submission_growth": ratio(blocks[-1], blocks[0]),
    }
    _print(res, checkpoints)
    if trees:
        _before_after(res, runs[trees[1].label, 1], runs[trees[1].label, 2], trees)
    return res
