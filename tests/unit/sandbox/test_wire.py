"""The trust-boundary format carries plain data exactly and refuses everything else."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.sandbox.wire import MAGIC, NotPlainData, decode, encode, roundtrip

plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        | st.tuples(inner, inner)
    ),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None)
@given(plain)
def test_plain_values_roundtrip_exactly(value):
    out = roundtrip(value)
    assert out == value
    assert type(out) is type(value)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "uint8", "bool", "complex64"])
def test_arrays_keep_dtype_shape_and_bytes(dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 3).astype(dtype)
    b = roundtrip({"a": a, "t": a.T})
    assert b["a"].dtype == a.dtype and b["a"].shape == a.shape
    np.testing.assert_array_equal(b["a"], a)
    np.testing.assert_array_equal(b["t"], a.T)
    assert b["a"].flags.writeable


def test_special_floats_and_numpy_scalars():
    out = roundtrip([float("nan"), float("inf"), np.float32(1.5), np.int64(7), np.bool_(True)])
    assert np.isnan(out[0]) and out[1] == float("inf")
    assert out[2:] == [1.5, 7, True]


@pytest.mark.parametrize(
    "value",
    [
        np.bool_(False),
        np.int8(-128),
        np.uint64(2**64 - 1),
        np.float32(1.5),
        np.float64("nan"),
        np.float16(-np.inf),
        np.complex64(1 - 2j),
        np.int64(7),
    ],
)
def test_numpy_scalars_arrive_as_their_own_type(value):
    """`type(x) is bool` must be able to fail: a numpy scalar is not turned into a Python one."""
    out = roundtrip(value)
    assert type(out) is type(value)
    assert out == value or (np.isnan(out) and np.isnan(value))
    assert type(roundtrip(True)) is bool and type(roundtrip(7)) is int


@pytest.mark.parametrize(
    "node",
    [
        {"__scalar__": "<i1", "value": 1000},  # out of the dtype's range
        {"__scalar__": "|O", "value": 1},  # object dtype
        {"__scalar__": "<f8", "value": "1.0"},  # a string where a float belongs
        {"__scalar__": "|b1", "value": 1},  # an int where a bool belongs
        {"__scalar__": "<c8", "value": [1.0]},  # a complex needs two parts
        {"__scalar__": "<f8"},  # no value
    ],
)
def test_malformed_numpy_scalars_are_refused(node):
    header = json.dumps({"value": node, "buffers": []}).encode()
    with pytest.raises(NotPlainData):
        decode(MAGIC + struct.pack(">I", len(header)) + header)


class AlwaysEqual:
    def __eq__(self, other):
        return True


class SneakyFloat(float):
    pass


@pytest.mark.parametrize(
    "value",
    [
        AlwaysEqual(),
        SneakyFloat(2.0),
        {1: 2},
        np.array(["a"]),
        np.array([object()]),
        b"raw",
        set(),
        np.ma.masked_array([1, 2]),
        [[[[0]]]] * 0 + [AlwaysEqual()],
    ],
)
def test_non_plain_values_are_refused(value):
    with pytest.raises(NotPlainData):
        encode(value)


def _message(header: dict, *buffers: bytes) -> bytes:
    h = json.dumps(header).encode()
    return MAGIC + struct.pack(">I", len(h)) + h + b"".join(buffers)


@pytest.mark.parametrize(
    "data",
    [
        b"\x80\x04pickle",
        _message(
            {"value": {"__ndarray__": 0, "dtype": "O", "shape": [1]}, "buffers": [8]}, b"x" * 8
        ),
        _message(
            {"value": {"__ndarray__": 0, "dtype": "<f4", "shape": [3]}, "buffers": [8]}, b"x" * 8
        ),
        _message(
            {"value": {"__ndarray__": 5, "dtype": "<f4", "shape": [2]}, "buffers": [8]}, b"x" * 8
        ),
        _message({"value": {"__builtins__": 1}, "buffers": []}),
        _message({"value": 1, "buffers": [4]}),
        _message({"value": 1, "buffers": []}) + b"trailing",
        MAGIC + struct.pack(">I", 10_000) + b"{}",
        # numpy itself refuses to build these (ValueError): still a malformed message (issue 24)
        _message(
            {"value": {"__ndarray__": 0, "dtype": "<f8", "shape": [1] * 70}, "buffers": [8]},
            b"\0" * 8,
        ),
        _message({"value": {"__ndarray__": 0, "dtype": "V-1", "shape": [1]}, "buffers": [1]}, b"x"),
    ],
)
def test_malformed_messages_are_refused(data):
    with pytest.raises(NotPlainData):
        decode(data)


def test_deep_nesting_is_refused_not_crashing():
    value: list = []
    for _ in range(200):
        value = [value]
    with pytest.raises(NotPlainData):
        encode(value)
