"""`grader grade-all`: the real `grade_one` and the command's entry point.

`grade_entry` grades one submission with `grader.grading.grade.grade_submission` in the sandbox;
it is top-level so that `functools.partial(grade_entry, root=...)` pickles into the
children. `run_class` refuses before grading anything when the GPU or a sandbox layer is
missing (the batch's one isolation `decide`, whose probe every child adopts), then runs
`grade_all` over the class with the reference metrics record on every report's roofline.
"""

from __future__ import annotations

import functools
from pathlib import Path

from grader.batch.inputs import parse_shard
from grader.batch.schedule import grade_all
from grader.core import device
from grader.core.course import load_course
from grader.core.errors import ExitCode
from grader.core.late import parse_timestamp
from grader.core.preflight import gpu_preflight
from grader.core.results import GradeResult
from grader.core.staff import load_staff, staff_folder
from grader.grading.grade import grade_submission
from grader.grading.reference import reference_record
from grader.sandbox.isolation import Probe, adopt, decide


def grade_entry(
    submission: Path,
    student: str,
    work_dir: Path,
    root: str,
    timestamp: str | None = None,
    allow_incomplete: bool = False,
    assignments: list[str] | None = None,
    probe: Probe | None = None,
) -> GradeResult:
    """The real `grade_one`: grade.grade_submission in the sandbox (top-level, so picklable).
    `timestamp`: the trusted submission time from the CSV listing, for the late policy;
    `assignments`: only these (a regrade of what went stale), else all;
    `probe`: the batch's isolation probe, run once by `run_class` (its `decide`) rather than
    once per child."""
    if probe is not None:
        adopt(probe)
    when = parse_timestamp(timestamp) if timestamp else None
    return grade_submission(
        Path(submission),
        root=Path(root),
        student=student,
        assignments=assignments,
        timestamp=when,
        allow_incomplete_isolation=allow_incomplete,
    )


def run_class(
    submissions: Path,
    out_dir: Path,
    jobs: int = 1,
    shard: str | tuple[int, int] | None = None,
    root: Path | None = None,
    force: bool = False,
    allow_incomplete_isolation: bool = False,
    drop_times: bool = False,
    staff: Path | None = None,
) -> int:
    """`grader grade-all`: `ExitCode.OK` when every submission was graded and the points audit
    holds, `ExitCode.FAILED` otherwise. Before grading anyone it proves the GPU works where there
    is one (`InfrastructureError` otherwise: no error rows, no zero scores) and refuses
    (`IsolationRefused`) when a sandbox layer is missing. `staff`: the staff's data folder
    (default `<root>/staff`), loaded and checked before anything is graded."""
    if device.has_gpu():
        gpu_preflight()  # once for the class; the children inherit the passing check
    decision = decide(allow_incomplete_isolation)  # IsolationRefused: nobody is graded
    course = load_course(root)
    staff_data = load_staff(staff_folder(course.root, staff), course)
    parsed = parse_shard(shard) if isinstance(shard, str) or shard is None else shard
    outcome = grade_all(
        Path(submissions),
        Path(out_dir),
        jobs=jobs,
        shard=parsed,
        grade_one=functools.partial(
            grade_entry,
            root=str(course.root),
            allow_incomplete=allow_incomplete_isolation,
            probe=decision.probe,
        ),
        course=course,
        reference=reference_record(course),
        force=force,
        drop_times=drop_times,
        staff=staff_data,
    )
    return ExitCode.FAILED if outcome.failed or outcome.audit else ExitCode.OK
