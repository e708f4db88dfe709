"""The workflow event: what GitHub itself says about the run that triggered the grading.

The grading workflow runs on `workflow_run` after the student check. Its event payload, written
by GitHub and not by the pull request, names the triggering run's event, head commit, pull
requests, fork owner and creation time: `cross_check` holds the artifact's pr.json against it
(and refuses a run of any workflow file but the course's own check, `CHECK_WORKFLOW`: a PR can
add a workflow named "Student check"), `student_of` takes the student id from it and
`submitted_at` the trusted time for the late policy: when GitHub created the check run for that
head (`TIME_SOURCE`, recorded in pr.json), never a time the PR's workflow wrote; the files graded
are tied to that same head by `grader.github.tree`. `run_link` points a comment at this run.

A PR with merge conflicts gets no check run, so the scheduled sweep grades its head itself: its
trusted plan job writes a `sweep_head` payload (`sweep_event`) from what GitHub's API said of the
PR (number, head, fork owner, and `updated_at`, GitHub's clock, never earlier than the push of
that head: `SWEEP_TIME_SOURCE`), and the same functions read it in place of a workflow_run.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from grader.core.errors import SubmissionError
from grader.github.artifact import PullRequest

_LOGIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\[\]-]{0,99}$")
CHECK_WORKFLOW = ".github/workflows/student-check.yml"
TIME_SOURCE = "workflow_run.created_at"
SWEEP_TIME_SOURCE = "pulls.updated_at (sweep: the PR had merge conflicts, so no check ran)"
SWEEP_KEY = "sweep_head"
REPO_RE = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")


class EventError(SubmissionError, ValueError):
    """The workflow event does not describe a gradable pull request run."""


def load_event(path: Path | str) -> dict[str, Any]:
    """The workflow_run event payload at `path` (GitHub's own file, $GITHUB_EVENT_PATH)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise EventError(f"{path}: not a workflow_run event payload")
    if isinstance(data.get("workflow_run"), dict):
        return data
    head = data.get(SWEEP_KEY)
    if isinstance(head, dict) and set(head) == {"number", "head_sha", "student", "updated_at"}:
        return data
    raise EventError(f"{path}: not a workflow_run event payload")


def sweep_event(number: int, head_sha: str, student: str, updated_at: str) -> dict[str, Any]:
    """The payload the sweep grades a conflicting PR's head with (what GitHub's API said)."""
    if not isinstance(number, int) or number <= 0:
        raise EventError(f"PR number {number!r}: not a positive integer")
    if not re.fullmatch(r"[0-9a-f]{40}", head_sha):
        raise EventError(f"{head_sha[:80]!r}: not a full commit sha")
    if not _LOGIN_RE.match(student):
        raise EventError(f"{student[:120]!r}: not a GitHub login")
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", updated_at):
        raise EventError(f"{updated_at[:80]!r}: not GitHub's UTC timestamp")
    return {SWEEP_KEY: {"number": number, "head_sha": head_sha, "student": student,
                        "updated_at": updated_at}}  # fmt: skip


def head_of(event: dict[str, Any]) -> str:
    """The head commit the event names ("" when none)."""
    run = event.get("workflow_run") or event.get(SWEEP_KEY) or {}
    sha = run.get("head_sha")
    return sha if isinstance(sha, str) else ""


def time_source(event: dict[str, Any]) -> str:
    """Where `submitted_at` takes the time from (recorded in pr.json)."""
    return SWEEP_TIME_SOURCE if SWEEP_KEY in event else TIME_SOURCE


def cross_check(pr: PullRequest, event: dict[str, Any]) -> None:
    """The artifact's claims against what GitHub itself says about the triggering run."""
    if SWEEP_KEY in event:
        head = event[SWEEP_KEY]
        if pr.head_sha != head["head_sha"] or pr.number != head["number"]:
            raise EventError(
                f"pr.json: PR #{pr.number} at {pr.head_sha} is not the swept head "
                f"PR #{head['number']} at {head['head_sha']}"
            )
        return
    run = event["workflow_run"]
    if run.get("event") != "pull_request":
        raise EventError(f"the triggering run came from {run.get('event')!r}, not pull_request")
    if run.get("path") != CHECK_WORKFLOW:
        raise EventError(
            f"the triggering run is of {str(run.get('path'))[:200]!r}, not the course's own "
            f"check {CHECK_WORKFLOW}"
        )
    if pr.head_sha != run.get("head_sha"):
        raise EventError(
            f"pr.json: head_sha {pr.head_sha} is not the triggering run's head "
            f"{run.get('head_sha')!r}"
        )
    numbers = [p.get("number") for p in run.get("pull_requests") or [] if isinstance(p, dict)]
    if numbers and pr.number not in numbers:
        raise EventError(f"pr.json: PR #{pr.number} is not among the run's pull requests {numbers}")


def student_of(event: dict[str, Any]) -> str:
    """The student id: the owner of the fork the PR comes from (GitHub sets it, not the PR)."""
    if SWEEP_KEY in event:
        login = event[SWEEP_KEY]["student"]
        if isinstance(login, str) and _LOGIN_RE.match(login):
            return login
        raise EventError("cannot tell the student: the swept head names no valid login")
    run = event["workflow_run"]
    for candidate in (
        ((run.get("head_repository") or {}).get("owner") or {}).get("login"),
        (run.get("actor") or {}).get("login"),
    ):
        if isinstance(candidate, str) and _LOGIN_RE.match(candidate):
            return candidate
    raise EventError("cannot tell the student: the event names no fork owner or actor")


def submitted_at(event: dict[str, Any]) -> str:
    """When GitHub created the triggering check run (or, for a swept head, the PR's
    updated_at): the trusted time for the late policy."""
    if SWEEP_KEY in event:
        return str(event[SWEEP_KEY]["updated_at"])
    created = event["workflow_run"].get("created_at")
    if not isinstance(created, str) or not created:
        raise EventError("the event has no workflow_run.created_at")
    return created


def run_link() -> str:
    """This run's page on GitHub, from the runner's environment; "" outside Actions."""
    server = os.environ.get("GITHUB_SERVER_URL", "")
    repo = os.environ.get("GITHUB_REPOSITORY", "")
    run_id = os.environ.get("GITHUB_RUN_ID", "")
    if server and REPO_RE.match(repo) and run_id.isdigit():
        return f"{server}/{repo}/actions/runs/{run_id}"
    return ""
