"""`grader.simt.cudaapi`: every device function of the installed numba-cuda runs in the
simulator or is refused by name with the reason; docs/SIMULATOR.md lists exactly them.

The names are read from numba-cuda's own ``device_init.py`` (what ``from numba import cuda``
exports to a kernel) and its ``atomic`` stub, not written here, so a new numba-cuda with a new
device function fails this test until the table says what the simulator does with it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

from grader.core import device
from grader.simt import cudaapi, simulator

pytestmark = pytest.mark.skipif(
    device.has_gpu(), reason="the simulator is what runs kernels only on a machine without a GPU"
)
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def kernelapi():
    device.prepare_numba()
    assert simulator.install()
    from numba.cuda.simulator import kernelapi  # lazy: after prepare_numba

    return kernelapi


def _device_names() -> set[str]:
    import numba_cuda  # the installed package: its files, not an import of the real target

    init = Path(numba_cuda.__file__).parent / "numba" / "cuda" / "device_init.py"
    tree = ast.parse(init.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in (
            "stubs",
            "intrinsics",
            "numba.cuda.cache_hints",
            "numba.cuda.misc.special",
        ):
            names |= {a.asname or a.name for a in node.names}
        if isinstance(node, ast.ImportFrom) and node.module == "numba.cuda" and node.level == 0:
            names |= {a.asname or a.name for a in node.names if a.name in ("cg",)}
    return {n for n in names if not n.startswith("_")} | {"fp16", "bf16", "fp8"}


def test_the_table_names_every_device_function_of_the_installed_numba():
    names = _device_names()
    assert {"syncwarp", "shfl_down_sync", "nanosleep", "ldcg", "lanemask_lt"} <= names
    assert names == set(cudaapi.SUPPORT), names ^ set(cudaapi.SUPPORT)


def test_each_runs_or_is_refused_by_name(kernelapi):
    module = kernelapi.FakeCUDAModule((1, 1, 1), (1, 1, 1), 0)
    for name, (what, why) in cudaapi.SUPPORT.items():
        if what == cudaapi.RUNS:  # defined (a property may read a simulated thread: not here)
            assert name in dir(module), name
        else:
            with pytest.raises(
                cudaapi.SimulatorRefusal, match=rf"cuda\.{name} .*: {re.escape(why)}"
            ):
                getattr(module, name)
    with pytest.raises(cudaapi.SimulatorRefusal, match="cuda.warp_reduce is not a device function"):
        module.warp_reduce  # noqa: B018  # what a student might guess
    import numba_cuda

    stubs = (Path(numba_cuda.__file__).parent / "numba" / "cuda" / "stubs.py").read_text()
    atomic = stubs[stubs.index("class atomic(Stub)") : stubs.index("class nanosleep")]
    for name in re.findall(r"^    class (\w+)\(Stub\)", atomic, re.M):
        assert hasattr(kernelapi.FakeCUDAAtomic, name), name


def test_the_doc_table_is_the_modules_table():
    text = (ROOT / "docs" / "SIMULATOR.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)` \| (runs|refused) \|", text, re.M))
    assert rows == {n: what for n, (what, _) in cudaapi.SUPPORT.items()}


def test_bit_intrinsics_read_negatives_as_twos_complement(kernelapi):
    module = kernelapi.FakeCUDAModule((1, 1, 1), (1, 1, 1), 0)
    assert module.popc(-1) == 32 and module.popc(np.int64(-1)) == 64
    assert module.clz(1) == 31 and module.clz(-1) == 0 and module.clz(np.uint64(1)) == 63
    assert module.ffs(0) == 0 and module.ffs(8) == 4 and module.ffs(-(2**31)) == 32
    assert module.brev(1) == 0x80000000
