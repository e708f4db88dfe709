"""grader.release: the student release, --check, atomicity, bad sources, leak proof, export."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest
from factories import ROOT, course_tree
from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import ClearHiddenTests, ClearOutput, ClearSolutions, LockCells

from grader import release as rel
from grader.core.course import load_course
from grader.release import (
    ExportError,
    export_student,
    is_generic,
    leak_check,
    release,
    verify,
)

IDS = tuple(load_course(ROOT).assignment_ids)  # a scratch course has every real assignment

SOURCE = '''\
# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A tiny assignment
#
# Write `double`, `triple` and `quadruple`.

# %%
import math

# %% nbgrader={"grade": false, "grade_id": "double", "locked": false, "schema_version": 3, "solution": true, "task": false}
def double(x):
    """Return 2 * x."""
    ### BEGIN SOLUTION
    doubled_value = math.fsum([x, x])
    return doubled_value
    ### END SOLUTION

# %% nbgrader={"grade": false, "grade_id": "triple_cell", "locked": false, "schema_version": 3, "solution": true, "task": false}
def triple(
    x,
):
    """Return 3 * x; ValueError for None."""
    if x is None:
        ### BEGIN SOLUTION
        raise ValueError("x must be a number, not None")
        ### END SOLUTION
    ### BEGIN SOLUTION
    tripled_value = x * 3
    return tripled_value
    ### END SOLUTION

# %% nbgrader={"grade": false, "grade_id": "quad_cell", "locked": false, "schema_version": 3, "solution": true, "task": false}
### BEGIN SOLUTION
def quadruple(x):
    return double(double(x))
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "check_double", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert double(2) == 4, "double(2) should be 4"
### BEGIN HIDDEN TESTS
assert double(21) == 42, "the secret hidden check"
### END HIDDEN TESTS

# %% tags=["demo"]
print(double(3))
'''  # noqa: E501

HIDDEN_TEST = """\
\"\"\"Stated rules:

- test_double_hidden: "Return 2 * x."
\"\"\"

import pytest


@pytest.mark.points(2)
def test_double_hidden(student):
    assert student.double(1234.5) == pytest.approx(2469.0), "hidden: large input"
"""


def make_course(root: Path) -> Path:
    """A course root with the real course.toml and a tiny source for each assignment."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "course.toml", root / "course.toml")
    for a in IDS:
        (root / "solutions" / a).mkdir(parents=True)
        (root / "solutions" / a / f"{a}.py").write_text(SOURCE, encoding="utf-8")
        (root / "tests" / "hidden" / a).mkdir(parents=True)
        (root / "tests" / "hidden" / a / f"test_{a}_hidden.py").write_text(HIDDEN_TEST)
    return root


