"""The corpus's per-case wall times: written to last_run.json and shown at the end of a run.

The process that grades the corpus writes them (`save`). Under pytest-xdist (`make test`) that
process is a worker, whose terminal the run does not show: it hands them to the controller
through xdist's `workeroutput`, and the controller shows them (tests/unit/conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAST_RUN = REPO / "tests" / "corpus" / "last_run.json"
WORKER_KEY = "corpus_times"  # the key of xdist's workeroutput that carries them


def save(times: dict[str, dict], *paths: str | Path | None) -> None:
    """Write `times` to each path given (the user pass's outcomes file, last_run.json)."""
    for path in paths:
        try:
            if path:
                Path(path).write_text(json.dumps(times, indent=2, sort_keys=True) + "\n")
        except OSError:
            pass


def show(tr, times: dict[str, dict]) -> None:
    """The table of a run's times, slowest first, in pytest's terminal summary."""
    tr.section("corpus wall times")
    tr.write_line(f"{'corpus case':<34}{'wall s':>8}{'bound':>7}  score")
    for name, row in sorted(times.items(), key=lambda kv: -kv[1]["wall_s"]):
        tr.write_line(
            f"{name:<34}{row['wall_s']:>8.1f}{row['max_s']:>7.0f}  {row.get('score', '')}"
        )
    cases = sum(r["wall_s"] for k, r in times.items() if not k.startswith("("))
    tr.write_line(
        f"{'total of the cases':<34}{cases:>8.1f}   (also in {LAST_RUN.relative_to(REPO)})"
    )
    for name, row in sorted(times.items()):
        if row.get("stacks"):  # a batched case over its bound: where its grading was
            tr.write_line(f"{name} went over its bound; its first stacks in grade.log:")
            for line in row["stacks"].splitlines():
                tr.write_line("  " + line)
