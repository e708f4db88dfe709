"""What the GitHub workflows run (.github/student-workflows/*.yml), kept out of the YAML.

    python -m grader.github pack-submission --out DIR --pr N --head-sha SHA
        student check (pull_request, untrusted, no secrets): copy `exercises/**`, `metrics.json`
        and a `pr.json` into DIR for the `submission` artifact (`artifact.pack_submission`).
    python -m grader.github validate-artifact SRC [--event EVENT.json] [--extract-to DIR]
                                              [--github-output FILE]
        grading (workflow_run, trusted): check the downloaded artifact, a directory or its zip
        (`artifact.validate_artifact`, the limits in `grader.grading.limits`), cross-check its
        pr.json against the event (`event`); with --extract-to, write the accepted files there.
    python -m grader.github grade-pr --artifact DIR --event EVENT.json --out OUT [--timestamp ISO]
                                     --student-keys KEYS --staff-recipient AGE1...
        grade a validated submission with the sandboxed grader (`grade.grade_pr`); seals the
        reports into OUT/report.age for the student's SSH keys and the staff (`private`) and
        writes the public OUT/comment.md (starts with the marker), summary.md and pr.json, none
        with a score. No network. When the grading machine cannot grade (its GPU fails the
        preflight, a sandbox layer or the staff key is missing), writes only OUT/comment.md and
        summary.md saying so, records no score and exits 3.
    python -m grader.github verify-tree ARTIFACT --git-dir GIT --sha SHA
        grading, trusted: every file of the artifact is the blob of that path in commit SHA's
        tree (fetched as data into GIT, never checked out), and no file of the tree is missing
        (`tree`).
    python -m grader.github find-pr --repo R --head-owner O --head-branch B --head-sha S
                                    [--github-output FILE]
        the open PR whose head is S, asked of GitHub (`comment.find_pr`), for the comment job.
    python -m grader.github release-commit [--root DIR] [--github-output FILE]
        the instructor commit the student repository was exported from (course-release.json):
        the hidden suites are fetched at it, never at the instructor repository's HEAD.
    python -m grader.github sweep --repo R --minutes N [--github-output FILE]
        comment on every open PR whose head no grading answered for N minutes (`sweep`); a PR
        with merge conflicts is named in the `heads` output (JSON) for grading instead.
    python -m grader.github head-submission --git-dir GIT --head JSON --out DIR --event-out F
        the sweep's grading of a conflicting PR, trusted: lay out commit SHA's tree (fetched as
        data into GIT) as the submission in DIR (`tree.submission_from_tree`) and write the
        sweep_head payload grade-pr reads in place of a workflow_run event (`event.sweep_event`).
    python -m grader.github failure-comment --out OUT --job-result RESULT
        the comment job, when grading wrote no comment (the job failed or was cancelled): a short
        OUT/comment.md saying what failed and that no score was recorded (`comment`).
    python -m grader.github post-comment --pr N --body FILE --repo OWNER/NAME [--head-sha SHA]
        create or update the one PR comment that starts with the marker, with `gh api`.
    python -m grader.github held-comment --event EVENT.json --run-id ID --out OUT
        grade.yml's comment job, when GitHub cancelled the gate while it waited behind another
        gate of the same student: OUT/comment.md saying the push is held for the sweep (`cap`).
    python -m grader.github gate --repo R --event EVENT.json --run-id ID [--run-attempt N]
                                 [--lifted LOGINS] --out OUT [--github-output FILE]
        grade.yml's first job, on a free runner: is the push under course.toml's grading cap
        (`cap`: the student's gradings counted from GitHub's record of grade.yml's runs)? Writes
        grade=true, or grade=false and OUT/comment.md saying when the next grading runs.

Every verb but grade-pr runs before anything is installed (on the runner's bare Python), so this
package and its `artifact`, `event` and `comment` modules import only the standard library and
grader modules that do; `grade` (the sandbox, numpy) is imported only for grade-pr.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from grader.core.course import load_course
from grader.core.errors import ExitCode, GraderError, InfrastructureError, UsageError
from grader.core.staff import StaffError, load_staff, staff_folder
from grader.core.student_repo import RELEASE_RECORD
from grader.github.artifact import (
    ArtifactError,
    PullRequest,
    pack_submission,
    parse_pr_json,
    show,
    validate_artifact,
)
from grader.github.cap import (
    LIFTED_VARIABLE,
    gradings,
    lifted_logins,
    write_capped,
    write_held,
)
from grader.github.cap import decide as cap_decide
from grader.github.comment import (
    BOT_LOGIN,
    MARKER,
    failure_comment,
    find_pr,
    post_comment,
    rejected_comment,
)
from grader.github.event import (
    EventError,
    cross_check,
    head_of,
    load_event,
    student_of,
    submitted_at,
    sweep_event,
)
from grader.github.sweep import plan as sweep_plan
from grader.github.sweep import sweep as sweep_ungraded
from grader.github.tree import TreeMismatch, submission_from_tree, verify_tree

# What the workflows (`main`) and the tests use from the package; the rest is imported from its
# module (grader.github.artifact, .comment, ...).
__all__ = [
    "BOT_LOGIN",
    "MARKER",
    "ArtifactError",
    "EventError",
    "PullRequest",
    "cross_check",
    "failure_comment",
    "load_event",
    "main",
    "pack_submission",
    "parse_pr_json",
    "post_comment",
    "release_commit",
    "student_of",
    "submitted_at",
    "sweep_event",
    "validate_artifact",
]


def __getattr__(name: str) -> Any:
    # lazy: grade-pr needs the installed grader (the sandbox, numpy); the other verbs run first
    if name == "grade_pr":
        from grader.github.grade import grade_pr

        return grade_pr
    raise AttributeError(f"module 'grader.github' has no attribute {name!r}")


def release_commit(root: Path | str) -> str:
    """The instructor commit recorded at export; ValueError when absent or malformed."""
    path = Path(root) / RELEASE_RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read the release record ({exc}); re-export") from None
    commit = data.get("instructor_commit") if isinstance(data, dict) else None
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise UsageError(
            f"{path}: 'instructor_commit' is not a full commit sha; export again from a git "
            "checkout of the instructor repository"
        )
    if data.get("suites_uncommitted") is not False:
        raise UsageError(
            f"{path}: exported while the suites had uncommitted changes, so commit {commit} "
            "does not hold them; commit them and export again"
        )
    return commit


def _event_head(path: str | None) -> str:
    """The head commit GitHub names in the event at `path`, or "" (for a refusal's trailer)."""
    try:
        sha = head_of(load_event(path)) if path else ""
    except (OSError, ValueError):
        return ""
    return sha if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{40}", sha) else ""


def _is_sha(value: str) -> bool:
    return bool(re.fullmatch(r"[0-9a-f]{40}", value))


def _write_outputs(path: str | None, values: dict[str, str]) -> None:
    """Append `key=value` lines to $GITHUB_OUTPUT (a value with a newline is refused)."""
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        for k, v in values.items():
            if "\n" in v or "\r" in v:
                raise UsageError(f"output {k} holds a newline")
            fh.write(f"{k}={v}\n")


def gate(args: argparse.Namespace) -> str:
    """The `gate` verb: grade this push now, or write the comment saying when (module `cap`)."""
    event = load_event(args.event)
    student, head = student_of(event), head_of(event)
    if not _is_sha(head):
        raise EventError("the event names no head commit")
    course = load_course(Path(args.root))
    cap, lifted = course.grading_cap, lifted_logins(args.lifted)
    now = datetime.now(UTC)
    times = []
    if cap is not None and student not in lifted:
        window = timedelta(hours=cap.window_hours)
        own = (args.run_id, args.run_attempt)
        times = [g.at for g in gradings(args.repo, student, now, window, own=own)]
    decision = cap_decide(cap, student, times, lifted)
    _write_outputs(args.github_output, {"grade": "true" if decision.grade else "false"})
    if decision.grade or cap is None:
        return f"grade {head[:12]} of {student}: {decision.why}"
    write_capped(Path(args.out), head, student, args.run_id, cap, decision)
    return f"not graded now ({decision.why}); next grading at {decision.next_at}"


def held(args: argparse.Namespace) -> Path:
    """The `held-comment` verb: the comment of a push whose gate was cancelled (module `cap`)."""
    event = load_event(args.event)
    head = head_of(event)
    if not _is_sha(head):
        raise EventError("the event names no head commit")
    return write_held(Path(args.out), head, student_of(event), args.run_id, datetime.now(UTC))


def _parser() -> argparse.ArgumentParser:
    """The verbs the workflows call, with their flags.

    Long because it is a declarative table: one `add_argument` line per flag of each verb."""
    p = argparse.ArgumentParser(prog="python -m grader.github", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    v = sub.add_parser("validate-artifact", help="check a downloaded submission artifact")
    v.add_argument("src")
    v.add_argument("--event", help="workflow_run event payload to cross-check pr.json against")
    v.add_argument("--extract-to", help="copy the accepted files into this (new) folder")
    v.add_argument("--github-output", help="append pr-number, head-sha, student here")
    v.add_argument("--comment-to", help="on rejection, write the refusal's comment.md here")

    g = sub.add_parser("grade-pr", help="grade one PR's validated submission, offline")
    g.add_argument("--artifact", required=True)
    g.add_argument("--event", required=True)
    g.add_argument("--out", required=True)
    g.add_argument("--root", help="course root (default: found from the current folder)")
    g.add_argument("--timestamp", help="override the event's workflow_run.created_at")
    g.add_argument("--student-keys", help="the PR author's https://github.com/LOGIN.keys")
    g.add_argument(
        "--staff-recipient",
        default=os.environ.get("STAFF_AGE_RECIPIENT", ""),
        help="the staff's age public key (default: $STAFF_AGE_RECIPIENT)",
    )
    g.add_argument("--staff", help="the staff's data folder (default: ROOT/staff)")

    t = sub.add_parser("verify-tree", help="the artifact's files against the head commit's tree")
    t.add_argument("src")
    t.add_argument("--git-dir", required=True)
    t.add_argument("--sha", required=True)
    t.add_argument("--comment-to", help="on a mismatch, write the refusal's comment.md here")

    c = sub.add_parser("post-comment", help="create or update the PR comment with gh api")
    c.add_argument("--repo", required=True)
    c.add_argument("--pr", required=True, type=int)
    c.add_argument("--body", required=True)
    c.add_argument("--head-sha", help="refuse unless the PR's head is this commit")

    fp = sub.add_parser("find-pr", help="the open PR whose head is a commit (gh api)")
    fp.add_argument("--repo", required=True)
    fp.add_argument("--head-owner", required=True)
    fp.add_argument("--head-branch", required=True)
    fp.add_argument("--head-sha", required=True)
    fp.add_argument("--github-output")

    rc = sub.add_parser("release-commit", help="the instructor commit this repository came from")
    rc.add_argument("--root", default=".")
    rc.add_argument("--github-output")

    sw = sub.add_parser("sweep", help="comment on open PRs whose head was never graded")
    sw.add_argument("--repo", required=True)
    sw.add_argument("--minutes", type=int, default=60)
    sw.add_argument("--github-output", help="append heads=JSON (the conflicting PRs) here")
    sw.add_argument("--root", default=".")
    sw.add_argument("--staff", help="the staff's data folder (default: ROOT/staff)")
    sw.add_argument("--lifted", default="", help="logins whose grading cap the staff lifted")

    gt = sub.add_parser("gate", help="is this push under the grading cap? (grade.yml)")
    gt.add_argument("--repo", required=True)
    gt.add_argument("--event", required=True)
    gt.add_argument("--run-id", required=True, type=int)
    gt.add_argument("--run-attempt", type=int, default=1)
    gt.add_argument("--lifted", default="", help=f"logins whose cap the staff lifted "
                    f"(the repository variable {LIFTED_VARIABLE})")  # fmt: skip
    gt.add_argument("--out", required=True, help="where a capped push's comment.md goes")
    gt.add_argument("--root", default=".")
    gt.add_argument("--github-output", help="append grade=true|false here")

    hd = sub.add_parser("held-comment", help="comment for a push whose gate GitHub cancelled")
    hd.add_argument("--event", required=True)
    hd.add_argument("--run-id", required=True, type=int)
    hd.add_argument("--out", required=True)

    hs = sub.add_parser("head-submission", help="a swept head's tree as its submission")
    hs.add_argument("--git-dir", required=True)
    hs.add_argument("--head", required=True, help="one entry of the sweep's heads (JSON)")
    hs.add_argument("--out", required=True)
    hs.add_argument("--event-out", required=True)
    hs.add_argument("--comment-to", help="on a refusal, write the refusal's comment.md here")

    f = sub.add_parser("failure-comment", help="comment for a grading job that wrote none")
    f.add_argument("--out", required=True)
    f.add_argument("--job-result", required=True, help="needs.grade.result")
    f.add_argument("--head-sha", default="")

    k = sub.add_parser("pack-submission", help="student check: lay out the artifact")
    k.add_argument("--out", required=True)
    k.add_argument("--pr", required=True)
    k.add_argument("--head-sha", required=True)
    k.add_argument("--root", default=".")

    return p


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m grader.github <verb>`: `ExitCode` OK (0) done, FAILED (1) rejected or failed,
    INFRASTRUCTURE (3) not graded (the machine).

    Long because it is one dispatch branch per verb, each mapping that verb's errors to the
    exit code and comment the workflow expects."""
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "validate-artifact":
            try:
                art = validate_artifact(args.src, args.extract_to)
                values = {"pr-number": str(art.pr.number), "head-sha": art.pr.head_sha}
                if args.event:
                    event = load_event(args.event)
                    cross_check(art.pr, event)
                    values["student"] = student_of(event)
            except (ArtifactError, EventError) as exc:
                if args.comment_to:
                    rejected_comment(args.comment_to, str(exc), _event_head(args.event))
                raise
            _write_outputs(args.github_output, values)
            print(
                f"artifact accepted: {len(art.files)} files, {art.total_bytes:,} bytes, "
                f"PR #{art.pr.number} at {art.pr.head_sha}"
            )
        elif args.cmd == "grade-pr":
            # lazy: needs the installed grader (the sandbox, numpy); see the module docstring
            from grader.github.grade import grade_pr_command

            paths = grade_pr_command(
                args.artifact,
                args.event,
                args.out,
                args.root,
                args.timestamp,
                args.student_keys,
                args.staff_recipient,
                args.staff,
            )
            meta = json.loads(paths["pr"].read_text(encoding="utf-8"))
            # the log is public: no score here, it is sealed in report.age
            print(f"graded PR #{meta['number']} for {meta['student']}; sealed {paths['sealed']}")
        elif args.cmd == "verify-tree":
            try:
                checked = verify_tree(args.src, args.git_dir, args.sha)
            except TreeMismatch as exc:
                if args.comment_to:
                    rejected_comment(args.comment_to, str(exc), args.sha)
                raise
            print(f"artifact matches commit {args.sha}: {checked} files compared")
        elif args.cmd == "failure-comment":
            print(f"wrote {failure_comment(args.out, args.job_result, args.head_sha)}")
        elif args.cmd == "find-pr":
            number = find_pr(args.repo, args.head_owner, args.head_branch, args.head_sha)
            _write_outputs(args.github_output, {"pr-number": str(number)})
            print(f"PR #{number} has head {args.head_sha}")
        elif args.cmd == "release-commit":
            commit = release_commit(args.root)
            _write_outputs(args.github_output, {"commit": commit})
            print(f"exported from instructor commit {commit}")
        elif args.cmd == "gate":
            print(gate(args))
        elif args.cmd == "held-comment":
            print(f"wrote {held(args)}")
        elif args.cmd == "sweep":
            course = load_course(Path(args.root))
            try:
                staff = load_staff(staff_folder(course.root, args.staff), course)
            except StaffError:  # not its message: the log is public, and it may name a student
                raise UsageError(
                    "the staff's data (extensions, overrides) does not load; run `grader "
                    "grade-all` on the instructor repository to see why"
                ) from None
            swept = sweep_ungraded(
                args.repo, args.minutes, course=course, staff=staff,
                lifted=lifted_logins(args.lifted),
            )  # fmt: skip
            for s in swept:
                print(f"PR #{s.number} at {s.head_sha[:12]}: {s.action}")
            _write_outputs(args.github_output, {"heads": json.dumps(sweep_plan(swept))})
        elif args.cmd == "head-submission":
            sha = ""
            try:
                head = json.loads(args.head)
                if not isinstance(head, dict):
                    raise EventError("--head: not a JSON object")
                sha = str(head.get("head_sha", ""))
                pr_no = head.get("number")
                if not isinstance(pr_no, int) or isinstance(pr_no, bool):
                    raise EventError(f"--head: PR number {pr_no!r}: not an integer")
                event = sweep_event(
                    pr_no, sha, str(head.get("student", "")),
                    str(head.get("updated_at", "")),
                )  # fmt: skip
                art = submission_from_tree(args.git_dir, sha, args.out, pr_no)
            except (ArtifactError, EventError, TreeMismatch, ValueError) as exc:
                if args.comment_to:
                    rejected_comment(args.comment_to, str(exc), sha if _is_sha(sha) else "")
                raise
            Path(args.event_out).write_text(json.dumps(event) + "\n", encoding="utf-8")
            print(f"PR #{art.pr.number} at {sha}: {len(art.files)} files from its tree")
        elif args.cmd == "post-comment":
            body = Path(args.body).read_text(encoding="utf-8")
            what = post_comment(args.repo, args.pr, body, head_sha=args.head_sha)
            print(f"comment {what} on PR #{args.pr}")
        elif args.cmd == "pack-submission":
            try:
                number = int(args.pr)
            except ValueError:
                raise ArtifactError(f"--pr: not an integer: {show(args.pr)}") from None
            art = pack_submission(args.root, args.out, number, args.head_sha)
            print(f"packed {len(art.files)} files ({art.total_bytes:,} bytes) into {args.out}")
    except InfrastructureError as exc:
        print(f"not graded, nothing recorded: {exc}", file=sys.stderr)
        return ExitCode.INFRASTRUCTURE
    except (ArtifactError, EventError, TreeMismatch) as exc:
        print(f"rejected: {exc}", file=sys.stderr)
        return ExitCode.FAILED
    # A step's contract is 0, 1 or 3 (the comment job tells 3 apart), and its log is public: one
    # line, no traceback. The builtins stay because `gh` and git fail with RuntimeError and
    # OSError, and GitHub's own JSON with ValueError; a usage error of a step is a failure too.
    except (GraderError, ValueError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.FAILED
    return ExitCode.OK
