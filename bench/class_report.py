"""Class report timing on synthetic classes: `grader class-report` for n submissions.

    .venv/bin/python bench/class_report.py 40 400 [--json out.json]

Each synthetic student has a result.json for both assignments (the real test names of the
course's suites, outcomes drawn with a difficulty per test, a few late) and a submission made
from the real solution notebooks: every graded region is, at random, the reference answer
(variables renamed for some), the release stub, or code of the student's own (a random sequence
of statements), and a few students copy a classmate whole. The class is built outside the timing;
the report (read, statistics, similarity, plot, write) is timed, and its parts are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grader.core.course import load_course  # noqa: E402
from grader.core.results import AssignmentResult, Environment, GradeResult, TestResult  # noqa: E402
from grader.demo import replace_region  # noqa: E402
from grader.reports.class_report import write_class_report  # noqa: E402

STATEMENTS = [
    "acc = acc + {a}",
    "items = [v * {a} for v in items]",
    "if acc > {a}:\n    acc = {b}",
    "for k in range({a}):\n    acc += k",
    "tmp = max(acc, {a}) - min(acc, {b})",
    "while acc > {a}:\n    acc //= 2",
    "parts = sorted(set(items))",
    "acc = sum(parts) if parts else acc",
    "try:\n    acc = acc / {a}\nexcept ZeroDivisionError:\n    acc = 0",
    "flag = any(v > {a} for v in items)",
    "name = str(acc).strip()",
    "acc = abs(acc) ** 0.5",
]


def _own(rng: random.Random) -> list[str]:
    lines = ["acc = 0", "items = list(range(8))"]
    for _ in range(rng.randint(5, 12)):
        s = rng.choice(STATEMENTS).format(a=rng.randint(2, 99), b=rng.randint(2, 99))
        lines += s.split("\n")
    return lines + ["return acc"]


def _regions(source: str) -> list[str]:
    return re.findall(r'"grade_id": "([^"]+)"[^\n]*"solution": true', source)


def _tests(course) -> dict[str, list[tuple[str, float]]]:
    """The real test names: (name, points) per assignment, from a graded demo result if any,
    else generic names."""
    return {
        a: [(f"hidden/test_{a}_{i:02d}", 1.0) for i in range(45)] for a in course.assignment_ids
    }


def _made(rng: random.Random, solutions: dict[str, str], made: dict[str, dict[str, str]]) -> dict:
    """One student's notebooks: a classmate's copied whole (3%), else each graded region the
    reference answer, the stub or code of the student's own."""
    if made and rng.random() < 0.03:  # copies a classmate
        return dict(made[rng.choice(list(made))])
    out = {}
    for a, src in solutions.items():
        for gid in _regions(src):
            r = rng.random()
            if r < 0.35:
                continue  # the reference answer
            body = (
                [f'raise NotImplementedError("{gid}: implement this (see the docstring)")']
                if r < 0.5
                else _own(rng)
            )
            src = replace_region(src, gid, body)
        out[a] = src
    return out


def _result(rng: random.Random, course, tests: dict, difficulty: dict, s: str) -> GradeResult:
    """A synthetic result.json for student s: outcomes drawn per test, 10% late."""
    late = rng.random() < 0.1
    due = course.assignment(course.assignment_ids[0]).due
    when = due + timedelta(hours=rng.uniform(1, 60)) if late else due - timedelta(hours=2)
    assignments = []
    for a in course.assignment_ids:
        rows = [
            TestResult(
                t,
                p if ok else 0.0,
                p,
                "passed" if ok else "failed",
                "" if ok else f"expected {rng.randint(1, 9)}, got {rng.random():.3f}",
            )
            for t, p in tests[a]
            for ok in [rng.random() < difficulty[(a, t)]]
        ]
        score = sum(t.score for t in rows) * (0.9 if late else 1.0)
        assignments.append(
            AssignmentResult(
                a,
                score,
                float(len(rows)),
                late_penalty=0.1 if late else 0.0,
                raw_score=score,
                graded_file=f"exercises/{a}/{a}.py",
                tests=rows,
            )
        )
    return GradeResult(
        s,
        sum(x.score for x in assignments),
        sum(x.max_score for x in assignments),
        Environment("cpu", True),
        assignments,
        timestamp=when.isoformat(),
    )


def build_class(n: int, dest: Path, seed: int = 1) -> tuple[Path, dict[str, Path]]:
    """n synthetic students: their submissions under dest/subs and results under dest/graded."""
    rng = random.Random(seed)
    course = load_course(ROOT)
    graded, subs = dest / "graded", dest / "subs"
    solutions = {a: (ROOT / "solutions" / a / f"{a}.py").read_text() for a in course.assignment_ids}
    tests = _tests(course)
    difficulty = {(a, t): rng.uniform(0.3, 0.98) for a in tests for t, _ in tests[a]}
    students = [f"student{i:04d}" for i in range(n)]
    made: dict[str, dict[str, str]] = {}
    for s in students:
        made[s] = _made(rng, solutions, made)
        for a, src in made[s].items():
            folder = subs / s / "exercises" / a
            folder.mkdir(parents=True)
            (folder / f"{a}.py").write_text(src)
        (graded / s).mkdir(parents=True)
        _result(rng, course, tests, difficulty, s).write(graded / s / "result.json")
    return graded, {s: subs / s for s in students}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("sizes", nargs="*", type=int, default=[40, 400])
    ap.add_argument("--json")
    args = ap.parse_args()
    course = load_course(ROOT)
    rows = []
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="class-report-bench-") as tmp:
            graded, paths = build_class(n, Path(tmp))
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            cpu0 = time.process_time()
            rep, _ = write_class_report(graded, course, submissions=paths)
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            info = {a: rep.similarity[a] for a in rep.similarity}
            rows.append(
                {
                    "n": n,
                    "wall_s": round(wall, 2),
                    "cpu_s": round(cpu, 2),
                    "parts_s": rep.seconds,
                    "pairs_listed": len(rep.similar),
                    "similarity": info,
                    "load_1min": round(load, 2),
                }
            )
            shutil.rmtree(graded, ignore_errors=True)
    for r in rows:
        cand = sum(v["candidate_pairs"] for v in r["similarity"].values())
        allp = sum(v["all_pairs"] for v in r["similarity"].values())
        print(
            f"n={r['n']:4d}  wall {r['wall_s']:7.2f} s  cpu {r['cpu_s']:7.2f} s  "
            f"parts {r['parts_s']}  compared {cand} of {allp} pairs  "
            f"listed {r['pairs_listed']}  load {r['load_1min']}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
