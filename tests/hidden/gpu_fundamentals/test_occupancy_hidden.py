"""Hidden tests for S5.1's occupancy and warp-divergence exercises (never shipped to students).

Occupancy is checked against `cuda_occupancy_blocks` below: an independent transcription of the
rules of CUDA's occupancy calculator (`cuda_occupancy.h`, the code behind
`cudaOccupancyMaxActiveBlocksPerMultiprocessor`), written in CUDA's own terms from the header
and never taken from the reference solution. The device properties (totals, per-block limits,
the reserved shared memory) come from the grader's course.toml; the per-architecture constants
(allocation units, sub-partitions) come from the header's tables keyed by compute capability, so
a wrong figure in course.toml fails here too. Launch shapes are drawn from the student's seed
(the plugin's `rng` fixture) for the T4 and the H100, after fixed examples that every seed runs:
the cases where a simpler model goes wrong. The thousand launches are asked in batches
(`Function.many`), one round trip each, not one per launch. On a GPU runner one more test asks the
CUDA driver itself (`cuOccupancyMaxActiveBlocksPerMultiprocessor`, through numba-cuda) about
kernels compiled there.

Stated rules (grader verify checks that every test here is listed, with a sentence that appears
word for word in the released notebook):

- test_occupancy_random_launches: "The grader compares your answers with its own copy of CUDA's
  rules on a thousand launch shapes drawn across the T4 and the H100, including the three
  cases above."
- test_occupancy_invalid_arguments: "a value outside its range, or a combination that fits no
  block at all on the SM (a block that fails the per-block register check, say 1,024 threads
  using 255 registers each), raises `ValueError` naming the resource."
- test_occupancy_type_errors: "A non-integer argument raises `TypeError`, and so does an `sm`
  that is not a dict;"
- test_occupancy_matches_the_driver_gpu: "The rules below are the ones CUDA's own occupancy
  calculator applies"
- test_divergence_efficiency_random_warps: "Return, as a Python `float`, the useful
  lane-slots divided by the lane-slots spent when each side that some lane takes runs once over
  all 32 lanes: `1.0` when the lanes agree, `0.5` when they split."
- test_divergence_efficiency_invalid: "A sequence whose length is not 32 raises `ValueError`; an
  entry that is not a bool (`1`, `None`, a string) raises `TypeError`."

PYTEST_DONT_REWRITE: pytest leaves these asserts alone, because their messages are what the
student reads as feedback.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.suites.student import StudentError
from grader.suites.testing import expect_value_error

FAST = settings.get_profile("grader-hidden")  # tests/hidden/conftest.py
GPUS = ("T4", "H100_SXM")
KEYS = {"blocks_per_sm", "warps_per_sm", "occupancy", "limited_by"}
ORDER = ("threads", "blocks", "registers", "shared_memory")  # the notebook's tie order
INT_MAX = 2**31 - 1
KIB = 1024

# ---------------------------------------------------------------------------------------------
# cuda_occupancy.h, transcribed. Function names follow the header's; only the paths that the
# course's GPUs (compute capability 7.5, 8.0, 9.0) take are kept. The kernel is assumed to have
# opted in to the device's largest shared memory per block (cudaFuncAttribute
# MaxDynamicSharedMemorySize = sharedMemPerBlockOptin), with the default carveout and no static
# shared memory: the notebook's `shared_bytes_per_block` is the dynamic size.


@dataclass(frozen=True)  # grader: public (a generic decorator)
class OccDeviceProp:
    """The cudaDeviceProp fields the calculator reads (cudaOccDeviceProp)."""

    computeMajor: int
    computeMinor: int
    maxThreadsPerBlock: int
    maxThreadsPerMultiprocessor: int
    regsPerBlock: int
    regsPerMultiprocessor: int
    warpSize: int
    sharedMemPerBlock: int
    sharedMemPerMultiprocessor: int
    sharedMemPerBlockOptin: int
    reservedSharedMemPerBlock: int


def occ_device_prop(hw) -> OccDeviceProp:
    """The properties a device of course.toml's [hardware.<gpu>] table reports."""
    sm = hw.sm
    return OccDeviceProp(
        computeMajor=hw.compute_capability[0],
        computeMinor=hw.compute_capability[1],
        maxThreadsPerBlock=sm.max_threads_per_block,
        maxThreadsPerMultiprocessor=sm.max_threads,
        regsPerBlock=sm.max_registers_per_block,
        regsPerMultiprocessor=sm.registers,
        warpSize=32,
        sharedMemPerBlock=48 * KIB,  # the default per-block limit before opting in
        sharedMemPerMultiprocessor=sm.shared_memory_kib * KIB,
        sharedMemPerBlockOptin=sm.max_shared_memory_per_block,
        reservedSharedMemPerBlock=sm.reserved_shared_memory_per_block,
    )


