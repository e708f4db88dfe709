"""A notebook opened on Colab straight from GitHub: the notebook file alone, no clone, no
course.toml, no nvidia-smi. The first cell and every self-check must still run."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import jupytext
import pytest

from grader.core.course import load_course
from grader.release.embed import MARKER, embed_course

ROOT = Path(__file__).resolve().parents[3]
AIDS = load_course(ROOT).assignment_ids

# Runs in a fresh interpreter: a fake google.colab, then every code cell of the notebook but
# the demos, in order, in one namespace (what "Run all" does, minus plots and timings). A cell
# that fails is recorded and the run goes on, so a stub's every failure can be looked at. The
# optional second argument is an expression evaluated at the end, its value printed as JSON.
RUNNER = r"""
import contextlib, io, json, sys, types
google = types.ModuleType("google")
google.colab = types.ModuleType("google.colab")
sys.modules["google"], sys.modules["google.colab"] = google, google.colab
nb = json.load(open(sys.argv[1]))
ns = {"__name__": "__main__"}
cells = []
for n, cell in enumerate(nb["cells"], 1):
    if cell["cell_type"] != "code" or "demo" in cell["metadata"].get("tags", []):
        continue
    src = "".join(cell["source"])
    src = "\n".join("pass" if l.lstrip().startswith(("%", "!")) else l for l in src.split("\n"))
    nbg = cell["metadata"].get("nbgrader", {})
    row = {"cell": n, "grade_id": nbg.get("grade_id"), "self_check": bool(nbg.get("grade"))}
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(src, f"cell {n}", "exec"), ns)
        row["error"] = None
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
    row["printed"] = out.getvalue()
    cells.append(row)
probe = eval(sys.argv[2], ns) if len(sys.argv) > 2 else None
print("RESULT " + json.dumps({"cells": cells, "probe": probe}))
"""


def _embedded(text: str) -> dict:
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COURSE_HARDWARE":
            return ast.literal_eval(node.value)
    raise AssertionError("no COURSE_HARDWARE assignment")


def _hardware() -> dict:
    with open(ROOT / "course.toml", "rb") as fh:
        return tomllib.load(fh)["hardware"]


def _run_alone(tmp_path: Path, nb, probe: str | None = None) -> tuple[list[dict], object]:
    """Run `nb` as the only file of a fresh folder, with no course, no GPU tools, on 'Colab'."""
    alone = tmp_path / "Colab Notebooks"
    alone.mkdir()
    path = alone / "notebook.ipynb"
    jupytext.write(nb, path)
    runner = tmp_path / "run_cells.py"
    runner.write_text(RUNNER)
    env = {k: v for k, v in os.environ.items() if k not in ("GRADER_DEVICE", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"
    assert shutil.which("nvidia-smi", path=env["PATH"]) is None, "nvidia-smi is on that PATH"
    env["PYTHONPATH"] = ""  # nothing of the course repository: the notebook alone
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run(
        [sys.executable, str(runner), str(path), *([probe] if probe else [])],
        cwd=alone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, out[-3000:]
    assert sorted(p.name for p in alone.iterdir()) == [path.name], "it wrote beside the notebook"
    result = json.loads(line.removeprefix("RESULT "))
    return result["cells"], result["probe"]


def _solution(aid: str):
    nb = jupytext.read(ROOT / "solutions" / aid / f"{aid}.py")
    assert embed_course(nb, ROOT) == 1
    return nb


def _failed(cells: list[dict]) -> list[str]:
    return [f"cell {c['cell']} ({c['grade_id']}): {c['error']}" for c in cells if c["error"]]


@pytest.mark.parametrize("aid", AIDS)
def test_the_release_embeds_course_toml_hardware(aid):
    released = (ROOT / "exercises" / aid / f"{aid}.py").read_text()
    assert _embedded(released) == _hardware()
    assert MARKER in (ROOT / "solutions" / aid / f"{aid}.py").read_text()


def test_gpu_fundamentals_first_cell_and_self_checks_run_from_the_notebook_alone(tmp_path):
    cells, _ = _run_alone(tmp_path, _solution("gpu_fundamentals"))
    assert _failed(cells) == []
    printed = "".join(c["printed"] for c in cells)
    assert "Colab: no NVIDIA driver (CPU runtime)" in printed
    assert "kernels run in Numba's CUDA simulator" in printed
    assert sum(c["self_check"] for c in cells) >= 10


def test_m9_self_checks_run_from_the_notebook_alone(tmp_path):
    probe = "[load_hardware(), hardware_tables()[1]]"
    cells, (gpus, source) = _run_alone(tmp_path, _solution("m9_roofline"), probe)
    assert _failed(cells) == []
    checks = [c for c in cells if c["self_check"]]
    assert len(checks) >= 10
    for c in checks:  # each self-check cell ends by saying it passed
        assert "self-checks passed" in c["printed"], (c["grade_id"], c["printed"])
    assert "copy of course.toml" in source, source  # the release's copy, no file was found
    t4 = _hardware()["T4"]
    assert gpus["T4"] == {
        "name": "T4",
        "peak_flops": t4["fp16_tensor_tflops"] * 1e12,
        "peak_bandwidth": t4["bandwidth_gbs"] * 1e9,
        "memory_bytes": t4["memory_mib"] * 2**20,  # nvidia-smi's MiB, in bytes
        "usable_memory_fraction": t4["usable_memory_fraction"],
        "sm_count": t4["sm_count"],
    }
    assert gpus["T4"] == load_course(ROOT).hardware["T4"].as_gpu_dict()
    assert sorted(gpus) == sorted(_hardware())


def test_m9_stub_says_stub_not_file_not_found_from_the_notebook_alone(tmp_path):
    nb = jupytext.read(ROOT / "exercises" / "m9_roofline" / "m9_roofline.ipynb")
    cells, source = _run_alone(tmp_path, nb, "hardware_tables()[1]")
    assert "copy of course.toml" in source, source
    assert not [f for f in _failed(cells) if "FileNotFoundError" in f], _failed(cells)
    by_id = {c["grade_id"]: c for c in cells}
    assert by_id["check_load_hardware"]["error"].startswith(
        "NotImplementedError: load_hardware: implement this"
    ), by_id["check_load_hardware"]
    provided = [c for c in cells if not c["self_check"]]  # definitions and setup run cleanly
    assert _failed(provided) == []
