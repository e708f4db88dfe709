"""The graded suites themselves: solutions score full marks, stubs score zero, points add up.

Runs both assignments' public and hidden suites in-process (kernels in the CUDA simulator) twice:
once against `solutions/`, once against a copy whose solution regions are stubs.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from factories import ROOT

from grader.core.course import load_course
from grader.sandbox.harness import load_module
from grader.suites.runner import run_assignment

ASSIGNMENTS = tuple(load_course(ROOT).assignment_ids)
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


def stub_source(text: str) -> str:
    """Replace every BEGIN/END SOLUTION region with `raise NotImplementedError` (same indent)."""
    out: list[str] = []
    inside = False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError("nested ### BEGIN SOLUTION")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}# YOUR CODE HERE\n{indent}raise NotImplementedError()\n")
        elif stripped == END:
            if not inside:
                raise ValueError("### END SOLUTION without BEGIN")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("unterminated ### BEGIN SOLUTION")
    return "".join(out)


def write_metrics(path: Path) -> Path:
    """metrics.json as the M9 notebook's last cell writes it, from the reference solution."""
    course = load_course(ROOT)
    m9 = load_module(ROOT / "solutions" / "m9_roofline" / "m9_roofline.py", "unit_reference_m9")
    gpu = course.gpu.as_gpu_dict()  # what the notebook's load_hardware() gives
    m9.save_metric(path, "m9_roofline", m9.m9_record(m9.COURSE_MODEL, gpu, m9.CONTEXT_LEN))
    return path


@pytest.fixture(scope="module")
def solution_results(tmp_path_factory):
    metrics = write_metrics(tmp_path_factory.mktemp("solution") / "metrics.json")
    return {a: run_assignment(ROOT, a, ROOT / "solutions", metrics=metrics) for a in ASSIGNMENTS}


@pytest.fixture(scope="module")
def stub_results(tmp_path_factory):
    stubs = tmp_path_factory.mktemp("stubs") / "solutions"
    for a in ASSIGNMENTS:
        src = ROOT / "solutions" / a / f"{a}.py"
        (stubs / a).mkdir(parents=True)
        (stubs / a / src.name).write_text(
            stub_source(src.read_text(encoding="utf-8")), encoding="utf-8"
        )
    # Stubs cannot produce metrics.json (m9_record raises), so none is given.
    missing = stubs.parent / "metrics.json"
    return {a: run_assignment(ROOT, a, stubs, metrics=missing) for a in ASSIGNMENTS}


def test_stub_source_keeps_indentation():
    text = "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n\ny = 1\n"
    assert stub_source(text) == (
        "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n\ny = 1\n"
    )
    with pytest.raises(ValueError):
        stub_source("    ### BEGIN SOLUTION\nx = 1\n")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solutions_score_full_marks(solution_results, assignment):
    result = solution_results[assignment]
    assert result.error is None, result.error
    graded = [t for t in result.tests if t.outcome != "skipped"]
    assert graded, "no graded test ran"
    lost = [f"{t.name}: {t.outcome}: {t.feedback}" for t in graded if t.outcome != "passed"]
    assert not lost, "the reference solution lost points:\n" + "\n".join(lost)
    skipped = [t for t in result.tests if t.outcome == "skipped"]
    assert all("GPU" in t.feedback for t in skipped), [(t.name, t.feedback) for t in skipped]
    gpu_points = sum(t.max_score for t in skipped)
    assert result.score == pytest.approx(result.max_score - gpu_points)
    assert {t.suite for t in result.tests} == {"public", "hidden"}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_stubs_score_zero(stub_results, assignment):
    result = stub_results[assignment]
    assert result.error is None, result.error
    assert result.tests, "no test ran against the stubs"
    passed = [t.name for t in result.tests if t.outcome == "passed"]
    assert not passed, f"tests that pass on the stubs (they test nothing): {passed}"
    assert result.score == 0


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_points_total_matches_course_toml(solution_results, assignment):
    want = load_course(ROOT).assignment(assignment).points
    assert solution_results[assignment].max_score == pytest.approx(want)
    assert sum(static_points(assignment).values()) == pytest.approx(want)


