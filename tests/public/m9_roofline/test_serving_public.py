"""Public tests for M9's serving numbers: the tokens/s ceiling and whether the batch fits.

Run them with the rest of the public suite: `pytest tests/public/m9_roofline` from the root of
your repository. The grader's hidden tests draw their own configs, GPUs and batches.

PYTEST_DONT_REWRITE: the assert messages are the student's feedback, so pytest's own
introspection is not appended to them.
"""

from __future__ import annotations

import pytest

COURSE_PARAMS = 1_311_872
T4_LIKE = {"name": "T4", "peak_flops": 65e12, "peak_bandwidth": 320e9, "memory_bytes": 16e9}


@pytest.mark.points(1)
def test_tokens_per_s_bound_course_model(student, course_model):
    got = student.decode_tokens_per_s_bound(course_model, T4_LIKE, 1, 0)
    want = 320e9 / (2 * COURSE_PARAMS)
    assert type(got) is float and got == pytest.approx(want, rel=1e-9), (
        f"decode_tokens_per_s_bound(course model, T4, batch=1, context_len=0) returned {got!r}; "
        f"expected {want:.6g} tokens/s: 320e9 byte/s over 2 bytes x {COURSE_PARAMS:,} weights"
    )
    got8 = student.decode_tokens_per_s_bound(course_model, T4_LIKE, 8, 512)
    want8 = 8 * 320e9 / (2 * COURSE_PARAMS + 8 * 512 * 1024)
    assert got8 == pytest.approx(want8, rel=1e-9), (
        f"decode_tokens_per_s_bound(course model, T4, batch=8, context_len=512) returned "
        f"{got8!r}; expected {want8:.6g} tokens/s for the whole batch"
    )


@pytest.mark.points(1)
def test_kv_cache_fits_examples(student, course_model):
    need = 2 * COURSE_PARAMS + 4 * 512 * 1024  # batch 4 at 512 tokens
    for memory, want in ((need, True), (need - 1, False), (16e9, True)):
        got = student.kv_cache_fits(
            course_model, {**T4_LIKE, "memory_bytes": float(memory)}, 4, 512
        )
        assert got is want, (
            f"kv_cache_fits(course model, memory_bytes={memory:.12g}, batch=4, 512) returned "
            f"{got!r}; the batch needs {need:,} bytes, so the answer is {want}"
        )
