"""`grader`: argparse, then one phase's API, then print. Nothing else lives here.

Each command imports its phase inside the command, for two reasons said at each import:
`grader --help` and `grader check` must start fast (numpy, pytest, matplotlib load only for the
command that needs them), and the student repository lacks the instructor packages (release,
batch, gradebook, demo), whose commands then say so (see `main`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from grader.core import heap
from grader.core.errors import ExitCode, GraderError, InfrastructureError, UsageError

if TYPE_CHECKING:
    from grader.core.course import Course


def _root(args: argparse.Namespace) -> Path:
    from grader.core.course import find_root  # lazy: `grader --help` loads no course code

    return find_root(Path(args.root) if args.root else None)


def _course(args: argparse.Namespace) -> Course:
    from grader.core.course import load_course  # lazy: as above

    return load_course(_root(args))


def cmd_check(args: argparse.Namespace) -> int:
    """Public suites against your own exercises, in this process, simulator when no GPU."""
    from grader.grading.check import all_passed, check  # lazy: imports numpy and pytest
    from grader.reports.terminal import check_report  # lazy: as above

    submission = Path(args.submission) if args.submission else None
    checked = check(_root(args), args.assignment, submission)
    print(check_report(checked, args.verbose))
    return ExitCode.OK if all_passed(checked) else ExitCode.FAILED


def cmd_profile(args: argparse.Namespace) -> int:
    """Each kernel's memory profile at the course's profiling shapes, from the memory model."""
    from grader.grading.profile import profile  # lazy: numpy, numba
    from grader.reports.memory import profile_report  # lazy: as above

    root = _root(args)
    course = _course(args)
    assignment = args.assignment or _profiled_assignment(course, root)
    submission = Path(args.submission) if args.submission else None
    found = profile(root, assignment, args.kernel, submission, course)
    print(profile_report(found, course.gpu.bandwidth_gbs, course.gpu.name))
    return ExitCode.OK if all(k.profile is not None for k in found.kernels) else ExitCode.FAILED


def cmd_run(args: argparse.Namespace) -> int:
    """The notebook top to bottom, headless, cell by cell: Jupyter's "Run all" without Jupyter."""
    from grader.grading.run import run_notebook  # lazy: the notebook reader

    submission = Path(args.submission) if args.submission else None
    code = run_notebook(_root(args), args.assignment, submission, demos=not args.skip_demos)
    return ExitCode.OK if code == 0 else ExitCode.FAILED


def _profiled_assignment(course: Course, root: Path) -> str:
    """The course's first assignment with profiling shapes (`grader profile` without one)."""
    from grader.grading.profile import PROFILES  # lazy: as in cmd_profile

    for a in course.assignment_ids:
        if (root / "tests" / "public" / a / PROFILES).is_file():
            return a
    raise UsageError(f"no assignment of this course has tests/public/<id>/{PROFILES}")


def cmd_grade(args: argparse.Namespace) -> int:
    from grader.core.jsonread import metrics_or_none  # lazy: as in _root
    from grader.core.late import parse_timestamp  # lazy: as in _root
    from grader.core.staff import load_staff, staff_folder  # lazy: as in _root
    from grader.grading.grade import grade_submission  # lazy: numpy, the sandbox
    from grader.grading.reference import reference_record  # lazy: as above
    from grader.reports.outputs import report_outputs, unwritable, write_each  # lazy: matplotlib
    from grader.reports.terminal import grade_summary  # lazy: as above

    requested = [
        ("--json", args.json),
        ("--markdown", args.markdown),
        ("--html", args.html),
        ("--gradebook", args.gradebook),
    ]
    blocked = unwritable(requested)
    for what in blocked:
        print(f"error: cannot write {what}; nothing was graded", file=sys.stderr)
    if blocked:
        return ExitCode.USAGE
    course = _course(args)
    staff = load_staff(staff_folder(course.root, args.staff), course)
    timestamp = parse_timestamp(args.timestamp) if args.timestamp else None
    result = grade_submission(
        Path(args.submission),
        student=args.student,
        assignments=args.assignment,
        timestamp=timestamp,
        sandbox=not args.no_sandbox,
        course=course,
        allow_incomplete_isolation=args.allow_incomplete_isolation,
        staff=staff,
    )
    outputs = report_outputs(
        result,
        course,
        json=args.json,
        markdown_path=args.markdown,
        html_path=args.html,
        metrics=lambda: metrics_or_none(Path(args.submission) / "metrics.json"),
        reference=lambda: reference_record(course),
    )

    def write_gradebook() -> None:
        from grader.gradebook import record  # lazy: nbgrader; not in the student repository

        record(Path(args.gradebook), result, course)

    failed = write_each([*outputs, ("--gradebook", args.gradebook, write_gradebook)])
    print(grade_summary(result))
    for w in result.warnings:
        print(f"warning: {w}")
    for what in failed:
        print(f"error: could not write {what}", file=sys.stderr)
    return ExitCode.USAGE if failed else ExitCode.OK


