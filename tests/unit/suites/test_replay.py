"""The trusted replay of a host wrapper's launches (issue 24): the test's own inputs, fresh
poisoned outputs, and the wrapper's result compared with what the replayed kernels wrote."""

from __future__ import annotations

import numpy as np
import pytest

from grader.suites.replay import MAX_REPLAY_BYTES, RecordRefused, Replay, poison
from grader.suites.student import InProcessBackend, KernelRefused, Student

KERNELS = """
import numpy as np
from numba import cuda


@cuda.jit
def vector_add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


@cuda.jit
def empty(a, b, c):
    i = cuda.grid(1)


def timed(n):
    a = cuda.to_device(np.ones(n, np.float32))
    c = cuda.device_array(n, np.float32)
    for _ in range(20):  # more than the record keeps: counted, not refused
        vector_add[1, n](a, a, c)
    return 2.0


def constant(n):
    if False:
        vector_add[1, 1](None, None, None)
    return 3.0


@cuda.jit
def block_sum(x, partial):
    cache = cuda.shared.array(32, numba.float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    cache[tid] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    step = 16
    while step > 0:
        if tid < step:
            cache[tid] += cache[tid + step]
        cuda.syncthreads()
        step //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = cache[0]


@cuda.jit
def nothing(x, partial):
    i = cuda.grid(1)

"""

SUMS = """
import numba


def partial_sums(x):
    blocks = (x.size + 31) // 32
    d_partial = cuda.device_array(blocks, dtype=np.float32)
    block_sum[blocks, 32](cuda.to_device(x), d_partial)
    return float(d_partial.copy_to_host().sum())


def launch_then_numpy(x):
    blocks = (x.size + 31) // 32
    nothing[blocks, 32](cuda.to_device(x), cuda.device_array(blocks, dtype=np.float32))
    return float(np.sum(x))


def one_element(x):  # two passes: the partial sums of up to 32 blocks, then their sum
    blocks = (x.size + 31) // 32
    d_partial = cuda.device_array(blocks, dtype=np.float32)
    total = cuda.device_array(1, dtype=np.float32)
    block_sum[blocks, 32](cuda.to_device(x), d_partial)
    block_sum[1, 32](d_partial, total)
    return float(total.copy_to_host()[0])
"""

WRAPPERS = {
    "honest": """
def wrap(a, b, tpb=32):
    d_a, d_b = cuda.to_device(a), cuda.to_device(b)
    d_c = cuda.device_array(a.size, dtype=a.dtype)
    vector_add[(a.size + tpb - 1) // tpb, tpb](d_a, d_b, d_c)
    return d_c.copy_to_host()
""",
    "numpy_then_empty": """
def wrap(a, b, tpb=32):
    c = a + b
    empty[(a.size + tpb - 1) // tpb, tpb](a, b, c)
    return c
""",
    "prefilled": """
def wrap(a, b, tpb=32):
    d_c = cuda.to_device(a + b)
    empty[(a.size + tpb - 1) // tpb, tpb](cuda.to_device(a), cuda.to_device(b), d_c)
    return d_c.copy_to_host()
""",
    "forged_record": """
def wrap(a, b, tpb=32):
    if False:
        empty[1, 1](a, b, a)
    args = [{"slot": 0, "shape": [a.size], "dtype": a.dtype.str, "input": 0},
            {"slot": 1, "shape": [a.size], "dtype": a.dtype.str, "input": 1},
            {"slot": 2, "shape": [a.size], "dtype": a.dtype.str}]
    empty._log.append({"kernel": "empty", "grid": 1, "block": a.size, "args": args})
    return a + b
""",
    "claims_foreign_input": """
def wrap(a, b, tpb=32):
    c = a + b
    empty[1, a.size](a, b, c)
    empty._log[-1]["args"][2] = {"slot": 2, "shape": [a.size], "dtype": a.dtype.str,
                                 "input": 5}
    return c
""",
    "rounds_grid_down": """
def wrap(a, b, tpb=32):
    c = np.zeros_like(a)
    vector_add[a.size // tpb, tpb](a, b, c)
    return c
""",
}


def student_for(tmp_path, wrapper: str) -> Student:
    nb = tmp_path / "nb.py"
    nb.write_text(KERNELS + WRAPPERS.get(wrapper, SUMS), encoding="utf-8")
    return Student(InProcessBackend({"a1": nb}), "a1")


def kernel_of(wrapper: str) -> str:
    return "vector_add" if wrapper in ("honest", "rounds_grid_down") else "empty"


def test_an_honest_wrapper_is_credited_with_its_result(tmp_path):
    a = np.arange(70, dtype=np.float32)
    b = np.full(70, 0.5, dtype=np.float32)
    got = student_for(tmp_path, "honest").wrap.launching("vector_add")(a, b)
    assert np.array_equal(got, a + b)


