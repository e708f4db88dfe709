"""Corpus cases: forged verdicts (issue 10).

Code in the student's process pretends to be a kernel, the grader's harness or the results.

Imported by build.py after its own cases; uses build's helpers. Each case names, in `attacks`,
what it forges; the README table says which mechanism defeats it.
"""

from __future__ import annotations

import json
from pathlib import Path

from build import (
    BROKEN,
    GF,
    M9,
    OK,
    Case,
    Ctx,
    Expect,
    Rule,
    _fn,
    _region,
    insert_cell_before,
    patch,
    replace_cell,
    with_source,
    write_fork,
)

from grader.demo.samples import replace_region

KERNEL_TESTS = r"test_vector_add_(small|sizes|float64|compiles)"
WRAPPER_TESTS = r"test_gpu_vector_add_(small|random)"
# Every metrics test calls the student's own m9_record to reproduce the record.
M9_RECORD = _fn("m9_record") + r"|test_metrics_"

IMPERSONATOR = '''
import numpy as _np


class FakeCUDAKernel:
    """Looks like numba's simulator kernel to a class-name check; computes on the host."""

    __module__ = "numba.cuda.simulator.kernel"

    def __getitem__(self, dims):
        def launch(a, b, c):
            c[:] = _np.asarray(a) + _np.asarray(b)

        return launch

    py_func = None


vector_add = FakeCUDAKernel()
'''

# Patches every piece of the grader's in-worker code it can reach, then ships a kernel that
# writes zeros: each patch used to be able to forge one verdict.
HARNESS_PATCHES = '''
import numba.cuda as _cuda
import grader.sandbox.harness as _h

_cuda.compile_ptx = lambda *a, **k: (".version 8.0\\n.target sm_75\\n.entry vector_add()", "ptx")


def _fake_handle(self, request):
    if request.get("op") == "kernel_launch":
        import numpy as _np

        a, b, c = request["args"]
        return {"ok": [a, b, _np.asarray(a) + _np.asarray(b)]}
    if request.get("op") == "kernel_run":
        return {"ok": None, "wall_s": 1e-9}
    return {"ok": ".entry forged"}


_h.KernelHost.handle = _fake_handle


def _fake_getitem(self, dims):
    def launch(*args):
        import numpy as _np

        a, b = _np.asarray(args[0].copy_to_host()), _np.asarray(args[1].copy_to_host())
        self._log.append({"kernel": self._name, "grid": dims[0], "block": dims[1],
                          "inputs": [a, b, _np.zeros_like(a)], "outputs": [a, b, a + b]})
        args[2].copy_to_device(a + b)

    return launch


_h._Recorder.__getitem__ = _fake_getitem
'''

ZERO_KERNEL = "i = cuda.grid(1)\nif i < c.size:\n    c[i] = 0.0"

READBACK_PATCHES = '''
import builtins as _builtins
import grader.core.readback as _rb
import grader.suites.student as _st

_rb.read_file = lambda *a, **k: b'{"m1": 3, "m9_roofline": {}}'
_st.Student.read_file = lambda self, path: '{"m1": 3}'
_builtins.__grader_says_ok__ = True
'''

NOT_PTX_WITH_PATCHED_COMPILE = '''
import numba.cuda as _cuda

_cuda.compile_ptx = lambda *a, **k: (".version 8.0\\n.target sm_75\\n.entry vector_add()", "ptx")
'''

NUMPY_WRAPPER = '''
a = np.asarray(a)
b = np.asarray(b)
if a.shape != b.shape:
    raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
if False:  # a launch the static check sees, never run
    vector_add[1, 1](a, b, a)
return a + b
'''

GRADER_NAMED_EXCEPTIONS = '''
class WorkerTimeout(Exception):
    """A student's own exception, named like the grader's timeout."""


class WorkerCrashed(Exception):
    pass


raise WorkerTimeout("m9_record took longer than 5 s; the worker was stopped")
'''

# Writes a frame of junk onto every pipe it can find, the worker's private reply channel
# among them, then returns normally: the trusted side must read the junk as a malformed reply.
FORGED_FRAME = '''
import os as _os
import stat as _stat
import struct as _struct

_junk = b"GW1\\n" + _struct.pack(">I", 5) + b"{nope"
for _fd in range(3, 64):
    try:
        if _stat.S_ISFIFO(_os.fstat(_fd).st_mode):
            _os.write(_fd, _struct.pack(">Q", len(_junk)) + _junk)
    except OSError:
        pass
'''

