"""DPL beside host devices: the best slicing of the DFS order onto identical accelerators and host CPUs, the hosts'
stages anywhere in the pipeline (Tarnawski et al. §5.1.2 on ``k`` accelerators + ``l`` CPUs).

DPL's prefixes are the slicings of one order, so with one class of identical accelerators and one class of hosts its
DP is a slicing DP whose state is the prefix, the accelerators used and the hosts used (:mod:`.ideal_solve` sweeps the
same prefixes as ideals, the host's band of every prefix included: ~20,000 prefixes x 34 states beside a CPU that holds
half the graph took 42 s). Here the optimum is found by *feasibility* probes at targets ``T``
(:func:`.ideal_solve.descending_search` bisects between a lower bound and a split found), each one pass over the
order (:func:`feasible_split`):

* ``g[h, j]``: the fewest accelerators that hold the prefix ``[0, j)`` with at most ``h`` host stages, every stage
  ``<= T``. Accelerators are identical, so the fewest dominate (a prefix's stages never change the suffix's costs).
* An accelerator stage ``[i, j)`` is priced as the cost model prices it (compute, the tensors in and out, overflow;
  Archer's Lemma 4.1 sums, streamed as in :mod:`.slice_kernels`), for ``i`` in the band whose compute and memory fit
  ``T`` and the accelerator: the band that memory or ``T`` leaves, not the whole prefix.
* A host pays no transfers and runs its ops one after another, so its stage ``[i, j)`` costs its compute alone, which
  only grows as ``i`` falls: the starts it may take form a window ``[lo(j), j)``, and ``min g[h - 1, i]`` over the
  window is a sliding minimum (a monotone queue), ``O(1)`` per position.

A probe costs ``O(n * band)``; the band shrinks with ``T`` and the accelerators' memory. The answer is DPL's optimum
(exact along the order, any place of the host stages), to :data:`~.ideal_solve.RESOLUTION`.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ..cluster import Cluster
from ..evaluate import CostModel, Objective
from ..graph import Graph
from ..progress import report
from . import slice_kernels as sk
from .base import TimeLimitReached
from .contract import Contraction
from .ideal_lattice import DeviceClass, dfs_order
from .ideal_solve import RESOLUTION, Solution, Stopped, capacity_bound, descending_search
from .jit import njit, restartable
from .kernels import clock
from .segments import advance, stage_load, stage_params

INF = math.inf
NONE_USED = np.iinfo(np.int64).max // 4  # g[h, j] where no split of the prefix fits
ACC, HOST, FEWER = 0, 1, 2  # a prefix's last step: an accelerator stage, a host stage, the split with fewer hosts


@njit(cache=True)
def feasible_split(order, pred_ptr, pred_idx, outdeg, out_bytes, mem_op, acc_t, host_t, cap_a, hard_a, tscale, ovf,
                   overlap, cap_h, hard_h, allowed, A, H, T, deadline):
    """A slicing of ``order`` into stages on at most ``A`` accelerators and ``H`` hosts, every stage ``<= T``.

    Returns ``(status, starts, ends, kinds, loads)``: ``status`` 1 with the stages in pipeline order (``kinds``:
    :data:`ACC` or :data:`HOST`), 0 when none fits, -1 when ``time.monotonic()`` passed ``deadline`` (read every
    1,024 positions). See the module docstring for the recurrence; ``allowed[b]``: a stage may end at ``b``.
    """
    n = order.size
    pos = np.empty(n, dtype=np.int64)
    for q in range(n):
        pos[order[q]] = q
    cwa = np.zeros(n + 1)
    cwh = np.zeros(n + 1)
    cm = np.zeros(n + 1)
    bad_a = np.zeros(n + 1, dtype=np.int64)  # ops before b the accelerators cannot run
    bad_h = np.zeros(n + 1, dtype=np.int64)
    for q in range(n):
        v = order[q]
        a, h = acc_t[v], host_t[v]
        cwa[q + 1] = cwa[q] + (a if a < INF else 0.0)
        cwh[q + 1] = cwh[q] + (h if h < INF else 0.0)
        bad_a[q + 1] = bad_a[q] + (0 if a < INF else 1)
        bad_h[q + 1] = bad_h[q] + (0 if h < INF else 1)
        cm[q + 1] = cm[q] + mem_op[v]
    mem_a = cap_a * (1.0 + sk.SLACK) if hard_a else INF
    mem_h = cap_h * (1.0 + sk.SLACK) if hard_h else INF
    g = np.full((H + 1, n + 1), NONE_USED, dtype=np.int64)
    arg = np.zeros((H + 1, n + 1), dtype=np.int64)
    kind = np.zeros((H + 1, n + 1), dtype=np.int8)
    load = np.zeros((H + 1, n + 1))
    g[:, 0] = 0
    queue = np.empty((H + 1, n + 1), dtype=np.int64)  # per h >= 1: starts i in the host window, g[h - 1, i] rising
    head = np.zeros(H + 1, dtype=np.int64)
    tail = np.zeros(H + 1, dtype=np.int64)
    best = np.empty(H + 1, dtype=np.int64)
    best_i = np.empty(H + 1, dtype=np.int64)
    best_load = np.empty(H + 1)
    rem = np.zeros(n, dtype=np.int64)
    lastseen = np.zeros(n, dtype=np.int64)
    r_in = np.zeros(n)
    r_out = np.zeros(n)
    live = np.zeros(n + 1)
    lo_a = 0
    lo_h = 0
    for j in range(1, n + 1):
        if deadline < INF and (j & 0x3FF) == 0 and clock() > deadline:
            return -1, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int8), np.zeros(0)
        advance(j, order[j - 1], pos, pred_ptr, pred_idx, outdeg, out_bytes, rem, lastseen, r_in, r_out, live)
        i = j - 1
        if allowed[i]:
            for h in range(1, H + 1):  # the start j - 1 joins the hosts' windows
                if g[h - 1, i] <= A:
                    while tail[h] > head[h] and g[h - 1, queue[h, tail[h] - 1]] >= g[h - 1, i]:
                        tail[h] -= 1
                    queue[h, tail[h]] = i
                    tail[h] += 1
        if not allowed[j]:
            continue
        while lo_a < j and (cwa[j] - cwa[lo_a] > T or cm[j] - cm[lo_a] > mem_a or bad_a[j] > bad_a[lo_a]):
            lo_a += 1
        while lo_h < j and (cwh[j] - cwh[lo_h] > T or cm[j] - cm[lo_h] > mem_h or bad_h[j] > bad_h[lo_h]):
            lo_h += 1
        for h in range(H + 1):
            best[h] = NONE_USED
        q_in = 0.0
        q_out = 0.0
        for i in range(j - 1, lo_a - 1, -1):  # accelerator stages [i, j): their transfer sums streamed downward
            q_in += r_in[i]
            q_out += r_out[i]
            if not allowed[i]:
                continue
            useful = False
            for h in range(H + 1):
                useful = useful or g[h, i] < A
            if not useful:
                continue
            mem = cm[j] - cm[i]
            val = stage_load(cwa[j] - cwa[i], (live[i] - live[j] + q_in) * tscale, q_out * tscale,
                             max(mem - cap_a, 0.0) * ovf, overlap)
            if val > T:
                continue
            for h in range(H + 1):
                if g[h, i] + 1 < best[h]:
                    best[h] = g[h, i] + 1
                    best_i[h] = i
                    best_load[h] = val
        for h in range(H + 1):
            if best[h] <= A:
                g[h, j] = best[h]
                arg[h, j] = best_i[h]
                kind[h, j] = ACC
                load[h, j] = best_load[h]
            if h >= 1:
                while head[h] < tail[h] and queue[h, head[h]] < lo_h:
                    head[h] += 1
                if head[h] < tail[h]:
                    i = queue[h, head[h]]
                    if g[h - 1, i] < g[h, j]:
                        g[h, j] = g[h - 1, i]
                        arg[h, j] = i
                        kind[h, j] = HOST
                        load[h, j] = cwh[j] - cwh[i]
                if g[h - 1, j] < g[h, j]:
                    g[h, j] = g[h - 1, j]
                    kind[h, j] = FEWER
    if g[H, n] > A:
        return 0, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int8), np.zeros(0)
    count = 0
    h, j = H, n
    starts = np.empty(n + H + 1, np.int64)
    ends = np.empty(n + H + 1, np.int64)
    kinds = np.empty(n + H + 1, np.int8)
    loads = np.empty(n + H + 1)
    while j > 0:
        k = kind[h, j]
        if k == FEWER:
            h -= 1
            continue
        i = arg[h, j]
        starts[count], ends[count], kinds[count], loads[count] = i, j, k, load[h, j]
        count += 1
        if k == HOST:
            h -= 1
        j = i
    return 1, starts[:count][::-1].copy(), ends[:count][::-1].copy(), kinds[:count][::-1].copy(), \
        loads[:count][::-1].copy()


restartable(feasible_split)  # it writes none of its arguments: a probe in Python gives way to its compiled code


@dataclass(frozen=True)
class HostSplit:
    """A slicing of ``order`` (op ids): stage ``t`` holds ``order[starts[t]:ends[t]]`` on an accelerator
    (``hosts[t]`` False) or a host, in pipeline order; ``value`` its max stage load."""

    order: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    hosts: np.ndarray
    value: float

    def assignment(self, accelerators: np.ndarray, hosts: np.ndarray, n: int) -> np.ndarray:
        """Op -> device: accelerator stages on ``accelerators`` in turn, host stages on ``hosts`` in turn."""
        assign = np.empty(n, dtype=np.int64)
        used = [0, 0]
        for a, b, on_host in zip(self.starts.tolist(), self.ends.tolist(), self.hosts.tolist()):
            devices = hosts if on_host else accelerators
            assign[self.order[a:b]] = devices[used[on_host]]
            used[on_host] += 1
        return assign


class HostSlicer:
    """The order, its allowed cuts and the two classes' costs, prepared for :func:`feasible_split` probes."""

    def __init__(self, graph: Graph, cluster: Cluster, model: CostModel, order: np.ndarray, cuts: np.ndarray):
        host = cluster.host.astype(bool)
        self.accelerators, self.hosts = np.flatnonzero(~host), np.flatnonzero(host)
        p = stage_params(graph, cluster, model, np.array([self.accelerators[0], self.hosts[0]]))
        self.order = np.asarray(order, dtype=np.int64)
        allowed = sk.allowed_boundaries(self.order, graph.group_id, cuts)
        self.args = (self.order, graph.pred_ptr, graph.pred_idx, np.diff(graph.succ_ptr), graph.out_bytes,
                     graph.param_bytes + graph.activation_bytes, p.times[0].copy(), p.times[1].copy(),
                     float(p.memory[0]), bool(p.hard[0]), float(p.tscale[0]), float(p.overflow[0]), int(p.overlap),
                     float(p.memory[1]), bool(p.hard[1]), allowed, int(self.accelerators.size), int(self.hosts.size))
        self.probes = 0

    def feasible(self, T: float, deadline: float = INF) -> HostSplit | None:
        """A split with every stage ``<= T`` (None: none); :class:`~.ideal_solve.Stopped` past ``deadline``."""
        self.probes += 1
        status, starts, ends, kinds, loads = feasible_split(*self.args, float(T), float(deadline))
        if status < 0:
            raise Stopped(T)
        if status == 0:
            return None
        return HostSplit(self.order, starts, ends, kinds == HOST, float(loads.max(initial=0.0)))