def cmd_grade_all(args: argparse.Namespace) -> int:
    from grader.batch import run_class  # lazy: instructor-only, not in the student repo

    return run_class(
        Path(args.dir),
        Path(args.out),
        jobs=args.jobs,
        shard=args.shard,
        root=_root(args),
        allow_incomplete_isolation=args.allow_incomplete_isolation,
        force=args.force,
        drop_times=args.drop_times,
        staff=Path(args.staff) if args.staff else None,
    )


def cmd_override(args: argparse.Namespace) -> int:
    """Record (or undo) an instructor's decision on a student's points, in the staff's data."""
    from grader.grading.overrides import record_override  # lazy: as in _root

    course = _course(args)
    path, decision = record_override(
        course,
        args.student,
        args.assignment,
        test=args.test,
        value=args.points,
        reason=args.reason,
        remove=args.remove,
        folder=Path(args.staff) if args.staff else None,
        by=args.by,
    )
    what = f"{decision.assignment} test {decision.test}" if decision.test else decision.assignment
    done = "removed the override of" if decision.remove else f"{args.points:g} points for"
    print(f"{done} {decision.student}'s {what} ({decision.by}, {decision.at}); in {path}")
    print(
        "It applies to every grading from now on: `grader grade`, each pull request's grading, "
        "and `grader grade-all` (run it again: nothing is regraded, the kept results take it)."
    )
    return ExitCode.OK


def cmd_class_report(args: argparse.Namespace) -> int:
    # lazy: instructor-only, not in the student repo; the class report loads matplotlib
    from grader.batch import STATE, StateFile, discover
    from grader.reports.class_report import terminal_summary, write_class_report

    course = _course(args)
    graded = Path(args.graded)
    report, paths = write_class_report(
        graded,
        course,
        StateFile(graded / STATE).read() if graded.is_dir() else {},
        out=Path(args.report) if args.report else None,
        submissions=discover(Path(args.submissions)) if args.submissions else None,
        threshold=args.threshold,
    )
    print(terminal_summary(report), end="\n\n")
    for kind, path in paths.items():
        print(f"{kind:9} {path}")
    return ExitCode.OK


def cmd_release(args: argparse.Namespace) -> int:
    from grader.release import release  # lazy: instructor-only, not in the student repo

    report = release(_root(args), args.assignment or None, check=args.check)
    print(report.table())
    return ExitCode.OK if report.ok else ExitCode.FAILED


def cmd_verify(args: argparse.Namespace) -> int:
    from grader.release import verify  # lazy: instructor-only, not in the student repo

    report = verify(_root(args), args.assignment or None)
    print(report.table())
    return ExitCode.OK if report.ok else ExitCode.FAILED