def _round_up(x: int, y: int) -> int:  # __occRoundUp
    return ((x + y - 1) // y) * y


def _divide_round_up(x: int, y: int) -> int:  # __occDivideRoundUp
    return (x + y - 1) // y


def smem_allocation_granularity(p: OccDeviceProp) -> int:  # cudaOccSMemAllocationGranularity
    return {7: 256, 8: 128, 9: 128}[p.computeMajor]


def reg_allocation_max_per_thread(p: OccDeviceProp) -> int:  # cudaOccRegAllocationMaxPerThread
    return {7: 256, 8: 256, 9: 256}[p.computeMajor]


def reg_allocation_granularity(p: OccDeviceProp) -> int:  # cudaOccRegAllocationGranularity
    return {7: 256, 8: 256, 9: 256}[p.computeMajor]


def sub_partitions_per_multiprocessor(p: OccDeviceProp) -> int:
    return {7: 4, 8: 4, 9: 4}[p.computeMajor]  # cudaOccSubPartitionsPerMultiprocessor


def max_blocks_per_multiprocessor(p: OccDeviceProp) -> int:  # cudaOccMaxBlocksPerMultiprocessor
    return {(7, 5): 16, (7, 0): 32, (8, 0): 32, (9, 0): 32}[(p.computeMajor, p.computeMinor)]


def align_up_shmem_size_volta_plus(size: int, p: OccDeviceProp) -> int:
    """cudaOccAlignUpShmemSizeVoltaPlus: the next carveout the architecture offers."""
    if (p.computeMajor, p.computeMinor) == (7, 5):
        steps = (32, 64)
    elif p.computeMajor == 8:
        steps = (0, 8, 16, 32, 64, 100, 132, 164)
    else:
        steps = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)
    for kib in steps:
        if size <= kib * KIB:
            return kib * KIB
    raise ValueError("CUDA_OCC_ERROR_INVALID_INPUT")


def smem_per_multiprocessor(p: OccDeviceProp) -> int:
    """cudaOccSMemPreferenceVoltaPlus with the default carveout and cache preference."""
    return align_up_shmem_size_volta_plus(p.sharedMemPerMultiprocessor, p)


def smem_per_block(p: OccDeviceProp, smem_per_cta: int) -> int:  # cudaOccSMemPerBlock, opt-in
    limit = p.sharedMemPerBlockOptin if smem_per_cta > p.sharedMemPerBlock else p.sharedMemPerBlock
    if p.computeMajor >= 8:
        limit += p.reservedSharedMemPerBlock
    return limit


def max_blocks_warps_limit(p: OccDeviceProp, block_size: int) -> int:
    """cudaOccMaxBlocksPerSMWarpsLimit (partitioned global caching off on these GPUs)."""
    if block_size > p.maxThreadsPerBlock:
        return 0
    max_warps_per_sm = p.maxThreadsPerMultiprocessor // p.warpSize
    return max_warps_per_sm // _divide_round_up(block_size, p.warpSize)


def max_blocks_smem_limit(p: OccDeviceProp, dynamic_smem: int) -> int:
    """cudaOccMaxBlocksPerSMSmemLimit."""
    granularity = smem_allocation_granularity(p)
    preference = smem_per_multiprocessor(p)
    static_smem = 0 + p.reservedSharedMemPerBlock
    total = static_smem + dynamic_smem
    allocated = _round_up(total, granularity)
    max_dynamic = p.sharedMemPerBlockOptin  # the opted-in attribute
    max_usage = static_smem + max_dynamic
    if dynamic_smem > max_dynamic or allocated > smem_per_block(p, max_usage):
        return 0
    per_sm = preference
    if preference < allocated:
        per_sm = align_up_shmem_size_volta_plus(allocated, p)
    return per_sm // allocated if allocated > 0 else INT_MAX