def snapshot(tree: Path) -> dict[str, bytes]:
    return {
        p.relative_to(tree).as_posix(): p.read_bytes()
        for p in sorted(tree.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def course(tmp_path: Path) -> Path:
    return make_course(tmp_path / "course")


def src(root: Path, a: str = "m9_roofline") -> Path:
    return root / "solutions" / a / f"{a}.py"


# ---------------------------------------------------------------------------- release output


def test_release_writes_pair_deterministically(course: Path) -> None:
    report = release(course)
    assert report.ok, report.findings
    first = snapshot(course / "exercises")
    assert sorted(first) == sorted(f"{a}/{a}.{ext}" for a in IDS for ext in ("ipynb", "py"))
    again = release(course)
    assert again.ok and again.unchanged == list(IDS) and not again.written
    assert snapshot(course / "exercises") == first
    shutil.rmtree(course / "exercises")  # a from-scratch rebuild gives the same bytes too
    assert release(course).ok
    assert snapshot(course / "exercises") == first
    assert not list(course.glob(".release-*")), "staging directory left behind"


def test_pair_is_declared_and_keeps_nbgrader_metadata(course: Path) -> None:
    assert release(course).ok
    folder = course / "exercises" / "m9_roofline"
    nb = json.loads((folder / "m9_roofline.ipynb").read_text())
    assert nb["metadata"]["jupytext"] == {"formats": "ipynb,py:percent"}
    assert set(nb["metadata"]) == {"jupytext", "kernelspec"}
    graded = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]
    assert [c["metadata"]["nbgrader"]["grade_id"] for c in graded] == ["check_double"]
    meta = graded[0]["metadata"]["nbgrader"]
    assert meta["points"] == 1 and meta["schema_version"] == 3 and "checksum" in meta
    assert all(c.get("outputs", []) == [] for c in nb["cells"])
    py = (folder / "m9_roofline.py").read_text()
    assert "formats: ipynb,py:percent" in py
    back = jupytext.read(folder / "m9_roofline.py")
    assert [c.source for c in back.cells] == ["".join(c["source"]) for c in nb["cells"]]
    assert [dict(c.metadata) for c in back.cells] == [c["metadata"] for c in nb["cells"]]


def test_stubs_name_their_function_and_solutions_are_gone(course: Path) -> None:
    assert release(course).ok
    py = (course / "exercises" / "m9_roofline" / "m9_roofline.py").read_text()
    for name, count in (("double", 1), ("triple", 2), ("quadruple", 1)):
        stub = f'raise NotImplementedError("{name}: implement this (see the docstring)")'
        assert py.count(stub) == count, name
    for secret in ("doubled_value", "tripled_value", "not None", "double(double", "secret hidden"):
        assert secret not in py
    assert 'assert double(2) == 4, "double(2) should be 4"' in py  # the public self-check stays
    assert "BEGIN SOLUTION" not in py and "HIDDEN TESTS" not in py
    assert "__GRADER_STUB" not in py


def test_the_stub_step_is_an_nbgrader_preprocessor_in_the_pipeline() -> None:
    """The build runs nbgrader's own preprocessors in order; the stub step is one of them."""
    pipeline = rel.PIPELINE
    assert all(issubclass(step, Preprocessor) for step in pipeline)
    assert rel.StubSolutions in pipeline and issubclass(rel.StubSolutions, ClearSolutions)
    assert ClearSolutions not in pipeline, "StubSolutions stands in for it"
    order = [pipeline.index(s) for s in (LockCells, rel.StubSolutions, ClearOutput)]
    assert order == sorted(order) and ClearHiddenTests in pipeline


def test_release_time_whole_course_is_reported(course: Path) -> None:
    report = release(course)
    assert report.ok and report.seconds < 10
    assert "m9_roofline" in report.table() and "OK" in report.table()


# ---------------------------------------------------------------------------- --check


def test_check_names_stale_missing_and_extra_files(course: Path) -> None:
    assert not release(course, check=True).ok  # nothing released yet
    assert not (course / "exercises").exists(), "check must write nothing"
    assert release(course).ok
    assert release(course, check=True).ok
    ex = course / "exercises"
    (ex / "m9_roofline" / "m9_roofline.py").write_text("# edited by hand\n")
    (ex / "gpu_fundamentals" / "gpu_fundamentals.ipynb").unlink()
    (ex / "gpu_fundamentals" / "solution_copy.py").write_text("x = 1\n")
    (ex / "stray").mkdir()
    before = snapshot(ex)
    report = release(course, check=True)
    assert not report.ok
    text = "\n".join(report.findings)
    assert "exercises/m9_roofline/m9_roofline.py: differs" in text
    assert "exercises/gpu_fundamentals/gpu_fundamentals.ipynb: missing" in text
    assert "exercises/gpu_fundamentals/solution_copy.py: extra" in text
    assert "exercises/stray: extra" in text
    assert snapshot(ex) == before, "check must write nothing"
    one = release(course, ["m9_roofline"], check=True)
    assert [f.split(":")[0] for f in one.findings] == ["exercises/m9_roofline/m9_roofline.py"]


# ---------------------------------------------------------------------------- bad sources


def _line_of(text: str, needle: str, nth: int = 0) -> int:
    hits = [i + 1 for i, line in enumerate(text.splitlines()) if needle in line]
    return hits[nth]


BAD = {
    # name: (edit, needle whose line must be named, nth occurrence, words in the message)
    "unmatched_begin": (
        lambda s: s.replace(
            "    return doubled_value\n    ### END SOLUTION\n", "    return doubled_value\n", 1
        ),
        "### BEGIN SOLUTION",
        0,
        "unmatched",
    ),
    "unmatched_end": (
        lambda s: s.replace(
            '    """Return 2 * x."""\n    ### BEGIN SOLUTION\n', '    """Return 2 * x."""\n', 1
        ),
        "### END SOLUTION",
        0,
        "unmatched",
    ),
    "nested": (
        lambda s: s.replace(
            "    tripled_value = x * 3\n", "    ### BEGIN SOLUTION\n    tripled_value = x * 3\n", 1
        ),
        "### BEGIN SOLUTION",
        3,
        "nested",
    ),
    "outside_solution_cell": (
        lambda s: s.replace(
            '# %% nbgrader={"grade": false, "grade_id": "double", "locked": false, '
            '"schema_version": 3, "solution": true',
            '# %% nbgrader={"grade": false, "grade_id": "double", "locked": false, '
            '"schema_version": 3, "solution": false',
            1,
        ),
        "### BEGIN SOLUTION",
        0,
        "outside a solution cell",
    ),
    "missing_metadata": (
        lambda s: s.replace(
            "# %%\nimport math\n",
            "# %%\nimport math\n### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n",
        ),
        "### BEGIN SOLUTION",
        0,
        "without nbgrader metadata",
    ),
    "old_schema": (
        lambda s: s.replace(
            '"grade_id": "quad_cell", "locked": false, "schema_version": 3',
            '"grade_id": "quad_cell", "locked": false, "schema_version": 2',
        ),
        '"grade_id": "quad_cell"',
        0,
        "schema_version",
    ),
    "missing_key": (
        lambda s: s.replace(
            '"grade_id": "quad_cell", "locked": false, ', '"grade_id": "quad_cell", '
        ),
        '"grade_id": "quad_cell"',
        0,
        "lacks locked",
    ),
    "duplicate_grade_id": (
        lambda s: s.replace('"grade_id": "quad_cell"', '"grade_id": "double"'),
        '"grade_id": "double"',
        1,
        "duplicate grade_id 'double'",
    ),
    "graded_without_points": (
        lambda s: s.replace('"locked": true, "points": 1, ', '"locked": true, '),
        '"grade_id": "check_double"',
        0,
        "has no points",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_source_names_file_and_line_and_writes_nothing(course: Path, case: str) -> None:
    assert release(course).ok
    before = snapshot(course / "exercises")
    edit, needle, nth, words = BAD[case]
    bad = edit(SOURCE)
    assert bad != SOURCE, "the edit did not apply"
    src(course).write_text(bad)
    report = release(course)
    assert not report.ok
    where = f"solutions/m9_roofline/m9_roofline.py:{_line_of(bad, needle, nth)}:"
    assert any(f.startswith(where) and words in f for f in report.findings), report.findings
    assert snapshot(course / "exercises") == before, "a failed release must change nothing"
    assert not list(course.glob(".release-*"))


def test_failure_during_swap_rolls_back(course: Path, monkeypatch) -> None:
    assert release(course).ok
    before = snapshot(course / "exercises")
    for a in IDS:
        src(course, a).write_text(SOURCE.replace("Write `double`", "Now write `double`"))
    real_replace = os.replace
    calls = []

    def flaky(a, b):
        calls.append((a, b))
        if len(calls) == 4:  # old m9 moved aside after gpu_fundamentals was swapped in
            raise OSError("disk full")
        return real_replace(a, b)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OSError):
        release(course)
    monkeypatch.setattr(os, "replace", real_replace)
    assert snapshot(course / "exercises") == before


# ---------------------------------------------------------------------------- leak proof


def test_generic_lines() -> None:
    for line in (
        "return",
        "pass",
        "else:",
        "try:",
        "break",
        ")",
        "]",
        "return None",
        "    return total",
        "# a comment",
        "import numpy as np",
        "except ValueError:",
        "### BEGIN SOLUTION",
        '"""',
        "",
    ):
        assert is_generic(line), line
    for line in (
        "doubled_value = math.fsum([x, x])",
        "return tripled_value * 2",
        "blocks = (n + tpb - 1) // tpb",
        "if i < n:",
    ):
        assert not is_generic(line), line


def test_leak_proof_catches_solution_line_left_in_stub(course: Path) -> None:
    assert release(course).ok
    assert leak_check(course, course / "exercises") == []
    py = course / "exercises" / "m9_roofline" / "m9_roofline.py"
    lines = py.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"double: implement this' in line)
    lines.insert(at + 1, "    doubled_value = math.fsum([x, x])")
    py.write_text("\n".join(lines) + "\n")
    nbp = course / "exercises" / "m9_roofline" / "m9_roofline.ipynb"
    nb = json.loads(nbp.read_text())
    nb["cells"][-1]["source"] = ["x = 1\n", "tripled_value = x * 3"]
    nbp.write_text(json.dumps(nb))
    leaks = leak_check(course, course / "exercises")
    assert [(lk.path, lk.line, lk.cell, lk.text) for lk in leaks] == [
        ("m9_roofline/m9_roofline.ipynb", 2, len(nb["cells"]) - 1, "tripled_value = x * 3"),
        ("m9_roofline/m9_roofline.py", at + 2, None, "doubled_value = math.fsum([x, x])"),
    ]
    assert leaks[1].origin.startswith("solutions/")
    assert "m9_roofline/m9_roofline.py:" in str(leaks[1])


def test_leak_proof_catches_hidden_test_line_in_readme(course: Path, tmp_path: Path) -> None:
    tree = tmp_path / "export"
    tree.mkdir()
    (tree / "README.md").write_text(
        "# Hints\n\n    assert student.double(1234.5) == pytest.approx(2469.0), "
        '"hidden: large input"\n'
    )
    leaks = leak_check(course, tree)
    assert len(leaks) == 1 and leaks[0].path == "README.md" and leaks[0].line == 3
    assert leaks[0].origin == "tests/hidden/gpu_fundamentals/test_gpu_fundamentals_hidden.py:11"
    # a hidden-test region of a solution notebook is secret too
    (tree / "README.md").write_text('assert double(21) == 42, "the secret hidden check"\n')
    assert [lk.origin.split(":")[0] for lk in leak_check(course, tree)] == [
        "solutions/gpu_fundamentals/gpu_fundamentals.py"
    ]


def test_solution_file_next_to_source_never_rides_along(course: Path) -> None:
    folder = course / "solutions" / "m9_roofline"
    (folder / "m9_roofline_backup.py").write_text(SOURCE)
    (folder / "reference_impl.py").write_text(
        "def quadruple_fast(x):\n    return (x << 2) if isinstance(x, int) else 4.0 * x\n"
    )
    (folder / "model_config.json").write_text('{"dim": 128, "n_layers": 4}\n')
    assert release(course).ok
    assert sorted(os.listdir(course / "exercises" / "m9_roofline")) == [
        "m9_roofline.ipynb",
        "m9_roofline.py",
    ]
    # had they been copied verbatim (as nbgrader does), the leak proof would catch them
    for name in ("m9_roofline_backup.py", "reference_impl.py"):
        shutil.copyfile(folder / name, course / "exercises" / "m9_roofline" / name)
    leaks = leak_check(course, course / "exercises")
    assert {lk.path for lk in leaks} == {
        "m9_roofline/m9_roofline_backup.py",
        "m9_roofline/reference_impl.py",
    }
    assert any("(x << 2)" in lk.text for lk in leaks)
    assert any("doubled_value" in lk.text for lk in leaks)


def test_data_files_only_through_the_manifest(course: Path) -> None:
    folder = course / "solutions" / "m9_roofline"
    (folder / "model_config.json").write_text('{"dim": 128, "n_layers": 4}\n')
    (folder / "release-files.txt").write_text("# data the notebook reads\nmodel_config.json\n")
    assert release(course).ok
    assert (course / "exercises" / "m9_roofline" / "model_config.json").is_file()
    before = snapshot(course / "exercises")
    (folder / "helper.py").write_text("y = 2\n")
    (folder / "release-files.txt").write_text("model_config.json\n*.py\n")
    report = release(course)
    assert not report.ok
    assert any(
        f.startswith("solutions/m9_roofline/release-files.txt:2:") and "helper.py" in f
        for f in report.findings
    ), report.findings
    assert snapshot(course / "exercises") == before


def test_release_refuses_to_write_a_leak(course: Path) -> None:
    folder = course / "solutions" / "m9_roofline"
    (folder / "notes.txt").write_text(
        'assert student.double(1234.5) == pytest.approx(2469.0), "hidden: large input"\n'
    )
    (folder / "release-files.txt").write_text("notes.txt\n")
    report = release(course)
    assert not report.ok
    assert any(f.startswith("leak: exercises/m9_roofline/notes.txt:1:") for f in report.findings)
    assert not (course / "exercises").exists()


def _paste_into_markdown(course: Path, text: str) -> None:
    src = course / "solutions" / "m9_roofline" / "m9_roofline.py"
    src.write_text(
        src.read_text().replace(
            "# Write `double`, `triple` and `quadruple`.\n",
            f"# Write `double`, `triple` and `quadruple`.\n#\n#     {text}\n",
        )
    )


def test_solution_line_pasted_into_the_notebooks_markdown_is_a_leak(course: Path) -> None:
    """No public-by-default escape: a line outside every region is not thereby public."""
    _paste_into_markdown(course, "tripled_value = x * 3")
    report = release(course)
    assert not report.ok
    leaks = [f for f in report.findings if f.startswith("leak: ")]
    assert leaks and all("tripled_value = x * 3" in f for f in leaks), report.findings
    assert any("m9_roofline/m9_roofline.py" in f for f in leaks)
    assert any("secret from solutions/" in f for f in leaks)
    assert not (course / "exercises").exists()


@pytest.mark.parametrize("form", ["trailing", "above"])
def test_a_line_marked_public_at_its_source_may_appear_elsewhere(course: Path, form: str) -> None:
    for a in IDS:
        src = course / "solutions" / a / f"{a}.py"
        text = src.read_text()
        if form == "trailing":
            marked = "    tripled_value = x * 3  # grader: public\n"
        else:
            marked = "    # grader: public\n    tripled_value = x * 3\n"
        src.write_text(text.replace("    tripled_value = x * 3\n", marked))
    _paste_into_markdown(course, "tripled_value = x * 3")
    report = release(course)
    assert report.ok, report.findings
    # the mark covers that line only: its neighbours in the region stay secret
    stub = course / "exercises" / "m9_roofline" / "m9_roofline.py"
    stub.write_text(stub.read_text() + '\n# %%\nraise ValueError("x must be a number, not None")\n')
    assert [lk.text for lk in leak_check(course, course / "exercises")] == [
        'raise ValueError("x must be a number, not None")'
    ]
    released = (course / "exercises" / "m9_roofline" / "m9_roofline.py").read_text()
    assert "tripled_value = x * 3" in released and "grader: public" not in released


# ---------------------------------------------------------------------------- export


def _course_with_package(root: Path) -> Path:
    make_course(root)
    course_tree(root, copy=("grader", "pyproject.toml", "STUDENT_README.md"))
    (root / "tests" / "public" / "m9_roofline").mkdir(parents=True)
    (root / "tests" / "unit").mkdir(parents=True)
    (root / "tests" / "unit" / "test_x.py").write_text("def test_x():\n    pass\n")
    flows = root / ".github" / "student-workflows"
    flows.mkdir(parents=True)
    (flows / "check.yml").write_text("name: student check\non: pull_request\n")
    return root


def test_export_mechanics(tmp_path: Path) -> None:
    root = _course_with_package(tmp_path / "course")
    with pytest.raises(ExportError, match="grader release"):
        export_student(root, tmp_path / "out0")  # exercises/ not released yet
    assert release(root).ok
    (root / "staff").mkdir()  # the staff's data: an extension names a student
    (root / "staff" / "extensions.toml").write_text('[[extension]]\nstudent = "ada"\n')
    dest = export_student(root, tmp_path / "out")
    files = snapshot(dest)
    assert not any(f.startswith(("solutions/", "tests/hidden/", "tests/unit/", "staff/"))
                   for f in files)  # fmt: skip
    assert not any("extension" in f for f in files)
    assert not any(f"grader/{m}.py" in files for m in rel.INSTRUCTOR_MODULES)
    assert "grader/cli.py" in files and "grader/suites/plugin.py" in files
    assert ".github/workflows/check.yml" in files and ".gitignore" in files
    assert files["README.md"] == (root / "STUDENT_README.md").read_bytes()
    assert "exercises/m9_roofline/m9_roofline.ipynb" in files
    assert leak_check(root, dest) == []
    with pytest.raises(ExportError, match="not empty"):
        export_student(root, dest)
    # a leak in the README refuses the export and leaves no directory behind
    (root / "STUDENT_README.md").write_text('assert double(21) == 42, "the secret hidden check"\n')
    with pytest.raises(ExportError, match="leak: README.md:1"):
        export_student(root, tmp_path / "out2")
    assert not (tmp_path / "out2").exists()
    # a grader module nobody classified never ships by accident
    (root / "STUDENT_README.md").write_text("hello\n")
    (root / "grader" / "newthing.py").write_text("X = 1\n")
    with pytest.raises(ExportError, match="grader/newthing.py: not classified"):
        export_student(root, tmp_path / "out3")


def test_export_of_the_real_course_runs_public_tests_on_stubs(tmp_path: Path) -> None:
    """The real solutions and public suites: the export's public tests fail on NotImplemented."""
    parts = ("course.toml", "pyproject.toml", "STUDENT_README.md", "solutions", "grader")
    parts += ("tests/public", "tests/hidden", ".github", "tests/conftest.py", "conftest.py")
    root = course_tree(tmp_path / "course", copy=[p for p in parts if (ROOT / p).exists()])
    assert release(root).ok
    dest = export_student(root, tmp_path / "student")
    assert not (dest / "solutions").exists() and not (dest / "tests" / "hidden").exists()
    assert leak_check(root, dest) == []
    suites = sorted(p.name for p in (dest / "tests" / "public").iterdir() if p.is_dir())
    assert suites, "no public suites under tests/public/"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "GRADER"))}
    env.update(PYTHONPATH=str(dest), GRADER_DEVICE="cpu", NUMBA_ENABLE_CUDASIM="1")
    where = subprocess.run(
        [sys.executable, "-c", "import grader; print(grader.__file__)"],
        cwd=dest,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip().startswith(str(dest)), "the export must use its own grader"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/public",
            "--submission",
            "exercises",
            "-p",
            "no:cacheprovider",
            "-q",
            "--tb=short",
        ],
        cwd=dest,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]  # tests ran and failed
    for bad in ("ImportError", "ModuleNotFoundError", "errors during collection"):
        assert bad not in out, out[-3000:]
    assert "NotImplementedError" in out and "implement this (see the docstring)" in out
    assert " passed" not in out.splitlines()[-1], (
        f"a public test passes on the stubs: {out[-2000:]}"
    )


