"""The scheduled sweep: every open PR whose head no grading has answered gets a comment.

A grading can end without a word: a self-hosted GPU job that no runner picks up waits 24 to 48
hours and vanishes (`timeout-minutes` does not count queue time), and GitHub runs no
`pull_request` workflow at all on a PR with merge conflicts. `sweep` (the `sweep` verb,
sweep.yml on a schedule) lists the open PRs; for each whose grader comment does not name its
current head commit and that was last updated more than `minutes` ago, it writes the one
comment saying the head was not graded, why that may be, and that no score was recorded. The
comment names the head, so the next sweep leaves it alone.

A PR whose branch conflicts with the base (GitHub's `mergeable` is false) is not commented on
but graded on its head, without `pull_request_target`: the sweep hands such heads, with the fork
owner and the PR's `updated_at` (GitHub's clock, never before that head was pushed), to the
workflow's GPU job as `heads` (`plan`); that job fetches the commit as data, lays out its tree as
the submission (`tree.submission_from_tree`) and grades it as grade.yml does, and its comment
names the head. No waiting `minutes` for those: no check will ever come.

The sweep also finishes what a grading left for later, from the state line of the grader's
comment (`comment.read_state`, written only by the bot) while the PR's head is still the commit
it names:

- a push over the grading cap (`status: capped`, grader.github.cap) whose next grading time has
  come (or whose student the staff has since lifted the cap for): its grade.yml run is re-run
  (`POST .../actions/runs/ID/rerun`), with the event, and so the submission time, of the push;
- a grading whose hidden-test feedback was held (`held`: course.toml's `hidden-after-due`,
  grader.core.visibility) once the earliest of those assignments' due dates for the student
  (their extension included, from the staff's data: the comment, being public, says no date)
  has passed: re-run likewise, or, for a head the sweep graded itself, graded again as a
  conflicting head with the time it was graded with. The new grading shows the full feedback.

A conflicting PR's head is graded at most once per window / gradings of course.toml's grading
cap (the sweep's own gradings are not in grade.yml's count). Standard library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from grader.core.course import Course
from grader.core.staff import STUDENT_ID, Staff
from grader.github.cap import read_time
from grader.github.comment import BOT_LOGIN, MARKER, Runner, _gh, post_comment, read_state
from grader.github.event import SWEEP_KEY, EventError, sweep_event

GRADE_AGAIN = ("conflicting", "delivering (sweep)")  # actions whose head the GPU job grades

UNGRADED = (
    "## ⏳ Not graded yet: commit `{short}`\n\n"
    "No grading run has reported on this commit {minutes} minutes after it was pushed: the GPU "
    "runner has not picked the job up (a pull request with merge conflicts is graded by the "
    "scheduled sweep instead, once GitHub reports the conflict). No score was recorded; your "
    "instructor can see this comment. It is replaced when grading reports."
)


@dataclass(frozen=True)
class Swept:
    """One open PR the sweep looked at and what it did."""

    number: int
    head_sha: str
    # "graded" (a comment names the head), "recent", "commented", "conflicting"; from the
    # comment's state: "capped", "regrading", "held", "delivering", "delivering (sweep)",
    # "spaced" (a conflicting head waits for the cap's spacing), "rerun failed"
    action: str
    head: dict | None = None  # GRADE_AGAIN: the sweep_head payload its grading runs with


def _bot_comments(repo: str, number: int, gh: Runner) -> list[str]:
    """The bodies (their first 2,000 characters) of the bot's comments with the marker."""
    listing = gh(
        ["api", "--paginate", f"repos/{repo}/issues/{number}/comments",
         "--jq", ".[] | {login: .user.login, body: .body[0:2000]}"],
        None,
    )  # fmt: skip
    text = []
    for line in listing.splitlines():
        if line.strip():
            c = json.loads(line)
            if c.get("login") == BOT_LOGIN and str(c.get("body", "")).startswith(MARKER):
                text.append(str(c["body"]))
    return text


def _rerun(repo: str, number: int, sha: str, run: object, action: str, gh: Runner) -> Swept:
    """Re-run the grade.yml run a state names (its event, and submission time, unchanged)."""
    if not isinstance(run, int) or isinstance(run, bool) or run <= 0:
        return Swept(number, sha, "graded")  # no run to re-run: nothing the sweep can do
    try:
        gh(["api", "-X", "POST", f"repos/{repo}/actions/runs/{run}/rerun"], None)
    except RuntimeError as exc:  # e.g. still running from the last sweep's re-run
        print(f"PR #{number}: re-running run {run} failed: {exc}")
        return Swept(number, sha, "rerun failed")
    return Swept(number, sha, action)


