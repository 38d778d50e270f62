"""The packing bound for the max-load objective on accelerators and host CPUs.

A sharpening of the pigeonhole bound (:mod:`.pigeonhole`). With ``a_G``, ``h_G`` and ``K`` as
there, in a placement of max load ``T`` every unit of ``B(T) = {G : h_G > T}`` sits on one of
the ``K`` non-host devices, whose load is at least the sum of the ``a_G`` it holds. So the
numbers ``{a_G : G in B(T)}`` split into ``K`` bins of sum at most ``T``: ``T >= P(B(T))``, the
least makespan of ``B(T)`` on ``K`` identical machines (``P||Cmax``). The pigeonhole bound
is one lower bound on ``P``; this module decides ``P`` exactly by a depth-first search
over bin assignments within a node budget, and keeps only what the search proves (a
capacity it proves too small), so a search cut short still yields a valid, weaker bound.

As ``T`` grows ``B(T)`` shrinks and the bins widen, so the feasible ``T`` form a ray, and
``OPT >= min{T : T >= P(B(T))}``, found by scanning the steps of ``B`` (the distinct ``h_G``)
in increasing order as the pigeonhole bound does.

On Tarnawski et al.'s GNMT inference layer graph (17 LSTM and output layers too slow for the
CPU at ``T ~ 31.7``, six accelerators) the layers of 24.78 and 6.89 time units must share one
accelerator: 31.669, where the pigeonhole bound and the throughput IP's dual bound stop near 31.2.
Valid for every placement without replicated stages (a replicated stage divides its load);
transfers, memory overflow and any overlap mode only add to a device's load.
"""
from __future__ import annotations

import math
import time
from bisect import bisect_left

import numpy as np

from ..cluster import Cluster
from ..graph import Graph
from .pigeonhole import movable_units, unit_times

SECONDS = 2.0  # wall clock of the packing bound's searches
SLACK = 1e-12  # relative capacity slack of the search: float sums in another order never refute a packing
TOLERANCE = 1e-9  # relative width at which the capacity bisection stops
FEASIBLE, INFEASIBLE, UNKNOWN = 1, 0, -1
_ENTER, _UNTAKE, _SKIP, _UNSKIP = range(4)  # the steps of _Completion._sets's search


class _OutOfNodes(Exception):
    """The search spent its node budget."""


class BinCompletion:
    """Korf's bin completion: does ``w`` (sorted decreasing) fit ``K`` bins of capacity ``C``?

    Bins are filled one at a time, each with the largest item left and a *maximal* set of
    further items (no item left fits beside them): any packing can move items into that bin
    until it is maximal, so no packing is lost. The bins' total waste ``sum (C - bin)`` cannot
    exceed ``K C - sum w``, which prunes both the bins and the sets filling one.
    """

    def __init__(self, w: np.ndarray, K: int, C: float, limit: int, until: float = math.inf):
        self.w, self.K, self.C, self.limit, self.until = [float(x) for x in w], K, C, limit, until
        self.slack = K * C - float(np.sum(w))
        self.used = [False] * len(self.w)
        self.nodes = 0
        self.bins: list[float] = []  # the packing found: each bin's sum and its items
        self.members: list[list[int]] = []

    def run(self) -> int:
        if self.slack < -SLACK * self.K * self.C:
            return INFEASIBLE
        try:
            return FEASIBLE if self._fill(self.K, 0.0) else INFEASIBLE
        except _OutOfNodes:
            return UNKNOWN

    def _fill(self, bins_left: int, waste: float) -> bool:
        first = next((i for i, u in enumerate(self.used) if not u), None)
        if first is None:
            return True
        if bins_left == 0 or self.w[first] > self.C:
            return False
        self.used[first] = True
        rest = [j for j in range(first + 1, len(self.w)) if not self.used[j]]
        chosen: list[int] = []
        for total in self._sets(rest, self.w[first], chosen, waste):
            self.bins.append(total)
            self.members.append([first, *chosen])
            if self._fill(bins_left - 1, waste + self.C - total):
                return True
            self.bins.pop()
            self.members.pop()
        self.used[first] = False
        return False

    def _sets(self, rest: list[int], total: float, chosen: list[int], waste: float):
        """Maximal sets of ``rest`` completing a bin at ``total``; items chosen are marked used while yielded.

        A depth-first search over taking or skipping each item in turn, on an explicit stack (a
        recursion would go one level per item: a profile of 2,000 ops overflowed Python's stack).
        Frames ``(k, total, step)``: ``_ENTER`` decides item ``k``; ``_UNTAKE`` undoes taking it;
        ``_SKIP`` then searches without it and ``_UNSKIP`` ends that search.
        """
        skipped: list[int] = []
        # rest's weights do not increase: the items of rest[k:] that fit a room are a suffix, summed by ``tail``
        drop = [-self.w[j] for j in rest]
        tail = [0.0] * (len(rest) + 1)
        for i in range(len(rest) - 1, -1, -1):
            tail[i] = tail[i + 1] + self.w[rest[i]]
        stack = [(0, total, _ENTER)]
        while stack:
            k, total, step = stack.pop()
            if step == _UNTAKE:
                chosen.pop()
                self.used[rest[k]] = False
            elif step == _SKIP:
                skipped.append(rest[k])
                stack += [(k, total, _UNSKIP), (k + 1, total, _ENTER)]
            elif step == _UNSKIP:
                skipped.pop()
            elif self._pruned(drop, tail, k, total, waste):
                continue
            elif k == len(rest):
                if all(self.w[j] > self.C - total for j in skipped):  # maximal: no skipped item fits
                    yield total
            else:
                j = rest[k]
                twin = k > 0 and self.w[rest[k - 1]] == self.w[j] and rest[k - 1] in skipped
                stack.append((k, total, _SKIP))  # after taking item j (or instead of it) comes skipping it
                if self.w[j] <= self.C - total and not twin:  # an item equal to one skipped just before is skipped too
                    self.used[j] = True
                    chosen.append(j)
                    stack += [(k, total, _UNTAKE), (k + 1, total + self.w[j], _ENTER)]

    def _pruned(self, drop: list[float], tail: list[float], k: int, total: float, waste: float) -> bool:
        """Count a node; true when even every item of ``rest[k:]`` that fits wastes too much.

        ``drop``: the items' weights negated (increasing), ``tail[i]``: the sum of the items from ``i`` on; a
        node costs ``O(log n)`` (a sum over ``rest[k:]`` made the node budget ``O(n)`` times longer: minutes at
        20,000 ops)."""
        self.nodes += 1
        if self.nodes > self.limit or (self.nodes % 256 == 0 and time.monotonic() > self.until):
            raise _OutOfNodes
        room = self.C - total
        reach = total + tail[max(k, bisect_left(drop, -room))]
        return waste + self.C - reach > self.slack + SLACK * self.C


