"""Keeping Python's cyclic collector off the heap a grading process built before its work.

A full collection walks every object the collector tracks. With numba, numpy, pytest and
hypothesis loaded that is about 235,000 objects and 0.17 s on this project's machines, and a
grading ran several: the collector's own passes over its oldest generation as the tests
allocate, and hypothesis's `register_random`, which calls `gc.collect()` before a thread's first
example. The objects made during start-up (modules, functions, classes, the reference solution)
live as long as the process does, so walking them finds nothing to free.

`gc.freeze()` (the standard library's) moves every object tracked now into a permanent
generation that collections skip; objects made later are collected as before. `frozen()` gives
them back (`gc.unfreeze()`) when its block ends, for a process that goes on to other work: the
test suite, or a second assignment of the same grading. `freeze_at_exit()` freezes the heap
just before the interpreter's own last collection at exit (0.08 s with numba loaded), which
would only walk what the process is about to drop.
"""

from __future__ import annotations

import atexit
import functools
import gc
from collections.abc import Iterator
from contextlib import contextmanager


@functools.cache
def freeze_at_exit() -> None:
    """Freeze the heap when the interpreter exits (atexit runs before its last collection);
    once per process however often it is asked."""
    atexit.register(gc.freeze)


@contextmanager
def frozen() -> Iterator[None]:
    """`freeze` for the block's length."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
