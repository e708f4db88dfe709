"""Where one command's CPU goes, by process: every process it starts, read from /proc.

A grading is four to six processes (the trusted `grader grade`, the isolation probe, the
notebook worker, the kernel worker that launches, the compile worker, each under a bubblewrap),
and a cgroup's total says nothing of which of them costs what. `cpu_by_process` runs a command
and, every `interval` seconds until it ends, reads the CPU time (user + system) of the command and
of each of its descendants from /proc; a process's last reading is its CPU time, so one that lived
less than an interval, or the last interval of any, is missed (a few milliseconds each). Each
process is named by its role (`role`, from its command line and, for the compile worker, its
environment), as last read: a bubblewrap process becomes the worker it executes. Linux only;
the bench calls it where /proc exists.

Contract: `cpu_by_process(cmd, cwd, env)` returns ``{role: {"processes": n, "cpu_s": s}}`` plus
``"total"``; `by_process_table(result)` is its printed table, largest first.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PROC = Path("/proc")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a live process, or None."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS


def _read(pid: int, name: str) -> list[str]:
    try:
        data = (PROC / str(pid) / name).read_bytes().decode(errors="replace")
    except OSError:
        return []
    return data.rstrip("\0").split("\0") if data.strip("\0") else []


def role(argv: list[str], environ: list[str]) -> str:
    """What a process of a grading is, from its command line and environment."""
    if not argv:
        return "?"
    text = " ".join(argv)
    if Path(argv[0]).name == "bwrap":
        return "bubblewrap"
    if "-c" in argv and "grader.sandbox" in text:  # the probe's script imports the worker
        return "isolation probe"
    if "grader.sandbox.worker" in text:
        if "--notebook" in text:
            return "notebook worker"
        if not environ:  # another user's process: its environment is closed to this one
            return "kernel or compile worker"
        return "compile worker" if "GRADER_PTX_ONLY=1" in environ else "kernel worker"
    if "-m grader" in text or any(Path(a).name == "grader" for a in argv[:2]):
        return "trusted grader process"
    return Path(argv[0]).name


def cpu_by_process(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
                   interval: float = 0.02, timeout: float = 900) -> dict:  # fmt: skip
    """Run `cmd` and sum the CPU of it and its descendants by role."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    cpu: dict[int, float] = {}
    roles: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        pids = [int(p.name) for p in PROC.iterdir() if p.name.isdigit()]
        stats = {pid: s for pid in pids if (s := _stat(pid)) is not None}
        family = {proc.pid}
        grew = True
        while grew:  # descendants: the parent links, followed until nothing new joins
            new = {pid for pid, (ppid, _) in stats.items() if ppid in family} - family
            family |= new
            grew = bool(new)
        for pid in family & stats.keys():
            cpu[pid] = stats[pid][1]
            # read again each time: a bwrap becomes the worker it execs; an exited one reads "?"
            named = role(_read(pid, "cmdline"), _read(pid, "environ"))
            if named != "?" or pid not in roles:
                roles[pid] = named
        time.sleep(interval)
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    out: dict = {}
    for pid, seconds in cpu.items():
        entry = out.setdefault(roles[pid], {"processes": 0, "cpu_s": 0.0})
        entry["processes"] += 1
        entry["cpu_s"] = round(entry["cpu_s"] + seconds, 3)
    out["total"] = {"processes": len(cpu), "cpu_s": round(sum(cpu.values()), 3)}
    return out


def by_process_table(result: dict) -> tuple[list[str], list[list]]:
    """Headers and rows of the table, largest CPU first, the total last."""
    total = result["total"]["cpu_s"] or 1.0
    rows = [
        [name, r["processes"], f"{r['cpu_s']:.2f} s", f"{100 * r['cpu_s'] / total:.0f}%"]
        for name, r in sorted(result.items(), key=lambda kv: -kv[1]["cpu_s"])
        if name != "total"
    ]
    rows.append(["total", result["total"]["processes"], f"{result['total']['cpu_s']:.2f} s", ""])
    return ["process", "count", "CPU", "share"], rows
