"""What the M9 public suites share: the course model, written out.

The notebook ships the same `COURSE_MODEL` as your default config, but you may change yours (to
the model you trained), and these expected figures are for this one, so the tests do not read
it from your notebook. A fresh dict per test, so nothing a function does to it carries over.
"""

from __future__ import annotations

import pytest

COURSE_MODEL = {
    "name": "course-model",
    "dim": 128,
    "n_layers": 4,
    "n_heads": 4,
    "n_kv_heads": 2,
    "vocab_size": 4096,
    "ffn_hidden_dim": 384,
    "tied_embeddings": True,
}


@pytest.fixture
def course_model() -> dict:
    return dict(COURSE_MODEL)
