"""tools/gpu_check.py (`make gpu-check`) without a GPU: the one line and exit code 3, the JSON
and the one-screen summary from a fake device, and the parts that decide its verdict (which tests
are GPU-marked, the CPU/GPU score comparison, a step that fails or runs out of budget)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from factories import ROOT

from grader.core.errors import ExitCode

spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)


def test_without_a_gpu_it_says_so_in_one_line_and_exits_3(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(gpu_check, "gpu_present", lambda: False)
    assert gpu_check.main(["--json", str(tmp_path / "g.json")]) == ExitCode.INFRASTRUCTURE == 3
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "no NVIDIA GPU" in out
    assert not (tmp_path / "g.json").exists()


def test_the_make_target_runs_it():
    make = (ROOT / "Makefile").read_text()
    assert "gpu-check:" in make and "tools/gpu_check.py --json gpu-check.json" in make


@pytest.mark.skipif(gpu_check.gpu_present(), reason="this machine has a GPU: not the no-GPU path")
def test_the_script_itself_exits_3_here():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu_check.py")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 3 and proc.stdout.strip() == gpu_check.NO_GPU, proc


def test_a_fake_run_writes_every_figure_and_a_summary(tmp_path, capsys):
    out = tmp_path / "gpu-check.json"
    assert gpu_check.main(["--fake", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["schema"] == "gpu-check/1" and report["fake"] and report["ok"]
    tests = report["steps"]["suites"]["tests"]
    assert {t["test"] for t in tests} == {
        "hidden/test_vector_add_bandwidth",
        "hidden/test_coalescing_slowdown_gpu",
        "hidden/test_transposes_bandwidth_gpu",
    }
    for t in tests:
        (record,) = t["timings"]
        # the rounds it took: at least the six whose range covers 95%, none discarded here
        assert 6 <= record["rounds"] <= 30 and record["discarded_rounds"] == 0
        for target in record["targets"]:
            assert target["median_ms"] > 0 and 0 <= target["spread"] < 0.05 and target["gbs"] > 0
            # the launch cost beside the kernel time, not inside it: the fake H200's vector add
            # (about 47 us) is shorter than its 50 us launch path, and still timed as the kernel
            assert target["launch_us"] == 50.0
            assert target["wall_per_launch_ms"] > target["median_ms"]
        for v in record["verdicts"]:
            assert v["passed"] and v["margin"] > 1 and v["threshold"] > 0
            assert v["coverage"] >= 0.95 and v["low"] <= v["median"] <= v["high"]
    vector = next(t for t in tests if t["test"] == "hidden/test_vector_add_bandwidth")
    kernel = next(e for e in vector["timings"][0]["targets"] if e["label"] == "vector_add")
    assert kernel["median_ms"] < 0.050 < kernel["wall_per_launch_ms"]
    screen = capsys.readouterr().out
    assert "FAKE" in screen and "margin" in screen and len(screen.splitlines()) <= 40
    assert "launch us" in screen and "kernel ms" in screen and "6 rounds" in screen


def test_the_gpu_tests_are_found_by_their_marker():
    found = gpu_check.gpu_tests()
    assert set(found["gpu_fundamentals"]) == {
        "test_vector_add_bandwidth",
        "test_transposes_bandwidth_gpu",
        "test_coalescing_slowdown_gpu",
        "test_occupancy_matches_the_driver_gpu",
    }
    assert "test_ridge_point_random_hardware" not in found["gpu_fundamentals"]


def _result(score: float, tests: dict[str, float]) -> dict:
    return {
        "score": score,
        "assignments": [{"tests": [{"name": k, "score": v} for k, v in tests.items()]}],
    }


def test_a_gpu_score_must_be_the_cpu_score_plus_the_gpu_points():
    gpu = {"test_timed_gpu"}
    cpu = {"ada": _result(3, {"hidden/test_a": 1, "hidden/test_b": 2, "hidden/test_timed_gpu": 0})}
    good = {"ada": _result(5, {"hidden/test_a": 1, "hidden/test_b": 2, "hidden/test_timed_gpu": 2})}
    (row,) = gpu_check.compare(cpu, good, gpu, ("ada",))
    assert row["ok"] and row["gpu_points"] == 2
    lost = {"ada": _result(4, {"hidden/test_a": 0, "hidden/test_b": 2, "hidden/test_timed_gpu": 2})}
    (row,) = gpu_check.compare(cpu, lost, gpu, ("ada",))
    assert not row["ok"] and row["differ"] == ["hidden/test_a"]
    (row,) = gpu_check.compare(cpu, {}, gpu, ("ada",))
    assert not row["ok"] and row["why"] == "no result.json"


def test_a_failing_step_is_recorded_and_the_rest_still_run():
    report = {"steps": {}}
    budget = gpu_check.Budget(60)

    def broken() -> dict:
        raise RuntimeError("the driver said no")

    gpu_check.step(report, "one", budget, broken)
    gpu_check.step(report, "two", budget, lambda: {"status": "passed"})
    assert report["steps"]["one"]["status"] == "failed"
    assert "the driver said no" in report["steps"]["one"]["why"]
    assert report["steps"]["two"]["status"] == "passed"
    spent = gpu_check.Budget(0)
    gpu_check.step(report, "three", spent, lambda: {"status": "passed"})
    assert report["steps"]["three"] == {
        "status": "failed",
        "why": "not run: the budget was spent",
        "seconds": report["steps"]["three"]["seconds"],
    }
