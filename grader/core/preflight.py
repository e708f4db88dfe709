"""GPU preflight: prove the GPU works before an authoritative grading relies on it.

A runner whose driver is missing or too old for the installed CUDA stack would otherwise grade
every kernel test as the student's error ("vector_add raised CudaSupportError: driver library
cannot be found"). So before any student code runs, a fresh process (nothing of the grader's
state in it, bounded in time) launches a real kernel through numba-cuda and runs a torch CUDA
operation, checks both results, and reports the driver, CUDA and device; the caller records them
in the result's environment. Any failure is an InfrastructureError: the grading stops, nothing is
recorded, and the student is told it was not their fault.

    python -m grader.core.preflight        prints the probe's JSON (what the parent reads)
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, fields

from grader.core.device import read_driver
from grader.core.errors import InfrastructureError

PASSED_ENV = "GRADER_GPU_PREFLIGHT"  # set by a process whose preflight passed, for its children
PREFLIGHT_TIMEOUT_S = 300  # a cold torch import and first CUDA context can take a minute
N = 1 << 16
HEADLINE = "the grader's GPU is not working"
FIX = (
    "Check the runner: `nvidia-smi` must list the GPU, and its driver must run the CUDA major of "
    "the installed profile (pyproject.toml: gpu-cu12 for drivers 525-579, gpu-cu13 for 580 and "
    "newer; `python -m grader.core.device profile` prints the one that fits)."
)


@dataclass(frozen=True)
class GpuCheck:
    """What a passing preflight saw (it goes into the result's environment)."""

    device: str
    driver: str
    cuda: str  # the CUDA version the driver runs
    numba_cuda: str  # numba-cuda's version and the CUDA runtime it bound
    torch: str  # torch's version and the CUDA it was built for


class GpuUnavailable(InfrastructureError):
    """The GPU of a GPU runner failed the preflight."""


def _probe() -> dict:
    """In the child: each check's outcome, as plain data (numba, numba_cuda and torch are
    imported here, lazily: only in the child, and numba after the simulator switch is cleared)."""
    out: dict = {"errors": []}
    driver, why = read_driver()
    if driver is None:
        out["errors"].append(f"driver: {why}")
    else:
        out.update(device=driver.name, driver=driver.version, cuda=driver.cuda)
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    try:
        # lazy: this runs in the probe's child only, after the simulator switch is cleared
        import numpy as np
        from numba import cuda

        @cuda.jit
        def twice(x, y):
            i = cuda.grid(1)
            if i < x.size:
                y[i] = 2 * x[i]

        x = np.arange(N, dtype=np.float32)
        d_y = cuda.device_array_like(x)
        twice[(N + 255) // 256, 256](cuda.to_device(x), d_y)
        cuda.synchronize()
        if not np.array_equal(d_y.copy_to_host(), 2 * x):
            raise RuntimeError("the kernel ran but wrote wrong values")
        import numba_cuda  # lazy: as above

        runtime = ".".join(map(str, cuda.runtime.get_version()))
        out["numba_cuda"] = f"numba-cuda {numba_cuda.__version__} (CUDA runtime {runtime})"
        out.setdefault("device", cuda.get_current_device().name.decode(errors="replace"))
    except Exception as exc:  # noqa: BLE001 - any failure is the finding
        out["errors"].append(f"numba-cuda kernel launch: {type(exc).__name__}: {exc}"[:600])
    try:
        import torch  # lazy: as above, and torch is the slowest import of all

        if not torch.cuda.is_available():
            raise RuntimeError(
                f"torch.cuda.is_available() is False (torch built for CUDA {torch.version.cuda})"
            )
        t = torch.arange(N, dtype=torch.float32, device="cuda")
        total = float((t + t).sum().item())
        if total != float(N * (N - 1)):
            raise RuntimeError(f"(t + t).sum() gave {total}, not {N * (N - 1)}")
        out["torch"] = f"torch {torch.__version__} (CUDA {torch.version.cuda})"
    except Exception as exc:  # noqa: BLE001
        out["errors"].append(f"torch CUDA operation: {type(exc).__name__}: {exc}"[:600])
    return out


def _fail(reasons: list[str]) -> GpuUnavailable:
    return GpuUnavailable(HEADLINE, "\n".join([*reasons, FIX]))


def _inherited() -> GpuCheck | None:
    try:
        data = json.loads(os.environ.get(PASSED_ENV, ""))
        return GpuCheck(**{f.name: str(data[f.name]) for f in fields(GpuCheck)})
    except (ValueError, TypeError, KeyError):
        return None


@functools.cache
def gpu_preflight(timeout_s: float = PREFLIGHT_TIMEOUT_S) -> GpuCheck:
    """Run the probe in a fresh process; raise GpuUnavailable on any failure.

    Once per grader process, and once per batch: a passing check is left in PASSED_ENV, so the
    grading processes grade-all spawns (trusted, like their parent; student code only ever runs
    in sandbox workers, whose environment is scrubbed) reuse it instead of probing again.
    """
    inherited = _inherited()
    if inherited is not None:
        return inherited
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "grader.core.preflight"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise _fail([f"the preflight did not finish in {timeout_s:g} s"]) from None
    lines = proc.stdout.strip().splitlines()
    try:
        report = json.loads(lines[-1]) if lines else None
    except ValueError:
        report = None
    if not isinstance(report, dict):
        tail = (proc.stderr or proc.stdout).strip()[-600:]
        raise _fail([f"the preflight process exited {proc.returncode} without a report: {tail}"])
    if report["errors"]:
        raise _fail(report["errors"])
    check = GpuCheck(
        device=report.get("device", "NVIDIA GPU"),
        driver=report.get("driver", ""),
        cuda=report.get("cuda", ""),
        numba_cuda=report.get("numba_cuda", ""),
        torch=report.get("torch", ""),
    )
    os.environ[PASSED_ENV] = json.dumps(asdict(check))
    return check


if __name__ == "__main__":
    print(json.dumps(_probe()))
