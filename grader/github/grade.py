"""`grade-pr`: grade one pull request's validated submission, offline, in the sandbox.

The artifact is validated again and copied afresh (grade-pr may run on its own, on a zip or a
folder), its pr.json held against the workflow event, and only `exercises/**` and `metrics.json`
graded, with the student and the trusted time the event names. Writes OUT/comment.md (starts
with the marker), summary.md, result.json, report.html, report.md and pr.json. When the grading
machine cannot grade (`InfrastructureError`: its GPU fails the preflight), writes only
OUT/comment.md and summary.md saying so, records no score, and the error propagates (exit 3).

Needs the installed grader (the sandbox, numpy): `grader.github.main` imports this module only
for `grade-pr`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from grader.core.course import find_root, load_course
from grader.core.infra import InfrastructureError
from grader.core.jsonread import metrics_or_none
from grader.core.late import parse_timestamp
from grader.core.results import GradeResult
from grader.github.artifact import EXERCISES, validate_artifact
from grader.github.comment import MARKER, MAX_COMMENT_CHARS, not_graded_body, write_not_graded
from grader.github.event import cross_check, load_event, run_link, student_of, submitted_at
from grader.grading.grade import grade_submission
from grader.reports import write_reports
from grader.sandbox.isolation import require_isolation


def _grade(submission: Path, root: Path, student: str, timestamp: datetime) -> GradeResult:
    """Grade with the sandboxed grader (tests replace this with a stand-in)."""
    return grade_submission(submission, root=root, student=student, timestamp=timestamp)


def _copy_submission(artifact_dir: Path, dest: Path) -> None:
    """exercises/** and metrics.json only (pr.json is ours, not the student's code)."""
    src_ex = artifact_dir / EXERCISES
    if src_ex.is_dir() and not src_ex.is_symlink():
        shutil.copytree(src_ex, dest / EXERCISES, symlinks=True)
    metrics = artifact_dir / "metrics.json"
    if metrics.is_file() and not metrics.is_symlink():
        shutil.copyfile(metrics, dest / "metrics.json")


def grade_pr(
    artifact: Path | str,
    event_path: Path | str,
    out: Path | str,
    root: Path | str | None = None,
    timestamp: str | None = None,
    grade: Callable[..., Any] | None = None,
) -> dict[str, Path]:
    """Grade the validated submission of one PR; write the comment, summary and reports to out."""
    artifact = Path(artifact)
    out = Path(out)
    root = Path(root) if root is not None else find_root()
    event = load_event(event_path)
    course = load_course(root)
    with tempfile.TemporaryDirectory(prefix="gha-submission-") as tmp:
        # validated again and copied afresh: grade-pr may be run on its own, on a zip or a folder
        clean = Path(tmp) / "artifact"
        pr = validate_artifact(artifact, extract_to=clean).pr
        cross_check(pr, event)
        student = student_of(event)
        when = parse_timestamp(timestamp or submitted_at(event))
        submission = Path(tmp) / "submission"
        submission.mkdir()
        _copy_submission(clean, submission)
        link = run_link()
        trailer = f"<sub>PR #{pr.number} · commit {pr.head_sha[:12]}" + (
            f" · [grading run]({link})</sub>" if link else "</sub>"
        )
        try:
            result = (grade or _grade)(submission, root, student, when)
        except InfrastructureError as exc:
            write_not_graded(out, not_graded_body(exc.headline, exc.detail), trailer)
            raise
        metrics = metrics_or_none(submission / "metrics.json")

    out.mkdir(parents=True, exist_ok=True)
    paths = write_reports(result, course, out, metrics=metrics)
    body = paths["markdown"].read_text(encoding="utf-8")
    comment = f"{MARKER}\n{body.rstrip()}\n\n{trailer}\n"
    if len(comment) > MAX_COMMENT_CHARS:  # reports.markdown keeps under 60 kB; belt and braces
        comment = comment[: MAX_COMMENT_CHARS - 40] + "\n\n✂️ truncated\n"
    paths["comment"] = out / "comment.md"
    paths["comment"].write_text(comment, encoding="utf-8")
    paths["summary"] = out / "summary.md"
    paths["summary"].write_text(f"{body.rstrip()}\n\n{trailer}\n", encoding="utf-8")
    paths["pr"] = out / "pr.json"
    paths["pr"].write_text(
        json.dumps(
            {
                "number": pr.number,
                "head_sha": pr.head_sha,
                "student": student,
                "submitted_at": when.isoformat(),
                "score": result.score,
                "max_score": result.max_score,
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    return paths


def stop_commands() -> str | None:
    """Stop the runner from reading workflow commands in what student code may print."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return None
    token = secrets.token_hex(16)
    print(f"::stop-commands::{token}", flush=True)
    return token


def resume_commands(token: str | None) -> None:
    """Let the runner read workflow commands again (`token` from `stop_commands`)."""
    if token:
        print(f"::{token}::", flush=True)


def grade_pr_command(
    artifact: str, event: str, out: str, root: str | None, timestamp: str | None
) -> dict[str, Path]:
    """The `grade-pr` verb: refuse without the sandbox (no override on the authoritative path),
    then grade with the runner's workflow commands stopped."""
    require_isolation()
    token = stop_commands()
    try:
        return grade_pr(artifact, event, out, root, timestamp)
    finally:
        resume_commands(token)
