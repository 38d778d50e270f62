"""Baseline placements (Tarnawski et al. §6-7 and their baselines; Archer et al.'s trivial bound).

* :func:`greedy` — Tarnawski §7: contract colocation groups (and the cycles that creates, App. B),
  fix a topological order, fill each accelerator in turn with as many ops as fit in its memory,
  put the rest on the CPU.
* the kernels of Tarnawski §6's local search ([MKA07]), which :mod:`.local_search` runs; PipeDream's path DP
  is in :mod:`.level_path`.
* :func:`one_device` — everything on the best single accelerator.

All keep colocation groups on one device. Each optimizes the max-load objective (compute +
transfers + overflow, as :mod:`placement_dsl.evaluate` defines it) and reports the cost
model's objective for ``model``.
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from ..cluster import Cluster
from ..deprecated import moved
from ..errors import InfeasibleError
from ..evaluate import CostModel, Objective, evaluate
from ..graph import Graph, least_first_order, unique_pairs
from ..placement import Placement
from . import manifest
from .base import HeuristicResult, deadline_at, expired, stopped
from .jit import njit
from .kernels import clock, device_tallies
from .registry import heuristic
from .segments import stage_load
from .stage_order import forward_edges, makes_cycle

__getattr__ = moved(__name__, {"level_path": "placement_dsl.heuristics.level_path",
                                "pipedream_path": "placement_dsl.heuristics.level_path",
                                "local_search": "placement_dsl.heuristics.local_search"})

INF = math.inf
SLACK = 1e-9


def scored_result(method: str, graph: Graph, cluster: Cluster, model: CostModel | None, assign: np.ndarray,
                  start: float, evaluations: int = 1, **info: object) -> HeuristicResult:
    """``method``'s result for the split ``assign``, scored by ``model`` (default the cost model's), with the seconds
    since ``start``."""
    model = model or CostModel()
    placement = Placement(graph, cluster, assign, source=method)
    objective = evaluate(placement, model).objective
    return HeuristicResult(method=method, placement=placement, objective=objective,
                           seconds=time.perf_counter() - start, evaluations=evaluations, info=dict(info))


def pipeline_accelerators(cluster: Cluster) -> np.ndarray:
    """Non-host devices in pipeline order (all devices when every one is a host)."""
    acc = np.flatnonzero(~cluster.host)
    return acc if acc.size else np.arange(cluster.size)


def max_load_model(model: CostModel | None) -> CostModel:
    """The max-load version of ``model`` (same overlap and memory mode) that the baselines optimize."""
    model = model or CostModel()
    return replace(model, objective=Objective.MAX_LOAD)


# ---------------------------------------------------------------------------- contraction (Tarnawski App. B)
def contract(graph: Graph) -> list[np.ndarray]:
    """Colocation groups contracted, then strongly connected components: units in topological order.

    The groups are ordered by a heap (the first op's rank breaks ties) in ``O((n + m) log n)``; only when
    colocation closes a cycle are the components merged by networkx's condensation, which took about a
    minute at 200,000 ops."""
    _, group = np.unique(graph.group_id, return_inverse=True)
    size = int(group.max()) + 1
    cross = group[graph.src] != group[graph.dst]
    src, dst = group[graph.src[cross]], group[graph.dst[cross]]
    arcs = unique_pairs(src, dst)
    first = np.full(size, graph.n, dtype=np.int64)
    np.minimum.at(first, group, graph.rank)
    order = least_first_order(size, arcs.tolist(), first.tolist())
    if len(order) < size:  # colocation closes a cycle: merge its groups
        return _condensed(graph)
    by_group = np.argsort(group, kind="stable")  # each group's ops in increasing index
    splits = np.split(by_group, np.cumsum(np.bincount(group, minlength=size))[:-1])
    return [splits[c] for c in order]


def _condensed(graph: Graph) -> list[np.ndarray]:
    """:func:`contract` through networkx's condensation: the strongly connected components of the groups."""
    import networkx as nx

    gid = graph.group_id
    q = nx.DiGraph()
    q.add_nodes_from(np.unique(gid).tolist())
    cross = gid[graph.src] != gid[graph.dst]
    q.add_edges_from(zip(gid[graph.src[cross]].tolist(), gid[graph.dst[cross]].tolist()))
    cond = nx.condensation(q)
    members_of = cond.graph["mapping"]  # group id -> component
    comp = np.array([members_of[int(g)] for g in gid], dtype=np.int64)
    first = np.full(cond.number_of_nodes(), graph.n, dtype=np.int64)
    np.minimum.at(first, comp, graph.rank)
    order = nx.lexicographical_topological_sort(cond, key=lambda c: first[c])
    by_comp = np.argsort(comp, kind="stable")
    splits = np.split(by_comp, np.cumsum(np.bincount(comp, minlength=cond.number_of_nodes()))[:-1])
    return [np.sort(splits[c]) for c in order]


# ---------------------------------------------------------------------------- greedy
@heuristic("greedy", optimizes="memory_fill", options=manifest.Nothing)
def greedy(graph: Graph, cluster: Cluster, *, model: CostModel | None = None,
           seed: int | None = None, time_limit: float | None = None) -> HeuristicResult:
    """Tarnawski §7 greedy: fill accelerators in topological order up to their memory, rest on the CPU.

    Units that may not run on accelerators go to the CPU. Without a CPU, what is left goes to
    the last accelerator (the cost model then reports the memory violation or the overflow).
    One pass in ``O(n + m)``: ``time_limit`` has nothing to cut short (it is checked, not used).
    """
    start = time.perf_counter()
    deadline_at("greedy", time_limit)
    times = cluster.times(graph)
    mem = graph.param_bytes + graph.activation_bytes
    acc = np.flatnonzero(~cluster.host)
    cpus = np.flatnonzero(cluster.host)
    spill = int(cpus[0]) if cpus.size else int(acc[-1])
    assign = np.full(graph.n, spill, dtype=np.int64)
    cur, used = 0, 0.0
    for unit in contract(graph):
        need = float(mem[unit].sum())
        while cur < acc.size:
            d = acc[cur]
            if np.isfinite(times[unit, d]).all() and used + need <= cluster.memory[d] * (1 + SLACK):
                assign[unit] = d
                used += need
                break
            if not np.isfinite(times[unit, d]).all():  # not allowed here: to the CPU, the fill goes on; a unit
                allowed = np.flatnonzero(np.isfinite(times[unit]).all(axis=0))  # the CPU may not run (a pinned
                assign[unit] = spill if spill in allowed or not allowed.size else allowed[0]  # one): its device
                break
            cur, used = cur + 1, 0.0
    return scored_result("greedy", graph, cluster, model, assign, start)


# ---------------------------------------------------------------------------- one device
@heuristic("one-device", optimizes="cost_model", options=manifest.Nothing)
def one_device(graph: Graph, cluster: Cluster, *, model: CostModel | None = None,
               seed: int | None = None, time_limit: float | None = None) -> HeuristicResult:
    """Every op on one accelerator: the best valid one by the cost model (else the best at all); on a host only where
    no accelerator may run every op (an op pinned to the host: every accelerator's split broke the pin, and under
    ``Subgraphs(1)`` the fallback of a 6-op certificate held no valid placement where all on the CPU is one).

    One evaluation per class of identical devices (a member every op may run on: pinned ops); past ``time_limit`` seconds the best so far
    (``info["stopped"]``)."""
    start = time.perf_counter()
    at = deadline_at("one-device", time_limit)
    model = model or CostModel()
    best: tuple[bool, float, int] | None = None
    cut = False
    misfits = one_device_misfits(graph, cluster, memory=False)  # a pinned op rules out its group's other members
    for group in cluster.homogeneous_groups():
        d = next((e for e in group if misfits[e] is None), group[0])
        if cluster.host[d] and any(misfits[e] is None for e in np.flatnonzero(~cluster.host)):
            continue
        if best is not None and expired(at):
            cut = True
            break
        ev = evaluate(Placement(graph, cluster, np.full(graph.n, d)), model)
        key = (not ev.valid, ev.objective, d)
        best = key if best is None or key < best else best
    assert best is not None
    result = scored_result("one-device", graph, cluster, model, np.full(graph.n, best[2]), start,
                           evaluations=len(cluster.homogeneous_groups()))
    return stopped(result) if cut else result


def one_device_misfits(graph: Graph, cluster: Cluster, times: np.ndarray | None = None, *,
                       memory: bool = True) -> list[str | None]:
    """Per device, why it cannot take every op of ``graph`` alone: an op it may not run (its kind, or a pin
    elsewhere), or (``memory``) the ops' parameters and activations above its memory; ``None`` where it can.
    ``times``: ``cluster.times(graph)`` where the caller has it. The one rule of every one-device split."""
    times = cluster.times(graph) if times is None else times
    size = graph.param_bytes + graph.activation_bytes
    need = float(size.sum())
    out: list[str | None] = []
    for d, dev in enumerate(cluster.devices):
        bad = np.flatnonzero(~np.isfinite(times[:, d]))
        if bad.size:
            out.append(f"{dev.name!r} cannot run op {graph.names[bad[0]]!r} (kind {dev.kind!r})")
        elif memory and need > float(cluster.memory[d]) * (1 + SLACK):
            out.append(f"{dev.name!r} holds {dev.memory:.6g} < {need:.6g} needed "
                       f"(largest op {graph.names[int(np.argmax(size))]!r})")
        else:
            out.append(None)
    return out


@njit(cache=True)
def _score(comp, mem, tin, tout, cap, tscale, ovf, overlap):
    """(max load, sum of squared loads): the max first, the spread to break its plateaus."""
    worst = 0.0
    spread = 0.0
    for d in range(comp.size):
        load = stage_load(comp[d], tin[d] * tscale[d], tout[d] * tscale[d], max(mem[d] - cap[d], 0.0) * ovf[d],
                          overlap)
        worst = max(worst, load)
        spread += load * load
    return worst, spread


@njit(cache=True)
def _tensor_terms(a, row, size, sign, din, dout):
    """Tensor of size ``size`` made on device ``a`` with ``row[d]`` consumers on device ``d``."""
    sent = False
    for d in range(row.size):
        if d != a and row[d] > 0:
            din[d] += sign * size
            sent = True
    if sent:
        dout[a] += sign * size


@njit(cache=True)
def _move_delta(G, b, gptr, gmem_idx, gid, dev, cnt, pred_ptr, pred_idx, succ_ptr, succ_idx, out_bytes,
                stamp, token, din, dout, row):
    """Transfer deltas of moving group ``G`` to device ``b`` (each affected tensor re-counted once)."""
    a = dev[gmem_idx[gptr[G]]]
    for k in range(gptr[G], gptr[G + 1]):
        v = gmem_idx[k]
        for e in range(pred_ptr[v], pred_ptr[v + 1] + 1):
            u = pred_idx[e] if e < pred_ptr[v + 1] else v
            if stamp[u] == token:
                continue
            stamp[u] = token
            inside = 0
            for f in range(succ_ptr[u], succ_ptr[u + 1]):
                if gid[succ_idx[f]] == G:
                    inside += 1
            if inside == 0 and gid[u] != G:
                continue
            _tensor_terms(dev[u], cnt[u], out_bytes[u], -1.0, din, dout)
            row[:] = cnt[u]
            row[a] -= inside
            row[b] += inside
            _tensor_terms(b if gid[u] == G else dev[u], row, out_bytes[u], 1.0, din, dout)


@njit(cache=True)
def _better(v0, v1, b0, b1):
    return v0 < b0 * (1.0 - 1e-12) or (v0 <= b0 and v1 < b1 * (1.0 - 1e-12))


@njit(cache=True)
def group_moves(dev, gid, gptr, gmem_idx, gtime, gmem, times, mem_op, pred_ptr, pred_idx, succ_ptr, succ_idx,
                out_bytes, cap, hard, tscale, ovf, overlap, max_moves, deadline, fw):
    """Best single-group move until none improves (max load, then spread), or ``time.monotonic()`` passes
    ``deadline`` (read before every move). With ``fw`` (each op's forward flag, empty: none) a move that makes the
    devices' forward edges cyclic while they were not is refused (:func:`.stage_order.makes_cycle`): a schedule of
    stages needs them in a chain."""
    n = dev.size
    order = fw.size > 0
    fe = forward_edges(dev, fw, succ_ptr, succ_idx, cap.size) if order else np.zeros((1, 1), np.int64)
    D = cap.size
    nG = gptr.size - 1
    own = np.arange(D)  # times has one row per device
    cnt = np.zeros((n, D), dtype=np.int32)
    for v in range(n):
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            cnt[pred_idx[e], dev[v]] += 1
    comp, mem, tin, tout = device_tallies(dev, own, times, mem_op, succ_ptr, succ_idx, out_bytes, D)
    b0, b1 = _score(comp, mem, tin, tout, cap, tscale, ovf, overlap)
    stamp = np.full(n, -1, dtype=np.int64)
    din = np.zeros(D)
    dout = np.zeros(D)
    row = np.zeros(D, dtype=np.int32)
    token = 0
    moves = 0
    while moves < max_moves:
        if deadline < np.inf and clock() > deadline:
            break
        best_g, best_d, n0, n1 = -1, -1, b0, b1
        for G in range(nG):
            a = dev[gmem_idx[gptr[G]]]
            for d in range(D):
                if d == a or gtime[G, d] == np.inf or (hard and mem[d] + gmem[G] > cap[d] * (1.0 + 1e-9)):
                    continue
                din[:] = 0.0
                dout[:] = 0.0
                token += 1
                _move_delta(G, d, gptr, gmem_idx, gid, dev, cnt, pred_ptr, pred_idx, succ_ptr, succ_idx,
                            out_bytes, stamp, token, din, dout, row)
                comp[a] -= gtime[G, a]
                comp[d] += gtime[G, d]
                mem[a] -= gmem[G]
                mem[d] += gmem[G]
                v0, v1 = _score(comp, mem, tin + din, tout + dout, cap, tscale, ovf, overlap)
                comp[a] += gtime[G, a]
                comp[d] -= gtime[G, d]
                mem[a] += gmem[G]
                mem[d] -= gmem[G]
                if _better(v0, v1, n0, n1) and not (order and makes_cycle(fe, G, d, a, gid, gptr, gmem_idx, fw,
                                                                            pred_ptr, pred_idx, succ_ptr, succ_idx,
                                                                            dev)):
                    best_g, best_d, n0, n1 = G, d, v0, v1
        if best_g < 0:
            break
        for k in range(gptr[best_g], gptr[best_g + 1]):
            v = gmem_idx[k]
            for e in range(pred_ptr[v], pred_ptr[v + 1]):
                cnt[pred_idx[e], dev[v]] -= 1
                cnt[pred_idx[e], best_d] += 1
            dev[v] = best_d
        comp, mem, tin, tout = device_tallies(dev, own, times, mem_op, succ_ptr, succ_idx, out_bytes, D)
        b0, b1 = _score(comp, mem, tin, tout, cap, tscale, ovf, overlap)
        if order:
            fe = forward_edges(dev, fw, succ_ptr, succ_idx, D)
        moves += 1
    return dev, b0, moves


def random_start(gtime: np.ndarray, gmem: np.ndarray, cap: np.ndarray, hard: bool,
                 rng: np.random.Generator) -> np.ndarray:
    """Each group (in random order) on a random allowed device with room left."""
    free = cap.copy()
    out = np.empty(len(gmem), dtype=np.int64)
    for G in rng.permutation(len(gmem)):
        ok = np.isfinite(gtime[G]) & ((free >= gmem[G] * (1 - SLACK)) | (not hard))
        pool = np.flatnonzero(ok) if ok.any() else np.flatnonzero(np.isfinite(gtime[G]))
        if pool.size == 0:
            raise InfeasibleError(f"local search: group #{G} may run on no device")
        out[G] = rng.choice(pool)
        free[out[G]] -= gmem[G]
    return out


def group_arrays(graph: Graph, cluster: Cluster) -> tuple[np.ndarray, ...]:
    """The local searches' view of colocation groups: per-device op times ``(D, n)``, each op's group,
    the ops sorted by group with the groups' offsets, and per-group times ``(G, D)`` (inf where not allowed)."""
    times = cluster.times(graph).T.copy()
    _, gid = np.unique(graph.group_id, return_inverse=True)
    gid = gid.astype(np.int64)
    gmem_idx = np.argsort(gid, kind="stable")
    gptr = np.concatenate([[0], np.cumsum(np.bincount(gid))]).astype(np.int64)
    with np.errstate(invalid="ignore"):
        gtime = np.stack([np.bincount(gid, weights=times[d]) for d in range(cluster.size)], axis=1)
    gtime[~np.isfinite(gtime)] = np.inf
    return times, gid, gmem_idx, gptr, gtime
