"""`grader run ID`: a student's notebook run top to bottom, headless, as Jupyter's "Run all".

The student profile has no Jupyter server, nbclient or nbconvert, and needs none: the grader
already runs a notebook cell by cell (`grader.sandbox.harness.load_cells`, which grading and
`grader check` use). `grader run` runs every code cell of the notebook chosen by grading's rule
(`intake.pair`: the one you changed), the self-checks and the demos included (`--skip-demos`
leaves the demos out), in order, in a fresh Python process whose working folder is the
notebook's own, as Jupyter's is. Lines starting with `%` or `!` are skipped, as grading skips
them. A cell that fails is reported with the name `grader check` and grading give it (its line
of the .py, or its position among the code cells and the heading above it in an .ipynb), and the
cells after it still run, as in grading; what the cells print is printed as they run.

Like `grader check`, it runs the student's own code on their own machine: no sandbox, no limits
(Ctrl-C stops it), nothing recorded. Without a GPU the notebook's own setup cell switches to
Numba's CUDA simulator, as it does in Jupyter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from grader.core.course import load_course
from grader.core.errors import UsageError
from grader.grading.intake import pair, release_for
from grader.grading.profile import shown_path

MODULE = "grader_run_notebook"


def run_notebook(
    root: Path, assignment: str, submission: Path | None = None, demos: bool = True
) -> int:
    """Run the notebook of `assignment` under `submission` (default: the course's exercises/) in
    a child process; its exit status (0: every cell ran; 1: a cell failed)."""
    load_course(root).assignment(assignment)
    submission = submission.resolve() if submission else root / "exercises"
    chosen = pair(submission, assignment, release_for(submission, root / "exercises"))
    if chosen.path is None:
        raise UsageError(chosen.error or f"no notebook of {assignment} under {submission}")
    for w in chosen.warnings:
        print(f"warning: {w}", flush=True)
    path = chosen.path.resolve()
    print(f"running {shown_path(path, root)}, every code cell in order", flush=True)
    env = {**os.environ, "MPLBACKEND": os.environ.get("MPLBACKEND", "Agg")}
    args = [sys.executable, "-m", "grader.grading.run", str(path), "1" if demos else "0"]
    return subprocess.run(args, cwd=path.parent, env=env, check=False).returncode


def main(path: str, demos: bool) -> int:
    """In the child: run the cells, then say which failed (`CellFailure.where`, as check)."""
    from grader.core.notebook import read_graded_cells  # lazy: the child's
    from grader.sandbox.harness import load_cells  # lazy: the child's

    p = Path(path)
    cells = read_graded_cells(p, every=True, demos=demos)
    sys.path.insert(0, str(p.parent))
    _, failures, _ = load_cells(p, MODULE, cells)
    print(f"\nran {len(cells)} code cells of {p.name}: ", end="")
    if not failures:
        print("every one ran")
        return 0
    print(f"{len(failures)} failed")
    for f in failures:
        print(f"\n{f.where}: {f.error['type']}: {f.error['message']}\n{f.error['traceback']}")
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2] == "1"))
