"""S5.1 §3-§6 written the way another student would: plain Python where the reference uses NumPy,
other decompositions, helpers of their own (`_exact`, `_lanes`, `_grid`: names the self-check
cells once left behind).

Each function whose name is a solution cell's grade_id replaces that cell of the notebook; the
other top-level definitions go in a cell of their own before the first exercise. The kernels of
§7-§9 keep the reference's (those sections are being rewritten elsewhere).
tests/unit/release/test_self_checks.py runs every self-check cell against it, and grades it.
"""

# ruff: noqa: F821 - the notebook's own names (cuda, np, ...) are in scope there

_OCC_KEYS = (
    "max_threads",
    "max_blocks",
    "max_warps",
    "registers",
    "shared_memory_bytes",
    "register_granularity",
    "max_threads_per_block",
    "max_registers_per_thread",
    "max_registers_per_block",
    "register_sub_partitions",
    "shared_memory_granularity",
    "reserved_shared_memory_per_block",
    "max_shared_memory_per_block",
)


def _exact(x):
    """This student's own helper (a self-check once left a name like it behind)."""
    return float(x)


def _lanes():
    """This student's own helper: the lane ids of a warp."""
    return list(range(32))


def _grid(n, per_block):
    return -(-n // per_block)


def _whole(name, value):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}")
    return value.__index__()


def _peak(name, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"{name} must be a number")
    value = _exact(value)
    if not (0 < value < math.inf):
        raise ValueError(f"{name} must be positive and finite, got {value}")
    return value


def ridge_point(peak_flops, peak_bandwidth):
    return _peak("peak_flops", peak_flops) / _peak("peak_bandwidth", peak_bandwidth)


def attainable_flops(intensity, peak_flops, peak_bandwidth):
    top, slope = _peak("peak_flops", peak_flops), _peak("peak_bandwidth", peak_bandwidth)
    scalar = not isinstance(intensity, (np.ndarray, list, tuple))
    if isinstance(intensity, (bool, np.bool_, str)):
        raise TypeError("intensity must be a number")
    arr = np.array(intensity) if not scalar else None
    if arr is not None and arr.dtype.kind not in "iuf":
        raise TypeError("intensity must hold numbers")
    if scalar:
        if not isinstance(intensity, (int, float, np.number)):
            raise TypeError("intensity must be a number")
        value = float(intensity)
        if value != value or value < 0:
            raise ValueError(f"intensity must be >= 0, got {value}")
        return min(value * slope, top)
    arr = arr.astype(float)
    if np.isnan(arr).any() or (arr < 0).any():
        raise ValueError("every intensity must be >= 0 and not NaN")
    return np.where(arr * slope < top, arr * slope, top)


def is_memory_bound(intensity, peak_flops, peak_bandwidth):
    ridge = ridge_point(peak_flops, peak_bandwidth)
    if isinstance(intensity, (bool, np.bool_)) or not isinstance(intensity, (int, float)):
        raise TypeError("intensity must be one number")
    if intensity != intensity or intensity < 0:
        raise ValueError("intensity must be >= 0")
    return bool(intensity < ridge)


def launch_config(n, threads_per_block=256):
    n, tpb = _whole("n", n), _whole("threads_per_block", threads_per_block)
    if n < 1:
        raise ValueError("n must be >= 1")
    if tpb < 1 or tpb > 1024:
        raise ValueError("threads_per_block must be in 1..1024")
    return (_grid(n, tpb), tpb)


def divergence_efficiency(branch_taken):
    if isinstance(branch_taken, np.ndarray):
        if branch_taken.dtype != bool:
            raise TypeError("a bool array, please")
        branch_taken = branch_taken.tolist()
    if not isinstance(branch_taken, (list, tuple)):
        raise TypeError("branch_taken must be a list, tuple or bool array")
    if any(not isinstance(v, (bool, np.bool_)) for v in branch_taken):
        raise TypeError("every lane's outcome must be a bool")
    if len(branch_taken) != len(_lanes()):
        raise ValueError("a warp has 32 lanes")
    taken = sum(bool(v) for v in branch_taken)
    return 1.0 if taken in (0, 32) else 0.5


