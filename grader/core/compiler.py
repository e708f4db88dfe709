"""Whether this machine has the CUDA compiler that the PTX check needs, and what to say if not.

The PTX check compiles each graded kernel for the course GPU (NVVM through numba-cuda's CUDA
target). The student profile ships without the CUDA toolkit (it would add about a gigabyte), so
on a student's machine that compiler may be missing. The policy, written once here:

* a student's own check (`grader check`, the in-process backend) grades every kernel in the
  simulator and defers the PTX check, saying once `DEFERRED`: neither a pass nor a failure;
  where the compiler works it runs the check and says so (`ran_note`), passed or not;
* authoritative grading requires the compiler and refuses (`PtxCompilerMissing`, an
  infrastructure error) where it is missing: it never grades a kernel without its PTX check.

Whether the compiler works is proved, not guessed from installed files: the compile worker
compiles `PROBE_KERNEL` for the course GPU before any graded kernel (`probe_source`).
"""

from __future__ import annotations

from typing import Any

from grader.core.errors import InfrastructureError
from grader.core.kernel_source import KernelSource, extract

# The extra that brings the compiler (NVVM, from numba-cuda[cu13]: no GPU, no driver needed) to a
# student's Linux machine, so that `grader check` runs the compile check itself
STUDENT_COMPILE = 'pip install -e ".[student,student-compile]"'
DEFERRED = (
    "the compile check for the course GPU runs when your PR is graded (to run it here, on any "
    f"Linux machine, no GPU needed: `{STUDENT_COMPILE}`)"
)
PROBE_SIGNATURE = "void(float32[:])"
PROBE_KERNEL = """
from numba import cuda


@cuda.jit
def grader_compiler_probe(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = 2 * x[i]
"""
FIX = (
    "install the CUDA compiler with the profile that matches the machine "
    '(`pip install -e ".[instructor,gpu-cu13]"`, or gpu-cu12 for drivers 525 to 579; '
    "`python -m grader.core.device profile` names it)"
)


class PtxCompilerMissing(InfrastructureError):
    """Authoritative grading needs the PTX check, and this machine cannot compile PTX."""


def ran_note(compiled: int, failed: list[str], cc: tuple[int, int]) -> str:
    """What `grader check` says when this machine's compiler ran the PTX check: that it ran, and
    whether every kernel it compiled passed (a failure's own test says why)."""
    where = f"the compile check for the course GPU (compute capability {cc[0]}.{cc[1]}) ran here"
    if not failed:
        return f"{where} and passed: {compiled} kernel compilation(s), none failed"
    names = ", ".join(sorted(set(failed)))
    return (
        f"{where}: {compiled - len(failed)} of {compiled} kernel compilation(s) passed; "
        f"{names} did not compile (its test says why)"
    )


def probe_source() -> KernelSource:
    """The probe kernel, extracted by the same rules as a graded one."""
    return extract(PROBE_KERNEL, "grader_compiler_probe", "the compiler probe")


def missing_reason(reply: Any) -> str | None:
    """None when the probe's reply is PTX for an entry point; else why the compiler is missing."""
    if isinstance(reply, dict) and isinstance(reply.get("ok"), str) and ".entry" in reply["ok"]:
        return None
    if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
        err = reply["error"]
        return f"{err.get('type')}: {str(err.get('message', ''))[-400:]}"
    return "the compile worker answered the probe with something that is not PTX"


def refusal(reason: str) -> PtxCompilerMissing:
    """The infrastructure error authoritative grading raises on a machine without the compiler."""
    return PtxCompilerMissing(
        "grading refused: the CUDA compiler for the PTX check is not working on this machine; "
        "nothing was graded (not your fault)",
        f"the compile probe said: {reason}. Every kernel's grade needs the PTX check. Fix: {FIX}",
    )