def max_blocks_regs_limit(p: OccDeviceProp, num_regs: int, block_size: int) -> int:
    """cudaOccMaxBlocksPerSMRegsLimit (partitioned global caching off)."""
    granularity = reg_allocation_granularity(p)
    sub_partitions = sub_partitions_per_multiprocessor(p)
    warps_per_cta = _divide_round_up(block_size, p.warpSize)
    regs_per_warp = _round_up(num_regs * p.warpSize, granularity)
    regs_per_cta = regs_per_warp * warps_per_cta
    regs_assumed_per_cta = regs_per_warp * _round_up(warps_per_cta, sub_partitions)
    if (
        p.regsPerBlock < regs_assumed_per_cta  # the hardware check
        or p.regsPerBlock < regs_per_cta  # the software check
        or num_regs > reg_allocation_max_per_thread(p)
    ):
        return 0
    if regs_per_warp == 0:
        return INT_MAX
    warps_per_sub_partition = (p.regsPerMultiprocessor // sub_partitions) // regs_per_warp
    return warps_per_sub_partition * sub_partitions // warps_per_cta


def cuda_occupancy_blocks(p: OccDeviceProp, block_size: int, num_regs: int, smem: int):
    """cudaOccMaxActiveBlocksPerMultiprocessor: (active blocks, {limit name: blocks})."""
    limits = {
        "threads": max_blocks_warps_limit(p, block_size),
        "blocks": max_blocks_per_multiprocessor(p),
        "registers": max_blocks_regs_limit(p, num_regs, block_size),
        "shared_memory": max_blocks_smem_limit(p, smem),
    }
    return min(limits.values()), limits


def expected(hw, tpb: int, regs: int, smem: int) -> dict | None:
    """What `occupancy(tpb, regs, smem, sm)` must return, or None where it must raise
    ValueError (CUDA launches no such block, or an argument is outside the notebook's range)."""
    if not (1 <= tpb and 0 <= regs <= 255 and 0 <= smem):
        return None
    p = occ_device_prop(hw)
    blocks, limits = cuda_occupancy_blocks(p, tpb, regs, smem)
    if blocks == 0:
        return None
    warps = blocks * _divide_round_up(tpb, 32)
    max_warps = p.maxThreadsPerMultiprocessor // p.warpSize
    return {
        "blocks_per_sm": blocks,
        "warps_per_sm": warps,
        "occupancy": warps / max_warps,
        "limited_by": next(name for name in ORDER if limits[name] == blocks),
    }


# ---------------------------------------------------------------------------------------------
# Occupancy against the transcription

# The cases a simpler model gets wrong, each run on every seed: (gpu, tpb, regs, smem).
BOUNDARY = [
    ("T4", 302, 174, 0),  # 5,632 per warp: 8 warps fit, not the block's 10; 12 x 5,632 > 65,536
    ("H100_SXM", 2048, 32, 0),  # more than 1,024 threads in one block
    ("T4", 1025, 0, 0),
    ("H100_SXM", 1024, 32, 0),  # the largest block: 2 of them
    ("H100_SXM", 256, 0, 228 * KIB),  # more than the 227 KB one block may ask for
    ("H100_SXM", 256, 0, 227 * KIB),  # exactly the most: 1 block
    ("H100_SXM", 96, 40, 0),  # sub-partitions: 12 warps in each, 16 blocks (not 17)
    ("H100_SXM", 128, 32, 38397),  # reserve and 128-byte unit: 39,424 B, 5 blocks (not 6)
    ("T4", 256, 64, 0),  # 100%
    ("T4", 256, 65, 0),  # 2,304 per warp: 3 blocks
    ("T4", 64, 73, 0),  # 2,336 -> 2,560 per warp: 12 blocks (14 without the unit)
    ("T4", 128, 0, 13107),  # 256-byte unit: 13,312 B, 4 blocks (5 unrounded)
    ("H100_SXM", 128, 0, 45666),  # 46,690 B with the reserve -> 46,720: 4 blocks (5 unrounded)
    ("T4", 32, 0, 4000),  # the 16-block limit
    ("H100_SXM", 64, 0, 0),  # even no shared memory takes the 1 KB reserve: 228 blocks' worth
    ("H100_SXM", 32, 255, 0),  # 8,192 per warp: 2 warps per sub-partition, 8 blocks
    ("H100_SXM", 160, 255, 0),  # 5 warps of the 8 that fit: 1 block
    ("H100_SXM", 288, 200, 0),  # refused: 6,400 per warp, 8 warps fit, the block has 9
    ("T4", 512, 72, 0),  # 2,304 per warp: 1 block
    ("T4", 992, 64, 0),  # 31 warps, 32 fit: 1 block
    ("H100_SXM", 1000, 65, 0),  # refused: 2,304 per warp, 28 warps fit, the block has 32
    ("H100_SXM", 768, 80, 0),  # 2,560 per warp: 24 warps fit: 1 block
    ("T4", 96, 168, 0),  # 5,376 per warp: 3 per sub-partition, 12 warps, 4 blocks
    ("H100_SXM", 32, 24, 0),  # the 32-block limit
    ("H100_SXM", 512, 0, 100 * KIB),  # 101 KB with the reserve: 2 blocks
    ("T4", 33, 0, 32 * KIB),  # whole warps: 2 blocks of 2 warps
]


def _check(student, course, gpu: str, tpb: int, regs: int, smem: int, answer=None) -> None:
    """One launch against the transcription; `answer` is the student's, already computed by a
    batch (`Outcome.get`), else the student's function is called here."""
    hw = course.hardware[gpu]
    want = expected(hw, tpb, regs, smem)
    call = f"occupancy({tpb}, {regs}, {smem}, sm_limits({gpu!r}))"
    if answer is None:
        sm = hw.sm.as_dict()

        def answer():
            return student.occupancy(tpb, regs, smem, sm)

    if want is None:
        expect_value_error(
            answer,
            call,
            "CUDA cannot launch such a block (block size, per-block registers or shared memory)",
        )
        return
    try:
        got = answer()
    except StudentError as exc:
        pytest.fail(
            f"{call} raised {exc.exc_type}; expected {want}: such a block fits on the SM. "
            f"{exc.feedback()[-400:]}"
        )
    assert isinstance(got, dict) and set(got) == KEYS, (
        f"{call} must return a dict with exactly the keys {sorted(KEYS)}, got {got!r}"
    )
    assert type(got["blocks_per_sm"]) is int and type(got["warps_per_sm"]) is int, (
        f"{call}: blocks_per_sm and warps_per_sm must be Python ints, got {got!r}"
    )
    assert type(got["occupancy"]) is float, f"{call}: occupancy must be a Python float, got {got!r}"
    assert got == want, (
        f"{call} returned {got}; expected {want}. Blocks per SM is the smallest of the threads "
        "(whole warps), blocks, registers (per warp, rounded up to the unit, then warps per "
        "sub-partition x 4) and shared memory (plus the reserve, rounded up to the unit) "
        "limits; ties name the first in that order"
    )


DRAWN_LAUNCHES = 1000  # on top of BOUNDARY
BATCH = 500  # launches per request: one round trip to the worker each, sharing a call's limit


def _int(rng: np.random.Generator, low: int, high: int) -> int:
    """low..high inclusive, an endpoint one time in eight (where off-by-one answers differ)."""
    if rng.random() < 0.125:
        return int(rng.choice([low, high]))
    return int(rng.integers(low, high + 1))


def _draw_launch(rng: np.random.Generator) -> tuple[str, int, int, int]:
    """(gpu, threads per block, registers per thread, shared memory per block): typical block
    shapes and register counts, any value in range, blocks too large, and shared memory from
    none to past the most a block may ask for, including sizes just past an allocation unit."""
    gpu = GPUS[int(rng.integers(len(GPUS)))]
    tpb = [
        lambda: int(rng.choice([32, 64, 96, 128, 160, 192, 256, 288, 384, 512, 768, 1024])),
        lambda: _int(rng, 1, 1024),
        lambda: _int(rng, 1025, 2048),
    ][int(rng.integers(3))]()
    regs = [
        lambda: int(rng.choice([0, 16, 24, 32, 40, 48, 64, 65, 72, 96, 128, 168, 255])),
        lambda: _int(rng, 0, 255),
    ][int(rng.integers(2))]()
    smem = [
        lambda: 0,
        lambda: _int(rng, 1, 48 * KIB),
        lambda: _int(rng, 0, 232 * KIB),
        lambda: _int(rng, 1, 64) * 4 * KIB + 1,  # just past a unit
    ][int(rng.integers(4))]()
    return gpu, tpb, regs, smem


@pytest.mark.points(3)
def test_occupancy_random_launches(student, course, rng):
    """Every BOUNDARY case first, then DRAWN_LAUNCHES launches drawn from the student's seed,
    asked in batches (`Function.many`): the first wrong answer fails the test."""
    launches = BOUNDARY + [_draw_launch(rng) for _ in range(DRAWN_LAUNCHES)]
    for start in range(0, len(launches), BATCH):
        chunk = launches[start : start + BATCH]
        calls = [((t, r, m, course.hardware[g].sm.as_dict()), {}) for g, t, r, m in chunk]
        for launch, outcome in zip(chunk, student.occupancy.many(calls), strict=True):
            _check(student, course, *launch, answer=outcome.get)


@pytest.mark.points(1)
@pytest.mark.parametrize("gpu", GPUS)
def test_occupancy_invalid_arguments(student, course, gpu):
    sm = course.hardware[gpu].sm.as_dict()
    cases = [
        (f"occupancy(0, 32, 0, {gpu})", (0, 32, 0), "threads_per_block must be >= 1"),
        (f"occupancy(1025, 32, 0, {gpu})", (1025, 32, 0), "at most 1,024 threads per block"),
        (
            f"occupancy({sm['max_threads'] + 1}, 32, 0, {gpu})",
            (sm["max_threads"] + 1, 32, 0),
            "at most 1,024 threads per block",
        ),
        (f"occupancy(256, 256, 0, {gpu})", (256, 256, 0), "at most 255 registers per thread"),
        (f"occupancy(256, -1, 0, {gpu})", (256, -1, 0), "registers cannot be negative"),
        (f"occupancy(256, 32, -1, {gpu})", (256, 32, -1), "shared memory cannot be negative"),
        (
            f"occupancy(256, 32, {sm['max_shared_memory_per_block'] + 1}, {gpu})",
            (256, 32, sm["max_shared_memory_per_block"] + 1),
            "more shared memory than one block may ask for",
        ),
        (f"occupancy(1024, 255, 0, {gpu})", (1024, 255, 0), "such a block fits no SM"),
        (f"occupancy(302, 174, 0, {gpu})", (302, 174, 0), "the per-block register check fails"),
    ]
    for what, args, hint in cases:
        expect_value_error(lambda args=args: student.occupancy(*args, sm), what, hint)
    # A dict that lacks a key it needs is a ValueError (the error convention of both notebooks).
    partial = {k: v for k, v in sm.items() if k != "reserved_shared_memory_per_block"}
    expect_value_error(
        lambda: student.occupancy(256, 32, 0, partial),
        f"occupancy(256, 32, 0, {gpu} sm without reserved_shared_memory_per_block)",
        "an sm dict that lacks one of its thirteen keys",
    )
    # A zero limit is out of range (the error convention's settled cases), but the reserve,
    # which is 0 on a T4 (every T4 case above passes with it).
    for key in ("register_granularity", "shared_memory_granularity", "max_blocks"):
        zero = {**sm, key: 0}
        expect_value_error(
            lambda zero=zero: student.occupancy(256, 32, 0, zero),
            f"occupancy(256, 32, 0, {gpu} sm with {key} = 0)",
            f"every limit in an sm dict but the reserve is positive: name {key}",
        )


@pytest.mark.points(1)
def test_occupancy_type_errors(student, course):
    sm = course.hardware["T4"].sm.as_dict()
    cases = [
        ("occupancy(256.0, 32, 0, sm)", (256.0, 32, 0, sm)),
        ("occupancy(True, 32, 0, sm)", (True, 32, 0, sm)),
        ("occupancy(256, '32', 0, sm)", (256, "32", 0, sm)),
        ("occupancy(256, 32, 0.0, sm)", (256, 32, 0.0, sm)),
        ("occupancy(256, 32, 0, [1, 2])", (256, 32, 0, [1, 2])),
        (
            "occupancy(256, 32, 0, sm with max_blocks = 16.0)",
            (256, 32, 0, {**sm, "max_blocks": 16.0}),
        ),
    ]
    for what, args in cases:
        try:
            result = student.occupancy(*args)
        except TypeError:
            continue
        except StudentError as exc:
            pytest.fail(f"{what} raised {exc.exc_type}; expected TypeError")
        pytest.fail(f"{what} returned {result!r}; expected TypeError")


def _driver_cases():
    """Kernels compiled on this GPU with different register caps, and one with a static tile."""
    from numba import cuda, float32

    def heavy(out):
        i = cuda.grid(1)
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = float32(i)
        for k in range(64):
            s0 = s0 * s1 + s7
            s1 = s1 * s2 + s0
            s2 = s2 * s3 + s1
            s3 = s3 * s4 + s2
            s4 = s4 * s5 + s3
            s5 = s5 * s6 + s4
            s6 = s6 * s7 + s5
            s7 = s7 * s0 + s6 + k
        if i < out.size:
            out[i] = s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7

    def tiled(out):
        tile = cuda.shared.array(3000, float32)
        i = cuda.grid(1)
        tile[cuda.threadIdx.x] = i
        cuda.syncthreads()
        if i < out.size:
            out[i] = tile[(cuda.threadIdx.x + 1) % cuda.blockDim.x]

    kernels = [cuda.jit("void(float32[:])", max_registers=cap)(heavy) for cap in (24, 40, 72, 128)]
    kernels.append(cuda.jit("void(float32[:])")(tiled))
    for kernel in kernels:
        cufunc = next(iter(kernel.overloads.values()))._codelibrary.get_cufunc()
        yield cufunc, int(cufunc.attrs.regs), int(cufunc.attrs.shared)


@pytest.mark.gpu
@pytest.mark.points(1)
def test_occupancy_matches_the_driver_gpu(student, course):
    from numba import cuda

    device = cuda.get_current_device()
    cc = tuple(device.compute_capability)
    hw = next((h for h in course.hardware.values() if h.compute_capability == cc), None)
    if hw is None:
        pytest.skip(f"no [hardware] table of course.toml has this GPU's compute capability {cc}")
    context = cuda.current_context()
    shapes = [(32, 0), (96, 0), (128, 4096), (256, 0), (302, 0), (512, 8192), (1000, 0)]
    for cufunc, regs, static in _driver_cases():
        for tpb, dynamic in shapes:
            driver = int(context.get_active_blocks_per_multiprocessor(cufunc, tpb, dynamic))
            want = expected(hw, tpb, regs, static + dynamic)
            oracle = 0 if want is None else want["blocks_per_sm"]
            assert oracle == driver, (
                f"grader's own check: the transcription of cuda_occupancy.h says {oracle} blocks "
                f"for {tpb} threads x {regs} registers + {static + dynamic} B on {device.name}, "
                f"the driver says {driver} (not the student's fault; report it to the staff)"
            )
            if want is not None:
                _check(student, course, hw.key, tpb, regs, static + dynamic)


# ---------------------------------------------------------------------------------------------
# Divergence


@pytest.mark.points(1)
@FAST
@given(
    pattern=st.one_of(
        st.lists(st.booleans(), min_size=32, max_size=32),
        st.sampled_from([[True] * 32, [False] * 32]),
        st.integers(0, 31).map(lambda k: [lane == k for lane in range(32)]),
    ),
    as_array=st.booleans(),
)
def test_divergence_efficiency_random_warps(student, reference, pattern, as_array):
    arg = np.array(pattern, dtype=bool) if as_array else pattern
    got = student.divergence_efficiency(arg)
    want = reference.divergence_efficiency(pattern)
    shown = "".join("T" if v else "F" for v in pattern)
    assert type(got) is float, f"divergence_efficiency must return a Python float, got {got!r}"
    assert got == want, (
        f"divergence_efficiency({shown}{' as a bool array' if as_array else ''}) returned "
        f"{got}; expected {want}: a warp whose lanes all agree runs one side (1.0); one that "
        "splits, however unevenly, runs both sides over all 32 lanes (0.5)"
    )


@pytest.mark.points(1)
def test_divergence_efficiency_invalid(student):
    for what, arg in (("31 lanes", [True] * 31), ("33 lanes", [False] * 33), ("no lanes", [])):
        expect_value_error(
            lambda arg=arg: student.divergence_efficiency(arg),
            f"divergence_efficiency({what})",
            "a warp has exactly 32 lanes",
        )
    for what, arg in (("32 ones", [1] * 32), ("None in lane 3", [True] * 3 + [None] + [True] * 28)):
        try:
            result = student.divergence_efficiency(arg)
        except TypeError:
            continue
        except StudentError as exc:
            pytest.fail(f"divergence_efficiency({what}) raised {exc.exc_type}; expected TypeError")
        pytest.fail(
            f"divergence_efficiency({what}) returned {result!r}; expected TypeError (entries "
            "must be bools)"
        )
