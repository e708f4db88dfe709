"""Taking a submission as data: copy what is graded into a scratch directory, ignore the rest.

Only ``exercises/**`` and ``metrics.json`` are taken. Every other path of the submission that
differs from the trusted course tree (tests/, grader/, conftest.py, pyproject.toml, .github/ ...),
or that the course does not have, is ignored and named in a warning, so a pull request that edits
the tests or the grader changes nothing and says so. Version control, virtual environments and
tool caches (``SKIP_DIRS``: ``.git``, ``.venv``, ``__pycache__`` ...) are skipped silently and
never counted against the file cap.

Refused, with a warning and never copied: symlinks, anything that is not a regular file (FIFOs,
sockets, devices), names containing ``..`` or control characters, files over the size caps
(notebooks 20 MB, metrics.json 1 MB), and files beyond the total cap. Files are opened with
O_NOFOLLOW and the bytes copied are the bytes hashed, so a path swapped mid-copy cannot smuggle
anything in.

Notebook pairing rule (`pair`, the one rule: `grader check`, `grader grade`, the PR path and a
student's own `pytest tests/public` all use it), per assignment, over ``exercises/<id>/<id>.py``
and ``<id>.ipynb`` ("changed" compares the graded source, `grader.core.notebook.graded_source`, with
the release's, ``release_dir/<id>/...``, default ``<course root>/exercises``, so Colab's metadata
edits are not changes; when there is no release apart from the submission itself, as in a
student's own clone, "changed" means "has no more release stubs left than the other file"):

1. neither exists: an assignment error saying to restore the files from the release;
2. only one exists: grade it;
3. both exist and their graded sources are equal: grade the ``.py``;
4. they differ: grade the one that changed from the release; if both changed, grade the
   ``.ipynb`` (Colab edits it) with a warning to re-sync the pair;
5. a corrupt notebook (unreadable JSON or text) that would be graded is an assignment error that
   names the file and what to do; if the other file of the pair is readable and changed from the
   release, that one is graded instead, with a warning.

``digest`` is a sha256 over the taken files' relative paths and bytes: the same submission always
has the same digest, for resumable batch grading.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.jsonread import METRICS_LIMITS
from grader.core.stubs import count_stubs
from grader.core.student_repo import exported_original
from grader.core.course import Course
from grader.core.notebook import MAX_NOTEBOOK_BYTES

MAX_FILE_BYTES = 20 * 1024 * 1024
MAX_METRICS_BYTES = METRICS_LIMITS.max_bytes
MAX_TOTAL_BYTES = 200 * 1024 * 1024
MAX_FILES = 5000
MAX_WARNINGS = 60
# Never walked, never counted against MAX_FILES, never warned about: version control, virtual
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
NOTEBOOK_SUFFIXES = (".py", ".ipynb")


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
PUBLIC_TOP = ("tests/public/", "grader/", ".github/")


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


def _cap_for(rel: Path) -> int:
    if rel.as_posix() == "metrics.json":
        return MAX_METRICS_BYTES
    return MAX_NOTEBOOK_BYTES if rel.suffix in NOTEBOOK_SUFFIXES else MAX_FILE_BYTES


def _is_taken(rel: Path) -> bool:
    return rel.as_posix() == "metrics.json" or (len(rel.parts) > 1 and rel.parts[0] == "exercises")


def _source(path: Path) -> str:
    """Graded source of a notebook; raises grader.core.notebook.NotebookError."""
    from grader.core.notebook import graded_source, read_notebook

    return graded_source(read_notebook(path))


def _release_source(release: Path, aid: str) -> str | None:
    from grader.core.notebook import NotebookError

    for suffix in NOTEBOOK_SUFFIXES:
        path = release / aid / f"{aid}{suffix}"
        if path.is_file():
            try:
                return _source(path)
            except NotebookError:
                continue
    return None


def release_for(exercises: Path, release: Path | None) -> Path | None:
    """The release to compare a submission's `exercises/` with, or None when there is none
    apart from the submission itself: in a student's own clone the course's `exercises/` *is*
    the student's work, and comparing it with itself would call the untouched file "changed"."""
    if release is None or not Path(release).is_dir():
        return None
    try:
        if Path(release).resolve() == Path(exercises).resolve():
            return None
    except OSError:
        return None
    return Path(release)


@dataclass(frozen=True)
class Pairing:
    """Which file of `exercises/<id>/<id>.{py,ipynb}` is graded, or why none can be."""

    path: Path | None
    error: str | None = None
    warnings: tuple[str, ...] = ()