# ---------------------------------------------------------------------------- verify

PUBLIC_TEST = """\
import pytest


@pytest.mark.points(10)
def test_double(student):
    assert student.double(2) == 4


@pytest.mark.points(5)
def test_triple(student):
    assert student.triple(2) == 6
"""

EXTRA_HIDDEN = """\
\"\"\"Stated rules:

- test_{name}: "Return 3 * x; ValueError for None."
\"\"\"

import pytest


@pytest.mark.points({points})
def test_{name}(student):
    {body}
"""


@pytest.mark.slow
def test_verify_reports_a_vacuous_test_by_name(course: Path) -> None:
    """Synthetic course: all checks pass (the sandbox pass and the export included) except one
    hidden test that passes on the stub."""
    course_tree(course, copy=("grader", "pyproject.toml", "STUDENT_README.md"))
    manifest = course / "course.toml"  # 20 points each: 15 public + 2 hidden + 3 more below
    manifest.write_text(re.sub(r"(?m)^points = \d+", "points = 20", manifest.read_text()))
    start = SOURCE.index('# %% nbgrader={"grade": false, "grade_id": "quad_cell"')
    end = SOURCE.index('# %% nbgrader={"grade": true')
    for a in IDS:  # a whole-function region leaves a module-level raise: nothing would import
        src(course, a).write_text(SOURCE[:start] + SOURCE[end:])
    total = {a.id: a.points for a in load_course(course).assignments}
    vacuous = IDS[-1]
    for a in IDS:  # the rest of course.toml's points, after 15 public + 2 hidden
        name, body = (
            ("vacuous", 'assert student.has("double")')
            if a == vacuous
            else ("triple_none", "with pytest.raises(ValueError):\n        student.triple(None)")
        )
        (course / "tests" / "public" / a).mkdir(parents=True)
        (course / "tests" / "public" / a / f"test_{a}_public.py").write_text(PUBLIC_TEST)
        (course / "tests" / "hidden" / a / f"test_{a}_more.py").write_text(
            EXTRA_HIDDEN.format(points=total[a] - 17, name=name, body=body)
        )
    assert release(course).ok
    report = verify(course)
    left = total[vacuous] - 17
    assert report.findings == [
        f"stubs score zero [{vacuous}]: vacuous test hidden/test_vacuous: scores "
        f"{left:g} / {left:g} on the stub"
    ], report.table()
    table = report.table()
    for check in (
        "release in sync",
        "solution passes nbgrader validate",
        "stub fails nbgrader validate",
        "solution scores full marks",
        "points match course.toml",
        "stubs score zero",
        "solution graded the same in the sandbox",
        "stub graded the same in the sandbox",
        "export leak-free",
    ):
        assert check in table
    assert not (course / "metrics.json").exists(), "verify must not write into the course"


