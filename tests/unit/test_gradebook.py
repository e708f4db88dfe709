import csv
import os
import shutil
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

import pytest
from factories import ROOT

from grader.core.points import after_penalty
from grader.core.results import AssignmentResult, Environment, GradeResult
from grader.core.results import TestResult as Case
from grader.gradebook import GradebookError, cell_names, export_csv, open_gradebook, record


def result(student, scores=(2.0, 1.0), late=0.0, timestamp="2026-12-15T10:00:00+01:00"):
    tests = [
        Case("test_ridge", scores[0], 2, "passed" if scores[0] == 2 else "failed"),
        Case("test_vector_add", scores[1], 3, "passed" if scores[1] == 3 else "failed"),
    ]
    raw = sum(scores)
    a = AssignmentResult("gpu_fundamentals", after_penalty(raw, late)[0], 5, late, raw, tests=tests)
    m = AssignmentResult("m9_roofline", 4.0, 4, tests=[Case("test_num_params", 4, 4, "passed")])
    return GradeResult(
        student, a.score + 4, 9, Environment("cpu", True), [a, m], timestamp=timestamp
    )


def test_record_maps_to_nbgrader_model(tmp_path, course):
    db = tmp_path / "gradebook.db"
    record(db, result("alice", late=0.2), course)
    with open_gradebook(db) as gb:
        assert [a.name for a in gb.assignments] == ["gpu_fundamentals", "m9_roofline"]
        a = gb.find_assignment("gpu_fundamentals")
        assert a.duedate.isoformat() == "2026-12-14T23:59:00"  # naive UTC, as nbgrader stores it
        assert a.max_score == 5
        cell = gb.find_grade_cell("test_vector_add", "gpu_fundamentals", "gpu_fundamentals")
        assert (cell.max_score, cell.cell_type) == (3, "code")
        sub = gb.find_submission("gpu_fundamentals", "alice")
        assert sub.timestamp.isoformat() == "2026-12-15T09:00:00"
        assert sub.score == pytest.approx(3.0)
        # points: 20% of 3 is 0.6, and the score 2.4 is kept on the grid of eighths (2.375)
        assert sub.late_submission_penalty == 0.625
        g = gb.find_grade("test_ridge", "gpu_fundamentals", "gpu_fundamentals", "alice")
        assert (g.auto_score, g.needs_manual_grade) == (2.0, False)
        # what formgrader lists
        subs = gb.submission_dicts("gpu_fundamentals")
        assert [(s["student"], s["score"]) for s in subs] == [("alice", 3.0)]
        assert (
            gb.notebook_submission_dicts("gpu_fundamentals", "gpu_fundamentals")[0]["score"] == 3.0
        )


def test_regrade_replaces_without_duplicates(tmp_path, course, db_rows):
    db = tmp_path / "gradebook.db"
    record(db, result("alice", (0.0, 0.0)), course)
    record(db, result("bob"), course)
    record(db, result("alice", (2.0, 3.0), timestamp="2026-12-14T12:00:00Z"), course)
    record(db, result("alice", (2.0, 3.0), timestamp="2026-12-14T12:00:00Z"), course)
    assert db_rows(db, "select count(*) from student") == [(2,)]
    assert db_rows(db, "select count(*) from submitted_assignment") == [(4,)]
    assert db_rows(db, "select count(*) from submitted_notebook") == [(4,)]
    assert db_rows(db, "select count(*) from grade") == [(6,)]  # 2 students x 3 tests
    assert db_rows(db, "select count(*) from grade_cells") == [(3,)]
    with open_gradebook(db) as gb:
        sub = gb.find_submission("gpu_fundamentals", "alice")
        assert sub.score == 5.0
        assert sub.timestamp.isoformat() == "2026-12-14T12:00:00"
        assert gb.find_submission("gpu_fundamentals", "bob").score == 3.0


def test_manual_score_survives_regrade_and_new_cells_are_flagged(tmp_path, course):
    db = tmp_path / "gradebook.db"
    record(db, result("alice"), course)
    with open_gradebook(db) as gb:  # an instructor's override in formgrader
        g = gb.find_grade("test_ridge", "gpu_fundamentals", "gpu_fundamentals", "alice")
        g.manual_score = 1.5
        gb.db.commit()
    r = result("bob")
    r.assignments[0].tests.append(Case("test_new", 1, 1, "passed"))
    record(db, r, course)
    record(db, result("alice", (0.0, 0.0)), course)
    with open_gradebook(db) as gb:
        g = gb.find_grade("test_ridge", "gpu_fundamentals", "gpu_fundamentals", "alice")
        assert (g.manual_score, g.auto_score, g.needs_manual_grade) == (1.5, 0.0, True)
        new = gb.find_grade("test_new", "gpu_fundamentals", "gpu_fundamentals", "alice")
        assert new.auto_score is None and new.needs_manual_grade
        assert gb.find_grade("test_new", "gpu_fundamentals", "gpu_fundamentals", "bob").score == 1


def test_cell_names_disambiguate_suites():
    tests = [
        Case("t", 1, 1, "passed", suite="public"),
        Case("t", 1, 1, "passed", suite="hidden"),
        Case("u", 1, 1, "passed"),
    ]
    assert cell_names(tests) == ["public/t", "hidden/t", "u"]


