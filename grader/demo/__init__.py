"""The main job: run the solution notebooks headlessly, score the solutions, grade a class.

`grader demo` is what a new instructor runs first: it shows every moving part on this machine
(no GPU needed) and leaves the reports and the gradebook in one folder. `run_demo` is that job
(`grader demo`; `python -m grader.demo OUT`); the sample class it grades is `samples`.
"""

from __future__ import annotations

import csv
import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from grader.batch import STATE, StateFile, run_class
from grader.core import device
from grader.core.course import Course, load_course
from grader.core.errors import ExitCode
from grader.core.kernels import ipc_kernel_config
from grader.core.tables import format_table, points
from grader.demo.samples import build_sample_class, replace_region
from grader.reports.class_report import terminal_summary, write_class_report
from grader.suites.runner import run_assignment

__all__ = ["build_sample_class", "execute_notebooks", "replace_region", "run_demo"]


def execute_notebooks(root: Path, ids: list[str], timeout: int = 600) -> list[list[object]]:
    """Execute each solution notebook top to bottom in a scratch copy of the course."""
    # lazy: jupytext and nbclient load Jupyter's client stack, which `--no-execute` never needs
    import jupytext
    from nbclient import NotebookClient

    rows = []
    with tempfile.TemporaryDirectory(prefix="demo-nb-") as tmp:
        shutil.copy(root / "course.toml", tmp)
        for aid in ids:
            folder = Path(tmp) / "solutions" / aid
            folder.mkdir(parents=True)
            nb = jupytext.read(root / "solutions" / aid / f"{aid}.py")
            started = time.perf_counter()
            with ipc_kernel_config() as cfg:
                client = NotebookClient(
                    nb,
                    timeout=timeout,
                    kernel_name="python3",
                    resources={"metadata": {"path": str(folder)}},
                    config=cfg,
                )
                try:
                    client.execute()
                    status = "ok"
                except Exception as exc:  # nbclient raises CellExecutionError and friends
                    status = f"failed: {type(exc).__name__}: {str(exc).splitlines()[-1][:120]}"
            code_cells = sum(c.cell_type == "code" for c in nb.cells)
            rows.append([aid, code_cells, round(time.perf_counter() - started, 1), status])
    return rows


def run_demo(root: Path, out: Path, execute: bool = True, jobs: int = 2) -> int:
    """Run the notebooks (unless `execute` is false), score the solutions, grade the sample class
    into `out/grades` and write its class report; 0 when every step did what it should."""
    course = load_course(root)
    out.mkdir(parents=True, exist_ok=True)
    ok = True
    if execute:
        print("1. Executing the solution notebooks headlessly")
        rows = execute_notebooks(root, course.assignment_ids)
        print(format_table(["notebook", "code cells", "seconds", "status"], rows))
        ok &= all(r[3] == "ok" for r in rows)

    print(
        "\n2. Every suite against the solutions (in-process, "
        f"{'GPU' if not _simulator() else 'CUDA simulator'})"
    )
    class_dir = out / "class"
    students = build_sample_class(course, class_dir)
    metrics = class_dir / "ada_reference" / "metrics.json"
    rows = []
    for aid in course.assignment_ids:
        started = time.perf_counter()
        r = run_assignment(root, aid, root / "solutions", metrics, course=course)
        skipped = sum(t.outcome == "skipped" for t in r.tests)
        rows.append(
            [
                aid,
                points(r.score, r.max_score),
                len(r.tests),
                skipped,
                round(time.perf_counter() - started, 1),
            ]
        )
        ok &= abs(r.score - sum(t.max_score for t in r.tests if t.outcome != "skipped")) < 1e-6
    print(format_table(["assignment", "score", "tests", "skipped (need GPU)", "seconds"], rows))

    print(f"\n3. Grading the sample class ({', '.join(students)}) in the sandbox, -j {jobs}")
    listing = _class_listing(course, class_dir, students)
    code = run_class(listing, out / "grades", jobs=jobs, shard=None, root=root)
    print(f"\nReports, gradebook and grades.csv are in {out / 'grades'}")

    print("\n4. The class report (grader class-report)")
    grades = out / "grades"
    report, paths = write_class_report(grades, course, StateFile(grades / STATE).read())
    print(terminal_summary(report))
    print(f"\nClass report: {paths['html']} (and {paths['markdown'].name}, {paths['png'].name})")
    return ExitCode.OK if ok and code == ExitCode.OK else ExitCode.FAILED


def _class_listing(course: Course, class_dir: Path, students: list[str]) -> Path:
    """`class.csv` beside the class: each submission with a trusted time, as an instructor would
    take it from the grading runs. One student hands in a day and a half after the first due
    date, so the late policy and the class report's late table have something to show."""
    first_due = min(a.due for a in course.assignments)
    path = class_dir.parent / "class.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["student_id", "path", "submitted_at"])
        for s in students:
            late = s.startswith("cy_")
            when = first_due + (timedelta(hours=33) if late else -timedelta(hours=6))
            w.writerow([s, f"{class_dir.name}/{s}", when.isoformat()])
    return path


def _simulator() -> bool:
    return not device.has_gpu()
