"""The one set of limits on what the trusted grader takes from a submission.

A submission reaches the grader two ways: as the `submission` artifact of a pull request
(`grader.github.artifact` validates it before anything is installed) and as a folder, a
student's fork or the artifact extracted, that `grader.grading.intake` takes as data. Both
apply `LIMITS`, so a submission one path accepts the other does not refuse:

- `max_files`: files looked at in one submission (the artifact's members; every file of a fork
  that intake walks, version control, virtual environments and caches left out);
- `max_total_bytes`: bytes in all (the artifact's files; the files intake takes);
- `max_file_bytes`: one file. Notebooks (`grader.core.notebook.MAX_NOTEBOOK_BYTES`) and
  metrics.json (`grader.core.jsonread.METRICS_LIMITS`) have caps of their own, no larger.

Standard library only: the artifact check imports it on a bare Python.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class SubmissionLimits:
    """Bounds on one submission; the messages that cite them print the MB in whole MiB."""

    max_files: int = 5000
    max_total_bytes: int = 200 * MIB
    max_file_bytes: int = 20 * MIB


LIMITS = SubmissionLimits()
