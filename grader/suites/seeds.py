"""The per-student seed of every random draw in a graded suite.

A grading's seed is a digest of three things: the suites of the assignment (their `ast` dump,
so a whitespace or comment edit cannot re-roll the draws), the assignment id and the student's
identity (their id, or the submission's digest when none is given). Each test then draws from
`test_seed(seed, key)`, keyed by its own name, so the draws are the same on any machine, under
any `PYTHONHASHSEED` and in any order of tests. The seed is recorded in result.json.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from pathlib import Path

VERSION = "grader-seed-1"  # bump to re-roll every draw on purpose (a new term's grading)


def suite_digest(root: Path, dirs: Iterable[Path]) -> str:
    """sha256 of the normalised source of every .py file under `dirs` and the conftest.py
    files above them (up to `root`): paths relative to `root`, each file's `ast.dump`."""
    root = Path(root).absolute()  # not resolved: a course may reach its tests through a link
    files: set[Path] = set()
    for d in dirs:
        d = Path(d).absolute()
        files.update(p for p in d.rglob("*.py") if p.is_file())
        for parent in d.parents:
            if parent == root or root not in parent.parents:
                break
            if (parent / "conftest.py").is_file():
                files.add(parent / "conftest.py")

    def rel(p: Path) -> str:
        try:
            return p.relative_to(root).as_posix()
        except ValueError:  # a suite folder given outside the root: its own path keys it
            return p.as_posix()

    h = hashlib.sha256()
    for p in sorted(files, key=rel):
        h.update(rel(p).encode() + b"\0")
        h.update(_normalised(p).encode() + b"\0")
    return h.hexdigest()


def _normalised(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        return ast.dump(ast.parse(text))
    except SyntaxError:  # a broken suite fails on its own; its bytes still key the draws
        return text


def assignment_seed(assignment: str, identity: str, digest: str) -> str:
    """The seed of one assignment's grading (hex), recorded in result.json."""
    data = "\0".join((VERSION, assignment, identity, digest)).encode()
    return hashlib.sha256(data).hexdigest()[:32]


def test_seed(seed: str, key: str) -> int:
    """The seed of one test (a 128-bit int) drawn from the grading's seed and the test's key."""
    return int.from_bytes(hashlib.sha256(f"{seed}\0{key}".encode()).digest()[:16], "big")


test_seed.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
