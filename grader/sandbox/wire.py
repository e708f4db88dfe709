"""The only format that crosses the trust boundary: plain data and numpy arrays, never pickle.

A message is ``MAGIC | u32 header length | JSON header | raw array buffers``. The JSON tree holds
None, bool, int, float, str and lists; everything else is a tagged object:
``{"__tuple__": [...]}``, ``{"__dict__": {...}}``, ``{"__float__": "nan"}`` and
``{"__ndarray__": index, "dtype": "<f4", "shape": [...]}`` where index points into the buffers,
and ``{"__scalar__": "<f8", "value": ...}`` for a numpy scalar, which arrives as that numpy type.
Decoding runs json.loads and np.frombuffer on validated dtypes: no code of the sender runs in the
receiver. Encoding checks exact types, so a student's subclass with a lying ``__eq__`` is refused
instead of being trusted.
"""

from __future__ import annotations

import json
import math
import struct
import time
from typing import Any

import numpy as np

from grader.core.errors import SubmissionError
from grader.core.jsonread import count_values

MAGIC = b"GW1\n"
MAX_MESSAGE_BYTES = 1 << 30
MAX_DEPTH = 64
# Decoding is bounded in objects as well as bytes: 24 MB of "[]," is 8 million lists (1.2 GB).
# Bulk data travels as array buffers, which these do not count.
MAX_HEADER_BYTES = 64 << 20
MAX_VALUES = 2_000_000
_ALLOWED_KINDS = set("biufc")  # bool, int, uint, float, complex: no objects, strings or records


class NotPlainData(SubmissionError, TypeError):
    """A value that is not plain data (or a malformed message) tried to cross the boundary."""


class OverTheLimit(NotPlainData):
    """Plain data, but more of it than a message's header may carry (`MAX_HEADER_BYTES`,
    `MAX_VALUES`). `encode` refuses it as `decode` does, so that an honest sender never sends
    what the receiver must refuse: a refused message then means a tampered sender."""


def _check_header_size(size: int) -> None:
    if size > MAX_HEADER_BYTES:
        raise OverTheLimit(
            f"the value is {size / 1e6:.0f} MB of lists, dicts and scalars, over the "
            f"{MAX_HEADER_BYTES >> 20} MiB limit; return bulk data as a numpy array"
        )


def _check_header_values(header: bytes) -> None:
    if count_values(header, MAX_VALUES) > MAX_VALUES:
        raise OverTheLimit(
            f"the value holds more than {MAX_VALUES:,} lists, dicts and scalars (the "
            "limit); return bulk data as a numpy array"
        )


def describe(value: Any) -> str:
    """A short, safe description of a value for feedback (never calls its repr)."""
    t = type(value)
    return f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else t.__qualname__