def cmd_new_assignment(args: argparse.Namespace) -> int:
    from grader.release.scaffold import new_assignment  # lazy: instructor-only, as above

    made = new_assignment(_root(args), args.id, title=args.title, due=args.due)
    for rel in made.written:
        print(f"wrote {rel}")
    print(
        f"{made.assignment}: {made.points} points. Next: `grader release {made.assignment}` and "
        "`grader verify` (green as written), then make it yours: docs/ADDING_AN_ASSIGNMENT.md"
    )
    return ExitCode.OK


def cmd_sync_setup(args: argparse.Namespace) -> int:
    from grader.release.scaffold import sync_setup  # lazy: instructor-only, as above

    rewritten = sync_setup(_root(args), args.assignment or None)
    for rel in rewritten:
        print(f"rewrote the shared setup cells of {rel}")
    print("shared setup cells in step" + ("; now run `grader release`" if rewritten else ""))
    return ExitCode.OK


def cmd_export_student(args: argparse.Namespace) -> int:
    from grader.release import export_student  # lazy: instructor-only, not in the student repo

    dest = export_student(_root(args), Path(args.dest))
    print(f"student repository written to {dest}")
    return ExitCode.OK


def cmd_open_report(args: argparse.Namespace) -> int:
    """Decrypt the private report of a graded PR with your own key."""
    from grader.github.private import open_report  # lazy: pyrage loads only for this command

    files = open_report(Path(args.report), Path(args.identity).expanduser(), Path(args.out))
    for f in files:
        print(f)
    print(f"open {Path(args.out) / 'report.html'} in a browser for the full report")
    return ExitCode.OK


def cmd_merge_shards(args: argparse.Namespace) -> int:
    """Merge the output folders of a sharded class grading into one."""
    from grader.batch.merge import merge_shards  # lazy: instructor-only, not in the student repo

    merged = merge_shards([Path(s) for s in args.shards], Path(args.out), _course(args),
                          expect=Path(args.expect) if args.expect else None)  # fmt: skip
    print(f"merged {len(merged.students)} students from {len(args.shards)} shards into {args.out}")
    return ExitCode.OK


def cmd_demo(args: argparse.Namespace) -> int:
    from grader.demo import run_demo  # lazy: instructor-only, not in the student repo

    return run_demo(_root(args), Path(args.out), execute=not args.no_execute, jobs=args.jobs)


def _isolation_override(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-incomplete-isolation",
        action="store_true",
        help="grade even when a sandbox layer is missing (local experiments only): every "
        "output is marked not authoritative",
    )


def _staff_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--staff",
        help="the staff's data folder: extensions.toml, overrides.toml (default: ROOT/staff)",
    )


