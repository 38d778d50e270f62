"""The cut-stages bound for the max-load objective on identical devices whose op sets are contiguous, and host
devices beside them.

The *cut ops* ``s_0 < s_1 < ... < s_{r-1}`` are the ops comparable with all others (a residual block's add, a
layer norm's reductions): every other op lies in one *block*, before ``s_0``, between two consecutive cut ops, or
after ``s_{r-1}``. A device's op set ``S`` is contiguous (convex: no path leaves ``S`` and comes back; so is every
stage of a DAG-ordered placement of a forward graph), so either it holds no cut op and lies inside one block, or
it holds the cut ops ``s_f .. s_l`` and everything between them (its *hull*), parts of the two blocks beside the
hull, and no op before ``s_{f-1}`` or after ``s_{l+1}``. Then it receives every tensor of an op at or before
``s_{f-1}`` read inside the hull, and sends every tensor of an op of the hull read at or after ``s_{l+1}``
(Archer et al. eq. 3: each tensor paid once each way), ``c(f, l)`` in time; its parts of the two blocks beside
the hull pay at least the lines of :func:`.block_cuts.block_prices` at the work they hold, and a device inside a
block the least inputs and output of an op of it. The devices holding cut ops hold consecutive runs in order, and
the block between two runs is shared by the two devices beside it and the devices inside it: a max load ``T``
passes when a chain of at most ``k`` such devices covers the graph (:mod:`.cut_chain`). The bound is the least
``T`` that passes, by bisection between ``W / k`` and the best known max load (checked to pass there, else no
bound), stopped by its clock (every ``T`` ruled out is a bound). GPT-3's inner stages pay two residual tensors,
which ``W / k`` misses, and a split of an attention block its heads' slices: 2,044 ops onto 16 stages, 12.92, the
best split found (each device on its own, counting the blocks beside it as its own: 10.82).

Host devices (Tarnawski's CPUs beside the accelerators) pay no transfers; a host's hull costs its ops' host times,
and its parts of blocks at least the least host time of the accelerators' work they hold (:mod:`.host_prices`: each
op at its own host time, so an op faster on the host than on the accelerators lowers no other's price): each holds a
run of cut ops or a part of a block within ``T`` at those prices (:class:`.cut_chain.Hosts`), and the least ``T``
where ``k T`` and ``h`` hosts' most work within ``T`` reach ``W`` starts the bisection. On ResNet copies beside a
CPU 9 times slower (2,080 ops onto 16 accelerators) it proves the DP's 36.502 to 8e-7, where the capacity bound
stood at 32.80.

The cut ops in ``O(n + m)`` (one topological order: every op before ``v`` has a successor at or before it, every
op after has a predecessor at or after it). The tables hold only the runs ``f..l`` some chain under the max load
tried may hold: a hull computing at most it, the devices before the run holding the work before it and those after
the rest, whole devices each way (:meth:`.cut_chain.Frame.first_runs`). Near the least max load that passes those
are the runs ending near a multiple of it in work: 1,464 of them for 18,432 cut ops onto 4 accelerators and a host
0.1 % above it, where every run under it numbers 23 million. Their transfers by one sweep over the rows of a
difference table, ``O(m log m + r + runs)``; the blocks' prices one parametric minimum cut per hull point of each
distinct block; each bisection step over the states and runs that can end a chain (:func:`.cut_chain.fits`). A max
load whose runs number more than :data:`PAIRS` is not tried: the bisection starts below it.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..evaluate import Objective, Overlap
from ..graph import Graph, unique_pairs
from ..placement import PlacementClass
from ..problem import Problem
from ..structure import cut_ops
from . import one_or_cut
from .block_cuts import BlockPrices, block_prices, segments
from .cut_chain import Chain, Frame, Hosts, Runs, fits
from .host_prices import host_prices

PAIRS = 2_000_000  # runs of cut ops (f, l) a search's tables hold at most (about 100 bytes each while built)
SOLVE_PAIRS = 1_500_000  # runs of cut ops (f, l) a solve's bound on its answer holds at most (GPT-3 at 20k ops
# onto 16 stages, 0.9M runs: 0.3 s of CPU for the tables and prices, 0.03 s per bisection step, 20 steps)
SAFETY = 1e-9  # relative shave: the cost model sums the same numbers in another order
PRECISION = 1e-6  # relative width at which the bisection stops
GROWTH = 1.5  # the max loads whose runs the tables hold: W / k times GROWTH, then GROWTH times more
ANSWER_SECONDS = 2.0  # the clock of the bound on a solve's answer (its steps; the tables before are sized)


def applies(problem: Problem) -> str | None:
    """``None`` when :func:`cut_stages_bound` bounds ``problem``, else why not."""
    model = problem.cost_model()
    if model.objective is not Objective.MAX_LOAD or model.overlap is not Overlap.NONE:
        return "the cut-stages bound bounds a max load with transfers not overlapped"
    if problem.graph.backward.any():
        return "the cut-stages bound needs a forward graph (a training graph's devices hold two contiguous parts)"
    if problem.widens:
        return "the cut-stages bound does not divide a replicated stage's load"
    c = problem.cluster
    if not c.host.any():
        return one_or_cut.applies(problem.graph, c)
    if c.routed or len([grp for grp in c.homogeneous_groups() if not c.host[grp[0]]]) != 1:
        return "the cut-stages bound needs identical accelerators without routes (hosts beside them)"
    times = c.times(problem.graph)
    if not np.isfinite(times[:, ~c.host]).all():
        return "the cut-stages bound needs every op to run on the accelerators"
    return None


def first_load(work: float, k: int, hosts: int, host_work: Callable[[float], float]) -> float:
    """A max load below which ``k`` accelerators and ``hosts`` hosts cannot hold ``work``: each accelerator holds
    at most ``T`` of it, each host at most ``host_work(T)`` (increasing); by bisection, the end ruled out."""
    lo, hi = 0.0, work / k
    if hosts == 0 or work <= 0:
        return hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if k * mid + hosts * host_work(mid) < work else (lo, mid)
    return lo


def bounds_answer(problem: Problem, upper: float) -> bool:
    """Whether the bound applies to a solve's answer of max load ``upper``: to the problem's class (contiguous or
    DAG-ordered) and the problem, below a finite ``upper``."""
    return problem.placement_class() is not PlacementClass.ALL and not applies(problem) and math.isfinite(upper)


def answer_bound(problem: Problem, upper: float) -> float | None:
    """:func:`cut_stages_bound` for a solve's answer of max load ``upper`` where :func:`bounds_answer`, its tables
    holding at most :data:`SOLVE_PAIRS` runs of cut ops; else ``None``."""
    if not bounds_answer(problem, upper):
        return None
    return cut_stages_bound(problem, upper, SOLVE_PAIRS, ANSWER_SECONDS)[0]


@dataclass(frozen=True)
class CutStages:
    """The bound (``None``: none shown below the best max load), a note, and whether the bisection ended (else its
    clock stopped it: the bound is the least max load not ruled out by then)."""

    bound: float | None
    note: str
    finished: bool = True


def cut_stages_bound(problem: Problem, upper: float, most_pairs: int | None = None,
                     seconds: float = math.inf) -> tuple[float | None, str]:
    """The module's bound and a note (:func:`cut_stages_search`)."""
    found = cut_stages_search(problem, upper, most_pairs, seconds)
    return found.bound, found.note


