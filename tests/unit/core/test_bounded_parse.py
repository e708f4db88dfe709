"""The trusted process's parse of student source: bounded before the parser runs, done once, and
kernel extraction's own work (constants, nesting) bounded too (issue 25)."""

from __future__ import annotations

import ast
import resource
import time

import pytest

from grader.core import bounded_parse
from grader.core.kernel_source import KernelSourceError, extract, launches

KERNEL = """import math
from numba import cuda

C0 = 2
{constants}

@cuda.jit
def add(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i] * {use}
"""


def test_parse_is_done_once_per_source():
    src = "x = 1\n" * 50
    first = bounded_parse.parse(src, "a.py")
    assert isinstance(first, ast.Module)
    assert bounded_parse.parse(src, "b.py") is first  # the same tree: parsed once


def test_a_2mb_list_literal_is_refused_cheaply_and_once():
    big = "BIG = [" + ", ".join(str(i % 10) for i in range(700_000)) + "]\n"
    src = KERNEL.format(constants="", use="C0") + big
    assert len(src) < 2_200_000  # under the intake's bound on a notebook's source
    peak0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.process_time()
    for _ in range(20):  # as many kernel tests and wrapper checks as a suite has
        with pytest.raises(KernelSourceError, match="characters, over the 1,000,000"):
            extract(src, "add", "gpu_fundamentals.py")
        assert not launches(src, "wrapper", "add")
    cpu = time.process_time() - t0
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak0) / 1024
    assert cpu < 1.0, cpu  # one check, kept; a single full parse costs about 3 s
    assert grown_mb < 100, grown_mb  # a full parse holds 700 MB


def test_token_and_node_bounds_name_the_limit():
    many = "X = (" + "1," * (bounded_parse.MAX_TOKENS // 2 + 10) + ")\n"
    assert len(many) < bounded_parse.MAX_CHARS
    with pytest.raises(bounded_parse.SourceTooLarge, match="tokens, over the 100,000.*demo"):
        bounded_parse.parse(many, "nb.py")
    with pytest.raises(SyntaxError) as info:
        bounded_parse.parse("def f(:\n", "nb.py")
    assert info.value.filename == "nb.py" and info.value.lineno == 1


def test_deep_nesting_is_a_message_not_a_crash():
    deep = "X = " + "(" * 300 + "1" + ")" * 300 + "\n"
    with pytest.raises((bounded_parse.SourceTooLarge, SyntaxError)):
        bounded_parse.parse(deep)
    chain = "\n".join(f"C{k} = C{k - 1} + 1" for k in range(1, 3000))
    src = KERNEL.format(constants=chain, use="C2999")
    with pytest.raises(KernelSourceError, match="nested too deeply"):
        extract(src, "add")


def test_a_chain_of_doublings_is_evaluated_in_linear_time():
    """C_k = C_{k-1} + C_{k-1}: without memoising each constant, 2**60 evaluations."""
    chain = "\n".join(f"C{k} = C{k - 1} * 1 + C{k - 1} * 0" for k in range(1, 61))
    src = KERNEL.format(constants=chain, use="C60")
    t0 = time.process_time()
    ks = extract(src, "add")
    assert time.process_time() - t0 < 1.0
    assert "C60 = 2" in ks.text and ks.constants == ("C60",)  # its value, computed once