def _follow(
    repo: str,
    number: int,
    sha: str,
    state: dict,
    now: datetime,
    context: tuple[Course | None, Staff, frozenset[str]],
    gh: Runner,
) -> Swept:
    """What the comment's state asks of the sweep for the PR's current head (module doc)."""
    course, staff, lifted = context
    student = str(state.get("student", ""))
    if state.get("status") == "capped":
        due = read_time(state.get("next"))
        if due is not None and (now >= due or student in lifted):
            return _rerun(repo, number, sha, state.get("run"), "regrading", gh)
        return Swept(number, sha, "capped")
    held = state.get("held")
    if state.get("status") != "graded" or not held or course is None:
        return Swept(number, sha, "graded")
    ids = [a for a in held if isinstance(a, str) and a in course.assignment_ids]
    if not ids or not STUDENT_ID.fullmatch(student):
        return Swept(number, sha, "graded")
    if now < min(staff.due(course, student, a) for a in ids):
        return Swept(number, sha, "held")
    if state.get("via") != "sweep":
        return _rerun(repo, number, sha, state.get("run"), "delivering", gh)
    at = read_time(state.get("at"))
    try:
        head = sweep_event(number, sha, student, at.strftime("%Y-%m-%dT%H:%M:%SZ") if at else "")
    except EventError as exc:
        print(f"PR #{number}: its held feedback cannot be delivered here: {exc}")
        return Swept(number, sha, "held")
    return Swept(number, sha, "delivering (sweep)", head)


def _spaced(state: dict | None, course: Course | None, now: datetime) -> bool:
    """Whether a conflicting PR's last sweep grading is too recent for the grading cap."""
    if course is None or course.grading_cap is None or not state or state.get("via") != "sweep":
        return False
    last = read_time(state.get("graded_at"))
    cap = course.grading_cap
    return last is not None and now - last < timedelta(hours=cap.window_hours / cap.gradings)


def _pr_state(repo: str, number: int, gh: Runner) -> tuple[str, str, str]:
    """(mergeable: "true", "false" or "" while GitHub computes it, fork owner, updated_at)."""
    row = gh(
        ["api", f"repos/{repo}/pulls/{number}",
         "--jq", "[.mergeable, (.head.repo.owner.login // .user.login), .updated_at] | @tsv"],
        None,
    )  # fmt: skip
    mergeable, owner, updated = ([*row.strip("\n").split("\t"), "", "", ""])[:3]
    return mergeable, owner, updated


def plan(swept: list[Swept]) -> list[dict]:
    """The heads to grade (conflicting, or a swept head's held feedback to deliver), as the GPU
    job's matrix (`heads`)."""
    return [s.head[SWEEP_KEY] for s in swept if s.action in GRADE_AGAIN and s.head]


def sweep(
    repo: str,
    minutes: int,
    now: datetime | None = None,
    gh: Runner = _gh,
    course: Course | None = None,
    staff: Staff | None = None,
    lifted: frozenset[str] = frozenset(),
) -> list[Swept]:
    """Comment on every open PR whose head is ungraded after `minutes`, name each conflicting
    one for grading, and finish what a comment's state left for later (the module doc); what
    was done to each. `course` and `staff` give the cap and the due dates."""
    now = now or datetime.now(UTC)
    context = (course, staff or Staff(), lifted)
    prs = gh(
        ["api", "--paginate", "-X", "GET", f"repos/{repo}/pulls", "-f", "state=open",
         "--jq", ".[] | [.number, .head.sha, .updated_at] | @tsv"],
        None,
    )  # fmt: skip
    done = []
    for line in prs.splitlines():
        fields = line.strip().split("\t")
        if len(fields) != 3 or not fields[0].isdigit():
            continue
        number, sha, updated = int(fields[0]), fields[1], fields[2]
        bodies = _bot_comments(repo, number, gh)
        state = read_state(bodies[0]) if bodies else None
        if state is not None and state.get("head") == sha:
            done.append(_follow(repo, number, sha, state, now, context, gh))
            continue
        if sha[:12] in "\n".join(bodies):
            done.append(Swept(number, sha, "graded"))
            continue
        mergeable, owner, updated_now = _pr_state(repo, number, gh)
        if mergeable == "false" and _spaced(state, course, now):
            done.append(Swept(number, sha, "spaced"))
            continue
        if mergeable == "false":
            try:
                head = sweep_event(number, sha, owner, updated_now)
            except EventError as exc:
                print(f"PR #{number}: conflicting but not gradable here: {exc}")
            else:
                done.append(Swept(number, sha, "conflicting", head))
                continue
        when = datetime.fromisoformat(updated.replace("Z", "+00:00"))
        if now - when < timedelta(minutes=minutes):
            done.append(Swept(number, sha, "recent"))
            continue
        body = UNGRADED.format(short=sha[:12], minutes=minutes)
        post_comment(repo, number, f"{MARKER}\n{body}\n\n<sub>commit {sha[:12]}</sub>\n", gh=gh)
        done.append(Swept(number, sha, "commented"))
    return done