def cut_stages_search(problem: Problem, upper: float, most_pairs: int | None = None,
                      seconds: float = math.inf, floor: float = 0.0, probe: float | None = None) -> CutStages:
    """The module's bound; ``None`` where it cannot be shown below ``upper`` (a max load some placement reaches), or
    no max load above the first one tried keeps the runs of cut ops some chain may hold within ``most_pairs``
    (:data:`PAIRS` by default). The tables are built for the runs under ``GROWTH`` times ``W / k`` first (or the
    most under ``most_pairs``), and for more (up to ``upper``) while the relaxation fails there (each failure a
    bound): a greedy ``upper`` 16 times ``W / k`` would cost 16 times the runs. The search stops ``seconds`` after
    the call began. ``floor`` is a bound known already: where the relaxation holds there, ``None`` at once (its bound
    would be lower); else it starts above it. ``probe`` (below ``upper``: a solve's start less its gap) is the first
    max load the bisection tries: ruled out, the start is proven within the gap in one step (where the bisection to
    :data:`PRECISION` takes twenty: 15 s on cnn-5000 onto 16 accelerators and a host at load 6), and the bisection
    above it, to its clock, only sharpens the bound (the search counts as finished)."""
    began = time.perf_counter()
    g, cluster = problem.graph, problem.cluster
    acc = int(np.flatnonzero(~cluster.host)[0])
    k, count = int((~cluster.host).sum()), int(cluster.host.sum())
    times = cluster.times(g)
    t = times[:, acc].astype(float)
    work = math.fsum(t.tolist())
    if g.n == 0 or k + count == 1 or not math.isfinite(upper):
        return CutStages(None, "nothing to bound")
    if floor >= work and work / k < floor:  # as below (the first load is at most W / k): before the tables' cost
        return CutStages(None, f"the bound so far {floor:.6g} is at least the graph's work {work:.6g}")
    budget = PAIRS if most_pairs is None else most_pairs
    cuts = cut_ops(g)
    r = len(cuts)
    scale = float(cluster.transfer_scale[acc])
    seg = segments(g, cuts)
    prices = block_prices(g, cuts, g.out_bytes * scale, t)
    before = np.concatenate([[0.0], np.cumsum(np.bincount(seg + 1, weights=t, minlength=2 * r + 1))])
    reach = _HostReach(seg, r, t, times[:, cluster.host].min(axis=1), before) if count else None
    hosts = (count, reach) if reach is not None else None
    host_work = reach.most if reach is not None else float
    frame = Frame(before[0:2 * r + 1:2], before[1:2 * r + 2:2], work, k, count, host_work)
    runs = _Runs(g, seg, r, t, scale, before, frame, prices, hosts)
    lo = first = first_load(work, k, count, host_work)  # every device's work (a host's at its prices), Lemma 3.3's
    if first < floor and floor >= work:  # one device holding the graph is a placement the relaxation admits: at most W
        return CutStages(None, f"the bound so far {floor:.6g} is at least the graph's work {work:.6g}")
    if first < floor < upper:  # beside a host whose memory binds: 315 in 30 s where the capacity bound was 1,614
        chain = runs.chain(floor, budget)
        if chain is not None and fits(chain, floor * (1 + SAFETY), k):
            return CutStages(None, f"{r} cut ops: the relaxation holds at the bound {floor:.6g} already")
        lo = floor if chain is not None else lo
    hi = min(upper, GROWTH * lo) if lo > 0 else upper
    while True:
        hi = runs.most_within(lo, hi, budget)
        chain = None if hi is None else runs.chain(hi, budget)
        if chain is None:
            note = f"{r} cut ops: more than {budget} runs of them some chain may hold above {lo:.6g}"
            return CutStages(lo * (1 - SAFETY), note, finished=False) if lo > first else CutStages(None, note)
        if fits(chain, hi * (1 + SAFETY), k):
            break
        if hi >= upper:  # the relaxation must hold at a reachable max load
            return CutStages(None, "declined: the relaxation does not hold at the best max load")
        lo, hi = hi, min(upper, GROWTH * hi)
        if time.perf_counter() - began > seconds:
            return CutStages(lo * (1 - SAFETY), f"{r} cut ops: stopped by its clock, {lo:.6g} ruled out",
                             finished=False)
    if lo == first and fits(chain, lo * (1 + SAFETY), k):
        return CutStages(lo, f"{r} cut ops: W / k")
    steps, proven = 0, False
    if probe is not None and lo < probe < hi:  # ruled out, the start is proven: the clock no longer leaves it unfinished
        proven = not fits(chain, probe * (1 + SAFETY), k)
        lo, hi, steps = (probe, hi, 1) if proven else (lo, probe, 1)
    while hi - lo > PRECISION * hi:
        if time.perf_counter() - began > seconds:
            return CutStages(lo * (1 - SAFETY), f"{r} cut ops: stopped by its clock after {steps} steps, {hi:.6g} "
                             "not ruled out", finished=proven)
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if fits(chain, mid * (1 + SAFETY), k) else (mid, hi)
        steps += 1
    return CutStages(lo * (1 - SAFETY), f"{r} cut ops: a chain of devices sharing the blocks between their runs")


