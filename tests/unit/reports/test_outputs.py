"""`grader grade` writes every requested output; one that fails is named, the rest still land."""

from __future__ import annotations

import json
from pathlib import Path

from test_report import ROOT, make_result

from grader.core.course import load_course
from grader.core.jsonread import metrics_or_none
from grader.gradebook import record
from grader.reports.outputs import report_outputs, unwritable, write_each


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
