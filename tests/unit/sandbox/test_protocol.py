"""The boundary protocol: frames round-trip; over-limit frames and forged replies are refused."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from grader.core.kernel_source import extract
from grader.sandbox import channel, protocol, wire
from grader.sandbox.worker import serve
from grader.suites import errors, inprocess
from grader.suites.student import Student, StudentError, WorkerTimeout, make_error


def test_frames_round_trip_over_a_pipe():
    r, w = os.pipe()
    messages = [wire.encode({"ok": [1, "two", (3.0,)]}), b"", wire.encode(np.arange(5))]
    try:
        for m in messages:
            protocol.write_frame(w, m)
        os.close(w)
        got = [protocol.read_frame(r, protocol.MAX_REQUEST_BYTES) for _ in messages]
        assert got == messages
        assert protocol.read_frame(r, protocol.MAX_REQUEST_BYTES) is None  # end of file
    finally:
        os.close(r)
    assert protocol.frame(b"abc") == (3).to_bytes(8, "big") + b"abc"


def test_a_frame_over_its_limit_is_refused_before_its_body_is_read():
    r, w = os.pipe()
    try:
        os.write(w, protocol.FRAME.pack(1 << 40))  # announces a terabyte, sends nothing more
        with pytest.raises(protocol.FrameTooLarge) as info:
            protocol.read_frame(r, protocol.MAX_REQUEST_BYTES)
        assert info.value.size == 1 << 40
    finally:
        os.close(r)
        os.close(w)


def test_the_worker_stops_on_an_over_limit_request():
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    try:
        protocol.write_frame(req_w, wire.encode({"op": "ping"}))
        os.write(req_w, protocol.FRAME.pack(protocol.MAX_REQUEST_BYTES + 1))
        assert serve(req_r, rep_w, {}) == 65
        assert wire.decode(protocol.read_frame(rep_r, protocol.MAX_REPLY_BYTES)) == {"ok": "pong"}
    finally:
        for fd in (req_r, req_w, rep_r, rep_w):
            os.close(fd)


def _fake_worker(reply: bytes) -> subprocess.Popen:
    """A process that reads one framed request and answers with `reply` verbatim."""
    script = textwrap.dedent(
        f"""
        import os, sys
        head = os.read(0, 8)
        size = int.from_bytes(head, "big")
        while size:
            size -= len(os.read(0, size))
        os.write(1, {reply!r})
        sys.stdin.read()
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    os.set_blocking(proc.stdin.fileno(), False)
    return proc


def _exchange(reply: bytes):
    proc = _fake_worker(reply)
    try:
        return channel.exchange(proc, {"op": "ping"}, time.monotonic() + 30)
    finally:
        proc.kill()
        proc.wait()


def test_the_trusted_side_reads_a_valid_reply():
    assert _exchange(protocol.frame(wire.encode({"ok": 7}))) == {"ok": 7}


def test_an_over_limit_reply_is_a_crash_without_reading_it():
    with pytest.raises(channel.Failure) as info:
        _exchange(protocol.FRAME.pack(protocol.MAX_REPLY_BYTES + 1))
    assert info.value.kind == protocol.WORKER_CRASHED
    assert "over the 256 MiB limit" in info.value.message


def test_any_failure_to_decode_a_reply_is_a_malformed_reply(monkeypatch):
    """Whatever decoding raises (here numpy's own ValueError) is the worker's fault, never a
    value of the student's (issue 24)."""

    def broken(data, deadline=None):
        raise ValueError("maximum supported dimension for an ndarray is 64, found 70")

    monkeypatch.setattr(channel.wire, "decode", broken)
    with pytest.raises(channel.Failure) as info:
        _exchange(protocol.frame(wire.encode({"ok": 7})))
    assert info.value.kind == protocol.WORKER_CRASHED
    assert "malformed reply" in info.value.message and "70" in info.value.message


