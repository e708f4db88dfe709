"""The bounded reader for submission JSON: every hostile shape is a clear JsonReadError."""

from __future__ import annotations

import json
import os

import pytest

from grader.core.jsonread import (
    METRICS_LIMITS,
    JsonMissing,
    JsonReadError,
    metrics_or_none,
    read_metrics,
)

HOSTILE = {
    "nested_100k": (b"[" * 100_000 + b"]" * 100_000, "values"),
    "nested_5k": (b"[" * 5_000 + b"]" * 5_000, "nested more than 32"),
    "wide_lists": (b"[" + b"[]," * 200_000 + b"[]]", "values"),
    "wide_dict": (b"{" + b",".join(b'"k%d": 0' % i for i in range(60_000)) + b"}", "values"),
    "not_json": (b'{"m9_roofline": {"intens', "not valid JSON"),
    "not_utf8": (b'{"a": "\xff"}', "not UTF-8"),
    "not_object": (b"[1, 2]", "JSON object"),
    "deep_unbalanced": (b"[" * 90_000 + b"}", "do not match"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_metrics_is_a_clear_error(tmp_path, name):
    data, words = HOSTILE[name]
    path = tmp_path / "metrics.json"
    path.write_bytes(data)
    with pytest.raises(JsonReadError) as info:
        read_metrics(path)
    assert words in str(info.value)
    assert "metrics.json" in str(info.value)
    assert metrics_or_none(path) is None


def test_brackets_inside_strings_do_not_count(tmp_path):
    path = tmp_path / "metrics.json"
    value = {"m9_roofline": {"note": "[" * 50_000 + '\\"{' * 10}}
    path.write_text(json.dumps(value))
    assert read_metrics(path) == value


def test_depth_limit_is_exact(tmp_path):
    path = tmp_path / "metrics.json"
    depth = METRICS_LIMITS.max_depth
    path.write_text('{"a": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}")
    assert read_metrics(path)["a"] == json.loads("[" * (depth - 1) + "]" * (depth - 1))
    path.write_text('{"a": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(JsonReadError, match="nested"):
        read_metrics(path)


def test_size_missing_and_symlink(tmp_path):
    path = tmp_path / "metrics.json"
    with pytest.raises(JsonMissing, match="not found"):
        read_metrics(path)
    path.write_bytes(b" " * (METRICS_LIMITS.max_bytes + 1))
    with pytest.raises(JsonReadError, match="MB"):
        read_metrics(path)
    path.unlink()
    (tmp_path / "real.json").write_text("{}")
    os.symlink(tmp_path / "real.json", path)
    with pytest.raises(JsonMissing, match="symlink"):
        read_metrics(path)
