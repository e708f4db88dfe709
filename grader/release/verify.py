"""`verify`: the instructor's one-stop proof that the course is ready to hand out.

`verify` runs every check below and reports one row per check and assignment (`VerifyReport`,
`ok` False on any finding); it writes nothing into the course (scratch copies live in a
temporary directory). What a green run proves:

- release in sync: `exercises/` is exactly what `release` writes from `solutions/`, leak-free;
- hidden rules stated: every hidden test quotes, word for word, the sentence of the released
  notebook that states its rule (`stated_rules`), so no test checks a rule a student cannot read;
- the solution notebook passes `nbgrader validate` (its cells run in the CUDA simulator without
  a GPU), and the released notebook fails it (`nbgrader validate --invert` passes);
- the solutions score full marks on the public and hidden suites (GPU-only tests skipped without
  a GPU are noted), every test carries points and they add up to `course.toml`'s;
- the stubs score zero on every graded test: no test is vacuous;
- grading grades them so too: the reference and the stubs graded again the way a submission is
  (`grader.grading.grade_submission`: the sandbox, each assignment's limits, every assignment
  of the course in one grading), with the same draws, score test for test what the in-process
  pass (the fast first pass above) scored. A test whose outcome or score differs is named, with
  the sandbox's feedback (a limit hit names its `[limits]` key: `grader.suites.limit_hits`).
  Where this machine cannot isolate a worker fully, the sandbox pass runs with what it has and
  says so in a note (the limits hold all the same);
- the export is leak-free: `export_student` into a scratch folder, its leak proof over the whole
  student repository (the grader package, README and workflows too), not only the release.
"""

from __future__ import annotations

import ast
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
from nbgrader.validator import Validator

from grader.core import device
from grader.core.course import Assignment, Course, load_course
from grader.core.errors import GraderError
from grader.core.kernels import ipc_kernel_config
from grader.core.notebook import NotebookError, read_notebook
from grader.core.points import fraction, uneven
from grader.core.results import AssignmentResult, TestResult
from grader.core.tables import format_table
from grader.grading.grade import grade_submission
from grader.release.export import ExportError, export_student
from grader.release.swap import release
from grader.release.tree import copy_path, rel_name, tree_files
from grader.release.validate import data_files
from grader.suites.runner import run_assignment

RULES_HEADING = "Stated rules"
# Whose draws both passes make (`grader.suites.seeds`): one identity, so that the in-process and
# the sandboxed grading of the same notebook draw the same inputs and can be compared test by test.
VERIFY_IDENTITY = "grader-verify"
_RULE = re.compile(r'^- (test_\w+): "(.*?)"[ \t]*$', re.MULTILINE | re.DOTALL)


@dataclass
class VerifyRow:
    check: str
    assignment: str
    ok: bool
    detail: str


@dataclass
class VerifyReport:
    rows: list[VerifyRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, check: str, assignment: str, problems: Sequence[str], ok_detail: str) -> None:
        if problems:
            for p in problems:
                self.rows.append(VerifyRow(check, assignment, False, p))
        else:
            self.rows.append(VerifyRow(check, assignment, True, ok_detail))

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    @property
    def findings(self) -> list[str]:
        return [f"{r.check} [{r.assignment}]: {r.detail}" for r in self.rows if not r.ok]

    def table(self) -> str:
        rows = [(r.check, r.assignment, "ok" if r.ok else "FAIL", r.detail) for r in self.rows]
        out = [format_table(("check", "assignment", "result", "detail"), rows)]
        out += [f"note: {n}" for n in self.notes]
        bad = len(self.findings)
        out.append(f"verify: {'OK' if self.ok else f'{bad} finding(s)'} in {self.seconds:.1f} s")
        return "\n".join(out)


def _solution_ipynbs(root: Path, ids: Sequence[str], work: Path) -> dict[str, Path]:
    """Convert each solution source to an .ipynb inside a scratch course tree `work`."""
    shutil.copyfile(root / "course.toml", work / "course.toml")
    out = {}
    for a in ids:
        src = root / "solutions" / a / f"{a}.py"
        folder = work / "solutions" / a
        folder.mkdir(parents=True)
        for data in data_files(root, a):
            copy_path(data, folder / data.relative_to(src.parent))
        nb = jupytext.read(src)
        path = folder / f"{a}.ipynb"
        path.write_text(jupytext.writes(nb, fmt="ipynb"), encoding="utf-8")
        out[a] = path
    return out


