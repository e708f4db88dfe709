"""The submission artifact: laid out by the student's check, validated by the trusted grading.

`pack_submission` (student side, `pack-submission`) copies `exercises/**`, `metrics.json` and a
`pr.json` into a folder for the `submission` artifact and validates it exactly as the grading
workflow will, so a student sees a rejection in their own check first. `validate_artifact`
(trusted side, `validate-artifact`) takes the downloaded artifact, a directory or the artifact's
zip (a directory holding one zip file, as download-artifact writes it with `skip-decompress`),
and rejects, with an `ArtifactError` naming the file: `..` or absolute paths, links, device
files, files outside `exercises/**` + `metrics.json` + `pr.json`, and anything over
`grader.grading.limits.LIMITS` (the limits intake applies too): a file over 20 MB, over 200 MB
in all, over 5,000 files; and a `pr.json` without a positive integer PR number.

Everything in the artifact is data written by a student's workflow run (a pull request can change
that workflow), so nothing here trusts it: names are checked before any file is opened, sizes are
counted while copying (never taken from headers), and no link is ever followed. Standard library
only (and grader modules that are): the validation runs before anything is installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from grader.core.errors import SubmissionError
from grader.core.jsonread import JsonLimits, JsonReadError, loads_bounded
from grader.grading.limits import LIMITS

MAX_DEPTH = 12  # path components below the artifact root
MAX_NAME_CHARS = 255
MAX_PR_JSON_BYTES = 64 * 1024
TOP_FILES = ("metrics.json", "pr.json")
EXERCISES = "exercises"
_SHA_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_CHUNK = 1 << 20
PACK_SKIP = frozenset({"__pycache__", ".ipynb_checkpoints", ".pytest_cache"})  # never packed


class ArtifactError(SubmissionError, ValueError):
    """The submission artifact was rejected; the message names the offending file."""


@dataclass(frozen=True)
class PullRequest:
    """The PR a submission claims to be (from its pr.json; `event.cross_check` checks it)."""

    number: int
    head_sha: str


@dataclass(frozen=True)
class Artifact:
    """An accepted artifact: its files, their bytes in all, the PR its pr.json names."""

    files: tuple[str, ...]  # posix paths relative to the artifact root, sorted
    total_bytes: int
    pr: PullRequest


def show(name: str) -> str:
    """A student-chosen name, safe to print in a log line or an error (no control characters)."""
    return ascii(name)[1:-1][:300]


def check_name(name: str, is_dir: bool = False) -> tuple[str, ...]:
    """The components of an artifact member name, or ArtifactError saying what is wrong with it."""
    shown = show(name)
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
    """Files and bytes counted against `LIMITS` while an artifact is read."""

    def __init__(self) -> None:
        self.files = 0
        self.total = 0

    def add_file(self, name: str) -> None:
        self.files += 1
        if self.files > LIMITS.max_files:
            raise ArtifactError(f"{show(name)}: too many files (more than {LIMITS.max_files})")

    def add_bytes(self, name: str, n: int, file_bytes: int) -> None:
        if file_bytes > LIMITS.max_file_bytes:
            raise ArtifactError(
                f"{show(name)}: file is larger than {LIMITS.max_file_bytes // 2**20} MB"
            )
        self.total += n
        if self.total > LIMITS.max_total_bytes:
            raise ArtifactError(
                f"{show(name)}: artifact is larger than {LIMITS.max_total_bytes // 2**20} MB in all"
            )


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
                raise ArtifactError(f"{show(name)}: is a symbolic link (links are not accepted)")
            if not stat.S_ISREG(st.st_mode):
                raise ArtifactError(f"{show(name)}: is {_kind(st.st_mode)}")
            if st.st_nlink > 1:
                raise ArtifactError(
                    f"{show(name)}: is a hard link ({st.st_nlink} names for one file)"
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
        raise ArtifactError(f"{show(name)}: size {n} differs from the archive's {declared}")


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
                raise ArtifactError(f"{show(name)}: changed while it was validated")
            if name == "pr.json":
                pr_raw = fh.read(MAX_PR_JSON_BYTES + 1)
                fh.seek(0)
            if dest is not None:
                copy_budget.add_file(name)
                with _open_new(dest, name) as out:
                    _copy_capped(fh, out, name, copy_budget)
    return sorted(files), budget.total, pr_raw


def _scan_zip(src: Path, dest: Path | None) -> tuple[list[str], int, bytes]:
    try:
        zf = zipfile.ZipFile(src)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ArtifactError(f"{show(src.name)}: not a readable zip archive ({exc})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > 4 * LIMITS.max_files:
            raise ArtifactError(f"{show(src.name)}: too many archive entries ({len(infos)})")
        budget = _Budget()
        seen: set[str] = set()
        members: list[zipfile.ZipInfo] = []
        for info in infos:
            name = info.filename
            mode = (info.external_attr >> 16) & 0xFFFF
            if info.create_system == 3 and mode and stat.S_ISLNK(mode):
                raise ArtifactError(f"{show(name)}: is a symbolic link (links are not accepted)")
            if info.is_dir():
                check_name(name, is_dir=True)
                continue
            if info.create_system == 3 and stat.S_IFMT(mode) not in (0, stat.S_IFREG):
                raise ArtifactError(f"{show(name)}: is {_kind(mode)}")
            check_name(name)
            if info.flag_bits & 0x1:
                raise ArtifactError(f"{show(name)}: encrypted archive member")
            key = name.casefold()
            if key in seen:
                raise ArtifactError(f"{show(name)}: appears twice in the archive")
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
                    f"{show(info.filename)}: corrupt archive member ({exc})"
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
        raise ArtifactError(f"{show(src.name)}: the artifact path is a symbolic link")
    candidate = src
    if stat.S_ISDIR(st.st_mode):
        entries = list(src.iterdir())
        if len(entries) != 1:
            return None
        candidate = entries[0]
        if not stat.S_ISREG(candidate.lstat().st_mode):
            return None
    elif not stat.S_ISREG(st.st_mode):
        raise ArtifactError(f"{show(src.name)}: the artifact is {_kind(st.st_mode)}")
    with open(candidate, "rb") as fh:
        head = fh.read(4)
    if head in _ZIP_MAGIC:
        return candidate
    if candidate is src:
        raise ArtifactError(f"{show(src.name)}: not a zip archive nor a folder")
    return None


def parse_pr_json(raw: bytes) -> PullRequest:
    """The PR that pr.json names; ArtifactError when it is missing, too large or malformed."""
    if not raw:
        raise ArtifactError("pr.json: missing (the student check writes it)")
    if len(raw) > MAX_PR_JSON_BYTES:
        raise ArtifactError(f"pr.json: larger than {MAX_PR_JSON_BYTES} bytes")
    try:  # the student check wrote it: bounded like every JSON a submission supplies
        data = loads_bounded(raw, "pr.json", JsonLimits(MAX_PR_JSON_BYTES, 8, 1000))
    except JsonReadError as exc:
        raise ArtifactError(str(exc)) from None
    if not isinstance(data, dict):
        raise ArtifactError("pr.json: must be a JSON object")
    number = data.get("number")
    if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 2**31:
        raise ArtifactError(
            f"pr.json: 'number' must be a positive integer, got {show(repr(number))}"
        )
    head_sha = data.get("head_sha")
    if not isinstance(head_sha, str) or not _SHA_RE.match(head_sha):
        raise ArtifactError(
            f"pr.json: 'head_sha' must be a full hex commit sha, got {show(repr(head_sha))}"
        )
    return PullRequest(number=number, head_sha=head_sha)


def validate_artifact(src: Path | str, extract_to: Path | str | None = None) -> Artifact:
    """Check the downloaded submission artifact; optionally copy the accepted files out.

    extract_to must not exist yet or be an empty folder. On rejection nothing under it is
    trusted: the caller should discard it (the workflow fails the job).
    """
    src = Path(src)
    if not os.path.lexists(src):
        raise ArtifactError(f"{show(str(src))}: no artifact there (was it uploaded?)")
    dest = None
    if extract_to is not None:
        dest = Path(extract_to)
        dest.mkdir(parents=True, exist_ok=True)
        if any(dest.iterdir()):
            raise ArtifactError(f"{show(str(dest))}: extraction folder is not empty")
    zip_path = _zip_source(src)
    if zip_path is not None:
        files, total, pr_raw = _scan_zip(zip_path, dest)
    else:
        files, total, pr_raw = _scan_directory(src, dest)
    if not any(f.startswith(EXERCISES + "/") for f in files):
        raise ArtifactError("exercises/: the artifact holds no exercise files")
    return Artifact(files=tuple(files), total_bytes=total, pr=parse_pr_json(pr_raw))


def pack_submission(root: Path | str, out: Path | str, pr_number: int, head_sha: str) -> Artifact:
    """Student side: lay out the artifact (exercises/**, metrics.json, pr.json) and self-check it.

    Links, caches and checkpoints are left out; the result is validated exactly as the grading
    workflow will validate it, so a student sees a rejection in their own check first.
    """
    root, out = Path(root), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise ArtifactError(f"{show(str(out))}: output folder is not empty")
    src_ex = root / EXERCISES
    if not src_ex.is_dir():
        raise ArtifactError("exercises/: not found in the repository")
    for dirpath, dirnames, filenames in os.walk(src_ex):  # does not follow links
        dirnames[:] = sorted(d for d in dirnames if d not in PACK_SKIP)
        for fn in sorted(filenames):
            p = Path(dirpath) / fn
            if p.is_symlink() or not p.is_file():
                print(
                    f"pack-submission: leaving out {show(str(p.relative_to(root)))} "
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
