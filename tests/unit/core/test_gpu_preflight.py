"""The driver probe, the install profile it picks, and the GPU preflight's infrastructure error.

On this machine there is no NVIDIA driver: graded with GRADER_DEVICE=gpu, `grader grade` and
`gha grade-pr` must stop as the grader's failure (exit 3), record nothing, and (grade-pr) write
the comment that tells the student it was not their fault. Drivers 550 and 580 are simulated
with a stand-in `nvidia-smi` printing what the real one prints for `-q`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from factories import DRIVERS, ROOT, fake_smi, grade_pr, make_artifact

from grader import cli
from grader import github as gha
from grader.core import device, preflight
from grader.core.errors import ExitCode


@pytest.fixture
def fresh_device(monkeypatch):
    """Forget the cached device decision and preflight around each test."""
    device.has_gpu.cache_clear()
    preflight.gpu_preflight.cache_clear()
    monkeypatch.delenv(preflight.PASSED_ENV, raising=False)
    yield monkeypatch
    device.has_gpu.cache_clear()
    preflight.gpu_preflight.cache_clear()


@pytest.mark.parametrize(
    ("driver", "profile"), [("550", "gpu-cu12"), ("580", "gpu-cu13"), ("470", None)]
)
def test_profile_follows_the_cuda_version_the_driver_reports(
    tmp_path, monkeypatch, driver, profile
):
    monkeypatch.setenv("PATH", str(fake_smi(tmp_path / "bin", driver)))
    found, why = device.read_driver()
    assert found is not None, why
    assert (found.name, found.version, found.cuda) == ("Tesla T4", *DRIVERS[driver])
    chosen, reason = device.profile_for(found)
    assert chosen == profile, reason
    if profile is None:
        assert "update the NVIDIA driver" in reason
        out = subprocess.run(
            [sys.executable, "-m", "grader.core.device", "profile"],
            capture_output=True,
            text=True,
            env={**os.environ, "PATH": str(tmp_path / "bin")},
            cwd=ROOT,
            check=False,
        )
        assert out.returncode == 1 and '".[student]"' in out.stderr, out.stderr


def test_profile_command_without_a_driver(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # no nvidia-smi anywhere
    cmd = [sys.executable, "-m", "grader.core.device", "profile"]
    bare = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    assert bare.returncode == 1 and bare.stdout == ""
    assert "nvidia-smi is not on PATH" in bare.stderr
    # ... and names the profile that does fit: the student one, for the simulator.
    assert 'pip install -e ".[student]"' in bare.stderr and "simulator" in bare.stderr
    fallback = subprocess.run(
        [*cmd, "--default", "gpu-cu13"], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert (fallback.returncode, fallback.stdout.strip()) == (0, "gpu-cu13")


def test_profile_command_with_driver_550(tmp_path):
    env = {**os.environ, "PATH": str(fake_smi(tmp_path / "bin", "550"))}
    out = subprocess.run(
        [sys.executable, "-m", "grader.core.device", "profile"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert (out.returncode, out.stdout.strip()) == (0, "gpu-cu12"), out.stderr
    assert "550.54.15 runs CUDA 12.4" in out.stderr


def _no_driver(monkeypatch, tmp_path) -> None:
    if os.path.exists("/dev/nvidia0"):
        pytest.skip("this machine has an NVIDIA GPU: the no-driver path cannot be shown here")
    monkeypatch.setenv("GRADER_DEVICE", "gpu")
    monkeypatch.setenv("PATH", f"{tmp_path / 'empty'}:{Path(sys.executable).parent}:/usr/bin:/bin")


def test_preflight_fails_closed_without_a_driver(fresh_device, tmp_path):
    _no_driver(fresh_device, tmp_path)
    with pytest.raises(preflight.GpuUnavailable) as info:
        preflight.gpu_preflight()
    detail = info.value.detail
    assert info.value.headline == preflight.HEADLINE
    assert "nvidia-smi is not on PATH" in detail
    assert "numba-cuda kernel launch:" in detail and "torch CUDA operation:" in detail
    assert "python -m grader.core.device profile" in detail  # the fix is named


def test_grade_with_gpu_and_no_driver_records_nothing(fresh_device, tmp_path, capsys):
    _no_driver(fresh_device, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    outputs = [out / "result.json", out / "report.md", out / "report.html", out / "gradebook.db"]
    rc = cli.main(
        [
            "--root",
            str(ROOT),
            "grade",
            str(ROOT),
            "--json",
            str(outputs[0]),
            "--markdown",
            str(outputs[1]),
            "--html",
            str(outputs[2]),
            "--gradebook",
            str(outputs[3]),
        ]
    )
    err = capsys.readouterr().err
    assert rc == ExitCode.INFRASTRUCTURE == 3, err
    assert "not graded, nothing recorded" in err and preflight.HEADLINE in err
    assert [p.name for p in outputs if p.exists()] == []


def test_grade_pr_with_gpu_and_no_driver_writes_the_infrastructure_comment(
    fresh_device, tmp_path, capsys
):
    _no_driver(fresh_device, tmp_path)
    art = make_artifact(tmp_path)
    out = tmp_path / "report"
    rc = grade_pr(art, out, "--timestamp", "2026-01-01T00:00:00Z")
    assert rc == ExitCode.INFRASTRUCTURE == 3, capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["comment.md", "summary.md"]  # no score
    comment = (out / "comment.md").read_text(encoding="utf-8")
    assert comment.startswith(gha.MARKER)
    assert f"Not graded: {preflight.HEADLINE}" in comment
    assert "not of your work" in comment and "no score was recorded" in comment
    assert "nvidia-smi is not on PATH" in comment  # what failed, for the instructor
    assert "PR #7" in comment


def test_grade_all_with_gpu_and_no_driver_grades_no_one(fresh_device, tmp_path, capsys):
    _no_driver(fresh_device, tmp_path)
    (tmp_path / "class" / "alice").mkdir(parents=True)
    out = tmp_path / "grading-output"
    rc = cli.main(["--root", str(ROOT), "grade-all", str(tmp_path / "class"), "--out", str(out)])
    assert rc == ExitCode.INFRASTRUCTURE == 3 and preflight.HEADLINE in capsys.readouterr().err
    assert not out.exists()  # no error rows, no zero scores


def test_a_passed_preflight_is_inherited_not_repeated(fresh_device, tmp_path):
    """grade-all's children reuse the parent's passing check (no probe runs: there is no GPU)."""
    _no_driver(fresh_device, tmp_path)
    seen = preflight.GpuCheck("Tesla T4", "550.54.15", "12.4", "numba-cuda 0.30.4", "torch 2.10.0")
    fresh_device.setenv(preflight.PASSED_ENV, json.dumps(dataclasses.asdict(seen)))
    assert preflight.gpu_preflight() == seen
    preflight.gpu_preflight.cache_clear()
    fresh_device.setenv(preflight.PASSED_ENV, "{not json")  # unreadable: probe for real
    with pytest.raises(preflight.GpuUnavailable):
        preflight.gpu_preflight()


@pytest.mark.parametrize("result", ["failure", "cancelled", "bogus\nvalue"])
def test_failure_comment_says_it_is_not_the_students_fault(tmp_path, result):
    path = gha.failure_comment(tmp_path, result)
    text = path.read_text(encoding="utf-8")
    assert text.startswith(gha.MARKER) and "not of your work" in text
    word = result if result.isalpha() else "unknown"
    assert f"ended as '{word}'" in text
    assert "\nvalue" not in text


@pytest.mark.gpu
def test_preflight_on_a_gpu_records_driver_cuda_and_device(fresh_device):
    check = preflight.gpu_preflight()
    driver, _ = device.read_driver()
    assert driver is not None
    assert (check.device, check.driver, check.cuda) == (driver.name, driver.version, driver.cuda)
    assert check.numba_cuda.startswith("numba-cuda ") and check.torch.startswith("torch ")
