"""The suites' feedback says what a kernel did: "wrote NaN" is not "wrote nothing", and a 2-D
launch that reads out of bounds is told to check both coordinates, not `if i < c.size`."""

from __future__ import annotations

import numpy as np
import pytest

from grader.suites.testing import expect_written, first_mismatch, launch, never_written, unwritten


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_never_written_is_told_apart_from_a_written_nan(dtype):
    out = unwritten(4, dtype)
    assert out.dtype == dtype and np.isnan(out).all() and never_written(out).all()
    out[1] = np.nan  # what a kernel writes when it computes NaN
    assert never_written(out).tolist() == [True, False, True, True]
    want = np.arange(4, dtype=dtype)
    said = first_mismatch(out, want)
    assert "first at flat index 0: got nothing (never written), expected 0.0" in said
    out[0] = 0.0
    assert "index 1: got NaN (the kernel wrote NaN), expected 1.0" in first_mismatch(out, want)


def test_a_written_nan_where_nan_is_expected_matches_but_nothing_written_does_not():
    want = np.array([np.nan, 1.0], np.float32)
    got = unwritten(2)
    assert first_mismatch(got, want).startswith("2 of 2 elements differ")
    got[:] = want
    assert first_mismatch(got, want) == "all elements match"


def test_nothing_written_fails_naming_the_array_and_nan_written_does_not():
    out = unwritten((2, 3))
    with pytest.raises(pytest.fail.Exception, match="k wrote nothing into c"):
        expect_written(out, "k", "c")
    out[0, 0] = np.nan
    expect_written(out, "k", "c")


class _OutOfBounds:
    def __getitem__(self, dims):
        def run(*args):
            raise IndexError("index 40 is out of bounds for axis 0 with size 40")

        return run


def test_out_of_bounds_feedback_follows_the_launch_dimensions():
    with pytest.raises(pytest.fail.Exception) as two_d:
        launch(_OutOfBounds(), (2, 2), (32, 1), n=1600, name="transpose_tiled")
    assert "both coordinates" in str(two_d.value) and "c.size" not in str(two_d.value)
    with pytest.raises(pytest.fail.Exception) as one_d:
        launch(_OutOfBounds(), 4, 256, n=1000, name="vector_add")
    assert "if i < c.size:" in str(one_d.value)