def test_hidden_line_pasted_into_public_tests_stops_the_export(tmp_path: Path) -> None:
    """tests/public ships on purpose, but that does not make a hidden line in it public."""
    root = _course_with_package(tmp_path / "course")
    assert release(root).ok
    hidden_line = 'assert student.double(1234.5) == pytest.approx(2469.0), "hidden: large input"'
    public = root / "tests" / "public" / "m9_roofline" / "test_m9_public.py"
    public.write_text(f"import pytest\n\n\ndef test_copy(student):\n    {hidden_line}\n")
    with pytest.raises(ExportError) as err:
        export_student(root, tmp_path / "out")
    assert "leak: tests/public/m9_roofline/test_m9_public.py:5" in str(err.value)
    assert "tests/hidden/" in str(err.value)
    assert not (tmp_path / "out").exists()
    # marked public where it is written (the hidden test), the same line may ship
    for a in IDS:
        hidden = root / "tests" / "hidden" / a / f"test_{a}_hidden.py"
        hidden.write_text(
            hidden.read_text().replace(hidden_line, hidden_line + "  # grader: public")
        )
    dest = export_student(root, tmp_path / "out")
    assert (
        hidden_line in (dest / "tests" / "public" / "m9_roofline" / "test_m9_public.py").read_text()
    )
    assert leak_check(root, dest) == []


