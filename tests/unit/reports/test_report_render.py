"""Both reports rendered by real parsers, asserting what a reader sees (issue 12).

The markdown report goes through markdown-it-py configured like GitHub (CommonMark + GFM tables,
strikethrough, autolinks, raw HTML, task lists, footnotes); the HTML page through the standard
library's HTML parser. Each report is rendered twice, with plain student text and with hostile
text in every place student text reaches, and the structure (token and tag kinds) must be the
same: nothing the student wrote became markup. Then the text a reader sees must hold the
student's text exactly once escaped, control characters visible, and nothing GitHub would turn
into a link or mention.
"""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser

from markdown_it import MarkdownIt
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.tasklists import tasklists_plugin

from grader.core.results import AssignmentResult, Environment, GradeResult
from grader.core.results import TestResult as Row
from grader.reports.escape import visible
from grader.reports.html import html
from grader.reports.markdown import markdown

HOSTILE = (
    "it's <b>bold</b> & <img src=x onerror=alert(1)> <script>alert(1)</script> </pre> "
    "**strong** _em_ ~~del~~ `code` [link](http://evil.example) ![img](http://evil.example/x.png) "
    "<http://evil.example> https://evil.example/a www.evil.example mail@evil.example @octocat "
    "#12 :smile: $x^2$ [^1] \x1b[31mred\x1b[0m bell\x07 \u202eevil\u202c | cell | &#x27; &amp;"
)
HOSTILE_LINES = "# heading\n- item\n1. one\n> quote\n---\n" + HOSTILE + "\n| a | b |\n|---|---|"
PLAIN = "plain words only"


def result(text: str, lines: str) -> GradeResult:
    """A result with `text` in every place a student's text can reach a report."""
    same = f"notebook failed to load: {lines}"
    tests = [
        Row(f"test_one[{text}]", 0, 2, "failed", lines, suite="hidden"),
        Row("test_two", 0, 3, "error", f"{text}\n{lines}", suite="public"),
        *[Row(f"test_same_{i}", 0, 1, "error", same, suite="hidden") for i in range(57)],
        Row("test_ok", 4, 4, "passed", suite="public"),
    ]
    a = AssignmentResult("gpu_fundamentals", 4, 66, raw_score=4, tests=tests, error=lines)
    return GradeResult(
        student=text,
        score=4,
        max_score=66,
        environment=Environment("CPU (CUDA simulator)", True, ["rlimits"], "0.1.0"),
        assignments=[a],
        warnings=[f"ignored {text}: it was changed", f"a warning naming {text}"],
        timestamp=None,
        duration_s=1.0,
    )


def github_markdown() -> MarkdownIt:
    md = MarkdownIt("gfm-like", {"html": True, "linkify": True})
    md.linkify.set({"fuzzy_link": False})  # GFM links www., schemes and e-mails, not bare names
    return md.use(tasklists_plugin).use(footnote_plugin)


def _tokens(md_text: str) -> list:
    out = []

    def walk(tokens):
        for t in tokens:
            out.append(t)
            if t.children:
                walk(t.children)

    walk(github_markdown().parse(md_text))
    return out


def _structure(tokens) -> Counter:
    return Counter(t.type for t in tokens if t.type not in ("text", "softbreak", "inline"))


def _raw_html(tokens) -> list[str]:
    return [t.content for t in tokens if t.type in ("html_inline", "html_block")]


def test_markdown_structure_does_not_depend_on_student_text(course):
    plain = _tokens(markdown(result(PLAIN, PLAIN), course))
    hostile = _tokens(markdown(result(HOSTILE, HOSTILE_LINES), course))
    assert _structure(hostile) == _structure(plain)
    kinds = _structure(hostile)
    assert kinds["link_open"] == 0 and kinds["image"] == 0 and kinds["footnote_ref"] == 0
    assert kinds["heading_open"] == 2  # ours: the title and the assignment
    # raw HTML is only ours: <pre> blocks (content escaped), <details>, <summary>, <sub>
    for chunk in _raw_html(hostile):
        tags = re.findall(r"</?([a-zA-Z][a-zA-Z0-9]*)", chunk)
        assert set(tags) <= {"pre", "details", "summary", "sub"}, chunk[:200]


def _rendered_text(md_text: str) -> str:
    """What a reader sees: the rendered HTML with tags removed and entities decoded."""
    page = Text()
    page.feed(github_markdown().render(md_text))
    return page.text()


class Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.tags: Counter = Counter()
        self.pre: list[str] = []
        self._in_pre = 0

    def handle_starttag(self, tag, attrs):
        self.tags[tag] += 1
        self._in_pre += tag == "pre"
        if tag == "pre":
            self.pre.append("")

    def handle_endtag(self, tag):
        self._in_pre -= tag == "pre"

    def handle_data(self, data):
        self.parts.append(data)
        if self._in_pre:
            self.pre[-1] += data

    def text(self) -> str:
        return "".join(self.parts)


def test_markdown_reader_sees_the_text_once_escaped(course):
    md_text = markdown(result(HOSTILE, HOSTILE_LINES), course)
    seen = _rendered_text(md_text)
    assert "it's <b>bold</b>" in seen  # the apostrophe and the tags shown as typed, once
    assert "&#x27; &amp;" in seen  # entities the student typed are shown as typed
    assert "&#x27;" not in seen.replace("&#x27; &amp;", "")
    assert "\x1b" not in md_text and "[31m" not in seen  # colour codes removed
    assert "\u202e" not in md_text and "<U+202E>" in seen  # bidi override made visible
    assert "bell\u2407" in seen  # BEL shown as its control picture
    assert "| cell |" in seen  # a pipe stays text, the row is not split


def test_markdown_nothing_github_would_link_or_mention(course):
    md_text = markdown(result(HOSTILE, HOSTILE_LINES), course)
    outside_pre = re.sub(r"<pre>.*?</pre>", "", md_text, flags=re.S)
    seen = _rendered_text(outside_pre)
    assert HOSTILE.split()[0] in seen  # student text is there...
    for pattern in (r"@\w", r"#\d", r":\w+:", r"(?i)www\.", r"://", r"\w@\w"):
        assert not re.search(pattern, seen), pattern  # ...but nothing GitHub links after parsing


def test_identical_feedback_folded_into_one_entry(course):
    md_text = markdown(result(PLAIN, PLAIN), course)
    assert md_text.count("notebook failed to load") == 1
    assert "57 tests got the same feedback" in md_text
    assert "test\\_same\\_0" in md_text and "test\\_same\\_39" in md_text
    assert "and 17 more" in md_text
    page = Text()
    page.feed(html(result(PLAIN, PLAIN), course))
    assert sum("notebook failed to load" in p for p in page.pre) == 1
    assert page.text().count("same feedback as") == 56


def test_html_structure_and_text(course):
    plain, hostile = Text(), Text()
    plain.feed(html(result(PLAIN, PLAIN), course))
    page = html(result(HOSTILE, HOSTILE_LINES), course)
    hostile.feed(page)
    assert hostile.tags == plain.tags  # no element came from student text
    assert hostile.tags["script"] == 0 and hostile.tags["img"] == 1  # the roofline only
    seen = hostile.text()
    assert "it's <b>bold</b>" in seen and "<script>alert(1)</script>" in seen
    assert "\x1b" not in page and "<U+202E>" in seen and "bell\u2407" in seen
    assert visible(HOSTILE_LINES) in hostile.pre  # the feedback block shows exactly the text
