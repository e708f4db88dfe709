"""Intake bounds (issue 12): notebooks past the cell and source limits are that assignment's error,
refused before jupytext parses them; warnings about protected files are no oracle."""

from __future__ import annotations

import json
import time

from test_intake import DONE, make_course, to_ipynb

from grader.core.notebook import MAX_CELLS, MAX_SOURCE_BYTES
from grader.grading import intake


def _submit(tmp_path, files: dict[str, str]):
    course = make_course(tmp_path / "course")
    sub = tmp_path / "sub"
    for rel, text in files.items():
        (sub / rel).parent.mkdir(parents=True, exist_ok=True)
        (sub / rel).write_text(text)
    return course, sub


def test_fifty_thousand_cells_refused_fast(tmp_path):
    nb = json.loads(to_ipynb(DONE))
    nb["cells"] += [
        {
            "cell_type": "code",
            "execution_count": None,
            "id": f"c{i}",
            "metadata": {},
            "outputs": [],
            "source": "",
        }
        for i in range(50_000)
    ]
    course, sub = _submit(
        tmp_path,
        {
            "exercises/a/a.ipynb": json.dumps(nb),
        },
    )
    start = time.perf_counter()
    got = intake.prepare(sub, tmp_path / "scratch", course)
    took = time.perf_counter() - start
    assert "a" not in got.notebooks
    assert "values" in got.errors["a"] or "cells" in got.errors["a"]
    assert "exercises/a/a.ipynb" in got.errors["a"]
    assert took < 10, took  # unbounded, jupytext took 31 s on this notebook


def test_cell_and_source_limits_on_py(tmp_path):
    many = DONE + "\n# %%\n" * (MAX_CELLS + 1)
    big = DONE + "# %%\nx = '" + "y" * (MAX_SOURCE_BYTES + 1) + "'\n"
    for name, text, words in (
        ("many", many, "over the limit of 1,000"),
        ("big", big, "MB of cell source"),
    ):
        course, sub = _submit(tmp_path / name, {"exercises/a/a.py": text})
        got = intake.prepare(sub, tmp_path / name / "scratch", course)
        assert words in got.errors["a"], got.errors["a"]
    course, sub = _submit(tmp_path / "ok", {"exercises/a/a.py": DONE + "\n# %%\n" * 50})
    assert "a" in intake.prepare(sub, tmp_path / "ok" / "scratch", course).notebooks


def test_warning_does_not_say_whether_a_private_file_matches(tmp_path):
    course, sub = _submit(tmp_path, {"exercises/a/a.py": DONE})
    secret = course.root / "tests" / "hidden" / "a" / "test_a_hidden.py"
    secret.parent.mkdir(parents=True)
    secret.write_text("def test_secret():\n    assert True\n")
    guesses = {"right": secret.read_text(), "wrong": "def test_secret():\n    assert False\n"}
    seen = {}
    for name, text in guesses.items():
        target = sub / "tests" / "hidden" / "a" / "test_a_hidden.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        got = intake.prepare(sub, tmp_path / f"scratch-{name}", course)
        seen[name] = [w for w in got.warnings if "tests/hidden" in w]
    assert seen["right"] == seen["wrong"] and len(seen["right"]) == 1
    assert "changed or added" in seen["right"][0] and "no effect" in seen["right"][0]
