"""Every install profile (pyproject.toml extras) resolves on the platforms its users are on.

This machine is Linux x86_64 with Python 3.11; students are on Colab (3.12, 3.13), GitHub
runners (Ubuntu x86_64) and Macs (arm64). For each target, `uv pip compile` resolves the profile
against the package index for that Python version and platform (`--python-version`,
`--python-platform`), wheels only, and the test fails when it does not resolve or when it
resolves to the wrong CUDA stack. uv evaluates every marker, a dependency's own included, for
the target rather than for the interpreter running it, and takes a second or two of CPU where
pip's `install --dry-run --platform ...` took 10-20 s (its link parsing over the index pages of
torch, numpy and the nvidia wheels: 337 s of CPU for the 18 targets, 202 s of `make test`).
Resolving is not installing: tests/slow/test_fresh_install.py installs the student profile with
pip in fresh venvs and runs `grader check` in it, and `make setup` installs the full profile
with pip. This machine's local wheels and pip and uv settings are left out (no PIP_ or UV_
variables, UV_NO_CONFIG), so the answer is the index's, not the local torch CPU wheel's.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from concurrent.futures import ThreadPoolExecutor

import pytest
from factories import ROOT, lock_tool, pins
from packaging.specifiers import SpecifierSet
from packaging.version import Version

PYTHONS = ("3.11", "3.12", "3.13")
# uv's target platforms: Linux at Colab's glibc (2.35, Ubuntu 22.04), which also runs on GitHub's
# Ubuntu 24.04 runners (2.39); Apple silicon at macOS 14 (MACOSX_DEPLOYMENT_TARGET)
LINUX = "x86_64-manylinux_2_35"
MAC = "aarch64-apple-darwin"
MAC_VERSION = "14.0"
PROFILES = ("student", "instructor", "gpu-cu12", "gpu-cu13")
# What the Makefile and the course CI install together, with `dev` (the linters, uv, act),
# resolved on every Python as the profiles are.
COMBOS = ("instructor,gpu-cu13,dev",)
# A student's laptop that runs the compile check itself (README "Install profiles")
COMPILE = "student,student-compile"
TARGETS = [
    *[(p, v, "linux") for p in (*PROFILES, COMPILE) for v in PYTHONS],
    *[(p, v, "mac") for p in ("student", COMPILE) for v in PYTHONS],
    *[(p, v, "linux") for p in ("dev", *COMBOS) for v in PYTHONS],
]
RESOLVE_TIMEOUT_S = 600

pytestmark = pytest.mark.slow


def resolve(profile: str, python: str, platform: str) -> dict:
    """{name: version} of what `profile` resolves to on that target, or {"error": uv's words}:
    pyproject.toml's dependencies with the profile's extras, as `pip install ".[profile]"`
    there would install them (the extras that name the project itself expanded by uv)."""
    cmd = [*lock_tool().uv_command(), "pip", "compile", str(ROOT / "pyproject.toml"), "--quiet"]
    cmd += ["--no-header", "--no-annotate", "--only-binary", ":all:", "--python-version", python]
    cmd += ["--python-platform", MAC if platform == "mac" else LINUX]
    for extra in profile.split(","):
        cmd += ["--extra", extra]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update(UV_NO_CONFIG="1", MACOSX_DEPLOYMENT_TARGET=MAC_VERSION)
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=RESOLVE_TIMEOUT_S, check=False
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout)[-3000:]}
    return pins(proc.stdout)


@pytest.fixture(scope="module")
def resolved() -> dict:
    """All targets at once, six at a time (each spends most of its time waiting on the index)."""
    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = {t: pool.submit(resolve, *t) for t in TARGETS}
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
    if extras == set(COMPILE.split(",")):  # NVVM on Linux (CUDA 13's), no torch, no GPU needed
        assert "torch" not in got and "nbgrader" not in got
        if platform == "linux":
            assert got["numba-cuda"] == "0.30.4" and _major(got.get("cuda-bindings")) == 13
            assert any("nvvm" in n for n in got), sorted(got)
        else:  # the extra is Linux only: on a Mac the student profile's simulator, as ever
            assert "numba-cuda" not in got
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
