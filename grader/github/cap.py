"""The cap on authoritative gradings: at most `gradings` GPU gradings of one student in any
`window_hours` (course.toml's `[grading_cap]`), counted from GitHub's own record.

What counts, and why a student cannot forge it: the runs of the trusted `grade.yml` (it runs
from the default branch; its `run-name` is `Grade <login> <head>`, the login being the fork's
owner GitHub names in the event) and, in each, the GPU job (`GPU_JOB`) whose grading step
(`GRADING_STEP`) ran: in progress, or finished graded or cancelled (a newer push cancelled it
mid-grading: the GPU was used). A GPU job queued or running counts too (it is about to grade).
A grading step that failed (the machine could not grade: no GPU, no sandbox) does not count:
the grader's failure never costs a student a grading. A job cancelled before its grading step
(a newer push came first) costs nothing either. Every attempt of a run counts (`filter=all`):
the sweep's re-run of a capped push is a grading of its own. All of it is read with the run's
read-only token through `gh api`; nothing comes from the pull request.

`gate` (the `gate` verb, grade.yml's first job, on a free runner) decides before any GPU runner
starts: under the cap, or the student's cap lifted by the staff (the repository variable
`GRADING_CAP_LIFTED`, logins separated by spaces or commas), the push is graded; over it, the
run writes the one PR comment saying when the next grading will run (`next_grading`: when the
oldest grading that fills the cap leaves the window) and starts no GPU job. The sweep
(grader.github.sweep) re-runs that run then, so the latest push is graded once the window
allows, and only it: an older capped push's comment was replaced by the newer one's. The free
CPU check runs on every push regardless (student-check.yml has no cap).

The gradings the sweep itself makes of a PR with merge conflicts (no grade.yml run) are not in
this count; the sweep spaces them out per PR instead (at most one per window / gradings).
Standard library only: the gate runs on the runner's bare Python.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from grader.core.course import GradingCap
from grader.core.files import atomic_write
from grader.github.comment import MARKER, Runner, _gh, state_line
from grader.github.event import REPO_RE

GRADE_WORKFLOW = "grade.yml"
GPU_JOB = "Grade on GPU"  # grade.yml's GPU job (its `name`)
GRADING_STEP = "Grade in the sandbox"  # that job's grading step (its `name`)
RUN_TITLE = "Grade {student} {head}"  # grade.yml's `run-name`
COUNTED = ("success", "cancelled")  # a finished grading step that counts
LIFTED_VARIABLE = "GRADING_CAP_LIFTED"
_LOGIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\[\]-]{0,99}$")


@dataclass(frozen=True)
class Grading:
    """One counted grading: the run, its attempt, when its GPU job started, the head."""

    run: int
    attempt: int
    at: datetime
    head: str


@dataclass(frozen=True)
class Decision:
    """The gate's answer for one push: grade now, or not before `next_at`."""

    grade: bool
    counted: int  # gradings of the student in the window
    next_at: datetime | None = None
    why: str = ""


def lifted_logins(text: str | None) -> frozenset[str]:
    """The logins of `GRADING_CAP_LIFTED` (spaces or commas between them)."""
    return frozenset(w for w in re.split(r"[\s,]+", text or "") if _LOGIN_RE.match(w))


def github_time(when: datetime) -> str:
    """GitHub's own format for a time (`2026-12-14T23:59:00Z`)."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def read_time(text: object) -> datetime | None:
    """A time GitHub (or our own state line) wrote: ISO 8601 with a zone, else None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else None