class _Runs:
    """The runs ``f <= l`` of cut ops a chain under a max load ``T`` may hold: their hull computes at most ``T``,
    and the devices before and after them can hold the rest (:meth:`.cut_chain.Frame.first_runs`); with each
    one's hull's work and transfers' time, and the blocks' prices. ``hosts``: their count and what they reach
    (:class:`_HostReach`: the hulls' host times, the blocks' host prices)."""

    def __init__(self, g: Graph, seg: np.ndarray, r: int, t: np.ndarray, scale: float, before: np.ndarray,
                 frame: Frame, prices: BlockPrices, hosts: tuple[int, _HostReach] | None) -> None:
        self.g, self.seg, self.r, self.t, self.scale, self.before = g, seg, r, t, scale, before
        self.frame, self.prices, self.hosts = frame, prices, hosts
        self.rects = _rectangles(g, seg, r, scale)

    def rows(self, T: float) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray] | None]:
        """Per cut op ``f``, the first ``l`` of its runs and their count, on an accelerator and on a host (``None``
        without hosts): from the first that some chain holds (:meth:`.cut_chain.Frame.first_runs`) to the last whose
        hull from ``f`` computes at most ``T`` (takes a host at most ``T``; hulls grow with ``l``)."""
        T = T * (1 + SAFETY)
        on_acc, on_host = self.frame.first_runs(T)
        acc = (on_acc, np.maximum(self._last(T) - on_acc + 1, 0))
        if self.hosts is None:
            return acc, None
        return acc, (on_host, np.maximum(self.hosts[1].last(T) - on_host + 1, 0))

    def count(self, T: float) -> int:
        """How many runs :meth:`rows` holds."""
        return sum(int(width.sum()) for rows in self.rows(T) if rows is not None for width in rows[1:])

    def _last(self, T: float) -> np.ndarray:
        """Per cut op ``f``, the last cut op whose hull from ``f`` computes at most ``T``."""
        index, before = np.arange(self.r), self.before
        return np.searchsorted(before[2 * index + 2], before[2 * index + 1] + T, side="right") - 1

    def most_within(self, lo: float, hi: float, budget: int) -> float | None:
        """``hi`` if its runs number at most ``budget``, else the largest max load above ``lo`` (by bisection) whose
        runs do; ``None`` if none does. The runs grow with the max load."""
        if self.count(hi) <= budget:
            return hi
        ok, bad = lo, hi
        for _ in range(40):
            mid = 0.5 * (ok + bad)
            ok, bad = (mid, bad) if self.count(mid) <= budget else (ok, mid)
        return ok if ok > lo * (1 + PRECISION) else None

    def chain(self, T: float, budget: int | None) -> Chain | None:
        """The runs under ``T`` as a :class:`.cut_chain.Chain`; ``None`` past ``budget`` runs."""
        if budget is not None and self.count(T) > budget:
            return None
        acc, on_host = self.rows(T)
        f, l, starts = _pairs(*acc)
        before = self.before
        hull = before[2 * l + 2] - before[2 * f + 1]
        comm = _pair_sums(self.rects, self.r, acc[0], acc[1], starts)
        runs = Runs(starts, acc[0], hull + comm * (1 - SAFETY))
        if self.hosts is None or on_host is None:
            return Chain(runs, self.prices, self.frame)
        count, reach = self.hosts
        f, l, starts = _pairs(*on_host)
        host_runs = Runs(starts, on_host[0], reach.hull(f, l) * (1 - SAFETY))
        return Chain(runs, self.prices, self.frame, Hosts(count, reach.blocks, host_runs))


