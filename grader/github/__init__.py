"""The scripts the GitHub workflows call (.github/student-workflows/*.yml), kept out of the YAML.

    python -m grader.github pack-submission --out DIR --pr N --head-sha SHA
        student check (pull_request, untrusted, no secrets): copy `exercises/**`, `metrics.json`
        and a `pr.json` into DIR for the `submission` artifact.
    python -m grader.github validate-artifact SRC [--event EVENT.json] [--extract-to DIR]
                                              [--github-output FILE]
        grading (workflow_run, trusted): SRC is the downloaded artifact, either a directory or
        the artifact's zip (a directory holding one zip file, as download-artifact writes it with
        `skip-decompress`). Rejects, with a message naming the file: `..` or absolute paths, links,
        device files, files outside `exercises/**` + `metrics.json` + `pr.json`, a file over
        20 MB, over 100 MB in all, over 500 files, a `pr.json` without a positive integer PR
        number. With --extract-to, writes the accepted files (regular files only) there.
    python -m grader.github grade-pr --artifact DIR --event EVENT.json --out OUT [--timestamp ISO]
        grade a validated submission with the sandboxed grader; writes OUT/comment.md (starts with
        the marker), summary.md, result.json, report.html, report.md and pr.json. No network.
        When the grading machine cannot grade (its GPU fails the preflight), writes only
        OUT/comment.md and summary.md saying so, records no score and exits 3.
    python -m grader.github failure-comment --out OUT --job-result RESULT
        the comment job, when grading wrote no comment (the job failed or was cancelled): a short
        OUT/comment.md saying what failed and that no score was recorded.
    python -m grader.github post-comment --pr N --body FILE --repo OWNER/NAME [--head-sha SHA]
        create or update the one PR comment that starts with the marker, with `gh api`.

Everything in the artifact is data written by a student's workflow run (a pull request can change
that workflow), so nothing here trusts it: names are checked before any file is opened, sizes are
counted while copying (never taken from headers), and no link is ever followed. This module
imports only the standard library at module level so the validation runs before anything is
installed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from grader.core.infra import INFRA_EXIT, InfrastructureError

MARKER = "<!-- course-grader -->"
MAX_FILE_BYTES = 20 * 1024 * 1024
MAX_TOTAL_BYTES = 100 * 1024 * 1024
MAX_FILES = 500
MAX_DEPTH = 12  # path components below the artifact root
MAX_NAME_CHARS = 255
MAX_PR_JSON_BYTES = 64 * 1024
MAX_COMMENT_CHARS = 65_000  # GitHub rejects bodies over 65,536 characters
TOP_FILES = ("metrics.json", "pr.json")
EXERCISES = "exercises"
BOT_LOGIN = "github-actions[bot]"
_SHA_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_LOGIN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\[\]-]{0,99}$")
_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_CHUNK = 1 << 20


class ArtifactError(ValueError):
    """The submission artifact was rejected; the message names the offending file."""


class EventError(ValueError):
    """The workflow event does not describe a gradable pull request run."""


@dataclass(frozen=True)
class PullRequest:
    number: int
    head_sha: str


@dataclass(frozen=True)
class Artifact:
    files: tuple[str, ...]  # posix paths relative to the artifact root, sorted
    total_bytes: int
    pr: PullRequest


def _show(name: str) -> str:
    """A student-chosen name, safe to print in a log line or an error (no control characters)."""
    return ascii(name)[1:-1][:300]


# ----------------------------------------------------------------------------- names


def check_name(name: str, is_dir: bool = False) -> tuple[str, ...]:
    """The components of an artifact member name, or ArtifactError saying what is wrong with it."""
    shown = _show(name)
    if not name:
        raise ArtifactError("artifact holds an entry with an empty name")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ArtifactError(f"{shown}: control characters in a file name")
    if "\\" in name:
        raise ArtifactError(f"{shown}: backslash in a file name")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise ArtifactError(f"{shown}: absolute path")
    parts = name.split("/")
    if is_dir and parts[-1] == "":
        parts = parts[:-1]
    if ".." in parts:
        raise ArtifactError(f"{shown}: path with '..' escapes the artifact")
    if any(p in ("", ".") for p in parts):
        raise ArtifactError(f"{shown}: not a normalized path (empty or '.' component)")
    if len(parts) > MAX_DEPTH:
        raise ArtifactError(f"{shown}: nested deeper than {MAX_DEPTH} folders")
    if any(len(p) > MAX_NAME_CHARS for p in parts):
        raise ArtifactError(f"{shown}: a path component is longer than {MAX_NAME_CHARS}")
    if parts[0] == EXERCISES and (is_dir or len(parts) >= 2):
        return tuple(parts)
    if len(parts) == 1 and not is_dir and parts[0] in TOP_FILES:
        return tuple(parts)
    raise ArtifactError(
        f"{shown}: outside exercises/ (an artifact holds only exercises/**, metrics.json, pr.json)"
    )


class _Budget:
    def __init__(self) -> None:
        self.files = 0
        self.total = 0

    def add_file(self, name: str) -> None:
        self.files += 1
        if self.files > MAX_FILES:
            raise ArtifactError(f"{_show(name)}: too many files (more than {MAX_FILES})")

    def add_bytes(self, name: str, n: int, file_bytes: int) -> None:
        if file_bytes > MAX_FILE_BYTES:
            raise ArtifactError(f"{_show(name)}: file is larger than {MAX_FILE_BYTES // 2**20} MB")
        self.total += n
        if self.total > MAX_TOTAL_BYTES:
            raise ArtifactError(
                f"{_show(name)}: artifact is larger than {MAX_TOTAL_BYTES // 2**20} MB in all"
            )


# ----------------------------------------------------------------------------- directory


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _walk_dir(root: Path, budget: _Budget) -> Iterator[tuple[str, os.stat_result]]:
    """(relative name, lstat) of every regular file under root; rejects anything else."""
    stack = [""]
    while stack:
        rel = stack.pop()
        with os.scandir(root / rel if rel else root) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            name = f"{rel}/{entry.name}" if rel else entry.name
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                check_name(name, is_dir=True)
                stack.append(name)
                continue
            if stat.S_ISLNK(st.st_mode):
                raise ArtifactError(f"{_show(name)}: is a symbolic link (links are not accepted)")
            if not stat.S_ISREG(st.st_mode):
                raise ArtifactError(f"{_show(name)}: is {_kind(st.st_mode)}")
            if st.st_nlink > 1:
                raise ArtifactError(
                    f"{_show(name)}: is a hard link ({st.st_nlink} names for one file)"
                )
            check_name(name)
            budget.add_file(name)
            budget.add_bytes(name, st.st_size, st.st_size)
            yield name, st


def _open_new(dest: Path, rel: str):
    target = dest.joinpath(*rel.split("/"))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    return os.fdopen(fd, "wb")


def _copy_capped(src, dst, name: str, budget: _Budget, declared: int | None = None) -> None:
    """Copy a stream, counting the bytes that really arrive against the limits."""
    n = 0
    while chunk := src.read(_CHUNK):
        n += len(chunk)
        budget.add_bytes(name, len(chunk), n)
        dst.write(chunk)
    if declared is not None and n != declared:
        raise ArtifactError(f"{_show(name)}: size {n} differs from the archive's {declared}")


def _scan_directory(src: Path, dest: Path | None) -> tuple[list[str], int, bytes]:
    budget = _Budget()
    files = [name for name, _ in _walk_dir(src, budget)]
    pr_raw = b""
    copy_budget = _Budget()
    for name in files:
        path = src.joinpath(*name.split("/"))
        # O_NOFOLLOW: a name swapped for a link after the scan is refused, not followed
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise ArtifactError(f"{_show(name)}: changed while it was validated")
            if name == "pr.json":
                pr_raw = fh.read(MAX_PR_JSON_BYTES + 1)
                fh.seek(0)
            if dest is not None:
                copy_budget.add_file(name)
                with _open_new(dest, name) as out:
                    _copy_capped(fh, out, name, copy_budget)
    return sorted(files), budget.total, pr_raw


# ----------------------------------------------------------------------------- zip


def _scan_zip(src: Path, dest: Path | None) -> tuple[list[str], int, bytes]:
    try:
        zf = zipfile.ZipFile(src)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ArtifactError(f"{_show(src.name)}: not a readable zip archive ({exc})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > 4 * MAX_FILES:
            raise ArtifactError(f"{_show(src.name)}: too many archive entries ({len(infos)})")
        budget = _Budget()
        seen: set[str] = set()
        members: list[zipfile.ZipInfo] = []
        for info in infos:
            name = info.filename
            mode = (info.external_attr >> 16) & 0xFFFF
            if info.create_system == 3 and mode and stat.S_ISLNK(mode):
                raise ArtifactError(f"{_show(name)}: is a symbolic link (links are not accepted)")
            if info.is_dir():
                check_name(name, is_dir=True)
                continue
            if info.create_system == 3 and stat.S_IFMT(mode) not in (0, stat.S_IFREG):
                raise ArtifactError(f"{_show(name)}: is {_kind(mode)}")
            check_name(name)
            if info.flag_bits & 0x1:
                raise ArtifactError(f"{_show(name)}: encrypted archive member")
            key = name.casefold()
            if key in seen:
                raise ArtifactError(f"{_show(name)}: appears twice in the archive")
            seen.add(key)
            budget.add_file(name)
            budget.add_bytes(name, info.file_size, info.file_size)
            members.append(info)
        pr_raw = b""
        copy_budget = _Budget()
        for info in members:
            copy_budget.add_file(info.filename)
            try:
                pr_raw = _read_member(zf, info, dest, copy_budget) or pr_raw
            except ArtifactError:
                raise
            except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
                raise ArtifactError(
                    f"{_show(info.filename)}: corrupt archive member ({exc})"
                ) from None
    return sorted(i.filename for i in members), budget.total, pr_raw


def _read_member(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, dest: Path | None, budget: _Budget
) -> bytes | None:
    """Copy one member out (or just read it through); the bytes of pr.json are returned."""
    sink = _open_new(dest, info.filename) if dest is not None else _Sink()
    with zf.open(info) as fh, sink as out:
        if info.filename == "pr.json":
            raw = fh.read(MAX_PR_JSON_BYTES + 1)
            out.write(raw)
            return raw
        # read every member, even without dest: the declared size must be the real one
        _copy_capped(fh, out, info.filename, budget, info.file_size)
    return None


class _Sink:
    def write(self, data: bytes) -> None:
        pass

    def __enter__(self) -> _Sink:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _zip_source(src: Path) -> Path | None:
    """The zip to read when src is a zip file or a folder holding nothing but one zip file."""
    st = src.lstat()
    if stat.S_ISLNK(st.st_mode):
        raise ArtifactError(f"{_show(src.name)}: the artifact path is a symbolic link")
    candidate = src
    if stat.S_ISDIR(st.st_mode):
        entries = list(src.iterdir())
        if len(entries) != 1:
            return None
        candidate = entries[0]
        if not stat.S_ISREG(candidate.lstat().st_mode):
            return None
    elif not stat.S_ISREG(st.st_mode):
        raise ArtifactError(f"{_show(src.name)}: the artifact is {_kind(st.st_mode)}")
    with open(candidate, "rb") as fh:
        head = fh.read(4)
    if head in _ZIP_MAGIC:
        return candidate
    if candidate is src:
        raise ArtifactError(f"{_show(src.name)}: not a zip archive nor a folder")
    return None


# ----------------------------------------------------------------------------- pr.json


def parse_pr_json(raw: bytes) -> PullRequest:
    if not raw:
        raise ArtifactError("pr.json: missing (the student check writes it)")
    if len(raw) > MAX_PR_JSON_BYTES:
        raise ArtifactError(f"pr.json: larger than {MAX_PR_JSON_BYTES} bytes")
    from grader.core.jsonread import JsonLimits, JsonReadError, loads_bounded

    try:  # the student check wrote it: bounded like every JSON a submission supplies
        data = loads_bounded(raw, "pr.json", JsonLimits(MAX_PR_JSON_BYTES, 8, 1000))
    except JsonReadError as exc:
        raise ArtifactError(str(exc)) from None
    if not isinstance(data, dict):
        raise ArtifactError("pr.json: must be a JSON object")
    number = data.get("number")
    if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 2**31:
        raise ArtifactError(
            f"pr.json: 'number' must be a positive integer, got {_show(repr(number))}"
        )
    head_sha = data.get("head_sha")
    if not isinstance(head_sha, str) or not _SHA_RE.match(head_sha):
        raise ArtifactError(
            f"pr.json: 'head_sha' must be a full hex commit sha, got {_show(repr(head_sha))}"
        )
    return PullRequest(number=number, head_sha=head_sha)


def validate_artifact(src: Path | str, extract_to: Path | str | None = None) -> Artifact:
    """Check the downloaded submission artifact; optionally copy the accepted files out.

    extract_to must not exist yet or be an empty folder. On rejection nothing under it is
    trusted: the caller should discard it (the workflow fails the job).
    """
    src = Path(src)
    if not os.path.lexists(src):
        raise ArtifactError(f"{_show(str(src))}: no artifact there (was it uploaded?)")
    dest = None
    if extract_to is not None:
        dest = Path(extract_to)
        dest.mkdir(parents=True, exist_ok=True)
        if any(dest.iterdir()):
            raise ArtifactError(f"{_show(str(dest))}: extraction folder is not empty")
    zip_path = _zip_source(src)
    if zip_path is not None:
        files, total, pr_raw = _scan_zip(zip_path, dest)
    else:
        files, total, pr_raw = _scan_directory(src, dest)
    if not any(f.startswith(EXERCISES + "/") for f in files):
        raise ArtifactError("exercises/: the artifact holds no exercise files")
    return Artifact(files=tuple(files), total_bytes=total, pr=parse_pr_json(pr_raw))


# ----------------------------------------------------------------------------- event


def load_event(path: Path | str) -> dict[str, Any]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("workflow_run"), dict):
        raise EventError(f"{path}: not a workflow_run event payload")
    return data


def cross_check(pr: PullRequest, event: dict[str, Any]) -> None:
    """The artifact's claims against what GitHub itself says about the triggering run."""
    run = event["workflow_run"]
    if run.get("event") != "pull_request":
        raise EventError(f"the triggering run came from {run.get('event')!r}, not pull_request")
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
    run = event["workflow_run"]
    for candidate in (
        ((run.get("head_repository") or {}).get("owner") or {}).get("login"),
        (run.get("actor") or {}).get("login"),
    ):
        if isinstance(candidate, str) and _LOGIN_RE.match(candidate):
            return candidate
    raise EventError("cannot tell the student: the event names no fork owner or actor")


