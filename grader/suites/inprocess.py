"""`InProcessBackend`: student code in this process, for a student's own `grader check` and tests.

Every request still crosses `grader.sandbox.wire` both ways and every reply is
`grader.sandbox.protocol.encode_reply` output, so a test passes or fails here as it does in the
sandbox; the trusted side's mark (``origin``) is stripped from what the harness answers. Kernels
take the sandbox's path too: built from the extracted source, compiled to PTX by a fresh
``python -m grader.sandbox.harness`` with the real CUDA target (`compile_in_subprocess`). This
process is the student's own, so nothing here is authoritative.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from grader.core.notebook import graded_text
from grader.core.readback import list_dir, read_file
from grader.sandbox import wire
from grader.sandbox.harness import MODULE_PREFIX, Harness, KernelHost
from grader.sandbox.protocol import (
    WORKER_CRASHED,
    WORKER_TIMEOUT,
    encode_reply,
    trusted_error,
    untagged,
    valid_reply,
)


def compile_in_subprocess(req: dict, timeout: float) -> dict:
    """A ``kernel_compile`` request answered by a fresh process with the real CUDA target."""
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "grader.sandbox.harness"],
            input=wire.encode(req),
            capture_output=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return trusted_error(
            WORKER_TIMEOUT, f"compiling {req.get('name')} took longer than {timeout:g} s"
        )
    try:
        reply = wire.decode(proc.stdout)
    except wire.NotPlainData:
        reply = None
    if not valid_reply(reply):  # the shape checked, and no `origin`: the compiler is not trusted
        tail = proc.stderr.decode(errors="replace")[-800:]
        return trusted_error(
            WORKER_CRASHED, f"the compiler process exited with code {proc.returncode}: {tail}"
        )
    return reply


class InProcessBackend:
    """Runs notebooks in this process: for a student's own `grader check` and fast tests.

    `notebooks` maps assignment id to the notebook file; each is executed on first use. Kernels
    take the same path as in the sandbox (extracted source, compiled in a fresh process), but
    this process is the student's own: nothing here is authoritative.
    """

    isolation: tuple[str, ...] = ()

    def __init__(self, notebooks: dict[str, Path]):
        self.notebooks = {k: Path(v) for k, v in notebooks.items()}
        self.harnesses: dict[str, Harness] = {}
        self.host = KernelHost()

    def request(self, req: dict, timeout: float) -> dict:
        assignment = req["assignment"]
        if assignment not in self.harnesses:
            self.harnesses[assignment] = Harness(self.notebooks[assignment], assignment)
        reply = self.harnesses[assignment].handle(wire.roundtrip(req))
        return untagged(wire.decode(encode_reply(reply, str(req.get("name", "")))))

    def kernel(self, req: dict, timeout: float, target: str = "run") -> dict:
        if target == "compile":
            return compile_in_subprocess(req, timeout)
        t0 = time.monotonic()
        reply = untagged(wire.decode(encode_reply(self.host.handle(wire.roundtrip(req)))))
        if "ok" in reply and req.get("op") == "kernel_run":
            reply["wall_s"] = time.monotonic() - t0
        return reply

    def graded_source(self, assignment: str) -> str:
        return graded_text(self.notebooks[assignment])

    def read_back(self, path: str, max_bytes: int) -> bytes | None:
        return read_file(Path.cwd(), path, max_bytes)

    def list_back(self, path: str) -> list[str]:
        return list_dir(Path.cwd(), path)

    def close(self) -> None:
        for assignment in self.harnesses:
            sys.modules.pop(f"{MODULE_PREFIX}{assignment}", None)
        self.harnesses.clear()