def _documents(text: str) -> list[dict]:
    """The JSON objects `gh api --paginate` prints one page after another."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        doc, i = decoder.raw_decode(text, i)
        if isinstance(doc, dict):
            out.append(doc)
    return out


def _runs(gh: Runner, repo: str, since: datetime, actor: str | None) -> list[dict]:
    args = ["api", "--paginate", "-X", "GET",
            f"repos/{repo}/actions/workflows/{GRADE_WORKFLOW}/runs",
            "-f", f"created=>={github_time(since)}", "-f", "event=workflow_run",
            "-f", "per_page=100"]  # fmt: skip
    if actor:
        args += ["-f", f"actor={actor}"]
    return [r for page in _documents(gh(args, None)) for r in page.get("workflow_runs") or []]


def _jobs(gh: Runner, repo: str, run: int) -> list[dict]:
    text = gh(["api", "--paginate", "-X", "GET", f"repos/{repo}/actions/runs/{run}/jobs",
               "-f", "filter=all", "-f", "per_page=100"], None)  # fmt: skip
    return [j for page in _documents(text) for j in page.get("jobs") or []]


def is_student_run(run: dict, student: str) -> str | None:
    """The head a grade.yml run grades when its title names `student` (RUN_TITLE), else None."""
    prefix = RUN_TITLE.format(student=student, head="")
    title = str(run.get("display_title") or "")
    head = title.removeprefix(prefix)
    return head if title.startswith(prefix) and re.fullmatch(r"[0-9a-f]{40}", head) else None


def _counts(job: dict) -> bool:
    """Whether a GPU job graded (or is about to): see the module doc."""
    if job.get("name") != GPU_JOB:
        return False
    if job.get("status") != "completed":
        return True
    step = next((s for s in job.get("steps") or [] if s.get("name") == GRADING_STEP), None)
    if step is None:
        return False
    return step.get("status") == "in_progress" or step.get("conclusion") in COUNTED


def gradings(
    repo: str,
    student: str,
    now: datetime,
    window: timedelta,
    gh: Runner | None = None,
    own: tuple[int, int] | None = None,
) -> list[Grading]:
    """The student's gradings whose GPU job started in the window ending at `now`, oldest first.

    Runs created up to two windows back are read (a re-run keeps its run's creation time; the
    sweep re-runs a capped push at most one window after it). `own` = (run id, attempt): this
    run's current attempt is left out (its GPU job waits on the gate that asks). Listed by actor
    first, the run's triggering student; when that listing lacks `own` (GitHub named another
    actor), every run of the window is read and the titles alone decide."""
    if not REPO_RE.match(repo) or not _LOGIN_RE.match(student):
        raise ValueError(f"bad repository or student {repo[:120]!r} {student[:120]!r}")
    gh = gh or _gh
    since = now - 2 * window
    runs = _runs(gh, repo, since, student)
    if own is not None and own[0] not in {r.get("id") for r in runs}:
        runs = _runs(gh, repo, since, None)
    found = []
    for run in runs:
        head = is_student_run(run, student)
        run_id = run.get("id")
        if head is None or not isinstance(run_id, int):
            continue
        for job in _jobs(gh, repo, run_id):
            attempt = int(job.get("run_attempt") or 1)
            if own is not None and run_id == own[0] and attempt >= own[1]:
                continue
            at = read_time(job.get("started_at")) or read_time(run.get("created_at")) or now
            if _counts(job) and now - window < at <= now:
                found.append(Grading(run_id, attempt, at, head))
    return sorted(found, key=lambda g: g.at)


def next_grading(times: list[datetime], cap: GradingCap) -> datetime:
    """When a grading slot frees: the oldest of the last `gradings` leaves the window."""
    ordered = sorted(times)
    return ordered[len(ordered) - cap.gradings] + timedelta(hours=cap.window_hours)


def decide(
    cap: GradingCap | None,
    student: str,
    counted: Iterable[datetime],
    lifted: frozenset[str] = frozenset(),
) -> Decision:
    """Grade now, or the time the next grading may run (see the module doc)."""
    times = list(counted)
    if cap is None:
        return Decision(True, len(times), why="the course sets no grading cap")
    if student in lifted:
        return Decision(True, len(times), why=f"the staff lifted the cap for {student}")
    if len(times) < cap.gradings:
        return Decision(
            True, len(times), why=f"{len(times)} of {cap.gradings} gradings in the window"
        )
    return Decision(
        False,
        len(times),
        next_grading(times, cap),
        f"{len(times)} of {cap.gradings} gradings in the window",
    )


def capped_body(head: str, cap: GradingCap, decision: Decision) -> str:
    """The comment of a push over the cap: when the next grading runs, and what still runs."""
    when = decision.next_at.strftime("%Y-%m-%d %H:%M UTC") if decision.next_at else "later"
    return (
        f"## ⏳ Graded later: commit `{head[:12]}`\n\n"
        f"This course grades each student's pull requests on its GPU runner at most "
        f"**{cap.gradings} times in {cap.window_hours:g} hours**, and this push is over that "
        f"cap. **Your next grading will run at {when}**: the scheduled sweep (twice an hour) "
        "then grades the latest commit of this pull request, so push again whenever you like; "
        "only the latest commit is graded. The free check (the public tests, on CPU) ran on "
        "this push as on every push: run `grader check` for quick feedback meanwhile. No score "
        "was recorded for this commit."
    )


def write_capped(
    out: Path, head: str, student: str, run: int, cap: GradingCap, decision: Decision
) -> Path:
    """OUT/comment.md (with the state the sweep reads) and summary.md of a capped push."""
    state = {"head": head, "status": "capped", "run": run, "student": student,
             "next": github_time(decision.next_at or datetime.now(UTC))}  # fmt: skip
    body = capped_body(head, cap, decision)
    trailer = f"<sub>commit {head[:12]}</sub>"
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "comment.md", f"{MARKER}\n{state_line(state)}\n{body}\n\n{trailer}\n")
    atomic_write(out / "summary.md", f"{body}\n\n{trailer}\n")
    return out / "comment.md"
