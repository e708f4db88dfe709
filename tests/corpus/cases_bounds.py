"""Corpus cases: the trusted process bounded against what a submission sends (issue 12).

Imported by build.py after its own cases; uses build's helpers. Each case is a submission whose
files or replies would cost the trusted process (not the sandbox) time or memory, or whose text
would become markup in a report: deep and wide metrics.json, a reply of millions of small
objects, a notebook of tens of thousands of cells, and hostile text in every place student text
reaches a report. What each costs against the reference is measured by
tests/unit/grading/test_bounds_cost.py; the batch over the whole corpus (test_corpus) grades them too.
"""

from __future__ import annotations

import json
import re
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
    _metrics,
    _student_tests,
    insert_cell_before,
    patched,
    replace_cell,
    to_ipynb,
    write_fork,
)

METRICS_TESTS = "metrics"
# Text with every kind of markup a reader could be fooled by, and control characters.
HOSTILE = (
    "it's <b>bold</b> <img src=x onerror=alert(1)> </pre> **strong** _em_ ~~del~~ `code` "
    "[link](http://evil.example) ![img](http://evil.example/x.png) www.evil.example "
    "https://evil.example mail@evil.example @octocat #12 :smile: \x1b[31mred\x1b[0m bell\x07 "
    "\u202eevil\u202c | cell | &#x27; # heading"
)
HOSTILE_FILE = "notes/www.evil.example @octocat #1 <b>x</b> **y** [z](http-evil) \u202e.md"


# Student code in the worker replaces the harness's encoder for one reply: a crafted message whose
# header decodes to 8 million lists (1.2 GB and 50-100 s in the trusted process, unbounded).
REPLY_BOMB = """
import struct
import grader.sandbox.wire as _wire
_body = b'{"value": {"__dict__": {"ok": [' + b"[]," * 8_000_000 + b'[]]}}, "buffers": []}'
_bomb = _wire.MAGIC + struct.pack(">I", len(_body)) + _body
_real = _wire.encode
def _once(value):
    _wire.encode = _real
    return _bomb
_wire.encode = _once
return 0
"""


def _deep(ctx: Ctx) -> str:
    return "[" * 100_000 + "]" * 100_000  # 200 kB: a RecursionError in json.loads, unbounded


def _wide(ctx: Ctx) -> str:
    junk = {**ctx.metrics, "junk": [[]] * 300_000}
    return json.dumps(junk, separators=(",", ":"))  # 900 kB of empty lists, under the 1 MB cap


def _deep_record(ctx: Ctx) -> str:
    nested = '{"a": ' * 5_000 + "1" + "}" * 5_000
    return '{"m9_roofline": ' + json.dumps(ctx.metrics[M9]) + ', "junk": ' + nested + "}"


def _many_cells(ipynb: bool):
    def build(dest: Path, ctx: Ctx) -> None:
        text = ctx.solutions[M9] + "\n# %%\n" * 50_000  # the reference, then 50,000 empty cells
        if ipynb:
            nb = json.loads(to_ipynb(ctx.solutions[M9]))
            nb["cells"] += [{"cell_type": "code", "execution_count": None, "id": f"c{i}",
                             "metadata": {}, "outputs": [], "source": ""}
                            for i in range(50_000)]
            write_fork(dest, ipynb={M9: json.dumps(nb)}, ctx=ctx)
        else:
            write_fork(dest, {M9: text}, ctx=ctx)

    return build


def _hostile_text(dest: Path, ctx: Ctx) -> None:
    source = patched(M9, "m9_record", f"raise ValueError({HOSTILE!r})")
    source(dest, ctx)
    extra = dest / HOSTILE_FILE
    extra.parent.mkdir(parents=True, exist_ok=True)
    extra.write_text("not graded\n")


def _hostile_syntax(dest: Path, ctx: Ctx) -> None:
    # A syntax error whose line (shown in every test's feedback) is the hostile text.
    line = "x = 1 " + HOSTILE
    write_fork(dest, {M9: replace_cell(ctx.solutions[M9], "save_metric", line)}, ctx=ctx)


def _inert_reports(result, ctx: Ctx) -> None:
    """Both reports of this result: nothing of the student's text became markup or control."""
    from markdown_it import MarkdownIt

    from grader.core.course import load_course
    from grader.reports.html import html
    from grader.reports.markdown import markdown

    course = load_course(ctx.root)
    md_text = markdown(result, course)
    md = MarkdownIt("gfm-like", {"html": True, "linkify": True})
    md.linkify.set({"fuzzy_link": False})
    kinds: set[str] = set()
    raw: list[str] = []

    def walk(tokens):
        for t in tokens:
            kinds.add(t.type)
            if t.type in ("html_inline", "html_block"):
                raw.append(t.content)
            walk(t.children or [])

    walk(md.parse(md_text))
    assert not kinds & {"link_open", "image"}, kinds
    for chunk in raw:
        tags = set(re.findall(r"</?([a-zA-Z][a-zA-Z0-9]*)", chunk))
        assert tags <= {"pre", "details", "summary", "sub"}, chunk[:300]
    rendered = md.render(md_text)
    assert "<b>bold" not in rendered and "&lt;b&gt;bold" in rendered
    assert "&amp;#x27;" not in md_text.replace("&amp;#x27; # heading", "")  # escaped once
    assert "\x1b" not in md_text and "\u202e" not in md_text and "\x07" not in md_text
    outside = re.sub(r"<pre>.*?</pre>", "", md_text, flags=re.S)
    seen = re.sub(r"<[^>]+>", "", md.render(outside))
    for pattern in (r"@\w", r"#\d", r"(?i)www\.", r"://"):
        assert not re.search(pattern, seen), (pattern, seen[:500])
    page = html(result, course)
    assert "<b>bold" not in page and "<img src=x" not in page and "\x1b" not in page
    assert page.count("<img") == 1  # the roofline
    assert len(md_text.encode()) < 30_000, len(md_text.encode())  # folded, far from 64 kB


