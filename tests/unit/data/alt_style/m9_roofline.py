"""M9 written the way another student would: terse, own helpers, other decompositions.

Each function whose name is a solution cell's grade_id replaces that cell of the notebook; the
other top-level definitions (this student's own helpers, named as a student might, `_exact` and
`_t4_like` among them: names the self-check cells once left behind) go in a cell of their own
before the first exercise. tests/unit/release/test_self_checks.py runs every self-check cell
against it, and grades it; the report's "another style" solution is built from it too.
"""

# ruff: noqa: F821 - the notebook's own names (check_int, COURSE_MODEL, ...) are in scope there

_INT_KEYS = ("dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "ffn_hidden_dim")


def _t4_like():
    """This student's own helper: a T4 dict they build their checks from."""
    return {"name": "T4", "peak_flops": 65e12, "peak_bandwidth": 320e9}


def _exact(x):
    """This student's own helper: an exact rational of a number (a self-check once replaced a
    helper of this name with a dict)."""
    return Fraction(x)


def _size(value, name):
    numeric = isinstance(value, (int, float)) or hasattr(value, "__index__")
    if type(value) is bool or not numeric:
        raise TypeError(f"{name}: want bytes per number, got {type(value).__name__}")
    if hasattr(value, "__index__") and not isinstance(value, float):
        value = int(value)
    if not (value > 0 and value != float("inf")):
        raise ValueError(f"{name}: want a positive finite size, got {value}")
    return value


def _count(value, name, least):
    if type(value) is bool or not hasattr(value, "__index__"):
        raise TypeError(f"{name}: want an integer, got {value!r}")
    value = value.__index__()
    if value < least:
        raise ValueError(f"{name}: want at least {least}, got {value}")
    return value


def _seconds(value, name):
    if type(value) is bool or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: want seconds, got {value!r}")
    if not 0 < value < float("inf"):
        raise ValueError(f"{name}: want positive finite seconds, got {value}")
    return value


def _figures(gpu, *keys):
    if type(gpu) is not dict:
        raise TypeError("gpu must be a dict")
    out = []
    for k in keys:
        if k not in gpu:
            raise ValueError(f"gpu has no {k}")
        v = gpu[k]
        if k == "sm_count":
            out.append(_count(v, "sm_count", 1))
            continue
        if type(v) is bool or not isinstance(v, (int, float)):
            raise TypeError(f"gpu[{k}] is not a number")
        if not 0 < v < float("inf") or (k == "usable_memory_fraction" and v > 1):
            raise ValueError(f"gpu[{k}] out of range: {v}")
        out.append(v)
    return out


def _two(cfg, w, k):
    """(weight size, cache size, matmul weights, cached numbers per token) after the checks."""
    w = _size(w, "dtype_bytes")
    k = w if k is None else _size(k, "kv_dtype_bytes")
    return w, k, matmul_params(cfg), kv_bytes_per_token(cfg, 1)


def _roof(flops, nbytes, gpu):
    return max(flops / gpu["peak_flops"], nbytes / gpu["peak_bandwidth"])


def validate_config(cfg):
    if type(cfg) is not dict:
        raise TypeError("config must be a dict")
    extra = set(cfg) - set(CONFIG_KEYS) - {"name"}
    if extra:
        raise ValueError(f"unknown keys: {sorted(map(str, extra))}")
    lacking = [k for k in CONFIG_KEYS if k not in cfg]
    if lacking:
        raise ValueError(f"missing keys: {lacking}")
    for key in _INT_KEYS:
        _count(cfg[key], key, 1)
    if type(cfg["tied_embeddings"]) is not bool:
        raise TypeError("tied_embeddings must be a bool")
    if "name" in cfg and type(cfg["name"]) is not str:
        raise TypeError("name must be a str")
    if cfg["dim"] % cfg["n_heads"] or cfg["n_heads"] % cfg["n_kv_heads"]:
        raise ValueError("dim must divide by n_heads, n_heads by n_kv_heads")


def num_params(cfg):
    validate_config(cfg)
    d, h, kvh = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"]
    block = d * (2 * d + 2 * d * kvh // h + 3 * cfg["ffn_hidden_dim"] + 2)
    tables = 1 if cfg["tied_embeddings"] else 2
    return tables * cfg["vocab_size"] * d + cfg["n_layers"] * block + d


def matmul_params(cfg):
    total = num_params(cfg)
    return total if cfg["tied_embeddings"] else total - cfg["vocab_size"] * cfg["dim"]


def kv_bytes_per_token(cfg, dtype_bytes=2):
    validate_config(cfg)
    size = _size(dtype_bytes, "dtype_bytes")
    return size * 2 * cfg["n_layers"] * cfg["n_kv_heads"] * (cfg["dim"] // cfg["n_heads"])


def decode_intensity(cfg, batch, context_len, dtype_bytes=2):
    batch, ctx = _count(batch, "batch", 1), _count(context_len, "context_len", 0)
    per_token = kv_bytes_per_token(cfg, dtype_bytes)
    p = matmul_params(cfg)
    return float(2 * p * batch / (p * dtype_bytes + batch * ctx * per_token))


def crossover_batch(cfg, ridge, context_len, dtype_bytes=2):
    if type(ridge) is bool or not isinstance(ridge, (int, float)):
        raise TypeError("ridge must be a number")
    if not 0 < ridge < float("inf"):
        raise ValueError("ridge must be positive and finite")
    ctx = _count(context_len, "context_len", 0)
    per_token, p = kv_bytes_per_token(cfg, dtype_bytes), matmul_params(cfg)
    if ctx and 2 * p <= _exact(ridge) * ctx * _exact(per_token):
        return None

    def reaches(b):
        return decode_intensity(cfg, b, ctx, dtype_bytes) >= ridge

    high = 1
    while not reaches(high):
        high *= 2
    low = high // 2 + 1 if high > 1 else 1
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if reaches(mid) else (mid + 1, high)
    return low


def load_hardware(path=None):
    table, source = hardware_tables(path)
    if not table or type(table) is not dict:
        raise ValueError(f"no hardware tables in {source}")
    out = {}
    for key, entry in table.items():
        entry = entry if type(entry) is dict else {}
        got = {}
        for name, whole in (
            ("fp16_tensor_tflops", False),
            ("bandwidth_gbs", False),
            ("memory_mib", True),
            ("usable_memory_fraction", False),
            ("sm_count", True),
        ):
            v = entry.get(name)
            ok = type(v) is int if whole else type(v) in (int, float)
            if not ok or not v > 0 or (name == "usable_memory_fraction" and v > 1):
                raise ValueError(f"[hardware.{key}] {name} is {v!r} in {source}")
            got[name] = v
        out[key] = {
            "name": key,
            "peak_flops": got["fp16_tensor_tflops"] * 1e12,
            "peak_bandwidth": got["bandwidth_gbs"] * 1e9,
            "memory_bytes": got["memory_mib"] << 20,
            "usable_memory_fraction": float(got["usable_memory_fraction"]),
            "sm_count": got["sm_count"],
        }
    return out


def m9_record(cfg, gpu, context_len, dtype_bytes=2):
    validate_config(cfg)
    flops_s, bytes_s = _figures(gpu, "peak_flops", "peak_bandwidth")
    if type(gpu.get("name")) is not str:
        raise TypeError("gpu['name'] must be a str")
    if not gpu["name"]:
        raise ValueError("gpu['name'] is empty")
    ctx, size = _count(context_len, "context_len", 0), _size(dtype_bytes, "dtype_bytes")
    ridge = flops_s / bytes_s
    i = {b: decode_intensity(cfg, b, ctx, size) for b in (1, 8, 32)}
    cross = crossover_batch(cfg, ridge, ctx, size)
    where = "below" if i[1] < ridge else "at or above"
    kind = "memory-bound" if i[1] < ridge else "compute-bound"
    return {
        "intensity_b1": i[1],
        "intensity_b8": i[8],
        "intensity_b32": i[32],
        "crossover_batch": cross,
        "conclusion": f"batch-1 decode is {kind}: {i[1]:.2f} FLOP/byte, {where} the ridge of "
        f"{ridge:.1f}; crossover batch: {cross}",
        "params": num_params(cfg),
        "context_len": ctx,
        "dtype_bytes": size,
        "gpu": dict(gpu),
        "model": dict(cfg),
    }


def decode_tokens_per_s_bound(cfg, gpu, batch, context_len, dtype_bytes=2, kv_dtype_bytes=None):
    _figures(gpu, "peak_flops", "peak_bandwidth")
    b, ctx = _count(batch, "batch", 1), _count(context_len, "context_len", 0)
    w = _size(dtype_bytes, "dtype_bytes")
    per_token = kv_bytes_per_token(cfg, w if kv_dtype_bytes is None else kv_dtype_bytes)
    p = matmul_params(cfg)
    return float(b / _roof(2 * p * b, p * w + b * ctx * per_token, gpu))


def _engine(runtime_bytes):
    """This student's check of the engine's own bytes: a number, finite, not negative."""
    if type(runtime_bytes) is bool or not isinstance(runtime_bytes, (int, float)):
        raise TypeError(f"runtime_bytes: want a number of bytes, got {runtime_bytes!r}")
    if not 0 <= runtime_bytes < float("inf"):
        raise ValueError(f"runtime_bytes: want a finite number >= 0, got {runtime_bytes}")
    return _exact(runtime_bytes)


def kv_cache_fits(
    cfg, gpu, batch, context_len, dtype_bytes=2, kv_dtype_bytes=None, runtime_bytes=RUNTIME_BYTES
):
    memory, share = _figures(gpu, "memory_bytes", "usable_memory_fraction")
    b, ctx = _count(batch, "batch", 1), _count(context_len, "context_len", 0)
    w = _size(dtype_bytes, "dtype_bytes")
    per_token = kv_bytes_per_token(cfg, w if kv_dtype_bytes is None else kv_dtype_bytes)
    free = _exact(share) * _exact(memory) - _engine(runtime_bytes)
    return num_params(cfg) * _exact(w) + b * ctx * _exact(per_token) <= free


def max_batch_that_fits(
    cfg, gpu, context_len, dtype_bytes=2, kv_dtype_bytes=None, runtime_bytes=RUNTIME_BYTES
):
    memory, share = _figures(gpu, "memory_bytes", "usable_memory_fraction")
    ctx = _count(context_len, "context_len", 1)
    w = _size(dtype_bytes, "dtype_bytes")
    per_token = kv_bytes_per_token(cfg, w if kv_dtype_bytes is None else kv_dtype_bytes)
    left = _exact(share) * _exact(memory) - _engine(runtime_bytes) - num_params(cfg) * _exact(w)
    return max(0, math.floor(left / (ctx * _exact(per_token))))


def save_metric(path, key, value):
    if not isinstance(path, (str, Path)):
        raise TypeError("path must be a str or a Path")
    if type(key) is not str:
        raise TypeError("key must be a str")
    if key == "":
        raise ValueError("key must not be empty")
    try:
        value = json.loads(json.dumps(value, allow_nan=False))
    except TypeError as exc:
        raise TypeError(f"not JSON data: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"NaN or infinity: {exc}") from None
    target = Path(path)
    data = {}
    if target.is_file() and target.read_text().strip():
        try:
            data = json.loads(target.read_text())
        except ValueError:
            raise ValueError(f"{target} is not valid JSON: fix or remove it") from None
        if type(data) is not dict:
            raise ValueError(f"{target} is not a JSON object: fix or remove it")
    data[key] = value
    mask = os.umask(0o022)
    os.umask(mask)
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~mask
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".metrics-")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
        os.chmod(temp, mode)
        os.replace(temp, target)
    finally:
        if os.path.exists(temp):
            os.remove(temp)


def roofline_kernel(flops, nbytes, gpu):
    intensity = flops / nbytes
    ridge = gpu["peak_flops"] / gpu["peak_bandwidth"]
    return {
        "flops": float(flops),
        "bytes": float(nbytes),
        "intensity": float(intensity),
        "time_s": float(_roof(flops, nbytes, gpu)),
        "bound": "memory" if intensity < ridge else "compute",
    }


def decode_step_breakdown(cfg, batch, context_len, gpu, dtype_bytes=2, kv_dtype_bytes=None):
    _figures(gpu, "peak_flops", "peak_bandwidth")
    b, ctx = _count(batch, "batch", 1), _count(context_len, "context_len", 1)
    w, k, p, e = _two(cfg, dtype_bytes, kv_dtype_bytes)
    parts = {
        "weights": roofline_kernel(2 * p * b, p * w, gpu),
        "attention": roofline_kernel(
            4 * cfg["n_layers"] * cfg["dim"] * ctx * b, b * ctx * e * k, gpu
        ),
    }
    parts["time_s"] = parts["weights"]["time_s"] + parts["attention"]["time_s"]
    return parts


def prefill_time(cfg, batch, prompt_len, gpu, dtype_bytes=2, kv_dtype_bytes=None):
    _figures(gpu, "peak_flops", "peak_bandwidth")
    b, n = _count(batch, "batch", 1), _count(prompt_len, "prompt_len", 1)
    w, k, p, e = _two(cfg, dtype_bytes, kv_dtype_bytes)
    head = cfg["vocab_size"] * cfg["dim"]
    body_flops = 2 * b * n * (p - head) + 2 * b * head  # logits for the last position only
    attn_flops = 2 * b * cfg["n_layers"] * cfg["dim"] * n * (n + 1)
    return float(_roof(body_flops, p * w, gpu) + _roof(attn_flops, b * n * e * k, gpu))


def ttft_and_tpot(cfg, batch, prompt_len, gpu, dtype_bytes=2, kv_dtype_bytes=None):
    first = prefill_time(cfg, batch, prompt_len, gpu, dtype_bytes, kv_dtype_bytes)
    step = decode_step_breakdown(cfg, batch, prompt_len, gpu, dtype_bytes, kv_dtype_bytes)
    return first, float(step["time_s"])


def decode_utilization(cfg, batch, context_len, gpu, tpot_s, dtype_bytes=2, kv_dtype_bytes=None):
    flops_s, bytes_s = _figures(gpu, "peak_flops", "peak_bandwidth")
    t = _seconds(tpot_s, "tpot_s")
    parts = decode_step_breakdown(cfg, batch, context_len, gpu, dtype_bytes, kv_dtype_bytes)
    kernels = (parts["weights"], parts["attention"])
    return {
        "mbu": sum(x["bytes"] for x in kernels) / t / bytes_s,
        "mfu": sum(x["flops"] for x in kernels) / t / flops_s,
    }


def ragged_decode_step(cfg, context_lens, gpu, dtype_bytes=2, kv_dtype_bytes=None):
    _figures(gpu, "peak_flops", "peak_bandwidth")
    if type(context_lens) not in (list, tuple):
        raise TypeError("context_lens must be a list or a tuple")
    if len(context_lens) == 0:
        raise ValueError("context_lens is empty")
    tokens = 0
    for n, c in enumerate(context_lens):
        tokens += _count(c, f"context_lens[{n}]", 1)
    w, k, p, e = _two(cfg, dtype_bytes, kv_dtype_bytes)
    weights = _roof(2 * p * len(context_lens), p * w, gpu)
    attention = _roof(4 * cfg["n_layers"] * cfg["dim"] * tokens, tokens * e * k, gpu)
    return float(weights + attention)


def max_batch_under_tpot(
    cfg, gpu, context_len, tpot_s, dtype_bytes=2, kv_dtype_bytes=None, runtime_bytes=RUNTIME_BYTES
):
    _figures(gpu, "peak_flops", "peak_bandwidth", "memory_bytes", "usable_memory_fraction")
    ctx, t = _count(context_len, "context_len", 1), _seconds(tpot_s, "tpot_s")
    wall = max_batch_that_fits(
        cfg, gpu, context_len, dtype_bytes, kv_dtype_bytes, runtime_bytes=runtime_bytes
    )

    def step(b):
        return (
            ragged_decode_step(cfg, [ctx] * 1, gpu, dtype_bytes, kv_dtype_bytes)
            if b == 1
            else (decode_step_breakdown(cfg, b, ctx, gpu, dtype_bytes, kv_dtype_bytes)["time_s"])
        )

    best, step_size = 0, 1
    while best + step_size <= wall and step(best + step_size) <= t:  # gallop up
        best, step_size = best + step_size, step_size * 2
    while step_size > 1:  # then narrow down
        step_size //= 2
        if best + step_size <= wall and step(best + step_size) <= t:
            best += step_size
    return best


def chunked_prefill_budget(gpu, batch, dtype_bytes=2):
    flops_s, bytes_s = _figures(gpu, "peak_flops", "peak_bandwidth")
    b = _count(batch, "batch", 1)
    w = _size(dtype_bytes, "dtype_bytes")
    limit = _exact(flops_s) / _exact(bytes_s) * _exact(w) / 2  # tokens must stay below this
    tokens = math.floor(limit)
    if tokens == limit:
        tokens -= 1
    return max(tokens - b, 0)


def decode_attention_intensity(cfg, spec_tokens=1, kv_dtype_bytes=2):
    s = _count(spec_tokens, "spec_tokens", 1)
    validate_config(cfg)
    k = _size(kv_dtype_bytes, "kv_dtype_bytes")
    return 2.0 * s * (cfg["n_heads"] // cfg["n_kv_heads"]) / k


def split_kv_plan(cfg, batch, context_len, gpu, min_chunk=256, blocks_per_sm=2):
    (sms,) = _figures(gpu, "sm_count")
    b, ctx = _count(batch, "batch", 1), _count(context_len, "context_len", 1)
    chunk = _count(min_chunk, "min_chunk", 1)
    slots = _count(blocks_per_sm, "blocks_per_sm", 1) * sms
    validate_config(cfg)
    blocks = b * cfg["n_kv_heads"]
    splits = 1
    if blocks * 5 < slots * 4:
        # efficiency of s splits as an integer fraction: blocks * s over the slots of its waves
        candidates = range(1, min(slots, max(1, ctx // chunk)) + 1)
        eff = {s: (blocks * s, slots * -(-(blocks * s) // slots)) for s in candidates}
        top_n, top_d = max(eff.values(), key=lambda f: Fraction(*f))
        splits = min(s for s, (n, d) in eff.items() if 20 * n * top_d >= 17 * top_n * d)
    return {
        "blocks": blocks,
        "splits": splits,
        "split_blocks": blocks * splits,
        "chunk_len": math.ceil(ctx / splits),
    }