def test_expect_value_error_takes_only_the_students_value_error():
    from grader.suites.testing import expect_value_error

    student = make_error({"type": "ValueError", "message": "n must be >= 1"})
    expect_value_error(lambda: (_ for _ in ()).throw(student), "f(0)", "hint")
    with pytest.raises(ValueError, match="trusted"):  # the grader's own: the test's error
        expect_value_error(lambda: (_ for _ in ()).throw(ValueError("trusted")), "f(0)", "")
    crashed = errors.malformed("an array that cannot be built")
    with pytest.raises(pytest.fail.Exception, match="malformed reply"):
        expect_value_error(lambda: (_ for _ in ()).throw(crashed), "f(0)", "")


@pytest.mark.parametrize("expect", ["value_error", "type_error"])
def test_an_untouched_stub_reads_only_as_the_stub_in_error_tests(expect):
    """Day one: a test that expects an error says 'still the stub', not 'raised
    NotImplementedError ... expected TypeError' about code the student never wrote."""
    from grader.suites.testing import expect_raises, expect_value_error

    stub = make_error(
        {"type": "NotImplementedError", "message": "num_params: implement this (see the docstring)"}
    )

    def call():
        raise stub

    with pytest.raises(pytest.fail.Exception) as info:
        if expect == "value_error":
            expect_value_error(call, "num_params(cfg)", "hint")
        else:
            expect_raises(call, TypeError, "num_params(cfg)", "hint")
    assert str(info.value) == "num_params is still the stub: fill in its body"


def test_a_worker_reply_claiming_the_grader_origin_is_refused():
    forged = protocol.trusted_error(protocol.WORKER_TIMEOUT, "the grader says: time is up")
    assert not protocol.valid_reply(forged)
    with pytest.raises(channel.Failure, match="wrong shape"):
        _exchange(protocol.frame(wire.encode(forged)))
    # In-process the mark is stripped instead: the same error is then the student's own.
    said = make_error(protocol.untagged(forged)["error"], "f")
    assert not isinstance(said, WorkerTimeout) and not said.grader
    assert isinstance(
        make_error(protocol.trusted_error(protocol.WORKER_TIMEOUT, "x")["error"]), WorkerTimeout
    )


def test_reply_shapes():
    assert protocol.valid_reply(protocol.ok(None))
    assert protocol.valid_reply(protocol.error("ValueError", "bad", "trace"))
    for bad in (
        {},
        {"ok": 1, "error": {}},
        {"error": {"message": "no type"}},
        {"error": {"type": 1}},
        [1],
    ):
        assert not protocol.valid_reply(bad)


def test_a_non_plain_result_becomes_an_error_reply():
    reply = wire.decode(protocol.encode_reply({"ok": object()}, "f"))
    assert reply["error"]["type"] == protocol.NOT_PLAIN_DATA
    assert reply["error"]["message"].startswith("f returned something that is not plain data")


def test_a_reply_over_the_frame_limit_becomes_an_error_reply_the_trusted_side_accepts(
    monkeypatch,
):
    """The worker checks the trusted side's frame limit first, so an honest worker never sends
    a frame that `channel.exchange` refuses (which would bar the function)."""
    monkeypatch.setattr(protocol, "MAX_REPLY_BYTES", 1 << 20)
    data = protocol.encode_reply({"ok": np.zeros(1 << 18, dtype=np.float64)}, "f")
    assert len(data) <= protocol.MAX_REPLY_BYTES
    err = wire.decode(data)["error"]
    assert err["type"] == protocol.NOT_PLAIN_DATA
    assert err["message"] == (
        "f returned more than the grader carries back: a reply of 2 MB, over the 1 MiB a "
        "reply may carry"
    )
    small = protocol.encode_reply({"ok": np.zeros(1000)}, "f")
    assert wire.decode(small)["ok"].shape == (1000,)


def test_the_infrastructure_kinds_are_the_ones_the_facade_honours():
    assert set(errors._INFRASTRUCTURE) == protocol.INFRASTRUCTURE


def test_kernel_requests_come_from_extracted_source():
    ks = extract("from numba import cuda\n\n@cuda.jit\ndef k(a):\n    a[0] = 1\n", "k", "nb.py")
    req = protocol.compile_request(ks, "void(float32[:])", (7, 5))
    assert req == {
        "op": "kernel_compile",
        "source": ks.text,
        "name": "k",
        "devices": [],
        "signature": "void(float32[:])",
        "cc": [7, 5],
    }


