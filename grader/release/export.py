"""The student export: the repository students fork, written only from a proven release.

`export_student` writes `exercises/`, `tests/public/`, the grader package's student part,
`course.toml`, `pyproject.toml`, the lock files the workflows install with (`locks/*.txt`),
`README.md` (from `STUDENT_README.md`), `.github/workflows/` (from `.github/student-workflows/`)
and a `.gitignore`; never `solutions/`, `tests/hidden/`, `tests/unit/` or the staff's data
(`staff/`: extensions, overrides). The grader package holds no secrets (hidden tests live in
`tests/hidden/`, never in the package), but the instructor's tooling is left out. The package
is classified by its top-level entries, which follow the phase packages: `STUDENT_MODULES` ship
(what `grader check`, `grader grade` and the student workflows run: the CLI, core, the sandbox,
the suites, grading, reports, the workflows' github helpers); `INSTRUCTOR_MODULES` stay home
(release, batch grading, the gradebook, the demo; both lists live in `grader.release.tree`, which
the leak proof reads too). The CLI imports every command's module
lazily, so the student commands work without them. An entry in neither list stops the export
until it is classified here: a new module must never ship by accident. Data folders without an
`__init__.py` ship as they are.

It refuses (`ExportError`) when `exercises/` is not what release would write, a module is
unclassified or the leak proof (`grader.release.leak`) finds anything in the finished tree; the
tree is built beside `dest` and moved into place only once proven, so a refusal leaves `dest`
as it was.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from grader.core.staff import STAFF_DIR
from grader.core.student_repo import (
    RELEASE_RECORD,
    STUDENT_GITIGNORE,
    STUDENT_README,
    STUDENT_WORKFLOWS,
    release_record,
)
from grader.release.leak import leak_check
from grader.release.swap import release
from grader.release.tree import copy_path, student_grader
from grader.release.validate import ReleaseError


class ExportError(ReleaseError):
    """The student export was refused (stale release, leak, unclassified module...)."""


def _student_grader(root: Path) -> list[Path]:
    ship, unknown = student_grader(root)
    if unknown:
        raise ExportError(
            [
                f"{u}: not classified; add it to STUDENT_MODULES or "
                "INSTRUCTOR_MODULES in grader/release/tree.py"
                for u in unknown
            ]
        )
    return ship


def export_student(root: Path, dest: Path) -> Path:
    """Write the repository students fork into `dest` (must not exist or be empty).

    Refuses (ExportError) when exercises/ is stale, a grader module is unclassified, or the leak
    proof finds anything; `dest` is then left as it was.
    """
    root = Path(root).resolve()
    dest = Path(dest).resolve()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ExportError([f"{dest}: exists and is not empty; choose a new directory"])
    rel = release(root, check=True)
    if not rel.ok:
        raise ExportError(
            [
                "exercises/ is not what release would write; run `grader release` first",
                *rel.findings,
            ]
        )
    readme = root / STUDENT_README
    if not readme.is_file():
        raise ExportError([f"{readme}: missing (the student README's source)"])
    grader_files = _student_grader(root)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".export-", dir=dest.parent) as tmp:
        out = Path(tmp) / "student"
        out.mkdir()
        copy_path(root / "exercises", out / "exercises")
        public = root / "tests" / "public"
        if public.is_dir():
            copy_path(public, out / "tests" / "public")
        else:
            (out / "tests" / "public").mkdir(parents=True)
        for extra in ("tests/conftest.py", "tests/__init__.py", "conftest.py"):
            if (root / extra).is_file():
                copy_path(root / extra, out / extra)
        for p in grader_files:
            copy_path(p, out / "grader" / p.name)
        for name in ("course.toml", "pyproject.toml"):
            copy_path(root / name, out / name)
        for lock in sorted((root / "locks").glob("*.txt")):  # the workflows install with them
            copy_path(lock, out / "locks" / lock.name)
        (out / RELEASE_RECORD).write_bytes(release_record(root))
        copy_path(readme, out / "README.md")
        (out / ".gitignore").write_text(STUDENT_GITIGNORE, encoding="utf-8")
        flows = root / STUDENT_WORKFLOWS
        if flows.is_dir():
            for wf in sorted([*flows.glob("*.yml"), *flows.glob("*.yaml")]):
                copy_path(wf, out / ".github" / "workflows" / wf.name)
        for forbidden in ("solutions", "tests/hidden", "tests/unit", STAFF_DIR):
            if (out / forbidden).exists():  # cannot happen; kept as a tripwire
                raise ExportError([f"{forbidden}/ would be exported"])
        leaks = leak_check(root, out)
        if leaks:
            raise ExportError([f"leak: {lk}" for lk in leaks])
        if dest.exists():
            dest.rmdir()
        os.replace(out, dest)
    return dest
