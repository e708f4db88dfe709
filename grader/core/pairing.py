"""Which file of a notebook pair is graded: the one pairing rule.

`pair` is the one rule (`grader check`, `grader grade`, the PR path and a student's own
`pytest tests/public` all use it), per assignment, over ``exercises/<id>/<id>.py`` and
``<id>.ipynb`` ("changed" compares the graded source, `grader.core.notebook.graded_source`, with
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
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.core.notebook import NotebookError, graded_source, read_notebook
from grader.core.stubs import count_stubs

NOTEBOOK_SUFFIXES = (".py", ".ipynb")


def _source(path: Path) -> str:
    """Graded source of a notebook; raises grader.core.notebook.NotebookError."""
    return graded_source(read_notebook(path))


def _release_source(release: Path, aid: str) -> str | None:
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
    intake would not take, for the error message.

    Long because it is the rule itself, read top to bottom: each early return is one case of
    the module docstring, with the message the student sees for it."""
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