def test_the_in_process_compilers_reply_cannot_claim_the_grader_origin():
    forged = {
        "error": {"type": "WorkerTimeout", "message": "x", "traceback": "", "origin": "grader"}
    }
    script = (
        "import os, sys; from grader.sandbox import protocol, wire; "
        f"protocol.read_frame(0, 1 << 20); protocol.write_frame(1, wire.encode({forged!r}))"
    )
    worker = inprocess.ChildWorker([])
    worker.proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    reply = worker._exchange({"op": "kernel_compile", "name": "k"}, 30, "compiling k")
    assert reply["error"]["type"] == protocol.WORKER_CRASHED, reply
    assert worker.proc is None  # stopped: the next request starts a fresh compiler


WRAPPED = """
from numba import cuda

@cuda.jit
def vector_add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]

def gpu_vector_add(a, b):
    c = a.copy()
    vector_add[1, 32](a, b, c)
    return c
"""


class _LongRecord:
    """A worker whose wrapper reply logs more launches than the harness ever keeps."""

    isolation = ()

    def graded_source(self, assignment: str) -> str:
        return WRAPPED

    def request(self, req: dict, timeout: float) -> dict:
        entry = {"kernel": "vector_add", "grid": 1, "block": 32, "args": []}
        return {"ok": {"value": 0, "launches": [entry] * (protocol.MAX_RECORDED_LAUNCHES + 1)}}


def test_the_trusted_side_replays_no_more_launches_than_the_harness_records():
    student = Student(_LongRecord(), "gpu_fundamentals")
    a = np.ones(4, np.float32)
    with pytest.raises(StudentError) as info:
        student.gpu_vector_add.launching("vector_add")(a, a)
    assert "longer than the harness keeps" in str(info.value)


class _Batch:
    """A worker that answers a `call_many` with the replies it was given."""

    isolation = ()

    def __init__(self, replies: object):
        self.replies = replies

    def request(self, req: dict, timeout: float) -> dict:
        assert req["op"] == "call_many"
        return {"ok": self.replies}


@pytest.mark.parametrize(
    "replies",
    [
        [{"ok": 1}],  # one reply for two calls
        [{"ok": 1}, {"ok": 2}, {"ok": 3}],
        [{"ok": 1}, protocol.trusted_error(protocol.WORKER_TIMEOUT, "the grader says so")],
        [{"ok": 1}, {"error": {"message": "no type"}}],
        "two replies",
    ],
)
def test_a_batch_reply_that_does_not_match_its_calls_is_malformed(replies):
    student = Student(_Batch(replies), "a")
    with pytest.raises(StudentError, match="malformed reply") as info:
        student.f.many([((1,), {}), ((2,), {})])
    assert info.value.grader and info.value.exc_type == protocol.WORKER_CRASHED


def test_each_entry_of_a_batch_is_the_students_own():
    entry = {"error": {"type": "ValueError", "message": "bad", "traceback": ""}}
    ok, bad = Student(_Batch([{"ok": [1, 2]}, entry]), "a").f.many([((), {}), ((), {})])
    assert ok.get() == [1, 2]
    with pytest.raises(ValueError, match="bad") as info:
        bad.get()
    assert not info.value.grader


def test_the_harness_refuses_a_batch_over_its_limit(tmp_path):
    from grader.sandbox.harness import Harness

    nb = tmp_path / "a.py"
    nb.write_text("def f(x):\n    return x\n")
    harness = Harness(nb, "a")
    over = [{"args": [1], "kwargs": {}}] * (protocol.MAX_BATCH_CALLS + 1)
    reply = harness.handle({"op": "call_many", "name": "f", "calls": over})
    assert reply["error"]["type"] == protocol.PROTOCOL_ERROR
    reply = harness.handle({"op": "call_many", "name": "f", "calls": over[:3]})
    assert reply == {"ok": [{"ok": 1}] * 3}
