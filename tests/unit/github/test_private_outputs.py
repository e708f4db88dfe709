"""The demo class graded through grade-pr: what a public repository would show (the comment, the
job summary, pr.json, the log) reveals no score, no feedback and no hidden-test text, while the
sealed report holds all of it for the staff (and the student)."""

from __future__ import annotations

import json

import pytest
from factories import EVENT, HEAD, PR, ROOT, staff_identity

from grader import github as gha
from grader.core.course import load_course
from grader.core.points import fraction
from grader.github import grade as gha_grade
from grader.github import private

# the students whose grading fails tests with feedback (eve_hangs is the timeout's case, slow)
STUDENTS = ("cy_partial", "dan_hardcoded", "bob_untouched")


def _in_process(submission, root, student, timestamp, course=None, decision=None):
    from grader.grading.grade import grade_submission  # lazy: the suites, numpy

    # the real suites and feedback; in this process, as the sandbox cannot start on every
    # machine that runs the unit tests (what is checked is what reaches the public outputs)
    return grade_submission(
        submission, root, student, timestamp=timestamp, sandbox=False, course=course
    )


def secrets_of(opened):
    """Every string of the private report a classmate must not see."""
    result = json.loads((opened / "result.json").read_text())
    found = {fraction(result["score"], result["max_score"]), '"score"', "max_score"}
    for a in result["assignments"]:
        found.add(fraction(a["score"], a["max_score"]))
        for t in a["tests"]:
            found.add(t["name"])
            for line in (t.get("feedback") or "").splitlines():
                if len(line.strip()) >= 12:
                    found.add(line.strip()[:60])
    return found, result


@pytest.mark.slow
def test_the_demo_classs_public_outputs_show_no_score_feedback_or_hidden_test(
    tmp_path, monkeypatch, capsys
):
    from grader.demo.samples import build_sample_class

    monkeypatch.setattr(gha_grade, "decide", lambda: None)
    monkeypatch.setattr(gha_grade, "_grade", _in_process)
    staff = staff_identity()
    key = tmp_path / "staff.key"
    key.write_text(f"{staff}\n")
    course = load_course(ROOT)
    build_sample_class(course, tmp_path / "class")
    hidden_seen = 0
    for student in STUDENTS:
        art = tmp_path / student / "artifact"
        gha.pack_submission(tmp_path / "class" / student, art, PR, HEAD)
        out = tmp_path / student / "out"
        capsys.readouterr()
        args = ["grade-pr", "--artifact", str(art), "--event", str(EVENT), "--out", str(out)]
        rc = gha.main([*args, "--root", str(ROOT), "--staff-recipient", str(staff.to_public())])
        log = capsys.readouterr()
        assert rc == 0, log.err[-2000:]
        public = {p.name: p.read_text() for p in out.iterdir() if p.name != "report.age"}
        assert set(public) == {"comment.md", "summary.md", "pr.json"}
        public["log"] = log.out + log.err
        opened = tmp_path / student / "opened"
        private.open_report(out / "report.age", key, opened)
        found, result = secrets_of(opened)
        assert result["student"] == "ada-student" and result["max_score"] > 0
        hidden_seen += sum(t["suite"] == "hidden" for a in result["assignments"]
                           for t in a["tests"])  # fmt: skip
        assert any(t.get("feedback") for a in result["assignments"] for t in a["tests"])
        for where, text in public.items():
            leaked = sorted(s for s in found if s in text)
            assert leaked == [], f"{student}: {where} shows {leaked[:5]}"
    assert hidden_seen > 0  # the check covered hidden tests' names and feedback
