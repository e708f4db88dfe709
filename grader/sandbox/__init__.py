"""The trust boundary: the sandboxed worker's backend and its isolation.

`backend` holds `WorkerBackend` (the trusted side of the protocol); `isolation` holds the layers a
worker runs under and the probe that verifies them.
"""

from grader.sandbox.backend import WorkerBackend
from grader.sandbox.isolation import ALL_LAYERS, describe_exit, isolation_available

__all__ = ["ALL_LAYERS", "WorkerBackend", "describe_exit", "isolation_available"]
