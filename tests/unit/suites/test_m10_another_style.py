"""M10's graded functions written again in another style than the reference, at full marks.

The standard every kernel lesson is held to: a correct solution in another style keeps every
point. Here the released exercise's stubs are filled with bodies written apart from the reference
(their own argument checks, `divmod` and closed forms where the reference loops, a doubling
search where it bisects, kernels that index with `TPB` and unravel the element by subtraction),
and the real suites grade them in this process under two identities (two sets of draws).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import ROOT

from grader.suites.runner import run_assignment

M10 = "m10_serving"

BODIES: dict[str, str] = {}
BODIES["sectors_per_request"] = """
for label, v in (("run", run), ("itemsize", itemsize)):
    if type(v) is bool or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{label}: an integer please, not {v!r}")
run, itemsize = int(run), int(itemsize)
if run < 1 or bin(run).count("1") != 1:
    raise ValueError(f"run={run}: a power of two >= 1 please")
if itemsize not in {1 << p for p in range(5)}:
    raise ValueError(f"itemsize={itemsize}: 1, 2, 4, 8 or 16 please")
lanes, sector = 32, 32
if run >= lanes:
    return lanes * itemsize // sector if lanes * itemsize >= sector else 1
pieces = lanes // run
return pieces * math.ceil(run * itemsize / sector)
"""
KERNEL_BHSD = """
nh = k.shape[1]
ns = k.shape[2]
nd = k.shape[3]
flat = cuda.threadIdx.x + TPB * cuda.blockIdx.x
if flat < ns * nd:
    pos = flat // nd
    dd = flat - pos * nd
    bb = cuda.blockIdx.y // nh
    hh = cuda.blockIdx.y - bb * nh
    term = q[bb, hh, dd] * k[bb, hh, pos, dd]
    cuda.atomic.add(scores, (bb, hh, pos), term)
"""
BODIES["scores_bhsd"] = KERNEL_BHSD
BODIES["scores_bshd"] = KERNEL_BHSD.replace(
    "nh = k.shape[1]\nns = k.shape[2]", "ns = k.shape[1]\nnh = k.shape[2]"
).replace("k[bb, hh, pos, dd]", "k[bb, pos, hh, dd]")
BODIES["scores_paged"] = """
nh = k_pages.shape[1]
psz = k_pages.shape[2]
nd = k_pages.shape[3]
ns = scores.shape[2]
flat = cuda.threadIdx.x + TPB * cuda.blockIdx.x
if flat < ns * nd:
    pos = flat // nd
    dd = flat - pos * nd
    bb = cuda.blockIdx.y // nh
    hh = cuda.blockIdx.y - bb * nh
    logical = pos // psz
    physical = block_table[bb, logical]
    term = q[bb, hh, dd] * k_pages[physical, hh, pos - logical * psz, dd]
    cuda.atomic.add(scores, (bb, hh, pos), term)
"""
CHECKS = """
def _int(label, v, lo):
    if type(v) is bool or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{label} should be an integer, got {type(v).__name__}")
    if v < lo:
        raise ValueError(f"{label} should be >= {lo}, got {v}")
    return int(v)

def _real(label, v, lo=None, strict=False, hi=None):
    kinds = (int, float, np.integer, np.floating)
    if type(v) is bool or isinstance(v, np.bool_) or not isinstance(v, kinds):
        raise TypeError(f"{label} should be a number, got {type(v).__name__}")
    x = float(v)
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError(f"{label} should be finite")
    if lo is not None and (x < lo or (strict and x == lo)):
        raise ValueError(f"{label} out of range: {v}")
    if hi is not None and x > hi:
        raise ValueError(f"{label} out of range: {v}")
    return x
"""
BODIES["kv_blocks"] = (
    CHECKS
    + """
t = _int("tokens", tokens, 0)
bs = _int("block_size", block_size, 1)
q_, r_ = divmod(t, bs)
return q_ + (1 if r_ else 0)
"""
)
BODIES["admit"] = (
    CHECKS
    + """
fb = _int("free_blocks", free_blocks, 0)
p = _int("prompt_tokens", prompt_tokens, 0)
o = _int("expected_output_tokens", expected_output_tokens, 0)
bs = _int("block_size", block_size, 1)
need = (p + o + bs - 1) // bs
return need <= fb
"""
)
BODIES["prefix_cache_savings"] = (
    CHECKS
    + """
