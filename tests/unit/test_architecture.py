"""The layout holds: imports run one way (the import-linter contract fails a wrong-way import),
and docs/ARCHITECTURE.md names every module of the package."""

from __future__ import annotations

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