def applies(graph: Graph, cluster: Cluster, model: CostModel) -> bool:
    """Whether the cluster is one class of identical accelerators beside one class of identical hosts, the graph has
    no backward pass and the objective is a max-load (the case :func:`best_split` searches)."""
    if model.objective is not Objective.MAX_LOAD or graph.backward.any() or model.training_memory is not None:
        return False
    groups = cluster.homogeneous_groups()
    hosts = [bool(cluster.host[g[0]]) for g in groups]
    return len(groups) == 2 and sorted(hosts) == [False, True]


def best_split(slicer: HostSlicer, lower: float, upper: float = INF,
               deadline: float | None = None) -> tuple[HostSplit | None, float]:
    """The best split of the slicer's order (to :data:`~.ideal_solve.RESOLUTION`) and a lower bound on it: ``lower``
    (a bound on the optimum, e.g. the capacity bound) rises past every infeasible target. ``upper``: the value of a
    split known (a target at it is feasible); without one the targets double from ``lower`` until one is. Past
    ``deadline`` (``time.monotonic()``): the best split found and the bound proved so far; ``(None, bound)`` when
    none was found."""
    at = INF if deadline is None else deadline
    lo, start = max(float(lower), 0.0), None
    if not math.isfinite(upper):
        T = lo if lo > 0 else _least_positive(slicer)
        while start is None:
            try:
                start = slicer.feasible(T, at)
            except Stopped:
                return None, lo
            if start is None:
                lo, T = T, T * 2.0
        upper = start.value
    try:
        if upper <= lo:  # the bound meets the split known: one probe at it for the split
            return (start or slicer.feasible(upper * (1 + RESOLUTION), at)), upper
        found, hi, bound = descending_search(slicer.feasible, lambda split: split.value, lo,
                                             upper * (1 + RESOLUTION), start, deadline)
    except (Stopped, TimeLimitReached):
        return None, lo
    return (found or None), min(bound, hi)


