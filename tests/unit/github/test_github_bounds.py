"""`gha grade-pr` with a hostile metrics.json: the comment, summary and reports are all written
(issue 12: it raised RecursionError after grading). The grading itself is the corpus's."""

from __future__ import annotations

import json

import factories
import pytest
from factories import grade_pr, make_artifact
from test_github import canned_result

from grader import github as gha
from grader.github import grade as gha_grade
from grader.github import private

BOMBS = {
    "nested": "[" * 100_000 + "]" * 100_000,
    "wide": "[" + "[]," * 300_000 + "[]]",
}


@pytest.mark.parametrize("kind", sorted(BOMBS))
def test_grade_pr_with_hostile_metrics(tmp_path, monkeypatch, kind):
    monkeypatch.setattr(
        gha_grade, "_grade", lambda sub, root, student, ts, **kw: canned_result(student, ts)
    )
    monkeypatch.setattr(gha_grade, "decide", lambda: None)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    art = make_artifact(tmp_path)
    (art / "metrics.json").write_text(BOMBS[kind])
    out = tmp_path / "report"
    rc = grade_pr(art, out)
    assert rc == 0
    for name in ("comment.md", "summary.md", "report.age"):
        assert (out / name).stat().st_size > 0, name
    key = tmp_path / "staff.key"
    key.write_text(f"{factories.STAFF}\n")
    opened = tmp_path / "opened"
    private.open_report(out / "report.age", key, opened)
    for name in ("report.md", "report.html", "result.json"):
        assert (opened / name).stat().st_size > 0, name
    assert json.loads((opened / "result.json").read_text())["student"] == "ada-student"
    assert "no student m9_roofline metrics" in (opened / "report.html").read_text()


@pytest.mark.parametrize("raw", [b"[" * 30_000 + b"]" * 30_000, b'{"number": ' * 3000 + b"1"])
def test_hostile_pr_json_is_an_artifact_error(raw):
    with pytest.raises(gha.ArtifactError, match="pr.json"):
        gha.parse_pr_json(raw)
