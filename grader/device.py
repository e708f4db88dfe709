"""Which device kernels run on, decided once and cheaply (no numba or torch import).

Numba reads NUMBA_ENABLE_CUDASIM when `numba.cuda` is first imported, so every process that may
import numba calls `prepare_numba()` first.
"""

from __future__ import annotations

import functools
import os
import shutil


@functools.cache
def has_gpu() -> bool:
    """True on a machine with an NVIDIA GPU; GRADER_DEVICE=cpu|gpu overrides the probe."""
    forced = os.environ.get("GRADER_DEVICE", "").strip().lower()
    if forced in ("cpu", "gpu"):
        return forced == "gpu"
    return os.path.exists("/dev/nvidia0") or shutil.which("nvidia-smi") is not None


PTX_ENV = "GRADER_PTX_ONLY"


def prepare_numba() -> None:
    """Select Numba's CUDA simulator when there is no GPU; call before importing numba.

    A PTX-compiling process (GRADER_PTX_ONLY=1) instead imports the real CUDA target at once,
    so a notebook that asks for the simulator later cannot switch it.
    """
    if os.environ.get(PTX_ENV) == "1":
        os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
        import numba.cuda  # noqa: F401

        return
    if not has_gpu():
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"


def simulator_active() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def describe() -> str:
    """Human name of the device used for kernels, for reports."""
    if not has_gpu():
        return "CPU (Numba CUDA simulator)"
    smi = shutil.which("nvidia-smi")
    if smi:
        import subprocess

        try:
            out = (
                subprocess.run(
                    [smi, "--query-gpu=name", "--format=csv,noheader"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                    check=True,
                )
                .stdout.strip()
                .splitlines()
            )
            if out:
                return out[0]
        except (OSError, subprocess.SubprocessError):
            pass
    return "NVIDIA GPU"