def build_parser() -> argparse.ArgumentParser:
    """Every `grader` subcommand with its flags and the function it runs.

    Long because it is a declarative table: one `add_argument` line per flag of each command."""
    p = argparse.ArgumentParser(prog="grader", description=__doc__.splitlines()[0])
    p.add_argument("--root", help="course repository (default: found from the cwd)")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("check", help="students: run the public tests on your exercises")
    c.add_argument("assignment", nargs="*")
    c.add_argument("--submission", help="folder holding <id>/<id>.py (default: exercises/)")
    c.add_argument(
        "-v", "--verbose", action="store_true", help="show whole feedback messages, not one line"
    )
    c.set_defaults(func=cmd_check)

    pr = sub.add_parser(
        "profile",
        help="how your kernels use memory: sectors per request, bank conflicts, bytes moved",
    )
    pr.add_argument("assignment", nargs="?", help="default: the first one with profiling shapes")
    pr.add_argument("kernel", nargs="*", help="only these kernels (default: every one profiled)")
    pr.add_argument("--submission", help="folder holding <id>/<id>.py (default: exercises/)")
    pr.set_defaults(func=cmd_profile)

    rn = sub.add_parser(
        "run",
        help="students: run your notebook top to bottom, headless (Jupyter's Run all)",
        description="Runs every code cell of the notebook grading would choose (the one you "
        "changed), self-checks and demos included, in order, in a fresh Python process in the "
        "notebook's folder; a cell that fails is named as `grader check` names it, and the rest "
        "still run. Exit 1 when a cell failed. No GPU needed (the notebook switches to the "
        "simulator).",
    )
    rn.add_argument("assignment")
    rn.add_argument("--submission", help="folder holding <id>/<id>.py (default: exercises/)")
    rn.add_argument(
        "--skip-demos", action="store_true", help="leave out the cells tagged demo (plots, timings)"
    )
    rn.set_defaults(func=cmd_run)

    g = sub.add_parser("grade", help="grade one submission in the sandbox")
    g.add_argument("submission", help="a directory laid out like a student's fork")
    g.add_argument("--assignment", action="append", help="grade only this assignment")
    g.add_argument(
        "--student",
        default=None,
        help="the student's id (keys the tests' random draws; default: the submission's digest)",
    )
    g.add_argument("--json"), g.add_argument("--markdown"), g.add_argument("--html")
    g.add_argument("--gradebook", help="nbgrader gradebook.db to record the grades in")
    g.add_argument("--timestamp", help="trusted submission time (ISO 8601) for the late policy")
    _staff_option(g)
    g.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run student code in this process (trusted code only)",
    )
    _isolation_override(g)
    g.set_defaults(func=cmd_grade)

    b = sub.add_parser(
        "grade-all",
        help="grade every submission of a class",
        description="DIR is a folder with one submission folder per student (named by the "
        "student id), or a CSV file of student_id,path[,submitted_at] rows: submitted_at is the "
        "trusted submission time (ISO 8601 with a zone, e.g. 2026-12-15T10:00:00Z) the late "
        "policy applies to; paths are relative to the CSV's folder. A listing without a time "
        "for a student keeps the time of their previous grading when their work is unchanged.",
    )
    b.add_argument(
        "dir", help="folder of submissions (one per student), or a CSV listing (see above)"
    )
    b.add_argument("-j", "--jobs", type=int, default=1)
    b.add_argument("--shard", help="i/N: grade only this shard (1-based) of the class")
    b.add_argument("--out", default="grading-output")
    _isolation_override(b)
    b.add_argument(
        "--force",
        action="store_true",
        help="regrade everyone (by default only what is stale is regraded: a student whose "
        "submission or time changed, and per assignment when its suites or solution, the "
        "grader or course.toml changed)",
    )
    b.add_argument(
        "--drop-times",
        action="store_true",
        help="grade changed work that the listing gives no submission time for without one "
        "(by default that is refused: it would drop the late penalty of an earlier grading)",
    )
    _staff_option(b)
    b.set_defaults(func=cmd_grade_all)

    ov = sub.add_parser(
        "override",
        help="set a student's points with a reason (kept through every regrade)",
        description="Record an instructor's decision in the staff's data (staff/overrides.toml, "
        "a log: who, when, why). --points alone sets the assignment's score; with --test NAME "
        "(a test of its suites, e.g. hidden/test_crossover_batch_random) that test's points. "
        "Applied after grading, on every regrade, in every output; --remove undoes it.",
    )
    ov.add_argument("student")
    ov.add_argument("assignment")
    ov.add_argument("--test", help="the test whose points to set (default: the whole score)")
    ov.add_argument("--points", type=float, help="points, in whole eighths (e.g. 3.5)")
    ov.add_argument("--reason", required=True, help="why: kept with the decision, shown to the "
                    "student in their report")  # fmt: skip
    ov.add_argument("--remove", action="store_true", help="undo the standing override")
    ov.add_argument("--by", help="who decides (default: git's user.email, else the login)")
    _staff_option(ov)
    ov.set_defaults(func=cmd_override)

    cr = sub.add_parser(
        "class-report", help="where the class struggles: scores, hardest tests, late, similarity"
    )
    cr.add_argument("graded", help="the --out folder of `grader grade-all`")
    cr.add_argument("--report", help="folder to write (default: GRADED/class-report)")
    cr.add_argument(
        "--submissions",
        help="the submissions folder or CSV graded (default: the paths grade-all recorded)",
    )
    cr.add_argument(
        "--threshold",
        type=float,
        help="list pairs sharing at least this fraction of their graded code "
        "(default: grader.reports.class_report.THRESHOLD)",
    )
    cr.set_defaults(func=cmd_class_report)

    r = sub.add_parser("release", help="build exercises/ from solutions/ with nbgrader")
    r.add_argument("assignment", nargs="*")
    r.add_argument("--check", action="store_true", help="fail if exercises/ is stale")
    r.set_defaults(func=cmd_release)

    v = sub.add_parser("verify", help="instructor's one-stop check of the whole course")
    v.add_argument(
        "assignment",
        nargs="*",
        help="verify only these assignments (the release and the export are checked whole)",
    )
    v.set_defaults(func=cmd_verify)

    n = sub.add_parser(
        "new-assignment",
        help="instructors: write a working new assignment to start from",
        description="Writes solutions/ID/ID.py (the shared setup cells, a pure function, a "
        "kernel and its host wrapper, their self-checks), tests/public/ID/ and tests/hidden/ID/ "
        "(stated rules, drawn tests) and ID's [[assignments]] entry in course.toml. `grader "
        "release ID && grader verify` pass on it as written; docs/ADDING_AN_ASSIGNMENT.md "
        "says how to make it yours.",
    )
    n.add_argument("id", help="the assignment id: a lowercase Python name, e.g. reduction")
    n.add_argument("--title", help="its title (default: the id in words)")
    n.add_argument(
        "--due", help="ISO 8601 with a zone (default: a week after the course's last due date)"
    )
    n.set_defaults(func=cmd_new_assignment)

    ss = sub.add_parser(
        "sync-setup",
        help="instructors: copy the shared setup cells into the solutions that have them",
    )
    ss.add_argument("assignment", nargs="*")
    ss.set_defaults(func=cmd_sync_setup)

    e = sub.add_parser("export-student", help="write the repository students fork")
    e.add_argument("dest")
    e.set_defaults(func=cmd_export_student)

    o = sub.add_parser("open-report", help="students: decrypt your PR's private grading report")
    o.add_argument("report", help="report.age from the grading-report artifact")
    o.add_argument("--identity", default="~/.ssh/id_ed25519", help="your private SSH key")
    o.add_argument("--out", default="grading-report", help="folder to write the report into")
    o.set_defaults(func=cmd_open_report)

    ms = sub.add_parser("merge-shards", help="merge the outputs of `grade-all --shard i/N` runs")
    ms.add_argument("shards", nargs="+", help="the --out folder of each shard")
    ms.add_argument("--out", required=True, help="the merged folder (new)")
    ms.add_argument("--expect", help="the class CSV or folder graded: every student exactly once")
    ms.set_defaults(func=cmd_merge_shards)

    d = sub.add_parser("demo", help="the main job: run the solutions and grade the sample class")
    d.add_argument("--out", default="demo-output")
    d.add_argument("-j", "--jobs", type=int, default=2)
    d.add_argument(
        "--no-execute", action="store_true", help="skip executing the solution notebooks headlessly"
    )
    d.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run one command; the one place an error becomes an exit code (`ExitCode`).

    A `GraderError` is the grader saying what is wrong: its message, once, and its branch's exit
    code (`ExitCode.USAGE` for input to change, `INFRASTRUCTURE` when the machine cannot grade).
    Anything else is a bug and keeps its traceback.
    """
    args = build_parser().parse_args(argv)
    heap.freeze_at_exit()
    try:
        return int(args.func(args))
    except GraderError as exc:
        said = "not graded, nothing recorded" if isinstance(exc, InfrastructureError) else "error"
        print(f"grader: {said}: {exc}", file=sys.stderr)
        return exc.exit_code
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("grader."):
            print(
                f"grader: `{args.command}` is an instructor command; it is not part of the "
                "student repository",
                file=sys.stderr,
            )
            return ExitCode.USAGE
        raise
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