# Issue 24: wrappers whose result does not come from the kernel. Each ships an empty kernel
# (it compiles and writes nothing), so only the wrapper could make the sum appear.
EMPTY_KERNEL = "i = cuda.grid(1)"

_WRAPPER_HEAD = """
a = np.asarray(a)
b = np.asarray(b)
if a.shape != b.shape:
    raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
dtype = np.result_type(a.dtype, b.dtype)
fa = np.ascontiguousarray(a, dtype=dtype).ravel()
fb = np.ascontiguousarray(b, dtype=dtype).ravel()
blocks, threads = launch_config(a.size, threads_per_block)
"""

# (a) the sum computed with numpy into c, then the empty kernel launched on that c.
NUMPY_THEN_EMPTY = _WRAPPER_HEAD + """
c = fa + fb
vector_add[blocks, threads](fa, fb, c)
return c.reshape(a.shape)
"""

# (b) the output buffer pre-filled with the answer on the device, then the empty kernel.
PREFILLED_OUTPUT = _WRAPPER_HEAD + """
d_c = cuda.to_device(fa + fb)
vector_add[blocks, threads](cuda.to_device(fa), cuda.to_device(fb), d_c)
return d_c.copy_to_host().reshape(a.shape)
"""

# (c) no launch at all: a launch record written by hand into the grader's recorder, in whichever
# format the recorder keeps (the old one carried the arrays, the new one names slots).
FORGED_RECORD = _WRAPPER_HEAD + """
c = fa + fb
if False:  # the launch the static check looks for, never run
    vector_add[blocks, threads](fa, fb, c)
log = getattr(vector_add, "_log", None)
if log is not None and hasattr(vector_add, "_slots"):
    slots = [{"slot": k, "shape": [a.size], "dtype": c.dtype.str} for k in range(3)]
    slots[0]["input"], slots[1]["input"] = 0, 1
    log.append({"kernel": "vector_add", "grid": blocks, "block": threads, "args": slots})
elif log is not None:
    log.append({"kernel": "vector_add", "grid": blocks, "block": threads,
                "inputs": [fa, fb, c], "outputs": [fa, fb, c]})
return c.reshape(a.shape)
"""

# A timing function that times nothing; launches in dead code satisfy a static check.
CONSTANT_SLOWDOWN = """
if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
    raise TypeError(f"n must be an integer, got {n!r}")
if n < 1:
    raise ValueError(f"n must be at least 1, got {n}")
if False:
    transpose_naive[1, 1](None, None)
    strided_copy[1, 1](None, None, 1)
return 3.0
"""

# Instead of raising ValueError for an empty key, save_metric makes the worker's next reply a
# message whose header names a 70-dimensional array: numpy refuses to build it (ValueError) in
# the trusted process, which the old decoder let through as if the student had raised it.
DIMENSIONS_70 = """
if key == "":
    import json as _json
    import struct as _struct
    import grader.sandbox.wire as _wire

    _tree = {"__ndarray__": 0, "dtype": "<f8", "shape": [1] * 70}
    _head = _json.dumps({"value": {"__dict__": {"ok": _tree}}, "buffers": [8]}).encode()
    _bad = _wire.MAGIC + _struct.pack(">I", len(_head)) + _head + bytes(8)
    _real = _wire.encode

    def _once(value):
        _wire.encode = _real
        return _bad

    _wire.encode = _once
    return None
"""


def _empty_kernel_and(wrapper: str):
    def edit(src: str, ctx: Ctx) -> str:
        return patch(patch(src, "vector_add", EMPTY_KERNEL), "gpu_vector_add", wrapper)

    return edit


def _dims_70(src: str, ctx: Ctx) -> str:
    body = DIMENSIONS_70.strip("\n") + "\n" + _region(src, "save_metric")
    return replace_region(src, "save_metric", body.splitlines())


TOY_MODEL = {"name": "toy", "dim": 8, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1,
             "vocab_size": 16, "ffn_hidden_dim": 8, "tied_embeddings": True}


def _impersonator(src: str, ctx: Ctx) -> str:
    return replace_cell(src, "vector_add", IMPERSONATOR)


def _patched_harness(src: str, ctx: Ctx) -> str:
    src = patch(src, "vector_add", ZERO_KERNEL)
    return insert_cell_before(src, "vector_add", HARNESS_PATCHES)


def _not_ptx_patched(src: str, ctx: Ctx) -> str:
    src = patch(src, "vector_add", "i = cuda.grid(1)\nif i < c.size:\n    d = {}\n"
                                   "    d[0] = a[i]\n    c[i] = d[0] + b[i]")
    return insert_cell_before(src, "vector_add", NOT_PTX_WITH_PATCHED_COMPILE)


