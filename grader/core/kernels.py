"""How the grader starts Jupyter kernels (demo, verify): over IPC sockets, not TCP.

A kernel on TCP listens on localhost ports any local user can reach, and ipykernel says so on
every start ("Kernel is running over TCP without encryption"). IPC sockets in a private (0700)
temporary folder are reachable by this user alone, and the kernel starts without that warning.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from traitlets.config import Config


@contextlib.contextmanager
def ipc_kernel_config() -> Iterator[Any]:
    """A traitlets Config for nbclient/nbgrader that puts the kernel's sockets in a private
    folder for as long as the `with` block runs."""
    folder = tempfile.mkdtemp(prefix="grader-kernel-")
    os.chmod(folder, 0o700)
    cfg = Config()
    cfg.KernelManager.transport = "ipc"
    cfg.KernelManager.ip = os.path.join(folder, "kernel")
    try:
        yield cfg
    finally:
        shutil.rmtree(folder, ignore_errors=True)
