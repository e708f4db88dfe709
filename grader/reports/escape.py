"""Student text made inert, once, for GitHub-flavoured markdown and for HTML.

Everything a student controls reaches a report: exception messages and printed values in
feedback, file names in warnings, their login. Each function here is the single place one context
is escaped, and each is applied exactly once (escaping twice is how ``'`` became a literal
``&#x27;`` on GitHub). Before escaping, `visible` removes terminal colour codes and turns every
other control or bidirectional-override character into a visible placeholder, so that nothing
in a report is invisible or rewrites what is around it. Long text is cut first, by the one
`grader.core.feedback.clip`.

Inline text (table cells, list items, names) gets a backslash before each ASCII punctuation
character that can start markup, which CommonMark defines as a literal (``<``, ``>`` and ``&``
become entities), so no emphasis, link, image, HTML, heading, list, table cell or entity can
start. GitHub also links things after parsing, in the text it rendered (``@`` mentions, ``#123``,
e-mail addresses, ``www.`` and ``http://``, ``:emoji:``): a WORD JOINER (U+2060, invisible, no
width) after ``@``, ``#`` and ``:`` and inside ``www.`` breaks each of those patterns in the
rendered text too. Multi-line text goes in a ``<pre>`` block, which GitHub neither parses as
markdown nor links or mentions in; only ``&``, ``<`` and ``>`` are escaped there.
"""

from __future__ import annotations

import re

from grader.core.feedback import clip

WORD_JOINER = "\u2060"
# ESC [ ... final byte (colours, cursor moves), ESC ] ... BEL/ST (titles, hyperlinks), other ESC x.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
# A lone surrogate (what JSON's "\ud800" escape decodes to) is no character: no UTF-8 file can
# hold it, so left in, it would make the whole report unwritable.
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\u2028\u2029\ufeff\ud800-\udfff]")
# The ASCII punctuation that can start markup anywhere in a line of GitHub markdown (the rest, like
# , ; ? % ' " ( ) / = . -, is inert there); CommonMark makes a backslash before any of it literal.
_PUNCT = re.compile(r"""[!#$&*:<>@\[\\\]^_`|~]""")
# Markup only at the start of a line (a list item: "- ", "+ ", "1. ", "1) "), and "www." links.
_LEADING = re.compile(r"^(?:[-+]|\d{1,9}(?=[.)]))")
_WWW = re.compile(r"(?i)(?<=www)\.")
_LINK_TRIGGERS = re.compile(r"(?<=[@#:])|(?i:(?<=www))(?=\\\.)")


def _placeholder(match: re.Match) -> str:
    code = ord(match.group(0))
    if code < 0x20:
        return chr(0x2400 + code)  # the Unicode control picture: ␀ ␇ ␛ ...
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"


def visible(text: object) -> str:
    """Colour codes removed; other control, bidi and lone surrogate characters shown; \\r\\n and
    \\r made \\n."""
    text = str(text).replace("\r\n", "\n").replace("\r", "\n")
    text = _ANSI.sub("", text)
    return _CONTROL.sub(_placeholder, text)


_ENTITY = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def _escape_one(match: re.Match) -> str:
    ch = match.group(0)
    return _ENTITY.get(ch) or "\\" + ch


def md_inline(text: str, limit: int) -> str:
    """Student text as one inert line of GitHub markdown (safe in a table cell or list item)."""
    text = " ".join(visible(clip(text, limit)).split())  # a newline would end the row or item
    text = _PUNCT.sub(_escape_one, text)
    text = _WWW.sub(r"\\.", text)
    lead = _LEADING.match(text)
    if lead:  # "-", "+" or the delimiter after the digits of "1." / "1)"
        end = lead.end()
        text = (
            text[: end - 1] + "\\" + text[end - 1 :]
            if lead.group(0) in "-+"
            else (text[:end] + "\\" + text[end:])
        )
    return _LINK_TRIGGERS.sub(WORD_JOINER, text)


def html_text(text: object) -> str:
    """Student text (or any value, as its str) for HTML element content or a quoted attribute
    value: the one HTML escaper of every page the grader writes."""
    text = visible(text)
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def md_block(text: str, limit: int) -> str:
    """Student multi-line text as an inert preformatted block of GitHub markdown.

    An HTML ``<pre>`` block: GitHub renders its content verbatim (no markdown, no links or
    mentions), and with ``<`` escaped no ``</pre>`` in the text can close it early. ``@`` still
    gets its WORD JOINER: a mention notifies someone, so it is stopped twice.
    """
    body = visible(clip(text, limit))
    body = body.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f"<pre>{body.replace('@', '@' + WORD_JOINER)}</pre>"  # no mention, even if unpre'd
