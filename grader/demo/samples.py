"""The bundled sample class, made on demand from solutions/ and exercises/.

Five submissions that show what grading must get right: the reference, an untouched release,
a partly correct one, one that hard-codes answers and metrics.json, and one that hangs. They are
generated rather than committed so they can never drift from the course. The edits name cells of
this course's solutions (its sample class, like its suites, is course content); the metrics are
those of course.toml's `[metrics]` record.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from grader.core.course import Course
from grader.core.regions import SOLUTION, regions
from grader.grading.reference import compute_reference_record

STUB = 'raise NotImplementedError("{name}: not done yet")'


def replace_region(source: str, grade_id: str, body: list[str]) -> str:
    """Replace the solution region of the cell `grade_id` with `body` (indented like it)."""
    lines = source.splitlines()
    header = next(
        (
            i
            for i, line in enumerate(lines)
            if line.startswith("# %%") and f'"grade_id": "{grade_id}"' in line
        ),
        None,
    )
    if header is None:
        raise ValueError(f"no cell with grade_id {grade_id!r}")
    begin, end = next(
        (r.begin, r.end) for r in regions(lines, first=0) if r.kind == SOLUTION and r.begin > header
    )
    indent = re.match(r"\s*", lines[begin]).group(0)  # type: ignore[union-attr]  # \s* matches
    new = [indent + b for b in body]
    return "\n".join(lines[:begin] + new + lines[end + 1 :]) + "\n"


def _reference_metrics(course: Course) -> dict:
    """metrics.json as the reference's notebook writes it (course.toml's `[metrics]` record),
    beside another milestone's key that grading must leave alone."""
    metrics: dict = {"m8_generation": {"tokens_per_s": 41.5}}
    if course.metrics is not None:
        metrics[course.metrics.assignment] = compute_reference_record(course)
    return metrics


def _forged_metrics(course: Course, metrics: dict) -> dict:
    """The reference's record with hand-written intensities: a forgery the suites must refuse."""
    if course.metrics is None:
        return {}
    record = course.metrics.assignment
    forged = {
        "intensity_b1": 0.5,
        "intensity_b8": 4.0,
        "intensity_b32": 16.0,
        "crossover_batch": 64,
    }
    return {record: {**metrics[record], **forged}}


def _fork(dest: Path, sources: dict[str, str], metrics: dict | None) -> None:
    for aid, text in sources.items():
        folder = dest / "exercises" / aid
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{aid}.py").write_text(text, encoding="utf-8")
    if metrics is not None:
        (dest / "metrics.json").write_text(json.dumps(metrics, indent=2), encoding="utf-8")


def build_sample_class(course: Course, dest: Path) -> list[str]:
    """Write the sample class into `dest/<student>/` and return the student ids."""
    root = course.root
    solutions = {
        a: (root / "solutions" / a / f"{a}.py").read_text(encoding="utf-8")
        for a in course.assignment_ids
    }
    metrics = _reference_metrics(course)
    if dest.exists():
        shutil.rmtree(dest)

    _fork(dest / "ada_reference", solutions, metrics)

    released = dest / "bob_untouched" / "exercises"
    shutil.copytree(root / "exercises", released)

    partial = dict(solutions)
    for aid, gid in (
        ("gpu_fundamentals", "strided_copy"),
        ("gpu_fundamentals", "sectors_per_warp"),
        ("m9_roofline", "crossover_batch"),
    ):
        partial[aid] = replace_region(partial[aid], gid, [STUB.format(name=gid)])
    _fork(dest / "cy_partial", partial, metrics)

    cheat = dict(solutions)
    cheat["gpu_fundamentals"] = replace_region(
        cheat["gpu_fundamentals"], "ridge_point", ["return 295.2"]
    )
    cheat["m9_roofline"] = replace_region(cheat["m9_roofline"], "num_params", ["return 1_311_872"])
    _fork(dest / "dan_hardcoded", cheat, _forged_metrics(course, metrics))

    hang = dict(solutions)
    hang["gpu_fundamentals"] = replace_region(
        hang["gpu_fundamentals"], "launch_config", ["while True:", "    pass"]
    )
    _fork(dest / "eve_hangs", hang, metrics)
    return sorted(p.name for p in dest.iterdir())
