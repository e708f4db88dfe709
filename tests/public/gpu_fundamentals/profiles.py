"""The launches `grader profile gpu_fundamentals` measures (and `grader check` sums up).

Each is one launch of one of your kernels in the simulator with its memory accesses recorded
(`grader.simt.memmodel`): small shapes, the shapes the hidden tests profile (the tiled
transpose's graded one has partial tiles at its edges; its 64 x 96 one is the notebook's
table). `brief` marks the one launch per kernel that `grader check` runs and prints a line for;
`grader profile` runs them all. Not a test file: nothing here is graded.
"""

from __future__ import annotations

import numpy as np

TILE = 32


def launches(rng: np.random.Generator) -> list[dict]:
    """The profiled launches: kernel, label, grid, block, args and brief."""
    a = rng.standard_normal(1024).astype(np.float32)
    b = rng.standard_normal(1024).astype(np.float32)
    m = rng.standard_normal((64, 96)).astype(np.float32)
    ma = rng.standard_normal((32, 32)).astype(np.float32)
    mb = rng.standard_normal((32, 32)).astype(np.float32)
    found = [
        {
            "kernel": "vector_add",
            "label": "1,024 float32, 256 threads a block",
            "grid": 4,
            "block": 256,
            "args": (a, b, np.zeros(1024, np.float32)),
            "brief": True,
        }
    ]
    found.append(
        {
            "kernel": "warp_sum",
            "label": "1,000 float32 (a partial last warp), 256 threads a block",
            "grid": 4,
            "block": 256,
            "args": (rng.standard_normal(1000).astype(np.float32), np.zeros(32, np.float32)),
            "brief": True,
        }
    )
    for stride in (1, 2, 3, 8, 32):
        found.append(
            {
                "kernel": "strided_copy",
                "label": f"stride {stride}, float32",
                "grid": 2,
                "block": 32,
                "args": (
                    np.arange(32 * stride, dtype=np.float32),
                    np.zeros(64, np.float32),
                    stride,
                ),
                "brief": stride == 2,
            }
        )
    found += [
        {
            "kernel": "transpose_naive",
            "label": "64 x 96 float32, 32 x 8 blocks",
            "grid": (3, 8),
            "block": (32, 8),
            "args": (m, np.zeros((96, 64), np.float32)),
            "brief": True,
        },
        {
            "kernel": "transpose_tiled",
            "label": "40 x 72 float32 (partial tiles at the edges), (TILE, 1) blocks",
            "grid": (3, 2),
            "block": (TILE, 1),
            "args": (m[:40, :72].copy(), np.zeros((72, 40), np.float32)),
            "brief": True,
        },
        {
            "kernel": "transpose_tiled",
            "label": "64 x 96 float32, (TILE, 1) blocks",
            "grid": (3, 2),
            "block": (TILE, 1),
            "args": (m, np.zeros((96, 64), np.float32)),
            "brief": False,
        },
        {
            "kernel": "matmul_naive",
            "label": "32 x 32 @ 32 x 32 float32, 32 x 8 blocks",
            "grid": (1, 4),
            "block": (32, 8),
            "args": (ma, mb, np.zeros((32, 32), np.float32)),
            "brief": False,  # 1,024 threads of 64 loads each: a second in the simulator
        },
        {
            "kernel": "matmul_tiled",
            "label": "32 x 32 @ 32 x 32 float32, (TILE, 1) blocks",
            "grid": (1, 1),
            "block": (TILE, 1),
            "args": (ma, mb, np.zeros((32, 32), np.float32)),
            "brief": True,
        },
    ]
    return found
