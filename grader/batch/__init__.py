"""Grade a whole class: parallel, crash-proof, resumable, shardable (`grader grade-all`).

- `inputs`: the submissions (a folder or a CSV listing), their trusted times, the resume key
  and the grading digest, why a student is regraded, shards;
- `state`: `state.jsonl`, one committed line per finished student;
- `children`: a process per submission (from the batch's fork server, `preload`) that dies with
  the batch, and what it left;
- `schedule`: `grade_all`, the loop that keeps, grades and records every student;
- `entry`: the real `grade_one` and `run_class`, the command.

Instructor tooling: not shipped in the student export.
"""

from __future__ import annotations

# What the command, the demo, the bench and the tests import from the package; the rest is
# imported from its module (grader.batch.inputs, .children, ...).
from grader.batch.entry import grade_entry, run_class
from grader.batch.inputs import (
    discover,
    parse_shard,
    select_shard,
    submission_times,
)
from grader.batch.schedule import grade_all
from grader.batch.state import STATE, StateFile
from grader.grading.intake import submission_digest
from grader.grading.reference import reference_record

__all__ = [
    "STATE",
    "StateFile",
    "discover",
    "grade_all",
    "grade_entry",
    "parse_shard",
    "reference_record",
    "run_class",
    "select_shard",
    "submission_digest",
    "submission_times",
]
