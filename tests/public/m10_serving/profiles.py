"""The launches `grader profile m10_serving` measures (and `grader check` sums up).

Each is one launch of one of your scores kernels in the simulator with its memory accesses
recorded (`grader.simt.memmodel`), at the shapes §1's rule is stated for: `seq * head_dim` a
multiple of 32, head dims and page sizes powers of two, rows of different positions at least 32
bytes apart. Compare each launch's sectors per request of the key cache with
`sectors_per_request`. `brief` marks the launches `grader check` prints a line for. Not a test
file: nothing here is graded.
"""

from __future__ import annotations

import numpy as np

TPB = 128


def launches(rng: np.random.Generator) -> list[dict]:
    """The profiled launches: kernel, label, grid, block, args and brief."""
    found = []
    for dim in (2, 4, 8):
        heads, seq = 8 // dim if dim < 8 else 2, 64 // dim
        q = rng.standard_normal((1, heads, dim)).astype(np.float32)
        k = rng.standard_normal((1, heads, seq, dim)).astype(np.float32)
        grid = (-(-seq * dim // TPB), heads)
        for layout, stored in (("bhsd", k), ("bshd", np.ascontiguousarray(k.swapaxes(1, 2)))):
            found.append(
                {
                    "kernel": f"scores_{layout}",
                    "label": f"head_dim {dim}, {heads} heads, seq {seq}, float32",
                    "grid": grid,
                    "block": TPB,
                    "args": (q, stored, np.zeros((1, heads, seq), np.float32)),
                    "brief": dim == 4,
                }
            )
    for page_size in (1, 4, 16):
        dim, seq = 2, 64
        heads = max(1, 8 // (page_size * dim))
        pages = seq // page_size + 1
        q = rng.standard_normal((1, heads, dim)).astype(np.float32)
        pool = rng.standard_normal((pages, heads, page_size, dim)).astype(np.float32)
        table = rng.permutation(pages)[: pages - 1].reshape(1, -1).astype(np.int32)
        found.append(
            {
                "kernel": "scores_paged",
                "label": f"pages of {page_size} positions, head_dim {dim}, {heads} heads",
                "grid": (-(-seq * dim // TPB), heads),
                "block": TPB,
                "args": (q, pool, table, np.zeros((1, heads, seq), np.float32)),
                "brief": page_size == 4,
            }
        )
    return found
