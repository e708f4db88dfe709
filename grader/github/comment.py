"""The one PR comment: its marker, the "not graded" text, and posting it with `gh api`.

Every comment the grader writes starts with `MARKER`, so a new grading updates the one comment
instead of adding another, and only a comment the bot wrote counts as ours. When the grading
machine cannot grade (its GPU fails the preflight, the job fails or is cancelled), the comment
says so and that no score was recorded: `not_graded_body`, `failure_comment`; a submission the
trusted job refused (artifact, head tree) gets `rejected_comment`, naming the file. Each names
the head commit, so the sweep knows the head was answered. `find_pr` asks GitHub which open PR
has a head (the comment job never takes the number from the artifact). Standard library only:
the comment job runs on a bare Python.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from grader.core.files import atomic_write
from grader.github.artifact import show
from grader.github.event import REPO_RE, run_link

MARKER = "<!-- course-grader -->"
MAX_COMMENT_CHARS = 65_000  # GitHub rejects bodies over 65,536 characters
BOT_LOGIN = "github-actions[bot]"
NOT_YOUR_FAULT = (
    "Your submission was **not graded** and **no score was recorded**. This is a fault of the "
    "grading machine, not of your work: you need not change anything. The failed run is visible "
    "to your instructor, and grading runs again on your next push or when they re-run it."
)
MAX_DETAIL_CHARS = 4000
# The comment's machine-readable line, right under the marker: what the grader last did for the
# PR (the head, "graded" or "capped", the run to re-run, what feedback is held), read by the
# sweep (`read_state`). Only the bot writes it (a student cannot edit another's comment), and it
# holds nothing private: no score, no date of a student's own (an extension stays private).
STATE_PREFIX = "<!-- course-grader-state "
STATE_SUFFIX = " -->"
MAX_STATE_CHARS = 1500


def state_line(state: dict) -> str:
    """The comment's state line for `state` (plain JSON data)."""
    text = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    if "--" in text or len(text) > MAX_STATE_CHARS:
        raise ValueError("the comment state must be short JSON without '--'")
    return f"{STATE_PREFIX}{text}{STATE_SUFFIX}"


def read_state(body: str) -> dict | None:
    """The state line of one of our comments (`state_line`), or None when it has none."""
    for line in body.splitlines()[:3]:
        if line.startswith(STATE_PREFIX) and line.endswith(STATE_SUFFIX):
            try:
                state = json.loads(line[len(STATE_PREFIX) : -len(STATE_SUFFIX)])
            except ValueError:
                return None
            return state if isinstance(state, dict) else None
    return None


def not_graded_body(headline: str, detail: str = "") -> str:
    """The markdown saying a PR was not graded through no fault of the student's."""
    text = f"## ⚠️ Not graded: {headline}\n\n{NOT_YOUR_FAULT}\n"
    if detail:
        fence = "~~~~"
        clipped = detail[:MAX_DETAIL_CHARS].replace(fence, "~~~")
        text += (
            f"\n<details><summary>What failed</summary>\n\n{fence}text\n{clipped}\n{fence}\n"
            "\n</details>\n"
        )
    return text


def write_not_graded(out: Path, body: str, trailer: str = "", state: dict | None = None) -> None:
    """OUT/comment.md (with the marker, and the state line when given) and summary.md for a
    submission that was not graded, each written whole or not at all (a killed run leaves no
    half comment for the poster)."""
    out.mkdir(parents=True, exist_ok=True)
    tail = f"\n{trailer}\n" if trailer else ""
    head = MARKER + (f"\n{state_line(state)}" if state else "")
    atomic_write(out / "comment.md", f"{head}\n{body.rstrip()}\n{tail}")
    atomic_write(out / "summary.md", f"{body.rstrip()}\n{tail}")


def rejected_comment(out: Path | str, reason: str, head_sha: str = "") -> Path:
    """Comment for a submission the trusted job refused before grading (artifact, tree, event):
    the reason, which names the file, and what to do."""
    body = (
        "## ❌ Not graded: the submission was refused\n\n"
        "The grading run refused what your pull request handed in, before any of it ran. "
        "No score was recorded. Fix what is named below and push again.\n\n"
        f"~~~~text\n{reason[:MAX_DETAIL_CHARS].replace('~~~~', '~~~')}\n~~~~\n"
    )
    trailer = f"<sub>commit {show(head_sha[:12])}</sub>" if head_sha else ""
    write_not_graded(Path(out), body, trailer)
    return Path(out) / "comment.md"


