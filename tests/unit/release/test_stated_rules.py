"""`grader verify`'s rule check: every hidden test quotes the notebook sentence stating its rule."""

from __future__ import annotations

from pathlib import Path

from factories import ROOT, course_tree

from grader.core.course import load_course
from grader.release import stated_rules

ASSIGNMENT = "m9_roofline"


def _course(tmp_path: Path) -> Path:
    """A copy of the released notebook and hidden suite of one assignment."""
    return course_tree(tmp_path, copy=(f"exercises/{ASSIGNMENT}", f"tests/hidden/{ASSIGNMENT}"))


def test_the_real_suites_state_every_rule():
    for assignment in load_course(ROOT).assignment_ids:
        problems, checked = stated_rules(ROOT, assignment)
        assert problems == [], problems
        assert checked > 0, f"{assignment}: no hidden test"


def test_an_unlisted_test_is_a_finding(tmp_path):
    root = _course(tmp_path)
    suite = root / "tests" / "hidden" / ASSIGNMENT / "test_serving_hidden.py"
    suite.write_text(suite.read_text() + "\n\ndef test_secret_rule(student):\n    pass\n")
    problems, _ = stated_rules(root, ASSIGNMENT)
    assert len(problems) == 1 and "test_secret_rule is not listed" in problems[0], problems


def test_a_quote_the_notebook_lacks_is_a_finding(tmp_path):
    root = _course(tmp_path)
    suite = root / "tests" / "hidden" / ASSIGNMENT / "test_serving_hidden.py"
    text = suite.read_text()
    assert "(`check_gpu` does both)." in text
    suite.write_text(text.replace("(`check_gpu` does both).", "(and costs 5 points)."))
    problems, _ = stated_rules(root, ASSIGNMENT)
    assert len(problems) == 1 and "test_serving_invalid_arguments" in problems[0], problems
    assert "is not in exercises/m9_roofline/m9_roofline.ipynb" in problems[0]


def test_a_sentence_removed_from_the_notebook_is_a_finding(tmp_path):
    root = _course(tmp_path)
    nb = root / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    text = nb.read_text()
    assert "KV cache take at most" in text
    nb.write_text(text.replace("KV cache take at most", "KV cache take less than"))
    problems, _ = stated_rules(root, ASSIGNMENT)
    assert any("test_kv_cache_fits_random" in p for p in problems), problems


def test_a_listed_test_that_does_not_exist_is_a_finding(tmp_path):
    root = _course(tmp_path)
    suite = root / "tests" / "hidden" / ASSIGNMENT / "test_serving_hidden.py"
    text = suite.read_text()
    suite.write_text(text.replace("def test_serving_invalid_arguments", "def test_renamed"))
    problems, _ = stated_rules(root, ASSIGNMENT)
    assert any("test_renamed is not listed" in p for p in problems), problems
    assert any("lists test_serving_invalid_arguments, which is not a test" in p for p in problems)