# gpu_fundamentals with one more untagged cell holding a list literal. 1.05 MB (under the intake's
# bound on a notebook) parses to 350,000 nodes: 350 MB and 1.4 s for each parse in the trusted
# process, once per kernel test and wrapper check (issue 25, at 1.9 MB: 247 s and 1.2 GB). At
# 90,000 tokens it is the largest source the grader still reads kernels from: graded as the
# reference.
BIG_LIST_ITEMS = 350_000  # 1.05 MB: with the notebook, under the 1.3 MB bound on cell source
AT_BOUNDS_ITEMS = 45_000  # two tokens an item, beside the reference's ~5,000 (bound: 100,000)
# tests that take a kernel from the source (the GPU-only ones skip in the simulator)
KERNEL_TESTS = r"test_(gpu_)?vector_add|test_strided_copy|test_transpose|test_matmul_(naive|tiled)_|test_warp_sum_"
GPU_TESTS = r"test_coalescing_slowdown_gpu|_bandwidth(_gpu)?$|test_kernels_full_size|_gpu$"
# a wrapper's invalid input raises before any kernel; coalescing_slowdown times in the worker
NO_EXTRACTION = r"\[(gpu_vector_add|coalescing_slowdown)\(|test_coalescing_slowdown_runs"


def _list_cell(items: int):
    def build(dest: Path, ctx: Ctx) -> None:
        cell = "LOOKUP = [" + ", ".join(str(i % 10) for i in range(items)) + "]"
        write_fork(dest, {GF: insert_cell_before(ctx.solutions[GF], "ridge_point", cell)}, ctx=ctx)

    return build


CASES: list[Case] = [
    Case("metrics_nested_100k", "metrics.json of 100,000 nested lists (200 kB, under the 1 MB cap)",
         _metrics(_deep),
         Expect(M9, [Rule(METRICS_TESTS, BROKEN, ("cannot be read", "values", "nested"))])),
    Case("metrics_wide_300k", "metrics.json with 300,000 empty lists beside the real record",
         _metrics(_wide),
         Expect(M9, [Rule(METRICS_TESTS, BROKEN, ("values",))])),
    Case("metrics_nested_dicts", "the real record beside 5,000 nested objects",
         _metrics(_deep_record),
         Expect(M9, [Rule(METRICS_TESTS, BROKEN, ("nested more than",))])),
    Case("reply_8m_lists", "m9_record makes the worker's next reply 24 MB of 8 million empty "
         "lists (the harness patched: nothing in the worker is trusted)",
         patched(M9, "m9_record", REPLY_BOMB),
         Expect(M9, [Rule(r"\[m9_record\(", OK + BROKEN, (), required=False),
                     Rule(_fn("m9_record"), BROKEN, ("lists, dicts and scalars",))])),
    Case("notebook_50k_cells_ipynb", "the reference .ipynb followed by 50,000 empty cells",
         _many_cells(ipynb=True),
         # the JSON bound (values) or the cell bound: both name the limit
         Expect(M9, [Rule(_student_tests(M9), BROKEN, ("over the limit of 1,000",
                                                      "more than 500,000 values"))],
                error=("50,000 cells", "500,000 values"))),
    Case("notebook_50k_cells_py", "the reference .py followed by 50,000 empty # %% cells",
         _many_cells(ipynb=False),
         Expect(M9, [Rule(_student_tests(M9), BROKEN, ("over the limit of 1,000",))],
                error=("cells, over the limit",))),
    Case("report_hostile_text", "markup, links, mentions, HTML and control characters in an "
         "exception message and a file name",
         _hostile_text,
         Expect(M9, [Rule(r"\[m9_record\(", OK + BROKEN, (), required=False),  # a ValueError
                     Rule(_fn("m9_record"), BROKEN, ("bold",))],
                warnings=("www.evil.example",), check=_inert_reports)),
    Case("kernel_source_big_list", "gpu_fundamentals with an extra cell holding a 1 MB list "
         "literal: the trusted side's kernel extraction and wrapper checks parse the source",
         _list_cell(BIG_LIST_ITEMS),
         Expect(GF, [Rule(GPU_TESTS, BROKEN + ("skipped",), (), required=False),
                     Rule(NO_EXTRACTION, OK + BROKEN, (), required=False),
                     Rule(KERNEL_TESTS, BROKEN, ("over the 1,000,000",))], max_s=200),
         alone=True),
    Case("kernel_source_at_the_bounds", "gpu_fundamentals with an extra cell just under the "
         "token bound of the trusted side's parse: the most expensive source still read",
         _list_cell(AT_BOUNDS_ITEMS), Expect(GF, [], max_s=200), alone=True),
    Case("report_hostile_syntax_error", "a syntax error whose line (in every test's feedback) "
         "holds markup, links and mentions",
         _hostile_syntax,
         Expect(M9, [Rule(_fn("save_metric"), BROKEN + ("timeout",), ("SyntaxError",))],
                check=_inert_reports)),
]