def failure_comment(out: Path | str, job_result: str, head_sha: str = "") -> Path:
    """Comment for a grading job that ended without writing one (failed, cancelled, timed out).

    Only the workflow's own steps run before the grader writes its comment (student code runs
    in the sandbox, whose failures are graded as test outcomes), so such an ending is the
    machine's, and the student is told so.
    """
    word = job_result if re.fullmatch(r"[a-z_]{1,20}", job_result or "") else "unknown"
    link = run_link()
    detail = f"The grading job ended as '{word}' before it wrote a report."
    if link:
        detail += f" Its log: {link}"
    trailer = f"<sub>commit {show(head_sha[:12])}</sub>" if head_sha else ""
    write_not_graded(Path(out), not_graded_body("the grading job did not finish", detail), trailer)
    return Path(out) / "comment.md"


Runner = Callable[[Sequence[str], str | None], str]


def _gh(args: Sequence[str], stdin: str | None = None) -> str:
    """Run the GitHub CLI; its stdout, or RuntimeError with the start of its stderr."""
    proc = subprocess.run(
        ["gh", *args], input=stdin, capture_output=True, text=True, check=False, timeout=120
    )
    if proc.returncode != 0:
        raise RuntimeError(f"gh {' '.join(args[:3])} failed: {proc.stderr.strip()[:500]}")
    return proc.stdout


def post_comment(
    repo: str,
    pr_number: int,
    body: str,
    head_sha: str | None = None,
    bot_login: str = BOT_LOGIN,
    gh: Runner = _gh,
) -> str:
    """Create or update the one grader comment on the PR; returns 'created' or 'updated'.

    With head_sha, refuses to post unless the PR's head is that commit: a pr.json cannot send
    one student's grade to another student's PR. Only a comment the bot wrote counts as ours.
    """
    if not REPO_RE.match(repo):
        raise ValueError(f"bad repository name {show(repo)}")
    if isinstance(pr_number, bool) or not isinstance(pr_number, int) or pr_number <= 0:
        raise ValueError(f"bad PR number {pr_number!r}")
    if not body.startswith(MARKER):
        raise ValueError("comment body does not start with the grader marker")
    body = body[:MAX_COMMENT_CHARS]
    if head_sha is not None:
        actual = gh(["api", f"repos/{repo}/pulls/{pr_number}", "--jq", ".head.sha"], None).strip()
        if actual != head_sha:
            raise ValueError(
                f"PR #{pr_number} head is {show(actual)}, not the graded commit {head_sha}; "
                "not posting"
            )
    listing = gh(
        [
            "api",
            "--paginate",
            f"repos/{repo}/issues/{pr_number}/comments",
            "--jq",
            ".[] | {id: .id, login: .user.login, head: .body[0:40]}",
        ],
        None,
    )
    ours = None
    for line in listing.splitlines():
        if not line.strip():
            continue
        c = json.loads(line)
        if c.get("login") == bot_login and str(c.get("head", "")).startswith(MARKER):
            ours = int(c["id"])
            break
    payload = json.dumps({"body": body})
    if ours is None:
        gh(
            ["api", "-X", "POST", f"repos/{repo}/issues/{pr_number}/comments", "--input", "-"],
            payload,
        )
        return "created"
    gh(["api", "-X", "PATCH", f"repos/{repo}/issues/comments/{ours}", "--input", "-"], payload)
    return "updated"


def find_pr(repo: str, head_owner: str, head_branch: str, head_sha: str, gh: Runner = _gh) -> int:
    """The open PR whose head is `head_sha`, asked of GitHub (never taken from the artifact):
    the number a comment goes to when the artifact itself was refused or missing."""
    if not REPO_RE.match(repo) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", head_owner):
        raise ValueError(f"bad repository or owner {show(repo)} {show(head_owner)}")
    listing = gh(
        ["api", "--paginate", "-X", "GET", f"repos/{repo}/pulls", "-f", "state=open",
         "-f", f"head={head_owner}:{head_branch}", "--jq", ".[] | [.number, .head.sha] | @tsv"],
        None,
    )  # fmt: skip
    for line in listing.splitlines():
        number, _, sha = line.strip().partition("\t")
        if sha == head_sha and number.isdigit():
            return int(number)
    raise ValueError(f"no open pull request of {show(head_owner)} has head {show(head_sha)}")
