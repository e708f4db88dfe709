"""The one report writer: `grader grade` writes every requested output (one that fails is named,
the rest still land), grade, grade-all and grade-pr write the same bytes for the same result, every
write is atomic, and no report carries a raw control or bidi character."""

from __future__ import annotations

import errno
import io
import json
import re
from pathlib import Path

import pytest
from test_report import ROOT, make_result

from grader.core.course import load_course
from grader.core.jsonread import metrics_or_none
from grader.core.results import GradeResult
from grader.gradebook import record
from grader.reports.outputs import (
    REPORT_FILES,
    report_outputs,
    unwritable,
    write_each,
    write_reports,
)


def test_one_failing_output_does_not_stop_the_others(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "metrics.json").write_text("[" * 100_000 + "]" * 100_000)  # hostile: still readable
    result, course = make_result(), load_course(ROOT)
    outputs = report_outputs(
        result,
        course,
        json=str(tmp_path / "r.json"),
        markdown_path=str(tmp_path / "missing-dir" / "r.md"),  # cannot be written
        html_path=str(tmp_path / "r.html"),
        metrics=lambda: metrics_or_none(sub / "metrics.json"),
    )
    gradebook = tmp_path / "gb.db"
    failed = write_each(
        [*outputs, ("--gradebook", str(gradebook), lambda: record(gradebook, result, course))]
    )
    assert len(failed) == 1 and failed[0].startswith("--markdown ") and "missing-dir" in failed[0]
    assert json.loads((tmp_path / "r.json").read_text())["student"] == "alice"
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert gradebook.stat().st_size > 0


def test_an_output_not_asked_for_is_not_written(tmp_path):
    outputs = report_outputs(make_result(), load_course(ROOT), json=str(tmp_path / "r.json"))
    assert write_each(outputs) == []
    assert [p.name for p in Path(tmp_path).iterdir()] == ["r.json"]