def _readback_forged(src: str, ctx: Ctx) -> str:
    src = patch(src, "save_metric", "return None")
    return insert_cell_before(src, "validate_config", READBACK_PATCHES)


def _numpy_scalars(src: str, ctx: Ctx) -> str:
    for grade_id, old, new in (
        ("is_memory_bound", "return bool(value < ridge)", "return np.bool_(value < ridge)"),
        ("launch_config", "return blocks, threads_per_block",
         "return np.int64(blocks), np.int64(threads_per_block)"),
        ("sectors_per_warp", "return count", "return np.int64(count"),
    ):
        body = _region(src, grade_id)
        assert old in body, (grade_id, old)
        body = body.replace(old, new)
        if grade_id == "sectors_per_warp":
            body = body.rstrip("\n") + ")\n"
        src = replace_region(src, grade_id, body.splitlines())
    return src


def _forged_frame(src: str, ctx: Ctx) -> str:
    body = FORGED_FRAME.strip("\n") + "\n" + _region(src, "save_metric")
    return replace_region(src, "save_metric", body.splitlines())


def _toy_record_with_stubs(dest: Path, ctx: Ctx) -> None:
    """The untouched release (stubs) and a correct record, computed by hand, for a toy model."""
    from grader.sandbox.harness import load_module

    ref = load_module(ctx.root / "solutions" / M9 / f"{M9}.py", "corpus_reference_m9")
    gpu = ref.load_hardware(ctx.root / "course.toml")[ref.COURSE_GPU]
    record = ref.m9_record(TOY_MODEL, gpu, 64)
    release = (ctx.release / M9 / f"{M9}.py").read_text(encoding="utf-8")
    write_fork(dest, {M9: release}, metrics=json.loads(json.dumps({M9: record})), ctx=ctx)


def _toy_record_with_reference(dest: Path, ctx: Ctx) -> None:
    """The reference notebook and a record it does reproduce, but for a toy model."""
    from grader.sandbox.harness import load_module

    ref = load_module(ctx.root / "solutions" / M9 / f"{M9}.py", "corpus_reference_m9")
    gpu = ref.load_hardware(ctx.root / "course.toml")[ref.COURSE_GPU]
    record = ref.m9_record(TOY_MODEL, gpu, 64)
    write_fork(dest, {M9: ctx.solutions[M9]}, metrics={M9: record}, ctx=ctx)


