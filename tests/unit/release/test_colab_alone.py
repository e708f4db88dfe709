"""A notebook opened on Colab straight from GitHub: the notebook file alone, no clone, no
course.toml, no nvidia-smi. The first cell and every self-check must still run."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import jupytext

from grader.release.embed import MARKER, embed_course

ROOT = Path(__file__).resolve().parents[3]
AID = "gpu_fundamentals"

# Runs in a fresh interpreter: a fake google.colab, then every code cell of the notebook but
# the demos, in order, in one namespace (what "Run all" does, minus plots and timings).
RUNNER = r"""
import json, sys, types
google = types.ModuleType("google")
google.colab = types.ModuleType("google.colab")
sys.modules["google"], sys.modules["google.colab"] = google, google.colab
nb = json.load(open(sys.argv[1]))
ns = {"__name__": "__main__"}
for n, cell in enumerate(nb["cells"], 1):
    if cell["cell_type"] != "code" or "demo" in cell["metadata"].get("tags", []):
        continue
    src = "".join(cell["source"])
    src = "\n".join("pass" if l.lstrip().startswith(("%", "!")) else l for l in src.split("\n"))
    try:
        exec(compile(src, f"cell {n}", "exec"), ns)
    except Exception as exc:
        print(f"CELL {n} FAILED: {type(exc).__name__}: {exc}")
        sys.exit(1)
print("EVERY CELL RAN")
"""


def _embedded(text: str) -> dict:
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COURSE_HARDWARE":
            return ast.literal_eval(node.value)
    raise AssertionError("no COURSE_HARDWARE assignment")


def test_the_release_embeds_course_toml_hardware():
    with open(ROOT / "course.toml", "rb") as fh:
        hardware = tomllib.load(fh)["hardware"]
    released = (ROOT / "exercises" / AID / f"{AID}.py").read_text()
    assert _embedded(released) == hardware
    assert MARKER in (ROOT / "solutions" / AID / f"{AID}.py").read_text()


def test_first_cell_and_self_checks_run_from_the_notebook_alone(tmp_path):
    nb = jupytext.read(ROOT / "solutions" / AID / f"{AID}.py")
    assert embed_course(nb, ROOT) == 1
    alone = tmp_path / "Colab Notebooks"
    alone.mkdir()
    path = alone / f"{AID}.ipynb"
    jupytext.write(nb, path)
    runner = tmp_path / "run_cells.py"
    runner.write_text(RUNNER)
    env = {k: v for k, v in os.environ.items() if k not in ("GRADER_DEVICE", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"  # no nvidia-smi anywhere on it
    env["PYTHONPATH"] = ""  # nothing of the course repository: the notebook alone
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run(
        [sys.executable, str(runner), str(path)],
        cwd=alone,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "EVERY CELL RAN" in out
    assert "Colab: no NVIDIA driver (CPU runtime)" in out
    assert "kernels run in Numba's CUDA simulator" in out
    assert json.loads(path.read_text())  # untouched: still the notebook alone
    assert sorted(p.name for p in alone.iterdir()) == [path.name]
