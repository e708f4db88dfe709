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

A reservation counts too: the gate job's `RESERVE_STEP`, which runs only when the gate lets
the push grade, succeeded in an attempt whose GPU job GitHub has not listed yet and whose run is
still going (the GPU job is created only once the gate has finished). A reservation lapses when
the run ends without that GPU job (cancelled in between); once the GPU job is listed, it decides.

Simultaneous pushes (issue 50): one student's gates run one at a time. grade.yml's gate job is
in a concurrency group of its own per repository and student (`cancel-in-progress: false`), so
a gate starts only after the previous one of that student finished, and that one's reservation
is in GitHub's record before it finished (a step's conclusion is recorded when the step ends).
K pushes at once with N of the cap used therefore grade at most cap - N. GitHub keeps one gate
running and one waiting per group and cancels an older waiting one when a newer one queues: a
cancelled gate's run writes the comment of a held push (`write_held`: no grading, the sweep
re-runs the run at its next pass, whose gate then decides). A grading grades every assignment
of the pull request, so the count is per student (docs/PRIVACY.md, "The cap under
simultaneous pushes").

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
GATE_JOB = "Hold the push against the grading cap"  # grade.yml's gate job (its `name`)
RESERVE_STEP = "Reserve a grading"  # the gate's step that runs only when the push grades
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
        for attempt, at in _counted(run, _jobs(gh, repo, run_id), now):
            if own is not None and run_id == own[0] and attempt >= own[1]:
                continue
            if now - window < at <= now:
                found.append(Grading(run_id, attempt, at, head))
    return sorted(found, key=lambda g: g.at)


def _counted(run: dict, jobs: list[dict], now: datetime) -> list[tuple[int, datetime]]:
    """The attempts of `run` that count, with their time: the GPU job's (`_counts`), else a
    reservation of the gate's that has not lapsed (`_reserved`)."""
    by_attempt: dict[int, dict[str, dict]] = {}
    for job in jobs:
        by_attempt.setdefault(int(job.get("run_attempt") or 1), {})[str(job.get("name"))] = job
    out = []
    for attempt, named in sorted(by_attempt.items()):
        gpu = named.get(GPU_JOB)
        if gpu is not None:
            if _counts(gpu):
                at = read_time(gpu.get("started_at")) or read_time(run.get("created_at")) or now
                out.append((attempt, at))
        elif (at_ := _reserved(named.get(GATE_JOB), run, attempt, now)) is not None:
            out.append((attempt, at_))
    return out


def _reserved(gate: dict | None, run: dict, attempt: int, now: datetime) -> datetime | None:
    """When the gate of `attempt` reserved a grading whose GPU job is not listed yet, while the
    run goes on (a finished run without that GPU job let its reservation lapse); else None."""
    if gate is None:
        return None
    step = next((s for s in gate.get("steps") or [] if s.get("name") == RESERVE_STEP), None)
    if step is None or step.get("conclusion") != "success":
        return None
    latest = int(run.get("run_attempt") or 1)
    if run.get("status") == "completed" or attempt < latest:
        return None
    return read_time(step.get("completed_at")) or read_time(gate.get("started_at")) or now


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


def held_body(head: str) -> str:
    """The comment of a push whose gate GitHub cancelled while it waited behind another gate of
    the same student (the module doc): held for the sweep, nothing graded."""
    return (
        f"## ⏳ Held: commit `{head[:12]}`\n\n"
        "Another push of yours reached the grading cap's check at the same moment. This course "
        "checks one student's pushes against the cap one at a time, and GitHub keeps only the "
        "newest waiting check, so this one was not checked. The scheduled sweep (twice an "
        "hour) checks it again and grades the latest commit of this pull request if the cap "
        "allows; push again whenever you like. The free check (the public tests, on CPU) ran "
        "on this push as on every push. No score was recorded for this commit."
    )


def write_held(out: Path, head: str, student: str, run: int, now: datetime) -> Path:
    """OUT/comment.md (its state asks the sweep to re-run `run` from `now` on, as for a capped
    push) and summary.md of a push whose gate was cancelled in GitHub's queue."""
    state = {"head": head, "status": "capped", "run": run, "student": student,
             "next": github_time(now), "why": "gate queue"}  # fmt: skip
    body = held_body(head)
    trailer = f"<sub>commit {head[:12]}</sub>"
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "comment.md", f"{MARKER}\n{state_line(state)}\n{body}\n\n{trailer}\n")
    atomic_write(out / "summary.md", f"{body}\n\n{trailer}\n")
    return out / "comment.md"
