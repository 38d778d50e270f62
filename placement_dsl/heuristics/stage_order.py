"""The stage order a pipeline schedule needs, kept by local search's descents.

Interleaved 1F1B, ZB-H1, ZBV and GPipe's fill and drain with micro-batches run a placement's stages in a chain
(:mod:`placement_dsl.stage_schedules`, :func:`placement_dsl.training.pass_cycle`): where the forward edges between
devices form a cycle, no schedule runs the split and the cost model prices it ``inf``. A descent on max-load alone
reaches such splits most of the time. :func:`makes_cycle` refuses a move that closes a cycle among the devices'
forward edges (an acyclic device graph has acyclic virtual stages too), in ``O(deg(G) + D^2)`` per move it checks,
and :func:`chain_start` gives the random restarts a start whose device graph is acyclic: the groups along a random
topological order, cut into one run per device.
"""
from __future__ import annotations

import heapq

import numpy as np

from ..evaluate import CostModel
from .jit import njit


def needs_chain(model: CostModel | None) -> bool:
    """Whether ``model``'s schedule refuses a split whose stages form a cycle (:attr:`.CostModel.chained_stages`)."""
    return model is not None and model.chained_stages


@njit(cache=True)
def forward_edges(dev, fw, succ_ptr, succ_idx, D):
    """``(D, D)`` counts of forward edges from an op on one device to an op on another."""
    fe = np.zeros((D, D), np.int64)
    for u in range(dev.size):
        if not fw[u]:
            continue
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            v = succ_idx[e]
            if fw[v] and dev[u] != dev[v]:
                fe[dev[u], dev[v]] += 1
    return fe


@njit(cache=True)
def _acyclic(fe):
    """Kahn's test on the device graph of ``fe > 0``."""
    D = fe.shape[0]
    indeg = np.zeros(D, np.int64)
    for a in range(D):
        for b in range(D):
            if fe[a, b] > 0:
                indeg[b] += 1
    ready = [d for d in range(D) if indeg[d] == 0]
    seen = 0
    while ready:
        a = ready.pop()
        seen += 1
        for b in range(D):
            if fe[a, b] > 0:
                indeg[b] -= 1
                if indeg[b] == 0:
                    ready.append(b)
    return seen == D


@njit(cache=True)
def makes_cycle(fe, G, d, a, gid, gptr, gmem_idx, fw, pred_ptr, pred_idx, succ_ptr, succ_idx, dev):
    """Whether moving group ``G`` from device ``a`` to ``d`` makes the acyclic device graph ``fe`` cyclic (a graph
    cyclic already refuses nothing: the move cannot make it worse as a schedule)."""
    if not _acyclic(fe):
        return False
    new = fe.copy()
    for k in range(gptr[G], gptr[G + 1]):
        v = gmem_idx[k]
        if not fw[v]:
            continue
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[e]
            if fw[u] and gid[u] != G:
                if dev[u] != a:
                    new[dev[u], a] -= 1
                if dev[u] != d:
                    new[dev[u], d] += 1
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ_idx[e]
            if fw[w] and gid[w] != G:
                if dev[w] != a:
                    new[a, dev[w]] -= 1
                if dev[w] != d:
                    new[d, dev[w]] += 1
    return not _acyclic(new)


def chain_start(graph, gid: np.ndarray, gtime: np.ndarray, gmem: np.ndarray, cap: np.ndarray, hard: bool,
                rng: np.random.Generator) -> np.ndarray | None:
    """Each group's device: the groups along a random topological order of the forward ops (ties broken at random),
    cut into runs, one per device in a random order, each run ending past a random share of the least total time or
    where the device's memory is full; ``None`` where the order does not fit (a group no device left may hold)."""
    fw = ~graph.backward
    indeg = np.zeros(graph.n, np.int64)
    np.add.at(indeg, graph.dst[fw[graph.src] & fw[graph.dst]], 1)
    key = rng.random(graph.n)
    ready = [(key[u], u) for u in np.flatnonzero(fw & (indeg == 0)).tolist()]
    heapq.heapify(ready)
    groups: list[int] = []
    placed = np.zeros(gmem.size, bool)
    while ready:
        _, u = heapq.heappop(ready)
        if not placed[gid[u]]:
            placed[gid[u]] = True
            groups.append(int(gid[u]))
        for e in range(graph.succ_ptr[u], graph.succ_ptr[u + 1]):
            v = int(graph.succ_idx[e])
            if fw[v]:
                indeg[v] -= 1
                if indeg[v] == 0:
                    heapq.heappush(ready, (key[v], v))
    groups += np.flatnonzero(~placed).tolist()  # groups of backward ops alone
    least = np.where(np.isfinite(gtime), gtime, np.inf).min(axis=1)
    total = float(least[np.isfinite(least)].sum())
    devices = rng.permutation(cap.size)
    for share in (rng.dirichlet(np.ones(cap.size)) * total, np.full(cap.size, total / cap.size),
                  np.full(cap.size, np.inf)):  # a random cut, an even one, each device filled to its memory
        found = _cut(groups, devices, share, gtime, gmem, cap, hard)
        if found is not None:
            return found
    return None


def _cut(groups: list[int], devices: np.ndarray, share: np.ndarray, gtime: np.ndarray, gmem: np.ndarray,
         cap: np.ndarray, hard: bool) -> np.ndarray | None:
    """``groups`` in order cut into one run per device of ``devices``, each run ending past its ``share`` of time or
    where the device's memory is full; ``None`` where the devices run out."""
    out = np.full(gmem.size, -1, np.int64)
    j, load, mem = 0, 0.0, 0.0
    for G in groups:
        while j < cap.size and (not np.isfinite(gtime[G, devices[j]]) or (hard and mem + gmem[G] > cap[devices[j]])
                                or (load >= share[j] and j < cap.size - 1)):
            j, load, mem = j + 1, 0.0, 0.0
        if j == cap.size:
            return None
        out[G] = devices[j]
        load, mem = load + float(gtime[G, devices[j]]), mem + float(gmem[G])
    return out
