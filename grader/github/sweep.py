"""The scheduled sweep: every open PR whose head no grading has answered gets a comment.

A grading can end without a word: a self-hosted GPU job that no runner picks up waits 24 to 48
hours and vanishes (`timeout-minutes` does not count queue time), and GitHub runs no
`pull_request` workflow at all on a PR with merge conflicts. `sweep` (the `sweep` verb,
sweep.yml on a schedule) lists the open PRs; for each whose grader comment does not name its
current head commit and that was last updated more than `minutes` ago, it writes the one
comment saying the head was not graded, why that may be, and that no score was recorded. The
comment names the head, so the next sweep leaves it alone. Standard library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from grader.github.comment import BOT_LOGIN, MARKER, Runner, _gh, post_comment

UNGRADED = (
    "## ⏳ Not graded yet: commit `{short}`\n\n"
    "No grading run has reported on this commit {minutes} minutes after it was pushed. Either "
    "the GPU runner has not picked the job up, or your pull request has merge conflicts (GitHub "
    "runs no check on a conflicting pull request: resolve them, then push). No score was "
    "recorded; your instructor can see this comment. It is replaced when grading reports."
)


@dataclass(frozen=True)
class Swept:
    """One open PR the sweep looked at and what it did."""

    number: int
    head_sha: str
    action: str  # "graded" (a comment names the head), "recent", "commented"


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


def sweep(repo: str, minutes: int, now: datetime | None = None, gh: Runner = _gh) -> list[Swept]:
    """Comment on every open PR whose head is ungraded after `minutes`; what was done to each."""
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
        when = datetime.fromisoformat(updated.replace("Z", "+00:00"))
        if now - when < timedelta(minutes=minutes):
            done.append(Swept(number, sha, "recent"))
            continue
        body = UNGRADED.format(short=sha[:12], minutes=minutes)
        post_comment(repo, number, f"{MARKER}\n{body}\n\n<sub>commit {sha[:12]}</sub>\n", gh=gh)
        done.append(Swept(number, sha, "commented"))
    return done