# ---------------------------------------------------------------------------- pastes (issue 24)

SOLUTION_LINE = "doubled_value = math.fsum([x, x])"


@pytest.mark.parametrize(
    "paste",
    [
        f"Use `{SOLUTION_LINE}` here.",  # inline backticks
        f"Example: {SOLUTION_LINE}",  # a prefix
        SOLUTION_LINE.replace(" ", ""),  # spaces removed
        f"{SOLUTION_LINE}  # add x to itself",  # a comment appended
        "result = math.fsum([x, x])",  # a variable renamed
    ],
    ids=["backticks", "example-prefix", "no-spaces", "comment-appended", "renamed"],
)
def test_a_reworded_solution_line_in_markdown_is_a_leak(course: Path, paste: str) -> None:
    _paste_into_markdown(course, paste)
    report = release(course)
    assert not report.ok
    leaks = [f for f in report.findings if f.startswith("leak: ")]
    assert leaks and all(SOLUTION_LINE in f for f in leaks), report.findings
    assert any("m9_roofline/m9_roofline.py" in f for f in leaks)


def test_a_line_whose_original_had_a_trailing_comment_is_a_leak(course: Path) -> None:
    for a in IDS:
        text = src(course, a).read_text()
        src(course, a).write_text(
            text.replace("    tripled_value = x * 3\n", "    tripled_value = x * 3  # three x\n")
        )
    _paste_into_markdown(course, "tripled_value = x * 3")
    report = release(course)
    assert any("tripled_value = x * 3  # three x" in f for f in report.findings), report.findings


