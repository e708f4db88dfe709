"""The notebook's first cell (the install cell), executed as Colab would run it.

A stand-in `google.colab` module makes the cell believe it is on Colab, a stand-in `nvidia-smi`
reports driver 550 (CUDA 12.4) or 580 (CUDA 13.0), or there is none (a CPU runtime). pip is
intercepted inside the child process: the test records what the cell would install and installs
nothing. "Fresh" hides the installed numba-cuda, as on a new Colab runtime.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from factories import ROOT, fake_smi

from grader.core.course import load_course
from grader.core.notebook import read_notebook
from grader.release.shared_cells import shared_cells

# Every solution notebook that installs numba-cuda on Colab: its first code cell is the shared
# install cell (grader.release.shared_cells), whose one text release holds them all to.
NOTEBOOKS = [
    path
    for a in load_course(ROOT).assignment_ids
    if "colab_install" in (path := ROOT / "solutions" / a / f"{a}.py").read_text(encoding="utf-8")
]

HARNESS = r"""
import importlib.util, json, subprocess, sys, types
if sys.argv[2] == "colab":
    sys.modules["google"] = types.ModuleType("google")
    sys.modules["google.colab"] = types.ModuleType("google.colab")
if sys.argv[3] == "fresh":
    _find = importlib.util.find_spec
    importlib.util.find_spec = lambda name, *a: None if name == "numba_cuda" else _find(name, *a)
_run, pip = subprocess.run, []
def run(cmd, *args, **kwargs):
    if list(cmd[:3]) == [sys.executable, "-m", "pip"]:
        pip.append(list(cmd[3:]))
        return subprocess.CompletedProcess(cmd, 0, "", "")
    return _run(cmd, *args, **kwargs)
subprocess.run = run
source = open(sys.argv[1], encoding="utf-8").read()
exec(compile(source, "install-cell", "exec"), {"__name__": "__main__"})
print("PIP=" + json.dumps(pip))
"""


def first_code_cell(path: Path) -> str:
    cells = [c for c in read_notebook(path).cells if c.cell_type == "code"]
    assert cells, f"{path}: no code cell"
    assert cells[0].metadata.get("nbgrader", {}).get("grade_id") == "colab_install", path
    assert cells[0].source == shared_cells()["colab_install"], f"{path}: not the shared cell"
    return cells[0].source


def test_a_notebook_installs_with_the_shared_cell():
    assert NOTEBOOKS, "no solution notebook has the install cell"


def run_cell(tmp_path: Path, notebook: Path, where: str, driver: str | None, state: str):
    cell = tmp_path / "cell.py"
    cell.write_text(first_code_cell(notebook), encoding="utf-8")
    bin_dir = fake_smi(tmp_path / "bin", driver) if driver else tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    env = {**os.environ, "PATH": str(bin_dir)}  # nvidia-smi only where the test puts one
    harness = tmp_path / "harness.py"
    harness.write_text(HARNESS, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(harness), str(cell), where, state],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    said, _, pip = proc.stdout.rpartition("PIP=")
    return said, json.loads(pip)


def pinned_numba_cuda() -> str:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    reqs = [r for group in data["project"]["optional-dependencies"].values() for r in group]
    pins = {m.group(1) for r in reqs if (m := re.match(r"numba-cuda(?:\[\w+\])?==([\w.]+)", r))}
    assert len(pins) == 1, pins
    return pins.pop()


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
@pytest.mark.parametrize(
    ("driver", "build", "says"),
    [
        (None, "", "no NVIDIA driver (CPU runtime)"),
        ("550", "[cu12]", "driver 550.54.15 runs CUDA 12: the CUDA 12 build"),
        ("580", "[cu13]", "driver 580.65.06 runs CUDA 13: the CUDA 13 build"),
    ],
    ids=["no-nvidia-smi", "driver-550", "driver-580"],
)
def test_fresh_colab_gets_the_build_its_driver_runs(tmp_path, notebook, driver, build, says):
    said, pip = run_cell(tmp_path, notebook, "colab", driver, "fresh")
    want = f"numba-cuda{build}=={pinned_numba_cuda()}"
    assert pip == [["install", "-q", want]], said
    assert says in said and f"installing {want}" in said


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_colab_with_the_right_build_installs_nothing(tmp_path, notebook):
    major = int(metadata.version("cuda-bindings").split(".")[0])  # what this venv has
    driver = {12: "550", 13: "580"}[major]
    said, pip = run_cell(tmp_path, notebook, "colab", driver, "installed")
    assert pip == [] and "already installed, nothing to do" in said
    other = {12: "580", 13: "550"}[major]  # the wrong build for the driver is replaced
    said, pip = run_cell(tmp_path, notebook, "colab", other, "installed")
    assert len(pip) == 1 and pip[0][-1].startswith(f"numba-cuda[cu{25 - major}]"), said


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_off_colab_the_cell_installs_nothing(tmp_path, notebook):
    said, pip = run_cell(tmp_path, notebook, "laptop", "580", "fresh")
    assert pip == [] and "Not on Colab" in said
