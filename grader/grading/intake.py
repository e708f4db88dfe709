"""Taking a submission as data: copy what is graded into a scratch directory, ignore the rest.

Only ``exercises/**`` and ``metrics.json`` are taken. Every other path of the submission that
differs from the trusted course tree (tests/, grader/, conftest.py, pyproject.toml, .github/ ...),
or that the course does not have, is ignored and named in a warning, so a pull request that edits
the tests or the grader changes nothing and says so. Version control, virtual environments and
tool caches (``SKIP_DIRS``: ``.git``, ``.venv``, ``__pycache__`` ...) are skipped silently and
never counted against the file cap.

Refused, with a warning and never copied: symlinks, anything that is not a regular file (FIFOs,
sockets, devices), names containing ``..`` or control characters, files over the size caps
(notebooks 20 MB, metrics.json 1 MB, anything else `LIMITS.max_file_bytes`), and files beyond
the file count or the total size of `grader.grading.limits.LIMITS`. Files are opened with
O_NOFOLLOW and the bytes copied are the bytes hashed, so a path swapped mid-copy cannot smuggle
anything in. Which file of each notebook pair is graded: `grader.core.pairing.pair`.

The submission digest (`digest`, the one algorithm) is a sha256 over the taken files' relative
paths and bytes, length-prefixed: the same submission always has the same digest. result.json
records it (`Intake.digest`), and `submission_digest` computes the same value without copying
anything, for the resume key of batch grading (state.jsonl).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.course import Course
from grader.core.errors import UsageError
from grader.core.jsonread import METRICS_LIMITS
from grader.core.notebook import MAX_NOTEBOOK_BYTES
from grader.core.pairing import NOTEBOOK_SUFFIXES, pair, release_for
from grader.core.student_repo import exported_original
from grader.grading.limits import LIMITS, SubmissionLimits

MAX_WARNINGS = 60
# Never walked, never counted against the file cap, never warned about: version control, virtual
# environments and tool caches (a student's clone with a .venv holds thousands of files).
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        "node_modules",
        "__pycache__",
        ".ipynb_checkpoints",
        ".pytest_cache",
        ".ruff_cache",
        ".mypy_cache",
        ".hypothesis",
        ".cache",
    }
)
__all__ = [
    "LIMITS",
    "MAX_NOTEBOOK_BYTES",
    "SKIP_DIRS",
    "Intake",
    "digest",
    "pair",
    "prepare",
    "release_for",
    "submission_digest",
]


@dataclass
class Intake:
    notebooks: dict[str, Path]  # assignment id -> the file to grade, inside scratch
    errors: dict[str, str]  # assignment id -> what is wrong and what to do
    metrics_path: Path  # scratch/metrics.json (may not exist)
    warnings: list[str] = field(default_factory=list)
    digest: str = ""


class _Warnings(list):
    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def add(self, text: str) -> None:
        if len(self) < MAX_WARNINGS:
            self.append(text)
        else:
            self.dropped += 1

    def final(self) -> list[str]:
        out = list(self)
        if self.dropped:
            out.append(f"... and {self.dropped} more warnings like these")
        return out


def _bad_name(part: str) -> bool:
    return ".." in part or any(ord(c) < 32 or c == "\x7f" for c in part) or "\\" in part


def _read_regular(path: Path, cap: int) -> bytes | str:
    """The file's bytes, or a reason it was refused (symlink, not regular, too large)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return "a symlink" if path.is_symlink() else f"unreadable ({exc.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if st.st_size > cap:
            return f"{st.st_size / 1e6:.1f} MB, over the {cap // (1024 * 1024)} MB limit"
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > cap:
                return f"over the {cap // (1024 * 1024)} MB limit"
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


# Where a student's fork has the course's own copy (what the export ships): only there is an
# unchanged file left unmentioned. Elsewhere (tests/hidden/, solutions/, ...) the course's copy is
# private, so comparing would tell the student whether a guess equals the hidden suite.
PUBLIC_TOP = ("tests/public/", "grader/", ".github/", "locks/")


def _same_as_course(root: Path, rel: Path, data: bytes | str) -> bool:
    posix = rel.as_posix()
    if len(rel.parts) > 1 and not posix.startswith(PUBLIC_TOP):
        return False
    theirs = root / rel
    if isinstance(data, str):
        return False
    if exported_original(root, rel.as_posix()) == data:  # README.md, workflows, .gitignore
        return True
    if theirs.is_symlink() or not theirs.is_file():
        return False
    try:
        if theirs.stat().st_size != len(data):
            return False
        return theirs.read_bytes() == data
    except OSError:
        return False


def _cap_for(rel: Path, limits: SubmissionLimits) -> int:
    if rel.as_posix() == "metrics.json":
        return METRICS_LIMITS.max_bytes
    return MAX_NOTEBOOK_BYTES if rel.suffix in NOTEBOOK_SUFFIXES else limits.max_file_bytes


def _is_taken(rel: Path) -> bool:
    return rel.as_posix() == "metrics.json" or (len(rel.parts) > 1 and rel.parts[0] == "exercises")


