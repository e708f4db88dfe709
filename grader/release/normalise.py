"""How the leak proof reads code and text: token streams that see through rewording.

A paste rarely keeps a line as it was: it sits in inline backticks or after "Example: ", loses
its spaces, gains or loses a trailing comment, renames a variable, or travels encoded. So the
leak proof (`grader.release.leak`) compares token streams, not lines:

* `tokens` splits text into words, numbers and single punctuation marks; whitespace is dropped,
  and so are backticks, quotes and ``#`` (markup and comment marks a paste adds or removes).
  A secret line is read with its trailing comment dropped first (`strip_comment`); released text
  keeps its comments' words, since a comment can hold a paste.
* Identifiers are normalised: in a secret line read as code, a name outside string literals
  that is not a keyword, a builtin or an attribute (a name after ``.``) may be renamed,
  consistently, as long as two in three of the line's names keep their own (`same_code`): a
  pasted line with a variable renamed is the same line, while a public test that calls the
  same function with its own variables is not. A solution's line long and particular enough
  to be nobody else's (`Stream.shape`: `MIN_SHAPE_TOKENS` tokens, `MIN_SHAPE_OPERATORS`
  arithmetic or comparison operators) is compared by its shape instead: every name may be
  renamed (consistently) and every number and string word changed, so `acc += math.exp(xs[r,
  k] - m)` is `local_sum += math.exp(x[row, k] - m)`; keywords, builtins, attributes and
  operators still count. `Stream.skeleton` (every identifier as one symbol, every number as
  another) is the cheap key candidates are found by before that check.
* `decoded` finds long base64 or hex strings (joined across the lines of a wrapped block) and
  yields what they decode to, gunzipped when it is gzip or zlib data, when that is UTF-8 text.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import keyword
import re
import zlib
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

NAME = "\0name"  # the skeleton's symbol for a renamable identifier
NUMBER = "\0number"  # ... and for a number
MIN_RENAME_TOKENS = 10  # a secret line shorter than this must match with its own names
# A secret line compared by its shape alone (every name, number and string word free): this
# many tokens, and this many arithmetic or comparison operators outside its strings
MIN_SHAPE_TOKENS = 12
MIN_SHAPE_OPERATORS = 2
SHAPE_OPERATORS = frozenset("+-*/%<>&|^~@")
MIN_ENCODED_CHARS = 40  # shorter strings are ids and hashes, not pasted files
MAX_DECODED_BYTES = 20 * 1024 * 1024
MAX_DEPTH = 3  # base64 of gzip of hex... at most this many layers

_TOKEN_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\S")
_DROPPED = frozenset("`#\"'")
_KEPT_NAMES = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | frozenset(dir(builtins))
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_B64_CHUNK = re.compile(r"[A-Za-z0-9+/]{20,}={0,2}")
_GAP = re.compile(r"[\s#\"'`,]*")
_HEX_RE = re.compile(rf"\b(?:[0-9a-fA-F]{{2}}){{{MIN_ENCODED_CHARS // 2},}}\b")


@dataclass
class Stream:
    """A text's tokens, the line each starts on (1-based), which are identifiers, and (for a
    secret line read as code) which are names a paste may rename."""

    tokens: list[str]
    lines: list[int]
    ident: list[bool]
    renamable: list[bool]
    code: list[bool]  # outside a string literal (always, for text that is not a secret line)

    def skeleton(self, start: int = 0, end: int | None = None) -> tuple[str, ...]:
        """Tokens start..end with every identifier as one symbol and every number as another:
        the key candidates share."""
        end = len(self.tokens) if end is None else end
        return tuple(
            NAME if self.ident[k] else NUMBER if self.tokens[k][0].isdigit() else self.tokens[k]
            for k in range(start, end)
        )

    @property
    def shape(self) -> bool:
        """Whether this secret line is compared by its shape (the module docstring)."""
        operators = sum(
            t in SHAPE_OPERATORS and c for t, c in zip(self.tokens, self.code, strict=True)
        )
        return len(self.tokens) >= MIN_SHAPE_TOKENS and operators >= MIN_SHAPE_OPERATORS

    @property
    def names(self) -> set[str]:
        return {t for t, r in zip(self.tokens, self.renamable, strict=True) if r}


def strip_comment(line: str) -> str:
    """`line` without a trailing ``#`` comment (a ``#`` inside a string literal is kept)."""
    return "".join(text for text, kind in _pieces(line) if kind != "comment")


def _pieces(line: str) -> list[tuple[str, str]]:
    """`line` cut into ("code" | "string" | "comment") pieces, quotes part of their string."""
    out: list[tuple[str, str]] = []
    quote, k, mark = "", 0, 0
    while k < len(line):
        c = line[k]
        if quote:
            if c == "\\":
                k += 1
            elif line.startswith(quote, k):
                k += len(quote)
                out.append((line[mark:k], "string"))
                quote, mark = "", k
                continue
        elif line.startswith(('"""', "'''"), k) or c in "\"'":
            out.append((line[mark:k], "code"))
            quote = line[k : k + 3] if line.startswith(('"""', "'''"), k) else c
            mark = k
            k += len(quote)
            continue
        elif c == "#":
            out.append((line[mark:k], "code"))
            out.append((line[k:], "comment"))
            return out
        k += 1
    out.append((line[mark:], "string" if quote else "code"))
    return out


