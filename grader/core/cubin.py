"""What a kernel's machine code costs: PTX linked to a cubin on the CPU, its resources and SASS.

The occupancy a student computes by hand (registers per thread, shared memory per block) is what
the toolchain decides when it turns PTX into a GPU's machine code, and whether a loop keeps many
loads in flight shows only there. This needs no GPU: nvJitLink (the `nvidia-nvjitlink` wheel,
through `cuda.bindings.nvjitlink`) links PTX to a cubin for any compute capability and, asked to
be verbose, logs each function's registers, stack, spills and shared memory; the
`nvidia-cuda-nvdisasm` wheel's `nvdisasm` prints the cubin's SASS.

Pure functions over text and bytes: nothing here runs a kernel or imports numba, so a sandboxed
compile worker can call them on PTX it produced. `available()` says why they cannot run (a
missing wheel) before anyone asks; the others raise `ToolsMissing` then.

The shared memory reported is the kernel's own static shared arrays: on sm_80 and newer the
toolchain also places the runtime's reserved 1 KiB in the kernel's shared section (the
`.nv.reservedSmem.*` symbols); it is left out here, as the occupancy rules add it per block
(course.toml's `reserved_shared_memory_per_block`).
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.core.errors import InfrastructureError, SubmissionError

NVDISASM_TIMEOUT_S = 60
_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$.]+)", re.M)
# nvJitLink's verbose log, one block per function (ptxas's and the linker's lines):
#   ptxas info    : Function properties for NAME
#   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
#   info    : Function properties for 'NAME':
#   info    : used 34 registers, used 1 barriers, 0 stack, 4224 bytes smem, ..., 0 bytes lmem
_PTXAS_PROPS = re.compile(
    r"ptxas info\s*: Function properties for ([\w$.]+)\s*\n"
    r"ptxas\s+\.\s+(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_LINK_PROPS = re.compile(
    r"info\s*: Function properties for '([\w$.]+)':\s*\n"
    r"info\s*: used (\d+) registers(?P<rest>[^\n]*)"
)
_LMEM = re.compile(r"(\d+) bytes lmem")
_STACK = re.compile(r"(\d+) stack")


@dataclass(frozen=True)
class KernelResources:
    """One kernel's resources in a cubin: registers per thread, its static shared memory per
    block, local memory (stack) per thread, and the bytes spilled to it (stored, loaded)."""

    registers: int
    shared_bytes: int
    local_bytes: int
    spill_stores: int
    spill_loads: int


class ToolsMissing(InfrastructureError):
    """nvJitLink or nvdisasm is not installed on this machine; the message says which wheel
    provides it (a caller that can do without asks `available()` first)."""


class LinkError(SubmissionError):
    """nvJitLink refused the PTX (a kernel's, so the submission's); the message is its log."""


def _nvjitlink():  # type: ignore[no-untyped-def]  # cuda.bindings ships no type stubs
    try:
        from cuda.bindings import nvjitlink  # lazy: a wheel of the GPU and instructor profiles

        nvjitlink.version()  # loads libnvJitLink: the binding exists without the library
    except Exception as exc:  # noqa: BLE001 - any failure means the same: no linker
        raise ToolsMissing(
            f"nvJitLink is not available ({type(exc).__name__}: {exc}); install the "
            "`nvidia-nvjitlink` and `cuda-bindings` wheels (pyproject extra gpu-cu13)"
        ) from None
    return nvjitlink


def _nvdisasm() -> str:
    try:
        from cuda.pathfinder import find_nvidia_binary_utility  # lazy: as nvjitlink

        found = find_nvidia_binary_utility("nvdisasm")
    except Exception:  # noqa: BLE001 - a missing pathfinder is a missing tool
        found = None
    found = found or shutil.which("nvdisasm")
    if not found:
        raise ToolsMissing(
            "nvdisasm is not available; install the `nvidia-cuda-nvdisasm` wheel (pyproject "
            "extra gpu-cu13) or a CUDA toolkit"
        )
    return str(found)


def available(disassemble: bool = True) -> str | None:
    """None when PTX can be linked (and, with `disassemble`, disassembled) here, else the
    reason it cannot."""
    try:
        _nvjitlink()
        if disassemble:
            _nvdisasm()
    except ToolsMissing as exc:
        return str(exc)
    return None


def _arch(cc: tuple[int, int]) -> str:
    major, minor = (int(v) for v in cc)
    if not (1 <= major <= 99 and 0 <= minor <= 9):
        raise ValueError(f"not a compute capability: {cc!r}")
    return f"-arch=sm_{major}{minor}"


def _link(ptx: str, cc: tuple[int, int]) -> tuple[bytes, str]:
    nvjitlink = _nvjitlink()
    data = ptx.encode()
    handle = nvjitlink.create(2, [_arch(cc), "-verbose"])
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(size)
            if size:
                nvjitlink.get_error_log(handle, log)
            said = log.decode(errors="replace").strip("\0 \n")
            raise LinkError(f"nvJitLink could not link the PTX for {cc}: {said or exc}") from None
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        info = bytearray(nvjitlink.get_info_log_size(handle))
        if info:
            nvjitlink.get_info_log(handle, info)
    finally:
        nvjitlink.destroy(handle)
    return bytes(cubin), info.decode(errors="replace").rstrip("\0")


def link(ptx: str, cc: tuple[int, int]) -> bytes:
    """The cubin nvJitLink makes of `ptx` for compute capability `cc` (e.g. (7, 5))."""
    return _link(ptx, cc)[0]


def _shared_sizes(cubin: bytes) -> dict[str, int]:
    """Each function's static shared bytes from the cubin's ELF: the size of its
    `.nv.shared.<name>` section less the reserved block the toolchain put there."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise ValueError("not a 64-bit ELF cubin")
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)
    ]

    def strings(index: int) -> bytes:
        s = sections[index]
        return cubin[s[4] : s[4] + s[5]]

    names = strings(shstrndx)

    def name_at(table: bytes, offset: int) -> str:
        return table[offset : table.index(b"\0", offset)].decode(errors="replace")

    sizes: dict[str, int] = {}
    reserved = 0
    for s in sections:
        name = name_at(names, s[0])
        if name.startswith(".nv.shared.") and not name.startswith(".nv.shared.reserved"):
            sizes[name[len(".nv.shared.") :]] = int(s[5])
        if s[1] == 2:  # SHT_SYMTAB: the reserved block's end is `.nv.reservedSmem.cap`
            table = strings(s[6])
            for off in range(s[4], s[4] + s[5], 24):
                st_name, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", cubin, off)
                if name_at(table, st_name) == ".nv.reservedSmem.cap":
                    reserved = int(value)
    return {k: max(0, v - reserved) for k, v in sizes.items()}


