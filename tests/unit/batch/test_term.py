"""A term, run as an instructor runs it: `grader grade-all` in the sandbox over a class listing
with trusted submission times, the staff's data beside course.toml (staff/extensions.toml,
`grader override`), regrades forced and caused by a changed hidden test, and `nbgrader export`
of the gradebook, compared with grades.csv.

Two students with extensions: ada, 30 hours late, is on time with her 48 hours; bo, 80 hours
late, is still late with his (32 hours: two started days). bo's score on one hidden test is set
by the staff, with a reason; it holds through a `--force` regrade and through a change of that
test that makes everyone fail it, and in every output."""

from __future__ import annotations

import csv
import json
import os
import re
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from factories import ROOT, course_tree, m9_course

from grader.core.course import load_course
from grader.core.points import shown

pytestmark = pytest.mark.slow
A = "m9_roofline"
OVERRIDDEN = "hidden/test_crossover_batch_none_at_long_context"


def grader(course: Path, *args: str) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("grader")
    env = {**os.environ, "GRADER_DEVICE": "cpu"}
    return subprocess.run([str(exe), "--root", str(course), *args], capture_output=True,
                          text=True, timeout=900, env=env)  # fmt: skip


def one_assignment_course(tmp: Path) -> Path:
    course = m9_course(tmp / "course")
    assert load_course(course).assignment_ids == [A]
    return course


def rows(path: Path) -> dict[str, dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return {r["student_id"]: r for r in csv.DictReader(fh)}


def test_a_term_with_extensions_an_override_and_regrades(tmp_path):
    course = one_assignment_course(tmp_path)
    due = load_course(course).assignment(A).due
    subs = tmp_path / "subs"
    for student in ("ada", "bo"):  # the same (reference) work: the staff's data tells them apart
        course_tree(subs / student, copy=())
        (subs / student / "exercises" / A).mkdir(parents=True)
        (subs / student / "exercises" / A / f"{A}.py").write_text(
            (ROOT / "solutions" / A / f"{A}.py").read_text()
        )
    late = {"ada": due + timedelta(hours=30), "bo": due + timedelta(hours=80)}
    listing = tmp_path / "class.csv"
    listing.write_text("student_id,path,submitted_at\n" + "".join(
        f"{s},subs/{s},{t.isoformat()}\n" for s, t in late.items()))  # fmt: skip
    staff = course / "staff"
    staff.mkdir()
    (staff / "extensions.toml").write_text(
        '[[extension]]\nstudent = "ada"\nassignment = "m9_roofline"\nhours = 48\n'
        'note = "medical certificate"\n\n'
        '[[extension]]\nstudent = "bo"\nassignment = "m9_roofline"\nhours = 48\n'
    )
    out = tmp_path / "out"

    # 1. the first grading: ada on time with her extension, bo late with his
    proc = grader(course, "grade-all", str(listing), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = {s: json.loads((out / s / "result.json").read_text()) for s in late}
    ada, bo = (first[s]["assignments"][0] for s in ("ada", "bo"))
    assert (ada["late_penalty"], bo["late_penalty"]) == (0.0, 0.2)
    assert ada["extended_due"] == bo["extended_due"] == (due + timedelta(hours=48)).isoformat()
    [test] = [t for t in bo["tests"] if t["name"] == OVERRIDDEN]
    assert test["score"] == test["max_score"] > 0  # bo earned it; the staff set it lower
    half = test["max_score"] / 2

    # 2. the staff's decision: recorded, and taken by the kept results without a regrade
    proc = grader(course, "override", "bo", A, "--test", OVERRIDDEN, "--points", shown(half),
                  "--reason", "shared the answer with a classmate (case 12)", "--by", "lecturer")
    assert proc.returncode == 0, proc.stderr
    proc = grader(course, "grade-all", str(listing), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "unchanged, skipped" in proc.stderr
    kept = json.loads((out / "bo" / "result.json").read_text())["assignments"][0]
    assert kept["raw_score"] == bo["raw_score"] - half

    # 3. --force regrades everyone: the same scores, the override kept
    proc = grader(course, "grade-all", str(listing), "--out", str(out), "--force")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    forced = json.loads((out / "bo" / "result.json").read_text())["assignments"][0]
    assert (forced["score"], forced["raw_score"]) == (kept["score"], kept["raw_score"])

    # 4. the hidden test changes (now everyone fails it): m9 is regraded; ada loses its points,
    #    bo keeps the staff's
    suite = course / "tests" / "hidden" / A / "test_m9_hidden.py"
    name = OVERRIDDEN.split("/")[1]
    text = suite.read_text()
    body = re.search(rf"def {name}\(.*?\):\n(\s+)", text, re.S)
    assert body, f"{name} not in {suite}"
    indent = body.group(1)
    suite.write_text(text[: body.end()] + f'raise AssertionError("changed")\n{indent}'
                     + text[body.end():])  # fmt: skip
    proc = grader(course, "grade-all", str(listing), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "suites changed" in proc.stdout
    final = {s: json.loads((out / s / "result.json").read_text())["assignments"][0] for s in late}
    [a_test] = [t for t in final["ada"]["tests"] if t["name"] == OVERRIDDEN]
    [b_test] = [t for t in final["bo"]["tests"] if t["name"] == OVERRIDDEN]
    assert (a_test["score"], a_test["outcome"]) == (0.0, "failed")
    assert b_test["score"] == half and b_test["override"]["auto_score"] == 0.0
    assert b_test["override"]["reason"] == "shared the answer with a classmate (case 12)"
    assert final["bo"]["raw_score"] == forced["raw_score"]  # the changed test cost bo nothing

    # every output says so: the report, grades.csv, the gradebook, the class report
    report = (out / "bo" / "report.md").read_text()
    assert "points set by the course staff" in report and "Due date extended to" in report
    graded = rows(out / "grades.csv")
    assert graded["bo"]["override"].startswith(f"{OVERRIDDEN} {shown(half)}: shared the answer")
    assert graded["ada"]["extended_due"] == (due + timedelta(hours=48)).isoformat()
    con = sqlite3.connect(out / "gradebook.db")
    [(ext,)] = con.execute(
        "SELECT s.extension FROM submitted_assignment s JOIN student u ON s.student_id = u.id "
        "WHERE u.id = 'ada'"
    ).fetchall()
    con.close()
    assert ext is not None  # nbgrader keeps the extension on the submission

    # `nbgrader export` agrees with grades.csv to the last digit
    export = tmp_path / "export.csv"
    nbgrader = Path(sys.executable).with_name("nbgrader")
    proc = subprocess.run([str(nbgrader), "export", "--db", f"sqlite:///{out / 'gradebook.db'}",
                           "--to", str(export)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    exported = rows(export)
    for student in late:
        for key in ("raw_score", "late_submission_penalty", "score", "max_score"):
            nb, ours = exported[student][key], graded[student][key]
            assert float(nb) == float(ours) and shown(float(nb)) == ours, (student, key, nb, ours)
        result = json.loads((out / student / "result.json").read_text())
        assert float(exported[student]["score"]) == result["score"]
    assert float(exported["bo"]["late_submission_penalty"]) > 0  # bo is late even extended
    assert float(exported["ada"]["late_submission_penalty"]) == 0

    proc = grader(course, "class-report", str(out))
    assert proc.returncode == 0, proc.stderr
    summary = (out / "class-report" / "summary.md").read_text()
    assert "## Extensions and overrides" in summary and "case 12" in summary
    assert "(extended)" in summary  # bo's late row shows his extended due date
