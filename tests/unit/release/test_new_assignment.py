"""`grader new-assignment`: the scaffold, its course.toml entry, the shared setup cells, and a
throwaway assignment from the scaffold taken through every command an instructor runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import jupytext
import pytest
from factories import ROOT, course_tree

from grader.core.course import load_course
from grader.release import release
from grader.release.scaffold import (
    SCAFFOLD_TPB,
    ScaffoldError,
    _with_entry,
    new_assignment,
    sync_setup,
    template_points,
)
from grader.release.shared_cells import SETUP_CELLS, shared_cells, stale

# What a course repository holds that the commands read (solutions and suites of the real
# assignments included: the new one joins them).
COURSE = (
    "course.toml",
    "pyproject.toml",
    "STUDENT_README.md",
    "grader",
    "solutions",
    "exercises",
    "tests/public",
    "tests/hidden",
)
NEW = "throwaway"


def _course(tmp_path: Path) -> Path:
    return course_tree(tmp_path / "course", copy=[p for p in COURSE if (ROOT / p).exists()])


def _manifest(tmp_path: Path) -> Path:
    return course_tree(tmp_path / "course")  # course.toml alone


def test_the_entry_goes_after_the_last_assignment_and_the_manifest_still_loads(tmp_path):
    root = _manifest(tmp_path)
    before = load_course(root)
    made = new_assignment(root, NEW, title='A "quoted" title', due="2027-01-10T12:00:00+00:00")
    course = load_course(root)
    assert course.assignment_ids == [*before.assignment_ids, NEW]
    a = course.assignment(NEW)
    assert (a.title, a.notebook, a.points) == ('A "quoted" title', f"{NEW}.ipynb", made.points)
    assert a.due.isoformat() == "2027-01-10T12:00:00+00:00"
    assert course.metrics == before.metrics and course.limits == before.limits
    assert made.points == template_points() > 0
    assert sorted(made.written) == sorted(
        [
            "course.toml",
            f"solutions/{NEW}/{NEW}.py",
            f"tests/public/{NEW}/test_{NEW}_public.py",
            f"tests/public/{NEW}/profiles.py",
            f"tests/hidden/{NEW}/test_{NEW}_hidden.py",
        ]
    )
    # the default due date: a week after the course's last one
    again = new_assignment(root, "another")
    assert load_course(root).assignment("another").due == a.due.replace(day=17)
    assert again.assignment == "another"


def test_an_entry_lands_before_the_tables_that_follow_the_assignments():
    manifest = (ROOT / "course.toml").read_text()
    text = _with_entry(manifest, '[[assignments]]\nid = "x"\n')
    data = tomllib.loads(text)
    assert [a["id"] for a in data["assignments"]][-1] == "x"
    assert data.get("limits") == tomllib.loads(manifest)["limits"]
    assert text.index('id = "x"') < text.index("\n[limits]")


@pytest.mark.parametrize(
    "assignment_id,says",
    [
        ("Bad-Id", "lowercase Python name"),
        ("2fast", "lowercase Python name"),
        ("m9_roofline", "already has an assignment"),
    ],
)
def test_a_bad_or_taken_id_writes_nothing(tmp_path, assignment_id, says):
    root = _manifest(tmp_path)
    before = (root / "course.toml").read_bytes()
    with pytest.raises(ScaffoldError, match=says):
        new_assignment(root, assignment_id)
    assert (root / "course.toml").read_bytes() == before
    assert sorted(p.name for p in root.iterdir()) == ["course.toml"]


def test_an_existing_folder_or_a_bad_due_date_writes_nothing(tmp_path):
    root = _manifest(tmp_path)
    (root / "tests" / "hidden" / NEW).mkdir(parents=True)
    before = (root / "course.toml").read_bytes()
    with pytest.raises(ScaffoldError, match=f"tests/hidden/{NEW}/ already exist"):
        new_assignment(root, NEW)
    shutil.rmtree(root / "tests")
    with pytest.raises(ScaffoldError, match="time zone"):
        new_assignment(root, NEW, due="2027-01-10T12:00:00")
    assert (root / "course.toml").read_bytes() == before
    assert not (root / "solutions").exists()


def test_the_scaffold_holds_the_shared_setup_cells_and_no_placeholder(tmp_path):
    root = _manifest(tmp_path)
    new_assignment(root, NEW)
    text = (root / "solutions" / NEW / f"{NEW}.py").read_text()
    assert "__" + "ASSIGNMENT__" not in text and "__SHARED_SETUP_CELLS__" not in text
    nb = jupytext.reads(text, fmt="py:percent")
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    shared = list(shared_cells())
    assert [i for i in ids if i in shared] == shared and stale(nb) == []
    for suite in ("public", "hidden"):
        tests = (root / "tests" / suite / NEW / f"test_{NEW}_{suite}.py").read_text()
        assert "__" + "TITLE__" not in tests and "__" + "TPB__" not in tests
        assert f"TPB = {SCAFFOLD_TPB}  #" in tests and "@pytest.mark.points(" in tests
    assert f"\nTPB = {SCAFFOLD_TPB}  #" in text


def test_the_scaffold_shows_its_kernel_from_the_first_profile(tmp_path):
    """`grader profile` on the scaffold's solution, written and never edited: its profiling
    shapes are scaffolded too, so block_sum's memory profile shows; the scaffold teaches no
    occupancy(), and the profile says so in a sentence that fits."""
    from grader.grading.profile import NO_OCCUPANCY, profile
    from grader.reports.memory import profile_report

    root = _course(tmp_path)
    new_assignment(root, NEW)
    found = profile(root, NEW, submission=root / "solutions")
    assert found.notebook == f"solutions/{NEW}/{NEW}.py"
    [k] = found.kernels
    assert k.kernel == "block_sum" and k.profile is not None, k.error
    assert k.profile.where("shared") and k.profile.barriers > 0
    text = profile_report(found, 320.0, "T4")
    assert "did not answer" not in text
    assert text.count("the compile check for the course GPU") <= 1
    if k.resources is not None:  # this machine compiled it: the occupancy is what is missing
        assert NO_OCCUPANCY in text


def test_an_assignment_without_profiling_shapes_says_so(tmp_path):
    from grader.core.errors import UsageError
    from grader.grading.profile import profile

    root = _course(tmp_path)
    new_assignment(root, NEW)
    (root / "tests" / "public" / NEW / "profiles.py").unlink()
    with pytest.raises(UsageError, match=f"{NEW} has no profiling shapes.*ADDING_AN_ASSIGNMENT"):
        profile(root, NEW, submission=root / "solutions")


def test_a_stale_shared_cell_stops_the_release_until_sync_setup_copies_it_in(tmp_path):
    root = course_tree(tmp_path / "course", copy=("course.toml",))
    new_assignment(root, NEW)
    src = root / "solutions" / NEW / f"{NEW}.py"
    good = src.read_text()
    mine = good.replace("\nimport shutil\nimport time\n", "\nimport shutil  # mine\nimport time\n")
    src.write_text(mine)
    report = release(root, [NEW])
    assert not report.ok
    [finding] = [f for f in report.findings if "shared" in f]
    assert finding.startswith(f"solutions/{NEW}/{NEW}.py:") and "'setup'" in finding
    assert "grader sync-setup" in finding and "grade_id of its own" in finding
    assert sync_setup(root, [NEW]) == [f"solutions/{NEW}/{NEW}.py"]
    assert src.read_text() == good
    assert sync_setup(root, [NEW]) == []  # nothing left to copy


def test_the_real_notebooks_hold_the_shared_cells_as_written():
    """Every solution that has a shared setup cell holds its one text (release checks it too):
    the template is the one copy, and `duplicates` shows nothing else they share."""
    holders = []
    for a in load_course(ROOT).assignment_ids:
        nb = jupytext.read(ROOT / "solutions" / a / f"{a}.py")
        gids = {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells}
        if gids & set(shared_cells()):
            holders.append(a)
        assert stale(nb) == [], a
    assert holders, f"no solution holds the cells of {SETUP_CELLS.name}"


def _grader(root: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "GRADER"))}
    env["GRADER_DEVICE"] = "cpu"
    return subprocess.run(
        [sys.executable, "-m", "grader", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def _fork(dest: Path, notebook: Path) -> Path:
    """A student's fork holding the new assignment's notebook alone."""
    (dest / "exercises" / NEW).mkdir(parents=True)
    shutil.copyfile(notebook, dest / "exercises" / NEW / f"{NEW}.py")
    return dest


@pytest.mark.slow
def test_a_third_assignment_from_the_scaffold_goes_through_every_command(tmp_path):
    """A copy of the course gains an assignment from the scaffold, with grader/ untouched:
    release, verify (the sandbox pass and the export's leak proof included), check, grade,
    grade-all, the class report and the export all take it."""
    root = _course(tmp_path)
    ok = _grader(root, "new-assignment", NEW)
    assert ok.returncode == 0, ok.stderr
    assert f"wrote solutions/{NEW}/{NEW}.py" in ok.stdout
    for args in (("release", NEW), ("verify", NEW)):
        done = _grader(root, *args)
        assert done.returncode == 0, (args, done.stdout[-3000:], done.stderr[-2000:])
    assert "solution graded the same in the sandbox" in done.stdout
    assert "export leak-free" in done.stdout

    check = _grader(root, "check", NEW, "--submission", str(root / "solutions"))
    assert check.returncode == 0, check.stdout[-2000:]
    stubs = _grader(root, "check", NEW)  # the release's stubs fail every public test
    assert stubs.returncode == 1 and "still the stub" in stubs.stdout, stubs.stdout[-2000:]

    reference = _fork(tmp_path / "class" / "ada", root / "solutions" / NEW / f"{NEW}.py")
    _fork(tmp_path / "class" / "bob", root / "exercises" / NEW / f"{NEW}.py")
    result = tmp_path / "ada.json"
    graded = _grader(
        root, "grade", str(reference), "--assignment", NEW, "--json", str(result),
        "--allow-incomplete-isolation",
    )  # fmt: skip
    assert graded.returncode == 0, graded.stderr[-2000:]
    [mine] = json.loads(result.read_text())["assignments"]
    points = load_course(root).assignment(NEW).points
    assert (mine["id"], mine["score"], mine["max_score"]) == (NEW, points, points)

    out = tmp_path / "grades"
    batch = _grader(
        root, "grade-all", str(tmp_path / "class"), "--out", str(out), "-j", "1",
        "--allow-incomplete-isolation",
    )  # fmt: skip
    assert batch.returncode == 0, (batch.stdout[-2000:], batch.stderr[-2000:])
    scores = {
        s: {a["id"]: a["score"] for a in json.loads((out / s / "result.json").read_text())[
            "assignments"]}
        for s in ("ada", "bob")
    }  # fmt: skip
    assert scores["ada"][NEW] == points and scores["bob"][NEW] == 0
    report = _grader(root, "class-report", str(out))
    assert report.returncode == 0, report.stderr[-2000:]
    html = next((out / "class-report").glob("*.html")).read_text()
    assert NEW in html

    dest = tmp_path / "student"
    exported = _grader(root, "export-student", str(dest))
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert (dest / "exercises" / NEW / f"{NEW}.ipynb").is_file()
    assert (dest / "tests" / "public" / NEW / f"test_{NEW}_public.py").is_file()
    assert not (dest / "tests" / "hidden").exists() and not (dest / "solutions").exists()


@pytest.mark.slow
def test_a_reduction_of_256_thread_blocks_grades_in_the_sandbox_at_full_marks(tmp_path):
    """256-thread blocks with barriers, the scaffold's shape: the reference grades at full marks
    in the sandbox under the default limits (`processes = 64`: the simulator's threads are
    greenlets on one Python thread)."""
    from grader.grading import grade_submission
    from grader.release import scaffold

    assert scaffold.SCAFFOLD_TPB == 256
    root = course_tree(tmp_path / "course", copy=("course.toml", "tests/hidden/conftest.py"))
    new_assignment(root, NEW)
    fork = _fork(tmp_path / "fork", root / "solutions" / NEW / f"{NEW}.py")
    course = load_course(root)
    assert course.limits_for(NEW).processes == 64
    result = grade_submission(
        fork, assignments=[NEW], course=course, allow_incomplete_isolation=True
    )
    [graded] = result.assignments
    lost = [(t.name, t.feedback[:300]) for t in graded.tests if t.score < t.max_score]
    assert graded.score == graded.max_score and not lost, lost


def test_verify_notes_a_parametrized_test_whose_cases_weigh_differently():
    """1 point over 6 cases gives two cases double weight: verify says so, naming the test and
    the weights; an even split (the scaffold's 8 invalid cases for 1 point) says nothing."""
    from grader.core.points import split
    from grader.core.results import AssignmentResult, TestResult
    from grader.release.verify import uneven_splits

    def result(name: str, points: float, n: int) -> AssignmentResult:
        tests = [
            TestResult(f"hidden/{name}[{k}]", p, p, "passed", suite="hidden")
            for k, p in enumerate(split(points, n))
        ]
        return AssignmentResult(NEW, points, points, tests=tests)

    [note] = uneven_splits(NEW, result("test_crossover", 1, 6))
    assert note.startswith(f"{NEW}: hidden/test_crossover: 1 point over 6 cases")
    assert "the first 2 weigh 0.25, the other 4 0.125 each" in note
    assert uneven_splits(NEW, result("test_reduction_bytes_invalid", 1, 8)) == []