@pytest.mark.parametrize(
    "wrapper,says",
    [
        ("numpy_then_empty", "not what its launches"),
        ("prefilled", "not what its launches"),
        ("forged_record", "not what its launches"),
        ("claims_foreign_input", "not one of the test's input arrays"),
        ("rounds_grid_down", "elements differ"),
    ],
)
def test_a_result_the_kernel_did_not_write_earns_nothing(tmp_path, wrapper, says):
    a = np.arange(70, dtype=np.float32)
    b = np.full(70, 0.5, dtype=np.float32)
    student = student_for(tmp_path, wrapper)
    with pytest.raises(KernelRefused) as info:
        student.wrap.launching(kernel_of(wrapper))(a, b)
    assert says in info.value.message, info.value.message


def test_a_number_is_held_to_what_the_kernel_wrote(tmp_path):
    """A wrapper that returns a number: the sum of the partial sums its kernel wrote (the
    relation the test states), or the one element a kernel accumulated into (by default)."""
    x = np.arange(70, dtype=np.float32)
    student = student_for(tmp_path, "sums")
    got = student.partial_sums.launching("block_sum", returns=np.sum)(x)
    assert got == float(x.sum())
    assert student.one_element.launching("block_sum")(x) == float(x.sum())
    with pytest.raises(KernelRefused) as info:  # without the relation a sum is not an array
        student.partial_sums.launching("block_sum")(x)
    assert "does not follow from what its launches" in info.value.message
    with pytest.raises(KernelRefused) as info:  # a host sum beside an empty kernel earns nothing
        student.launch_then_numpy.launching("nothing", returns=np.sum, rtol=1e-3)(x)
    assert f"it returned {float(x.sum())!r}; what the kernels wrote gives nan" in (
        info.value.message
    ), info.value.message


def test_a_relation_holds_within_its_tolerance_only():
    from grader.suites.replay import Relation

    partials = np.array([1.0, 2.0, 3.5], dtype=np.float32)
    summed = Relation(np.sum, rtol=1e-6)
    assert summed.holds(6.5, partials) and summed.holds(6.5 * (1 + 1e-7), partials)
    assert not summed.holds(6.6, partials) and not summed.holds("6.5", partials)
    assert not summed.holds(True, partials)  # a bool is no number here
    assert Relation().holds(2.0, np.array([2.0])) and not Relation().holds(2.0, partials)
    assert not Relation(lambda a: None).holds(6.5, partials)  # "not this array"
    assert Relation().holds(partials.copy(), partials)


def test_poison_is_nan_or_a_byte_pattern():
    assert np.isnan(poison((3,), np.dtype(np.float32))).all()
    ints = poison((2,), np.dtype(np.int32))
    assert ints.tobytes() == bytes([0xA5]) * 8


def _entry(*args) -> dict:
    return {"kernel": "k", "grid": 1, "block": 1, "args": list(args)}


@pytest.mark.parametrize(
    "desc,says",
    [
        ({"slot": 0, "shape": [4], "dtype": "<f4", "input": 1}, "not an array"),
        ({"slot": 0, "shape": [5], "dtype": "<f4", "input": 0}, "claims to be"),
        ({"slot": 0, "shape": [4], "dtype": "<f2", "input": 0}, "claims to be"),  # unsafe cast
        ({"slot": 0, "shape": [1 << 40], "dtype": "<f4"}, "larger than"),
        ({"slot": 0, "shape": [4], "dtype": "|O"}, "dtype"),
        ({"slot": 99, "shape": [4], "dtype": "<f4"}, "slot"),
        ({"scalar": [1, 2]}, "not a number"),
        ("junk", "neither"),
    ],
)
def test_a_record_naming_anything_else_is_refused(desc, says):
    replay = Replay("w", (np.ones(4, np.float32), 3), {})
    with pytest.raises(RecordRefused, match=says):
        replay.arguments(_entry(desc), 1)


def test_a_slot_keeps_what_it_is_and_the_total_is_bounded():
    replay = Replay("w", (np.ones(4, np.float32),), {})
    replay.arguments(_entry({"slot": 0, "shape": [4], "dtype": "<f4"}), 1)
    with pytest.raises(RecordRefused, match="changes what slot"):
        replay.arguments(_entry({"slot": 0, "shape": [4], "dtype": "<f4", "input": 0}), 2)
    big = MAX_REPLAY_BYTES // 8 // 2 + 1
    replay = Replay("w", (), {})
    replay.arguments(_entry({"slot": 0, "shape": [big], "dtype": "<f8"}), 1)
    with pytest.raises(RecordRefused, match="MiB of arrays"):
        replay.arguments(_entry({"slot": 1, "shape": [big], "dtype": "<f8"}), 2)


def test_a_timing_function_pays_only_for_recorded_launches(tmp_path):
    student = student_for(tmp_path, "honest")
    assert student.timed.timing("vector_add")(16) == 2.0
    with pytest.raises(KernelRefused, match="without launching vector_add"):
        student.constant.timing("vector_add")(16)
