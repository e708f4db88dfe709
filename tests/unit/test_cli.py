"""`grader.cli.main` is the one place an error becomes an exit code: a `GraderError` prints its
message once and exits with its branch's code; anything else is a bug and keeps its traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import cli
from grader.core.errors import ExitCode, UsageError
from grader.sandbox.isolation import IsolationRefused

ROOT = Path(__file__).resolve().parents[2]
REFUSAL = "grading refused: isolation incomplete\nno bwrap here; apt-get install bubblewrap"


def _refuse(*args, **kwargs):
    raise IsolationRefused(REFUSAL)


@pytest.mark.parametrize(
    ("module", "function", "argv"),
    [
        ("grader.grading.grade", "grade_submission", ["grade", "."]),
        ("grader.batch", "run_class", ["grade-all", "."]),
        ("grader.demo", "run_demo", ["demo"]),
    ],
)
def test_isolation_refused_exits_3_saying_its_message_once(
    monkeypatch, capsys, module, function, argv
):
    monkeypatch.setattr(f"{module}.{function}", _refuse)
    rc = cli.main(["--root", str(ROOT), *argv])
    err = capsys.readouterr().err
    assert rc == ExitCode.INFRASTRUCTURE == 3
    assert err.count(REFUSAL) == 1 and "not graded, nothing recorded" in err
    assert "Traceback" not in err


def test_a_usage_error_exits_2_with_its_message(monkeypatch, capsys):
    def bad(args):
        raise UsageError("course.toml: [course] missing key 'name'")

    monkeypatch.setattr(cli, "cmd_verify", bad)
    rc = cli.main(["--root", str(ROOT), "verify"])
    assert rc == ExitCode.USAGE == 2
    assert capsys.readouterr().err == "grader: error: course.toml: [course] missing key 'name'\n"


def test_a_bug_is_not_dressed_as_bad_input(monkeypatch):
    """A plain ValueError or OSError is the grader's bug: main lets it through with its
    traceback instead of printing it as something for the user to fix."""

    def bug(args):
        raise ValueError("an internal invariant broke")

    monkeypatch.setattr(cli, "cmd_verify", bug)
    with pytest.raises(ValueError, match="an internal invariant broke"):
        cli.main(["--root", str(ROOT), "verify"])


def test_a_submission_that_is_not_a_folder_is_named(tmp_path, capsys):
    not_a_folder = tmp_path / "submission.zip"
    not_a_folder.write_bytes(b"PK")
    rc = cli.main(["--root", str(ROOT), "grade", str(not_a_folder), "--no-sandbox"])
    err = capsys.readouterr().err
    assert rc == ExitCode.USAGE
    assert f"{not_a_folder}: not a directory" in err and "Traceback" not in err


def test_class_report_of_a_missing_folder_says_what_to_give(tmp_path, capsys):
    rc = cli.main(["--root", str(ROOT), "class-report", str(tmp_path / "nothing")])
    err = capsys.readouterr().err
    assert rc == ExitCode.USAGE
    assert f"{tmp_path / 'nothing'}: not a folder; give the --out folder" in err
