"""`grade-pr`: grade one pull request's validated submission, offline, in the sandbox.

The artifact is validated again and copied afresh (grade-pr may run on its own, on a zip or a
folder), its pr.json held against the workflow event, and only `exercises/**` and `metrics.json`
graded, with the student and the trusted time the event names. The grade is private
(`grader.github.private`): result.json, report.md, report.html and the scored pr.json are written
to a temporary folder, sealed into OUT/report.age for the student's SSH keys and the staff, and
never left in OUT. What OUT holds besides is public: comment.md (starts with the marker) and
summary.md say that grading finished and how to open the report, pr.json names the PR, head,
student and time (and where the time came from), never a score, a feedback line or a test name.

The staff's data (`--staff`, default `<root>/staff`: the grading job checks it out from the
private instructor repository) applies as in every grading: the student's extension in the late
policy, then the overrides (`grader.grading.finalize`). The report the student can open is
their view under course.toml's feedback policy at the time of grading
(`grader.core.visibility`): where it holds hidden-test feedback back, the full report is sealed
for the staff alone into OUT/staff.age, and the comment says which assignments' feedback is
held (never until when: an extension is private) and that it will be delivered; its state line
tells the sweep, which grades the head again once the due date has passed.
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from grader.core.course import Course, find_root, load_course
from grader.core.errors import InfrastructureError
from grader.core.files import atomic_write
from grader.core.jsonread import metrics_or_none
from grader.core.late import parse_timestamp
from grader.core.results import GradeResult
from grader.core.staff import Staff, StaffError, load_staff, staff_folder
from grader.core.visibility import held, student_view
from grader.github.artifact import EXERCISES, validate_artifact
from grader.github.cap import github_time
from grader.github.comment import (
    MARKER,
    MAX_COMMENT_CHARS,
    not_graded_body,
    state_line,
    write_not_graded,
)
from grader.github.event import (
    SWEEP_KEY,
    cross_check,
    head_of,
    load_event,
    run_link,
    student_of,
    submitted_at,
    time_source,
)
from grader.github.private import SEALED_NAME, PrivateReportError, Recipients, recipients, seal
from grader.grading.finalize import finalize, unapplied
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


STAFF_SEALED_NAME = "staff.age"  # the full report, for the staff, when the student's holds back


def public_body(head_sha: str, can_open: bool, view: GradeResult | None = None) -> str:
    """What the public comment and summary say of a graded PR: finished, how to open it, and
    which assignments' hidden-test feedback the report holds back (no date: see the module)."""
    text = f"## ✅ Grading finished for commit `{head_sha[:12]}`\n\n" + (
        OPEN_HOWTO if can_open else NO_KEY
    )
    waiting = [a.id for a in held(view)] if view is not None else []
    scores = [a.id for a in view.assignments if a.hidden_feedback == "scores"] if view else []
    if waiting:
        text += (
            f"\n\nThe hidden tests of {', '.join(f'`{a}`' for a in waiting)} show their score "
            "per graded function until the due date (yours, if you have an extension); their "
            "full feedback reaches this pull request after it, when this commit is graded again."
        )
    if scores:
        text += (
            f"\n\nThe hidden tests of {', '.join(f'`{a}`' for a in scores)} show their score per "
            "graded function (this course's feedback policy for them)."
        )
    return text + "\n"


