"""`make gpu-check`: prove the whole GPU path on one machine in minutes, and keep every figure.

Run it on a GPU machine before it grades anything (a borrowed GPU, an instructor's runner before
term; the `gpu-check` workflow of .github/workflows/ci.yml does it on a runner):

    .venv/bin/python tools/gpu_check.py [--json gpu-check.json] [--budget-s 480]

Steps, each bounded by what is left of the budget (8 minutes by default, the most a session
with 15 minutes of GPU time can give it):

1. preflight: `grader.core.preflight` (a numba-cuda kernel and a torch operation in a fresh
   process), the driver, CUDA, and the GPU's clocks and temperature through NVML;
2. suites: every `gpu`-marked test of tests/hidden and tests/public against the reference, in
   this process, with each timed test's figures (docs/TIMING.md): per target the kernel time
   from CUDA events and, beside it, the host's launch cost; per check the ratio's interval and
   coverage, the threshold, the margin, and the rounds it took (kept and discarded);
3. unit: every `gpu`-marked test of tests/unit (the timing red team at full size, the
   preflight, the occupancy oracle against the driver...);
4. sandbox: the demo's sample class graded by `grader grade-all` in the sandbox on the GPU, as
   root and as an ordinary user (bubblewrap, seccomp, the device nodes, the memory watchdog
   under the real driver), and once on the CPU (the simulator): every test that is not
   GPU-marked must score the same, so each student's GPU score is the CPU score plus the GPU
   tests' points;
5. bench: part 4 of bench/run.py (the reference kernels against torch, by the same routine).

It writes one JSON (every figure) and prints a one-screen summary; it exits 0 when every step
passed, 1 when one failed, and 3 (`ExitCode.INFRASTRUCTURE`) on a machine without a GPU (one
line says so) or when the preflight fails. `--fake` runs the timing of step 2 against a fake
H200 with a 50 us launch path instead (no GPU, nothing else run) so that the JSON and the
summary can be seen and tested anywhere; everything it prints says FAKE.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.core.errors import ExitCode  # noqa: E402 - after the path: run as a script

SCHEMA = "gpu-check/1"
BUDGET_S = 480.0
NO_GPU = (
    "gpu-check: no NVIDIA GPU on this machine (no /dev/nvidia0, no nvidia-smi): nothing checked"
)
ROOT_CLASS = ("ada_reference", "bob_untouched", "cy_partial", "eve_hangs")
USER_CLASS = ("ada_reference",)
UNPRIVILEGED_UID = 65534  # nobody: the ordinary user when this runs as root


def gpu_present() -> bool:
    """The device probe, not `grader.core.device.has_gpu` (which GRADER_DEVICE can force)."""
    return os.path.exists("/dev/nvidia0") or shutil.which("nvidia-smi") is not None


class Budget:
    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.clock, self.end = clock, clock() + seconds

    def left(self) -> float:
        return max(0.0, self.end - self.clock())


def step(report: dict, name: str, budget: Budget, run: Callable[[], dict]) -> dict:
    """Run one step, record its outcome, figures and seconds; never let it stop the others."""
    t0 = time.monotonic()
    if budget.left() < 5:
        out = {"status": "failed", "why": "not run: the budget was spent"}
    else:
        try:
            out = run()
        except subprocess.TimeoutExpired as exc:
            out = {"status": "failed", "why": f"over budget: {exc.cmd!r} ran {exc.timeout:.0f} s"}
        except Exception as exc:  # noqa: BLE001 - every failure is a finding, recorded
            out = {"status": "failed", "why": f"{type(exc).__name__}: {exc}"[:2000]}
    out["seconds"] = round(time.monotonic() - t0, 1)
    report["steps"][name] = out
    return out


# ------------------------------------------------------------------------------ the steps


def preflight() -> dict:
    from grader.core import nvml
    from grader.core.preflight import gpu_preflight

    check = gpu_preflight()
    return {"status": "passed", **check.__dict__, "nvml": nvml.snapshot()}


def gpu_tests(root: Path = ROOT) -> dict[str, list[str]]:
    """The `gpu`-marked test functions of each assignment's suites, by assignment."""
    out: dict[str, list[str]] = {}
    for path in sorted((root / "tests").glob("*/*/test_*.py")):
        if path.parts[-3] not in ("hidden", "public"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and any(
                ast.unparse(d) == "pytest.mark.gpu" for d in node.decorator_list
            ):
                out.setdefault(path.parent.name, []).append(node.name)
    return out


def suites() -> dict:
    from grader.suites.runner import run_assignment

    tests, ok = [], True
    for assignment, names in gpu_tests().items():
        result = run_assignment(
            ROOT, assignment, ROOT / "solutions", select=" or ".join(names), quiet=True
        )
        ok &= result.error is None
        for t in result.tests:
            tests.append(
                {
                    "test": t.name,
                    "outcome": t.outcome,
                    "score": t.score,
                    "max_score": t.max_score,
                    "seconds": round(t.duration_s, 1),
                    "feedback": t.feedback[:600],
                    "timings": t.timings,
                }
            )
            ok &= t.outcome == "passed"
    return {"status": "passed" if ok and tests else "failed", "tests": tests}


def unit(budget: Budget) -> dict:
    with tempfile.TemporaryDirectory(prefix="gpu-check-unit-") as tmp:
        xml = Path(tmp) / "unit.xml"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "tests/unit",
            "-m",
            "gpu",
            "-q",
            "-n",
            "0",
            f"--junitxml={xml}",
            "-p",
            "no:cacheprovider",
        ]
        proc = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=budget.left(), check=False
        )
        cases = []
        if xml.is_file():
            for case in ET.parse(xml).getroot().iter("testcase"):
                kind = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "")
                cases.append(
                    {
                        "test": f"{case.get('classname')}::{case.get('name')}",
                        "outcome": {"": "passed", "failure": "failed"}.get(kind, kind),
                        "seconds": round(float(case.get("time") or 0), 1),
                    }
                )
    tail = (proc.stdout.strip().splitlines() or [""])[-1]
    passed = proc.returncode == 0 and cases and all(c["outcome"] == "passed" for c in cases)
    return {
        "status": "passed" if passed else "failed",
        "rc": proc.returncode,
        "summary": tail,
        "tests": cases,
    }


