"""Deterministic grading: every draw of a graded suite is the student's, not the run's.

A scratch course whose hidden suite draws with hypothesis and with the `rng` fixture, and whose
tests fail on purpose with the drawn values in their messages, so the feedback shows the draws.
The same submission graded in two processes (different PYTHONHASHSEED) must give byte-identical
result.json apart from times; another student, or a code change to the suite, draws anew; a
whitespace or comment edit does not.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from factories import ROOT, course_tree

from grader.core.results import validate
from grader.suites import seeds

ASSIGNMENT = "gpu_fundamentals"  # any id course.toml defines

NOTEBOOK = """\
# %%
def double(x):
    return 2 * x


def off_by_one_at_seven(x):
    return 2 * x + (x == 7)
"""

SUITE = """\
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

FAST = settings.get_profile("grader-hidden")


@pytest.mark.points(1)
@FAST
@given(x=st.integers(min_value=-1000, max_value=1000))
def test_draws_shown(student, x):
    assert False, f"drew {x}"


@pytest.mark.points(1)
@FAST
@given(x=st.integers(min_value=0, max_value=10**6))
@example(x=7)
def test_fixed_example_kills_the_mutant(student, x):
    assert student.off_by_one_at_seven(x) == 2 * x, f"wrong at {x}"


@pytest.mark.points(1)
def test_rng_draws_shown(student, rng):
    assert False, f"rng drew {rng.integers(0, 10**9, size=3).tolist()}"


@pytest.mark.points(1)
@FAST
@given(x=st.integers(min_value=0, max_value=100))
def test_passes(student, x):
    assert student.double(x) == 2 * x
