import base64
import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest

from grader.core.results import (
    AssignmentResult,
    Environment,
    GradeResult,
    validate,
)
from grader.core.results import TestResult as Case
from grader.reports import write_reports
from grader.reports.common import NAME_CHARS
from grader.reports.escape import md_inline as _md_inline
from grader.reports.html import html
from grader.reports.markdown import markdown
from grader.reports.plots import roofline_png

ROOT = Path(__file__).resolve().parents[3]


def md_inline(text: str, limit: int = NAME_CHARS) -> str:
    return _md_inline(text, limit)


def make_result(feedback: str = "expected 295.2, got 0") -> GradeResult:
    a = AssignmentResult(
        id="gpu_fundamentals",
        score=27.0,
        max_score=40.0,
        late_penalty=0.1,
        raw_score=30.0,
        graded_file="exercises/gpu_fundamentals/gpu_fundamentals.py",
        tests=[
            Case("test_ridge_point", 4, 4, "passed", suite="public", duration_s=0.1),
            Case("test_vector_add", 0, 6, "failed", feedback, suite="hidden"),
            Case("test_launch_config", 0, 3, "timeout", "call took > 30 s"),
            Case("test_bandwidth", 0, 5, "skipped", "needs a GPU"),
            Case("test_sectors", 26, 22, "passed"),
        ],
    )
    b = AssignmentResult(id="m9_roofline", score=0, max_score=30, error="no notebook found")
    return GradeResult(
        student="alice",
        score=27.0,
        max_score=70.0,
        environment=Environment("CPU (CUDA simulator)", True, ["rlimits", "no-network"], "0.1.0"),
        assignments=[a, b],
        warnings=["ignored your edit to tests/public/conftest.py"],
        timestamp="2026-12-15T10:00:00+00:00",
        submission_digest="ab" * 32,
        duration_s=12.5,
    )


# --------------------------------------------------------------------------- schema


def test_schema_accepts_a_real_result():
    data = make_result().to_dict()
    validate(data)
    validate(json.loads(make_result().to_json()))  # and its JSON round trip


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda d: d["assignments"][0]["tests"][1].update(outcome="crashed"), "outcome"),
        (lambda d: d["assignments"][0]["tests"][0].update(score=-1), "score"),
        (lambda d: d.update(score=-0.5), "$.score"),
        (lambda d: d["assignments"][0].update(late_penalty=1.5), "late_penalty"),
        (lambda d: d.pop("student"), "student"),
        (lambda d: d["assignments"][1].pop("tests"), "tests"),
        (lambda d: d["environment"].pop("device"), "device"),
        (lambda d: d.update(schema_version=99), "schema_version"),
        (lambda d: d.update(extra=1), "extra"),
        (lambda d: d["assignments"][0]["tests"][0].update(score="4"), "score"),
    ],
)
def test_schema_rejects(mutate, path):
    data = copy.deepcopy(make_result().to_dict())
    mutate(data)
    with pytest.raises(ValueError, match="result invalid at") as info:
        validate(data)
    assert path in str(info.value)


def test_schema_error_names_the_path():
    data = make_result().to_dict()
    data["assignments"][0]["tests"][1]["outcome"] = "crashed"
    with pytest.raises(ValueError, match=re.escape("$.assignments[0].tests[1].outcome")):
        validate(data)


# --------------------------------------------------------------------------- markdown


def test_markdown_content(course):
    md = markdown(make_result(), course)
    assert md.startswith("## ")
    assert "27 / 70" in md  # the total in the heading
    assert "| ❌ | test\\_vector\\_add | 0 / 6 | failed |" in md
    assert "⏱️" in md and "⏭️" in md
    assert "expected 295.2, got 0" in md  # failing feedback is shown
    assert "<details><summary>2 passed tests" in md  # passed tests folded
    assert md.index("test\\_vector\\_add") < md.index("<details>")
    assert "Late penalty: **10%**" in md
    assert "rlimits, no-network" in md  # isolation layers
    assert "conftest.py" in md  # warnings listed
    assert "could not be graded" in md


def test_markdown_bounded_with_huge_feedback(course):
    huge = ("A" * 1000 + "\n") * 10_000  # ~10 MB
    r = make_result(huge)
    r.assignments[0].tests += [Case(f"test_{i}", 0, 1, "error", huge) for i in range(200)]
    md = markdown(r, course)
    assert len(md) < 65_536 and len(md.encode()) < 65_536
    assert "truncated" in md  # visible note
    assert md.count("<pre>") == md.count("</pre>")  # no half-cut block
    assert md.count("<details>") == md.count("</details>")
    assert "Graded on" in md  # the footer survives truncation


