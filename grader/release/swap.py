"""`release` and `check`: stage every assignment, prove it, then swap it into exercises/.

Everything is built in a temporary directory (`grader.release.build`), proven leak-free
together with `tests/public/`, which ships beside it (`grader.release.leak`), then swapped into
`exercises/` one assignment directory at a time with same-filesystem renames; an assignment
whose staged tree equals the committed one is left alone, so a second run changes no byte. A
failure while swapping puts every assignment back, so a failed release leaves `exercises/` as
it was. `check` builds and proves the same way but writes nothing: it names every file of
`exercises/` that is missing, extra or not what release would write (and, for the whole
course, every directory that is not an assignment).
"""

from __future__ import annotations

import filecmp
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.course import load_course
from grader.core.tables import format_table
from grader.release.build import build_assignment
from grader.release.leak import leak_check_trees
from grader.release.tree import JUNK_DIRS, tree_files
from grader.release.validate import ReleaseError


@dataclass
class ReleaseReport:
    """What `release` did (or, with check=True, found). `ok` is False on any finding."""

    check: bool
    assignments: list[str]
    findings: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)  # relative paths swapped into exercises/
    unchanged: list[str] = field(default_factory=list)  # assignments already up to date
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.findings

    def table(self) -> str:
        rows = []
        for a in self.assignments:
            mine = [f for f in self.findings if f"/{a}/" in f or f"{a}:" in f or f" {a} " in f]
            if self.check:
                status = "stale" if mine else "in sync"
            elif self.findings:
                status = "refused" if mine else "not written"
            else:
                status = "unchanged" if a in self.unchanged else "written"
            rows.append((a, status))
        head = "release --check" if self.check else "release"
        out = [format_table(("assignment", "status"), rows)]
        out += [f"  {f}" for f in self.findings]
        out.append(f"{head}: {'OK' if self.ok else 'FAILED'} in {self.seconds:.2f} s")
        return "\n".join(out)


def _compare(stage: Path, exercises: Path, ids: Sequence[str], whole: bool) -> list[str]:
    findings = []
    for a in ids:
        new, old = tree_files(stage / a), tree_files(exercises / a)
        for name in sorted(set(new) | set(old)):
            path = f"exercises/{a}/{name}"
            if name not in old:
                findings.append(f"{path}: missing (release would write it)")
            elif name not in new:
                findings.append(f"{path}: extra (release would delete it)")
            elif not filecmp.cmp(new[name], old[name], shallow=False):
                findings.append(f"{path}: differs from what release would write")
    if whole and exercises.is_dir():
        for p in sorted(exercises.iterdir()):
            if p.name not in ids and p.name not in JUNK_DIRS:
                findings.append(f"exercises/{p.name}: extra (not an assignment in course.toml)")
    return findings


def _same_tree(a: Path, b: Path) -> bool:
    fa, fb = tree_files(a), tree_files(b)
    return fa.keys() == fb.keys() and all(filecmp.cmp(fa[k], fb[k], shallow=False) for k in fa)


def _swap(stage: Path, exercises: Path, ids: Sequence[str], backup: Path) -> list[str]:
    """Move each staged assignment into exercises/; on any error put everything back."""
    exercises.mkdir(exist_ok=True)
    backup.mkdir()
    moved: list[str] = []
    try:
        for a in ids:
            target = exercises / a
            if target.exists():
                os.replace(target, backup / a)
            os.replace(stage / a, target)
            moved.append(a)
    except BaseException:
        for a in ids:
            target = exercises / a
            if a in moved and target.exists():
                shutil.rmtree(target)  # the new version goes; the old one (if any) comes back
            if (backup / a).exists() and not target.exists():
                os.replace(backup / a, target)
        raise
    return moved


def release(root: Path, ids: list[str] | None = None, check: bool = False) -> ReleaseReport:
    """Build exercises/ from solutions/ (or, with check=True, only compare; write nothing)."""
    t0 = time.perf_counter()
    root = Path(root).resolve()
    course = load_course(root)
    wanted = list(ids) if ids else course.assignment_ids
    report = ReleaseReport(check=check, assignments=wanted)
    unknown = [a for a in wanted if a not in course.assignment_ids]
    if unknown:
        report.findings = [
            f"{a}: not an assignment in course.toml ({', '.join(course.assignment_ids)})"
            for a in unknown
        ]
        report.seconds = time.perf_counter() - t0
        return report
    # Staging sits inside the root so the final swap is a same-filesystem rename.
    parent = None if check else root
    with tempfile.TemporaryDirectory(prefix=".release-", dir=parent) as tmp:
        stage = Path(tmp) / "exercises"
        stage.mkdir()
        for a in wanted:
            try:
                build_assignment(root, a, stage / a)
            except ReleaseError as exc:
                report.findings += exc.findings
        if not report.findings:
            # The release and the public suites it ships beside: both reach students.
            trees = {"exercises/": stage, "tests/public/": root / "tests" / "public"}
            report.findings += [f"leak: {lk}" for lk in leak_check_trees(root, trees)]
        if not report.findings:
            exercises = root / "exercises"
            if check:
                report.findings += _compare(stage, exercises, wanted, whole=not ids)
            else:
                changed = [a for a in wanted if not _same_tree(stage / a, exercises / a)]
                report.unchanged = [a for a in wanted if a not in changed]
                _swap(stage, exercises, changed, Path(tmp) / "previous")
                report.written = [
                    f"exercises/{a}/{n}" for a in changed for n in tree_files(exercises / a)
                ]
    report.seconds = time.perf_counter() - t0
    return report


def check(root: Path, ids: list[str] | None = None) -> ReleaseReport:
    """`release --check`: is exercises/ what release would write? Writes nothing."""
    return release(root, ids, check=True)