def _grade_all(cmd_prefix: list[str], klass: Path, out: Path, env: dict, budget: Budget) -> dict:
    cmd = [
        *cmd_prefix,
        sys.executable,
        "-m",
        "grader",
        "--root",
        str(ROOT),
        "grade-all",
        str(klass),
        "--out",
        str(out),
        "-j",
        "1",
        "--force",
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, timeout=budget.left(), check=False
    )
    results = {}
    for student_dir in sorted(p for p in out.iterdir() if p.is_dir()):
        result = student_dir / "result.json"
        if result.is_file():
            results[student_dir.name] = json.loads(result.read_text(encoding="utf-8"))
    return {"rc": proc.returncode, "tail": proc.stderr.strip()[-800:], "results": results}


def _scores(result: dict, gpu: set[str]) -> dict:
    """A result's test scores split: the GPU-marked tests' and the others'."""
    cpu_tests, gpu_points = {}, 0.0
    for a in result["assignments"]:
        for t in a["tests"]:
            if t["name"].rsplit("/", 1)[-1] in gpu:
                gpu_points += t["score"]
            else:
                cpu_tests[t["name"]] = t["score"]
    return {"score": result["score"], "gpu_points": gpu_points, "tests": cpu_tests}


def compare(cpu: dict, graded: dict, gpu: set[str], students: tuple[str, ...]) -> list[dict]:
    """Per student: the GPU grading's non-GPU tests score what the CPU grading's do, and its
    total is the CPU total plus the GPU tests' points."""
    rows = []
    for s in students:
        if s not in cpu or s not in graded:
            rows.append({"student": s, "ok": False, "why": "no result.json"})
            continue
        c, g = _scores(cpu[s], gpu), _scores(graded[s], gpu)
        differ = sorted(k for k in c["tests"] if g["tests"].get(k) != c["tests"][k])
        total_ok = math.isclose(g["score"], c["score"] + g["gpu_points"], abs_tol=1e-9)
        rows.append(
            {
                "student": s,
                "cpu_score": c["score"],
                "gpu_score": g["score"],
                "gpu_points": g["gpu_points"],
                "differ": differ[:10],
                "ok": not differ and total_ok,
            }
        )
    return rows


