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
