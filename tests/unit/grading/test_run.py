"""`grader run`: a notebook top to bottom without Jupyter, every code cell (self-checks and demos
included), a failed cell named as `grader check` names it, the cells after it still run."""

from __future__ import annotations

from pathlib import Path

import jupytext
from factories import ROOT

from grader.grading.run import run_notebook

AID = "m9_roofline"  # a course assignment id; the notebook under it is this test's own
NOTEBOOK = """\
# %% [markdown]
# ## 1. Scratch

# %%
print("first cell ran")

# %%
print(undefined_scratch_name)

# %% nbgrader={"grade": true, "grade_id": "check_x", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
print("self-check ran")

# %% tags=["demo"]
print("demo ran")
"""  # noqa: E501


def _submission(tmp_path: Path, suffix: str) -> Path:
    folder = tmp_path / "sub" / AID
    folder.mkdir(parents=True)
    nb = jupytext.reads(NOTEBOOK, fmt="py:percent")
    jupytext.write(
        nb, folder / f"{AID}{suffix}", fmt="ipynb" if suffix == ".ipynb" else "py:percent"
    )
    return tmp_path / "sub"


def test_every_cell_runs_and_a_failed_cell_is_named_as_check_names_it(tmp_path, capfd):
    code = run_notebook(ROOT, AID, _submission(tmp_path, ".ipynb"))
    out = capfd.readouterr().out
    assert code == 1
    for said in ("first cell ran", "self-check ran", "demo ran"):
        assert said in out, out
    assert "ran 4 code cells of m9_roofline.ipynb: 1 failed" in out
    assert (
        'm9_roofline.ipynb code cell 2 (under "## 1. Scratch"; an untagged cell, starting '
        "`print(undefined_scratch_name)`), line 1 of the cell: NameError"
    ) in out


def test_demos_can_be_left_out_and_a_py_names_its_line(tmp_path, capfd):
    sub = _submission(tmp_path, ".py")
    code = run_notebook(ROOT, AID, sub, demos=False)
    out = capfd.readouterr().out
    assert code == 1 and "demo ran" not in out and "self-check ran" in out
    text = (sub / AID / f"{AID}.py").read_text().splitlines()
    line = text.index("print(undefined_scratch_name)") + 1
    assert f"m9_roofline.py line {line} (an untagged cell" in out, out