class _HostReach:
    """What a host holds within a time: ``blocks``, the host prices of each block (:mod:`.host_prices`); the host
    time of the ops before each segment (``host_before``, ops no host runs left out and counted in ``slow_before``)
    and their accelerator work (``before``)."""

    def __init__(self, seg: np.ndarray, r: int, t: np.ndarray, host_t: np.ndarray, before: np.ndarray) -> None:
        block = np.where(seg % 2 == 1, (seg + 1) // 2, -1)  # the ops of block b have segment 2b - 1
        self.r, self.before = r, before
        self.blocks = host_prices(block, r + 1, t, host_t)
        self.whole = host_prices(np.zeros(len(seg), dtype=np.int64), 1, t, host_t)
        slow = np.isinf(host_t)  # a hull holding one is no host's
        seg_host = np.bincount(seg + 1, weights=np.where(slow, 0.0, host_t), minlength=2 * r + 1)
        seg_slow = np.bincount(seg + 1, weights=slow.astype(float), minlength=2 * r + 1)
        self.host_before, self.slow_before = (np.concatenate([[0.0], np.cumsum(x)]) for x in (seg_host, seg_slow))

    def hull(self, f: np.ndarray, l: np.ndarray) -> np.ndarray:
        """The host time of the hulls of runs ``f..l`` (``inf`` holding an op no host runs)."""
        return np.where(self.slow_before[2 * l + 2] > self.slow_before[2 * f + 1], np.inf,
                        self.host_before[2 * l + 2] - self.host_before[2 * f + 1])

    def last(self, T: float) -> np.ndarray:
        """Per cut op ``f``, the last cut op whose hull from ``f`` takes a host at most ``T`` (hulls grow)."""
        index, before, slow = np.arange(self.r), self.host_before, self.slow_before
        within = np.searchsorted(before[2 * index + 2], before[2 * index + 1] + T, side="right") - 1
        runnable = np.searchsorted(slow[2 * index + 2], slow[2 * index + 1], side="right") - 1
        return np.minimum(within, runnable)

    def most(self, T: float) -> float:
        """The most accelerator work a host holds within ``T``: at most the cheapest work of the graph within it,
        and its op set is inside a block, or a hull within ``T`` and parts of the two blocks beside it."""
        inside = float(self.blocks.work_within(np.arange(self.r + 1), np.full(self.r + 1, T)).max(initial=0.0))
        index = np.arange(self.r)
        last = self.last(T)
        ok = last >= index
        hulls = self.before[2 * last[ok] + 2] - self.before[2 * index[ok] + 1]
        runs = float(hulls.max(initial=-math.inf)) + 2 * inside
        return min(float(self.whole.work_within(0, T)), max(inside, runs))


def _pairs(first: np.ndarray, width: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The runs ``f..l`` of rows ``first``, ``width`` (:meth:`_Runs.rows`) as arrays, and where each row starts."""
    total = int(width.sum())
    starts = np.concatenate([[0], np.cumsum(width)])
    f = np.repeat(np.arange(len(first)), width)
    l = np.repeat(first, width) + np.arange(total) - np.repeat(starts[:-1], width)
    return f, l, starts


Rects = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _rectangles(g: Graph, seg: np.ndarray, r: int, scale: float) -> Rects:
    """The transfers of the runs as rectangles ``(f0, f1, l0, l1, w)``: every run ``f..l`` with ``f0 <= f <= f1``
    and ``l0 <= l <= l1`` pays ``w`` (a producer's tensor each way): a device whose cut ops are ``f..l`` receives
    the tensors made at or before cut ``f - 1`` and read in the hull, and sends those made in the hull and read at
    or after cut ``l + 1``."""
    size = g.out_bytes * scale
    src, dst = g.src, g.dst
    keep = size[src] > 0
    src, dst = src[keep], dst[keep]
    pairs = unique_pairs(src, seg[dst])
    prev_seg = np.full(len(pairs), -(10 ** 9), dtype=np.int64)  # the producer's previous consumer segment
    same = np.zeros(len(pairs), dtype=bool)
    same[1:] = pairs[1:, 0] == pairs[:-1, 0]
    prev_seg[1:][same[1:]] = pairs[:-1, 1][same[1:]]
    p, cs = pairs[:, 0], pairs[:, 1]
    # received: f with seg(p) <= 2f - 2 and prev < 2f <= cs, for every l with 2l >= cs
    f_lo = np.maximum((seg[p] + 3) // 2, np.maximum(prev_seg // 2 + 1, 0))
    f_hi = np.minimum(cs // 2, r - 1)
    l0 = (cs + 1) // 2
    ok = (f_lo <= f_hi) & (l0 <= r - 1) & (cs >= 0)
    rects = [(f_lo[ok], f_hi[ok], l0[ok], np.full(int(ok.sum()), r - 1), size[p[ok]])]
    # sent: producers in a hull f..l (2f <= seg(p) <= 2l) read at or after cut l + 1 (2l + 2 <= last reader)
    last = np.full(g.n, -1, dtype=np.int64)
    np.maximum.at(last, src, seg[dst])
    sp = np.flatnonzero((last >= 0) & (seg >= 0))
    s_p, m_p = seg[sp], last[sp]
    l_lo = (s_p + 1) // 2
    l_end = np.minimum(m_p // 2 - 1, r - 1)
    ok = l_lo <= l_end
    rects.append((np.zeros(int(ok.sum()), np.int64), s_p[ok] // 2, l_lo[ok], l_end[ok], size[sp[ok]]))
    f0, f1, l0, l1, w = (np.concatenate(parts) for parts in zip(*rects))
    return f0, f1, l0, l1, w


def _pair_sums(rects: Rects, r: int, first: np.ndarray, width: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per run ``f..l`` (row ``f``, ``l`` from ``first[f]`` for ``width[f]`` runs, stored from ``starts[f]``), the
    sum of the rectangles holding it: a sweep over the rows, each rectangle's corners a difference over the columns
    added at its first row and taken back after its last, each row's runs read as a running sum from the columns
    already passed (``first`` never decreases). ``O(m log m + r + runs)``."""
    f0, f1, l0, l1, w = rects
    rows = np.concatenate([f0, f0, f1 + 1, f1 + 1])
    cols = np.concatenate([l0, l1 + 1, l0, l1 + 1])
    vals = np.concatenate([w, -w, -w, w])
    keep = rows < r
    order = np.argsort(rows[keep], kind="stable")
    rows, cols, vals = rows[keep][order], cols[keep][order], vals[keep][order]
    at_row = np.searchsorted(rows, np.arange(r + 1)).tolist()
    diff = np.zeros(r + 2)
    out = np.empty(int(starts[-1]))
    passed, below = 0, 0.0  # the columns before ``passed`` summed in ``below``
    firsts, widths, begins = first.tolist(), width.tolist(), starts.tolist()
    for f in range(r):
        a, b = at_row[f], at_row[f + 1]
        if b > a:
            c, v = cols[a:b], vals[a:b]
            np.add.at(diff, c, v)
            below += float(v[c < passed].sum())
        n = widths[f]
        if n:
            lo = firsts[f]
            below += float(diff[passed:lo].sum())
            passed = max(passed, lo)
            out[begins[f]:begins[f] + n] = below + np.cumsum(diff[lo:lo + n])
    return out