def sandbox(budget: Budget) -> dict:
    from grader.core.course import load_course
    from grader.demo import build_sample_class

    gpu = {n for names in gpu_tests().values() for n in names}
    with tempfile.TemporaryDirectory(prefix="gpu-check-class-") as tmp:
        base = Path(tmp)
        os.chmod(base, 0o755)
        klass = base / "class"
        build_sample_class(load_course(ROOT), klass)
        for d in klass.iterdir():
            if d.name not in ROOT_CLASS:
                shutil.rmtree(d)
        env = dict(os.environ)
        outs = {k: base / k for k in ("cpu", "root", "user")}
        for o in outs.values():
            o.mkdir()
            os.chmod(o, 0o777)
        cpu = _grade_all([], klass, outs["cpu"], {**env, "GRADER_DEVICE": "cpu"}, budget)
        runs: dict[str, Any] = {}
        as_root, as_user = _identities(base)
        if as_root is None:
            runs["root"] = {"status": "failed", "why": "not root and no passwordless sudo"}
        else:
            runs["root"] = _grade_all(as_root, klass, outs["root"], env, budget)
        user_class = base / "user-class"
        shutil.copytree(klass / USER_CLASS[0], user_class / USER_CLASS[0])
        runs["user"] = _grade_all(
            as_user, user_class, outs["user"], {**env, "HOME": str(base)}, budget
        )
        report: dict = {"cpu_rc": cpu["rc"], "cpu_tail": cpu["tail"]}
        ok = bool(cpu["results"])
        for who, students in (("root", ROOT_CLASS), ("user", USER_CLASS)):
            run = runs[who]
            if "results" not in run:
                report[who] = run
                ok = False
                continue
            rows = compare(cpu["results"], run["results"], gpu, students)
            refused = [
                s for s, r in run["results"].items() if r["environment"]["not_authoritative"]
            ]
            ok &= all(r["ok"] for r in rows) and not refused and run["rc"] in (0, 1)
            report[who] = {
                "rc": run["rc"],
                "students": rows,
                "not_authoritative": refused,
                "tail": run["tail"],
            }
    report["status"] = "passed" if ok else "failed"
    return report


def _identities(base: Path) -> tuple[list[str] | None, list[str]]:
    """Command prefixes that run a command as root and as an ordinary user."""
    if os.geteuid() == 0:
        user = [
            "setpriv",
            f"--reuid={UNPRIVILEGED_UID}",
            f"--regid={UNPRIVILEGED_UID}",
            "--clear-groups",
            "--",
        ]
        return [], user
    sudo = shutil.which("sudo")
    ok = (
        sudo
        and subprocess.run([sudo, "-n", "true"], capture_output=True, check=False).returncode == 0
    )
    return ([sudo, "-n", "-E"] if ok else None), []


