"""Sums over every ideal of a graph, walked level by level: the memory bounds' pass over the ideals, without the
DP's lattice and without compiled kernels.

The memory bounds (:mod:`.host_share`, :mod:`.ordered_memory`) need, for every ideal ``I`` (a down-closed op set),
a few sums ``sum_{v in I} values[v]``: nothing of the lattice the DP builds (its bitsets, its sub-ideal links).
The ideals are grown breadth-first by cardinality, each by the ops ready to join it (all their predecessors
inside): the ready ops of ``I`` are the minimal ops outside it, an antichain, so ``I`` plus any subset of them is
an ideal and more than ``log2(cap)`` of them proves more than ``cap`` ideals. Growing ``I`` by a ready op ``x``
keeps the others ready and adds the successors of ``x`` whose predecessors are all inside now, so a step costs its
ready ops and the successors of ``x``, not a pass over the graph (the DP's enumeration reads every op for every
ideal: ``O(N n)``, 0.7 s for the 21,121 ideals of 20,000 chained ResNet-152 ops, and its sums as much again). An
ideal's sums are its parent's plus the op it grew by; only two levels of ideals are held at a time.

Before the walk, :func:`~placement_dsl.structure.count_ideals` refuses in ``O(n + m)`` steps and a bounded number of
frontier patterns a graph of more than ``cap`` ideals that it can count (four chains of 5,000 ops side by side:
refused after a few hundred ops); the walk stops at ``cap`` or ``deadline`` otherwise.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..errors import SpecError
from ..graph import Graph
from ..structure import count_ideals
from .base import TimeLimitReached

COUNT_WORK = 5_000  # frontier patterns the count may visit before the walk (with its cap) decides: enough to see a
# count pass the cap where it grows fast (four chains side by side pass 100,000 within 2,600), a quarter of the
# 20,000 steps of a chain of blocks (cnn-20000: counting all of them cost as much as the walk, 0.5 s at load 6)
CHECK_EVERY = 256  # ideals grown between two readings of the clock


def adjacency(graph: Graph) -> tuple[list[list[int]], list[list[int]]]:
    """The graph's predecessor and successor lists, ``O(n + m)``."""
    def lists(ptr: np.ndarray, idx: np.ndarray) -> list[list[int]]:
        p, i = ptr.tolist(), idx.tolist()
        return [i[p[v]:p[v + 1]] for v in range(graph.n)]
    return lists(graph.pred_ptr, graph.pred_idx), lists(graph.succ_ptr, graph.succ_idx)


def ideal_sums_walked(graph: Graph, values: np.ndarray, cap: int, deadline: float | None = None) -> np.ndarray:
    """``out[j] = sum of values[v] over the ops v of ideal j``, one row per ideal of ``graph`` (the empty one first,
    then by cardinality); ``values`` is ``n x K``. :class:`SpecError` beyond ``cap`` ideals (found by the count or
    the walk, before ``cap`` are held), :class:`~.base.TimeLimitReached` once ``time.monotonic()`` passes
    ``deadline``.

    >>> from placement_dsl.graph import Op
    >>> g = Graph([Op(name=x, work=1) for x in "abc"], [("a", "b"), ("a", "c")])  # ideals {}, a, ab, ac, abc
    >>> ideal_sums_walked(g, np.array([[1.0], [2.0], [4.0]]), cap=10)[:, 0].tolist()
    [0.0, 1.0, 3.0, 5.0, 7.0]
    """
    values = np.asarray(values, dtype=float).reshape(graph.n, -1)
    pred, succ = adjacency(graph)
    counted, _ = count_ideals(pred, cap=cap, work=COUNT_WORK)
    if counted > cap:
        raise _too_many(graph, cap)
    parent, node = walk(pred, succ, cap, math.inf if deadline is None else deadline, graph)
    out = np.zeros((len(parent), values.shape[1]))
    for k in range(values.shape[1]):  # an ideal's sums: its parent's (an earlier row) plus its op's
        column, vk = [0.0] * len(parent), values[:, k].tolist()
        for j in range(1, len(parent)):
            column[j] = column[parent[j]] + vk[node[j]]
        out[:, k] = column
    return out


def walk(pred: list[list[int]], succ: list[list[int]], cap: int, deadline: float,
         graph: Graph) -> tuple[list[int], list[int]]:
    """Every ideal as ``(parent, op)``: ideal ``j >= 1`` is ideal ``parent[j]`` (an earlier one) plus op ``node[j]``;
    ideal 0 is empty. Breadth-first by cardinality; the module's docstring says how a step grows."""
    widest = math.log2(max(cap, 1))
    parent, node = [-1], [-1]
    level: list[tuple[int, list[int]]] = [(0, [v for v in range(len(pred)) if not pred[v]])]
    base = 0
    while level:
        grown: dict[int, None] = {}
        nxt: list[tuple[int, list[int]]] = []
        for i, (mask, ready) in enumerate(level):
            if len(ready) > widest:  # an antichain of that many ops: 2 ** len(ready) ideals above this one
                raise _too_many(graph, cap)
            if i % CHECK_EVERY == CHECK_EVERY - 1 and time.monotonic() > deadline:
                raise _late(graph, len(parent))
            for x in ready:
                bigger = mask | 1 << x
                if bigger in grown:
                    continue
                grown[bigger] = None
                parent.append(base + i)
                node.append(x)
                if len(parent) > cap:
                    raise _too_many(graph, cap)
                more = [y for y in succ[x] if len(pred[y]) == 1 or all(bigger >> z & 1 for z in pred[y])]
                nxt.append((bigger, [y for y in ready if y != x] + more))
        if time.monotonic() > deadline:
            raise _late(graph, len(parent))
        base += len(level)
        level = nxt
    return parent, node


def _too_many(graph: Graph, cap: int) -> SpecError:
    return SpecError(f"graph {graph.name!r} has more than {cap} ideals ({graph.n} ops); its memory bound would "
                     "enumerate them all")


def _late(graph: Graph, found: int) -> TimeLimitReached:
    return TimeLimitReached(f"the time limit passed while walking the ideals of graph {graph.name!r} ({found} so far, "
                            f"{graph.n} ops)")
