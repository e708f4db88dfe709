"""bench/run.py --quick: every part is present, its figures are positive numbers, and the ratios
are computed from them. Timing targets are the benchmark's business, not this test's."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys

import pytest
from factories import ROOT

from grader.core import device

# bench/ is a folder of scripts, not a package: its comparison helpers loaded by path.
_spec = importlib.util.spec_from_file_location("bench_compare", ROOT / "bench" / "compare.py")
compare = sys.modules.setdefault("bench_compare", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(compare)


def _positive(value) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and value > 0
        and math.isfinite(value)
    )


def _spread_ok(s: dict) -> bool:
    return (
        all(_positive(s[k]) for k in ("median", "min", "max"))
        and s["min"] <= s["median"] <= s["max"]
    )


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for heading in ("## 1.", "## 2.", "## 3.", "## 4."):
        assert heading in proc.stdout
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_metadata(bench):
    assert bench["mode"] == "quick"
    m = bench["machine"]
    assert m["cpu"] and m["cores"] >= 1 and len(m["load_average"]) == 3
    assert {"python", "numba", "torch", "nbgrader"} <= set(m["versions"])
    assert bench["date"][:4].isdigit()


@pytest.mark.slow
def test_one_submission(bench):
    p = bench["one_submission"]
    for key in ("ours", "nbgrader"):
        assert _spread_ok(p[key]["wall_s"]) and _spread_ok(p[key]["cpu_s"])
        assert "/" in p[key]["score"]
    assert p["ratio"] == pytest.approx(
        p["nbgrader"]["wall_s"]["median"] / p["ours"]["wall_s"]["median"], rel=1e-2
    )
    assert p["cpu_ratio"] == pytest.approx(
        p["nbgrader"]["cpu_s"]["median"] / p["ours"]["cpu_s"]["median"], rel=1e-2
    )
    assert p["met"] == (p["ratio"] >= p["target"])
    assert p["cpu_counts"] in ("cgroup (all processes)", "getrusage (no workers)")


@pytest.mark.slow
def test_class_throughput(bench):
    p = bench["class_throughput"]
    for key in ("j1", "j2"):
        r = p[key]
        assert r["submissions"] == p["submissions"] and r["failed"] == 0
        for f in ("wall_s", "cpu_s", "per_minute", "seconds_per_submission"):
            assert _positive(r[f]), (key, f, r[f])
        assert r["per_minute"] == pytest.approx(r["submissions"] / r["wall_s"] * 60, rel=1e-2)
        assert r["per_submission_after"] and all(map(_positive, r["per_submission_after"].values()))
        assert all(map(_positive, r["gradebook_record_ms"].values()))
    assert p["speedup"] == pytest.approx(p["j1"]["wall_s"] / p["j2"]["wall_s"], rel=1e-2)
    assert _positive(p["per_submission_growth"])


@pytest.mark.slow
def test_startup(bench):
    p = bench["startup"]
    for key in ("help", "check"):
        assert _spread_ok(p[key]["wall_s"])
        assert p[key]["importtime"]["top_cumulative"]
    w = p["worker"]
    for key in ("start_and_load_s", "roundtrip_ms", "ptx_worker_first_compile_s"):
        assert _spread_ok(w[key])
    assert w["importtime"]["top_cumulative"] and _positive(w["isolation_probe_s"])
    assert _spread_ok(w["spawn"]["bare_ms"]) and _spread_ok(w["spawn"]["bubblewrap_ms"])


@pytest.mark.slow
def test_gpu_part(bench):
    if device.has_gpu():
        g = bench["gpu"]
        assert _positive(g["vector_add_2^24"]["gbs"]) and _positive(g["coalescing_slowdown_8192"])
    else:
        assert bench["gpu"] == {"skipped": "no CUDA GPU on this machine"}


def test_side_by_side_puts_after_beside_before_with_the_ratio():
    after = {"median": 3.0, "min": 2.5, "max": 4.0, "n": 3}
    before = {"median": 2.0, "min": 1.5, "max": 2.25, "n": 3}
    once = {"median": 120.0, "min": 120.0, "max": 120.0, "n": 1}
    rows = [
        ("grader grade, wall", "s", compare.compared(after, before, [1.25, 2.5, 0.5])),
        ("round trip", "ms", compare.compared(once, {**once, "median": 0.0}, [3.0])),
    ]
    assert rows[0][2]["ratio"] == 1.5 and rows[0][2]["load"] == [0.5, 2.5]
    headers, cells = compare.side_by_side(rows, before="5bcf4f3", after="abc1234")
    assert headers == ["what", "after (abc1234)", "before (5bcf4f3)", "after/before", "load avg"]
    assert cells[0] == [
        "grader grade, wall",
        "3.00 s (2.50-4.00)",
        "2.00 s (1.50-2.25)",
        "1.50",
        "0.5-2.5",
    ]
    # one run: no spread; a zero before: no ratio rather than a division error
    assert cells[1] == ["round trip", "120.00 ms", "0.00 ms", "-", "3.0-3.0"]