def bench(budget: Budget) -> dict:
    with tempfile.TemporaryDirectory(prefix="gpu-check-bench-") as tmp:
        out = Path(tmp) / "bench.json"
        proc = subprocess.run(
            [
                sys.executable,
                "bench/run.py",
                "--gpu-only",
                "--quick",
                "--no-gpu-suite",
                "--json",
                str(out),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=budget.left(),
            check=False,
        )
        figures = json.loads(out.read_text()).get("gpu", {}) if out.is_file() else {}
    ok = proc.returncode == 0 and "vector_add_2^24" in figures
    return {
        "status": "passed" if ok else "failed",
        "rc": proc.returncode,
        "figures": figures,
        "tail": proc.stderr.strip()[-800:],
    }


# ------------------------------------------------------------------------------ the fake device


FAKE_PEAK, FAKE_LAUNCH_S = 4800e9, 50e-6  # a fake H200 behind a slow (50 us) Numba launch path


def fake_target(label: str, nbytes: int, fraction: float, seed: int, clock: Any) -> Any:
    """A timing target on the fake device: each launch's GPU time its bytes over `fraction` of
    the peak with 3% noise, every launch queued behind a hold that outlasts the host's launch
    cost, as the harness does; the fake wall clock sees hold, launches and all."""
    import numpy as np

    from grader.core import timing

    class Fake:
        def __init__(self) -> None:
            self.label, self.min_bytes = label, nbytes
            self.rng = np.random.default_rng(seed)

        def prepare(self) -> None:
            clock.now += 1e-3

        def run(self, launches: int) -> timing.Sample:
            per = nbytes / (FAKE_PEAK * fraction)
            gpu = [per * math.exp(self.rng.normal(0, 0.03)) for _ in range(launches)]
            wall = 1.5 * launches * FAKE_LAUNCH_S + sum(gpu)
            clock.now += wall
            return timing.Sample(gpu, wall, FAKE_LAUNCH_S, True, 0)

        def check(self, launches: int) -> None:
            clock.now += 1e-3

    return Fake()


def fake_suites() -> dict:
    """Step 2's figures from the timing routine on a fake H200 (no GPU): the three timed tests'
    targets and thresholds as the hidden tests set them, a 50 us launch path beside each."""
    from grader.core import timing

    class Clock:
        now = 0.0

        def __call__(self) -> float:
            return self.now

    clock = Clock()
    big, vec = 2 * 8192 * 8192 * 4, 12 * 2**24

    def t(label: str, nbytes: int, fraction: float, seed: int) -> Any:
        return fake_target(label, nbytes, fraction, seed, clock)

    returned = 2.6  # what the reference's coalescing_slowdown(8192) returns on the fake device
    cases = {
        "test_vector_add_bandwidth": (
            [t("grader a + b", vec, 0.9, 1), t("vector_add", vec, 0.88, 2)],
            [timing.Check("vector_add vs grader a + b", "vector_add", "grader a + b", 1 / 0.6)],
        ),
        "test_coalescing_slowdown_gpu": (
            [t("strided_copy", big, 0.85, 3), t("transpose_naive", big, 0.3, 4)],
            [
                timing.Check(
                    "returned at most 2x", "transpose_naive", "strided_copy", returned / 2, False
                ),
                timing.Check(
                    "returned at least half", "transpose_naive", "strided_copy", 2 * returned
                ),
            ],
        ),
        "test_transposes_bandwidth_gpu": (
            [
                t("strided_copy", big, 0.85, 5),
                t("transpose_tiled", big, 0.8, 6),
                t("transpose_naive", big, 0.3, 7),
            ],
            [
                timing.Check("tiled at least half", "transpose_tiled", "strided_copy", 2.0),
                timing.Check("naive slower", "transpose_naive", "transpose_tiled", 1.0, False),
            ],
        ),
    }
    tests, device = [], timing.Device("FAKE H200 (4800 GB/s, 50 us launches)", FAKE_PEAK)
    for name, (targets, checks) in cases.items():
        judged = timing.judge(targets, checks, timing.Policy(), device, clock)
        record = judged.record()
        for entry in record["targets"]:
            entry["gbs"] = round(entry_bytes(targets, entry) / (entry["median_ms"] * 1e-3) / 1e9, 1)
        record["device"] = {"name": device.name, "peak_bandwidth_gbs": FAKE_PEAK / 1e9}
        passed = all(v.passed for v in judged.verdicts)
        tests.append(
            {
                "test": f"hidden/{name}",
                "outcome": "passed" if passed else "failed",
                "seconds": round(judged.elapsed_s, 1),
                "timings": [record],
            }
        )
    return {"status": "passed", "tests": tests, "fake": True}


def entry_bytes(targets: list, entry: dict) -> int:
    return next(t.min_bytes for t in targets if t.label == entry["label"])


# ------------------------------------------------------------------------------ the summary


def summary(report: dict) -> str:
    """One screen: the device, each step, each timing with its spread, each verdict's margin."""
    d = report.get("device", {})
    n = d.get("nvml") or {}
    lines = [
        f"gpu-check {'(FAKE device) ' if report.get('fake') else ''}{report['date']}: "
        f"{d.get('device', '?')}, driver {d.get('driver', '?')}, CUDA {d.get('cuda', '?')}, "
        f"SM {n.get('sm_clock_mhz', '?')}/{n.get('max_sm_clock_mhz', '?')} MHz, "
        f"{n.get('temperature_c', '?')} C",
        "",
        f"{'step':10s} {'status':8s} {'s':>6s}  detail",
    ]
    for name, s in report["steps"].items():
        detail = s.get("why") or s.get("summary") or ""
        lines.append(f"{name:10s} {s['status']:8s} {s['seconds']:6.1f}  {detail[:70]}")
    lines += [
        "",
        f"{'timed test / target':34s} {'kernel ms':>10s} {'spread':>7s} {'launch us':>9s} "
        f"{'GB/s':>6s}",
    ]
    for t in report["steps"].get("suites", {}).get("tests", []):
        for rec in t.get("timings", []):
            lines.append(
                f"{t['test'].split('/')[-1]} ({t['outcome']}, {rec.get('rounds', '?')} rounds, "
                f"{rec.get('discarded_rounds', 0)} discarded)"
            )
            for e in rec["targets"]:
                launch = e.get("launch_us")
                lines.append(
                    f"  {e['label']:32s} {e['median_ms']:10.4f} {e['spread'] * 100:6.1f}% "
                    f"{'-' if launch is None else f'{launch:.1f}':>9s} {e.get('gbs', 0):6.0f}"
                )
            for v in rec["verdicts"]:
                mark = "ok" if v["passed"] else "FAIL"
                how = " (by median)" if v["decided_by_median"] else ""
                lines.append(
                    f"  {mark:4s} {v['ratio']:34s} {v['median']:.3f} [{v['low']:.3f}-"
                    f"{v['high']:.3f}, {v.get('coverage', 0):.1%}] "
                    f"{'<' if v['passes_if'] == 'below' else '>'} {v['threshold']:.3g}: "
                    f"margin {v['margin']:.2f}x{how}"
                )
    sb = report["steps"].get("sandbox", {})
    for who in ("root", "user"):
        for r in sb.get(who, {}).get("students", []) if isinstance(sb.get(who), dict) else []:
            lines.append(
                f"sandbox {who:4s} {r['student']:14s} cpu {r.get('cpu_score', '?')} + gpu "
                f"{r.get('gpu_points', '?')} = {r.get('gpu_score', '?')} "
                f"{'ok' if r['ok'] else 'MISMATCH ' + str(r.get('differ') or r.get('why'))}"
            )
    lines += [
        "",
        f"{'PASSED' if report['ok'] else 'FAILED'} in {report['seconds']:.0f} s; "
        f"every figure in {report['json']}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tools/gpu_check.py", description=__doc__.split("\n")[0])
    p.add_argument("--json", default="gpu-check.json", help="where every figure is written")
    p.add_argument("--budget-s", type=float, default=BUDGET_S, help="the whole run's limit")
    p.add_argument("--fake", action="store_true", help="step 2's timing on a fake device only")
    args = p.parse_args(argv)
    if not args.fake and not gpu_present():
        print(NO_GPU)
        return ExitCode.INFRASTRUCTURE
    started = time.monotonic()
    budget = Budget(args.budget_s)
    report: dict = {
        "schema": SCHEMA,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "fake": args.fake,
        "budget_s": args.budget_s,
        "steps": {},
        "json": args.json,
    }
    if args.fake:
        report["device"] = {"device": "FAKE H200", "driver": "fake", "cuda": "fake", "nvml": {}}
        step(report, "suites", budget, fake_suites)
    else:
        os.environ.pop("GRADER_DEVICE", None)
        first = step(report, "preflight", budget, preflight)
        report["device"] = {
            k: first.get(k) for k in ("device", "driver", "cuda", "numba_cuda", "torch", "nvml")
        }
        if first["status"] == "passed":
            step(report, "suites", budget, suites)
            step(report, "unit", budget, lambda: unit(budget))
            step(report, "sandbox", budget, lambda: sandbox(budget))
            step(report, "bench", budget, lambda: bench(budget))
    report["ok"] = all(s["status"] == "passed" for s in report["steps"].values())
    report["seconds"] = round(time.monotonic() - started, 1)
    Path(args.json).write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    print(summary(report))
    if report["steps"].get("preflight", {}).get("status") == "failed":
        return ExitCode.INFRASTRUCTURE
    return ExitCode.OK if report["ok"] else ExitCode.FAILED


if __name__ == "__main__":
    raise SystemExit(main())