def tokens(text: str, code: bool = False) -> Stream:
    """The token stream of `text` (see the module docstring). With `code`, `text` is one secret
    line: its comment is dropped and its names outside string literals are renamable."""
    pieces = _pieces(strip_comment(text)) if code else [(text, "text")]
    toks: list[str] = []
    lines: list[int] = []
    ident: list[bool] = []
    renamable: list[bool] = []
    in_code: list[bool] = []
    offset = 0
    starts = [m.end() for m in re.finditer("\n", text)] if not code else []
    previous = ""
    for piece, kind in pieces:
        for m in _TOKEN_RE.finditer(piece):
            t = m.group()
            if t in _DROPPED:
                continue
            is_name = bool(_IDENT_RE.fullmatch(t))
            toks.append(t)
            lines.append(bisect_right(starts, offset + m.start()) + 1)
            ident.append(is_name)
            renamable.append(
                kind == "code" and is_name and t not in _KEPT_NAMES and previous != "."
            )
            in_code.append(kind != "string")
            previous = t
        offset += len(piece)
    return Stream(toks, lines, ident, renamable, in_code)


def same_code(secret: Stream, stream: Stream, start: int, shape: bool = False) -> bool:
    """Whether `stream`'s window at `start` is `secret`, every token as it is but for names
    renamed consistently: one in three at most, in a line of `MIN_RENAME_TOKENS` tokens or more
    (a short line with its one name changed is any other line of that shape). With `shape` (a
    solution's line whose `Stream.shape` holds), any number of names, and numbers and string
    words too."""
    to: dict[str, str] = {}
    back: dict[str, str] = {}
    for j, t in enumerate(secret.tokens):
        r = stream.tokens[start + j]
        if shape and (not secret.code[j] or t[0].isdigit()):
            continue  # a string's word or a number: the skeleton already matched its kind
        if not secret.renamable[j]:
            if r != t:
                return False
            continue
        if not stream.ident[start + j] or r in _KEPT_NAMES:
            return False
        if to.setdefault(t, r) != r or back.setdefault(r, t) != t:
            return False
    renamed = sum(1 for t, r in to.items() if t != r)
    if renamed == 0 or shape:
        return True
    return len(secret.tokens) >= MIN_RENAME_TOKENS and renamed <= len(secret.names) // 3


# ---- encodings


def _b64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def _unpacked(data: bytes) -> bytes:
    """gzip or zlib data inflated (bounded); anything else as it is."""
    zlib_header = len(data) > 1 and data[0] == 0x78 and (data[0] << 8 | data[1]) % 31 == 0
    if data[:2] == b"\x1f\x8b" or zlib_header:
        try:
            inflater = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header
            return inflater.decompress(data, MAX_DECODED_BYTES)
        except zlib.error:
            return data
    return data


def _as_text(data: bytes | None) -> str | None:
    if not data:
        return None
    data = _unpacked(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _b64_blocks(text: str) -> Iterator[tuple[int, str]]:
    """(offset, joined text) of each run of base64 chunks separated only by whitespace, comment
    marks, quotes or commas (a wrapped block), whose length makes it worth decoding."""
    pos = 0
    while (m := _B64_CHUNK.search(text, pos)) is not None:
        start, parts, end = m.start(), [m.group()], m.end()
        while not parts[-1].endswith("="):
            gap = _GAP.match(text, end)
            nxt = _B64_CHUNK.match(text, gap.end()) if gap else None
            if nxt is None:
                break
            parts.append(nxt.group())
            end = nxt.end()
        joined = "".join(parts)
        if len(joined) >= MIN_ENCODED_CHARS:
            yield start, joined
        pos = end


def decoded(text: str, depth: int = 0) -> Iterator[tuple[int, str, str]]:
    """(offset in `text`, how it was encoded, the decoded text) for each long base64 or hex
    string in `text` that decodes to UTF-8 text, and recursively for what that holds."""
    if depth >= MAX_DEPTH:
        return
    found: list[tuple[int, str, str | None]] = []
    for start, blob in _b64_blocks(text):
        found.append((start, "base64", _as_text(_b64(blob))))
    for m in _HEX_RE.finditer(text):
        found.append((m.start(), "hex", _as_text(binascii.unhexlify(m.group()))))
    for start, how, inner in found:
        if inner is None or len(inner) > MAX_DECODED_BYTES:
            continue
        yield start, how, inner
        for _, deeper, text2 in decoded(inner, depth + 1):
            yield start, f"{how} of {deeper}", text2