p = _int("prefix_tokens", prefix_tokens, 0)
r = _int("requests", requests, 1)
bs = _int("block_size", block_size, 1)
f = _real("flops_per_token", flops_per_token, 0, strict=True)
shared_tokens = p - p % bs
blocks = (shared_tokens // bs) * (r - 1)
return blocks, float(shared_tokens * f * (r - 1))
"""
)
BODIES["preemption"] = (
    CHECKS
    + """
t = _int("tokens", tokens, 0)
per = _real("kv_bytes_per_token", kv_bytes_per_token, 0, strict=True)
gbs = _real("link_gbs", link_gbs, 0, strict=True)
rate = _real("prefill_tokens_per_s", prefill_tokens_per_s, 0, strict=True)
costs = {"swap": 2 * t * per / (gbs * 1e9), "recompute": t / rate}
if costs["recompute"] <= costs["swap"]:
    return "recompute", costs["recompute"]
return "swap", costs["swap"]
"""
)
BODIES["min_tp_degree"] = (
    CHECKS
    + """
w = _real("weight_bytes", weight_bytes, 0, strict=True)
kv = _real("kv_bytes", kv_bytes, 0)
mem = _real("memory_bytes", memory_bytes, 0, strict=True)
frac = _real("usable_fraction", usable_fraction, 0, strict=True, hi=1)
fits = [n for n in (1, 2, 4, 8) if (w + kv) / n <= frac * mem]
return fits[0] if fits else None
"""
)
BODIES["allreduce_s"] = (
    CHECKS
    + """
m = _real("message_bytes", message_bytes, 0, strict=True)
g = _int("n", n, 1)
link = _real("link_gbs", link_gbs, 0, strict=True)
lat = _real("step_latency_s", step_latency_s, 0)
if g == 1:
    return 0.0
steps = 2 * (g - 1)
return steps * (m / g) / (link * 1e9) + steps * lat
"""
)
BODIES["tp_tpot"] = (
    CHECKS
    + """
w = _real("weight_bytes", weight_bytes, 0, strict=True)
kv = _real("kv_bytes", kv_bytes, 0)
g = _int("n", n, 1)
layers = _int("n_layers", n_layers, 1)
bw = _real("bandwidth_gbs", bandwidth_gbs, 0, strict=True)
comm = allreduce_s(message_bytes, g, link_gbs, step_latency_s)
return (w + kv) / g / (bw * 1e9) + 2 * layers * comm
"""
)
BODIES["allreduce_exposed_batch"] = (
    CHECKS
    + """
w = _real("weight_bytes", weight_bytes, 0, strict=True)
g = _int("n", n, 1)
layers = _int("n_layers", n_layers, 1)
hid = _int("hidden", hidden, 1)
ab = _real("act_bytes", act_bytes, 0, strict=True)
bw = _real("bandwidth_gbs", bandwidth_gbs, 0, strict=True)
link = _real("link_gbs", link_gbs, 0, strict=True)
lat = _real("step_latency_s", step_latency_s, 0)
if g == 1:
    return None
weights_s = w / g / (bw * 1e9)
def comm(b):
    return 2 * layers * (2 * (g - 1) / g * b * hid * ab / (link * 1e9) + 2 * (g - 1) * lat)
if comm(1) >= weights_s:
    return 1
hi = 2
while comm(hi) < weights_s:
    hi *= 2
lo = hi // 2  # comm(lo) < weights_s <= comm(hi)
while hi - lo > 1:
    mid = (lo + hi) // 2
    if comm(mid) >= weights_s:
        hi = mid
    else:
        lo = mid
return hi
"""
)
BODIES["moe_params"] = (
    CHECKS
    + """
s = _int("shared_params", shared_params, 0)
e = _int("expert_params", expert_params, 1)
ne = _int("n_experts", n_experts, 1)
k = _int("top_k", top_k, 1)
if k > ne:
    raise ValueError("top_k cannot exceed n_experts")
return (s + e * ne, s + e * k)
"""
)
BODIES["experts_touched"] = (
    CHECKS
    + """
ne = _int("n_experts", n_experts, 1)
k = _int("top_k", top_k, 1)
b = _int("batch", batch, 0)
if k > ne:
    raise ValueError("top_k cannot exceed n_experts")
miss = (ne - k) / ne
return ne - ne * miss ** b
"""
)
BODIES["moe_crossover_batch"] = (
    CHECKS
    + """
resident, active = moe_params(shared_params, expert_params, n_experts, top_k)
bpp = _real("bytes_per_param", bytes_per_param, 0, strict=True)
rg = _real("ridge", ridge, 0, strict=True)
def intensity(b):
    weights = shared_params + experts_touched(n_experts, top_k, b) * expert_params
    return 2 * b * active / (bpp * weights)
if intensity(1 << 20) < rg:
    return None
b = 1
while intensity(b) < rg:
    b *= 2
lo = b // 2
while lo + 1 < b:
    mid = (lo + b) // 2
    if intensity(mid) >= rg:
        b = mid
    else:
        lo = mid
return b
"""
)
BODIES["expected_tokens"] = (
    CHECKS
    + """
a = _real("acceptance", acceptance, 0, hi=1)
kk = _int("k", k, 0)
return float(sum(a ** i for i in range(kk + 1))) if a == 1 else (1 - a ** (kk + 1)) / (1 - a)
"""
)
BODIES["spec_speedup"] = (
    CHECKS
    + """
c = _real("draft_cost", draft_cost, 0)
tokens = expected_tokens(acceptance, k)
return tokens / (1 + c * k)
"""
)
BODIES["best_draft_length"] = (
    CHECKS
    + """
km = _int("k_max", k_max, 0)
values = [spec_speedup(acceptance, kk, draft_cost) for kk in range(km + 1)]
return int(values.index(max(values)))
"""
)
BODIES["decode_tpot"] = (
    CHECKS
    + """
r = _real("rate", rate, 0)
o = _int("output_tokens", output_tokens, 1)
b = _real("base_s", base_s, 0, strict=True)
ps = _real("per_seq_s", per_seq_s, 0)
load = ps * r * o
if load >= 1:
    return float("inf")
return b / (1 - load)
"""
)
BODIES["arrival_times"] = (
    CHECKS
    + """
r = _real("rate", rate, 0, strict=True)
count = _int("n", n, 0)
sd = _int("seed", seed, 0)
generator = np.random.default_rng(sd)
return np.cumsum(generator.exponential(1.0 / r, size=count)).tolist()
"""
)
BODIES["ttfts"] = (
    CHECKS
    + """
pf = _real("prefill_s", prefill_s, 0, strict=True)
if not isinstance(arrivals, (list, tuple)):
    raise TypeError("arrivals should be a list")
times = [_real("arrival", t, 0) for t in arrivals]
if any(b < a for a, b in zip(times, times[1:])):
    raise ValueError("arrivals must be sorted")
result = []
busy_until = 0.0
for t in times:
    done = max(t, busy_until) + pf
    result.append(done - t)
    busy_until = done
return result
"""
)
BODIES["p99"] = (
    CHECKS
    + """
if not isinstance(values, (list, tuple)):
    raise TypeError("values should be a list")
if len(values) == 0:
    raise ValueError("no values")
xs = sorted(_real("value", v) for v in values)
rank = (99 * len(xs) + 99) // 100
return xs[rank - 1]
"""
)
BODIES["goodput"] = (
    CHECKS
    + """
if not isinstance(engine, dict):
    raise TypeError("engine should be a dict")
for key in ("prefill_s", "output_tokens", "base_s", "per_seq_s"):
    if key not in engine:
        raise ValueError(f"engine has no {key!r}")
if not isinstance(rates, (list, tuple)):
    raise TypeError("rates should be a list")
t_slo = _real("ttft_slo_s", ttft_slo_s, 0, strict=True)
p_slo = _real("tpot_slo_s", tpot_slo_s, 0, strict=True)
ok = []
for r in rates:
    r = _real("rate", r, 0, strict=True)
    if decode_tpot(r, engine["output_tokens"], engine["base_s"], engine["per_seq_s"]) > p_slo:
        continue
    waits = ttfts(arrival_times(r, n, seed), engine["prefill_s"])
    if waits and p99(waits) > t_slo:
        continue
    ok.append(r)
return max(ok, default=0.0)
"""
)


def another_style() -> str:
    """The released exercise with every stub filled from BODIES."""
    text = (ROOT / "exercises" / M10 / f"{M10}.py").read_text()
    for name, body in BODIES.items():
        stub = f'    raise NotImplementedError("{name}: implement this (see the docstring)")'
        assert text.count(stub) == 1, f"{name}: the release's stub is not where it was"
        lines = [("    " + line) if line.strip() else "" for line in body.strip("\n").split("\n")]
        text = text.replace(stub, "\n".join(lines))
    assert "NotImplementedError(" not in text.replace("raise NotImplementedError` compiles", "")
    return text


@pytest.mark.slow
@pytest.mark.parametrize("identity", ["another-style-1", "another-style-2"])
def test_another_style_keeps_every_point(identity: str, tmp_path: Path) -> None:
    (tmp_path / M10).mkdir()
    (tmp_path / M10 / f"{M10}.py").write_text(another_style(), encoding="utf-8")
    res = run_assignment(ROOT, M10, tmp_path, metrics=tmp_path / "none.json", identity=identity)
    assert res.error is None and res.tests, res.error
    lost = [(t.name, t.feedback) for t in res.tests if t.score < t.max_score]
    assert not lost, lost
    assert sum(t.max_score for t in res.tests) == 63
