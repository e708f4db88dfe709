"""`grader.simt.warps`: every warp-level primitive against values computed by hand.

Each expected value below is worked out from the CUDA programming guide's "Warp Shuffle
Functions", "Warp Vote Functions", "Warp Match Functions" and "Synchronization Functions", and
the PTX ISA's ``shfl.sync`` (the source lane, the clamp at a whole warp, ``b[4:0]``), not from
the simulator. A mask that names a lane that never arrives must fail with the line and lanes.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.core import device
from grader.simt import simulator, warps

pytestmark = pytest.mark.skipif(
    device.has_gpu(), reason="the simulator is what runs kernels only on a machine without a GPU"
)

cuda = None
FULL = 0xFFFFFFFF
LANES = np.arange(32)


@pytest.fixture(scope="module", autouse=True)
def sim():
    global cuda
    device.prepare_numba()
    assert simulator.install()
    from numba import cuda  # lazy: after prepare_numba


def _run(kernel, cols, threads=32, dtype=np.int64):
    out = np.full((threads, cols), 7777, dtype=dtype)
    kernel[1, threads](out)
    return out


def test_shuffles_read_the_lane_the_guide_names():
    @cuda.jit
    def shuffles(out):
        lane = cuda.threadIdx.x
        v = lane * 10
        out[lane, 0] = cuda.shfl_sync(FULL, v, 5)  # broadcast of lane 5
        out[lane, 1] = cuda.shfl_sync(FULL, v, lane + 1)  # lane 31 reads (32 % 32) = lane 0
        out[lane, 2] = cuda.shfl_up_sync(FULL, v, 3)  # lanes 0-2 keep their own
        out[lane, 3] = cuda.shfl_down_sync(FULL, v, 3)  # lanes 29-31 keep their own
        out[lane, 4] = cuda.shfl_xor_sync(FULL, v, 1)  # pairs swap
        out[lane, 5] = cuda.shfl_xor_sync(FULL, v, 16)  # halves swap
        out[lane, 6] = cuda.shfl_down_sync(FULL, v, 33)  # delta counts modulo 32: as 1

    out = _run(shuffles, 7)
    assert (out[:, 0] == 50).all()
    assert out[:, 1].tolist() == [10 * ((k + 1) % 32) for k in range(32)]
    assert out[:, 2].tolist() == [0, 10, 20] + [10 * (k - 3) for k in range(3, 32)]
    assert out[:, 3].tolist() == [10 * (k + 3) for k in range(29)] + [290, 300, 310]
    assert out[:, 4].tolist() == [10 * (k ^ 1) for k in range(32)]
    assert out[:, 5].tolist() == [10 * (k ^ 16) for k in range(32)]
    assert out[:, 6].tolist() == [10 * (k + 1) for k in range(31)] + [310]


def test_a_partial_mask_and_a_source_outside_it():
    @cuda.jit
    def half(out):
        lane = cuda.threadIdx.x
        if lane < 16:
            out[lane, 0] = cuda.shfl_down_sync(0x0000FFFF, lane, 4)
            out[lane, 1] = cuda.shfl_down_sync(0x0000FFFF, lane * 0.5, 4)
        else:  # the other half meets on its own mask, in its own branch
            out[lane, 0] = cuda.shfl_xor_sync(0xFFFF0000, lane, 8)

    out = _run(half, 2, dtype=np.float64)
    # lanes 0-11 read lane + 4; lanes 12-15 name lanes 16-19, not in the gathering: undefined,
    # so the unset value (-1 for an int, NaN for a float), never a plausible number
    assert out[:12, 0].tolist() == [k + 4 for k in range(12)]
    assert out[12:16, 0].tolist() == [-1] * 4
    assert out[:12, 1].tolist() == [(k + 4) * 0.5 for k in range(12)]
    assert np.isnan(out[12:16, 1]).all()
    assert out[16:, 0].tolist() == [k ^ 8 for k in range(16, 32)]


def test_a_shuffle_reduction_over_32_lanes_of_each_warp():
    @cuda.jit
    def warp_sum(x, out):
        i = cuda.grid(1)
        v = x[i]
        delta = 16
        while delta > 0:
            v += cuda.shfl_down_sync(FULL, v, delta)
            delta //= 2
        if cuda.laneid == 0:
            out[i // 32] = v

    x = np.arange(128, dtype=np.float32)
    out = np.zeros(4, dtype=np.float32)
    warp_sum[2, 64](x, out)
    # warp w holds 32w .. 32w+31: the sum is 32 * 32w + 496
    assert out.tolist() == [496.0, 1520.0, 2544.0, 3568.0]


def test_votes_ballot_and_matches():
    @cuda.jit
    def votes(out):
        lane = cuda.threadIdx.x
        out[lane, 0] = cuda.ballot_sync(FULL, lane % 3 == 0)
        out[lane, 1] = cuda.ballot_sync(FULL, lane >= 16)
        out[lane, 2] = cuda.any_sync(FULL, lane == 7)
        out[lane, 3] = cuda.all_sync(FULL, lane < 31)
        out[lane, 4] = cuda.eq_sync(FULL, lane < 40)
        out[lane, 5] = cuda.match_any_sync(FULL, lane % 4)
        m, same = cuda.match_all_sync(FULL, lane // 32)
        out[lane, 6], out[lane, 7] = m, same
        m, same = cuda.match_all_sync(FULL, lane % 2)
        out[lane, 8], out[lane, 9] = m, same
        out[lane, 10] = cuda.lanemask_lt()

    out = _run(votes, 11)
    assert (out[:, 0] == 0x49249249).all()  # bits 0, 3, ..., 30
    assert (out[:, 1] == -65536).all()  # 0xFFFF0000 as Numba's int32
    assert (out[:, 2] == 1).all() and (out[:, 3] == 0).all() and (out[:, 4] == 1).all()
    # lanes with one residue mod 4; lane 31's bit is int32's sign (0x88888888 is -2004318072)
    assert out[:, 5].tolist() == [warps.int32(0x11111111 << (k % 4)) for k in range(32)]
    assert (out[:, 6] == -1).all() and (out[:, 7] == 1).all()  # every lane has 0: the mask
    assert (out[:, 8] == 0).all() and (out[:, 9] == 0).all()
    assert out[:, 10].tolist() == [(1 << k) - 1 for k in range(32)]


def test_activemask_names_the_lanes_at_the_same_call():
    @cuda.jit
    def active(out):
        lane = cuda.threadIdx.x
        if lane >= 20:
            return
        if lane < 10:
            out[lane, 0] = cuda.activemask()
        else:
            out[lane, 0] = cuda.activemask()
        out[lane, 1] = cuda.activemask()

    out = _run(active, 2)
    assert out[:10, 0].tolist() == [0x3FF] * 10
    assert out[10:20, 0].tolist() == [0xFFC00] * 10
    assert out[:20, 1].tolist() == [0xFFFFF] * 20  # lanes 20-31 returned: inactive
    assert (out[20:] == 7777).all()


def test_warps_of_a_bigger_block_are_32_consecutive_threads():
    @cuda.jit
    def lanes(out):
        t = cuda.threadIdx.x + cuda.blockDim.x * cuda.threadIdx.y
        out[t, 0] = cuda.shfl_sync(FULL, t, 0)  # each warp's lane 0
        out[t, 1] = cuda.ballot_sync(FULL, cuda.threadIdx.y == 1)

    out = np.zeros((64, 2), dtype=np.int64)
    lanes[1, (16, 4)](out)  # rows of 16: a warp is two rows
    assert out[:, 0].tolist() == [0] * 32 + [32] * 32
    assert out[:32, 1].tolist() == [int(warps.int32(0xFFFF0000))] * 32
    assert out[32:, 1].tolist() == [0] * 32


def test_syncwarp_orders_a_one_warp_transpose():
    import numba

    @cuda.jit
    def transpose(src, dst):
        tile = cuda.shared.array((8, 4), numba.float32)
        t = cuda.threadIdx.x
        r, c = t // 4, t % 4
        tile[r, c] = src[r, c]
        cuda.syncwarp()
        dst[c, r] = tile[r, c]

    src = np.arange(32, dtype=np.float32).reshape(8, 4)
    dst = np.zeros((4, 8), dtype=np.float32)
    transpose[1, 32](src, dst)
    np.testing.assert_array_equal(dst, src.T)


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            "returned",
            r"line \d+: cuda.shfl_down_sync in warp 0: mask 0xffffffff names lanes "
            r"0-15, which had already returned",
        ),
        (
            "barrier",
            r"line \d+: cuda.syncwarp in warp 0 with mask 0xffffffff: lanes 16-31 "
            r"arrived, lanes 0-15 never did",
        ),
        ("not_self", r"lane 16 calls it with mask 0x0000ffff, which does not name lane 16"),
        ("small_block", r"names lanes 16-31, which this block of 16 threads does not have"),
    ],
)
def test_a_mask_naming_a_lane_that_never_arrives_is_the_kernels_error(case, message):
    @cuda.jit
    def returned(x):
        i = cuda.threadIdx.x
        if i < 16:
            return
        x[i] = cuda.shfl_down_sync(FULL, x[i], 1)

    @cuda.jit
    def barrier(x):
        if cuda.threadIdx.x < 16:
            cuda.syncthreads()
        else:
            cuda.syncwarp()

    @cuda.jit
    def not_self(x):
        x[cuda.threadIdx.x] = cuda.shfl_sync(0x0000FFFF, x[cuda.threadIdx.x], 0)

    @cuda.jit
    def small_block(x):
        x[cuda.threadIdx.x] = cuda.shfl_xor_sync(FULL, x[cuda.threadIdx.x], 1)

    kernel = {
        "returned": returned,
        "barrier": barrier,
        "not_self": not_self,
        "small_block": small_block,
    }[case]
    threads = 16 if case == "small_block" else 32
    with pytest.raises(warps.WarpError, match=message):
        kernel[1, threads](np.zeros(32))
    ok = np.zeros(32)
    simple = cuda.jit(lambda x: x.__setitem__(cuda.threadIdx.x, 1.0))
    simple[1, 32](ok)  # the next launch is not stuck
    assert ok.tolist() == [1.0] * 32


def test_lanes_said_as_a_reader_counts_them():
    assert warps.said([0, 1, 2, 3, 7, 9, 10]) == "lanes 0-3, 7, 9-10"
    assert warps.said([5]) == "lane 5"
