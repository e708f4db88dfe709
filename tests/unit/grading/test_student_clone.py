"""A student's own clone: `grader check` and `grader grade .` pick the same notebook and agree."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest
from factories import ROOT

from grader.release import export_student

AID = "m9_roofline"


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """The exported student repository, where the student did the work in Colab: the .ipynb
    holds the solution, the .py beside it is the untouched release stub."""
    dest = export_student(ROOT, tmp_path_factory.mktemp("clone") / "repo")
    nb = jupytext.read(ROOT / "solutions" / AID / f"{AID}.py")
    jupytext.write(nb, dest / "exercises" / AID / f"{AID}.ipynb")
    (dest / ".venv" / "lib").mkdir(parents=True)
    for i in range(50):
        (dest / ".venv" / "lib" / f"m{i}.py").write_text("x = 1\n")
    return dest


def grader(clone: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "grader", *args],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_check_and_grade_agree_in_a_student_clone(clone: Path, tmp_path: Path) -> None:
    check = grader(clone, "check", AID)
    assert f"checked exercises/{AID}/{AID}.ipynb" in check.stdout, check.stdout + check.stderr
    out = tmp_path / "result.json"
    graded = grader(clone, "grade", ".", "--assignment", AID, "--json", str(out))
    assert graded.returncode == 0, graded.stderr
    result = json.loads(out.read_text())
    (a,) = result["assignments"]
    assert a["graded_file"] == f"exercises/{AID}/{AID}.ipynb"
    assert result["warnings"] == []  # .venv not walked, an untouched clone warns of nothing
    # the same public tests, the same outcomes
    rows = (re.match(r"(\S+)\s+\S+ / \S+\s+(\S+)", line) for line in check.stdout.splitlines())
    check_rows = {m[1]: m[2] for m in rows if m and m[1].startswith("public/")}
    grade_rows = {t["name"]: t["outcome"] for t in a["tests"] if t["name"].startswith("public/")}
    assert check_rows and check_rows == grade_rows
    assert sum(o == "passed" for o in check_rows.values()) >= 4  # the solution's work counted


def test_check_verbose_shows_whole_messages(clone: Path) -> None:
    short = grader(clone, "check", AID)
    assert "grader check -v" in short.stdout  # the metrics.json message is long
    full = grader(clone, "check", "-v", AID)
    long_lines = [line for line in full.stdout.splitlines() if "metrics.json not found" in line]
    assert long_lines and "…" not in long_lines[0]
    assert len(long_lines[0]) > len(
        next(x for x in short.stdout.splitlines() if "metrics.json not found" in x)
    )
