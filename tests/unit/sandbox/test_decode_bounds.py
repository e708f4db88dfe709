"""Reply decoding in the trusted process is bounded in values, bytes and time (issue 12)."""

from __future__ import annotations

import struct
import time

import numpy as np
import pytest

from grader.sandbox import wire


def _message(value: bytes) -> bytes:
    """A message as a tampered sender writes it, past `wire.encode`'s own checks."""
    header = b'{"value": ' + value + b', "buffers": []}'
    return wire.MAGIC + struct.pack(">I", len(header)) + header


def test_many_small_objects_refused_before_parsing():
    msg = _message(b"[" + b"[]," * 3_000_000 + b"[]]")
    start = time.perf_counter()
    with pytest.raises(wire.NotPlainData, match="numpy array"):
        wire.decode(msg)
    assert time.perf_counter() - start < 2.0  # counted on the bytes, no objects built


def test_a_million_numbers_still_travel():
    assert wire.decode(wire.encode(list(range(1_000_000))))[-1] == 999_999


def test_brackets_in_strings_are_not_objects():
    value = ["[" * 3_000_000]
    assert wire.roundtrip(value) == value


def test_arrays_are_not_counted():
    arr = np.zeros(4_000_000, dtype=np.uint8)
    assert wire.roundtrip({"a": arr})["a"].shape == arr.shape


def test_header_over_the_byte_limit(monkeypatch):
    msg = wire.encode("x" * 2000)
    monkeypatch.setattr(wire, "MAX_HEADER_BYTES", 1000)
    with pytest.raises(wire.NotPlainData, match="MiB limit"):
        wire.decode(msg)


def test_the_encoder_refuses_what_the_decoder_would(monkeypatch):
    """An honest sender never sends a header the receiver refuses: a refusal means tampering."""
    monkeypatch.setattr(wire, "MAX_VALUES", 1000)
    with pytest.raises(wire.OverTheLimit, match="more than 1,000 lists"):
        wire.encode([[] for _ in range(1001)])
    assert wire.decode(wire.encode([[] for _ in range(400)])) == [[]] * 400
    monkeypatch.setattr(wire, "MAX_HEADER_BYTES", 1000)
    with pytest.raises(wire.OverTheLimit, match="MiB limit"):
        wire.encode("x" * 2000)
    assert wire.decode(wire.encode("x" * 900)) == "x" * 900


def test_decoding_counts_against_the_deadline():
    msg = wire.encode(list(range(100_000)))
    with pytest.raises(TimeoutError):
        wire.decode(msg, deadline=time.monotonic() - 0.001)
    assert len(wire.decode(msg, deadline=time.monotonic() + 60)) == 100_000


def test_deep_nesting_is_not_a_recursion_error():
    header = b'{"value": ' + b"[" * 200_000 + b"]" * 200_000 + b', "buffers": []}'
    msg = wire.MAGIC + struct.pack(">I", len(header)) + header
    with pytest.raises(wire.NotPlainData):
        wire.decode(msg)
