"""The layout holds: imports run one way (the import-linter contract fails a wrong-way import),
docs/ARCHITECTURE.md names every module of the package, and no function
in grader/ or bench/ runs past 60 lines without its docstring saying why ("Long because ...")."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from factories import ROOT, course_tree

LINT = Path(sys.executable).with_name("lint-imports")


def _lint(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT), "--no-cache"],
        cwd=tree,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def tree(tmp_path):
    if not LINT.is_file():
        pytest.skip(f"import-linter is not installed next to {sys.executable} (the dev profile)")
    return course_tree(tmp_path, copy=("grader", "pyproject.toml"))


def test_the_layers_contract_holds_and_fails_a_wrong_way_import(tree):
    kept = _lint(tree)
    assert kept.returncode == 0, kept.stdout[-3000:]
    assert "phases import downward only KEPT" in kept.stdout
    points = tree / "grader" / "core" / "points.py"
    points.write_text(points.read_text() + "\nfrom grader.reports import terminal  # noqa\n")
    broken = _lint(tree)
    assert broken.returncode != 0
    assert "grader.core is not allowed to import grader.reports" in broken.stdout, broken.stdout


def test_every_module_is_in_the_architecture_page():
    page = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    missing = []
    for path in sorted((ROOT / "grader").rglob("*.py")):
        rel = path.relative_to(ROOT / "grader").with_suffix("")
        if rel.name in ("__init__", "__main__") or rel.parts == ("cli",):
            name = "/".join(rel.parts[:-1]) or "cli"
            if f"`{name}" not in page and f"{name}/" not in page and f"`{name}.py`" not in page:
                missing.append(str(rel))
            continue
        pkg, mod = ".".join(rel.parts[:-1]), rel.name
        if f"`{mod}`" not in page and f"`{pkg}.{mod}`" not in page and f"`{mod}.py`" not in page:
            missing.append(str(rel))
    assert not missing, f"docs/ARCHITECTURE.md does not name: {missing}"


MAX_LINES = 60
LONG_BECAUSE = re.compile(r"(?:^|[.!?]\s+)Long because\b")


def _too_long(source: str) -> list[str]:
    """Functions in `source` over MAX_LINES lines with no 'Long because' sentence saying why."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        lines = node.end_lineno - node.lineno + 1
        if lines > MAX_LINES and not LONG_BECAUSE.search(ast.get_docstring(node) or ""):
            found.append(f"{node.name} ({lines} lines)")
    return found


def test_a_function_over_60_lines_says_why():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    assert _too_long(f'def f():\n    """Adds."""\n{body}\n') == ["f (62 lines)"]
    assert _too_long(f'def f():\n    """Adds. Long because a table."""\n{body}\n') == []
    assert _too_long(f'def f():\n    """Adds. Not Long because."""\n{body}\n') == ["f (62 lines)"]
    assert _too_long(f"def f():\n{body[: body.rindex(chr(10))]}\n") == []
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted([*(ROOT / "grader").rglob("*.py"), *(ROOT / "bench").glob("*.py")])
        for name in _too_long(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "over 60 lines, no 'Long because' in the docstring: " + ", ".join(
        offenders
    )