def _validate(path: Path, invert: bool, timeout: int) -> dict:
    with ipc_kernel_config() as cfg:  # no TCP kernel, no "without encryption" warning
        cfg.Execute.timeout = timeout
        return Validator(invert=invert, config=cfg).validate(str(path))


def _first(text: str, n: int = 100) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= n else line[: n - 3] + "..."


def _words(text: str) -> str:
    return " ".join(text.split())


def stated_rules(root: Path, assignment_id: str) -> tuple[list[str], int]:
    """Every hidden test of an assignment quotes the student-facing sentence that states its rule.

    The table lives in each hidden test module's docstring, under a line starting with
    `RULES_HEADING`, one entry per test: ``- test_name: "a sentence of the notebook"`` (wrapped
    freely). Each quote must appear word for word (whitespace aside) in the released notebook,
    markdown or code, so a hidden test can never check a rule a student could not have read.
    Returns (problems, number of hidden tests checked).
    """
    notebook = root / "exercises" / assignment_id / f"{assignment_id}.ipynb"
    try:
        text = _words("\n".join(c.source for c in read_notebook(notebook).cells))
    except NotebookError as exc:
        return [f"cannot read the released notebook: {exc}"], 0
    problems: list[str] = []
    count = 0
    for path in sorted((root / "tests" / "hidden" / assignment_id).glob("test_*.py")):
        where = rel_name(root, path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        tests = [
            n.name
            for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test_")
        ]
        count += len(tests)
        doc = ast.get_docstring(tree) or ""
        table = doc.split(RULES_HEADING, 1)[1] if RULES_HEADING in doc else ""
        quotes = {name: _words(quote) for name, quote in _RULE.findall(table)}
        for name in tests:
            if name not in quotes:
                problems.append(
                    f"{where}::{name} is not listed under '{RULES_HEADING}' in the module "
                    'docstring (add: - NAME: "the notebook sentence that states its rule")'
                )
            elif not quotes[name] or quotes[name] not in text:
                problems.append(
                    f"{where}::{name}: its quoted rule is not in {rel_name(root, notebook)}: "
                    f"{_first(quotes[name], 120)!r}"
                )
        problems += [
            f"{where}: '{RULES_HEADING}' lists {name}, which is not a test in the module"
            for name in sorted(set(quotes) - set(tests))
        ]
    return problems, count


def _nbgrader_findings(res: dict, bad: str) -> list[str]:
    """What nbgrader validate reported against the notebook: the `bad` cells, then edited ones."""
    if bad == "failed":
        probs = [
            f"cell fails on the solution: {_first(c['source'])} -> {_first(c.get('raw_error', ''))}"
            for c in res.get("failed", [])
        ]
    else:
        probs = [
            f"graded cell passes on the stub: {_first(c['source'])}" for c in res.get("passed", [])
        ]
    return probs + [
        f"{k}: {_first(c['source'])}" for k in ("changed", "type_changed") for c in res.get(k, [])
    ]


def _check_notebooks(
    report: VerifyReport, root: Path, work: Path, a: Assignment, sol_nb: Path, timeout: int
) -> None:
    # the solution notebook passes nbgrader validate (and, as a student would, writes
    # metrics.json into the scratch course root, which grades the solution afterwards)
    try:
        probs = _nbgrader_findings(_validate(sol_nb, invert=False, timeout=timeout), "failed")
    except Exception as exc:  # noqa: BLE001 - reported as a finding
        probs = [f"nbgrader validate could not run: {type(exc).__name__}: {exc}"]
    report.add("solution passes nbgrader validate", a.id, probs, "all graded cells pass")
    # the released notebook fails it (nbgrader validate --invert passes)
    released = root / "exercises" / a.id / f"{a.id}.ipynb"
    if released.is_file():
        stub_dir = work / "stub" / "exercises" / a.id
        stub_dir.mkdir(parents=True)
        shutil.copyfile(root / "course.toml", work / "stub" / "course.toml")
        for name, p in tree_files(released.parent).items():
            copy_path(p, stub_dir / name)
        try:
            res = _validate(stub_dir / released.name, invert=True, timeout=timeout)
            probs = _nbgrader_findings(res, "passed")
        except Exception as exc:  # noqa: BLE001
            probs = [f"nbgrader validate --invert could not run: {type(exc).__name__}: {exc}"]
    else:
        probs = [f"exercises/{a.id}/{a.id}.ipynb missing; run grader release"]
    report.add("stub fails nbgrader validate", a.id, probs, "validate --invert passes")


def _check_scores(
    report: VerifyReport, course: Course, work: Path, a: Assignment, empty_metrics: Path
) -> tuple[AssignmentResult, AssignmentResult]:
    """The in-process pass: (the solution's result, the stub's), each checked."""
    root = course.root
    # the solutions score full marks; every test carries points; totals match
    metrics = work / "sol" / "metrics.json"
    sol = run_assignment(
        root,
        a.id,
        root / "solutions",
        metrics if metrics.is_file() else empty_metrics,
        suites=("public", "hidden"),
        course=course,
        identity=VERIFY_IDENTITY,
    )
    probs = [f"suites could not run: {_first(sol.error, 300)}"] if sol.error else []
    skipped = [t.name for t in sol.tests if t.outcome == "skipped"]
    for t in sol.tests:
        if t.outcome != "skipped" and t.score < t.max_score - 1e-9:
            probs.append(
                f"{t.name}: {t.outcome} ({fraction(t.score, t.max_score)}) {_first(t.feedback)}"
            )
    report.add(
        "solution scores full marks",
        a.id,
        probs,
        fraction(sol.score, sol.max_score)
        + (f" ({len(skipped)} GPU test(s) skipped)" if skipped else ""),
    )
    if skipped:
        report.notes.append(f"{a.id}: skipped without a GPU: {', '.join(skipped)}")
    _check_points(report, a, sol)
    # the stubs score zero on every graded test
    stub = run_assignment(
        root,
        a.id,
        root / "exercises",
        empty_metrics,
        suites=("public", "hidden"),
        course=course,
        identity=VERIFY_IDENTITY,
    )
    probs = [f"suites could not run on the stubs: {_first(stub.error, 300)}"] if stub.error else []
    probs += [
        f"vacuous test {t.name}: scores {fraction(t.score, t.max_score)} on the stub"
        for t in stub.tests
        if t.score > 0
    ]
    stubs = f"{fraction(0, stub.max_score)} on {len(stub.tests)} test(s)"
    report.add("stubs score zero", a.id, probs, stubs)
    return sol, stub


def _check_points(report: VerifyReport, a: Assignment, sol: AssignmentResult) -> None:
    """Every test carries points and they add up to course.toml's; a note per uneven split."""
    probs = [f"{t.name} carries no points" for t in sol.tests if t.max_score <= 0]
    total = sum(t.max_score for t in sol.tests)
    if abs(total - a.points) > 1e-6:
        by = {s: sum(t.max_score for t in sol.tests if t.suite == s) for s in ("public", "hidden")}
        probs.append(
            f"tests total {total:g} points (public {by['public']:g} + hidden "
            f"{by['hidden']:g}); course.toml says {a.points:g}"
        )
    report.add("points match course.toml", a.id, probs, f"{total:g} = {a.points:g} points")
    report.notes += uneven_splits(a.id, sol)


def uneven_splits(assignment: str, result: AssignmentResult) -> list[str]:
    """A note per parametrized test whose cases do not weigh the same (`points.uneven`)."""
    cases: dict[str, list[float]] = {}
    for t in result.tests:
        cases.setdefault(t.name.split("[", 1)[0], []).append(t.max_score)
    return [f"{assignment}: {w}" for n, s in cases.items() if (w := uneven(n, s))]


def _forks(root: Path, ids: Sequence[str], work: Path) -> dict[str, Path]:
    """Two submissions laid out as a student's fork: the reference (each solution source as
    the notebook, with its data files, and the metrics.json its run wrote) and the release."""
    reference, stubs = work / "fork-reference", work / "fork-stubs"
    for a in ids:
        src = root / "solutions" / a / f"{a}.py"
        folder = reference / "exercises" / a
        folder.mkdir(parents=True)
        shutil.copyfile(src, folder / src.name)
        for data in data_files(root, a):
            copy_path(data, folder / data.relative_to(src.parent))
    metrics = work / "sol" / "metrics.json"
    (reference / "metrics.json").write_text(
        metrics.read_text(encoding="utf-8") if metrics.is_file() else "{}\n", encoding="utf-8"
    )
    copy_path(root / "exercises", stubs / "exercises")
    (stubs / "metrics.json").write_text("{}\n", encoding="utf-8")
    return {"solution": reference, "stub": stubs}


def _differences(inproc: AssignmentResult, sandboxed: AssignmentResult) -> list[str]:
    """Each test whose outcome or score differs between the two passes, named."""

    def said(t: TestResult | None) -> str:
        return "absent" if t is None else f"{t.outcome} ({fraction(t.score, t.max_score)})"

    before = {t.name: t for t in inproc.tests}
    after = {t.name: t for t in sandboxed.tests}
    probs = []
    if sandboxed.error and not inproc.error:
        probs.append(f"the sandbox could not grade it: {_first(sandboxed.error, 300)}")
    for name in sorted(set(before) | set(after), key=lambda n: (n not in before, n)):
        t0, t1 = before.get(name), after.get(name)
        if t0 and t1 and t0.outcome == t1.outcome and abs(t0.score - t1.score) < 1e-9:
            continue
        why = f": {_first(t1.feedback, 300)}" if t1 and t1.feedback else ""
        probs.append(f"{name}: {said(t0)} in process, {said(t1)} in the sandbox{why}")
    return probs


def _check_sandbox(
    report: VerifyReport,
    course: Course,
    work: Path,
    inproc: dict[str, dict[str, AssignmentResult]],
) -> None:
    """The reference and the stubs graded as grading does; each compared with the fast pass."""
    ids = list(inproc)
    for kind, fork in _forks(course.root, ids, work).items():
        try:
            graded = grade_submission(
                fork,
                student=VERIFY_IDENTITY,
                assignments=ids,
                course=course,
                allow_incomplete_isolation=True,
            )
        except GraderError as exc:
            for a in ids:
                report.add(f"{kind} graded the same in the sandbox", a, [str(exc)], "")
            continue
        if graded.environment.not_authoritative and kind == "solution":
            report.notes.append(
                "the sandbox pass ran without full isolation on this machine (the limits held): "
                + graded.environment.not_authoritative
            )
        by_id = {r.id: r for r in graded.assignments}
        for a in ids:
            before = inproc[a][kind]
            probs = _differences(before, by_id[a]) if a in by_id else ["not graded"]
            score = fraction(by_id[a].score, by_id[a].max_score) if a in by_id else ""
            report.add(
                f"{kind} graded the same in the sandbox",
                a,
                probs,
                f"{score} on {len(before.tests)} test(s), as in process",
            )


def _check_export(report: VerifyReport, root: Path, work: Path) -> None:
    """The student repository, exported into a scratch folder: what its leak proof finds."""
    try:
        export_student(root, work / "export" / "student")
        probs: list[str] = []
    except ExportError as exc:
        probs = exc.findings
    report.add("export leak-free", "all", probs, "the student repository exports, leak-free")


def verify(root: Path, assignment_ids: Sequence[str] | None = None) -> VerifyReport:
    """Every check of the module docstring over the course at `root` (its assignments
    `assignment_ids`, default all; the release and export checks always cover the whole
    course); `ok` False on a finding."""
    t0 = time.perf_counter()
    root = Path(root).resolve()
    course = load_course(root)
    ids = list(assignment_ids) if assignment_ids else course.assignment_ids
    chosen = [course.assignment(a) for a in ids]
    report = VerifyReport()
    rel = release(root, check=True)
    report.add("release in sync", "all", rel.findings, "exercises/ matches solutions/")
    for a in chosen:
        problems, checked = stated_rules(root, a.id)
        report.add(
            "hidden rules stated",
            a.id,
            problems,
            f"{checked} hidden tests, each quoting the notebook sentence that states its rule",
        )
    device.prepare_numba()  # kernels executed by nbgrader validate run in the simulator on CPU
    timeout = int(max(120, course.limits.kernel_timeout_s))
    with tempfile.TemporaryDirectory(prefix="grader-verify-") as tmp:
        work = Path(tmp)
        (work / "sol").mkdir()
        sol_nbs = _solution_ipynbs(root, ids, work / "sol")
        empty_metrics = work / "empty-metrics.json"
        empty_metrics.write_text("{}\n", encoding="utf-8")
        inproc: dict[str, dict[str, AssignmentResult]] = {}
        for a in chosen:
            _check_notebooks(report, root, work, a, sol_nbs[a.id], timeout)
            sol, stub = _check_scores(report, course, work, a, empty_metrics)
            inproc[a.id] = {"solution": sol, "stub": stub}
        _check_sandbox(report, course, work, inproc)
        _check_export(report, root, work)
    report.seconds = time.perf_counter() - t0
    return report
