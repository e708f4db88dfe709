"""grader.core.cubin: PTX linked to a cubin on the CPU, its resources read, its SASS printed.

The evidence of issue 43 lives here: the reference tiled kernels, compiled by the grader's own
compile worker for the T4 (sm_75) and the H100/H200 (sm_90), issue TILE global loads before
their first store to shared memory (the old kernels issued at most one: load, store, load...),
with no spills. Skipped, with the reason, where nvJitLink or nvdisasm is not installed.
"""

from __future__ import annotations

import re

import pytest
from factories import ROOT, solution_region

from grader.core import cubin
from grader.suites.student import InProcessBackend, Student

MISSING = cubin.available()
needs_tools = pytest.mark.skipif(MISSING is not None, reason=f"cubin tools: {MISSING}")
HEADER = "import numba\nfrom numba import cuda\n\nTILE = 32\nTILE_PADDED = 33\n\n\n"
SIG = {
    "transpose_tiled": "void(float32[:, :], float32[:, :])",
    "matmul_tiled": "void(float32[:, :], float32[:, :], float32[:, :])",
}
CCS = ((7, 5), (9, 0))
# The reference kernels before issue 43: each loop iteration loads one element and stores it
# to shared memory before the next load may start.
OLD = {
    "transpose_tiled": """
@cuda.jit
def transpose_tiled(src, dst):
    tile = cuda.shared.array((TILE, TILE_PADDED), numba.float32)
    lane = cuda.threadIdx.x
    first_row = cuda.blockIdx.y * TILE
    first_col = cuda.blockIdx.x * TILE
    col = first_col + lane
    for r in range(TILE):
        if first_row + r < src.shape[0] and col < src.shape[1]:
            tile[r, lane] = src[first_row + r, col]
    cuda.syncthreads()
    out_col = first_row + lane
    for r in range(TILE):
        if first_col + r < dst.shape[0] and out_col < dst.shape[1]:
            dst[first_col + r, out_col] = tile[lane, r]
""",
    "matmul_tiled": """
@cuda.jit
def matmul_tiled(a, b, c):
    a_tile = cuda.shared.array((TILE, TILE), numba.float32)
    b_tile = cuda.shared.array((TILE, TILE), numba.float32)
    acc = cuda.local.array(TILE, numba.float32)
    lane = cuda.threadIdx.x
    row0 = cuda.blockIdx.y * TILE
    col = cuda.blockIdx.x * TILE + lane
    for r in range(TILE):
        acc[r] = 0.0
    for k0 in range(0, a.shape[1], TILE):
        for r in range(TILE):
            a_tile[r, lane] = 0.0
            if row0 + r < a.shape[0] and k0 + lane < a.shape[1]:
                a_tile[r, lane] = a[row0 + r, k0 + lane]
            b_tile[r, lane] = 0.0
            if k0 + r < b.shape[0] and col < b.shape[1]:
                b_tile[r, lane] = b[k0 + r, col]
        cuda.syncthreads()
        for k in range(TILE):
            value = b_tile[k, lane]
            for r in range(TILE):
                acc[r] += a_tile[r, k] * value
        cuda.syncthreads()
    if col < c.shape[1]:
        for r in range(TILE):
            if row0 + r < c.shape[0]:
                c[row0 + r, col] = acc[r]
""",
}
GLOBAL_LOAD = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?(?:LDG|LD)\.", re.M)
SHARED_STORE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?STS\b", re.M)


def loads_before_first_shared_store(sass: str) -> int:
    """Global loads (generic `LD` or `LDG`) the SASS issues before its first `STS`: how many
    loads one lane has in flight when the first of them is needed."""
    first = SHARED_STORE.search(sass)
    return len(GLOBAL_LOAD.findall(sass, 0, first.start() if first else len(sass)))


def _ptx(tmp_path, name: str, source: str, cc: tuple[int, int]) -> str:
    nb = tmp_path / f"{name}_{cc[0]}{cc[1]}.py"
    nb.write_text("# %%\n" + HEADER + source, encoding="utf-8")
    student = Student(InProcessBackend({"k": nb}), "k", kernel_timeout=300)
    return student.__getattr__(name).ptx(SIG[name], cc=cc)


@needs_tools
@pytest.mark.parametrize("cc", CCS, ids=lambda cc: f"sm_{cc[0]}{cc[1]}")
@pytest.mark.parametrize("name", sorted(SIG))
def test_the_reference_keeps_a_column_of_loads_in_flight(tmp_path, name, cc):
    new_ptx = _ptx(tmp_path, name, solution_region(name), cc)
    (tmp_path / "old").mkdir()
    old_ptx = _ptx(tmp_path / "old", name, OLD[name], cc)
    new = loads_before_first_shared_store(cubin.sass(cubin.link(new_ptx, cc)))
    old = loads_before_first_shared_store(cubin.sass(cubin.link(old_ptx, cc)))
    assert old <= 1, f"the old {name} was expected to load one element at a time, got {old}"
    assert new >= 32, f"the reference {name} has only {new} loads before its first shared store"
    (res,) = cubin.resources(new_ptx, cc).values()
    assert res.spill_stores == res.spill_loads == res.local_bytes == 0, res
    assert (
        res.shared_bytes == {"transpose_tiled": 32 * 33 * 4, "matmul_tiled": 2 * 32 * 32 * 4}[name]
    )
    assert 32 <= res.registers <= 255, res


@needs_tools
def test_resources_by_entry_and_spills(tmp_path):
    source = """
@cuda.jit
def heavy(out):
    acc = cuda.local.array(64, numba.float32)
    i = cuda.grid(1)
    for k in range(64):
        acc[k] = out[(i + k) % out.size]
    s = numba.float32(0.0)
    for k in range(64):
        s += acc[(i * k) % 64]
    out[i % out.size] = s
"""
    nb = tmp_path / "h.py"
    nb.write_text("# %%\n" + HEADER + source, encoding="utf-8")
    ptx = Student(InProcessBackend({"k": nb}), "k", kernel_timeout=300).heavy.ptx(
        "void(float32[:])", cc=(7, 5)
    )
    ((name, res),) = cubin.resources(ptx, (7, 5)).items()
    assert "heavy" in name and re.search(rf"\.entry\s+{re.escape(name)}", ptx)
    # a local array indexed by a value known only at run time cannot live in registers
    assert res.local_bytes >= 64 * 4 and res.shared_bytes == 0, res
    assert cubin.sass(cubin.link(ptx, (7, 5))).count("heavy") >= 1


@needs_tools
def test_link_names_the_problem_in_bad_ptx():
    with pytest.raises(cubin.LinkError, match="nvJitLink"):
        cubin.link(".version 8.0\n.target sm_75\n.address_size 64\n.entry broken( {\n", (7, 5))
    with pytest.raises(ValueError, match="compute capability"):
        cubin.link("", (0, 12))


def test_available_names_the_missing_wheel(monkeypatch):
    import shutil

    pathfinder = pytest.importorskip("cuda.pathfinder")
    monkeypatch.setattr(pathfinder, "find_nvidia_binary_utility", lambda name: None)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    reason = cubin.available()
    assert reason is not None and ("nvidia-cuda-nvdisasm" in reason or "nvjitlink" in reason)
    with pytest.raises(cubin.ToolsMissing):
        cubin.sass(b"\x7fELF")


def test_the_module_imports_no_numba():
    source = (ROOT / "grader" / "core" / "cubin.py").read_text(encoding="utf-8")
    assert "numba" not in re.sub(r'""".*?"""|#.*', "", source, flags=re.S)
