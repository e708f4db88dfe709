"""The memory model against Nsight Compute, on a GPU that has `ncu`.

Five kernels (a coalesced copy, a stride-2 read, a transposing write, the triangular loop whose
iteration r is one request of lanes 0..r, a complex128 copy Numba splits into halves) run on the
GPU under `ncu` for the global load and store requests and sectors, and in the simulator under
the memory model (a child process with the simulator forced): the counts must agree. Skipped,
saying why, without a GPU or without `ncu` on the PATH (everywhere this project has run so far).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys

import pytest
from factories import ROOT

from grader.core import device

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not device.has_gpu(), reason="needs an NVIDIA GPU to profile with ncu"),
    pytest.mark.skipif(shutil.which("ncu") is None, reason="Nsight Compute's `ncu` is not on PATH"),
]

KERNELS = r"""
import json, sys
import numpy as np
from numba import cuda

@cuda.jit
def copy(src, dst):
    i = cuda.grid(1)
    dst[i] = src[i]

@cuda.jit
def stride2(src, dst):
    i = cuda.grid(1)
    dst[i] = src[2 * i]

@cuda.jit
def column(src, dst):
    i = cuda.grid(1)
    dst[i, 0] = src[i]

@cuda.jit
def triangle(src, dst):
    i = cuda.grid(1)
    lane = i % 32
    x = 0.0
    for r in range(32):
        if r >= lane:
            x += src[r, lane]
    dst[i] = x

@cuda.jit
def complex_copy(src, dst):
    i = cuda.grid(1)
    dst[i] = src[i]

N = 4096
LAUNCHES = {
    "copy": (copy, (np.zeros(N, np.float32), np.zeros(N, np.float32))),
    "stride2": (stride2, (np.zeros(2 * N, np.float32), np.zeros(N, np.float32))),
    "column": (column, (np.zeros(N, np.float32), np.zeros((N, 32), np.float32))),
    "triangle": (triangle, (np.ones((32, 32), np.float32), np.zeros(N, np.float32))),
    "complex_copy": (complex_copy, (np.zeros(N, np.complex128), np.zeros(N, np.complex128))),
}
"""

NCU_RUN = (
    KERNELS
    + r"""
for name, (kernel, args) in LAUNCHES.items():
    kernel[N // 128, 128](*[cuda.to_device(a) for a in args])
cuda.synchronize()
"""
)

MODEL_RUN = (
    KERNELS
    + r"""
from grader.simt import memmodel, memtrace, simulator
simulator.install()
out = {}
for name, (kernel, args) in LAUNCHES.items():
    with memtrace.Recorder(kernel_file=__file__) as rec:
        rec.launching((N // 128, 1, 1))
        dev = [rec.argument(cuda.to_device(a), f"a{i}") for i, a in enumerate(args)]
        kernel[N // 128, 128](*dev)
    p = rec.profile((N // 128, 1, 1), (128, 1, 1))
    out[name] = {op: [p.total("requests", "global", op), p.total("sectors", "global", op)]
                 for op in ("load", "store")}
print(json.dumps(out))
"""
)

METRICS = (
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,"
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
)


def test_model_counts_match_nsight_compute(tmp_path):
    script = tmp_path / "kernels.py"
    script.write_text(NCU_RUN)
    ncu = subprocess.run(
        ["ncu", "--metrics", METRICS, "--csv", sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    rows = list(csv.DictReader(io.StringIO(ncu.stdout[ncu.stdout.index('"ID"') :])))
    measured: dict[str, dict[str, float]] = {}
    for row in rows:
        name = row["Kernel Name"].split("(")[0].split("::")[-1]
        measured.setdefault(name, {})[row["Metric Name"]] = float(
            row["Metric Value"].replace(",", "")
        )
    model_script = tmp_path / "model.py"
    model_script.write_text(MODEL_RUN)
    env = {**os.environ, **device.SIMULATOR_ENV, "PYTHONPATH": str(ROOT)}
    model = json.loads(
        subprocess.run(
            [sys.executable, str(model_script)],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=True,
        ).stdout
    )
    for name, counts in model.items():
        got = next(v for k, v in measured.items() if name in k)
        for op, key in (("load", "ld"), ("store", "st")):
            requests, sectors = counts[op]
            assert got[f"l1tex__t_requests_pipe_lsu_mem_global_op_{key}.sum"] == requests, name
            assert got[f"l1tex__t_sectors_pipe_lsu_mem_global_op_{key}.sum"] == sectors, name