def resources(ptx: str, cc: tuple[int, int]) -> dict[str, KernelResources]:
    """Each kernel (`.entry`) of `ptx`, linked for `cc`: its `KernelResources`, by entry name."""
    cubin, log = _link(ptx, cc)
    spills = {m[1]: (int(m[2]), int(m[3]), int(m[4])) for m in _PTXAS_PROPS.finditer(log)}
    linked = {m[1]: (int(m[2]), m["rest"]) for m in _LINK_PROPS.finditer(log)}
    shared = _shared_sizes(cubin)
    out: dict[str, KernelResources] = {}
    for name in _ENTRY.findall(ptx):
        if name not in linked:
            raise LinkError(f"nvJitLink's log names no properties for the kernel {name}")
        registers, rest = linked[name]
        stack, stores, loads = spills.get(name, (0, 0, 0))
        lmem, stack_m = _LMEM.search(rest), _STACK.search(rest)
        local = max(stack, int(lmem[1]) if lmem else 0, int(stack_m[1]) if stack_m else 0)
        out[name] = KernelResources(
            registers=registers,
            shared_bytes=shared.get(name, 0),
            local_bytes=local,
            spill_stores=stores,
            spill_loads=loads,
        )
    return out


def sass(cubin: bytes) -> str:
    """The cubin's SASS as `nvdisasm -c` prints it (code sections only)."""
    tool = _nvdisasm()
    with tempfile.TemporaryDirectory(prefix="grader-cubin-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        proc = subprocess.run(
            [tool, "-c", str(path)],
            capture_output=True,
            text=True,
            timeout=NVDISASM_TIMEOUT_S,
            check=False,
        )
    if proc.returncode != 0:
        raise LinkError(f"nvdisasm failed (exit {proc.returncode}): {proc.stderr.strip()[:600]}")
    return proc.stdout
