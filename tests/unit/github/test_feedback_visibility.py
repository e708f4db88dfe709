"""A pull request graded before and after its due date under `hidden-after-due`: what the
student can read each time (the report sealed for their SSH key, and the public comment), and
what the staff can read (staff.age, sealed for them alone, while the student's is held back).

The submission is the reference solution with a bug the public tests miss (a decode intensity
1% off at batches over 40) and no metrics.json, so hidden tests fail with feedback that shows
their inputs and expected values. The grading runs in this process (the sandbox cannot start
on every machine that runs the unit tests; what is checked is what each reader can open)."""

from __future__ import annotations

import json
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from factories import EVENT, HEAD, PR, ROOT, m9_course, staff_identity

from grader import github as gha
from grader.core.course import load_course
from grader.github import private
from grader.github.comment import read_state
from grader.github.grade import grade_pr

A = "m9_roofline"


def _in_process(submission, root, student, timestamp, course=None, decision=None):
    from grader.grading.grade import grade_submission  # lazy: the suites, numpy

    return grade_submission(
        submission, root, student, timestamp=timestamp, sandbox=False, course=course
    )


@pytest.fixture(scope="module")
def pr(tmp_path_factory):
    """The course (m9_roofline under hidden-after-due), the packed PR, the keys that open it."""
    tmp = tmp_path_factory.mktemp("pr")
    course = m9_course(tmp / "course", 'feedback = "hidden-after-due"\n')
    work = tmp / "fork"
    (work / "exercises" / A).mkdir(parents=True)
    right = "    return float(flops / traffic)  # one division of (for int sizes) exact ints\n"
    text = (ROOT / "solutions" / A / f"{A}.py").read_text()
    assert right in text
    bug = "    return float(flops / traffic) * (1.01 if batch > 40 else 1.0)\n"
    (work / "exercises" / A / f"{A}.py").write_text(text.replace(right, bug))
    art = tmp / "artifact"
    gha.pack_submission(work, art, PR, HEAD)
    key = tmp / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    staff = staff_identity()
    (tmp / "staff.key").write_text(f"{staff}\n")
    keys = tmp / "student.keys"
    keys.write_text(key.with_suffix(".pub").read_text())
    to = private.recipients(keys, str(staff.to_public()))
    return {"tmp": tmp, "course": course, "art": art, "key": key, "staff": tmp / "staff.key",
            "to": to, "due": load_course(course).assignment(A).due}  # fmt: skip


def graded_at(pr, when: str, now) -> tuple[dict, str, str, Path]:
    out = pr["tmp"] / when
    grade_pr(pr["art"], EVENT, out, pr["to"], pr["course"], grade=_in_process, now=now)
    opened = private.open_report(out / "report.age", pr["key"], pr["tmp"] / f"{when}-student")
    by_name = {p.name: p for p in opened}
    result = json.loads(by_name["result.json"].read_text())
    readable = by_name["report.md"].read_text() + by_name["report.html"].read_text()
    return result, readable, (out / "comment.md").read_text(), out


def test_before_the_due_date_the_student_reads_scores_per_function_after_it_everything(pr):
    due = pr["due"]
    before, student_text, comment, out = graded_at(pr, "before", due - timedelta(days=1))
    [a] = before["assignments"]
    assert (a["feedback_policy"], a["hidden_feedback"]) == ("hidden-after-due", "held")
    hidden = [t for t in a["tests"] if t["suite"] == "hidden"]
    assert hidden and all(t["name"].startswith("hidden/") and "test_" not in t["name"]
                          for t in hidden)  # fmt: skip
    assert {"hidden/num_params", "hidden/crossover_batch", "hidden/metrics.json"} <= {
        t["name"] for t in hidden
    }
    assert any(t["outcome"] == "failed" for t in hidden)  # the score says something is wrong
    public = [t for t in a["tests"] if t["suite"] == "public"]
    assert public and all(t["name"].startswith("public/test_") for t in public)
    assert "until your due date, 2026-12-21 23:59 UTC" in student_text
    # the staff's sealed copy holds the full report the student's holds back
    full = private.open_report(out / "staff.age", pr["staff"], pr["tmp"] / "before-staff")
    staff_result = json.loads(next(p for p in full if p.name == "result.json").read_text())
    names = {t["name"] for t in staff_result["assignments"][0]["tests"]}
    hidden_names = {n for n in names if n.startswith("hidden/test_")}
    assert hidden_names and not any(n in student_text for n in hidden_names)
    tests = staff_result["assignments"][0]["tests"]
    said_publicly = {t["feedback"] for t in tests if t["suite"] == "public"}
    secrets = [t["feedback"] for t in tests if t["suite"] == "hidden" and t["feedback"]
               and t["feedback"] not in said_publicly]  # fmt: skip
    assert any(f.startswith("decode_intensity(") for f in secrets)  # inputs, expected value
    shown = json.dumps(before)  # every string the student's report holds
    assert not any(json.dumps(f)[1:-1][:60] in shown for f in secrets)
    assert staff_result["score"] == before["score"]  # the same points, only fewer words
    with pytest.raises(private.PrivateReportError):  # the student's key cannot open it
        private.open_report(out / "staff.age", pr["key"], pr["tmp"] / "nope")
    # the public comment: held, for which assignment, delivered later; no date, no score
    state = read_state(comment)
    assert state["held"] == [A] and state["status"] == "graded" and state["head"] == HEAD
    assert "`m9_roofline` show their score per graded function until the due date" in comment
    assert "2026-12-21" not in comment and "/ 54" not in comment

    after, student_text, comment, out = graded_at(pr, "after", due + timedelta(minutes=5))
    [a] = after["assignments"]
    assert a["hidden_feedback"] == "full" and after["score"] == before["score"]
    assert {t["name"] for t in a["tests"]} == names  # every hidden test, by name
    shown = json.dumps(after)
    assert all(json.dumps(f)[1:-1] in shown for f in secrets)
    assert not (out / "staff.age").exists()  # nothing held back: the one report is complete
    assert read_state(comment)["held"] == [] and "show their score" not in comment


def test_staff_data_that_does_not_load_stops_the_grading_without_naming_anyone(pr):
    """Its error names a student and their extension: the public comment and log must not."""
    from grader.core.errors import InfrastructureError

    bad = pr["tmp"] / "bad-staff"
    bad.mkdir()
    (bad / "extensions.toml").write_text(
        '[[extension]]\nstudent = "zoe-accommodated"\nassignment = "m10"\nhours = 72\n'
    )
    out = pr["tmp"] / "refused"
    with pytest.raises(InfrastructureError) as info:
        grade_pr(pr["art"], EVENT, out, pr["to"], pr["course"], grade=_in_process,
                 staff_dir=bad)  # fmt: skip
    said = str(info.value) + (out / "comment.md").read_text() + (out / "summary.md").read_text()
    assert "staff data" in said and "Not graded" in said
    assert "zoe" not in said and "m10" not in said and "72" not in said
    assert not (out / "report.age").exists()