def _to_tree(value: Any, buffers: list[bytes], depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise NotPlainData(f"value nested deeper than {MAX_DEPTH} levels")
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if t is list:
        return [_to_tree(v, buffers, depth + 1) for v in value]
    if t is tuple:
        return {"__tuple__": [_to_tree(v, buffers, depth + 1) for v in value]}
    if t is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise NotPlainData(f"dict key of type {describe(k)}; only str keys are plain data")
            out[k] = _to_tree(v, buffers, depth + 1)
        return {"__dict__": out}
    if t is np.ndarray:
        if value.dtype.kind not in _ALLOWED_KINDS or value.dtype.fields is not None:
            raise NotPlainData(f"numpy array of dtype {value.dtype}; only numeric arrays travel")
        arr = np.ascontiguousarray(value)
        buffers.append(arr.tobytes())
        return {"__ndarray__": len(buffers) - 1, "dtype": arr.dtype.str, "shape": list(arr.shape)}
    if isinstance(value, np.generic) and t.__module__ == "numpy":
        return _scalar_tree(value, buffers, depth)
    raise NotPlainData(f"a {describe(value)} is not plain data")


def _scalar_tree(value: np.generic, buffers: list[bytes], depth: int) -> dict:
    """A numpy scalar travels as itself (its dtype beside its value), so that a test's
    ``type(x) is bool`` sees the ``numpy.bool_`` the student returned."""
    dt = value.dtype
    if dt.kind not in _ALLOWED_KINDS or dt.fields is not None or type(value) is not dt.type:
        raise NotPlainData(f"numpy scalar of dtype {dt}")
    item = value.item()
    plain = [item.real, item.imag] if dt.kind == "c" else item
    return {"__scalar__": dt.str, "value": _to_tree(plain, buffers, depth + 1)}


def _scalar_from(node: dict, buffers: list[memoryview], depth: int) -> np.generic:
    try:
        dt = np.dtype(node["__scalar__"])
    except (TypeError, ValueError) as exc:
        raise NotPlainData("bad scalar dtype") from exc
    if dt.kind not in _ALLOWED_KINDS or dt.fields is not None or len(node) != 2:
        raise NotPlainData("malformed numpy scalar")
    if "value" not in node:
        raise NotPlainData("malformed numpy scalar")
    value = _from_tree(node["value"], buffers, depth + 1)
    want = {"b": (bool,), "i": (int,), "u": (int,), "f": (float,)}.get(dt.kind)
    if want is None:
        ok = isinstance(value, list) and len(value) == 2 and all(type(v) is float for v in value)
        value = complex(*value) if ok else None
    elif type(value) not in want:
        raise NotPlainData("numpy scalar value of the wrong type")
    if value is None:
        raise NotPlainData("malformed complex scalar")
    if dt.kind in "iu" and not np.iinfo(dt).min <= value <= np.iinfo(dt).max:
        raise NotPlainData("numpy integer out of its dtype's range")
    return dt.type(value)


def encode(value: Any) -> bytes:
    """Serialise plain data; raises NotPlainData for anything else, OverTheLimit for a header
    `decode` would refuse."""
    buffers: list[bytes] = []
    tree = _to_tree(value, buffers, 0)
    header = json.dumps(
        {"value": tree, "buffers": [len(b) for b in buffers]}, allow_nan=False
    ).encode()
    _check_header_size(len(header))
    _check_header_values(header)
    out = b"".join([MAGIC, struct.pack(">I", len(header)), header, *buffers])
    if len(out) > MAX_MESSAGE_BYTES:
        raise NotPlainData(f"message of {len(out)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return out


def _from_tree(node: Any, buffers: list[memoryview], depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise NotPlainData("message nested too deeply")
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_from_tree(v, buffers, depth + 1) for v in node]
    if isinstance(node, dict) and "__scalar__" in node:
        return _scalar_from(node, buffers, depth)
    if not isinstance(node, dict) or len(node) not in (1, 3):
        raise NotPlainData("malformed message")
    if "__tuple__" in node:
        return tuple(_from_tree(v, buffers, depth + 1) for v in _list(node["__tuple__"]))
    if "__dict__" in node:
        inner = node["__dict__"]
        if not isinstance(inner, dict):
            raise NotPlainData("malformed dict")
        return {k: _from_tree(v, buffers, depth + 1) for k, v in inner.items()}
    if "__float__" in node:
        text = node["__float__"]
        if text not in ("nan", "inf", "-inf"):
            raise NotPlainData("malformed float")
        return float(text)
    if "__ndarray__" in node:
        index, dtype, shape = node["__ndarray__"], node.get("dtype"), node.get("shape")
        if type(index) is not int or not 0 <= index < len(buffers):
            raise NotPlainData("array buffer index out of range")
        try:
            dt = np.dtype(dtype)
        except TypeError as exc:
            raise NotPlainData(f"bad dtype {dtype!r}") from exc
        if dt.kind not in _ALLOWED_KINDS or dt.fields is not None:
            raise NotPlainData(f"dtype {dtype!r} is not allowed")
        if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
            raise NotPlainData("bad array shape")
        buf = buffers[index]
        if math.prod(shape) * dt.itemsize != len(buf):
            raise NotPlainData("array buffer does not match its shape and dtype")
        return np.frombuffer(buf, dtype=dt).reshape(shape).copy()
    raise NotPlainData("malformed message")


def _list(node: Any) -> list:
    if not isinstance(node, list):
        raise NotPlainData("malformed tuple")
    return node


def _in_time(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise TimeoutError("decoding the message ran past its deadline")


def decode(data: bytes | bytearray, deadline: float | None = None) -> Any:
    """Parse a message from `encode`; raises NotPlainData on anything malformed or over the
    bounds (bytes, values), whatever the part of decoding that fails (json, numpy building an
    array), and TimeoutError once time.monotonic() passes `deadline`."""
    view = memoryview(data)
    if len(view) > MAX_MESSAGE_BYTES:
        raise NotPlainData("message too large")
    if bytes(view[:4]) != MAGIC or len(view) < 8:
        raise NotPlainData("not a grader message")
    (hlen,) = struct.unpack(">I", view[4:8])
    if 8 + hlen > len(view):
        raise NotPlainData("truncated message")
    _check_header_size(hlen)
    raw = bytes(view[8 : 8 + hlen])
    _in_time(deadline)
    _check_header_values(raw)
    _in_time(deadline)
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise NotPlainData("malformed message header") from exc
    if not isinstance(header, dict) or set(header) != {"value", "buffers"}:
        raise NotPlainData("malformed message header")
    sizes = header["buffers"]
    if not isinstance(sizes, list) or not all(type(s) is int and s >= 0 for s in sizes):
        raise NotPlainData("malformed buffer table")
    buffers, pos = [], 8 + hlen
    for size in sizes:
        if pos + size > len(view):
            raise NotPlainData("truncated array buffer")
        buffers.append(view[pos : pos + size])
        pos += size
    if pos != len(view):
        raise NotPlainData("trailing bytes after message")
    _in_time(deadline)
    try:
        value = _from_tree(header["value"], buffers, 0)
    except NotPlainData:
        raise
    except RecursionError as exc:
        raise NotPlainData("message nested too deeply") from exc
    except Exception as exc:  # noqa: BLE001 - e.g. numpy refusing 70 dimensions: still malformed
        raise NotPlainData(f"an array or value that cannot be built ({exc})") from exc
    _in_time(deadline)
    return value


def roundtrip(value: Any) -> Any:
    """Encode then decode: what the trusted side would see of `value`."""
    return decode(encode(value))