def test_markdown_escapes_student_text(course):
    evil = "x | y <script>alert(1)</script> `code` </pre> @octocat #1\n| injected | row |"
    r = make_result(feedback=evil)
    r.assignments[0].tests[1].name = "test_evil[a|b<i>`]"
    r.warnings.append("warn <img src=x onerror=alert(1)> | pipe")
    md = markdown(r, course)
    assert "<script>" not in md
    assert "<img" not in md
    assert "</pre> @" not in md
    assert "&lt;script&gt;" in md
    assert "&amp;lt;" not in md  # escaped once
    # the evil test name stays one table cell: the row has exactly 5 unescaped pipes
    row = next(line for line in md.splitlines() if "test\\_evil" in line)
    assert len(re.findall(r"(?<!\\)\|", row)) == 5
    assert "| injected" not in md.replace("<pre>", "\n").split("</pre>")[-1]


def test_md_inline_escapes():
    out = md_inline("a|b<c>`d`\ne")
    assert "<" not in out and ">" not in out and "\n" not in out
    assert not re.search(r"(?<!\\)[|`]", out)  # every pipe and backtick is escaped


# --------------------------------------------------------------------------- HTML


def test_html_self_contained_with_png(course):
    metrics = {"m9_roofline": {"intensity_b1": 1.0, "intensity_b8": 7.9, "intensity_b32": 31.0}}
    reference = {"intensity_b1": 1.01, "intensity_b8": 8.0, "intensity_b32": 31.5}
    r = make_result("<script>alert('x')</script>")
    page = html(r, course, metrics, reference=reference)
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "http://" not in page and "https://" not in page
    assert "<link" not in page
    m = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert m, "no embedded PNG"
    assert base64.b64decode(m.group(1)).startswith(b"\x89PNG\r\n\x1a\n")
    assert "&lt;script&gt;" in page


@pytest.mark.parametrize(
    "metrics",
    [
        None,
        {},
        {"m9_roofline": "garbage"},
        {"m9_roofline": {"intensity_b1": "NaN", "intensity_b8": -3, "intensity_b32": float("inf")}},
    ],
)
def test_roofline_survives_bad_metrics(course, metrics):
    png, notes = roofline_png(course, metrics)
    assert png.startswith(b"\x89PNG")
    assert notes  # the plot says what is missing
    page = html(make_result(), course, metrics)
    assert "data:image/png;base64," in page


def test_roofline_with_good_metrics_has_no_notes(course):
    png, notes = roofline_png(
        course, {"m9_roofline": {"intensity_b1": 1, "intensity_b8": 8, "intensity_b32": 32}}
    )
    assert png.startswith(b"\x89PNG") and notes == []


def test_roofline_keys_and_labels_come_from_course_toml(course):
    """The plotted keys are course.toml's [metrics.roofline]; a course without [metrics] has
    no roofline section."""
    spec = dataclasses.replace(course.metrics, roofline={"intensity_b8": "batch eight"})
    only_b8 = dataclasses.replace(course, metrics=spec)
    _, notes = roofline_png(only_b8, {"m9_roofline": {"intensity_b8": 8}})
    assert notes == []  # intensity_b1 and intensity_b32 are not asked for
    _, notes = roofline_png(only_b8, {"m9_roofline": {"intensity_b1": 1}})
    assert notes == ["student intensity_b8 missing"]
    page = html(make_result(), dataclasses.replace(course, metrics=None), {})
    assert "data:image/png" not in page and "on the roofline</h2>" not in page


# --------------------------------------------------------------------------- files


def test_write_reports(tmp_path, course):
    paths = write_reports(make_result(), course, tmp_path / "alice")
    assert set(paths) == {"json", "markdown", "html"}
    assert all(p.is_file() for p in paths.values())
    back = GradeResult.read(paths["json"])
    assert back == make_result()


def test_write_reports_refuses_invalid(tmp_path, course):
    r = make_result()
    r.assignments[0].tests[0].outcome = "crashed"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="outcome"):
        write_reports(r, course, tmp_path / "bad")
    assert not (tmp_path / "bad" / "result.json").exists()