"""


def make_course(root: Path, suite: str = SUITE) -> tuple[Path, Path]:
    """A course with the probe suite, and a fork-shaped submission beside it."""
    files = {
        f"tests/hidden/{ASSIGNMENT}/test_probe.py": suite,
        f"solutions/{ASSIGNMENT}/{ASSIGNMENT}.py": NOTEBOOK,
    }
    course_tree(root, files, copy=("course.toml", "tests/hidden/conftest.py"))
    sub = root.parent / f"{root.name}-submission"
    course_tree(sub, {f"exercises/{ASSIGNMENT}/{ASSIGNMENT}.py": NOTEBOOK}, copy=())
    return root, sub


def grade(
    root: Path, sub: Path, out: Path, hashseed: str, *extra: str, path: str = str(ROOT)
) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": hashseed, "PYTHONPATH": path}
    cmd = [sys.executable, "-m", "grader", "--root", str(root), "grade", str(sub)]
    cmd += ["--no-sandbox", "--assignment", ASSIGNMENT, "--json", str(out), *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.is_file(), proc.stderr[-2000:]
    return json.loads(out.read_text())


def without_times(data: dict) -> str:
    data = json.loads(json.dumps(data))
    data.pop("duration_s")
    for a in data["assignments"]:
        for t in a["tests"]:
            t.pop("duration_s")
    return json.dumps(data, sort_keys=True, indent=2)


def feedback(data: dict) -> dict[str, str]:
    return {t["name"]: t["feedback"] for t in data["assignments"][0]["tests"]}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seeds")
    root, sub = make_course(tmp / "course")
    first = grade(root, sub, tmp / "a.json", "0", "--student", "kim")
    second = grade(root, sub, tmp / "b.json", "12345", "--student", "kim")
    other = grade(root, sub, tmp / "c.json", "0", "--student", "ian")
    return root, sub, tmp, first, second, other


def test_same_student_same_bytes_in_two_processes(graded):
    _, _, tmp, first, second, _ = graded
    assert first["assignments"][0]["tests"], first
    assert without_times(first) == without_times(second)
    validate(first)
    seed = first["assignments"][0]["seed"]
    assert len(seed) == 32 and seed == second["assignments"][0]["seed"]


def test_the_feedback_shows_the_draws_and_the_falsifying_example(graded):
    fb = feedback(graded[3])
    drawn = fb["hidden/test_draws_shown"]
    assert "drew" in drawn and "Falsifying example" in drawn and "x=" in drawn
    assert "student=" not in drawn  # the fixtures are not the student's business
    assert "rng drew [" in fb["hidden/test_rng_draws_shown"]


def test_a_fixed_example_kills_a_mutant_on_every_seed(graded):
    for data in graded[3:]:
        t = {t["name"]: t for t in data["assignments"][0]["tests"]}
        assert t["hidden/test_fixed_example_kills_the_mutant"]["outcome"] == "failed"
        assert "wrong at 7" in t["hidden/test_fixed_example_kills_the_mutant"]["feedback"]
        assert t["hidden/test_passes"]["outcome"] == "passed"


def test_another_student_draws_anew(graded):
    first, other = graded[3], graded[5]
    assert first["assignments"][0]["seed"] != other["assignments"][0]["seed"]
    assert (
        feedback(first)["hidden/test_rng_draws_shown"]
        != feedback(other)["hidden/test_rng_draws_shown"]
    )


def test_no_identity_means_the_submission_digest(graded):
    root, sub, tmp, first, _, _ = graded
    anonymous = grade(root, sub, tmp / "d.json", "7")
    digest = anonymous["submission_digest"]
    suites = seeds.suite_digest(root, [root / "tests" / "hidden" / ASSIGNMENT])
    assert anonymous["assignments"][0]["seed"] == seeds.assignment_seed(ASSIGNMENT, digest, suites)
    assert anonymous["assignments"][0]["seed"] != first["assignments"][0]["seed"]


def test_whitespace_and_comments_cannot_reroll_but_code_does(tmp_path):
    root, _ = make_course(tmp_path / "c")
    dirs = [root / "tests" / "hidden" / ASSIGNMENT]
    before = seeds.suite_digest(root, dirs)
    probe = dirs[0] / "test_probe.py"
    probe.write_text("# a comment\n\n" + SUITE.replace("\n\n\n", "\n\n\n\n") + "\n# end\n")
    assert seeds.suite_digest(root, dirs) == before
    probe.write_text(SUITE.replace("max_value=1000)", "max_value=999)"))
    assert seeds.suite_digest(root, dirs) != before
    (root / "tests" / "hidden" / "conftest.py").write_text("X = 1\n")  # the shared settings
    assert seeds.suite_digest(root, dirs) not in (before,)


def test_seeds_depend_on_each_input():
    base = seeds.assignment_seed("a", "kim", "d")
    assert base == seeds.assignment_seed("a", "kim", "d")
    assert (
        len(
            {
                base,
                seeds.assignment_seed("b", "kim", "d"),
                seeds.assignment_seed("a", "ian", "d"),
                seeds.assignment_seed("a", "kim", "e"),
            }
        )
        == 4
    )
    assert seeds.test_seed(base, "t1") != seeds.test_seed(base, "t2")
    assert 0 <= seeds.test_seed(base, "t1") < 2**128


def test_graded_suites_draw_only_through_the_seeded_means():
    """Hypothesis and the `rng` fixture are seeded per student; an unseeded generator in a suite
    would re-roll every grading (and the stdlib's random module is not allowed there)."""
    bad = []
    for path in sorted((ROOT / "tests").glob("*/*/test_*.py")):
        if path.parts[-3] not in ("public", "hidden"):
            continue
        text = path.read_text(encoding="utf-8")
        for needle in ("default_rng()", "import random", "np.random.seed", "RandomState("):
            if needle in text:
                bad.append(f"{path.relative_to(ROOT)}: {needle}")
    assert not bad, "unseeded draws in graded suites (use the rng fixture): " + "; ".join(bad)


def test_hidden_profile_has_nothing_machine_dependent():
    from hypothesis import HealthCheck, settings

    runpy.run_path(str(ROOT / "tests" / "hidden" / "conftest.py"))  # registers the profile
    profile = settings.get_profile("grader-hidden")
    assert profile.database is None and profile.deadline is None
    assert set(profile.suppress_health_check) == set(HealthCheck)


DRAWS_SUITE = """\
import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

FAST = settings.get_profile("grader-hidden")
DRAWN = []


@pytest.mark.points(1)
@FAST
@given(x=st.integers(min_value=0, max_value=10**6), y=st.floats(0, 1e6))
def test_draws_recorded(student, x, y):
    DRAWN.append((x, y))


@pytest.mark.points(1)
def test_zz_draws_shown(student):
    assert False, "draws " + hashlib.sha256(repr(DRAWN).encode()).hexdigest()
"""

# numbers in the range of the suite's draws, in a module of no package (hypothesis counts it as
# the user's own code): had the process that grades loaded it, hypothesis would mix them into
# its draws
CONSTANTS = "TABLE = (98765, 555012, 4321.5, 77777, 250000.25)\n"


def _draws(data: dict) -> str:
    return feedback(data)["hidden/test_zz_draws_shown"]


def test_draws_do_not_depend_on_the_source_the_grading_process_loaded(tmp_path):
    """Hypothesis draws some examples from the constants in the source of the modules a process
    has loaded that it counts as the user's (an editable grader's, which differ between `grader
    grade`, a grade-all child and a student's own check); the suites pin them away, so one
    student's draws are the same wherever graded. The second grading's process loads such a
    module first (a `sitecustomize` on its path)."""
    root, sub = make_course(tmp_path / "course", DRAWS_SUITE)
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "constants_here.py").write_text(CONSTANTS)
    (extra / "sitecustomize.py").write_text("import constants_here  # noqa: F401\n")
    a = grade(root, sub, tmp_path / "a.json", "0", "--student", "kim")
    b = grade(root, sub, tmp_path / "b.json", "0", "--student", "kim", path=f"{ROOT}:{extra}")
    assert _draws(a).startswith("draws ") and _draws(a) == _draws(b)


HAZARD = """\
import sys
from hypothesis import given, seed, settings, strategies as st

def draws():
    seen = []

    @seed(1234)
    @settings(database=None, max_examples=200, deadline=None)
    @given(st.integers(0, 10**6), st.floats(0, 1e6))
    def t(x, y):
        seen.append((x, y))

    t()
    return seen

if sys.argv[1] == "pinned":
    from grader.suites.plugin import without_local_constants

    without_local_constants()
before = draws()
sys.path.insert(0, sys.argv[2])
import constants_here  # noqa: E402,F401 - a local module with numbers in the draws' range
print("same" if draws() == before else "different")
"""


@pytest.mark.parametrize("mode,expected", [("unpinned", "different"), ("pinned", "same")])
def test_hypothesis_mixes_local_constants_into_draws_unless_pinned(tmp_path, mode, expected):
    """The hazard the pin removes is real in the hypothesis the locks install (if a release drops
    it, "unpinned" fails here, and `without_local_constants` can go), and the pin removes it."""
    (tmp_path / "constants_here.py").write_text(CONSTANTS)
    script = tmp_path / "hazard.py"
    script.write_text(HAZARD)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(script), mode, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == expected
