"""`Budget`: a submission's one total time budget (``limits.submission_timeout_s``), on the trusted
clock.

One `Budget` is made per submission and shared by every worker of that submission (its notebook
worker and its two kernel workers), so what one worker spends the others no longer have: nothing
copies a count from one worker to another. A request is charged the trusted-clock time it took
(`charge`, around the whole request: start, load and exchange); its deadline is the sooner of its
own timeout and `deadline()`; once `left` is 0, requests answer `spent` at once and run nothing.
Time two workers spend together (the kernel workers' parallel warm-up) is charged once, by one
`charge` around both.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from grader.sandbox.protocol import WORKER_TIMEOUT, trusted_error

LIMIT = "submission_timeout_s"  # the course.toml key the budget is


class Budget:
    """The time left to one submission; charged from any thread (the warm-ups run in threads)."""

    def __init__(self, limit_s: float):
        self.limit_s = limit_s
        self.spent = 0.0
        self._lock = threading.Lock()

    @property
    def left(self) -> float:
        return max(0.0, self.limit_s - self.spent)

    def deadline(self) -> float:
        """The `time.monotonic` instant the budget runs out unless more is charged meanwhile."""
        return time.monotonic() + self.left

    @contextlib.contextmanager
    def charge(self) -> Iterator[None]:
        """Charge the trusted-clock time the block takes, however it ends."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            elapsed = time.monotonic() - t0
            with self._lock:
                self.spent += elapsed

    def spent_reply(self) -> dict:
        """The reply to a request that comes after the budget is spent: nothing was run."""
        return trusted_error(
            WORKER_TIMEOUT,
            f"the submission's total time budget of {self.limit_s:g} s is spent; "
            "nothing more was run",
            limit=LIMIT,
        )

    def ran_out(self, what: str) -> dict:
        """The reply to a request whose worker was stopped because the budget ran out."""
        return trusted_error(
            WORKER_TIMEOUT,
            f"{what} ran out of the submission's total time budget of {self.limit_s:g} s; "
            "the worker was stopped",
            limit=LIMIT,
        )