def occupancy(threads_per_block, registers_per_thread, shared_bytes_per_block, sm):
    if not isinstance(sm, dict):
        raise TypeError("sm must be a dict")
    for key in _OCC_KEYS:
        if key not in sm:
            raise ValueError(f"sm has no {key}")
    tpb = _whole("threads_per_block", threads_per_block)
    regs = _whole("registers_per_thread", registers_per_thread)
    smem = _whole("shared_bytes_per_block", shared_bytes_per_block)
    s = {k: _whole(k, sm[k]) for k in _OCC_KEYS}
    bad = [k for k, v in s.items() if v < (k != "reserved_shared_memory_per_block")]
    if bad:
        raise ValueError(f"sm limits must be positive (the reserve may be 0): {bad}")
    if not 1 <= tpb <= s["max_threads_per_block"]:
        raise ValueError("threads_per_block out of range")
    if not 0 <= regs <= s["max_registers_per_thread"]:
        raise ValueError("registers_per_thread out of range")
    if not 0 <= smem <= s["max_shared_memory_per_block"]:
        raise ValueError("shared_bytes_per_block out of range")
    warps = _grid(tpb, 32)
    limits = [("threads", s["max_warps"] // warps), ("blocks", s["max_blocks"])]
    if regs:
        quarter = s["register_sub_partitions"]
        per_warp = _grid(regs * 32, s["register_granularity"]) * s["register_granularity"]
        if per_warp * _grid(warps, quarter) * quarter > s["max_registers_per_block"]:
            raise ValueError("registers: this block cannot be launched")
        limits.append(("registers", (s["registers"] // quarter // per_warp) * quarter // warps))
    unit = s["shared_memory_granularity"]
    asked = _grid(smem + s["reserved_shared_memory_per_block"], unit) * unit
    if asked:
        limits.append(("shared_memory", s["shared_memory_bytes"] // asked))
    name, blocks = min(limits, key=lambda item: item[1])  # first of the smallest
    if blocks == 0:
        raise ValueError(f"no block fits: {name}")
    return {
        "blocks_per_sm": blocks,
        "warps_per_sm": blocks * warps,
        "occupancy": blocks * warps / s["max_warps"],
        "limited_by": name,
    }


@cuda.jit
def vector_add(a, b, c):
    start = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if start >= c.shape[0]:
        return
    c[start] = a[start] + b[start]


def gpu_vector_add(a, b, threads_per_block=256):
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape:
        raise ValueError(f"shapes differ: {x.shape} vs {y.shape}")
    kind = np.promote_types(x.dtype, y.dtype)
    if not (np.issubdtype(kind, np.number) or kind == np.bool_):
        raise TypeError(f"cannot add arrays of {kind}")
    out = np.empty(x.shape, dtype=kind)
    if out.size:
        blocks, tpb = launch_config(out.size, threads_per_block)
        dx = cuda.to_device(x.astype(kind).reshape(-1))
        dy = cuda.to_device(y.astype(kind).reshape(-1))
        dz = cuda.device_array(out.size, dtype=kind)
        vector_add[blocks, tpb](dx, dy, dz)
        out = dz.copy_to_host().reshape(x.shape)
    return out


def effective_bandwidth_gbs(bytes_moved, elapsed_ms):
    if isinstance(bytes_moved, bool) or not isinstance(bytes_moved, (int, float, np.number)):
        raise TypeError("bytes_moved must be a number")
    if not 0 <= bytes_moved < math.inf:
        raise ValueError("bytes_moved must be finite and >= 0")
    seconds = _peak("elapsed_ms", elapsed_ms) / 1000
    return bytes_moved / seconds / 1e9