@pytest.mark.parametrize("encoding", ["base64", "base64-wrapped", "base64-gzip", "hex"])
def test_an_encoded_hidden_test_file_is_a_leak(course: Path, tmp_path: Path, encoding) -> None:
    import base64
    import gzip

    data = HIDDEN_TEST.encode()
    blob = {
        "base64": lambda: base64.b64encode(data).decode(),
        "base64-wrapped": lambda: base64.encodebytes(data).decode(),
        "base64-gzip": lambda: base64.b64encode(gzip.compress(data)).decode(),
        "hex": lambda: data.hex(),
    }[encoding]()
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "notes.md").write_text(f"# Notes\n\nA blob:\n\n{blob}\n")
    leaks = leak_check(course, tree)
    assert leaks and all(lk.path == "notes.md" and lk.line == 5 for lk in leaks), leaks
    assert any("hidden: large input" in lk.text for lk in leaks)
    assert "inside a " in str(leaks[0]) and encoding.split("-")[0] in str(leaks[0])


def test_lookalike_code_is_no_leak(course: Path, tmp_path: Path) -> None:
    """A public test calling the same function with its own names, or a short line of the same
    shape with its one name changed, is not a paste."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "test_public.py").write_text(
        "def test_double(student):\n"
        "    got = student.double(3.5)\n"
        "    total = math.fsum([y, z])\n"  # two of three names changed
        "    tripled = y * 3\n"  # the short secret line, renamed
        '    assert got == 7.0, "double(3.5) should be 7.0"\n'
    )
    assert leak_check(course, tree) == []


def test_a_solution_line_pasted_into_public_tests_stops_release_and_verify(course: Path) -> None:
    public = course / "tests" / "public" / "m9_roofline"
    public.mkdir(parents=True)
    (public / "test_m9_public.py").write_text(
        f"def test_copy(student):\n    {SOLUTION_LINE}\n"
    )
    report = release(course)
    assert any(
        f.startswith("leak: tests/public/m9_roofline/test_m9_public.py:2") for f in report.findings
    ), report.findings
    assert not (course / "exercises").exists()
    # verify's "release in sync" row is this check
    assert any("tests/public/m9_roofline" in f for f in rel.check(course).findings)


# ---------------------------------------------------------------- per assignment (issue 45)

M9_ONLY = 'assert student.triple(7) == 21, "seven times three, from the hidden suite"'


def _hidden_of_m9(course: Path, line: str) -> None:
    (course / "tests" / "hidden" / "m9_roofline" / "test_m9_extra.py").write_text(
        f'"""Stated rules:\n\n- test_extra: "Return 3 * x"\n"""\n\n\ndef test_extra(student):\n'
        f"    {line}\n"
    )


def _public(course: Path, assignment: str, body: str) -> Path:
    folder = course / "tests" / "public" / assignment
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"test_{assignment}_public.py"
    path.write_text(body)
    return path


def test_a_hidden_line_its_own_public_tests_hold_is_public_for_that_assignment_only(
    course: Path,
) -> None:
    _hidden_of_m9(course, M9_ONLY)
    _public(course, "m9_roofline", f"def test_shown(student):\n    {M9_ONLY}\n")
    assert release(course).ok  # m9's public tests show it: no secret of m9
    # a line of m9's hidden tests that m9's public tests do not show is m9's secret, wherever
    # it is pasted; the fix the refusal suggests names both ways out
    secret = 'assert student.triple(9) == 27, "nine times three, from the hidden suite"'
    _hidden_of_m9(course, secret)
    other = next(a for a in IDS if a != "m9_roofline")
    _public(course, other, f"def test_pasted(student):\n    {secret}\n")
    report = release(course)
    [leak] = [f for f in report.findings if f.startswith("leak: ")]
    assert f"tests/public/{other}/test_{other}_public.py:2" in leak
    assert "secret from tests/hidden/m9_roofline/test_m9_extra.py:8" in leak
    assert "public tests of the same assignment" in leak and "# grader: public" in leak


def test_test_boilerplate_is_no_secret(course: Path) -> None:
    """The decorators and def lines a public test shares with another assignment's hidden
    tests (HIDDEN_TEST: `@pytest.mark.points(2)`, `def test_double_hidden(student):`)."""
    _public(
        course,
        "m9_roofline",
        "import pytest\n\n\n@pytest.mark.points(2)\ndef test_double_hidden(student):\n"
        "    assert student.double(1) == 2\n",
    )
    assert release(course).ok
    # a decorator that carries the hidden test's data is no boilerplate
    for a in IDS:
        hidden = course / "tests" / "hidden" / a / f"test_{a}_hidden.py"
        hidden.write_text(
            hidden.read_text().replace(
                "@pytest.mark.points(2)\n",
                '@pytest.mark.points(2)\n@pytest.mark.parametrize("x", [1234.5, 77.25, -3.5])\n',
            )
        )
    _public(
        course,
        "m9_roofline",
        'import pytest\n\n\n@pytest.mark.parametrize("x", [1234.5, 77.25, -3.5])\n'
        "def test_x(student, x):\n    assert student.double(x) == 2 * x\n",
    )
    assert any("parametrize" in f for f in release(course).findings)


def test_a_line_the_grader_package_ships_is_public_but_a_pasted_block_is_not(
    tmp_path: Path,
) -> None:
    root = _course_with_package(tmp_path / "course")
    kernel = ["i = cuda.grid(1)", "if i < x.size:", "x[i] = 2 * x[i]"]  # grader/core/compiler.py
    assert all(line in (root / "grader/core/compiler.py").read_text() for line in kernel)

    def region(lines: list[str]) -> None:
        body = "".join(f"    {line}\n" for line in lines)
        text = SOURCE.replace("    doubled_value = math.fsum([x, x])\n", body)
        for a in IDS:
            src(root, a).write_text(text)
        _paste_into_markdown(root, "if i < x.size:")

    region(kernel[:2])  # two lines the package holds too: an idiom, no secret
    assert release(root).ok
    region(kernel)  # the probe kernel's three lines in a row: a paste, still secret
    findings = release(root).findings
    assert findings and all("if i < x.size:" in f for f in findings), findings


# -------------------------------------------------------------------- shapes and idioms (issue 51)

SOFTMAX_LINES = ["tid = cuda.threadIdx.x", "local_sum += math.exp(x[row, k] - m)"]


def _softmax_region(course: Path) -> None:
    body = "".join(f"    {line}\n" for line in SOFTMAX_LINES)
    for a in IDS:
        src(course, a).write_text(
            SOURCE.replace("    doubled_value = math.fsum([x, x])\n", body)
        )


def test_a_solution_line_with_every_name_renamed_is_a_leak(course: Path) -> None:
    """Compared by shape (names, numbers and string words free, operators and attributes kept):
    `acc += math.exp(xs[r, k] - m)` is the solution's `local_sum += ...` with every name
    changed."""
    _softmax_region(course)
    _paste_into_markdown(course, "acc += math.exp(xs[r, k] - m)")
    leaks = [f for f in release(course).findings if f.startswith("leak: ")]
    assert leaks and all(SOFTMAX_LINES[1] in f for f in leaks), leaks
    # every assignment's solution holds the line; the fix names the one it leaked from, with
    # the release's folder in the path
    assert {f.split(":")[1].split()[0] for f in leaks} == {
        f"exercises/m9_roofline/m9_roofline.{ext}" for ext in ("py", "ipynb")
    }
    for leak in leaks:
        assert "(secret from solutions/m9_roofline/m9_roofline.py:" in leak
        assert "end the line at solutions/m9_roofline/m9_roofline.py:" in leak
    # the same shape with another operator or attribute is another line
    _softmax_region(course)
    _paste_into_markdown(course, "acc += math.log(xs[r, k] * m)")
    assert release(course).ok


def test_a_one_name_idiom_in_a_markdown_hint_is_no_leak(course: Path) -> None:
    """`tid = cuda.threadIdx.x` sits in the solution's region and in a markdown hint: one name
    bound to a short expression without arithmetic is an idiom, public."""
    _softmax_region(course)
    _paste_into_markdown(course, "tid = cuda.threadIdx.x")
    assert release(course).ok, release(course).findings
