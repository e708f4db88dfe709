"""`grade-pr`: grade one pull request's validated submission, offline, in the sandbox.

The artifact is validated again and copied afresh (grade-pr may run on its own, on a zip or a
folder), its pr.json held against the workflow event, and only `exercises/**` and `metrics.json`
graded, with the student and the trusted time the event names. The grade is private
(`grader.github.private`): result.json, report.md, report.html and the scored pr.json are written
to a temporary folder, sealed into OUT/report.age for the student's SSH keys and the staff, and
never left in OUT. What OUT holds besides is public: comment.md (starts with the marker) and
summary.md say that grading finished and how to open the report, pr.json names the PR, head,
student and time (and where the time came from), never a score, a feedback line or a test name.
When the grading machine cannot grade (`InfrastructureError`: its GPU fails the preflight, the
sandbox is incomplete, the staff key is missing), writes only OUT/comment.md and summary.md
saying so, records no score, and exits 3.

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

from grader.core.course import Course, find_root, load_course
from grader.core.errors import InfrastructureError
from grader.core.files import atomic_write
from grader.core.jsonread import metrics_or_none
from grader.core.late import parse_timestamp
from grader.core.results import GradeResult
from grader.github.artifact import EXERCISES, validate_artifact
from grader.github.comment import MARKER, MAX_COMMENT_CHARS, not_graded_body, write_not_graded
from grader.github.event import (
    cross_check,
    head_of,
    load_event,
    run_link,
    student_of,
    submitted_at,
    time_source,
)
from grader.github.private import SEALED_NAME, PrivateReportError, Recipients, recipients, seal
from grader.grading.grade import grade_submission
from grader.reports import write_reports
from grader.sandbox.isolation import Decision, IsolationRefused, decide

OPEN_HOWTO = (
    "Your score and feedback are private: only you and the course staff can read them. "
    "Download the `grading-report` artifact of the grading run linked below, unzip it, and run "
    "`grader open-report report.age` in your clone (it uses `~/.ssh/id_ed25519`; pass "
    "`--identity` for another key listed on your GitHub account)."
)
NO_KEY = (
    "Your GitHub account lists no SSH key the report can be encrypted to (ssh-ed25519 or "
    "ssh-rsa), so only the course staff can open this report. Add such a key at "
    "https://github.com/settings/keys and push again, or ask the staff for your result."
)


def _grade(
    submission: Path,
    root: Path,
    student: str,
    timestamp: datetime,
    course: Course | None = None,
    decision: Decision | None = None,
) -> GradeResult:
    """Grade with the sandboxed grader, with grade-pr's one course read and one isolation
    decision (tests replace this with a stand-in)."""
    return grade_submission(
        submission,
        root=root,
        student=student,
        timestamp=timestamp,
        course=course,
        decision=decision,
    )


def _copy_submission(artifact_dir: Path, dest: Path) -> None:
    """exercises/** and metrics.json only (pr.json is ours, not the student's code)."""
    src_ex = artifact_dir / EXERCISES
    if src_ex.is_dir() and not src_ex.is_symlink():
        shutil.copytree(src_ex, dest / EXERCISES, symlinks=True)
    metrics = artifact_dir / "metrics.json"
    if metrics.is_file() and not metrics.is_symlink():
        shutil.copyfile(metrics, dest / "metrics.json")


def public_body(head_sha: str, can_open: bool) -> str:
    """What the public comment and summary say of a graded PR: finished, and how to open it."""
    return (
        f"## ✅ Grading finished for commit `{head_sha[:12]}`\n\n"
        + (OPEN_HOWTO if can_open else NO_KEY)
        + "\n"
    )


def grade_pr(
    artifact: Path | str,
    event_path: Path | str,
    out: Path | str,
    private: Recipients,
    root: Path | str | None = None,
    timestamp: str | None = None,
    grade: Callable[..., Any] | None = None,
    decision: Decision | None = None,
) -> dict[str, Path]:
    """Grade the validated submission of one PR; seal its reports, write the public comment.

    The course is read here once and, with the caller's isolation `decision`, handed to the
    grading, so that the reports and the grading cannot see two different courses."""
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
        source = "--timestamp" if timestamp else time_source(event)
        submission = Path(tmp) / "submission"
        submission.mkdir()
        _copy_submission(clean, submission)
        trailer = _trailer(pr.number, pr.head_sha)
        try:
            result = (grade or _grade)(
                submission, root, student, when, course=course, decision=decision
            )
        except InfrastructureError as exc:
            write_not_graded(out, not_graded_body(exc.headline, exc.detail), trailer)
            raise
        metrics = metrics_or_none(submission / "metrics.json")

        meta = {
            "number": pr.number,
            "head_sha": pr.head_sha,
            "student": student,
            "submitted_at": when.isoformat(),
            "submitted_at_source": source,
        }
        out.mkdir(parents=True, exist_ok=True)
        sealed = _seal_reports(result, course, metrics, meta, Path(tmp) / "private", private, out)

    return _write_public(
        out, sealed, public_body(pr.head_sha, private.student_can_open), trailer, meta
    )


def _seal_reports(
    result: GradeResult,
    course: Course,
    metrics: dict | None,
    meta: dict[str, Any],
    secret: Path,
    private: Recipients,
    out: Path,
) -> Path:
    """The reports and the scored pr.json, written in `secret` (a temporary folder) and sealed
    to `private` in `out`: no score leaves this function unencrypted."""
    paths = write_reports(result, course, secret, metrics=metrics)
    scored = secret / "pr.json"
    atomic_write(
        scored,
        json.dumps({**meta, "score": result.score, "max_score": result.max_score}, indent=2) + "\n",
    )
    return seal([paths["json"], paths["markdown"], paths["html"], scored], private,
                out / SEALED_NAME)  # fmt: skip


def _trailer(number: int, head_sha: str) -> str:
    """The comment's last line: which PR and commit, and the grading run when there is one."""
    link = run_link()
    return f"<sub>PR #{number} · commit {head_sha[:12]}" + (
        f" · [grading run]({link})</sub>" if link else "</sub>"
    )


def _write_public(
    out: Path, sealed: Path, body: str, trailer: str, meta: dict[str, Any]
) -> dict[str, Path]:
    """The files anyone may read next to the sealed reports: PR comment, job summary, pr.json."""
    comment = f"{MARKER}\n{body.rstrip()}\n\n{trailer}\n"[:MAX_COMMENT_CHARS]
    public = {"sealed": sealed, "comment": out / "comment.md", "summary": out / "summary.md"}
    atomic_write(public["comment"], comment)
    atomic_write(public["summary"], f"{body.rstrip()}\n\n{trailer}\n")
    public["pr"] = out / "pr.json"
    atomic_write(public["pr"], json.dumps(meta, indent=2) + "\n")
    return public


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
    artifact: str,
    event: str,
    out: str,
    root: str | None,
    timestamp: str | None,
    student_keys: str | None = None,
    staff_recipient: str = "",
) -> dict[str, Path]:
    """The `grade-pr` verb: refuse without the sandbox or the staff key (no override on the
    authoritative path; each refusal leaves a "not graded" comment and exits 3), then grade with
    the runner's workflow commands stopped."""
    try:
        private = recipients(student_keys, staff_recipient)
        decision = decide()  # the grading's one decision, handed down to every worker
    except (IsolationRefused, PrivateReportError) as exc:
        headline, _, detail = str(exc).partition("\n")
        head = head_of(load_event(event))
        trailer = f"<sub>commit {head[:12]}</sub>" if head else ""
        write_not_graded(
            Path(out),
            not_graded_body(f"the grading machine is not set up ({headline})", detail),
            trailer,
        )
        raise InfrastructureError(headline, detail) from None
    token = stop_commands()
    try:
        return grade_pr(artifact, event, out, private, root, timestamp, decision=decision)
    finally:
        resume_commands(token)
