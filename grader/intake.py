"""Taking a submission as data: copy what is graded into a scratch directory, ignore the rest.

Only ``exercises/**`` and ``metrics.json`` are taken. Every other path of the submission that
differs from the trusted course tree (tests/, grader/, conftest.py, pyproject.toml, .github/ ...),
or that the course does not have, is ignored and named in a warning, so a pull request that edits
the tests or the grader changes nothing and says so. ``.git`` is skipped silently.

Refused, with a warning and never copied: symlinks, anything that is not a regular file (FIFOs,
sockets, devices), names containing ``..`` or control characters, files over the size caps
(notebooks 20 MB, metrics.json 1 MB), and files beyond the total cap. Files are opened with
O_NOFOLLOW and the bytes copied are the bytes hashed, so a path swapped mid-copy cannot smuggle
anything in.

Notebook pairing rule, per assignment, over ``exercises/<id>/<id>.py`` and ``<id>.ipynb``
("changed" compares the graded source, `grader.notebook.graded_source`, with the release's,
``release_dir/<id>/...``, default ``<course root>/exercises``, so Colab's metadata edits are not
changes):

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
from grader.course import Course
from grader.notebook import MAX_NOTEBOOK_BYTES

MAX_FILE_BYTES = 20 * 1024 * 1024
MAX_METRICS_BYTES = METRICS_LIMITS.max_bytes
MAX_TOTAL_BYTES = 200 * 1024 * 1024
MAX_FILES = 5000
MAX_WARNINGS = 60
SKIP_DIRS = {".git", "__pycache__", ".ipynb_checkpoints"}
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
    if isinstance(data, str) or theirs.is_symlink() or not theirs.is_file():
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
    """Graded source of a notebook; raises grader.notebook.NotebookError."""
    from grader.notebook import graded_source, read_notebook

    return graded_source(read_notebook(path))


def _release_source(release: Path, aid: str) -> str | None:
    from grader.notebook import NotebookError

    for suffix in NOTEBOOK_SUFFIXES:
        path = release / aid / f"{aid}{suffix}"
        if path.is_file():
            try:
                return _source(path)
            except NotebookError:
                continue
    return None


def _pair(
    scratch: Path, release: Path, aid: str, refused: dict[str, str], warnings: _Warnings
) -> tuple[Path | None, str | None]:
    """(file to grade, None) or (None, error message) for one assignment (rule in docstring)."""
    from grader.notebook import NotebookError

    folder = scratch / "exercises" / aid
    rels = {s: f"exercises/{aid}/{aid}{s}" for s in NOTEBOOK_SUFFIXES}
    files = {s: folder / f"{aid}{s}" for s in NOTEBOOK_SUFFIXES if (folder / f"{aid}{s}").is_file()}
    if not files:
        why = [
            f"{rels[s]} was refused: {refused[rels[s]]}"
            for s in NOTEBOOK_SUFFIXES
            if rels[s] in refused
        ]
        detail = f" ({'; '.join(why)})" if why else ""
        return None, (
            f"exercises/{aid}/: neither {aid}.py nor {aid}.ipynb was found{detail}; "
            "restore the assignment folder from the release and commit your work in it"
        )
    sources: dict[str, str] = {}
    broken: dict[str, str] = {}
    for s, path in files.items():
        try:
            sources[s] = _source(path)
        except NotebookError as exc:
            reason = str(exc).replace(str(path), rels[s])
            broken[s] = reason
    corrupt_hint = (
        "{rel} is not a readable notebook ({why}); open it in Jupyter/Colab to "
        "check it, or restore it from the release (or re-download it from Colab: "
        "File > Download > .ipynb) and push again"
    )

    def corrupt(s: str) -> str:
        return corrupt_hint.format(rel=rels[s], why=broken[s])

    if len(files) == 1:
        (s,) = files
        return (files[s], None) if s in sources else (None, corrupt(s))
    released = _release_source(release, aid)

    def changed(s: str) -> bool:
        return released is None or sources[s] != released

    if broken:
        if len(broken) == 2:
            return None, corrupt(".ipynb") + "; " + rels[".py"] + " is not readable either"
        (bad,) = broken
        (good,) = sources
        if changed(good):
            warnings.add(f"{corrupt(bad)}; graded {rels[good]} instead")
            return files[good], None
        return None, (
            f"{corrupt(bad)}. The other file, {rels[good]}, is unchanged from the "
            "release, so there is no work in it to grade"
        )
    if sources[".py"] == sources[".ipynb"]:
        return files[".py"], None
    py_changed, nb_changed = changed(".py"), changed(".ipynb")
    if py_changed and not nb_changed:
        return files[".py"], None
    if nb_changed and not py_changed:
        return files[".ipynb"], None
    warnings.add(
        f"{rels['.py']} and {rels['.ipynb']} both differ from the release and from each "
        f"other; graded {rels['.ipynb']} (Colab edits it). Keep the pair in sync, e.g. "
        f"with `jupytext --sync {rels['.ipynb']}`, or delete the one you do not use"
    )
    return files[".ipynb"], None


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
    for aid in course.assignment_ids:
        chosen, error = _pair(scratch, release, aid, refused, warnings)
        if chosen is not None:
            notebooks[aid] = chosen
        else:
            errors[aid] = error or "no notebook"
    return Intake(
        notebooks=notebooks,
        errors=errors,
        metrics_path=scratch / "metrics.json",
        warnings=warnings.final(),
        digest=digest.hexdigest(),
    )
