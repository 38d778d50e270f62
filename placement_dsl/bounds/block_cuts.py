"""The least tensor time a contiguous device pays across the blocks beside its run of cut ops.

A device of :mod:`.cut_stages` whose cut ops are ``s_f .. s_l`` may hold part of the block ``A`` before ``s_f``
and part of the block ``B`` after ``s_l``. Being contiguous, its part of ``B`` is an *ideal* ``I`` (with an op,
every op of ``B`` before it: ``s_l`` reaches that op, which reaches one the device holds) and its part of ``A`` a
*filter* ``F``. It sends every tensor of ``s_l`` or ``I`` read in ``B \\ I`` or after ``s_{l+1}``, and receives
every tensor of ``A \\ F`` or of an op at or before ``s_{f-1}`` read in ``F`` or by ``s_f``. Whatever ``I`` and
``F`` are, it pays at least the least such sum: a minimum cut of a small network per block (each tensor a node
whose in-arc carries its time, read by arcs that cannot be cut; each order within the block an arc that cannot
be cut), the *hyperedge* cut of Lawler's construction. The tensors :func:`.cut_stages` already prices (``s_l``'s
when it is read after ``s_{l+1}``, an earlier op's when a cut op at or after ``s_f`` reads it) are left out, so
the two sum. A GPT-3 attention block's device pays about one hidden tensor each way beside it, whichever heads it
holds; at 16 stages the split falls there half the time. Identical blocks (a model's repeated layers) are cut
once: the network in the block's local numbering is the key.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from ..graph import Graph

Arc = tuple[int, int, float]


def segments(g: Graph, cuts: np.ndarray) -> np.ndarray:
    """Each op's segment: ``2i`` for the cut op ``i`` (``cuts`` in topological order), ``2i - 1`` for an op of the
    block between cut ops ``i - 1`` and ``i`` (``-1`` before the first, ``2r - 1`` after the last)."""
    pos = np.empty(g.n, dtype=np.int64)
    pos[g.topo] = np.arange(g.n)
    cut_pos = np.sort(pos[cuts])
    seg = 2 * np.searchsorted(cut_pos, pos, side="right") - 1
    seg[cuts] = 2 * np.searchsorted(cut_pos, pos[cuts])
    return seg


def block_costs(g: Graph, cuts: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(enter, leave)``: ``enter[f]`` the least time of the tensors a device whose first cut op is ``f``
    receives in its part of the block before ``s_f`` (beyond the hull's), ``leave[l]`` the least a device whose last
    cut op is ``l`` sends from its part of the block after ``s_l``; ``cuts`` the cut ops in topological order,
    ``size`` each op's tensor time. Any such device pays at least ``enter[f] + leave[l]`` more than the hull's
    tensors.

    >>> from placement_dsl.graph import Graph, Op
    >>> ops = [Op(name=n, work=1.0, out_bytes=b) for n, b in [("x", 4), ("h0", 1), ("h1", 1), ("y", 1)]]
    >>> g = Graph(ops, [("x", "h0"), ("x", "h1"), ("h0", "y"), ("h1", "y")])
    >>> block_costs(g, np.array([0, 3]), g.out_bytes)  # both heads' tensors, or x's
    (array([0., 2.]), array([2., 0.]))
    """
    r = len(cuts)
    seg = segments(g, cuts)
    order = np.argsort(seg, kind="stable")
    bounds = np.searchsorted(seg[order], np.arange(-1, 2 * r + 1))
    members = {s: order[bounds[s + 1]:bounds[s + 2]] for s in range(-1, 2 * r, 2) if bounds[s + 2] > bounds[s + 1]}
    cut_op = {int(seg[v]) // 2: int(v) for v in np.flatnonzero(seg % 2 == 0)}
    pos = np.empty(g.n, dtype=np.int64)
    pos[g.topo] = np.arange(g.n)
    enter, leave = np.zeros(r), np.zeros(r)
    cache: dict[tuple[Arc, ...], float] = {}
    for s, ops in members.items():
        if s + 1 < 2 * r:  # a block before cut op (s + 1) / 2
            enter[(s + 1) // 2] = _least(_entering(g, seg, pos, ops, s, cut_op[(s + 1) // 2], size), cache)
        if s > 0:  # a block after cut op (s - 1) / 2
            leave[(s - 1) // 2] = _least(_leaving(g, seg, pos, ops, s, cut_op[(s - 1) // 2], size), cache)
    return enter, leave


def _local(ops: np.ndarray, pos: np.ndarray) -> dict[int, int]:
    """The block's ops numbered 2.. in topological order (0 the source, 1 the sink)."""
    return {int(v): 2 + i for i, v in enumerate(ops[np.argsort(pos[ops])])}


def _leaving(g: Graph, seg: np.ndarray, pos: np.ndarray, ops: np.ndarray, s: int, cut: int,
             size: np.ndarray) -> list[Arc]:
    """The network of the block ``s`` after the cut op ``cut``: source side the device's ideal (and ``cut``), sink
    side the rest of the block and every op after the next cut op."""
    local = _local(ops, pos)
    arcs: list[Arc] = []
    tensor = len(local) + 2
    makers = [cut] + list(local) if not (seg[g.successors(cut)] > s).any() else list(local)
    for p in makers:
        readers = [local.get(int(q), 1) for q in g.successors(p) if seg[q] >= s]
        if size[p] <= 0 or not readers:
            continue
        arcs.append((local.get(p, 0), tensor, float(size[p])))
        arcs.extend((tensor, q, np.inf) for q in set(readers))
        tensor += 1
    arcs.extend((local[v], local[int(u)], np.inf) for v in local for u in g.predecessors(v) if int(u) in local)
    return arcs


def _entering(g: Graph, seg: np.ndarray, pos: np.ndarray, ops: np.ndarray, s: int, cut: int,
              size: np.ndarray) -> list[Arc]:
    """The network of the block ``s`` before the cut op ``cut``: source side every op before the block and the
    block's ops the device does not hold, sink side its filter and ``cut``."""
    local = _local(ops, pos)
    local_and_cut = {**local, cut: 1}
    arcs: list[Arc] = []
    tensor = len(local) + 2
    early = {int(u) for v in local for u in g.predecessors(v) if seg[u] < s}
    early = [u for u in sorted(early) if not (seg[g.successors(u)] > s).any()]  # else the hull's price has it
    for p in early + list(local):
        readers = {local_and_cut[int(q)] for q in g.successors(p) if int(q) in local_and_cut}
        if size[p] <= 0 or not readers:
            continue
        arcs.append((local.get(p, 0), tensor, float(size[p])))
        arcs.extend((tensor, q, np.inf) for q in readers)
        tensor += 1
    arcs.extend((local[int(w)], local[v], np.inf) for v in local for w in g.successors(v) if int(w) in local)
    return arcs


def _least(arcs: list[Arc], cache: dict[tuple[Arc, ...], float]) -> float:
    """The network's minimum cut from node 0 to node 1, once per distinct network."""
    key = tuple(arcs)
    if key not in cache:
        cache[key] = _max_flow(arcs)
    return cache[key]


def _max_flow(arcs: list[Arc]) -> float:
    """Edmonds-Karp on the arcs (shortest augmenting paths by breadth-first search); infinite arcs stay uncut."""
    finite = sum(c for _, _, c in arcs if np.isfinite(c))
    if finite <= 0:
        return 0.0
    big = 2.0 * finite + 1.0
    head: dict[int, list[int]] = {}
    to: list[int] = []
    cap: list[float] = []
    for u, v, c in arcs:
        for a, b, w in ((u, v, min(c, big)), (v, u, 0.0)):
            head.setdefault(a, []).append(len(to))
            to.append(b)
            cap.append(w)
    flow = 0.0
    while True:
        back = {0: -1}
        queue = deque([0])
        while queue and 1 not in back:
            u = queue.popleft()
            for e in head.get(u, ()):
                if cap[e] > 1e-12 * big and to[e] not in back:
                    back[to[e]] = e
                    queue.append(to[e])
        if 1 not in back:
            return min(flow, finite)
        path, v = [], 1
        while v != 0:
            path.append(back[v])
            v = to[back[v] ^ 1]
        push = min(cap[e] for e in path)
        for e in path:
            cap[e] -= push
            cap[e ^ 1] += push
        flow += push