def submitted_at(event: dict[str, Any]) -> str:
    """When GitHub created the triggering check run: the trusted time for the late policy."""
    created = event["workflow_run"].get("created_at")
    if not isinstance(created, str) or not created:
        raise EventError("the event has no workflow_run.created_at")
    return created


# ----------------------------------------------------------------------------- grading


def _grade(submission: Path, root: Path, student: str, timestamp: datetime):
    """Grade with the sandboxed grader (tests replace this with a stand-in)."""
    from grader.grading.grade import grade_submission

    return grade_submission(submission, root=root, student=student, timestamp=timestamp)


def _copy_submission(artifact_dir: Path, dest: Path) -> None:
    """exercises/** and metrics.json only (pr.json is ours, not the student's code)."""
    src_ex = artifact_dir / EXERCISES
    if src_ex.is_dir() and not src_ex.is_symlink():
        shutil.copytree(src_ex, dest / EXERCISES, symlinks=True)
    metrics = artifact_dir / "metrics.json"
    if metrics.is_file() and not metrics.is_symlink():
        shutil.copyfile(metrics, dest / "metrics.json")


def _run_link(event: dict[str, Any]) -> str:
    server = os.environ.get("GITHUB_SERVER_URL", "")
    repo = os.environ.get("GITHUB_REPOSITORY", "")
    run_id = os.environ.get("GITHUB_RUN_ID", "")
    if server and _REPO_RE.match(repo) and run_id.isdigit():
        return f"{server}/{repo}/actions/runs/{run_id}"
    return ""


