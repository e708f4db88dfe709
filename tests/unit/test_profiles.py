"""Every install profile (pyproject.toml extras) resolves on the platforms its users are on.

This machine is Linux x86_64 with Python 3.11; students are on Colab (3.12, 3.13), GitHub
runners (Ubuntu x86_64) and Macs (arm64). For each target, pip resolves the profile against the
package index with `install --dry-run --ignore-installed --report`, for that Python version and
platform, wheels only, and the test fails when it does not resolve or when it resolves to the
wrong CUDA stack. Resolving is not running: tests/slow/test_fresh_install.py installs the
student profile and runs `grader check` in it. This machine's local wheels and pip settings
are left out (PIP_CONFIG_FILE is emptied), so the answer is the index's, not the local torch
CPU wheel's.

pip evaluates the markers of dependencies' own requirements on the interpreter running it, not
on the target. So each Python version is resolved by an interpreter of that version where this
machine has one (pyenv's), and the profile's own top-level markers are evaluated here for the
target platform (on macOS: no numba-cuda); a dependency's `sys_platform` markers are still read
as Linux's on the macOS resolution.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest
from factories import ROOT
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

PYTHONS = ("3.11", "3.12", "3.13")
# pip takes --platform tags literally: list every glibc a wheel may name, up to Colab's (2.35,
# Ubuntu 22.04), which also runs on GitHub's Ubuntu 24.04 runners (2.39)
LINUX = (*(f"manylinux_2_{m}_x86_64" for m in range(35, 16, -1)), "manylinux2014_x86_64")
MAC = ("macosx_14_0_arm64",)
PROFILES = ("student", "instructor", "gpu-cu12", "gpu-cu13")
# What the Makefile and the course CI install together. It and `dev` (two linters with wheels
# for every platform) resolve on one Python only: each resolution with torch takes one to two
# minutes of index traffic, and the CI matrix installs this combination on the other two.
COMBOS = ("instructor,gpu-cu13,dev",)
TARGETS = [
    *[(p, v, "linux") for p in PROFILES for v in PYTHONS],
    *[("student", v, "mac") for v in PYTHONS],
    *[(p, "3.11", "linux") for p in ("dev", *COMBOS)],
]
PIP_TIMEOUT_S = 600

pytestmark = pytest.mark.slow


def _marker_env(python: str, platform: str) -> dict[str, str]:
    mac = platform == "mac"
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "darwin" if mac else "linux",
        "platform_system": "Darwin" if mac else "Linux",
        "platform_machine": "arm64" if mac else "x86_64",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }


def requirements(profile: str, python: str, platform: str) -> list[str]:
    """The profile's requirements (base + extras, self-references expanded), markers applied."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    env = _marker_env(python, platform)
    out: list[str] = []
    todo, seen = [*project["dependencies"]], set()
    for extra in profile.split(","):
        todo += project["optional-dependencies"][extra]
    while todo:
        req = Requirement(todo.pop(0))
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        if req.name == project["name"]:  # "gpu-course-grader[student]"
            for extra in sorted(req.extras - seen):
                seen.add(extra)
                todo += project["optional-dependencies"][extra]
            continue
        req.marker = None
        out.append(str(req))
    return out


@cache
def interpreter(python: str) -> str:
    """An interpreter of this version if this machine has one (see the module docstring)."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == python:
        return sys.executable
    candidates = [shutil.which(f"python{python}")]
    candidates += sorted(
        str(p) for p in Path.home().glob(f".pyenv/versions/{python}.*/bin/python3")
    )
    for exe in filter(None, candidates):
        probe = subprocess.run(
            [exe, "-c", "import sys, pip; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == python:
            return exe
    return sys.executable


def resolve(profile: str, python: str, platform: str, scratch: Path) -> dict:
    tag = f"{profile.replace(',', '+')}-{python}-{platform}"
    report = scratch / f"{tag}.json"
    cmd = [interpreter(python), "-m", "pip", "install", "--dry-run", "--ignore-installed"]
    cmd += ["--quiet", "--report", str(report), "--target", str(scratch / f"{tag}-target")]
    cmd += ["--python-version", python, "--only-binary", ":all:"]
    for plat in MAC if platform == "mac" else LINUX:
        cmd += ["--platform", plat]
    cmd += requirements(profile, python, platform)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=PIP_TIMEOUT_S, check=False
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout)[-3000:]}
    data = json.loads(report.read_text(encoding="utf-8"))
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in data["install"]}


@pytest.fixture(scope="module")
def resolved(tmp_path_factory) -> dict:
    """All targets at once, six pips at a time (each spends most of its time waiting on the
    index, so in parallel the whole set takes a few times the slowest one)."""
    scratch = tmp_path_factory.mktemp("profiles")
    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = {t: pool.submit(resolve, *t, scratch) for t in TARGETS}
        return {t: f.result() for t, f in futures.items()}


def _major(version: str | None) -> int | None:
    return int(version.split(".")[0]) if version else None


@pytest.mark.parametrize(
    ("profile", "python", "platform"), TARGETS, ids=["-".join(t) for t in TARGETS]
)
def test_profile_resolves(resolved, profile, python, platform):
    got = resolved[(profile, python, platform)]
    assert "error" not in got, f"{profile} on Python {python} ({platform}):\n{got['error']}"
    extras = set(profile.split(","))
    if profile == "dev":
        assert {"ruff", "zizmor"} <= set(got)
        return
    assert got["numba"] == "0.68.1" and "jupytext" in got and "pytest" in got
    # numba-cuda 0.30.4 fails every kernel on numpy 2.5 (np.row_stack is gone): pyproject's bound
    assert Version(got["numpy"]) < Version("2.5"), got["numpy"]
    if extras == {"student"}:
        assert "torch" not in got and "nbgrader" not in got, "the student profile stays small"
        if platform == "mac":  # Numba's own simulator: numba-cuda has no macOS wheels
            assert "numba-cuda" not in got and "cuda-bindings" not in got
        else:
            assert got["numba-cuda"] == "0.30.4"
    if "instructor" in extras:
        assert got["nbgrader"] == "0.9.6" and "nbclient" in got
    for cu in (12, 13):
        if f"gpu-cu{cu}" in extras:
            assert _major(got.get("cuda-bindings")) == cu, got.get("cuda-bindings")
            assert "torch" in got
            stack = [n for n in got if re.search(r"cu(12|13)$", n)]  # nvidia-*-cu12 wheels
            assert all(n.endswith(f"cu{cu}") for n in stack), stack


def test_makefile_install_is_a_resolved_combo():
    """The Makefile's install line names one of the combinations resolved above."""
    line = next(
        ln
        for ln in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines()
        if "pip install" in ln and "-e" in ln
    )
    extras = re.search(r'"\.\[([\w,-]+)\]"', line)
    assert extras and extras.group(1) in COMBOS, line


def test_requires_python_covers_the_targets():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    spec = SpecifierSet(project["requires-python"])
    assert all(spec.contains(f"{v}.0") for v in PYTHONS), spec
    assert not spec.contains("3.10.12") and not spec.contains("3.14.0"), spec
