"""One memory limit per worker, covering every process it starts: a cgroup, else a watchdog.

RLIMIT_AS bounds one process; a worker that forks gets that much again per child. So the limit
that counts is the worker's whole process tree:

* where the host offers cgroup v2 through systemd (GitHub's Ubuntu runners: root, or an ordinary
  user with a user manager), the sandbox starts inside ``systemd-run --scope`` with
  ``MemoryMax`` (no swap) and ``TasksMax``: the kernel itself refuses or kills past it. Whether
  the scope really carries the limit is read back from the started process's own cgroup
  (`verify_scope`), never assumed;
* always, the trusted side's `Watchdog` sums the resident memory of the worker's process tree
  every `PERIOD_S` (the cheap sum of resident sizes; past the limit, the proportional sum, so
  that pages forked children share count once) and kills the tree over the limit, which the
  backend reports as a memory kill. On a host without a usable cgroup (cgroup v1, no
  systemd, a container) it is the enforcement; with one it is the second line.

`WorkerBackend.isolation` names which enforced it: ``memory-cgroup`` or ``memory-watchdog``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from grader.sandbox.procs import descendants

PERIOD_S = 0.1
CGROUP_ROOT = Path("/sys/fs/cgroup")
EXTRA_TASKS = 8  # bubblewrap, its init, setpriv: on top of the worker's own process limit
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def _systemd_run() -> list[str] | None:
    exe = shutil.which("systemd-run", path="/usr/bin:/bin")
    if exe is None or not (CGROUP_ROOT / "cgroup.controllers").is_file():
        return None  # cgroup v1 or hybrid: no memory.max to set
    user = [] if os.geteuid() == 0 else ["--user"]
    return [exe, *user, "--scope", "--quiet", "--collect"]


@functools.cache
def scope_prefix_base() -> tuple[str, ...]:
    """``systemd-run --scope`` where it starts a scope with a memory limit here, else ()."""
    base = _systemd_run()
    if base is None:
        return ()
    test = [*base, "-p", "MemoryMax=64M", "-p", "TasksMax=16", "--", "cat", "/proc/self/cgroup"]
    try:
        done = subprocess.run(test, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ()
    if done.returncode != 0 or _memory_max(done.stdout) != 64 << 20:
        return ()
    return tuple(base)


def scope_prefix(memory_mb: int, processes: int) -> list[str]:
    """The command prefix that puts a sandbox under one cgroup memory limit ([] when none)."""
    base = scope_prefix_base()
    if not base:
        return []
    return [
        *base,
        "-p",
        f"MemoryMax={memory_mb}M",
        "-p",
        "MemorySwapMax=0",
        "-p",
        f"TasksMax={processes + EXTRA_TASKS}",
        "--",
    ]


def _memory_max(proc_cgroup: str) -> int | None:
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            path = CGROUP_ROOT / line[3:].strip().lstrip("/") / "memory.max"
            try:
                text = path.read_text().strip()
            except OSError:
                return None
            return int(text) if text.isdigit() else None
    return None


def cgroup_dir(pid: int) -> Path | None:
    """The cgroup v2 directory process `pid` sits in (None when unreadable)."""
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("0::"):
            return CGROUP_ROOT / line[3:].strip().lstrip("/")
    return None


def oom_killed(cgroup: Path | None) -> bool:
    """Whether the kernel killed a process of this cgroup for its memory.max (its
    memory.events ``oom_kill`` count): read by the trusted side, never from the worker."""
    if cgroup is None:
        return False
    try:
        text = (cgroup / "memory.events").read_text()
    except OSError:
        return False  # gone with its scope, or no memory controller: not known
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key in ("oom_kill", "oom_group_kill") and value.strip().isdigit():
            if int(value) > 0:
                return True
    return False


LIMIT = "memory_mb"  # the course.toml key of the memory limit


def kill_message(memory_mb: int) -> str:
    """What a test's feedback says of a worker stopped for its memory (one wording, both
    enforcers)."""
    return f"stopped: the worker and its processes used more than {memory_mb} MB (memory_mb)"


def verify_scope(pid: int, memory_mb: int) -> bool:
    """Whether process `pid` sits in a cgroup whose memory.max is `memory_mb`."""
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False
    return _memory_max(text) == memory_mb << 20


def rss_sum_mb(pids: list[int]) -> float:
    """The resident sizes of these processes added up, in MiB: cheap (statm), and never less
    than what they hold together (pages they share count once per process)."""
    total_pages = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total_pages += int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total_pages * PAGE_BYTES / (1 << 20)


def tree_memory_mb(pids: list[int]) -> float:
    """The memory these processes hold together, in MiB: the sum of their proportional resident
    sizes (a page shared by n of them counts 1/n to each, so forked children are not counted
    twice for what they share), or of their resident sizes where smaps_rollup is unreadable."""
    total_kb = 0
    for pid in pids:
        for path, key in ((f"/proc/{pid}/smaps_rollup", "Pss:"), (f"/proc/{pid}/status", "VmRSS:")):
            try:
                with open(path) as f:
                    found = next((line for line in f if line.startswith(key)), None)
            except (OSError, ValueError):
                continue
            if found is not None:
                total_kb += int(found.split()[1])
                break
    return total_kb / 1024


class Watchdog:
    """Kills a worker's process tree once it holds more than `limit_mb` together (`kill` gets
    the pids it saw); `killed`, set before the kill, tells the backend that the worker's end
    was this memory kill, whatever the worker did or sent meanwhile."""

    def __init__(self, proc: subprocess.Popen, limit_mb: int, kill: Callable[[list[int]], None]):
        self.proc, self.limit_mb, self._kill = proc, limit_mb, kill
        self.killed = False
        self.peak_mb = 0.0
        threading.Thread(target=self._run, daemon=True, name="memory-watchdog").start()

    def _run(self) -> None:
        while self.proc.poll() is None:
            pids = [self.proc.pid, *descendants(self.proc.pid)]
            used = rss_sum_mb(pids)  # an upper bound, 0.3 ms; the exact sum costs 20 ms
            if used > self.limit_mb:
                used = tree_memory_mb(pids)
            self.peak_mb = max(self.peak_mb, used)
            if used > self.limit_mb:
                self.killed = True
                self._kill(pids)
                return
            time.sleep(PERIOD_S)
