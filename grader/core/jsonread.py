"""The one reader for every JSON a submission supplies (metrics.json, pr.json, an .ipynb).

A submission's JSON is hostile input read in the trusted process. ``json.loads`` alone is not
bounded: 200 kB of nested lists raise ``RecursionError`` (which callers catching ``ValueError``
miss) and a few MB of ``[]`` cost hundreds of MB. So the bytes are measured before they are
parsed: size, nesting depth and value count, with C-speed byte counts and replaces that build
no objects (brackets inside strings are left out when that matters), and only then handed to
``json.loads``. Every failure is a `JsonReadError` whose message names the file and says what to
do; nothing else escapes. `grader.sandbox.wire` uses `count_values` for the trusted side's replies.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.core.errors import SubmissionError


@dataclass(frozen=True)
class JsonLimits:
    """Bounds on one JSON file: bytes on disk, nesting depth, values (containers + scalars)."""

    max_bytes: int
    max_depth: int
    max_items: int


# metrics.json holds a few small records (one per milestone): generous for that, small for a bomb.
METRICS_LIMITS = JsonLimits(max_bytes=1 << 20, max_depth=32, max_items=100_000)
METRICS_HINT = "delete it and rerun the notebook cell that writes it"


class JsonReadError(SubmissionError, ValueError):
    """A submission's JSON file could not be taken; the message is student-facing feedback."""


class JsonMissing(JsonReadError):
    """The file does not exist (or is not a regular file)."""


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # unrolled: twice as fast
_JOIN_BYTES = 16 << 20
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


def _values(data: bytes) -> int:
    return data.count(b"[") + data.count(b"{") + data.count(b",") + data.count(b":") + 1


def count_values(data: bytes, limit: int) -> int:
    """An upper bound on the values json.loads would build from `data`, exact enough to compare
    with `limit`: brackets, commas and colons inside strings are not counted. Copies nothing
    (a reply's header can be tens of MB) and walks the strings only when the plain count is
    over `limit`."""
    total = _values(data)
    if total <= limit:
        return total
    # Each string is a value with two quotes not preceded by a backslash: more of those than
    # `limit` settles it without the walk, which is therefore at most `limit` strings long.
    strings = (data.count(b'"') - data.count(b'\\"')) // 2
    if strings > limit:
        return strings
    if len(data) <= _JOIN_BYTES:  # the strings' text at C speed (at most twice the memory)
        return total - (_values(b"".join(_STRING.findall(data))) - 1)
    for m in _STRING.finditer(data):  # a large reply header: one string at a time
        total -= _values(m.group()) - 1
    return total


def _brackets(data: bytes, exact: bool) -> bytes:
    """The brackets of `data` in order; `exact`: leaving out those inside strings."""
    if not exact:
        return data.translate(None, _NOT_BRACKETS)
    out, pos = bytearray(), 0
    for m in _STRING.finditer(data):
        out += data[pos : m.start()].translate(None, _NOT_BRACKETS)
        pos = m.end()
    out += data[pos:].translate(None, _NOT_BRACKETS)
    return bytes(out)


def _depth_problem(brackets: bytes, max_depth: int) -> str | None:
    """Peel innermost pairs max_depth times (C-speed replaces): what is left is too deep."""
    for _ in range(max_depth):
        if not brackets:
            return None
        # a marker, so that "{[]}" loses one level per pass, not two
        peeled = brackets.replace(b"[]", b"\0").replace(b"{}", b"\0").replace(b"\0", b"")
        if len(peeled) == len(brackets):
            return "it is not valid JSON: its brackets [ ] and { } do not match"
        brackets = peeled
    if brackets:
        return f"it is nested more than {max_depth} levels deep"
    return None


def _shape(data: bytes, limits: JsonLimits) -> str | None:
    """Why `data` is over the depth or element limits, or None: checked before parsing, in time
    and memory proportional to its size (no objects built)."""
    if count_values(data, limits.max_items) > limits.max_items:
        return f"it holds more than {limits.max_items:,} values"
    why = _depth_problem(_brackets(data, exact=False), limits.max_depth)
    if why and b'"' in data:  # brackets inside strings may have counted: look again, exactly
        why = _depth_problem(_brackets(data, exact=True), limits.max_depth)
    return why


def _read_bytes(path: Path, what: str, cap: int) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError as exc:
        raise JsonMissing(f"{what} not found") from exc
    except OSError as exc:
        raise JsonMissing(f"{what} not found (it is a symlink or unreadable)") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise JsonMissing(f"{what} not found (it is not a regular file)")
        if st.st_size > cap:
            raise JsonReadError(
                f"{what} is {st.st_size / 1e6:.1f} MB, over the {cap / 1e6:.1f} MB limit; "
                "it should hold a few small records"
            )
        data = os.read(fd, cap + 1)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise JsonReadError(f"{what} is over the {cap / 1e6:.1f} MB limit")
    return data


def loads_bounded(data: bytes, what: str, limits: JsonLimits, hint: str = "") -> Any:
    """Parse JSON bytes within `limits`; raises JsonReadError (never anything else)."""
    tail = f"; {hint}" if hint else ""
    if len(data) > limits.max_bytes:
        raise JsonReadError(f"{what} is over the {limits.max_bytes / 1e6:.1f} MB limit{tail}")
    why = _shape(data, limits)
    if why:
        raise JsonReadError(f"{what} cannot be read: {why}{tail}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonReadError(f"{what} is not UTF-8 text (byte {exc.start}){tail}") from exc
    try:
        return json.loads(text)
    except RecursionError as exc:  # unreachable after _shape; kept as the last line of defence
        raise JsonReadError(f"{what} cannot be read: it is nested too deeply{tail}") from exc
    except ValueError as exc:
        raise JsonReadError(f"{what} is not valid JSON ({exc}){tail}") from exc


def read_json(path: Path, what: str, limits: JsonLimits, hint: str = "") -> Any:
    """Read and parse the submission file at `path` (no symlinks) within `limits`."""
    return loads_bounded(_read_bytes(Path(path), what, limits.max_bytes), what, limits, hint)


def read_metrics(path: Path) -> dict:
    """The submission's metrics.json as a dict; raises JsonReadError saying what to fix."""
    data = read_json(path, "metrics.json", METRICS_LIMITS, METRICS_HINT)
    if not isinstance(data, dict):
        raise JsonReadError("metrics.json must hold a JSON object ({...}) keyed by milestone")
    return data


def metrics_or_none(path: Path) -> dict | None:
    """metrics.json for a report (the plot), or None when it cannot be taken: the suites say why."""
    try:
        return read_metrics(path)
    except JsonReadError:
        return None
