"""`grader`: a thin command line over functions you can call from Python.

Heavy libraries (numpy, numba, torch, nbgrader) are imported inside the commands, so
`grader --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.core.infra import INFRA_EXIT, InfrastructureError


def _root(args: argparse.Namespace) -> Path:
    from grader.core.course import find_root

    return find_root(Path(args.root) if args.root else None)


def _assignment_table(results) -> str:
    from grader.core.tables import format_table, points

    rows = []
    for r in results:
        counts = {
            o: sum(t.outcome == o for t in r.tests)
            for o in ("passed", "failed", "error", "timeout", "skipped")
        }
        rows.append(
            [
                r.id,
                points(r.score, r.max_score),
                counts["passed"],
                counts["failed"],
                counts["error"],
                counts["timeout"],
                counts["skipped"],
                r.error or "",
            ]
        )
    return format_table(
        ["assignment", "score", "passed", "failed", "error", "timeout", "skipped", "note"], rows
    )


FEEDBACK_CHARS = 100  # per test in `grader check`'s table; -v shows whole messages


def _feedback(text: str, verbose: bool) -> str:
    if verbose or not text:
        return text or ""
    first = text.splitlines()[0]
    cut = len(first) > FEEDBACK_CHARS or "\n" in text.strip()
    return first[: FEEDBACK_CHARS - 1] + "…" if cut else first


def cmd_check(args: argparse.Namespace) -> int:
    """Public suites against your own exercises, in this process, simulator when no GPU.

    The notebook of each assignment is chosen by the same rule as grading (grader.grading.intake.pair).
    """
    from grader.core.course import load_course
    from grader.grading.grade import _GradingBackend
    from grader.grading.intake import pair, release_for
    from grader.suites.student import InProcessBackend
    from grader.suites.runner import run_assignment
    from grader.core.tables import format_table, points

    root = _root(args)
    course = load_course(root)
    ids = args.assignment or course.assignment_ids
    for a in ids:
        course.assignment(a)
    submission = Path(args.submission).resolve() if args.submission else root / "exercises"
    release = release_for(submission, root / "exercises")
    chosen = {a: pair(submission, a, release) for a in ids}
    notebooks = {a: c.path for a, c in chosen.items() if c.path is not None}
    errors = {a: c.error or "no notebook" for a, c in chosen.items() if c.path is None}
    backend = _GradingBackend(InProcessBackend(notebooks), errors)
    results = []
    try:
        for a in ids:
            r = run_assignment(
                root, a, submission, root / "metrics.json", suites=("public",), backend=backend
            )
            if a in errors:
                r.error = errors[a]
            results.append(r)
    finally:
        backend.close()
    cut = False
    for r in results:
        c = chosen[r.id]
        checked = _shown_path(c.path, submission) if c.path is not None else "nothing"
        print(f"\n{r.id} (checked {checked})")
        rows = []
        for t in r.tests:
            fb = _feedback(t.feedback, args.verbose)
            cut |= fb != (t.feedback or "")
            rows.append([t.name, points(t.score, t.max_score), t.outcome, fb])
        print(format_table(["test", "points", "outcome", "feedback"], rows))
        for w in c.warnings:
            print(f"warning: {w}")
    print()
    print(_assignment_table(results))
    if cut:
        print("\n(feedback shortened to one line; `grader check -v` shows whole messages)")
    return 0 if all(r.score == r.max_score for r in results) else 1


def _shown_path(path: Path, submission: Path) -> str:
    try:
        return f"exercises/{path.resolve().relative_to(submission.resolve()).as_posix()}"
    except ValueError:
        return str(path)


def cmd_grade(args: argparse.Namespace) -> int:
    from grader.core.course import load_course
    from grader.grading.grade import grade_submission
    from grader.core.tables import points

    course = load_course(_root(args))
    timestamp = None
    if args.timestamp:
        from grader.core.late import parse_timestamp

        timestamp = parse_timestamp(args.timestamp)
    from grader.sandbox.isolation import IsolationRefused

    try:
        result = grade_submission(
            Path(args.submission),
            student=args.student,
            assignments=args.assignment,
            timestamp=timestamp,
            sandbox=not args.no_sandbox,
            course=course,
            allow_incomplete_isolation=args.allow_incomplete_isolation,
        )
    except IsolationRefused as exc:
        print(exc, file=sys.stderr)
        return 3
    failed = _write_outputs(result, course, args)
    print(_assignment_table(result.assignments))
    print(
        f"\ntotal {points(result.score, result.max_score)}  ({result.duration_s:.1f} s, "
        f"{result.environment.device}, isolation: "
        f"{', '.join(result.environment.isolation) or 'none'})"
    )
    for w in result.warnings:
        print(f"warning: {w}")
    for what in failed:
        print(f"error: could not write {what}", file=sys.stderr)
    return 2 if failed else 0


def _write_outputs(result, course, args: argparse.Namespace) -> list[str]:
    """Write each requested output; one that fails does not stop the others. Returns the failed."""

    def write_json() -> None:
        from grader.core.results import validate

        validate(result.to_dict())
        result.write(args.json)

    def write_html() -> None:
        from grader.batch import reference_m9_record
        from grader.core.jsonread import metrics_or_none

        metrics = metrics_or_none(Path(args.submission) / "metrics.json")
        reference = reference_m9_record(course)
        from grader.reports.html import html

        Path(args.html).write_text(html(result, course, metrics, reference), "utf-8")

    def write_gradebook() -> None:
        from grader.gradebook import record

        record(Path(args.gradebook), result, course)

    def write_markdown() -> None:
        from grader.reports.markdown import markdown

        Path(args.markdown).write_text(markdown(result, course), encoding="utf-8")

    failed = []
    for flag, target, write in (
        ("--json", args.json, write_json),
        ("--markdown", args.markdown, write_markdown),
        ("--html", args.html, write_html),
        ("--gradebook", args.gradebook, write_gradebook),
    ):
        if not target:
            continue
        try:
            write()
        except Exception as exc:  # named below and in the exit status, never silent
            failed.append(f"{flag} {target} ({type(exc).__name__}: {str(exc)[:300]})")
    return failed


def cmd_grade_all(args: argparse.Namespace) -> int:
    from grader.batch import run_class
    from grader.core import device
    from grader.core.preflight import gpu_preflight
    from grader.sandbox.isolation import IsolationRefused

    if device.has_gpu():
        gpu_preflight()  # once for the class, before any submission (InfrastructureError: exit 3)

    try:
        return run_class(
            Path(args.dir),
            Path(args.out),
            jobs=args.jobs,
            shard=args.shard,
            root=_root(args),
            allow_incomplete_isolation=args.allow_incomplete_isolation,
            force=args.force,
        )
    except IsolationRefused as exc:
        print(exc, file=sys.stderr)
        return 3


def cmd_class_report(args: argparse.Namespace) -> int:
    from grader.core.course import load_course
    from grader.reports.class_report import terminal_summary, write_class_report

    course = load_course(_root(args))
    submissions = None
    if args.submissions:
        from grader.batch import discover

        submissions = discover(Path(args.submissions))
    report, paths = write_class_report(
        Path(args.graded),
        course,
        Path(args.report) if args.report else None,
        submissions,
        args.threshold,
    )
    print(terminal_summary(report), end="\n\n")
    for kind, path in paths.items():
        print(f"{kind:9} {path}")
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from grader.release import release

    report = release(_root(args), args.assignment or None, check=args.check)
    print(report.table())
    return 0 if report.ok else 1


def cmd_verify(args: argparse.Namespace) -> int:
    from grader.release import verify

    report = verify(_root(args))
    print(report.table())
    return 0 if report.ok else 1


def cmd_export_student(args: argparse.Namespace) -> int:
    from grader.release import export_student

    dest = export_student(_root(args), Path(args.dest))
    print(f"student repository written to {dest}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from grader.demo import run_demo
    from grader.sandbox.isolation import IsolationRefused

    try:
        return run_demo(_root(args), Path(args.out), execute=not args.no_execute, jobs=args.jobs)
    except IsolationRefused as exc:
        print(exc, file=sys.stderr)
        return 3


def _isolation_override(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-incomplete-isolation",
        action="store_true",
        help="grade even when a sandbox layer is missing (local experiments only): every "
        "output is marked not authoritative",
    )


def build_parser() -> argparse.ArgumentParser:
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

    g = sub.add_parser("grade", help="grade one submission in the sandbox")
    g.add_argument("submission", help="a directory laid out like a student's fork")
    g.add_argument("--assignment", action="append", help="grade only this assignment")
    g.add_argument("--student", default="student")
    g.add_argument("--json"), g.add_argument("--markdown"), g.add_argument("--html")
    g.add_argument("--gradebook", help="nbgrader gradebook.db to record the grades in")
    g.add_argument("--timestamp", help="trusted submission time (ISO 8601) for the late policy")
    g.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run student code in this process (trusted code only)",
    )
    _isolation_override(g)
    g.set_defaults(func=cmd_grade)

    b = sub.add_parser("grade-all", help="grade every submission of a class")
    b.add_argument("dir", help="folder of submissions (one per student) or a CSV of id,path")
    b.add_argument("-j", "--jobs", type=int, default=1)
    b.add_argument("--shard", help="i/N: grade only this shard (1-based) of the class")
    b.add_argument("--out", default="grading-output")
    _isolation_override(b)
    b.add_argument(
        "--force",
        action="store_true",
        help="regrade everyone (by default a student is regraded only when their submission, "
        "the suites, the grader, course.toml or the solutions changed)",
    )
    b.set_defaults(func=cmd_grade_all)

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
    v.set_defaults(func=cmd_verify)

    e = sub.add_parser("export-student", help="write the repository students fork")
    e.add_argument("dest")
    e.set_defaults(func=cmd_export_student)

    d = sub.add_parser("demo", help="the main job: run the solutions and grade the sample class")
    d.add_argument("--out", default="demo-output")
    d.add_argument("-j", "--jobs", type=int, default=2)
    d.add_argument(
        "--no-execute", action="store_true", help="skip executing the solution notebooks headlessly"
    )
    d.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("grader."):
            print(
                f"grader: `{args.command}` is an instructor command; it is not part of the "
                "student repository",
                file=sys.stderr,
            )
            return 2
        raise
    except InfrastructureError as exc:
        print(f"grader: not graded, nothing recorded: {exc}", file=sys.stderr)
        return INFRA_EXIT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError) as exc:
        print(f"grader: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