def test_grade_refuses_before_grading_when_an_output_cannot_be_written(
    tmp_path, monkeypatch, capsys
):
    import grader.grading.grade as grade
    from grader.cli import main

    def never(*args, **kwargs):
        raise AssertionError("graded although an output cannot be written")

    monkeypatch.setattr(grade, "grade_submission", never)
    (tmp_path / "a-file").write_text("")
    code = main(
        [
            "--root",
            str(ROOT),
            "grade",
            str(tmp_path),
            "--json",
            str(tmp_path / "no-such-dir" / "r.json"),
            "--html",
            str(tmp_path),
            "--markdown",
            str(tmp_path / "ok.md"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert (
        f"--json {tmp_path / 'no-such-dir' / 'r.json'} (the folder" in err
        and "does not exist" in err
    )
    assert f"--html {tmp_path} (it is a folder)" in err and "nothing was graded" in err
    assert "--markdown" not in err
    assert unwritable([("--json", str(tmp_path / "r.json")), ("--html", None)]) == []


# ------------------------------------------------------------------------------ the one writer

HOSTILE = "bad\u202etxt.exe\u202c \u2066iso\u2069 \x1b[31mred\x1b[0m bell\x07 nul\x00 half\ud800"
RAW = ("\u202e", "\u202c", "\u2066", "\u2069", "\x1b", "\x07", "\x00", "\ud800")


def hostile_result(student: str = "eve") -> GradeResult:
    """Student text in every field a report shows: feedback, an error, a warning, the name."""
    r = make_result(HOSTILE)
    r.student = f"{student}\u202e"
    r.warnings.append(f"ignored {HOSTILE}")
    r.assignments[1].error = HOSTILE
    return r


def canned(submission: Path, student: str, work: Path) -> GradeResult:
    """grade_all's grade_one (top level: its spawned child imports it by name)."""
    return hostile_result(student)


def by_grade(result: GradeResult, course, folder: Path) -> dict[str, Path]:
    """What `grader grade --json --markdown --html` writes, under the folder set's names."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {kind: folder / name for kind, name in REPORT_FILES.items()}
    flags = dict(json=str(paths["json"]), markdown_path=str(paths["markdown"]))
    assert write_each(report_outputs(result, course, **flags, html_path=str(paths["html"]))) == []
    return paths


@pytest.mark.parametrize("writer", [write_reports, by_grade], ids=["folder set", "grade"])
def test_control_and_bidi_characters_are_made_visible_in_every_report(tmp_path, course, writer):
    paths = writer(hostile_result(), course, tmp_path / "out")
    assert sorted(paths) == ["html", "json", "markdown"]
    for kind, path in paths.items():
        text = path.read_bytes().decode("utf-8")  # a lone surrogate could not even be written
        assert not [ch for ch in RAW if ch in text], kind
        if kind == "json":  # data, kept exactly (JSON writes it as ASCII escapes)
            stored = json.loads(text)
            assert stored["assignments"][1]["error"] == HOSTILE and text.isascii()
        else:  # every field shows its placeholders, escaped for the page
            for shown in ("&lt;U+202E&gt;", "&lt;U+2066&gt;", "&lt;U+D800&gt;", "bell\u2407"):
                assert text.count(shown) >= 3, (kind, shown)  # feedback, error, warning


def test_grade_and_grade_all_write_the_same_files_for_the_same_result(
    tmp_path, course, monkeypatch
):
    import grader.grading.grade as grade
    from grader.batch import grade_all
    from grader.cli import main
    from grader.grading.reference import reference_record

    sub = tmp_path / "class" / "eve"
    (sub / "exercises").mkdir(parents=True)
    (sub / "exercises" / "a.py").write_text("x")
    reference = reference_record(course)
    out = tmp_path / "graded"
    quiet = {"progress": io.StringIO(), "summary": io.StringIO()}
    grade_all(sub.parent, out, grade_one=canned, course=course, reference=reference, **quiet)
    batch = out / "eve"
    result = GradeResult.from_dict(json.loads((batch / "result.json").read_text()))
    assert result.assignments[1].error == HOSTILE  # the canned result, through a child

    monkeypatch.setattr(grade, "grade_submission", lambda *a, **k: result)
    single = tmp_path / "single"
    single.mkdir()
    flags = [("--json", "json"), ("--markdown", "markdown"), ("--html", "html")]
    args = [x for flag, kind in flags for x in (flag, str(single / REPORT_FILES[kind]))]
    assert main(["--root", str(ROOT), "grade", str(sub), *args]) == 0

    reports = sorted(REPORT_FILES.values())
    assert sorted(p.name for p in single.iterdir()) == reports
    assert set(reports) <= {p.name for p in batch.iterdir()}
    for name in reports:
        assert (single / name).read_bytes() == (batch / name).read_bytes(), name


def test_every_command_writes_reports_through_the_one_writer():
    from grader.batch import schedule
    from grader.github import grade as grade_pr
    from grader.reports import outputs

    assert schedule.write_reports is outputs.write_reports  # grade-all and the demo
    assert grade_pr.write_reports is outputs.write_reports
    # no report module, and not grade-pr, writes a file but through grader.core.files
    direct = re.compile(r"\.write_(?:text|bytes)\(|\bopen\([^)]*[\"'][wax]")
    sources = [*(ROOT / "grader" / "reports").glob("*.py"), ROOT / "grader/github/grade.py"]
    assert len(sources) > 5
    assert [p.name for p in sources if direct.search(p.read_text())] == []


def test_a_write_that_fails_midway_leaves_the_old_file_or_none(tmp_path, course, monkeypatch):
    old = write_reports(make_result(), course, tmp_path / "old")
    before = {p.name: p.read_bytes() for p in (tmp_path / "old").iterdir()}
    real = Path.write_bytes

    def half_then_full_disk(self: Path, data: bytes) -> int:
        real(self, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", half_then_full_disk)
    with pytest.raises(OSError, match="No space"):
        write_reports(hostile_result(), course, tmp_path / "old")
    with pytest.raises(OSError, match="No space"):
        write_reports(hostile_result(), course, tmp_path / "new")
    flags = dict(json=str(old["json"]), markdown_path=str(old["markdown"]))
    failed = write_each(
        report_outputs(hostile_result(), course, **flags, html_path=str(old["html"]))
    )
    assert [f.split()[0] for f in failed] == ["--json", "--markdown", "--html"]
    assert all("No space" in f for f in failed)
    # the old set whole, no temporary file beside it, nothing half-written in the new folder
    assert {p.name: p.read_bytes() for p in (tmp_path / "old").iterdir()} == before
    assert list((tmp_path / "new").iterdir()) == []
