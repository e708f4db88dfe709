"""Every fork that runs Python before exec happens in one thread (`spawn.in_spawn_thread`), and
the at-fork handlers that thread's executor relies on are registered before any thread runs.

Imported lazily, concurrent.futures.thread registered its handlers (a lock's acquire before a
fork, its release after) while another thread could be between the two halves of a fork: the
release then freed a lock that `submit` held in a third thread, which failed with "release
unlocked lock" and lost a worker's start (16 of 150 fresh interpreters, in a stand-alone
reproduction; seen in the corpus batch).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from grader.sandbox import spawn

FRESH = """
import sys, threading
import grader.sandbox.spawn
print("concurrent.futures.thread" in sys.modules, threading.active_count())
"""


def test_the_executors_at_fork_handlers_are_registered_when_spawn_is_imported():
    """In a fresh interpreter: importing the module imports concurrent.futures.thread (its
    handlers registered) and starts no thread; the first sandbox start does that, later."""
    proc = subprocess.run(
        [sys.executable, "-c", FRESH], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["True", "1"], proc.stdout


def test_every_caller_gets_the_same_spawn_thread():
    seen: list[str] = []

    def ask() -> None:
        seen.append(spawn.in_spawn_thread(lambda: threading.current_thread().name))

    callers = [threading.Thread(target=ask) for _ in range(4)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert len(seen) == 4 and len(set(seen)) == 1, seen
    assert seen[0].startswith("sandbox") and seen[0] != threading.current_thread().name


def test_a_uid_lease_clears_the_keyrings_in_the_spawn_thread(monkeypatch):
    """The lease's fork (`procs.clear_user_keyrings`, a `preexec_fn` as the uid) is the other
    fork that runs Python before exec: it goes through the same thread."""
    if os.geteuid() != 0:
        pytest.skip("uid leases are root's (an ordinary user's workers run in a user namespace)")
    if spawn._keyctl_number() is None:
        pytest.skip("no seccomp library here to name keyctl's number: no keyring is cleared")
    threads: list[str] = []
    real = spawn.procs.clear_user_keyrings

    def clear(uid: int, nr: int) -> None:
        threads.append(threading.current_thread().name)
        real(uid, nr)

    monkeypatch.setattr(spawn.procs, "clear_user_keyrings", clear)
    lease = spawn.UidLease()
    try:
        assert threads and all(t.startswith("sandbox") for t in threads), threads
    finally:
        lease.close()
