"""Walking and copying the course's trees, the same way for every release job.

Tool clutter (`JUNK_DIRS`: caches, virtual environments, `.git`) is never released, compared,
copied or exported; names are reported relative to the course root, POSIX style.
"""

from __future__ import annotations

import shutil
from pathlib import Path

JUNK_DIRS = frozenset(
    {
        "__pycache__",
        ".ipynb_checkpoints",
        ".pytest_cache",
        ".git",
        ".venv",
        "node_modules",
        ".ruff_cache",
    }
)


# The grader package's top-level entries, by who gets them: `STUDENT_MODULES` ship in the student
# repository (`grader.release.export`), `INSTRUCTOR_MODULES` stay home. A new entry in neither
# stops the export until it is classified here.
STUDENT_MODULES = frozenset(
    {
        "__init__",
        "__main__",
        "cli",
        "core",
        "simt",
        "sandbox",
        "suites",
        "grading",
        "reports",
        "github",
    }
)
INSTRUCTOR_MODULES = frozenset({"release", "batch", "gradebook", "demo"})


def student_grader(root: Path) -> tuple[list[Path], list[str]]:
    """(the entries of `root`/grader the student repository ships: modules, packages and data
    folders; the entries in neither list, as ``grader/<name>``)."""
    pkg = root / "grader"
    ship: list[Path] = []
    unknown: list[str] = []
    for p in sorted(pkg.iterdir()) if pkg.is_dir() else ():
        if p.name in JUNK_DIRS or p.name.startswith("."):
            continue
        if p.is_file() and p.suffix == ".py":
            name = p.stem
        elif p.is_dir() and (p / "__init__.py").exists():
            name = p.name
        else:
            ship.append(p)  # data without code
            continue
        if name in STUDENT_MODULES:
            ship.append(p)
        elif name not in INSTRUCTOR_MODULES:
            unknown.append(f"grader/{p.name}")
    return ship, unknown


def rel_name(root: Path, path: Path) -> str:
    """`path` relative to `root` for a message; the path as given when it lies outside."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def tree_files(tree: Path) -> dict[str, Path]:
    """Every file under `tree` by its relative POSIX name, junk directories skipped."""
    if not tree.is_dir():
        return {}
    out = {}
    for p in sorted(tree.rglob("*")):
        if p.is_file() and not (set(p.relative_to(tree).parts[:-1]) & JUNK_DIRS):
            out[p.relative_to(tree).as_posix()] = p
    return out


def copy_path(src: Path, dest: Path) -> None:
    """Copy a file, or a directory without its junk and compiled files, creating parents."""
    if src.is_dir():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns(*JUNK_DIRS, "*.pyc"))
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
