"""The trust boundary: the protocol, the sandboxed worker, its isolation and its backend.

Worker side (untrusted, imports only `grader.core` and these): `protocol` (replies, framing,
limits), `wire` (the message format), `harness` (the grader's code in the worker), `procs`,
`worker` (``python -m grader.sandbox.worker``). Trusted side: `spawn` (the bubblewrap command),
`isolation` (the layers and their probe), `channel` (one bounded exchange), `budget` (a
submission's one time budget), `backend` (`WorkerBackend`: the notebook and kernel workers).

The names below are re-exported lazily (module `__getattr__`): importing `grader.sandbox.worker`
imports this package first, and an eager import of the backend here would make every worker
start-up import the trusted side (backend, isolation, spawn, the course manifest) for nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grader.sandbox.backend import KernelWorkers, WorkerBackend, kernel_workers
    from grader.sandbox.budget import Budget
    from grader.sandbox.isolation import ALL_LAYERS, isolation_available
    from grader.sandbox.procs import describe_exit

__all__ = [
    "ALL_LAYERS",
    "Budget",
    "KernelWorkers",
    "WorkerBackend",
    "describe_exit",
    "isolation_available",
    "kernel_workers",
]

_HOMES = {
    "ALL_LAYERS": "grader.sandbox.isolation",
    "Budget": "grader.sandbox.budget",
    "KernelWorkers": "grader.sandbox.backend",
    "kernel_workers": "grader.sandbox.backend",
    "WorkerBackend": "grader.sandbox.backend",
    "describe_exit": "grader.sandbox.procs",
    "isolation_available": "grader.sandbox.isolation",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
