"""The bundled sample class, made on demand from solutions/ and exercises/.

Five submissions that show what grading must get right: the reference, an untouched release,
a partly correct one, one that hard-codes answers and metrics.json, and one that hangs. They are
generated rather than committed so they can never drift from the course.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from grader.core.course import Course
from grader.core.regions import SOLUTION, regions
from grader.grading.reference import compute_m9_record as reference_m9_record

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
    return {"m9_roofline": reference_m9_record(course), "m8_generation": {"tokens_per_s": 41.5}}


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
    forged = {
        "m9_roofline": {
            **metrics["m9_roofline"],
            "intensity_b1": 0.5,
            "intensity_b8": 4.0,
            "intensity_b32": 16.0,
            "crossover_batch": 64,
        }
    }
    _fork(dest / "dan_hardcoded", cheat, forged)

    hang = dict(solutions)
    hang["gpu_fundamentals"] = replace_region(
        hang["gpu_fundamentals"], "launch_config", ["while True:", "    pass"]
    )
    _fork(dest / "eve_hangs", hang, metrics)
    return sorted(p.name for p in dest.iterdir())