def test_export_csv_one_row_per_student_and_assignment(tmp_path, course):
    db = tmp_path / "gradebook.db"
    for s in ("carol", "alice", "bob"):
        record(db, result(s, late=0.5 if s == "bob" else 0.0), course)
    out = export_csv(db, tmp_path / "grades.csv")
    with out.open() as fh:
        data = list(csv.DictReader(fh))
    assert list(data[0]) == [
        "assignment",
        "duedate",
        "timestamp",
        "student_id",
        "last_name",
        "first_name",
        "email",
        "raw_score",
        "late_submission_penalty",
        "score",
        "max_score",
    ]
    keys = [(r["assignment"], r["student_id"]) for r in data]
    assert len(keys) == len(set(keys)) == 6
    bob = next(
        r for r in data if r["student_id"] == "bob" and r["assignment"] == "gpu_fundamentals"
    )
    assert (
        float(bob["raw_score"]),
        float(bob["late_submission_penalty"]),
        float(bob["score"]),
    ) == (
        3.0,
        1.5,
        1.5,
    )
    nbgrader = shutil.which("nbgrader") or str(Path(sys.executable).with_name("nbgrader"))
    if not Path(nbgrader).exists():
        pytest.skip("nbgrader command not installed")
    cli = tmp_path / "cli.csv"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    subprocess.run(
        [nbgrader, "export", "--db", f"sqlite:///{db}", "--to", str(cli)],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    with cli.open() as fh:  # nbgrader's own export reads the same grades (unrounded)
        theirs = list(csv.DictReader(fh))
    assert len(theirs) == len(data)
    for mine, other in zip(data, theirs, strict=True):
        assert list(mine) == list(other)
        for key, value in mine.items():
            if key in ("raw_score", "late_submission_penalty", "score", "max_score"):
                assert float(value) == pytest.approx(float(other[key]), abs=0.005)
            else:
                assert value == other[key]


def test_export_csv_sums_exactly_and_is_world_readable(tmp_path, course, umask):
    """Points are eighths, so nbgrader's SQL sums and its `raw - penalty` come out exact."""
    db = tmp_path / "gradebook.db"
    record(db, result("ann", scores=(0.125, 0.25), late=0.3), course)
    out = export_csv(db, tmp_path / "grades.csv")
    rows = {r["assignment"]: r for r in csv.DictReader(out.open())}
    g = rows["gpu_fundamentals"]
    assert (g["raw_score"], g["late_submission_penalty"], g["score"]) == ("0.375", "0.125", "0.25")
    assert float(g["raw_score"]) - float(g["late_submission_penalty"]) == float(g["score"])
    assert out.stat().st_mode & 0o777 == 0o644 & ~umask


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from grader.core.course import load_course
    from grader.gradebook import record
    from test_gradebook import result
    course = load_course(sys.argv[3])
    for i in range(20):
        record(Path(sys.argv[1]), result(f"{sys.argv[2]}{i:02d}", (float(i % 3), 1.0)), course)
    """
)


def test_parallel_writers_lose_nothing(tmp_path, db_rows):
    db = tmp_path / "gradebook.db"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    # this checkout's grader and this folder's test_gradebook, by the child's import path
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests" / "unit")])
    env = {**os.environ, "PYTHONPATH": path}
    procs = [
        subprocess.Popen([sys.executable, str(script), str(db), prefix, str(ROOT)], env=env)
        for prefix in ("p", "q")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert db_rows(db, "select count(*) from student") == [(40,)]
    assert db_rows(db, "select count(*) from submitted_assignment") == [(80,)]
    assert db_rows(db, "select count(*) from grade") == [(120,)]
    assert db_rows(db, "select count(distinct notebook_id || cell_id) from grade") == [(120,)]
    assert db_rows(db, "pragma integrity_check") == [("ok",)]


@contextmanager
def read_only(directory: Path):
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(0o755)
        return
    # root ignores permission bits; an immutable directory refuses new entries even to root
    if (
        shutil.which("chattr") is None
        or subprocess.run(["chattr", "+i", str(directory)], capture_output=True).returncode
    ):
        pytest.skip("running as root without chattr +i: cannot make a directory read-only")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(directory)], check=True)


def test_read_only_directory(tmp_path, course, db_rows):
    ro = tmp_path / "ro"
    ro.mkdir()
    db = ro / "gradebook.db"
    record(db, result("alice"), course)
    before = db_rows(db, "select count(*) from grade")
    with read_only(ro):
        with pytest.raises(GradebookError) as info:
            record(db, result("bob"), course)
        assert str(db) in str(info.value) and info.value.reason
        with pytest.raises(GradebookError):
            record(ro / "new.db", result("bob"), course)
        assert not (ro / "new.db").exists()
        # the existing gradebook is intact and readable
        assert db_rows(db, "pragma integrity_check") == [("ok",)]
        assert db_rows(db, "select count(*) from grade") == before
        with open_gradebook(db) as gb:
            assert [s.id for s in gb.students] == ["alice"]
    record(db, result("bob"), course)  # writable again: works
    assert db_rows(db, "select count(*) from student") == [(2,)]


def test_unknown_assignment_is_refused_before_writing(tmp_path, course):
    r = result("alice")
    r.assignments[0].id = "nope"
    with pytest.raises(ValueError, match="unknown assignment"):
        record(tmp_path / "gradebook.db", r, course)
    assert not (tmp_path / "gradebook.db").exists()
