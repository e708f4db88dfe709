"""`grader.core.heap`: frozen for a block then thawed, and frozen at the interpreter's exit."""

from __future__ import annotations

import gc
import subprocess
import sys

from factories import ROOT

from grader.core import heap


def test_frozen_holds_the_heap_for_its_block_only():
    assert gc.get_freeze_count() == 0
    with heap.frozen():
        assert gc.get_freeze_count() > 1000
    assert gc.get_freeze_count() == 0


AT_EXIT = """
import atexit, gc, os
# registered first, so it runs after the grader's (atexit runs the last registered first)
atexit.register(lambda: os.write(1, f"frozen at exit: {gc.get_freeze_count()}".encode()))
from grader.core import heap
n = atexit._ncallbacks()
heap.freeze_at_exit()
heap.freeze_at_exit()  # asked twice, registered once
print(gc.get_freeze_count(), atexit._ncallbacks() - n, end=" ")
"""


def test_the_heap_is_frozen_when_the_interpreter_exits_not_before():
    out = subprocess.run(
        [sys.executable, "-c", AT_EXIT], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    before, _, after = out.partition("frozen at exit: ")
    count, registered = before.split()
    assert count == "0" and registered == "1"
    assert int(after) > 1000
