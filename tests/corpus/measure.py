"""Grade one corpus case (or the reference) in this fresh process; print its cost as JSON.

    python tests/corpus/measure.py CASE|reference|reference:ASSIGNMENT

The trusted process is this one: its peak resident memory (ru_maxrss of RUSAGE_SELF, which
leaves out the sandboxed workers, its children) and CPU time, and the grading's wall time. The
submission is built in a child process first, so that building it (50,000 cells of JSON) does not
count. Used by tests/unit/grading/test_bounds_cost.py to hold each bounds case within 2x of the
reference.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import build as corpus  # this folder's: a script's own folder is first on its path

REPO = Path(__file__).resolve().parents[2]


def build(name: str, root: Path, sub: Path) -> str:
    """Write the submission of case `name` (or the reference) into `sub`; its assignment id."""
    ctx = corpus.make_ctx(root, REPO)
    sub.mkdir()
    if name.startswith("reference"):  # "reference" alone: m9_roofline's
        aid = name.partition(":")[2] or corpus.M9
        corpus.write_fork(sub, {aid: ctx.solutions[aid]}, ctx=ctx)
        return aid
    case = corpus.by_name()[name]
    case.build(sub, ctx)
    return case.expect.assignment


def main(name: str) -> dict:
    from grader.core.course import load_course
    from grader.grading.grade import grade_submission

    with tempfile.TemporaryDirectory(prefix="corpus-measure-") as tmp:
        root = corpus.make_corpus_root(REPO, Path(tmp) / "root")
        sub = Path(tmp) / "submission"
        built = subprocess.run(
            [sys.executable, __file__, "--build", name, str(root), str(sub)],
            capture_output=True, text=True, check=True, timeout=600,
        )
        assignment = built.stdout.strip()
        course = load_course(root)
        cpu0 = time.process_time()
        wall0 = time.perf_counter()
        result = grade_submission(sub, student=name.replace("_", "-").replace(":", "-"),
                                  assignments=[assignment],
                                  course=course)
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
    a = result.assignments[0]
    return {
        "case": name,
        "wall_s": round(wall, 2),
        "trusted_cpu_s": round(cpu, 2),
        "trusted_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "score": round(a.score, 3),
        "max_score": round(a.max_score, 3),
        # the GPU-only tests skip in the simulator: full marks are the rest
        "skipped_points": round(sum(t.max_score for t in a.tests if t.outcome == "skipped"), 3),
    }


if __name__ == "__main__":
    if sys.argv[1] == "--build":
        print(build(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])))
    else:
        print(json.dumps(main(sys.argv[1])))