def _least_positive(slicer: HostSlicer) -> float:
    """A first target where no lower bound is known: the largest op's least time (some stage holds it), or 1."""
    times = np.minimum(slicer.args[6], slicer.args[7])
    biggest = float(times[np.isfinite(times)].max(initial=0.0))
    return biggest if biggest > 0 else 1.0


# ---------------------------------------------------------------------------- DPL's order and the DP's stages
def along_dfs(graph: Graph, cluster: Cluster, model: CostModel, con: Contraction) -> HostSlicer:
    """A :class:`HostSlicer` of DPL's order: the supernodes in :func:`.ideal_lattice.dfs_order`, the ops of one by
    topological rank, cut only between supernodes (as :func:`.slicegraph.ordered_node_slicing` slices it)."""
    rank = np.empty(con.n_nodes, dtype=np.int64)
    rank[dfs_order(con)] = np.arange(con.n_nodes)
    order = np.lexsort((graph.rank, rank[con.image])).astype(np.int64)
    nodes = con.image[order]
    cuts = np.ones(graph.n + 1, dtype=bool)
    cuts[1:-1] = nodes[1:] != nodes[:-1]
    return HostSlicer(graph, cluster, model, order, cuts)


def dp_stages(split: HostSplit, con: Contraction, classes: list[DeviceClass]) -> list[tuple[np.ndarray, int, int]]:
    """The split as the DP's stages: ``(supernodes, class, replicas)`` in pipeline order."""
    host = next(c for c, dc in enumerate(classes) if dc.host)
    acc = next(c for c, dc in enumerate(classes) if not dc.host)
    return [(np.unique(con.image[split.order[a:b]]), host if on_host else acc, 1)
            for a, b, on_host in zip(split.starts.tolist(), split.ends.tolist(), split.hosts.tolist())]


