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

Host devices (Tarnawski's CPUs beside the accelerators) pay no transfers and compute at least ``rho`` times the
accelerators' time of what they hold (the least ratio over the ops; hosts faster on some op are refused): each holds
a run of cut ops or a part of a block within ``T`` at those prices (:class:`.cut_chain.Hosts`), and ``W / (k + h /
rho)`` starts the bisection. On ResNet copies beside a CPU 9 times slower (2,080 ops onto 16 accelerators) it
proves the DP's 36.502 to 8e-7, where the capacity bound stood at 32.80.

The cut ops in ``O(n + m)`` (one topological order: every op before ``v`` has a successor at or before it, every
op after has a predecessor at or after it); the hull's transfers only for the runs ``f..l`` whose hull computes at
most the best max load (``d`` at most from each ``f``), as a banded difference table, ``O(m d + r d)``; the
blocks' prices one parametric minimum cut per hull point of each distinct block; each bisection step ``O(r d)``.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ..evaluate import Objective, Overlap
from ..graph import Graph
from ..placement import PlacementClass
from ..problem import Problem
from ..structure import cut_ops
from . import one_or_cut
from .block_cuts import BlockPrices, block_prices, segments
from .cut_chain import Chain, Hosts, fits

MAX_CUTS = 5000  # cut ops above which the tables are not built
SOLVE_PAIRS = 1_500_000  # runs of cut ops (f, l) above which a solve does not bound its answer (GPT-3 at 20k ops
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
    c = problem.cluster
    if not c.host.any():
        return one_or_cut.applies(problem.graph, c)
    if c.routed or len([grp for grp in c.homogeneous_groups() if not c.host[grp[0]]]) != 1:
        return "the cut-stages bound needs identical accelerators without routes (hosts beside them)"
    times = c.times(problem.graph)
    if not np.isfinite(times[:, ~c.host]).all():
        return "the cut-stages bound needs every op to run on the accelerators"
    if host_ratio(times, c.host) < 1:
        return "the cut-stages bound needs hosts no faster than the accelerators on any op"
    return None


def host_ratio(times: np.ndarray, host: np.ndarray) -> float:
    """The least ratio of an op's fastest host time to its accelerator time (``inf`` without one to compare):
    every set of ops takes a host at least that many times the accelerators' time."""
    acc = times[:, int(np.flatnonzero(~host)[0])]
    fastest = times[:, host].min(axis=1)
    busy = acc > 0
    return float(np.min(fastest[busy] / acc[busy], initial=math.inf))


def answer_bound(problem: Problem, upper: float) -> float | None:
    """:func:`cut_stages_bound` for a solve's answer of max load ``upper``, where it applies to the problem's class
    (contiguous or DAG-ordered) and at most :data:`SOLVE_PAIRS` runs of cut ops compute at most ``upper``; else
    ``None``."""
    if problem.placement_class() is PlacementClass.ALL or applies(problem) or not math.isfinite(upper):
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
                      seconds: float = math.inf, floor: float = 0.0) -> CutStages:
    """The module's bound; ``None`` where it cannot be shown below ``upper`` (a max load some placement reaches),
    the graph has more than :data:`MAX_CUTS` cut ops, or more than ``most_pairs`` runs of cut ops compute at most
    the max load tried. The tables are built for the runs under ``GROWTH`` times ``W / k`` first, and for more
    (up to ``upper``) while the relaxation fails there (each failure a bound): a greedy ``upper`` 16 times ``W /
    k`` would cost 16 times the runs. The search stops ``seconds`` after the call began. ``floor`` is a bound known
    already: where the relaxation holds there, ``None`` at once (its bound would be lower); else it starts above it."""
    began = time.perf_counter()
    g, cluster = problem.graph, problem.cluster
    acc = int(np.flatnonzero(~cluster.host)[0])
    k, count = int((~cluster.host).sum()), int(cluster.host.sum())
    times = cluster.times(g)
    t = times[:, acc].astype(float)
    rho = host_ratio(times, cluster.host) if count else math.inf
    work = math.fsum(t.tolist())
    cuts = cut_ops(g)
    r = len(cuts)
    if r > MAX_CUTS:
        return CutStages(None, f"{r} cut ops, above {MAX_CUTS}")
    if g.n == 0 or k + count == 1 or not math.isfinite(upper):
        return CutStages(None, "nothing to bound")
    scale = float(cluster.transfer_scale[acc])
    seg = segments(g, cuts)
    prices = block_prices(g, cuts, g.out_bytes * scale, t)
    hosts = (count, rho, times[:, cluster.host].min(axis=1)) if count else None
    lo = first = work / (k + count / rho)  # every device's work (a host's at least rho times), Lemma 3.3's
    if first < floor and floor >= work:  # one device holding the graph is a placement the relaxation admits: at most W
        return CutStages(None, f"the bound so far {floor:.6g} is at least the graph's work {work:.6g}")
    if first < floor < upper:  # beside a host whose memory binds: 315 in 30 s where the capacity bound was 1,614
        chain = _chain(g, seg, r, t, scale, floor, most_pairs, prices, hosts)
        if chain is not None and fits(chain, floor * (1 + SAFETY), k):
            return CutStages(None, f"{r} cut ops: the relaxation holds at the bound {floor:.6g} already")
        lo = floor if chain is not None else lo
    hi = min(upper, GROWTH * lo) if lo > 0 else upper
    while True:
        chain = _chain(g, seg, r, t, scale, hi, most_pairs, prices, hosts)
        if chain is None:
            return CutStages(None, f"{r} cut ops: more than {most_pairs} runs of them compute at most {hi:.6g}")
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
    steps = 0
    while hi - lo > PRECISION * hi:
        if time.perf_counter() - began > seconds:
            return CutStages(lo * (1 - SAFETY), f"{r} cut ops: stopped by its clock after {steps} steps, {hi:.6g} "
                             "not ruled out", finished=False)
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if fits(chain, mid * (1 + SAFETY), k) else (mid, hi)
        steps += 1
    return CutStages(lo * (1 - SAFETY), f"{r} cut ops: a chain of devices sharing the blocks between their runs")


