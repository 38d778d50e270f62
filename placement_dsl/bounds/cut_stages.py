"""The cut-stages bound for the max-load objective on identical devices whose op sets are contiguous.

The *cut ops* ``s_0 < s_1 < ... < s_{r-1}`` are the ops comparable with all others (a residual block's add, a
layer norm's reductions): every other op lies in one *block*, before ``s_0``, between two consecutive cut ops, or
after ``s_{r-1}``. A device's op set ``S`` is contiguous (convex: no path leaves ``S`` and comes back; so is every
stage of a DAG-ordered placement of a forward graph), so either it holds no cut op and lies inside one block (its
work is at most that block's), or it holds the cut ops ``s_f .. s_l`` and everything between them (its *hull*),
parts of the two blocks beside the hull, and no op before ``s_{f-1}`` or after ``s_{l+1}``. Then it receives every
tensor of an op at or before ``s_{f-1}`` read inside the hull, and sends every tensor of an op of the hull read at
or after ``s_{l+1}`` (Archer et al. eq. 3: each tensor paid once each way), so with ``c(f, l)`` their time its load
is at least ``work(S) + c(f, l)``; its parts of the two blocks beside the hull add at least ``enter(f) + leave(l)``
(:mod:`.block_cuts`: the least cut of those blocks' tensors), so ``work(S) <= min(T - c(f, l) - enter(f) -
leave(l), hull + the two blocks beside it)``. The first cut op has no tensor before it to receive and the last
none after it to send; exactly one device holds ``s_0`` and one ``s_{r-1}`` (or one device both, and then every
cut op). A max load ``T`` needs::

    W <= cap_first(T) + cap_last(T) + (k - 2) cap_mid(T)    or    W <= T + (k - 1) min(T, largest block)

with each ``cap`` the most work a device of that kind may hold under ``T``; the bound is the least ``T`` that
passes, by bisection between ``W / k`` and the best known max load (checked to pass there, else no bound). GPT-3's
layers pay two residual tensors per inner stage, which ``W / k`` misses (2,044 ops onto 4 stages: 27.84 against
25.47, the best split 28.82). The cut ops in ``O(n + m)`` (one topological order: every op before ``v`` has a
successor at or before it, every op after has a predecessor at or after it); the hull's transfers only for the runs
``f..l`` whose hull computes at most the best max load (``d`` at most from each ``f``), as a banded difference
table, ``O(m d + r d)``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..evaluate import Objective, Overlap
from ..graph import Graph
from ..placement import PlacementClass
from ..problem import Problem
from ..structure import cut_ops
from . import one_or_cut
from .block_cuts import block_costs, segments

MAX_CUTS = 5000  # cut ops above which the tables are not built
SOLVE_PAIRS = 1_500_000  # runs of cut ops (f, l) above which a solve does not bound its answer (0.2 s at 0.9M)
SAFETY = 1e-9  # relative shave: the cost model sums the same numbers in another order


def applies(problem: Problem) -> str | None:
    """``None`` when :func:`cut_stages_bound` bounds ``problem``, else why not."""
    model = problem.cost_model()
    if model.objective is not Objective.MAX_LOAD or model.overlap is not Overlap.NONE:
        return "the cut-stages bound bounds a max load with transfers not overlapped"
    if problem.graph.backward.any():
        return "the cut-stages bound needs a forward graph (a training graph's devices hold two contiguous parts)"
    return one_or_cut.applies(problem.graph, problem.cluster)


def answer_bound(problem: Problem, upper: float) -> float | None:
    """:func:`cut_stages_bound` for a solve's answer of max load ``upper``, where it applies to the problem's class
    (contiguous or DAG-ordered) and at most :data:`SOLVE_PAIRS` runs of cut ops compute at most ``upper``; else
    ``None``."""
    if problem.placement_class() is PlacementClass.ALL or applies(problem) or not math.isfinite(upper):
        return None
    return cut_stages_bound(problem, upper, SOLVE_PAIRS)[0]


def cut_stages_bound(problem: Problem, upper: float, most_pairs: int | None = None) -> tuple[float | None, str]:
    """The module's bound and a note; ``None`` where it cannot be shown below ``upper`` (a max load some placement
    reaches), the graph has more than :data:`MAX_CUTS` cut ops, or more than ``most_pairs`` runs of cut ops compute
    at most ``upper``."""
    g, cluster = problem.graph, problem.cluster
    k = cluster.size
    t = cluster.times(g)[:, 0].astype(float)
    work = math.fsum(t.tolist())
    cuts = cut_ops(g)
    r = len(cuts)
    if r > MAX_CUTS:
        return None, f"{r} cut ops, above {MAX_CUTS}"
    if g.n == 0 or k == 1 or not math.isfinite(upper):
        return None, "nothing to bound"
    tables = _tables(g, cuts, t, float(cluster.transfer_scale[0]), upper, most_pairs)
    if tables is None:
        return None, f"{r} cut ops: more than {most_pairs} runs of them compute at most {upper:.6g}"

    def fits(T: float) -> bool:
        return _capacity(tables, T, k) >= work * (1 - SAFETY)
    lo, hi = work / k, upper
    if not fits(hi):  # the relaxation must hold at a reachable max load
        return None, "declined: the relaxation does not hold at the best max load"
    if fits(lo):
        return lo, f"{r} cut ops: W / k"
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
        if hi - lo <= 1e-9 * hi:
            break
    return lo * (1 - SAFETY), f"{r} cut ops: inner devices receive and send the tensors across their hull"


def _tables(g: Graph, cuts: np.ndarray, t: np.ndarray, scale: float, upper: float,
            most_pairs: int | None) -> dict[str, Any] | None:
    """Per pair of cut-op indices ``f <= l`` whose hull computes at most ``upper``: the hull's work, its transfers'
    time and the most work a device holding exactly those cut ops may hold; the blocks' work."""
    r = len(cuts)
    seg = segments(g, cuts)
    seg_work = np.bincount(seg + 1, weights=t, minlength=2 * r + 1)
    before = np.concatenate([[0.0], np.cumsum(seg_work)])  # before[s + 1]: work of the segments below s
    # a device computing more than the best max load is no device of a better placement: l runs up to the last
    # cut op whose hull from f computes at most ``upper`` (hulls grow with l), ``depth`` pairs at most per f
    index = np.arange(r)
    last = np.searchsorted(before[2 * index + 2], before[2 * index + 1] + upper * (1 + SAFETY), side="right") - 1
    width = np.maximum(last - index + 1, 0)
    if most_pairs is not None and int(width.sum()) > most_pairs:
        return None
    f = np.repeat(index, width)
    l = f + np.arange(int(width.sum())) - np.repeat(np.cumsum(width) - width, width)
    hull = before[2 * l + 2] - before[2 * f + 1]
    ext = hull + seg_work[2 * f] + seg_work[2 * l + 2]  # the blocks beside the hull: segments 2f - 1 and 2l + 1
    enter, leave = block_costs(g, cuts, g.out_bytes * scale)
    band = _transfers(g, seg, r, scale, int(width.max(initial=1)))
    comm = band[f, l - f] + (enter[f] + leave[l]) * (1 - SAFETY)
    return {"hull": hull, "ext": ext, "comm": comm, "first": f == 0, "last": l == r - 1,
            "block": float(seg_work[0::2].max()), "all": float(before[2 * r] - before[1]) if r else 0.0}


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


def _capacity(tab: dict[str, Any], T: float, k: int) -> float:
    """The most work ``k`` devices may hold under a max load ``T`` (module docstring)."""
    within = min(T, tab["block"])
    if tab["hull"].size == 0:
        return k * within
    can = (tab["hull"] + tab["comm"]) * (1 - SAFETY) <= T  # the hull is held whole, its tensors paid
    held = np.where(can, np.minimum(T - tab["comm"], tab["ext"]), -np.inf)

    def most(mask: np.ndarray) -> float:
        return float(held[mask].max()) if mask.any() else -math.inf
    mid = max(within, most(~tab["first"] & ~tab["last"]))
    first = max(mid, most(tab["first"] & ~tab["last"]))
    last = max(mid, most(~tab["first"] & tab["last"]))
    one = T + (k - 1) * within if tab["all"] <= T else -math.inf  # one device holds every cut op
    return max(one, first + last + (k - 2) * mid)
