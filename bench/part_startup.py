"""Part 3: start-up. `grader --help` and `grader check gpu_fundamentals` as cold processes, the
sandboxed worker's start-up and first notebook load, the PTX worker's first compile, the
isolation probe, and what bubblewrap adds to a worker start.

`worker_startup` drives the sandboxed worker through `grader.sandbox.WorkerBackend` only: the
first `has` request (start, imports, first notebook load), a second one (the round trip), the
first `ptx` (the PTX worker's start, load and compile). Its import profile is taken from the
worker's own imports and notebook load run in a process that is not sandboxed (the worker's
scrubbed environment drops `PYTHONPROFILEIMPORTTIME`): that child's code names the modules the
worker imports; it is text run in a child, not an API this module calls.

Changed in how it is taken: what bubblewrap adds per start (`spawn_cost`) used to be
`python -c pass` started bare and through `grader.sandbox.spawn.spawn` by hand (a uid lease, a
prepared work directory). It is now a `WorkerBackend` kernel worker started and pinged
(`kernel({"op": "ping"})`), once under the grading's `decide()` (bubblewrap, every layer) and once
under a `Decision` for a probe that found no layer (`allow_incomplete`: no bubblewrap), in
turn; `overhead_ms` is still the difference of the medians. Both figures now include the
worker's interpreter start and imports, so they are larger than before; the difference is
what the isolation adds to a real worker start.

Contract: `part_startup(tmp, runs, trees)` prints the part's table and returns its JSON
(`startup`): `help`, `check` (wall, CPU, rc, importtime), `worker` (`worker_startup`'s figures),
and with trees `before` and `compare`. `worker_startup` is what `compare.Tree.call` runs in a
tree's child process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from compare import Tree, compared
from timing import (
    ASSIGNMENT,
    ROOT,
    VENV_BIN,
    importtime_top,
    load,
    print_compare,
    sample_class,
    spread,
    summary,
    table,
    timed_run,
    top_text,
)

from grader.core import device
from grader.core.course import load_course
from grader.grading import prepare
from grader.sandbox import ALL_LAYERS, WorkerBackend
from grader.sandbox.isolation import Decision, Probe, decide, probe

COMMANDS = (("help", ["--help"]), ("check", ["check", ASSIGNMENT]))
HAS = {"assignment": ASSIGNMENT, "op": "has", "name": "vector_add"}
SIGNATURE = "void(float32[:], float32[:], float32[:])"
# The worker's imports and first notebook load, outside the sandbox, for `-X importtime`.
WORKER_IMPORTS = (
    "import os, sys\n"
    "from grader.core import device; device.prepare_numba()\n"
    "import grader.sandbox.worker, grader.sandbox.wire\n"
    "from grader.sandbox.harness import Harness\n"
    f"h = Harness(sys.argv[1], {ASSIGNMENT!r}); assert h.load() == {{'ok': None}}\n"
)
# Compared before and after: (key, what, unit).
COMPARED = (
    ("help", "python -m grader --help", "s"),
    ("check", "python -m grader check gpu_fundamentals", "s"),
    ("start_and_load_s", "worker start + notebook load", "s"),
    ("roundtrip_ms", "worker round trip (has)", "ms"),
    ("ptx_worker_first_compile_s", "PTX worker start + load + compile", "s"),
    ("bubblewrap_ms", "in bubblewrap: worker + ping (python -c pass before the split)", "ms"),
)


def worker_env() -> dict[str, str]:
    """The environment of the unsandboxed import-profile child: this tree, the device."""
    env = {
        **os.environ,
        "GRADER_DEVICE": "gpu" if device.has_gpu() else "cpu",
        "PYTHONPATH": str(ROOT),
    }
    if not device.has_gpu():
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    return env


def bare_decision(seen: Probe) -> Decision:
    """A non-authoritative decision as for a machine where no layer holds: its workers start
    without bubblewrap (the bench's baseline for what the isolation adds)."""
    nothing = Probe(
        layers=(),
        missing={x: "bench baseline: started without bubblewrap" for x in ALL_LAYERS},
        mode=seen.mode,
        bwrap=None,
    )
    return Decision(nothing, allow_incomplete=True)


def _ping_start_ms(work: Path, decision: Decision) -> float:
    """A fresh kernel worker under `decision`, started and pinged: milliseconds."""
    limits = load_course(ROOT).limits
    wb = WorkerBackend(work, {}, limits, gpu=device.has_gpu(), decision=decision)
    try:
        t0 = time.perf_counter()
        reply = wb.kernel({"op": "ping"}, 60, target="run")
        ms = (time.perf_counter() - t0) * 1e3
    finally:
        wb.close()
    if "ok" not in reply:
        raise RuntimeError(f"the kernel worker's ping failed: {str(reply)[:300]}")
    return ms


def spawn_cost(tmp: Path, runs: int) -> dict:
    """What bubblewrap adds to each worker start: a kernel worker started and pinged without
    bubblewrap and with the grading's isolation, in turn (see the module docstring)."""
    boxed_decision = decide()
    bare = bare_decision(boxed_decision.probe)
    work = tmp / "spawn" / "work"
    work.mkdir(parents=True)
    plain, boxed = [], []
    for _ in range(max(runs, 5)):
        plain.append(_ping_start_ms(work, bare))
        boxed.append(_ping_start_ms(work, boxed_decision))
    b, w = summary(plain), summary(boxed)
    return {
        "what": "kernel worker start + ping (WorkerBackend.kernel)",
        "bare_ms": b,
        "bubblewrap_ms": w,
        "overhead_ms": round(w["median"] - b["median"], 1),
        "as": "root" if os.geteuid() == 0 else "ordinary user",
    }


def _worker_round(submission: Path, work: Path) -> tuple[float, float, float]:
    """One fresh WorkerBackend: seconds to the first reply, ms of the second, seconds of the
    first PTX compile."""
    course = load_course(ROOT)
    intake = prepare(submission, work, course, ROOT / "exercises")
    wb = WorkerBackend(work, intake.notebooks, course.limits, gpu=device.has_gpu())
    try:
        t0 = time.perf_counter()
        reply = wb.request(HAS, 120)
        t1 = time.perf_counter()
        wb.request(HAS, 120)
        t2 = time.perf_counter()
        preply = wb.ptx(ASSIGNMENT, "vector_add", SIGNATURE, (7, 5), 120)
        t3 = time.perf_counter()
    finally:
        wb.close()
    if reply != {"ok": True} or "ok" not in preply:
        raise RuntimeError(f"worker replied {reply!r} / {str(preply)[:300]}")
    return t1 - t0, (t2 - t1) * 1e3, t3 - t2


def worker_startup(tmp: Path, runs: int) -> dict:
    """The sandboxed worker's start-up + first notebook load, and the PTX worker's first compile."""
    submission = sample_class(tmp / "class") / "ada_reference"
    t0 = time.perf_counter()
    layers = probe().layers
    probe_s = time.perf_counter() - t0
    first, again, ptx, loads = [], [], [], []
    for i in range(runs):
        la = load()
        start, roundtrip, compiled = _worker_round(submission, tmp / f"work{i}")
        first.append(start)
        again.append(roundtrip)
        ptx.append(compiled)
        loads.append(la)
    nb = tmp / "work0" / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.py"
    imp = subprocess.run(
        [sys.executable, "-X", "importtime", "-P", "-s", "-c", WORKER_IMPORTS, str(nb)],
        cwd=tmp,
        env=worker_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    return {
        "isolation": list(layers),
        "isolation_probe_s": round(probe_s, 3),
        "spawn": spawn_cost(tmp, runs),
        "start_and_load_s": summary(first),
        "roundtrip_ms": summary(again),
        "ptx_worker_first_compile_s": summary(ptx),
        "load": loads,
        "importtime": importtime_top(imp.stderr),
    }


def _tree_figures(r: dict) -> dict:
    """One tree's rounds (`_startup_before_after`) as summaries."""
    out = {
        key: {
            "wall_s": summary([x["wall_s"] for x in r[key]]),
            "load": [x["load"][0] for x in r[key]],
            "rc": r[key][-1]["rc"],
        }
        for key, _ in COMMANDS
    }
    for key in ("start_and_load_s", "roundtrip_ms", "ptx_worker_first_compile_s"):
        out[key] = summary([w[key]["median"] for w in r["worker"]])
    out["bubblewrap_ms"] = summary([w["spawn"]["bubblewrap_ms"]["median"] for w in r["worker"]])
    out["worker_load"] = [x for w in r["worker"] for x in w["load"]]
    return out


def _startup_before_after(tmp: Path, runs: int, trees: tuple[Tree, Tree]) -> dict:
    """Part 3's figures for both trees, round by round: the two commands, then the worker's
    start-up (each tree's own worker_startup, one run per round, in a child process)."""
    rounds: dict = {t.label: {"help": [], "check": [], "worker": []} for t in trees}
    for i in range(runs):
        for key, args in COMMANDS:
            for t in trees:
                rounds[t.label][key].append(timed_run(t.grader(*args), t.root, t.env))
        for t in trees:
            rounds[t.label]["worker"].append(
                t.call("worker_startup", tmp=tmp / f"{t.label}{i}", runs=1)
            )
    return {t.label: _tree_figures(rounds[t.label]) for t in trees}


def _compare_rows(after: dict, before: dict) -> tuple[dict, list[tuple[str, str, dict]]]:
    """The `compare` JSON and the side-by-side rows of part 3."""
    out, rows = {}, []
    for key, what, unit in COMPARED:
        if key in ("help", "check"):
            a, b = after[key], before[key]
        else:
            a = {"wall_s": after[key], "load": after["worker_load"]}
            b = {"wall_s": before[key], "load": before["worker_load"]}
        out[key] = compared(a["wall_s"], b["wall_s"], [*a["load"], *b["load"]])
        rows.append((what, unit, out[key]))
    return out, rows


def _command(args: list[str], runs: int) -> dict:
    """`grader ARGS` as cold processes, and once under `-X importtime`."""
    grader_bin = str(VENV_BIN / "grader")
    rs = [timed_run([grader_bin, *args], ROOT) for _ in range(runs)]
    imp = timed_run([sys.executable, "-X", "importtime", grader_bin, *args], ROOT)
    return {
        "command": f"grader {' '.join(args)}",
        "wall_s": summary([r["wall_s"] for r in rs]),
        "cpu_s": summary([r["cpu_s"] for r in rs]),
        "rc": rs[-1]["rc"],
        "load": [r["load"][0] for r in rs],
        "importtime": importtime_top(imp["stderr"]),
    }


def _print(res: dict) -> None:
    print("\n## 3. Start-up\n")
    w = res["worker"]
    rows = [
        ["grader --help", spread(res["help"]["wall_s"]), top_text(res["help"]["importtime"])],
        [
            "grader check gpu_fundamentals",
            spread(res["check"]["wall_s"]),
            top_text(res["check"]["importtime"]),
        ],
        ["worker start + notebook load", spread(w["start_and_load_s"]), top_text(w["importtime"])],
        ["worker round trip (has)", spread(w["roundtrip_ms"], "ms"), ""],
        ["PTX worker start + load + compile", spread(w["ptx_worker_first_compile_s"]), ""],
        ["sandbox isolation probe (once per process)", f"{w['isolation_probe_s']:.2f} s", ""],
        ["kernel worker start + ping, no bubblewrap", spread(w["spawn"]["bare_ms"], "ms"), ""],
        [
            f"kernel worker start + ping, in bubblewrap ({w['spawn']['as']})",
            spread(w["spawn"]["bubblewrap_ms"], "ms"),
            f"+{w['spawn']['overhead_ms']:.0f} ms per worker start",
        ],
    ]
    print(table(["what", "wall median (min-max)", "top imports, cumulative ms"], rows))
    for key, label in (("help", "grader --help"), ("check", "grader check"), ("worker", "worker")):
        imp = res[key]["importtime"]
        print(
            f"  most self time, {label}: "
            + ", ".join(f"{e['module']} {e['self_ms']:.0f} ms" for e in imp["top_self"][:4])
        )


def part_startup(tmp: Path, runs: int, trees: tuple[Tree, Tree] | None = None) -> dict:
    """Part 3: `grader --help`, `grader check gpu_fundamentals`, the worker's start-up (with
    `trees`: also both trees side by side, as `python -m grader`)."""
    res: dict = {}
    if trees:
        both = _startup_before_after(tmp / "compare", runs, trees)
        res["before"] = both[trees[1].label]
        res["compare"], compare_rows = _compare_rows(both[trees[0].label], res["before"])
    for key, args in COMMANDS:
        res[key] = _command(args, runs)
    res["worker"] = worker_startup(tmp / "worker", runs)
    _print(res)
    if trees:
        print_compare("3. Start-up, before and after", trees, compare_rows)
    res["load"] = [load()]
    return res