DPL_SHARE = 0.5  # of the time left, the most DPL's probes may take before the DP over ideals starts from their split


def dpl_solution(graph: Graph, cluster: Cluster, model: CostModel, con: Contraction, classes: list[DeviceClass],
                 deadline: float | None = None, share: float = 1.0) -> tuple[Solution, dict]:
    """DPL's optimum beside hosts (:func:`best_split` along :func:`along_dfs`) as the DP's
    :class:`.ideal_solve.Solution` and its ``info`` (``path``: ``"host slicing"``; ``probes``; ``seconds``); the probes stop at ``share`` of the
    time left before ``deadline`` with their best split (:class:`~.base.TimeLimitReached` when they have none)."""
    t0 = time.perf_counter()
    slicer = along_dfs(graph, cluster, model, con)
    at = None if deadline is None else time.monotonic() + max(0.0, deadline - time.monotonic()) * share
    split, bound = best_split(slicer, capacity_bound(con, classes, False), deadline=at)
    if split is None:
        raise TimeLimitReached(f"dp: the time limit passed during DPL's slicing beside the hosts ({slicer.probes} "
                               "probes), before any split was found")
    stages = dp_stages(split, con, classes)
    seconds = time.perf_counter() - t0
    report("dp", phase="dpl", path="host slicing", probes=slicer.probes, best=split.value, seconds=seconds)
    info = {"nodes": con.n_nodes, "contraction": dict(con.stats), "ideals": con.n_nodes + 1, "path": "host slicing",
            "probes": slicer.probes, "pairs": 0, "runs": slicer.probes, "seconds": {"dpl": seconds}}
    if bound < split.value:
        info["dpl_lower"] = bound  # stopped: DPL's optimum is at least this (not a bound on the DP's class)
    return Solution(split.value, stages, 0, {"dpl": seconds}, runs=slicer.probes), info
