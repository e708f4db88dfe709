"""grader.core.regions: the one scanner of SOLUTION / HIDDEN TESTS markers."""

from __future__ import annotations

import pytest

from grader.core.regions import HIDDEN_TESTS, SOLUTION, Region, RegionError, regions, scan

CELL = """\
def f(x):
    ### BEGIN SOLUTION
    return x
    ### END SOLUTION
assert f(1) == 1
### BEGIN HIDDEN TESTS
assert f(2) == 2
### END HIDDEN TESTS"""


def test_regions_of_a_well_formed_cell() -> None:
    lines = CELL.split("\n")
    found = regions(lines)
    assert found == [Region(SOLUTION, 2, 4), Region(HIDDEN_TESTS, 6, 8)]
    assert found[0].body(lines) == ["    return x"]
    assert regions(lines, first=10) == [Region(SOLUTION, 11, 13), Region(HIDDEN_TESTS, 15, 17)]
    assert regions(["x = 1"]) == []


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("a = 1\n### END SOLUTION", 2, "unmatched '### END SOLUTION'"),
        ("### BEGIN SOLUTION\na = 1\nb = 2", 1, "unmatched '### BEGIN SOLUTION'"),
        (
            "### BEGIN SOLUTION\n### BEGIN HIDDEN TESTS\n### END SOLUTION",
            2,
            "nested '### BEGIN HIDDEN TESTS' inside the 'BEGIN SOLUTION' region opened at line 1",
        ),
        (
            "### BEGIN HIDDEN TESTS\nassert 1\n### END SOLUTION",
            3,
            "'### END SOLUTION' closes the 'BEGIN HIDDEN TESTS' region opened at line 1",
        ),
    ],
)
def test_stray_markers_are_named_with_their_line(text: str, line: int, words: str) -> None:
    with pytest.raises(RegionError) as err:
        regions(text.split("\n"))
    assert err.value.line == line
    assert f"line {line}: {words}" in str(err.value)
    found, problems = scan(text.split("\n"), first=101)  # numbered as the file's lines
    assert problems[0].line == line + 100


def test_scan_recovers_and_keeps_an_unclosed_region() -> None:
    found, problems = scan(["### BEGIN SOLUTION", "a = 1", "b = 2"])
    assert found == [Region(SOLUTION, 1, 3, closed=False)]
    assert found[0].body(["### BEGIN SOLUTION", "a = 1", "b = 2"]) == ["a = 1", "b = 2"]
    assert [p.message for p in problems] == [
        "unmatched '### BEGIN SOLUTION': no END before the cell ends (line 3)"
    ]