CASES: list[Case] = [
    Case("kernel_impersonator", "vector_add is an object whose class is named FakeCUDAKernel "
         "(module numba...) and adds on the host",
         with_source(GF, _impersonator),
         Expect(GF, [Rule(KERNEL_TESTS + "|" + WRAPPER_TESTS, BROKEN,
                          ("no top-level `def vector_add",))], max_s=60), slow=True),
    Case("patches_harness", "patches the in-worker harness: numba's compile_ptx, the kernel "
         "host's launch and timing, the wrapper's launch recorder; ships a kernel writing zeros",
         with_source(GF, _patched_harness),
         Expect(GF, [Rule(KERNEL_TESTS, BROKEN, ("differ",)),
                     Rule(WRAPPER_TESTS, BROKEN, ("launch record", "not what its launches",
                                                  "differ")),
                     # its fake recorder breaks its own timing function's launches
                     Rule(r"test_coalescing_slowdown_runs", BROKEN, ("IndexError",
                                                                     "launch record"))],
                max_s=60), slow=True),
    Case("kernel_not_ptx_patched_compile", "vector_add uses a dict (runs in the simulator, not "
         "on a GPU) and the notebook patches numba.cuda.compile_ptx to return fake PTX",
         with_source(GF, _not_ptx_patched),
         Expect(GF, [Rule(KERNEL_TESTS + "|" + WRAPPER_TESTS, BROKEN,
                          ("does not compile for the course GPU",))], max_s=60), slow=True),
    Case("wrapper_numpy", "gpu_vector_add computes a + b with numpy; a launch in dead code "
         "satisfies a static check",
         with_source(GF, lambda s, c: patch(s, "gpu_vector_add", NUMPY_WRAPPER)),
         Expect(GF, [Rule(WRAPPER_TESTS, BROKEN, ("without launching vector_add",))],
                max_s=60), slow=True),
    Case("readback_forged", "save_metric writes nothing and the notebook patches the "
         "grader's read-back (grader.core.readback, Student.read_file) in the worker",
         with_source(M9, _readback_forged),
         # its invalid-argument cases fail too: it returns None instead of raising
         Expect(M9, [Rule(_fn("save_metric"), BROKEN, ("did not create", "returned None"))])),
    Case("exception_named_like_grader", "m9_record raises the student's own class "
         "WorkerTimeout with a timeout-like message",
         with_source(M9, lambda s, c: patch(s, "m9_record", GRADER_NAMED_EXCEPTIONS)),
         Expect(M9, [Rule(M9_RECORD, ("failed", "error"), ("raised WorkerTimeout",))])),
    Case("forged_reply_frame", "save_metric writes a junk frame onto every pipe, the worker's "
         "private reply channel included",
         with_source(M9, _forged_frame),
         Expect(M9, [Rule(_fn("save_metric"), BROKEN, ("malformed reply",))])),
    Case("metrics_toy_config_stubs", "an untouched release (stubs) with a correct, hand-computed "
         "metrics.json record for a toy model (dim 8, one layer)",
         _toy_record_with_stubs,
         Expect(M9, [Rule("metrics", BROKEN, ("smaller than the course model", "not done yet",
                                              "is still the stub", "NotImplementedError")),
                     Rule(r"^(public|hidden)/test_", BROKEN,
                          ("is still the stub", "not done yet", "NotImplementedError"))])),
    Case("metrics_toy_config", "the reference notebook with a record it reproduces, for a toy "
         "model smaller than the course model",
         _toy_record_with_reference,
         Expect(M9, [Rule(r"(public|hidden)/test_metrics_", BROKEN,
                          ("smaller than the course model",))])),
    Case("numpy_scalars", "is_memory_bound returns numpy.bool_, launch_config and "
         "sectors_per_warp return numpy.int64 where Python bool / int are required",
         with_source(GF, _numpy_scalars),
         Expect(GF, [Rule(r"test_invalid_input", OK, ()),
                     Rule(WRAPPER_TESTS, OK, ()),
                     Rule(r"is_memory_bound", BROKEN, ("Python bool",)),
                     Rule(r"launch_config", BROKEN, ("Python ints",)),
                     Rule(r"sectors_per_warp", BROKEN, ("Python int",))],
                max_s=60), slow=True),
    Case("wrapper_numpy_then_empty_kernel", "an empty vector_add; gpu_vector_add computes a + b "
         "with numpy into c, then launches the empty kernel on that c",
         with_source(GF, _empty_kernel_and(NUMPY_THEN_EMPTY)),
         Expect(GF, [Rule(KERNEL_TESTS, BROKEN, ("differ", "wrote nothing")),
                     Rule(WRAPPER_TESTS, BROKEN, ("not what its launches",))],
                max_s=60), slow=True),
    Case("wrapper_prefilled_output", "an empty vector_add; gpu_vector_add launches it on an "
         "output array already holding a + b",
         with_source(GF, _empty_kernel_and(PREFILLED_OUTPUT)),
         Expect(GF, [Rule(KERNEL_TESTS, BROKEN, ("differ", "wrote nothing")),
                     Rule(WRAPPER_TESTS, BROKEN, ("not what its launches",))],
                max_s=60), slow=True),
    Case("wrapper_forged_launch_record", "an empty vector_add; gpu_vector_add computes a + b with "
         "numpy and writes a launch record into the grader's recorder without launching",
         with_source(GF, _empty_kernel_and(FORGED_RECORD)),
         Expect(GF, [Rule(KERNEL_TESTS, BROKEN, ("differ", "wrote nothing")),
                     Rule(WRAPPER_TESTS, BROKEN, ("not what its launches",))],
                max_s=60), slow=True),
    Case("coalescing_slowdown_constant", "coalescing_slowdown validates n and returns 3.0 "
         "without launching anything",
         with_source(GF, lambda s, c: patch(s, "coalescing_slowdown", CONSTANT_SLOWDOWN)),
         Expect(GF, [Rule(r"test_coalescing_slowdown_runs", BROKEN, ("without launching",))],
                max_s=60), slow=True),
    Case("reply_70_dimensions", "save_metric('', ...) answers with a reply whose header names a "
         "70-dimensional array (numpy refuses it in the trusted process) instead of raising",
         with_source(M9, _dims_70),
         # the first call that broke the protocol names the reply; save_metric is not called again
         Expect(M9, [Rule(r"\[save_metric\(path, key=''", BROKEN, ("malformed reply",)),
                     Rule(_fn("save_metric"), OK + BROKEN, ("not called again",))])),
]
