"""Which device kernels run on, and what the NVIDIA driver says about itself, read cheaply.

No numba or torch import here: the workflows run `python -m grader.core.device profile` before
anything is installed, to pick the install profile that matches the runner's driver. Numba reads
NUMBA_ENABLE_CUDASIM when `numba.cuda` is first imported, so every process that may import numba
calls `prepare_numba()` first.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from grader.core.errors import ExitCode

PTX_ENV = "GRADER_PTX_ONLY"
SMI_TIMEOUT_S = 20
# The install profile (pyproject.toml extras) for each CUDA major version a driver can speak. A
# driver runs every CUDA major up to its own, so a newer one takes the newest profile.
CUDA_PROFILES = {12: "gpu-cu12", 13: "gpu-cu13"}
# The profile of a machine no GPU profile fits: kernels run in Numba's CUDA simulator.
STUDENT_PROFILE = "student"
_SMI_FIELD = re.compile(r"^\s*(Product Name|Driver Version|CUDA Version)\s*:\s*(.+?)\s*$", re.M)


@functools.cache
def has_gpu() -> bool:
    """True on a machine with an NVIDIA GPU; GRADER_DEVICE=cpu|gpu overrides the probe."""
    forced = os.environ.get("GRADER_DEVICE", "").strip().lower()
    if forced in ("cpu", "gpu"):
        return forced == "gpu"
    return os.path.exists("/dev/nvidia0") or shutil.which("nvidia-smi") is not None


# A process that must simulate whatever the machine has (the memory model's launches)
SIMULATOR_ENV = {"GRADER_DEVICE": "cpu", "NUMBA_ENABLE_CUDASIM": "1"}


def prepare_numba() -> None:
    """Select Numba's CUDA simulator when there is no GPU; call before importing numba.

    A PTX-compiling process (GRADER_PTX_ONLY=1) instead imports the real CUDA target at once,
    so a notebook that asks for the simulator later cannot switch it.
    """
    if os.environ.get(PTX_ENV) == "1":
        os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
        import numba.cuda  # noqa: F401 - lazy: heavy, and the point is to import it now

        return
    if not has_gpu():
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"


def simulator_active() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


@dataclass(frozen=True)
class Driver:
    """What `nvidia-smi -q` reports for the first GPU: its name, driver and CUDA versions."""

    name: str
    version: str  # driver version, "550.54.15"
    cuda: str  # the newest CUDA the driver runs, "12.4"

    @property
    def cuda_major(self) -> int | None:
        head = self.cuda.split(".")[0]
        return int(head) if head.isdigit() else None


def read_driver() -> tuple[Driver | None, str]:
    """The driver as nvidia-smi reports it, or None and why not (read from the driver, never
    assumed from the GPU model)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None, "nvidia-smi is not on PATH (no NVIDIA driver installed)"
    try:
        proc = subprocess.run(
            [smi, "-q"], capture_output=True, text=True, timeout=SMI_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"nvidia-smi -q could not run: {exc}"
    if proc.returncode != 0:
        said = (proc.stdout + proc.stderr).strip().splitlines()
        return None, f"nvidia-smi -q failed (exit {proc.returncode}): {' '.join(said[:2])[:300]}"
    fields: dict[str, str] = {}
    for key, value in _SMI_FIELD.findall(proc.stdout):
        fields.setdefault(key, value)
    if "Driver Version" not in fields:
        return None, "nvidia-smi -q printed no driver version"
    return (
        Driver(
            name=fields.get("Product Name", "NVIDIA GPU"),
            version=fields["Driver Version"],
            cuda=fields.get("CUDA Version", ""),
        ),
        "",
    )


def profile_for(driver: Driver | None) -> tuple[str | None, str]:
    """The install profile for this driver and a sentence saying why (None: no GPU profile)."""
    if driver is None:
        return None, "no NVIDIA driver"
    major = driver.cuda_major
    if major is None:
        return None, f"driver {driver.version} did not say which CUDA version it runs"
    supported = sorted(CUDA_PROFILES)
    if major < supported[0]:
        return None, (
            f"driver {driver.version} runs CUDA {driver.cuda}; the course needs CUDA "
            f"{supported[0]} or newer: update the NVIDIA driver"
        )
    chosen = CUDA_PROFILES[min(major, supported[-1])]
    return chosen, f"driver {driver.version} runs CUDA {driver.cuda}: {chosen}"


def describe() -> str:
    """Human name of the device used for kernels, for reports."""
    if not has_gpu():
        return "CPU (Numba CUDA simulator)"
    driver, _ = read_driver()
    return driver.name if driver else "NVIDIA GPU"


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m grader.core.device profile [--default NAME]`: print the install profile that
    matches this machine's driver (stdlib only, so it runs before the install)."""
    p = argparse.ArgumentParser(prog="python -m grader.core.device")
    sub = p.add_subparsers(dest="cmd", required=True)
    prof = sub.add_parser("profile", help="the pyproject extra that matches the NVIDIA driver")
    prof.add_argument(
        "--default",
        help="print this when no GPU profile fits (the GPU preflight then stops the grading "
        "with the reason), instead of failing",
    )
    args = p.parse_args(argv)
    driver, why_not = read_driver()
    chosen, why = profile_for(driver)
    said = why_not or why
    if chosen is None and args.default is None:
        said += (
            f'; no GPU profile fits this machine. Install the "{STUDENT_PROFILE}" profile '
            f'(pip install -e ".[{STUDENT_PROFILE}]"): it runs every kernel in Numba\'s CUDA '
            "simulator, which is all `grader check` and the notebooks need"
        )
    print(said, file=sys.stderr)
    if chosen is None and args.default is None:
        return ExitCode.FAILED
    print(chosen or args.default)
    return ExitCode.OK


if __name__ == "__main__":
    raise SystemExit(main())
