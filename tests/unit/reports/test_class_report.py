"""grader class-report: pass rates hardest first, commonest failure, late rows, similarity pairs
(copies found, renames seen through, starter code and class-wide idioms not), escaping, files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from factories import ROOT

from grader.core.results import AssignmentResult, Environment, GradeResult
from grader.core.results import TestResult as Case
from grader.reports import class_data as cd
from grader.reports import class_report as cr
from grader.reports import similarity as sim

AID = "m9_roofline"

HEADER = '# %% nbgrader={"grade": false, "grade_id": "g", "locked": false, "schema_version": 3, "solution": true, "task": false}\n'  # noqa: E501
STARTER = (
    "# %% [markdown]\n# Fill in the cell.\n\n"
    + HEADER
    + 'def solve(values, limit):\n    """Sum the values under the limit."""\n'
    + '    raise NotImplementedError("solve: implement this (see the docstring)")\n'
)
ORIGINAL = '''def solve(values, limit):
    """Sum the values under the limit."""
    kept = [v for v in values if v < limit]
    if not kept:
        raise ValueError("nothing under the limit")
    total = 0.0
    for index, value in enumerate(sorted(kept)):
        weight = 1.0 / (index + 1)
        total += weight * value * value - 3.5 * index
    return round(total, 4) + len(kept) * 0.25
'''
RENAMED = (
    ORIGINAL.replace("kept", "good")
    .replace("total", "acc")
    .replace("weight", "w")
    .replace("index", "j")
    .replace("value", "x")
)
OWN = '''def solve(values, limit):
    """Sum the values under the limit."""
    import math
    acc = math.fsum(filter(lambda q: q < limit, values))
    if acc == 0:
        raise ValueError("empty")
    return acc
'''


def case(name, outcome, feedback="", points=1.0):
    return Case(name, points if outcome == "passed" else 0.0, points, outcome, feedback)


def result(student, tests, late=0.0, timestamp=None, graded_file=f"exercises/{AID}/{AID}.py"):
    score = sum(t.score for t in tests) * (1 - late)
    a = AssignmentResult(
        AID, score, 3.0, late_penalty=late, raw_score=score, graded_file=graded_file, tests=tests
    )
    return GradeResult(student, score, 3.0, Environment("cpu", True), [a], timestamp=timestamp)


def write_class(tmp_path, course, people):
    """people: {student: (GradeResult, graded cell code or None)} -> (graded dir, submissions)."""
    graded, subs = tmp_path / "graded", tmp_path / "subs"
    paths = {}
    for student, (r, code) in people.items():
        (graded / student).mkdir(parents=True)
        r.write(graded / student / "result.json")
        folder = subs / student / "exercises" / AID
        folder.mkdir(parents=True)
        text = STARTER if code is None else STARTER.split(HEADER)[0] + HEADER + code
        (folder / f"{AID}.py").write_text(text)
        paths[student] = subs / student
    return graded, paths


def test_pass_rates_hardest_first_with_the_commonest_failure():
    results = {
        f"s{i}": result(
            f"s{i}",
            [
                case("easy", "passed"),
                case("hard", "failed" if i < 3 else "passed", f"expected 4, got {i + 7}\nmore"),
                case("gpu_only", "skipped"),
                case("hang", "timeout" if i == 0 else "passed", "timed out after 10 s"),
            ],
        )
        for i in range(4)
    }
    rows = cd.pass_rates(results)
    assert [r.name for r in rows] == ["hard", "hang", "easy", "gpu_only"]
    hard = rows[0]
    assert (hard.passed, hard.failed, hard.pass_rate) == (1, 3, 0.25)
    # "got 7", "got 8", "got 9" are one message; one real one is shown, first line only
    assert hard.common_failure == "expected 4, got 7" and hard.common_failure_count == 3
    assert rows[-1].pass_rate is None and rows[-1].skipped == 4


def test_late_rows(course):
    due = course.assignment(AID).due
    results = {
        "ok": result("ok", [case("t", "passed")], timestamp=(due - timedelta(hours=1)).isoformat()),
        "late": result(
            "late",
            [case("t", "passed")],
            late=0.1,
            timestamp=(due + timedelta(hours=30)).isoformat(),
        ),
        "penalised": result("penalised", [case("t", "passed")], late=0.2),
    }
    rows = cd.late_rows(results, course)
    assert [(r.student, r.hours_late, r.penalty) for r in rows] == [
        ("late", 30.0, 0.1),
        ("penalised", None, 0.2),
    ]


def test_similarity_flags_copies_not_starter_code(tmp_path, course):
    people = {
        "ann": (result("ann", [case("t", "passed")]), ORIGINAL),
        "ben": (result("ben", [case("t", "passed")]), RENAMED),  # ann's code, names changed
        "cat": (result("cat", [case("t", "passed")]), OWN),
        "dev": (result("dev", [case("t", "failed", "x")]), None),  # the untouched starter
        "eli": (result("eli", [case("t", "failed", "x")]), None),
    }
    graded, paths = write_class(tmp_path, course, people)
    sources = {s: sim.graded_cells(paths[s] / f"exercises/{AID}/{AID}.py") for s in people}
    assert "Fill in the cell" not in sources["ann"]  # graded cells only, no markdown
    pairs, info = sim.similar_pairs(
        sources, sim.graded_cells(paths["dev"] / f"exercises/{AID}/{AID}.py"), AID
    )
    assert [(p.student_a, p.student_b) for p in pairs] == [("ann", "ben")]
    assert pairs[0].similarity_a > 0.9 and pairs[0].similarity_b > 0.9
    assert info["submissions"] == 5 and info["candidate_pairs"] < info["all_pairs"]
    again, _ = sim.similar_pairs(sources, sources["dev"], AID)
    assert again == pairs  # stable hashes: the same numbers on every run


def test_an_idiom_most_of_a_big_class_shares_is_not_evidence(tmp_path):
    sources = {f"s{i:02d}": ORIGINAL for i in range(30)}  # everyone wrote the same thing
    sources["own"] = OWN
    pairs, info = sim.similar_pairs(sources, "", AID)
    assert pairs == [] and info["common_fingerprints_dropped"] > 0
    few = {"a": ORIGINAL, "b": ORIGINAL, "c": OWN}  # in a small class it is still listed
    assert [(p.student_a, p.student_b) for p in sim.similar_pairs(few, "", AID)[0]] == [("a", "b")]


def test_report_files_escaping_and_cli(tmp_path, course, umask):
    evil = "<script>alert(1)</script>|`x`"
    people = {
        "ann": (result("ann", [case("t", "failed", evil)]), ORIGINAL),
        "ben": (result("ben", [case("t", "failed", evil)]), RENAMED),
    }
    graded, _ = write_class(tmp_path, course, people)
    subs = tmp_path / "subs"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "grader",
            "--root",
            str(ROOT),
            "class-report",
            str(graded),
            "--submissions",
            str(subs),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert "similar pairs to look at" in res.stdout
    folder = graded / cr.REPORT_DIR
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["class-report.json", "index.html", "scores.png", "summary.md"]
    for p in folder.iterdir():
        assert p.stat().st_mode & 0o777 == 0o644 & ~umask
    assert (folder / "scores.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (folder / "index.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "not a verdict" in page and "ann" in page and "ben" in page
    md = (folder / "summary.md").read_text()
    assert "<script>" not in md and "not a verdict" in md
    data = json.loads((folder / "class-report.json").read_text())
    assert data["schema_version"] == cd.SCHEMA_VERSION and data["students"] == 2
    assert [(p["student_a"], p["student_b"]) for p in data["similar"]] == [("ann", "ben")]
    assert data["tests"][0]["pass_rate"] == 0.0


def test_state_entries_name_the_submission_folders(tmp_path, course):
    people = {
        "ann": (result("ann", [case("t", "passed")]), ORIGINAL),
        "ben": (result("ben", [case("t", "passed")]), RENAMED),
    }
    graded, paths = write_class(tmp_path, course, people)
    state = {s: {"student": s, "submission": str(p)} for s, p in paths.items()}
    state["gone"] = {"student": "gone", "submission": None}  # no folder recorded
    rep, _ = cr.write_class_report(graded, course, state, out=tmp_path / "report")
    assert [(p.student_a, p.student_b) for p in rep.similar] == [("ann", "ben")]
    assert (tmp_path / "report" / "index.html").is_file()
    alone, _ = cr.write_class_report(graded, course, out=tmp_path / "none")
    assert alone.similar == [] and any("similarity was not computed" in n for n in alone.notes)


def test_no_batch_is_a_clear_error(tmp_path, course):
    with pytest.raises(ValueError, match="grade-all"):
        cr.write_class_report(tmp_path, course)


STUB = "NotImplementedError: kv_cache_fits: implement this (see the docstring)"


def test_roster_statuses_folded_cases_functions_and_changes(tmp_path, course):
    """Every student has a roster row (no result, no notebook and a corrupt one included), the
    ungraded are counted, parametrized cases fold into one test, the stub is "not attempted"
    apart from a wrong answer, tests group per graded function, and a regrade's changes list."""
    cases = lambda outcomes, fb="": [  # noqa: E731
        case(f"hidden/test_kv_cache_fits_cases[{i}]", o, fb, 0.5) for i, o in enumerate(outcomes)
    ]
    good = result("good", cases(["passed", "passed"]) + [case("hidden/test_num_params", "passed")])
    wrong = result("wrong", cases(["passed", "failed"], "expected True, got False"))
    stub = result("stub", cases(["failed", "failed"], STUB))
    late = result("late", cases(["passed", "passed"]), late=0.5)
    missing = result("missing", [])
    missing.assignments[0].error = "no notebook found for m9_roofline"
    corrupt = result("corrupt", [])
    corrupt.assignments[0].error = "exercises/m9_roofline/m9_roofline.ipynb is not valid JSON"
    shaky = result("shaky", cases(["passed", "passed"]))
    shaky.environment.not_authoritative = "not authoritative: no pid namespace"
    graded = tmp_path / "graded"
    people = [good, wrong, stub, late, missing, corrupt, shaky]
    for r in people:
        (graded / r.student).mkdir(parents=True)
        r.write(graded / r.student / "result.json")
        (graded / r.student / "report.html").write_text("<html></html>")
    before = result("wrong", cases(["passed", "passed"]))
    before.write(graded / "wrong" / "result.previous.json")
    state = {r.student: {"status": "ok"} for r in people} | {"ghost": {"status": "error"}}

    rep, paths = cr.write_class_report(graded, course, state, submissions={})
    roster = {row.student: row for row in rep.roster}
    status = {
        s: [c.status for c in row.cells if c.assignment == AID][0] for s, row in roster.items()
    }
    assert status == {
        "good": "graded",
        "wrong": "graded",
        "stub": "graded",
        "late": "late",
        "missing": "notebook missing",
        "corrupt": "does not parse",
        "shaky": "not authoritative",
        "ghost": "no result",
    }
    assert roster["ghost"].score is None and roster["ghost"].report == ""
    assert roster["good"].report == "../good/report.html"
    m9 = next(a for a in rep.assignments if a.assignment == AID)
    assert m9.errors == 3  # missing, corrupt and ghost

    (fits,) = [t for t in rep.tests if t.name == "hidden/test_kv_cache_fits_cases"]
    assert (fits.passed, fits.failed, fits.not_attempted) == (3, 1, 1)
    assert fits.common_failure == "expected True, got False" and fits.max_score == 1.0
    (fn,) = [t for t in rep.functions if t.name == "kv_cache_fits"]
    assert (fn.passed, fn.failed, fn.not_attempted) == (3, 1, 1)
    assert any(t.name == "num_params" and t.passed == 1 for t in rep.functions)
    assert [(c.student, c.test, c.before, c.after) for c in rep.changes] == [
        ("wrong", "hidden/test_kv_cache_fits_cases[1]", "passed", "failed")
    ]
    page = paths["html"].read_text()
    assert "<h2>Roster</h2>" in page and "href='../good/report.html'" in page
    assert "notebook missing" in page and "no result" in page
    summary = paths["markdown"].read_text()
    assert "## Roster" in summary and "| ghost |" in summary
    assert "## Changed in the last regrade" in summary


def test_roster_escapes_bidi_and_control_characters(tmp_path, course):
    r = result("eve", [case("hidden/t", "failed", "bad\u202etxt.exe\x1b[31m")])
    (tmp_path / "g" / "eve").mkdir(parents=True)
    r.write(tmp_path / "g" / "eve" / "result.json")
    rep, paths = cr.write_class_report(tmp_path / "g", course, {}, submissions={})
    page = paths["html"].read_text()
    assert "\u202e" not in page and "\x1b" not in page