def _chain(g: Graph, seg: np.ndarray, r: int, t: np.ndarray, scale: float, upper: float, most_pairs: int | None,
           prices: BlockPrices, hosts: tuple[int, float, np.ndarray] | None = None) -> Chain | None:
    """The runs ``f <= l`` of cut ops whose hull computes at most ``upper``, each with its hull's work and
    transfers' time, and the blocks' prices; ``None`` past ``most_pairs`` runs. ``hosts``: their count, their
    :func:`host_ratio` and each op's fastest host time (the hulls' host times added)."""
    seg_work = np.bincount(seg + 1, weights=t, minlength=2 * r + 1)
    before = np.concatenate([[0.0], np.cumsum(seg_work)])  # before[s + 1]: work of the segments below s
    # a device computing more than the max load tried is no device of a placement under it: l runs up to the last
    # cut op whose hull from f computes at most ``upper`` (hulls grow with l), ``depth`` pairs at most per f
    index = np.arange(r)
    last = np.searchsorted(before[2 * index + 2], before[2 * index + 1] + upper * (1 + SAFETY), side="right") - 1
    width = np.maximum(last - index + 1, 0)
    if most_pairs is not None and int(width.sum()) > most_pairs:
        return None
    f = np.repeat(index, width)
    l = f + np.arange(int(width.sum())) - np.repeat(np.cumsum(width) - width, width)
    hull = before[2 * l + 2] - before[2 * f + 1]
    comm = _transfers(g, seg, r, scale, int(width.max(initial=1)))[f, l - f] if r else np.zeros(0)
    starts = np.concatenate([[0], np.cumsum(width)])
    if hosts is None:
        return Chain(hull + comm * (1 - SAFETY), starts, prices)
    count, rho, host_t = hosts
    slow = np.isinf(host_t)  # ops no host runs: a hull holding one is no host's
    seg_host = np.bincount(seg + 1, weights=np.where(slow, 0.0, host_t), minlength=2 * r + 1)
    seg_slow = np.bincount(seg + 1, weights=slow.astype(float), minlength=2 * r + 1)
    host_before, slow_before = (np.concatenate([[0.0], np.cumsum(x)]) for x in (seg_host, seg_slow))
    host_hull = np.where(slow_before[2 * l + 2] > slow_before[2 * f + 1], np.inf,
                         host_before[2 * l + 2] - host_before[2 * f + 1])
    return Chain(hull + comm * (1 - SAFETY), starts, prices, Hosts(count, rho, host_hull * (1 - SAFETY)))


def _transfers(g: Graph, seg: np.ndarray, r: int, scale: float, depth: int) -> np.ndarray:
    """``c[f, l - f]`` for ``l - f < depth``: the time of the tensors a device whose cut ops are ``f..l`` receives
    (made at or before cut ``f - 1``, read in the hull) and sends (made in the hull, read at or after cut
    ``l + 1``), summed along each row of a banded difference table (a producer's rectangle of ``(f, l)`` pairs each
    way, cut to the band: ``O(m * depth)``; where that is more than ``r^2``, the full table's corners)."""
    size = g.out_bytes * scale
    src, dst = g.src, g.dst
    keep = size[src] > 0
    src, dst = src[keep], dst[keep]
    pairs = np.unique(np.stack([src, seg[dst]], axis=1), axis=0) if src.size else np.zeros((0, 2), np.int64)
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
    lo, hi = np.maximum(f0, l0 - depth + 1), np.minimum(f1, l1)
    if int(np.maximum(hi - lo + 1, 0).sum()) > r * r:  # a wide band: the full table's four corners cost less
        full = np.zeros((r + 1, r + 1))
        for rows, cols, sign in ((f0, l0, 1), (f1 + 1, l0, -1), (f0, l1 + 1, -1), (f1 + 1, l1 + 1, 1)):
            np.add.at(full, (rows, cols), sign * w)
        full = np.cumsum(np.cumsum(full, axis=0), axis=1)
        f, d = np.divmod(np.arange(r * depth), depth)
        return np.where(f + d < r, full[f, np.minimum(f + d, r)], 0.0).reshape(r, depth)
    diff = np.zeros((r, depth + 1))
    _band(diff, f0, f1, l0, l1, w)
    return np.cumsum(diff, axis=1)[:, :depth]


def _band(diff: np.ndarray, f0: np.ndarray, f1: np.ndarray, l0: np.ndarray, l1: np.ndarray, w: np.ndarray) -> None:
    """Add each ``w`` to the pairs ``f0 <= f <= f1``, ``l0 <= l <= l1`` of the band ``diff`` (row ``f``, column
    ``l - f``) sums up along its rows: only the rows whose columns meet the band."""
    depth = diff.shape[1] - 1
    lo, hi = np.maximum(f0, l0 - depth + 1), np.minimum(f1, l1)
    count = np.maximum(hi - lo + 1, 0)
    item = np.repeat(np.arange(len(w)), count)
    f = lo[item] + np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    start = np.maximum(l0[item] - f, 0)
    stop = np.minimum(l1[item] - f + 1, depth)
    np.add.at(diff, (f, start), w[item])
    np.add.at(diff, (f, stop), -w[item])