def grade_pr(
    artifact: Path | str,
    event_path: Path | str,
    out: Path | str,
    private: Recipients,
    root: Path | str | None = None,
    timestamp: str | None = None,
    grade: Callable[..., Any] | None = None,
    decision: Decision | None = None,
    staff: Staff | None = None,
    now: datetime | None = None,
    staff_dir: Path | None = None,
) -> dict[str, Path]:
    """Grade the validated submission of one PR; seal its reports, write the public comment.

    The course is read here once and, with the caller's isolation `decision`, handed to the
    grading, so that the reports and the grading cannot see two different courses. `staff`:
    the staff's data (default: read from `staff_dir`, else `<root>/staff`); `now`: the time the
    feedback policy is judged at (default: the grading machine's clock).

    Long because its steps are the trust story of a PR's grade and read best in order: the
    artifact validated against the event, graded, the staff's data applied, the student's view
    and the staff's report sealed, and only then anything public written."""
    artifact = Path(artifact)
    out = Path(out)
    root = Path(root) if root is not None else find_root()
    event = load_event(event_path)
    course = load_course(root)
    if staff is None:
        staff = _staff(course, staff_dir, out, head_of(event))
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
        now = now or datetime.now(UTC)
        view = _views(result, course, staff, now)
        metrics = metrics_or_none(submission / "metrics.json")

        meta = {
            "number": pr.number,
            "head_sha": pr.head_sha,
            "student": student,
            "submitted_at": when.isoformat(),
            "submitted_at_source": source,
        }
        out.mkdir(parents=True, exist_ok=True)
        sealed = _seal_reports(view, course, metrics, meta, Path(tmp) / "private", private, out)
        if any(a.hidden_feedback != "full" for a in view.assignments):
            staff_only = Recipients((), private.staff)
            _seal_reports(result, course, metrics, meta, Path(tmp) / "staff", staff_only, out,
                          STAFF_SEALED_NAME)  # fmt: skip
    state = {
        "head": pr.head_sha, "status": "graded", "student": student, "run": _run_id(),
        "via": "sweep" if SWEEP_KEY in event else "check", "at": github_time(when),
        "graded_at": github_time(now), "held": [a.id for a in held(view)],
    }  # fmt: skip
    body = public_body(pr.head_sha, private.student_can_open, view)
    return _write_public(out, sealed, body, trailer, meta, state)


def _views(result: GradeResult, course: Course, staff: Staff, now: datetime) -> GradeResult:
    """`result` finalized with the staff's data (in place: the staff's full report), and the
    student's view of it at `now` (the feedback policy), returned."""
    finalize(result, course, staff)  # the student's extension, then the overrides
    view = student_view(result, course, now, staff)
    hide = set(unapplied(result))  # the staff's own problem, named in the staff's report
    view.warnings = [w for w in view.warnings if w not in hide]
    return view


def _staff(course: Course, folder: Path | None, out: Path, head: str) -> Staff:
    """The staff's data, or a "not graded" comment without its error, which may name a student
    (this log and the comment are public), and InfrastructureError."""
    try:
        return load_staff(staff_folder(course.root, folder), course)
    except StaffError:
        headline = "the course's staff data (extensions, overrides) does not load"
        detail = (
            "Its error is not shown here, as it may name a student. The staff see it by running "
            "`grader grade-all` (or `grader grade`) on their copy of the instructor repository."
        )
        trailer = f"<sub>commit {head[:12]}</sub>" if head else ""
        write_not_graded(out, not_graded_body(headline, detail), trailer)
        raise InfrastructureError(headline, detail) from None


def _run_id() -> int | None:
    """This workflow run's id (what the sweep re-runs), from the runner; None outside Actions."""
    run = os.environ.get("GITHUB_RUN_ID", "")
    return int(run) if run.isdigit() else None


def _seal_reports(
    result: GradeResult,
    course: Course,
    metrics: dict | None,
    meta: dict[str, Any],
    secret: Path,
    private: Recipients,
    out: Path,
    name: str = SEALED_NAME,
) -> Path:
    """The reports and the scored pr.json, written in `secret` (a temporary folder) and sealed
    to `private` in `out/name`: no score leaves this function unencrypted."""
    paths = write_reports(result, course, secret, metrics=metrics)
    scored = secret / "pr.json"
    atomic_write(
        scored,
        json.dumps({**meta, "score": result.score, "max_score": result.max_score}, indent=2) + "\n",
    )
    return seal([paths["json"], paths["markdown"], paths["html"], scored], private,
                out / name)  # fmt: skip


def _trailer(number: int, head_sha: str) -> str:
    """The comment's last line: which PR and commit, and the grading run when there is one."""
    link = run_link()
    return f"<sub>PR #{number} · commit {head_sha[:12]}" + (
        f" · [grading run]({link})</sub>" if link else "</sub>"
    )


def _write_public(
    out: Path, sealed: Path, body: str, trailer: str, meta: dict[str, Any], state: dict
) -> dict[str, Path]:
    """The files anyone may read next to the sealed reports: PR comment (with the state line
    the sweep reads), job summary, pr.json."""
    comment = f"{MARKER}\n{state_line(state)}\n{body.rstrip()}\n\n{trailer}\n"
    comment = comment[:MAX_COMMENT_CHARS]
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
    staff: str | None = None,
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
        return grade_pr(
            artifact, event, out, private, root, timestamp, decision=decision,
            staff_dir=Path(staff) if staff else None,
        )  # fmt: skip
    finally:
        resume_commands(token)
