"""The staff's data (grader.core.staff): extensions and the override log load strictly, each
mistake named with its file and line, and `grader override` appends decisions that survive a
reload exactly (or writes nothing when refused)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from factories import ROOT

from grader import cli
from grader.core.course import CourseError, load_course
from grader.core.staff import Override, StaffError, append_override, load_staff, toml_string

COURSE = load_course(ROOT)
M9_DUE = COURSE.assignment("m9_roofline").due


def staff_dir(tmp_path, extensions: str = "", overrides: str = ""):
    folder = tmp_path / "staff"
    folder.mkdir(exist_ok=True)
    if extensions:
        (folder / "extensions.toml").write_text(extensions)
    if overrides:
        (folder / "overrides.toml").write_text(overrides)
    return folder


def test_extensions_move_the_due_date_by_hours_or_to_a_date(tmp_path):
    folder = staff_dir(tmp_path, (
        '# two students\n[[extension]]\nstudent = "ada"\nassignment = "m9_roofline"\n'
        'hours = 36\nnote = "certificate"\n\n[[extension]]\nstudent = "bo"\n'
        'assignment = "gpu_fundamentals"\ndue = 2026-12-20T12:00:00+00:00\n'
    ))  # fmt: skip
    staff = load_staff(folder, COURSE)
    assert staff.due(COURSE, "ada", "m9_roofline") == M9_DUE + timedelta(hours=36)
    assert staff.due(COURSE, "bo", "gpu_fundamentals").isoformat() == "2026-12-20T12:00:00+00:00"
    assert staff.due(COURSE, "ada", "gpu_fundamentals") == COURSE.assignment("gpu_fundamentals").due
    assert staff.extension("ada", "m9_roofline").where == f"{folder / 'extensions.toml'}:2"
    staff.check_students(["ada", "bo", "cy"])
    with pytest.raises(StaffError, match=r"extensions.toml:8: student 'bo' is not in the class"):
        staff.check_students(["ada"], "the class")


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('[[extension]]\nstudent = "ada"\nassignment = "m10"\nhours = 1\n', 1,
         "unknown assignment 'm10'"),
        ('\n\n[[extension]]\nstudent = "ada"\nassignment = "m9_roofline"\nhour = 1\n', 3,
         "unknown key 'hour'"),
        ('[[extension]]\nstudent = "ada"\nassignment = "m9_roofline"\nhours = 1\n'
         'due = 2026-12-30T00:00:00Z\n', 1, "hours = H or due = DATE"),
        ('[[extension]]\nstudent = "a da"\nassignment = "m9_roofline"\nhours = 1\n', 1,
         "is not a student id"),
        ('[[extension]]\nstudent = "ada"\nassignment = "m9_roofline"\nhours = -2\n', 1,
         "must be positive"),
        ('[[extension]]\nstudent = "ada"\nassignment = "m9_roofline"\n'
         'due = 2026-12-01T00:00:00Z\n', 1, "is not after the course's due date"),
        ('[[extension]]\nstudent = "ada"\nassignment = "m9_roofline"\n'
         'due = 2026-12-30T00:00:00\n', 1, "needs a time zone"),
        ('[[extension]]\nstudent = "ada"\nassignment = "m9_roofline"\nhours = 1\n'
         '[[extension]]\nstudent = "ada"\nassignment = "m9_roofline"\nhours = 2\n', 5,
         "a second extension for ada on m9_roofline"),
    ],
)  # fmt: skip
def test_every_mistake_in_the_extensions_names_its_line(tmp_path, text, line, message):
    folder = staff_dir(tmp_path, text)
    with pytest.raises(StaffError) as info:
        load_staff(folder, COURSE)
    assert str(info.value).startswith(f"{folder / 'extensions.toml'}:{line}: ")
    assert message in str(info.value)


def test_tables_written_inline_or_broken_toml_are_refused(tmp_path):
    folder = staff_dir(tmp_path, 'extension = [{student = "ada", assignment = "m9_roofline"}]\n')
    with pytest.raises(StaffError, match="own \\[\\[extension\\]\\] table"):
        load_staff(folder, COURSE)
    folder = staff_dir(tmp_path, "[[extension]\n")
    with pytest.raises(StaffError, match="not valid TOML"):
        load_staff(folder, COURSE)


def decision(**changes) -> Override:
    fields = dict(student="bo", assignment="m9_roofline", test=None, points=40.5,
                  reason="x", by="lecturer@example.edu", at="2026-12-22T09:00:00+00:00")
    return Override(**{**fields, **changes})  # fmt: skip


def test_the_override_log_keeps_every_decision_and_the_last_one_stands(tmp_path):
    folder = tmp_path / "staff"
    tricky = 'the test\'s "expected" was wrong \\ see\nticket #12\tü \x07 end'
    append_override(folder, COURSE, decision(reason=tricky))
    append_override(folder, COURSE, decision(test="hidden/test_x[3]", points=1.125))
    append_override(folder, COURSE, decision(points=12))
    staff = load_staff(folder, COURSE)
    assert len(staff.log) == 3 and staff.log[0].reason == tricky.strip()
    standing = staff.overrides("bo")
    assert standing[("m9_roofline", None)].points == 12
    assert standing[("m9_roofline", "hidden/test_x[3]")].points == 1.125
    append_override(folder, COURSE, decision(points=None, remove=True, reason="appeal"))
    assert set(load_staff(folder, COURSE).overrides("bo")) == {("m9_roofline", "hidden/test_x[3]")}
    assert load_staff(folder, COURSE).overrides("ada") == {}


def test_a_refused_decision_writes_nothing(tmp_path):
    folder = tmp_path / "staff"
    path = append_override(folder, COURSE, decision())
    before = path.read_bytes()
    over = COURSE.assignment("m9_roofline").points + 1
    for bad in (decision(points=1.1), decision(points=over), decision(reason="  ")):
        with pytest.raises(StaffError):
            append_override(folder, COURSE, bad)
    assert path.read_bytes() == before


def test_toml_strings_escape_what_toml_requires():
    assert toml_string('a"b\\c\n\x7f') == '"a\\"b\\\\c\\n\\u007F"'
    with pytest.raises(StaffError):
        toml_string("\udc80")


def test_grader_override_checks_the_test_and_the_removal(tmp_path, capsys):
    base = ["--root", str(ROOT), "override", "bo", "m9_roofline", "--staff", str(tmp_path)]
    assert cli.main([*base, "--test", "test_nope", "--points", "1", "--reason", "r"]) == 2
    assert "no test 'test_nope'" in capsys.readouterr().err
    assert cli.main([*base, "--remove", "--reason", "r"]) == 2
    assert "no standing override" in capsys.readouterr().err
    name = "hidden/test_crossover_batch_random"
    assert cli.main([*base, "--test", name, "--points", "1.5", "--reason", "valid None",
                     "--by", "me"]) == 0  # fmt: skip
    assert "1.5 points for bo's m9_roofline test" in capsys.readouterr().out
    [o] = load_staff(tmp_path, COURSE).log
    assert (o.test, o.points, o.reason, o.by, o.remove) == (name, 1.5, "valid None", "me", False)
    assert cli.main([*base, "--test", name, "--remove", "--reason", "appeal lost"]) == 0
    assert load_staff(tmp_path, COURSE).overrides("bo") == {}


def test_course_toml_feedback_policy_and_grading_cap_are_checked(tmp_path):
    text = (ROOT / "course.toml").read_text()
    assert COURSE.grading_cap is None and {a.feedback for a in COURSE.assignments} == {"full"}
    (tmp_path / "course.toml").write_text(
        text.replace('needs_gpu = false\n', 'needs_gpu = false\nfeedback = "score-only"\n', 1)
        + "\n[grading_cap]\ngradings = 6\nwindow_hours = 24\n"
    )
    c = load_course(tmp_path)
    assert c.assignment("m9_roofline").feedback == "score-only" and c.grading_cap.gradings == 6
    (tmp_path / "course.toml").write_text(text.replace(
        'needs_gpu = false\n', 'needs_gpu = false\nfeedback = "hidden"\n', 1))  # fmt: skip
    with pytest.raises(CourseError, match="feedback 'hidden' is not one of full"):
        load_course(tmp_path)
    zero = "\n[grading_cap]\ngradings = 0\nwindow_hours = 24\n"
    (tmp_path / "course.toml").write_text(text + zero)
    with pytest.raises(CourseError, match="grading_cap"):
        load_course(tmp_path)