def test_gpu_points_are_a_small_part():
    points = static_points("gpu_fundamentals")
    gpu = sum(p for (_, name), p in points.items() if name in gpu_tests("gpu_fundamentals"))
    assert 4 <= gpu <= 0.15 * sum(points.values()), gpu


def suite_files(assignment: str) -> list[Path]:
    files = sorted((ROOT / "tests").glob(f"*/{assignment}/test_*.py"))
    assert files, f"no suite files for {assignment}"
    return files


def _marker(decorator: ast.expr, name: str) -> ast.Call | None:
    """`@pytest.mark.<name>(...)` as an ast.Call, else None."""
    if (
        isinstance(decorator, ast.Call)
        and isinstance(decorator.func, ast.Attribute)
        and decorator.func.attr == name
        and ast.unparse(decorator.func.value) == "pytest.mark"
    ):
        return decorator
    return None


def _tests(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]


def static_points(assignment: str) -> dict[tuple[str, str], float]:
    """(file, test name) -> points from each test's @pytest.mark.points(n)."""
    points = {}
    for path in suite_files(assignment):
        for fn in _tests(path):
            calls = [c for d in fn.decorator_list if (c := _marker(d, "points"))]
            if calls:
                points[(path.name, fn.name)] = float(ast.literal_eval(calls[0].args[0]))
    return points


def gpu_tests(assignment: str) -> set[str]:
    return {
        fn.name
        for path in suite_files(assignment)
        for fn in _tests(path)
        if any(
            isinstance(d, ast.Attribute) and ast.unparse(d) == "pytest.mark.gpu"
            for d in fn.decorator_list
        )
    }


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_test_has_points(assignment):
    for path in suite_files(assignment):
        for fn in _tests(path):
            calls = [c for d in fn.decorator_list if (c := _marker(d, "points"))]
            assert len(calls) == 1, f"{path.name}::{fn.name} needs exactly one points marker"
            value = ast.literal_eval(calls[0].args[0])
            assert isinstance(value, (int, float)) and value > 0, f"{fn.name}: points {value!r}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_public_suites_do_not_mention_the_reference(assignment):
    """Public suites ship to students: no `reference` fixture (it is the solution module)."""
    for path in (ROOT / "tests" / "public" / assignment).glob("test_*.py"):
        assert not re.search(r"\breference\b", path.read_text(encoding="utf-8")), path


def test_a_grading_leaves_the_machines_pytest_folders_alone(tmp_path, monkeypatch):
    """The suites' `tmp_path` lives in a folder of the grading's own: pytest's default would
    number a session folder under $TMPDIR/pytest-of-<user> and delete the older ones there as
    the session ends (other runs' folders: in CI, fresh-install venvs, 70-97 s of a grading)."""
    import getpass

    temproot = tmp_path / "temproot"
    monkeypatch.setenv("PYTEST_DEBUG_TEMPROOT", str(temproot))
    shared = temproot / f"pytest-of-{getpass.getuser()}"
    for n in range(5):  # five earlier sessions' folders, ended (no .lock): pytest keeps 3
        (shared / f"pytest-{n}").mkdir(parents=True)
        (shared / f"pytest-{n}" / "left.txt").write_text("an earlier run's")
    before = sorted(p.relative_to(temproot) for p in temproot.rglob("*"))
    result = run_assignment(ROOT, "m9_roofline", ROOT / "solutions", select="save_metric")
    # the selected tests ran and passed, and they write through tmp_path
    assert result.tests and all(t.outcome == "passed" for t in result.tests), result.tests
    assert "tmp_path" in (ROOT / "tests/hidden/m9_roofline/test_m9_hidden.py").read_text()
    assert sorted(p.relative_to(temproot) for p in temproot.rglob("*")) == before