def pair(
    exercises: Path, aid: str, release: Path | None, refused: dict[str, str] | None = None
) -> Pairing:
    """The one pairing rule (module docstring), for `grader check`, `grade` and the PR path.

    `exercises` holds `<id>/<id>.py|.ipynb`; `release` is the release to compare with (see
    `release_for`; None: decide by the release stubs left in each file); `refused` names files
    intake would not take, for the error message."""
    from grader.core.notebook import NotebookError

    refused = refused or {}
    notes: list[str] = []
    folder = Path(exercises) / aid
    rels = {s: f"exercises/{aid}/{aid}{s}" for s in NOTEBOOK_SUFFIXES}
    files = {s: folder / f"{aid}{s}" for s in NOTEBOOK_SUFFIXES if (folder / f"{aid}{s}").is_file()}
    if not files:
        why = [
            f"{rels[s]} was refused: {refused[rels[s]]}"
            for s in NOTEBOOK_SUFFIXES
            if rels[s] in refused
        ]
        detail = f" ({'; '.join(why)})" if why else ""
        return Pairing(
            None,
            f"exercises/{aid}/: neither {aid}.py nor {aid}.ipynb was found{detail}; "
            "restore the assignment folder from the release and commit your work in it",
        )
    sources: dict[str, str] = {}
    broken: dict[str, str] = {}
    for s, path in files.items():
        try:
            sources[s] = _source(path)
        except NotebookError as exc:
            broken[s] = str(exc).replace(str(path), rels[s])

    def corrupt(s: str) -> str:
        return (
            f"{rels[s]} is not a readable notebook ({broken[s]}); open it in Jupyter/Colab to "
            "check it, or restore it from the release (or re-download it from Colab: "
            "File > Download > .ipynb) and push again"
        )

    if len(files) == 1:
        (s,) = files
        return Pairing(files[s]) if s in sources else Pairing(None, corrupt(s))
    released = _release_source(release, aid) if release is not None else None

    def changed(s: str) -> bool:
        if release is None:  # no release to compare with: work shows as stubs filled in
            other = ".ipynb" if s == ".py" else ".py"
            return other not in sources or count_stubs(sources[s]) <= count_stubs(sources[other])
        return released is None or sources[s] != released

    if broken:
        if len(broken) == 2:
            return Pairing(None, corrupt(".ipynb") + "; " + rels[".py"] + " is not readable either")
        (bad,) = broken
        (good,) = sources
        if release is None or changed(good):
            return Pairing(files[good], None, (f"{corrupt(bad)}; graded {rels[good]} instead",))
        return Pairing(
            None,
            f"{corrupt(bad)}. The other file, {rels[good]}, is unchanged from the "
            "release, so there is no work in it to grade",
        )
    if sources[".py"] == sources[".ipynb"]:
        return Pairing(files[".py"])
    py_changed, nb_changed = changed(".py"), changed(".ipynb")
    if py_changed and not nb_changed:
        return Pairing(files[".py"])
    if nb_changed and not py_changed:
        return Pairing(files[".ipynb"])
    notes.append(
        f"{rels['.py']} and {rels['.ipynb']} both differ from the release and from each "
        f"other; graded {rels['.ipynb']} (Colab edits it). Keep the pair in sync, e.g. "
        f"with `jupytext --sync {rels['.ipynb']}`, or delete the one you do not use"
    )
    return Pairing(files[".ipynb"], None, tuple(notes))


def prepare(
    submission: Path, scratch: Path, course: Course, release_dir: Path | None = None
) -> Intake:
    """Copy the graded files of `submission` into `scratch` and choose each assignment's file."""
    submission, scratch = Path(submission), Path(scratch)
    if not submission.is_dir() or submission.is_symlink():
        raise ValueError(f"{submission}: not a directory")
    scratch.mkdir(parents=True, exist_ok=True)
    if any(scratch.iterdir()):
        raise ValueError(f"{scratch}: the scratch directory must be empty")
    root = course.root
    release = Path(release_dir) if release_dir is not None else root / "exercises"
    warnings = _Warnings()
    refused: dict[str, str] = {}
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
            if seen > MAX_FILES:
                warnings.add(f"stopped after {MAX_FILES} files; the rest were not looked at")
                break
            if _bad_name(name):
                warnings.add(f"ignored {posix!r}: its name is not allowed")
                continue
            path = here / name
            if path.is_symlink():
                refused[posix] = "a symlink"
                warnings.add(f"ignored {posix}: symlinks are not taken")
                continue
            data = _read_regular(path, _cap_for(rel) if _is_taken(rel) else MAX_FILE_BYTES)
            if not _is_taken(rel):
                if not _same_as_course(root, rel, data):
                    warnings.add(
                        f"ignored {posix}: it was changed or added outside exercises/ and "
                        "metrics.json, which alone are graded, so it has no effect"
                    )
                continue
            if isinstance(data, str):
                refused[posix] = data
                warnings.add(f"ignored {posix}: {data}")
                continue
            if total + len(data) > MAX_TOTAL_BYTES:
                refused[posix] = "over the submission's total size limit"
                warnings.add(
                    f"ignored {posix}: the submission is over "
                    f"{MAX_TOTAL_BYTES // (1024 * 1024)} MB in total"
                )
                continue
            total += len(data)
            taken.append((posix, data))
        else:
            continue
        break

    digest = hashlib.sha256()
    for posix, data in sorted(taken):
        target = scratch / posix
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        name = posix.encode()
        digest.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big"))
        digest.update(data)
    manifest = root / "course.toml"
    if manifest.is_file():  # the trusted manifest, so notebooks can find the course root
        shutil.copyfile(manifest, scratch / "course.toml")

    notebooks: dict[str, Path] = {}
    errors: dict[str, str] = {}
    compare = release_for(submission / "exercises", release)
    for aid in course.assignment_ids:
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
        digest=digest.hexdigest(),
    )
