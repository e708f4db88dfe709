"""`grader.core.parse_lock`: on CPython 3.11, two threads' `ast.parse` at once can fail one of
them with SystemError (gh-106905); with the lock installed, none fails.

The race is shown first, in the same fresh interpreter and on the same load, before the lock is
installed: the lock's run then lasts twice as long as it took to see ten failures without it
(and at least a second), so a lock that did not hold would fail this test, not pass by luck.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from grader.core import parse_lock

RACE = r"""
import ast, gc, json, sys, threading, time
from grader.core import parse_lock

BIG = "x = [" + ",".join(f"({i}, [{i}, {{'a': {i}}}])" for i in range(3000)) + "]\n"
SMALL = "def f(a):\n    return [a + i for i in range(3)]\n"


def race(seconds, enough):
    # two threads parse, a big source and a small one, until `enough` failures or `seconds`
    done, errors = threading.Event(), []

    def parse(source):
        while not done.is_set():
            try:
                ast.parse(source)
            except SystemError as exc:
                errors.append(str(exc))
                if len(errors) >= enough:
                    done.set()

    threads = [threading.Thread(target=parse, args=(s,)) for s in (BIG, SMALL)]
    start = time.monotonic()
    for t in threads:
        t.start()
    done.wait(seconds)
    done.set()
    for t in threads:
        t.join()
    return errors, time.monotonic() - start


# Python code in every garbage collection (the big parse's allocations start many), where a
# thread switch can come, as a finaliser's code would in a grading
gc.callbacks.append(lambda phase, info: sum(range(20)))
sys.setswitchinterval(1e-5)
unlocked, took = race(20.0, 10)
parse_lock.install()
locked, _ = race(max(2 * took, 1.0), 1)
print(json.dumps({"unlocked": unlocked, "took": took, "locked": locked,
                  "installed": parse_lock.installed()}))
"""


def test_with_the_lock_no_parse_fails_where_without_it_ten_did():
    proc = subprocess.run(
        [sys.executable, "-c", RACE], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    if not parse_lock.AFFECTED:
        assert not out["installed"]  # nothing to fix on this CPython: ast.parse is untouched
        pytest.skip(f"CPython {sys.version.split()[0]} has no shared AST recursion count")
    assert len(out["unlocked"]) >= 10, out  # the race, seen without the lock
    assert all("recursion depth mismatch" in e for e in out["unlocked"]), out["unlocked"]
    assert out["installed"]
    assert out["locked"] == [], out["locked"]  # none in twice the time, with the lock


def test_grading_installs_the_lock():
    """`grade_submission` installs it before its threads start (a fresh interpreter, so that
    nothing else in this process installed it first)."""
    code = (
        "import ast, tempfile\n"
        "from grader.core import parse_lock\n"
        "from grader.grading import grade_submission\n"
        "assert not parse_lock.installed()\n"
        "try:\n"
        "    grade_submission(tempfile.mkdtemp(), root=tempfile.mkdtemp())\n"
        "except Exception:\n"
        "    pass\n"
        "print(parse_lock.installed(), ast.parse('x = 1').body[0].targets[0].id)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == [str(parse_lock.AFFECTED), "x"]
