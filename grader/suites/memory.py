"""A kernel's memory behaviour, measured by the trusted side from one simulated launch.

``student.kernel[grid, block].profile(*args)`` compiles the kernel for the course GPU first (as
every launch does), then launches it once in the simulator with every global and shared access
recorded (`grader.simt.memtrace`, in the kernel worker of target ``model``: the simulator on
every machine, GPU runners included), and returns the outputs with the launch's
`grader.simt.memmodel.LaunchProfile`. The profile is checked on the way in (its shape, bounds
and sums) and its sites are named here, from the extracted source: each line as the student's
own file numbers it, each shared array by its variable. The same kernel and inputs give the same
profile on every machine, so tests graded on it are reproducible like any other.
"""

from __future__ import annotations

import dataclasses
import hashlib
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.core import compiler
from grader.core.cubin import KernelResources
from grader.core.results import KernelMemory
from grader.sandbox import protocol
from grader.simt import memmodel
from grader.suites.errors import StudentError, malformed
from grader.suites.launches import (
    KernelFunction,
    KernelLaunch,
    dims,
    finding_failure,
    outputs,
    signature,
)

MODEL_TARGET = "model"


@dataclass(frozen=True)
class Profiled:
    """One profiled launch: what it wrote and how it used memory.

    The profile names each array by the student's own parameter name; a test addresses an
    argument by its position (`arg`), never by the reference's name for it."""

    outputs: list
    memory: memmodel.LaunchProfile
    params: tuple[str, ...] = ()  # the kernel's parameters, in order, as the student named them

    def arg(self, position: int) -> str:
        """The kernel's name for its argument at `position` (what the profile calls it)."""
        return self.params[position] if 0 <= position < len(self.params) else f"#{position}"


# Profiles already taken, per backend (one grading): the simulator runs a kernel the same way
# every time, so the same source on the same arguments has the same profile, and the tests that
# grade one launch's different lessons share it.
_TAKEN: weakref.WeakKeyDictionary[Any, dict[str, Profiled | StudentError]] = (
    weakref.WeakKeyDictionary()
)


def _key(text: str, grid: Any, block: Any, args: list) -> str:
    h = hashlib.sha256(f"{text}\0{grid!r}\0{block!r}".encode())
    for a in args:
        if isinstance(a, np.ndarray):
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).tobytes())
        else:
            h.update(repr((type(a).__name__, a)).encode())
    return h.hexdigest()


def described(grid: Any, block: Any, args: list) -> str:
    """A launch as a report names it: ``[grid, block] on float32[64, 96], float32[96, 64]``."""
    shown = [
        f"{a.dtype.name}[{', '.join(map(str, a.shape))}]" if isinstance(a, np.ndarray) else repr(a)
        for a in args
    ]
    return f"[{grid}, {block}] on {', '.join(shown)}"


def resources(function: KernelFunction, signature_: str) -> KernelResources | str:
    """What the kernel compiled for the course GPU holds (registers per thread, shared bytes
    per block, local memory, spills: `grader.core.cubin`, in the compile worker), or why this
    machine cannot tell (no CUDA compiler, or no nvJitLink: the student profile)."""
    s, name = function._student, function.name
    if s._ptx(name, signature_, s._cc) is None:  # the in-process backend without a compiler
        return compiler.DEFERRED
    req = protocol.kernel_request(
        "kernel_resources", s._source(name), signature=signature_, cc=list(s._cc)
    )
    reply = s._backend.kernel(req, s._kernel_timeout, "compile")
    if "error" in reply:
        if reply["error"].get("type") == "ToolsMissing":
            return TOOLS_MISSING
        raise s._error(reply["error"], name, "kernel_timeout_s")
    body = reply["ok"]
    names = {f.name for f in dataclasses.fields(KernelResources)}
    if not (
        isinstance(body, dict)
        and set(body) == names
        and all(type(v) is int and 0 <= v < 1 << 32 for v in body.values())
    ):
        raise malformed("kernel resources that are not five counts", name)
    return KernelResources(**body)


TOOLS_MISSING = (
    "registers, shared memory and spills come from linking the kernel for the course GPU, "
    "which needs nvJitLink (the gpu-cu13 or instructor profile); the student profile skips them"
)


def _three(value: Any) -> tuple[int, int, int]:
    items = (*(value if isinstance(value, tuple) else (value,)), 1, 1)
    return (int(items[0]), int(items[1]), int(items[2]))


def profile(launch: KernelLaunch, args: list) -> Profiled:
    """Launch `launch` once on `args` with its memory accesses recorded (see the module)."""
    s, name = launch.function._student, launch.function.name
    grid, block = dims(launch.grid, "grid"), dims(launch.block, "block")
    taken = _TAKEN.setdefault(s._backend, {})
    key = _key(s._source(name).text, grid, block, args)  # the source and the signature
    if key not in taken:
        # the GPU compiler goes first, as for any launch (a kept profile was compiled so too)
        s._ptx(name, signature(args, name), s._cc)
        try:
            taken[key] = _take(launch, name, grid, block, args)
        except StudentError as exc:  # the same launch fails the same way: not run again
            taken[key] = exc
    found = taken[key]
    if isinstance(found, StudentError):
        raise found
    for original, result in zip(args, found.outputs, strict=True):
        if isinstance(original, np.ndarray):
            np.copyto(original, result)
    if s._memory is not None:
        record = KernelMemory(name, described(grid, block, args), found.memory.to_plain())
        if record not in s._memory:
            s._memory.append(record)
    return found


def _take(launch: KernelLaunch, name: str, grid: Any, block: Any, args: list) -> Profiled:
    """The profiled launch itself, on the model's kernel worker."""
    s = launch.function._student
    req = s._kernel_req("kernel_profile", name, grid=grid, block=block, args=list(args))
    reply = s._backend.kernel(req, s._kernel_timeout, MODEL_TARGET)
    if "error" in reply:  # a timeout or a limit the launch hit names its [limits] key
        raise s._error(reply["error"], name, "kernel_timeout_s")
    body = reply["ok"]
    if isinstance(body, dict) and set(body) == {"findings"}:  # compute-sanitizer's findings
        raise finding_failure(body, s._source(name), s._source_map(), name)
    if not (isinstance(body, dict) and set(body) == {"outputs", "profile"}):
        raise malformed("a profiled launch without its outputs and profile", name)
    written = outputs(body["outputs"], args, name)
    try:
        found = memmodel.LaunchProfile.from_plain(body["profile"])
    except memmodel.ProfileError as exc:
        raise malformed(f"a memory profile that does not add up ({exc})", name) from None
    if found.grid != _three(grid) or found.block != _three(block):
        raise malformed("a memory profile of another launch", name)
    ks = s._source(name)
    smap = s._source_map()
    where: dict[int, str] = {}
    for text_line, graded_line in ks.lines:
        where[text_line] = smap.where(graded_line)
    names = {f"shared@{line}": var for line, var in ks.shared_arrays().items()}
    return Profiled(written, memmodel.with_places(found, where, names), ks.params())