_Completion = BinCompletion  # the former name, kept for one release


def cheap_bound(w: np.ndarray, K: int) -> float:
    """``P(w) >=`` the largest item, the mean bin, and for each ``j`` the ``j + 1`` smallest of the
    ``jK + 1`` largest items (some bin holds ``j + 1`` of them); ``w`` sorted decreasing.

    ``O(n)``: the ``j`` terms are read off one prefix sum, and the largest is summed again directly, so
    the bound is a sum of items, never a difference of two prefix sums rounded upwards.
    """
    if w.size == 0:
        return 0.0
    best = max(float(w[0]), float(w.sum()) / K)
    j = np.arange(1, (w.size - 1) // K + 1)
    if j.size:
        prefix = np.concatenate([[0.0], np.cumsum(w)])
        top = int(j[int(np.argmax(prefix[j * K + 1] - prefix[j * K - j]))])
        best = max(best, float(w[top * K - top: top * K + 1].sum()))
    return best


def lpt(w: np.ndarray, K: int) -> float:
    """Longest processing time first: a packing's makespan, so ``P(w) <=`` it."""
    loads = np.zeros(K)
    for x in w:
        loads[int(np.argmin(loads))] += x
    return float(loads.max())


_lpt = lpt  # the former name, kept for one release


class PackingSearch:
    """Decisions ``P(w) <= C`` sharing one node budget (a quarter at most each); a spent budget answers ``UNKNOWN``."""

    def __init__(self, K: int, budget: int, seconds: float = math.inf):
        self.K, self.left, self.until = K, budget, time.monotonic() + seconds
        self.per_decision = max(budget // 4, 1)  # one hard decision cannot spend it all

    def decide(self, w: np.ndarray, C: float) -> tuple[int, float]:
        """The verdict and, when feasible, the found packing's makespan (``<= C`` up to the slack)."""
        verdict, found = self.pack(w, C)
        return verdict, (max(found.bins, default=0.0) if verdict == FEASIBLE else C)

    def pack(self, w: np.ndarray, C: float) -> tuple[int, _Completion]:
        """The verdict and the search (its ``members``: each bin's items when feasible)."""
        search = _Completion(w, self.K, C * (1 + SLACK) + SLACK, max(min(self.left, self.per_decision), 0), self.until)
        verdict = search.run() if self.left > 0 and time.monotonic() < self.until else UNKNOWN
        self.left -= search.nodes
        return verdict, search


_Search = PackingSearch  # the former name, kept for one release


def _interval(w: np.ndarray, lo: float, hi: float, search: _Search) -> float | None:
    """A lower bound on ``max(lo, P(w))`` when that may lie below ``hi``; ``None`` once ``P(w) > hi`` is proved.

    Each ``INFEASIBLE`` verdict at ``C`` proves ``P(w) > C``; an ``UNKNOWN`` one proves nothing,
    so the bisection keeps the largest refuted capacity.
    """
    T = max(lo, cheap_bound(w, search.K), 0.0)
    if T >= hi:
        return None
    if math.isfinite(hi) and search.decide(w, hi)[0] == INFEASIBLE:
        return None
    verdict, _ = search.decide(w, T)
    if verdict != INFEASIBLE:
        return T
    low, high = T, min(hi, _lpt(w, search.K))
    while high - low > TOLERANCE * high:
        mid = (low + high) / 2
        verdict, makespan = search.decide(w, mid)
        if verdict == INFEASIBLE:
            low = mid
        else:
            high = min(mid, makespan) if verdict == FEASIBLE else mid
    return low


def packing_bound(graph: Graph, cluster: Cluster, budget: int = 300_000, seconds: float = SECONDS) -> float:
    """``min{T : T >= P(B(T))}`` of the module docstring: a lower bound on the max load of every placement.

    ``budget`` caps the search nodes over all decisions (about 1.5 s on small graphs), ``seconds`` their wall
    clock (a node's bin fill is ``O(n)``: 17 s at 20,000 ops without it); a search cut
    short keeps the capacities it refuted, and the bound is never below the pigeonhole bound.
    The bisection stops within a relative ``TOLERANCE`` below ``P``: the largest capacity refuted.

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name=f"v{i}", work={"accelerator": w, "cpu": 10 * w}) for i, w in enumerate([8, 3, 3, 3])])
    >>> round(packing_bound(g, Cluster.accelerators(2, cpus=1)), 6)  # {8} | {3, 3, 3}; Lemma 3.3: 8.5, pigeonhole: 6
    9.0
    """
    units = movable_units(graph, cluster)
    if units is None:
        return 0.0
    a, h, K = units
    steps = np.unique(h)  # B(T) = {h > T} is constant on [steps[i], steps[i + 1])
    lows = np.concatenate([[-math.inf], steps])
    order = np.argsort(-a, kind="stable")
    a_sorted, h_sorted = a[order], h[order]

    def items(i: int) -> np.ndarray:  # B's items on the i-th interval, sorted decreasing
        return a_sorted[h_sorted > lows[i]].copy() if i > 0 else a_sorted.copy()

    def refuted(i: int) -> bool:  # P(B) >= its cheap bound >= the interval's end: no T in it
        return i < steps.size and cheap_bound(items(i), K) >= steps[i]

    # As T grows, B(T) shrinks (its cheap bound does not grow) and the intervals' ends grow, so the
    # intervals the cheap bound refutes come first: bisect past them instead of scanning n of them.
    first, last = 0, lows.size - 1
    while first < last:
        mid = (first + last) // 2
        first, last = (mid + 1, last) if refuted(mid) else (first, mid)
    search = _Search(K, budget, seconds)
    for i in range(first, lows.size):
        hi = float(steps[i]) if i < steps.size else math.inf
        T = _interval(items(i), float(lows[i]), hi, search)
        if T is not None and T < hi:
            return T
    return 0.0


def heavy_packing(graph: Graph, cluster: Cluster, budget: int = 300_000) -> tuple[float, list[np.ndarray]] | None:
    """The bound ``T`` and a packing of ``B(T)``'s units on the ``K`` non-host devices with least
    makespan found (each bin: unit indices, as ``np.unique(graph.group_id)`` numbers them), or
    ``None`` without non-host devices or when no packing is found within the budget. A start for
    local search: the units too slow for a host, spread as the bound says they must be.
    """
    T = packing_bound(graph, cluster, budget)
    a, h = unit_times(graph, cluster)
    K = int((~cluster.host).sum())
    if K == 0 or graph.n == 0:
        return None
    units = np.flatnonzero(np.isfinite(a) & (h > T))
    order = units[np.argsort(-a[units], kind="stable")]
    w = a[order].copy()
    search = _Search(K, budget)
    for C in (max(T, cheap_bound(w, K)), _lpt(w, K)):
        verdict, found = search.pack(w, C * (1 + 2 * TOLERANCE))
        if verdict == FEASIBLE:
            return T, [order[np.array(m, dtype=np.int64)] for m in found.members]
    return None
