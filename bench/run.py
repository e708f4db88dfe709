"""Benchmarks: grading speed against nbgrader, class throughput, start-up, and the GPU kernels.

    .venv/bin/python bench/run.py [--quick] [--json out.json] [--parts 1,2,3,4] [--runs N]
    .venv/bin/python bench/run.py --gpu-only --json gpu.json     # part 4 alone, on a GPU machine
    .venv/bin/python bench/run.py --parts 1,2,3 --against DIR    # before (DIR) and after (here)

This module is the command line only: it parses the flags, runs the parts asked for in order
and writes the JSON (the date, the mode, the machine, the targets, and each part's figures under
its key). Each part is a module of its own, and prints its own table:

1. `part_nbgrader` (`one_submission`): one submission, `grader grade` against
   `nbgrader autograde`, cold processes, runs interleaved;
2. `part_class` (`class_throughput`): a synthetic class through `grader.batch.grade_all` with
   1 and 2 jobs;
3. `part_startup` (`startup`): `grader --help`, `grader check`, the sandboxed worker's start-up;
4. `part_gpu` (`gpu`): the reference kernels against torch (only where there is a GPU).

`timing` holds what they share (timing a cold process, summaries, tables, the machine);
`compare` the before-and-after of `--against DIR` (parts 1-3 also run in DIR, side by side).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

# Run as a script (`python bench/run.py`, or a tree's child under `--against`): make this tree's
# `grader` importable ahead of any installed one. Python has already put bench/ itself first on
# sys.path, which is how the part modules below import each other by name.
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from compare import Tree  # noqa: E402
from part_class import part_class  # noqa: E402
from part_gpu import part_gpu  # noqa: E402
from part_nbgrader import part_one_submission  # noqa: E402
from part_startup import part_startup  # noqa: E402
from timing import TARGETS, machine  # noqa: E402


def parser() -> argparse.ArgumentParser:
    """The command line: the same flags as ever."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick",
        action="store_true",
        help="small sizes, one run each (for the unit test; figures are noisier)",
    )
    p.add_argument("--json", help="write every figure here")
    p.add_argument("--parts", default="1,2,3,4", help="comma-separated subset of 1,2,3,4")
    p.add_argument("--gpu-only", action="store_true", help="part 4 alone (same as --parts 4)")
    p.add_argument(
        "--no-gpu-suite",
        action="store_true",
        help="part 4 without its run of the GPU-marked hidden tests (make gpu-check runs them)",
    )
    p.add_argument("--runs", type=int, help="runs per timing in parts 1 and 3 (default 5; quick 1)")
    p.add_argument("--class-size", type=int, help="submissions in part 2 (default 40; quick 4)")
    p.add_argument(
        "--against",
        metavar="DIR",
        help="another checkout (the before): parts 1-3 also run there, side by side with this one",
    )
    return p


def header(args: argparse.Namespace, argv: list[str] | None, trees: tuple[Tree, Tree] | None):
    """The JSON's head (date, mode, command, machine, targets, the trees) and its printed line."""
    out: dict = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "command": " ".join([".venv/bin/python", "bench/run.py", *(argv or sys.argv[1:])]),
        "machine": machine(),
        "targets": TARGETS,
    }
    if trees:
        out["against"] = {t.label: {"root": str(t.root), "commit": t.commit()} for t in trees}
    m = out["machine"]
    print(
        f"# grader benchmarks, {out['date']}\n{m['cpu']}, {m['cores']} cores, Python "
        f"{m['python']}, {m['device']}; load average {m['load_average']}"
    )
    return out


def run_parts(args: argparse.Namespace, out: dict, trees: tuple[Tree, Tree] | None) -> None:
    """Each part asked for, in order, in a temporary directory; its figures into `out`."""
    parts = {"4"} if args.gpu_only else set(args.parts.split(","))
    runs = args.runs or (1 if args.quick else 5)
    size = args.class_size or (4 if args.quick else 40)
    with tempfile.TemporaryDirectory(prefix="grader-bench-") as scratch:
        tmp = Path(scratch)
        if "1" in parts:
            out["one_submission"] = part_one_submission(tmp / "p1", runs, trees)
        if "2" in parts:  # quick: m9_roofline only, so that a unit test can afford it
            assignments = ["m9_roofline"] if args.quick else None
            out["class_throughput"] = part_class(tmp / "p2", size, assignments, trees)
        if "3" in parts:
            out["startup"] = part_startup(tmp / "p3", 1 if args.quick else max(runs, 3), trees)
        if "4" in parts:
            out["gpu"] = part_gpu(ROOT, quick=args.quick, suite=not args.no_gpu_suite)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    trees = None
    if args.against:
        trees = (Tree.at("after", ROOT), Tree.at("before", Path(args.against)))
        for t in trees:
            t.check()
    started = datetime.now(UTC)
    out = header(args, argv, trees)
    run_parts(args, out, trees)
    out["seconds"] = round((datetime.now(UTC) - started).total_seconds(), 1)
    out["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        print(f"\nfigures written to {args.json} ({out['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
