"""How a launch's memory accesses meet the hardware: warp requests, sectors, bank conflicts.

The model behind `grader profile` and the memory lessons' hidden tests. It takes the accesses a
simulated launch made (`grader.simt.memtrace` records them: which thread, which line of the
kernel, which array, the byte offset, the item size, load, store or atomic) and groups them as
the hardware does:

* a **warp** is 32 consecutive linear thread ids of a block (``threadIdx.x`` fastest);
* one **request** is the warp's lanes' accesses made at the same site (line, array, space,
  operation) the same time: each thread's n-th access at a site meets its warp's other lanes'
  n-th access there. Lanes that made no such access are inactive (a divergent request);
* a global request moves every distinct **32-byte sector** that holds a byte one of its lanes
  asked for (array bases 256-byte aligned, as ``cudaMalloc`` gives). Its ideal is the distinct
  bytes asked, rounded up to whole sectors: 4 for 32 consecutive float32s, 1 for a broadcast;
* a shared request is served in **wavefronts**: 32 banks of 4-byte words, lanes reading the same
  word share it (a broadcast), and distinct words in one bank are served one after another. An
  access wider than 4 bytes is split over several phases of the warp (16 lanes a phase for
  8-byte items, 8 for 16-byte ones), each at least one wavefront. The *ways* of a request are
  its worst bank's distinct words in one phase: 1 is conflict-free, 32 a column of an unpadded
  32 x 32 float32 tile.

Everything here is plain arithmetic on integers: the same accesses give the same figures on
every machine. The figures and their Nsight Compute counterparts are listed in
docs/MEMORY_MODEL.md. A profile crosses the sandbox as plain data (`LaunchProfile.to_plain`) and
is checked on the way in (`LaunchProfile.from_plain`): its sizes are bounded, its counts
consistent.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from grader.core.errors import SubmissionError

VERSION = 2  # 2: requests per dynamic instance, split items, serialised atomics
WARP = 32
SECTOR_BYTES = 32
BANKS = 32
BANK_BYTES = 4
SHARED_PHASE_BYTES = BANKS * BANK_BYTES  # what one wavefront can serve without a conflict

GLOBAL, SHARED = "global", "shared"
LOAD, STORE, ATOMIC = "load", "store", "atomic"
SPACES, OPS = (GLOBAL, SHARED), (LOAD, STORE, ATOMIC)

MAX_SITES = 256  # sites in one profile: a kernel has a few dozen lines that touch memory
MAX_ARRAYS = 64


class ProfileError(SubmissionError):
    """A profile that is not one this model could have produced (the trusted side's check):
    only a tampered kernel worker sends one. Not a ValueError, so that no test's
    ``pytest.raises(ValueError)`` passes on it."""


@dataclass(frozen=True)
class SiteKey:
    """Where an access comes from: the kernel's line, the array, its memory, the operation."""

    line: int
    array: str
    space: str
    op: str
    itemsize: int  # bytes one lane moves in one request (`access_unit` of the item)
    item: int = 0  # bytes of the array's element (0: `itemsize`); a multiple of `itemsize`

    @property
    def element(self) -> int:
        return self.item or self.itemsize


def access_unit(itemsize: int, kind: str, fields: bool) -> int:
    """Bytes one load or store instruction moves for an element of this dtype, as Numba
    compiles it (checked against the SASS by tests/unit/simt/test_item_sizes.py): a complex
    number as its two halves (two ``LDG.E.64`` for complex128), a record byte by byte, any
    other element whole."""
    if fields:
        return 1
    if kind == "c":
        return max(1, itemsize // 2)
    return itemsize


@dataclass(frozen=True)
class Site:
    """The requests of one access site, summed over the launch."""

    line: int  # the line of the graded kernel's text; `where` says it as the student's
    array: str
    space: str
    op: str
    itemsize: int
    requests: int
    lanes: int  # active lanes over all requests: the accesses the threads made
    sectors: int  # global: sectors moved by all its requests (0 for shared)
    ideal_sectors: int
    min_sectors: int  # per request
    max_sectors: int
    wavefronts: int  # shared: wavefronts of all its requests (0 for global)
    ideal_wavefronts: int
    max_ways: int  # shared: worst bank-conflict ways of one request (1: none; 0 for global)
    divergent: int  # requests with fewer active lanes than their warp has threads
    item: int  # bytes of the element; `itemsize` (a request's bytes per lane) divides it
    serialised: int  # atomics: lanes that waited behind another lane at the same address
    where: str = ""

    @property
    def efficiency(self) -> float:
        """Ideal over actual: sectors for global memory, wavefronts for shared (1.0 is ideal)."""
        if self.space == GLOBAL:
            return self.ideal_sectors / self.sectors if self.sectors else 1.0
        return self.ideal_wavefronts / self.wavefronts if self.wavefronts else 1.0

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0

    @property
    def parts(self) -> int:
        """Requests per element access: 2 for a complex number (Numba moves its halves)."""
        return self.item // self.itemsize

    @property
    def accesses(self) -> int:
        """Element accesses the threads made here (lanes over the parts of each element)."""
        return self.lanes // self.parts

    @property
    def bank_conflicts(self) -> int:
        """Shared: wavefronts beyond the ideal (Nsight's ``l1tex__data_bank_conflicts``)."""
        return self.wavefronts - self.ideal_wavefronts

    @property
    def transactions(self) -> int:
        """Atomics: requests plus the serialised lanes (one transaction per lane that shares
        its address with another lane of its request); other sites: the requests."""
        return self.requests + self.serialised


@dataclass(frozen=True)
class ArrayTraffic:
    """One array's traffic over the launch."""

    name: str
    space: str
    itemsize: int
    elements: int  # the array's size
    loads: int  # element accesses by the threads (a complex number read whole counts once)
    stores: int
    atomics: int
    distinct_loaded: int  # distinct elements read at least once (atomics count as both)
    distinct_stored: int
    load_sectors: int  # global only: sectors moved by its loads
    store_sectors: int


@dataclass(frozen=True)
class LaunchProfile:
    """What one simulated launch did to memory, per site and per array."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    sites: tuple[Site, ...]
    arrays: tuple[ArrayTraffic, ...]
    barriers: int  # barrier releases over all blocks
    min_block_barriers: int  # the fewest barriers any block passed
    version: int = VERSION

    @property
    def blocks(self) -> int:
        return math.prod(self.grid)

    def where(
        self, space: str | None = None, op: str | None = None, array: str | None = None
    ) -> tuple[Site, ...]:
        """The sites of one space, operation and array (None: any)."""
        return tuple(
            s
            for s in self.sites
            if (space is None or s.space == space)
            and (op is None or s.op == op)
            and (array is None or s.array == array)
        )

    def array(self, name: str) -> ArrayTraffic | None:
        return next((a for a in self.arrays if a.name == name), None)

    def total(self, attribute: str, space: str | None = None, op: str | None = None) -> int:
        return sum(getattr(s, attribute) for s in self.where(space, op))

    @property
    def global_accesses(self) -> int:
        """Every element access the kernel made of global memory: loads, stores and atomics of
        every array (the budget of global traffic the memory lessons grade)."""
        return sum(a.loads + a.stores + a.atomics for a in self.arrays if a.space == GLOBAL)

    @property
    def global_requests(self) -> int:
        """Warp requests of global memory, every operation (Numba's split items counted as
        the instructions it issues)."""
        return self.total("requests", GLOBAL)

    def bank_conflicts(self, op: str | None = None) -> int:
        """Shared-memory wavefronts beyond the ideal, of loads, stores or atomics (None: all)."""
        return self.total("bank_conflicts", SHARED, op)

    def max_ways(self, op: str | None = None) -> int:
        """The worst bank conflict of one shared request of `op` (None: any); 0 without one."""
        return max((s.max_ways for s in self.where(SHARED, op)), default=0)

    @property
    def serialised(self) -> int:
        """Atomic lanes that waited behind another lane at the same address, over the launch."""
        return self.total("serialised")

    @property
    def global_bytes(self) -> int:
        """Bytes moved between the SMs and global memory (sectors x 32): loads, stores, atomics."""
        return SECTOR_BYTES * self.total("sectors", GLOBAL)

    def to_plain(self) -> dict:
        """Plain data for the wire (`grader.sandbox.wire`)."""
        return asdict(self)

    @classmethod
    def from_plain(cls, data: Any) -> LaunchProfile:
        """The profile `data` describes, checked: a ProfileError for anything else."""
        if not isinstance(data, dict) or data.get("version") != VERSION:
            raise ProfileError("not a memory profile of this version")
        try:
            sites = data["sites"]
            arrays = data["arrays"]
            if not (isinstance(sites, (list, tuple)) and isinstance(arrays, (list, tuple))):
                raise ProfileError("sites and arrays must be lists")
            if len(sites) > MAX_SITES or len(arrays) > MAX_ARRAYS:
                raise ProfileError("more sites or arrays than a kernel has")
            profile = cls(
                grid=_dims(data["grid"]),
                block=_dims(data["block"]),
                sites=tuple(_record(Site, s) for s in sites),
                arrays=tuple(_record(ArrayTraffic, a) for a in arrays),
                barriers=_count(data["barriers"]),
                min_block_barriers=_count(data["min_block_barriers"]),
            )
        except (KeyError, TypeError) as exc:
            raise ProfileError(f"a malformed memory profile ({exc})") from None
        _check(profile)
        return profile


def _dims(value: Any) -> tuple[int, int, int]:
    if not (isinstance(value, (list, tuple)) and len(value) == 3):
        raise ProfileError("launch dimensions must be three integers")
    x, y, z = (_count(v) for v in value)
    return (x, y, z)


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ProfileError(f"a count that is not a non-negative integer: {value!r}")
    return value


def _record(cls: type, data: Any) -> Any:
    if not isinstance(data, dict) or set(data) != {f.name for f in fields(cls)}:
        raise ProfileError(f"a {cls.__name__} with the wrong fields")
    values = {}
    for f in fields(cls):
        v = data[f.name]
        if f.type == "str":
            if not isinstance(v, str) or len(v) > 200:
                raise ProfileError(f"{cls.__name__}.{f.name} must be a short string")
        else:
            v = _count(v)
        values[f.name] = v
    return cls(**values)


def _check(p: LaunchProfile) -> None:
    """Consistency a genuine profile always has (a forged one rarely keeps)."""
    for s in p.sites:
        if s.space not in SPACES or s.op not in OPS or s.itemsize < 1 or s.item % s.itemsize:
            raise ProfileError(f"site {s.array!r}: an unknown space, operation or item size")
        if s.serialised > (s.lanes - s.requests if s.op == ATOMIC else 0):
            raise ProfileError(f"site {s.array!r}: more serialised lanes than lanes")
        if s.requests < 1 or not s.requests <= s.lanes <= WARP * s.requests:
            raise ProfileError(f"site {s.array!r}: lanes and requests do not agree")
        if s.space == GLOBAL and not (
            s.requests <= s.sectors
            and s.min_sectors <= s.max_sectors
            and s.min_sectors * s.requests <= s.sectors <= s.max_sectors * s.requests
            and s.ideal_sectors <= s.sectors
        ):
            raise ProfileError(f"site {s.array!r}: sector counts that do not add up")
        if s.space == SHARED and not (
            s.ideal_wavefronts <= s.wavefronts and 1 <= s.max_ways <= WARP
        ):
            raise ProfileError(f"site {s.array!r}: wavefront counts that do not add up")
    if p.min_block_barriers * p.blocks > p.barriers:
        raise ProfileError("barrier counts that do not add up")


# ---- the model: accesses -> requests -> sites


def sectors(offsets: Iterable[int], itemsize: int) -> int:
    """Distinct 32-byte sectors holding the bytes of items of `itemsize` bytes at `offsets`
    (bytes from a 256-byte-aligned base): what one global request moves."""
    touched: set[int] = set()
    for off in offsets:
        first, last = off // SECTOR_BYTES, (off + itemsize - 1) // SECTOR_BYTES
        touched.update(range(first, last + 1))
    return len(touched)


def ideal_sectors(offsets: Iterable[int], itemsize: int, element: int = 0) -> int:
    """The fewest sectors the distinct elements asked for could fill (items never overlap
    unless they are the same item). For one part of a split element (`element` bytes moved
    `itemsize` at a time, a complex number's half) the ideal is its whole elements', never
    more than the sectors the part touches: a kernel cannot do better than Numba's halves."""
    offsets = list(offsets)
    whole = -(-len(set(offsets)) * (element or itemsize) // SECTOR_BYTES)
    return min(whole, sectors(offsets, itemsize))


def serialised(offsets: Sequence[int]) -> int:
    """Lanes of one atomic request that wait behind another lane at the same address: the
    hardware applies same-address atomics one lane at a time."""
    return len(offsets) - len(set(offsets))


def wavefronts(lane_offsets: Mapping[int, int], itemsize: int) -> tuple[int, int, int]:
    """(wavefronts, ideal wavefronts, worst ways) of one shared request: `lane_offsets` maps
    each active lane to its byte offset in the shared array."""
    lanes_per_phase = max(1, min(WARP, SHARED_PHASE_BYTES // max(itemsize, BANK_BYTES)))
    words_per_item = max(1, -(-itemsize // BANK_BYTES))
    phases: dict[int, set[int]] = {}
    for lane, off in lane_offsets.items():
        words = phases.setdefault(lane // lanes_per_phase, set())
        first = off // BANK_BYTES
        words.update(range(first, first + words_per_item))
    total, worst = 0, 0
    for words in phases.values():
        per_bank: dict[int, int] = {}
        for w in words:
            per_bank[w % BANKS] = per_bank.get(w % BANKS, 0) + 1
        ways = max(per_bank.values())
        total += ways
        worst = max(worst, ways)
    return total, len(phases), worst


def summarise(
    grid: Sequence[int],
    block: Sequence[int],
    keys: Sequence[SiteKey],
    accesses: Sequence[tuple[int, int, int, int, int]],
    arrays: Mapping[str, tuple[str, int, int]],
    barriers: Mapping[int, int],
) -> LaunchProfile:
    """The profile of a launch.

    `accesses` are ``(block, thread, site, offset, instance)`` in the order the threads made
    them (block and thread as linear ids, site an index into `keys`, offset in bytes from the
    array's base, instance the dynamic instance of the instruction: equal for lanes of one warp
    that made the access in the same iteration of every loop around it); `arrays` maps each
    array's name to ``(space, itemsize, elements)``; `barriers` maps a block's linear id to the
    barriers it passed. The grouping is `sectors`, `ideal_sectors` and
    `wavefronts` applied to every request, done with NumPy over all of them at once (a profile
    of 100,000 accesses takes milliseconds, not a second).
    """
    import numpy as np  # lazy: the reports read profiles on machines that only render them

    gx, gy, gz = (*(int(v) for v in grid), 1, 1)[:3]
    bx, by, bz = (*(int(v) for v in block), 1, 1)[:3]
    grid3, block3 = (gx, gy, gz), (bx, by, bz)
    nblocks = math.prod(grid3)
    counts = [barriers.get(b, 0) for b in range(nblocks)]
    names = list(arrays)
    found = _requests(np, math.prod(block3), keys, np.asarray(accesses, np.int64).reshape(-1, 5))
    sites = tuple(
        Site(
            line=k.line,
            array=k.array,
            space=k.space,
            op=k.op,
            itemsize=k.itemsize,
            item=k.element,
            **sums,  # type: ignore[arg-type]  # counts only
        )
        for k, sums in zip(keys, found.site_sums(np, len(keys)), strict=True)
        if sums["requests"]
    )
    traffic = tuple(
        ArrayTraffic(
            name=name,
            space=space,
            itemsize=itemsize,
            elements=elements,
            **found.array_sums(np, keys, name),
        )
        for name, (space, itemsize, elements) in ((n, arrays[n]) for n in names)
    )
    return LaunchProfile(
        grid=grid3,
        block=block3,
        sites=tuple(sorted(sites, key=lambda s: (s.line, OPS.index(s.op), s.space, s.array))),
        arrays=traffic,
        barriers=sum(counts),
        min_block_barriers=min(counts) if counts else 0,
    )


_SHIFT = 40  # a byte offset or word index fits below 2**40 in the keys packed for np.unique


@dataclass
class _Requests:
    """Every access sorted into its request (`req`), with each request's figures."""

    site: Any  # per access (sorted), and per request (`req_site`)
    off: Any
    req: Any
    req_site: Any
    lanes: Any  # per request
    divergent: Any
    sectors: Any
    ideal: Any
    wavefronts: Any
    ideal_wavefronts: Any
    ways: Any
    serialised: Any

    def site_sums(self, np: Any, n: int) -> list[dict[str, int]]:
        """Each site's sums over its requests (min and max sectors among them too)."""

        def per_site(values: Any) -> list[int]:
            return [int(v) for v in np.bincount(self.req_site, weights=values, minlength=n)]

        low = np.full(n, np.iinfo(np.int64).max)
        high = np.zeros(n, np.int64)
        np.minimum.at(low, self.req_site, self.sectors)
        np.maximum.at(high, self.req_site, self.sectors)
        ways = np.zeros(n, np.int64)
        np.maximum.at(ways, self.req_site, self.ways)
        columns = {
            "requests": per_site(np.ones_like(self.lanes)),
            "lanes": per_site(self.lanes),
            "sectors": per_site(self.sectors),
            "ideal_sectors": per_site(self.ideal),
            "wavefronts": per_site(self.wavefronts),
            "ideal_wavefronts": per_site(self.ideal_wavefronts),
            "divergent": per_site(self.divergent),
            "serialised": per_site(self.serialised),
        }
        out = []
        for i in range(n):
            sums = {k: v[i] for k, v in columns.items()}
            sums["min_sectors"] = int(low[i]) if sums["requests"] else 0
            sums["max_sectors"] = int(high[i])
            sums["max_ways"] = int(ways[i])
            out.append(sums)
        return out

    def array_sums(self, np: Any, keys: Sequence[SiteKey], name: str) -> dict[str, int]:
        """One array's accesses, distinct elements and sectors, over the sites that name it."""
        mine = [i for i, k in enumerate(keys) if k.array == name]
        by_op: dict[str, dict[str, int]] = {op: {"lanes": 0, "sectors": 0} for op in OPS}
        read, written = set(), set()
        for i in mine:
            k = keys[i]
            in_site = self.req_site == i
            by_op[k.op]["lanes"] += int(self.lanes[in_site].sum()) * k.itemsize // k.element
            by_op[k.op]["sectors"] += int(self.sectors[in_site].sum())
            elements = np.unique(self.off[self.site == i] // k.element).tolist()
            if k.op in (LOAD, ATOMIC):
                read.update(elements)
            if k.op in (STORE, ATOMIC):
                written.update(elements)
        atomic = by_op[ATOMIC]["sectors"]
        return {
            "loads": by_op[LOAD]["lanes"],
            "stores": by_op[STORE]["lanes"],
            "atomics": by_op[ATOMIC]["lanes"],
            "distinct_loaded": len(read),
            "distinct_stored": len(written),
            "load_sectors": by_op[LOAD]["sectors"] + atomic,
            "store_sectors": by_op[STORE]["sectors"] + atomic,
        }


def _requests(np: Any, threads: int, keys: Sequence[SiteKey], acc: Any) -> _Requests:
    """Group `acc` (rows of block, thread, site, offset, instance) into requests and count each
    one: a request is the lanes of one warp at one site in one dynamic instance (and, should a
    thread repeat a site within one instance, its n-th time there)."""
    n = len(acc)
    blk, thread, site, off, inst = (
        (acc[:, i] for i in range(5)) if n else (np.zeros(0, np.int64),) * 5
    )
    # order-preserving rank within (block, thread, site, instance): 0 unless a thread repeats
    order = np.lexsort((np.arange(n), inst, site, thread, blk))
    starts = _starts(np, blk[order], thread[order], site[order], inst[order])
    nth = np.empty(n, np.int64)
    nth[order] = np.arange(n) - np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    warp, lane = thread // WARP, thread % WARP
    order = np.lexsort((lane, nth, inst, warp, blk, site))
    site, blk, warp, inst, nth, lane, off = (
        x[order] for x in (site, blk, warp, inst, nth, lane, off)
    )
    first = _starts(np, site, blk, warp, inst, nth)
    req = np.cumsum(first) - 1
    count = int(req[-1]) + 1 if n else 0
    req_site, req_warp = site[first], warp[first]
    itemsize = np.array([k.itemsize for k in keys] or [1], np.int64)
    element = np.array([k.element for k in keys] or [1], np.int64)
    shared = np.array([k.space == SHARED for k in keys] or [False])
    atomic = np.array([k.op == ATOMIC for k in keys] or [False])
    lanes = np.bincount(req, minlength=count)
    divergent = (lanes < np.minimum(WARP, threads - req_warp * WARP)).astype(np.int64)
    distinct = np.bincount(np.unique((req << _SHIFT) | off) >> _SHIFT, minlength=count)
    serialised = np.where(atomic[req_site], lanes - distinct, 0)
    on_global = ~shared[site]
    sectors, ideal = _global_counts(
        np, count, req[on_global], off[on_global], itemsize, site[on_global], element, distinct
    )
    ideal = np.minimum(ideal, sectors)
    ideal[shared[req_site]] = 0
    waves, ideal_waves, ways = _shared_counts(
        np, count, req[~on_global], off[~on_global], itemsize[site[~on_global]], lane[~on_global]
    )
    return _Requests(
        site,
        off,
        req,
        req_site,
        lanes,
        divergent,
        sectors,
        ideal,
        waves,
        ideal_waves,
        ways,
        serialised,
    )


def _global_counts(
    np: Any,
    count: int,
    req: Any,
    off: Any,
    itemsize: Any,
    site: Any,
    element: Any,
    asked: Any,
) -> tuple[Any, Any]:
    """Per request: the distinct sectors its lanes touched, and the ideal for the elements
    asked (`asked`: each request's distinct offsets; `sectors` and `ideal_sectors` of every
    request at once)."""
    sectors = np.zeros(count, np.int64)
    ideal = np.zeros(count, np.int64)
    if not len(req):
        return sectors, ideal
    item = itemsize[site]
    low, high = off // SECTOR_BYTES, (off + item - 1) // SECTOR_BYTES
    spans = [low + k for k in range(int((high - low).max()) + 1)]
    cand = np.concatenate([(req << _SHIFT) | s for s in spans])
    valid = np.concatenate([s <= high for s in spans])
    sectors = np.bincount(np.unique(cand[valid]) >> _SHIFT, minlength=count)
    first = np.unique(req, return_index=True)
    per_req = np.ones(count, np.int64)
    per_req[first[0]] = element[site[first[1]]]
    return sectors, -(-asked * per_req // SECTOR_BYTES)


def _shared_counts(
    np: Any, count: int, req: Any, off: Any, item: Any, lane: Any
) -> tuple[Any, Any, Any]:
    """Per request: wavefronts, the ideal wavefronts (its phases) and the worst bank's ways
    (`wavefronts` of every request at once)."""
    waves = np.zeros(count, np.int64)
    ideal = np.zeros(count, np.int64)
    ways = np.zeros(count, np.int64)
    if not len(req):
        return waves, ideal, ways
    per_phase = np.clip(SHARED_PHASE_BYTES // np.maximum(item, BANK_BYTES), 1, WARP)
    group = (req << 6) | (lane // per_phase)  # phases per request < 64
    words = np.maximum(1, -(-item // BANK_BYTES))
    cand = np.concatenate(
        [(group << _SHIFT) | (off // BANK_BYTES + j) for j in range(int(words.max()))]
    )
    valid = np.concatenate([j < words for j in range(int(words.max()))])
    distinct = np.unique(cand[valid])
    word = distinct & ((1 << _SHIFT) - 1)
    keyed, per_bank = np.unique(((distinct >> _SHIFT) << 5) | (word % BANKS), return_counts=True)
    groups, where = np.unique(keyed >> 5, return_index=True)
    phase_ways = np.maximum.reduceat(per_bank, where)
    owner = groups >> 6
    waves = np.bincount(owner, weights=phase_ways, minlength=count).astype(np.int64)
    ideal = np.bincount(owner, minlength=count)
    np.maximum.at(ways, owner, phase_ways)
    return waves, ideal, ways


def _starts(np: Any, *columns: Any) -> Any:
    """Where a run of equal rows of `columns` (sorted) starts."""
    starts = np.ones(len(columns[0]), bool)
    starts[1:] = False
    for c in columns:
        starts[1:] |= c[1:] != c[:-1]
    return starts


def with_places(
    profile: LaunchProfile, where: Mapping[int, str], names: Mapping[str, str]
) -> LaunchProfile:
    """The profile with each site's line said as the student's (`where`: kernel line -> text)
    and shared arrays renamed (`names`: recorded name -> the kernel's variable)."""
    return replace(
        profile,
        sites=tuple(
            replace(s, where=where.get(s.line, f"line {s.line}"), array=names.get(s.array, s.array))
            for s in profile.sites
        ),
        arrays=tuple(replace(a, name=names.get(a.name, a.name)) for a in profile.arrays),
    )
