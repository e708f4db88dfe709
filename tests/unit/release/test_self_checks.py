"""Every self-check cell passes against a solution written in another style, and leaves the
student's namespace as it found it.

A self-check is public, quick and run by the student, not by the grader (grading skips test
cells), so two faults in one hide from the grading suites: a check that only the reference's own
way of writing a function passes, and a check that defines a module-level name (`_exact = {...}`)
that silently replaces a student's helper of the same name, breaking the notebook while grading
still passes. Here each notebook is rebuilt with the solution cells of
tests/unit/data/alt_style/<id>.py (another student's style, with helpers of their own named
like the old self-checks' leftovers), every code cell but the demos is run in a fresh
interpreter, in order, in one namespace, and each self-check cell must pass and neither add nor
rebind a name. The same notebook is then graded (in-process) to full marks.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest
from factories import ROOT

from grader.core.course import load_course
from grader.suites.runner import run_assignment

ALT = ROOT / "tests" / "unit" / "data" / "alt_style"

# Runs in a fresh interpreter (the simulator chosen before numba is imported): every code cell
# of the notebook but the demos, in order, in one namespace. For each cell: its grade_id,
# whether it is a self-check, its error, and the names it added or rebound. Then, for M9, the
# metrics record of the notebook's own functions, as its last cell writes it.
RUNNER = r"""
import json, sys, traceback
nb = json.load(open(sys.argv[1]))
ns = {"__name__": "__main__"}
cells = []
for cell in nb["cells"]:
    if cell["cell_type"] != "code" or "demo" in cell["metadata"].get("tags", []):
        continue
    nbg = cell["metadata"].get("nbgrader", {})
    src = "".join(cell["source"])
    before = {k: id(v) for k, v in ns.items()}
    error = None
    try:
        exec(compile(src, nbg.get("grade_id", "cell"), "exec"), ns)
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}" + traceback.format_exc()[-600:]
    after = {k: id(v) for k, v in ns.items()}
    cells.append({
        "grade_id": nbg.get("grade_id"),
        "self_check": bool(nbg.get("grade")) and not nbg.get("solution"),
        "error": error,
        "added": sorted(set(after) - set(before)),
        "rebound": sorted(k for k in before if k in after and after[k] != before[k]),
        "removed": sorted(set(before) - set(after)),
    })
helpers = {k: getattr(ns.get(k), "__module__", None) for k in ("_exact", "_t4_like", "_lanes")}
record = None
if "m9_record" in ns:
    gpu = ns["load_hardware"]()[ns["COURSE_GPU"]]
    record = ns["m9_record"](ns["COURSE_MODEL"], gpu, ns["CONTEXT_LEN"])
    ns["save_metric"](sys.argv[2], "m9_roofline", record)
print(json.dumps({"cells": cells, "helpers": sorted(k for k in helpers if k in ns)}))
"""


def alt_notebook(assignment_id: str):
    """The reference notebook with each solution cell that the alt-style file defines replaced
    by that definition, and the file's other top-level definitions in a cell before the first
    exercise."""
    nb = jupytext.read(ROOT / "solutions" / assignment_id / f"{assignment_id}.py")
    text = (ALT / f"{assignment_id}.py").read_text(encoding="utf-8")
    lines = text.splitlines()
    defs: dict[str, str] = {}
    helpers: list[str] = []
    solution_ids = {
        c.metadata.get("nbgrader", {}).get("grade_id")
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    for node in ast.parse(text).body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module docstring
        start = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
        source = "\n".join(lines[start - 1 : node.end_lineno])
        name = getattr(node, "name", None)
        if name in solution_ids:
            defs[name] = source
        else:
            helpers.append(source)
    replaced = set()
    first = None
    for index, cell in enumerate(nb.cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and first is None:
            first = index
        if grade_id in defs:
            cell.source = defs[grade_id]
            replaced.add(grade_id)
    assert replaced == set(defs), f"no solution cell for {set(defs) - replaced}"
    helper_cell = jupytext.reads("# %%\n" + "\n\n\n".join(helpers) + "\n", fmt="py:percent")
    nb.cells.insert(first, helper_cell.cells[0])
    return nb, replaced


def run_alone(nb, tmp_path: Path) -> dict:
    path = tmp_path / "notebook.ipynb"
    path.write_text(jupytext.writes(nb, fmt="ipynb"), encoding="utf-8")
    env = {**os.environ, "GRADER_DEVICE": "cpu", "NUMBA_ENABLE_CUDASIM": "1", "MPLBACKEND": "Agg"}
    out = subprocess.run(
        [sys.executable, "-c", RUNNER, str(path), str(tmp_path / "metrics.json")],
        capture_output=True,
        text=True,
        cwd=ROOT,  # course.toml found at the root, as in a clone
        env=env,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id", ["gpu_fundamentals", "m9_roofline"])
def test_every_self_check_passes_another_style_and_keeps_its_names(assignment_id, tmp_path):
    nb, replaced = alt_notebook(assignment_id)
    assert len(replaced) >= 9, replaced
    ran = run_alone(nb, tmp_path)
    cells = ran["cells"]
    checks = [c for c in cells if c["self_check"]]
    assert len(checks) >= 9
    failed = [f"{c['grade_id']}: {c['error']}" for c in checks if c["error"]]
    assert failed == [], failed
    leaky = [
        (c["grade_id"], c["added"], c["rebound"], c["removed"])
        for c in checks
        if c["added"] or c["rebound"] or c["removed"]
    ]
    assert leaky == [], f"self-check cells that leave or change names: {leaky}"
    # The student's own helpers (named as the old self-checks' leftovers) are still theirs.
    assert {"_exact"} <= set(ran["helpers"]), ran["helpers"]
    assert not [c for c in cells if c["error"]], [c["grade_id"] for c in cells if c["error"]]

    # ... and the same notebook earns every point the CPU can give, graded in-process.
    submission = tmp_path / "submission"
    (submission / assignment_id).mkdir(parents=True)
    jupytext.write(nb, submission / assignment_id / f"{assignment_id}.py", fmt="py:percent")
    result = run_assignment(
        ROOT, assignment_id, submission, metrics=tmp_path / "metrics.json", identity="alt-style"
    )
    counted = [t for t in result.tests if t.outcome != "skipped"]
    lost = [(t.name, t.feedback[:300]) for t in counted if t.score != t.max_score]
    assert result.error is None and lost == [], lost
    course = load_course(ROOT)
    gpu_only = sum(t.max_score for t in result.tests if t.outcome == "skipped")
    assert sum(t.score for t in counted) + gpu_only == course.assignment(assignment_id).points