def _take(
    submission: Path,
    root: Path | None,
    limits: SubmissionLimits,
    warnings: _Warnings,
    refused: dict[str, str],
) -> list[tuple[str, bytes]]:
    """(posix path, bytes) of every file taken from `submission`, in walk order.

    `root`: the course tree that files outside exercises/ and metrics.json are compared with for
    the warnings; None reads none of them (the digest alone, where the warnings are dropped).
    Which files are taken never depends on `root`.

    Long because each limit (names, symlinks, file count, per-file and total size) is checked
    where the walk meets the file, so one loop says which file is refused and why."""
    taken: list[tuple[str, bytes]] = []
    total = 0
    seen = 0
    for dirpath, dirnames, filenames in os.walk(submission, followlinks=False):
        here = Path(dirpath)
        rel_dir = here.relative_to(submission)
        keep_dirs = []
        for name in sorted(dirnames):
            rel = rel_dir / name
            if name in SKIP_DIRS:
                continue
            if _bad_name(name):
                warnings.add(f"ignored {rel.as_posix()!r}: its name is not allowed")
            elif (here / name).is_symlink():
                warnings.add(f"ignored {rel.as_posix()}: symlinks are not taken")
            else:
                keep_dirs.append(name)
        dirnames[:] = keep_dirs
        for name in sorted(filenames):
            rel = rel_dir / name
            posix = rel.as_posix()
            seen += 1
            if seen > limits.max_files:
                warnings.add(f"stopped after {limits.max_files} files; the rest were not looked at")
                return taken
            if _bad_name(name):
                warnings.add(f"ignored {posix!r}: its name is not allowed")
                continue
            path = here / name
            if path.is_symlink():
                refused[posix] = "a symlink"
                warnings.add(f"ignored {posix}: symlinks are not taken")
                continue
            if not _is_taken(rel):
                if root is None:
                    continue
                data = _read_regular(path, limits.max_file_bytes)
                if not _same_as_course(root, rel, data):
                    warnings.add(
                        f"ignored {posix}: it was changed or added outside exercises/ and "
                        "metrics.json, which alone are graded, so it has no effect"
                    )
                continue
            data = _read_regular(path, _cap_for(rel, limits))
            if isinstance(data, str):
                refused[posix] = data
                warnings.add(f"ignored {posix}: {data}")
                continue
            if total + len(data) > limits.max_total_bytes:
                refused[posix] = "over the submission's total size limit"
                warnings.add(
                    f"ignored {posix}: the submission is over "
                    f"{limits.max_total_bytes // (1024 * 1024)} MB in total"
                )
                continue
            total += len(data)
            taken.append((posix, data))
    return taken


def digest(files: Iterable[tuple[str, bytes]]) -> str:
    """The submission digest: sha256 over (relative posix path, bytes) of the taken files, sorted
    by path, each length-prefixed (8 bytes, big-endian)."""
    h = hashlib.sha256()
    for posix, data in sorted(files):
        name = posix.encode()
        h.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


def submission_digest(submission: Path, limits: SubmissionLimits | None = None) -> str:
    """The digest `prepare` records for `submission` (result.json), without copying anything."""
    taken = _take(Path(submission), None, limits or LIMITS, _Warnings(), {})
    return digest(taken)


def prepare(
    submission: Path,
    scratch: Path,
    course: Course,
    release_dir: Path | None = None,
    limits: SubmissionLimits | None = None,
    assignments: Sequence[str] | None = None,
) -> Intake:
    """Copy the graded files of `submission` into `scratch` and choose the file of each of
    `assignments` (default: every assignment of the course). An assignment not asked for is
    not read: its notebook neither warns nor errs, and costs no parse (0.2 s for a 100 kB .py)."""
    submission, scratch = Path(submission), Path(scratch)
    if not submission.is_dir() or submission.is_symlink():
        raise UsageError(f"{submission}: not a directory; give the folder of a submission")
    scratch.mkdir(parents=True, exist_ok=True)
    if any(scratch.iterdir()):
        raise ValueError(f"{scratch}: the scratch directory must be empty")
    root = course.root
    release = Path(release_dir) if release_dir is not None else root / "exercises"
    warnings = _Warnings()
    refused: dict[str, str] = {}
    taken = _take(submission, root, limits or LIMITS, warnings, refused)
    for posix, data in sorted(taken):
        target = scratch / posix
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    manifest = root / "course.toml"
    if manifest.is_file():  # the trusted manifest, so notebooks can find the course root
        shutil.copyfile(manifest, scratch / "course.toml")

    notebooks: dict[str, Path] = {}
    errors: dict[str, str] = {}
    compare = release_for(submission / "exercises", release)
    for aid in course.assignment_ids if assignments is None else assignments:
        chosen = pair(scratch / "exercises", aid, compare, refused)
        for w in chosen.warnings:
            warnings.add(w)
        if chosen.path is not None:
            notebooks[aid] = chosen.path
        else:
            errors[aid] = chosen.error or "no notebook"
    return Intake(
        notebooks=notebooks,
        errors=errors,
        metrics_path=scratch / "metrics.json",
        warnings=warnings.final(),
        digest=digest(taken),
    )
