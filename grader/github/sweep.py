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
names the head. No waiting `minutes` for those: no check will ever come. Standard library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from grader.github.comment import BOT_LOGIN, MARKER, Runner, _gh, post_comment
from grader.github.event import SWEEP_KEY, EventError, sweep_event

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
    action: str  # "graded" (a comment names the head), "recent", "commented", "conflicting"
    head: dict | None = None  # for "conflicting": the sweep_head payload its grading runs with


def _bot_comment_heads(repo: str, number: int, gh: Runner) -> str:
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
    return "\n".join(text)


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
    """The conflicting heads to grade, as the GPU job's matrix (`heads`)."""
    return [s.head[SWEEP_KEY] for s in swept if s.action == "conflicting" and s.head]


def sweep(repo: str, minutes: int, now: datetime | None = None, gh: Runner = _gh) -> list[Swept]:
    """Comment on every open PR whose head is ungraded after `minutes`, and name each
    conflicting one for grading; what was done to each."""
    now = now or datetime.now(UTC)
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
        if sha[:12] in _bot_comment_heads(repo, number, gh):
            done.append(Swept(number, sha, "graded"))
            continue
        mergeable, owner, updated_now = _pr_state(repo, number, gh)
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
