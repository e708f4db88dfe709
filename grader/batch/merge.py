"""`merge-shards`: the output folders of `grade-all --shard i/N` runs merged into one.

A class regrade on GitHub Actions (regrade.yml) grades each shard on its own machine; the last
job downloads every shard's folder and merges them here. The merge refuses (`MergeError`, every
problem listed) rather than guess: a student graded in two shards, a shard folder without its
`state.jsonl`, a student whose state line has no `result.json` beside it, shards graded against
different suites or grader (their `inputs` differ), and, given the class (`expect`: the CSV or
folder that was graded), a student no shard graded or one that is not in the class. Then it
copies each student's reports, writes one compacted `state.jsonl`, rebuilds `gradebook.db` and
`grades.csv` from the results, and writes the class report.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.batch.inputs import discover
from grader.batch.state import STATE, StateFile
from grader.core.course import Course
from grader.core.errors import UsageError
from grader.core.results import GradeResult
from grader.gradebook import export_csv, record
from grader.reports.class_report import write_class_report


class MergeError(UsageError):
    """The shards cannot be merged; `problems` lists every reason, each naming its shard."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("cannot merge the shards:\n  - " + "\n  - ".join(problems))


@dataclass
class MergedClass:
    """What the merge wrote: every student once, the gradebook, its CSV, the class report."""

    out: Path
    students: list[str]
    gradebook: Path
    csv: Path
    class_report: dict[str, Path] = field(default_factory=dict)


def read_shards(shards: list[Path]) -> dict[str, tuple[Path, dict[str, Any]]]:
    """{student: (shard folder, state entry)}; MergeError on duplicates, gaps or mixed inputs."""
    problems: list[str] = []
    owner: dict[str, tuple[Path, dict[str, Any]]] = {}
    inputs: dict[str, Path] = {}
    for shard in shards:
        if not (shard / STATE).is_file():
            problems.append(f"{shard}: no {STATE} (not the --out folder of a grade-all run)")
            continue
        for student, entry in sorted(StateFile(shard / STATE).read().items()):
            if student in owner:
                problems.append(f"{student}: graded in both {owner[student][0]} and {shard}")
                continue
            if not (shard / student / "result.json").is_file():
                problems.append(f"{shard}: {student} has a state line but no result.json")
                continue
            owner[student] = (shard, entry)
            key = repr(sorted((entry.get("inputs") or {}).items()))
            inputs.setdefault(key, shard)
    if len(inputs) > 1:
        problems.append(
            "the shards were graded against different suites, grader or course.toml ("
            + ", ".join(str(s) for s in inputs.values())
            + "): regrade them from one commit"
        )
    if problems:
        raise MergeError(problems)
    return owner


def merge_shards(
    shards: list[Path], out: Path, course: Course, expect: Path | None = None
) -> MergedClass:
    """Merge the shard folders into `out` (new or empty); see the module docstring."""
    shards = [Path(s) for s in shards]
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise MergeError([f"{out}: exists and is not empty; merge into a new folder"])
    owner = read_shards(shards)
    submissions = None
    if expect is not None:
        submissions = discover(Path(expect))
        missing = sorted(set(submissions) - set(owner))
        extra = sorted(set(owner) - set(submissions))
        problems = [f"{s}: in the class but graded by no shard" for s in missing]
        problems += [f"{s}: graded ({owner[s][0]}) but not in the class {expect}" for s in extra]
        if problems:
            raise MergeError(problems)
    out.mkdir(parents=True, exist_ok=True)
    state = StateFile(out / STATE)
    db = out / "gradebook.db"
    results = {}
    for student, (shard, entry) in sorted(owner.items()):
        shutil.copytree(shard / student, out / student, symlinks=True)
        results[student] = GradeResult.read(out / student / "result.json")
        record(db, results[student], course)
        state.append(entry)
    state.compact()
    merged = MergedClass(out, sorted(owner), db, export_csv(db, out / "grades.csv", results))
    _, merged.class_report = write_class_report(out, course, state.read(), submissions=submissions)
    return merged