def grade_pr(
    artifact: Path | str,
    event_path: Path | str,
    out: Path | str,
    root: Path | str | None = None,
    timestamp: str | None = None,
    grade: Callable[..., Any] | None = None,
) -> dict[str, Path]:
    """Grade the validated submission of one PR; write the comment, summary and reports to out."""
    from grader.core.course import find_root, load_course
    from grader.core.late import parse_timestamp
    from grader.reports import write_reports

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
        submission = Path(tmp) / "submission"
        submission.mkdir()
        _copy_submission(clean, submission)
        link = _run_link(event)
        trailer = f"<sub>PR #{pr.number} · commit {pr.head_sha[:12]}" + (
            f" · [grading run]({link})</sub>" if link else "</sub>"
        )
        try:
            result = (grade or _grade)(submission, root, student, when)
        except InfrastructureError as exc:
            _write_not_graded(out, not_graded_body(exc.headline, exc.detail), trailer)
            raise
        from grader.core.jsonread import metrics_or_none

        metrics = metrics_or_none(submission / "metrics.json")

    out.mkdir(parents=True, exist_ok=True)
    paths = write_reports(result, course, out, metrics=metrics)
    body = paths["markdown"].read_text(encoding="utf-8")
    comment = f"{MARKER}\n{body.rstrip()}\n\n{trailer}\n"
    if len(comment) > MAX_COMMENT_CHARS:  # reports.markdown keeps under 60 kB; belt and braces
        comment = comment[: MAX_COMMENT_CHARS - 40] + "\n\n✂️ truncated\n"
    paths["comment"] = out / "comment.md"
    paths["comment"].write_text(comment, encoding="utf-8")
    paths["summary"] = out / "summary.md"
    paths["summary"].write_text(f"{body.rstrip()}\n\n{trailer}\n", encoding="utf-8")
    paths["pr"] = out / "pr.json"
    paths["pr"].write_text(
        json.dumps(
            {
                "number": pr.number,
                "head_sha": pr.head_sha,
                "student": student,
                "submitted_at": when.isoformat(),
                "score": result.score,
                "max_score": result.max_score,
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    return paths


NOT_YOUR_FAULT = (
    "Your submission was **not graded** and **no score was recorded**. This is a fault of the "
    "grading machine, not of your work: you need not change anything. The failed run is visible "
    "to your instructor, and grading runs again on your next push or when they re-run it."
)
MAX_DETAIL_CHARS = 4000


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


def _write_not_graded(out: Path, body: str, trailer: str = "") -> None:
    out.mkdir(parents=True, exist_ok=True)
    tail = f"\n{trailer}\n" if trailer else ""
    (out / "comment.md").write_text(f"{MARKER}\n{body.rstrip()}\n{tail}", encoding="utf-8")
    (out / "summary.md").write_text(f"{body.rstrip()}\n{tail}", encoding="utf-8")


def failure_comment(out: Path | str, job_result: str) -> Path:
    """Comment for a grading job that ended without writing one (failed, cancelled, timed out).

    Only the workflow's own steps run before the grader writes its comment (student code runs
    in the sandbox, whose failures are graded as test outcomes), so such an ending is the
    machine's, and the student is told so.
    """
    word = job_result if re.fullmatch(r"[a-z_]{1,20}", job_result or "") else "unknown"
    link = _run_link({})
    detail = f"The grading job ended as '{word}' before it wrote a report."
    if link:
        detail += f" Its log: {link}"
    _write_not_graded(Path(out), not_graded_body("the grading job did not finish", detail))
    return Path(out) / "comment.md"


# ----------------------------------------------------------------------------- packing


def pack_submission(root: Path | str, out: Path | str, pr_number: int, head_sha: str) -> Artifact:
    """Student side: lay out the artifact (exercises/**, metrics.json, pr.json) and self-check it.

    Links, caches and checkpoints are left out; the result is validated exactly as the grading
    workflow will validate it, so a student sees a rejection in their own check first.
    """
    root, out = Path(root), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise ArtifactError(f"{_show(str(out))}: output folder is not empty")
    skip = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache"}
    src_ex = root / EXERCISES
    if not src_ex.is_dir():
        raise ArtifactError("exercises/: not found in the repository")
    for dirpath, dirnames, filenames in os.walk(src_ex):  # does not follow links
        dirnames[:] = sorted(d for d in dirnames if d not in skip)
        for fn in sorted(filenames):
            p = Path(dirpath) / fn
            if p.is_symlink() or not p.is_file():
                print(
                    f"pack-submission: leaving out {_show(str(p.relative_to(root)))} "
                    "(not a regular file)"
                )
                continue
            target = out / p.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, target)
    metrics = root / "metrics.json"
    if metrics.is_file() and not metrics.is_symlink():
        shutil.copyfile(metrics, out / "metrics.json")
    (out / "pr.json").write_text(
        json.dumps({"number": pr_number, "head_sha": head_sha}) + "\n", encoding="utf-8"
    )
    return validate_artifact(out)


# ----------------------------------------------------------------------------- comment


Runner = Callable[[Sequence[str], str | None], str]


def _gh(args: Sequence[str], stdin: str | None = None) -> str:
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
    if not _REPO_RE.match(repo):
        raise ValueError(f"bad repository name {_show(repo)}")
    if isinstance(pr_number, bool) or not isinstance(pr_number, int) or pr_number <= 0:
        raise ValueError(f"bad PR number {pr_number!r}")
    if not body.startswith(MARKER):
        raise ValueError("comment body does not start with the grader marker")
    body = body[:MAX_COMMENT_CHARS]
    if head_sha is not None:
        actual = gh(["api", f"repos/{repo}/pulls/{pr_number}", "--jq", ".head.sha"], None).strip()
        if actual != head_sha:
            raise ValueError(
                f"PR #{pr_number} head is {_show(actual)}, not the graded commit {head_sha}; "
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


# ----------------------------------------------------------------------------- CLI


def _write_outputs(path: str | None, values: dict[str, str]) -> None:
    if not path:
        return
    with open(path, "a", encoding="utf-8") as fh:
        for k, v in values.items():
            if "\n" in v or "\r" in v:
                raise ValueError(f"output {k} holds a newline")
            fh.write(f"{k}={v}\n")


def _stop_commands() -> str | None:
    """Stop the runner from reading workflow commands in what student code may print."""
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return None
    token = secrets.token_hex(16)
    print(f"::stop-commands::{token}", flush=True)
    return token


def _resume_commands(token: str | None) -> None:
    if token:
        print(f"::{token}::", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m grader.github", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)

    v = sub.add_parser("validate-artifact", help="check a downloaded submission artifact")
    v.add_argument("src")
    v.add_argument("--event", help="workflow_run event payload to cross-check pr.json against")
    v.add_argument("--extract-to", help="copy the accepted files into this (new) folder")
    v.add_argument("--github-output", help="append pr-number, head-sha, student here")

    g = sub.add_parser("grade-pr", help="grade one PR's validated submission, offline")
    g.add_argument("--artifact", required=True)
    g.add_argument("--event", required=True)
    g.add_argument("--out", required=True)
    g.add_argument("--root", help="course root (default: found from the current folder)")
    g.add_argument("--timestamp", help="override the event's workflow_run.created_at")

    c = sub.add_parser("post-comment", help="create or update the PR comment with gh api")
    c.add_argument("--repo", required=True)
    c.add_argument("--pr", required=True, type=int)
    c.add_argument("--body", required=True)
    c.add_argument("--head-sha", help="refuse unless the PR's head is this commit")

    f = sub.add_parser("failure-comment", help="comment for a grading job that wrote none")
    f.add_argument("--out", required=True)
    f.add_argument("--job-result", required=True, help="needs.grade.result")

    k = sub.add_parser("pack-submission", help="student check: lay out the artifact")
    k.add_argument("--out", required=True)
    k.add_argument("--pr", required=True)
    k.add_argument("--head-sha", required=True)
    k.add_argument("--root", default=".")

    args = p.parse_args(argv)
    try:
        if args.cmd == "validate-artifact":
            art = validate_artifact(args.src, args.extract_to)
            values = {"pr-number": str(art.pr.number), "head-sha": art.pr.head_sha}
            if args.event:
                event = load_event(args.event)
                cross_check(art.pr, event)
                values["student"] = student_of(event)
            _write_outputs(args.github_output, values)
            print(
                f"artifact accepted: {len(art.files)} files, {art.total_bytes:,} bytes, "
                f"PR #{art.pr.number} at {art.pr.head_sha}"
            )
        elif args.cmd == "grade-pr":
            from grader.sandbox.isolation import require_isolation

            require_isolation()  # fails closed: no override on the authoritative path
            token = _stop_commands()
            try:
                paths = grade_pr(args.artifact, args.event, args.out, args.root, args.timestamp)
            finally:
                _resume_commands(token)
            meta = json.loads(paths["pr"].read_text(encoding="utf-8"))
            print(
                f"graded PR #{meta['number']} for {meta['student']}: "
                f"{meta['score']:g}/{meta['max_score']:g}; reports in {args.out}"
            )
        elif args.cmd == "failure-comment":
            print(f"wrote {failure_comment(args.out, args.job_result)}")
        elif args.cmd == "post-comment":
            body = Path(args.body).read_text(encoding="utf-8")
            what = post_comment(args.repo, args.pr, body, head_sha=args.head_sha)
            print(f"comment {what} on PR #{args.pr}")
        elif args.cmd == "pack-submission":
            try:
                number = int(args.pr)
            except ValueError:
                raise ArtifactError(f"--pr: not an integer: {_show(args.pr)}") from None
            art = pack_submission(args.root, args.out, number, args.head_sha)
            print(f"packed {len(art.files)} files ({art.total_bytes:,} bytes) into {args.out}")
    except InfrastructureError as exc:
        print(f"not graded, nothing recorded: {exc}", file=sys.stderr)
        return INFRA_EXIT
    except (ArtifactError, EventError) as exc:
        print(f"rejected: {exc}", file=sys.stderr)
        return 1
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
