"""Descent over DAG-ordered placements on identical stages: single-op moves between stages.

The slicing heuristics (SliceGraph, BRKGA; Archer et al. ICML 2024, Alg. 1-2) cut one
topological order optimally; the best DAG-ordered placement need not be a slicing of the orders
they try. This search starts from any DAG-ordered placement and moves one op at a time: with the
stages in the order of their quotient DAG (position ``pos[d]``), op ``v`` may move to any stage
between the last position of its predecessors and the first of its successors, which keeps the
quotient acyclic. Among all such moves it takes the best one for the key ``(max load, sum of
squared loads)`` (the second part lets a plateau of the max load drain its busiest stage), until
none improves; then it kicks a few random ops to feasible stages and descends again, keeping the
best placement (iterated local search), until the time is up.

Loads are those of :mod:`placement_dsl.evaluate` for one identical device type without overlap
(``compute + tensors in + tensors out + overflow``): a tensor is paid once by every stage
holding some but not all of its producer and consumers. The answer is re-checked by the cost
model (``problem.evaluate``) and ``problem.violations``; only a valid improvement replaces the start.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..bounds import local
from ..placement import Placement
from ..problem import Problem


class StageLoads:
    """Stage loads of an assignment, vectorized over tensors (one net per producer with consumers)."""

    def __init__(self, problem: Problem):
        g, c = problem.graph, problem.cluster
        self.k = c.size
        self.compute = c.times(g)[:, 0].astype(float)
        nets = [(p, np.unique(np.concatenate([[p], g.successors(p)]))) for p in range(g.n)
                if len(g.successors(p)) and g.out_bytes[p] > 0]
        self.net_of = np.concatenate([np.full(len(m), i) for i, (_, m) in enumerate(nets)]) if nets else np.zeros(0, int)
        self.member = np.concatenate([m for _, m in nets]) if nets else np.zeros(0, int)
        self.cost = np.array([g.out_bytes[p] for p, _ in nets], dtype=float) * float(c.transfer_scale[0])
        self.n_nets = len(nets)
        self.mem = (g.param_bytes + g.activation_bytes).astype(float)
        dev = c.devices[0]
        soft = problem.cost_model().memory.value == "overflow" and math.isfinite(dev.memory)
        self.capacity, self.bandwidth, self.soft = float(dev.memory), float(dev.bandwidth), soft

    def __call__(self, dev: np.ndarray) -> np.ndarray:
        load = np.bincount(dev, weights=self.compute, minlength=self.k)
        if self.n_nets:
            touched = np.zeros((self.n_nets, self.k), dtype=bool)
            touched[self.net_of, dev[self.member]] = True
            cut = touched.sum(axis=1) > 1
            load += (touched[cut] * self.cost[cut, None]).sum(axis=0)
        if self.soft:
            mem = np.bincount(dev, weights=self.mem, minlength=self.k)
            load += np.maximum(mem - self.capacity, 0.0) / self.bandwidth
        return load


_Loads = StageLoads  # the former name, kept for one release


def _key(load: np.ndarray) -> tuple[float, float]:
    return float(load.max()), float((load * load).sum())


def _positions(problem: Problem, dev: np.ndarray) -> np.ndarray | None:
    """``pos[d]``: the rank of stage ``d`` in a topological order of the quotient DAG (``None`` if it has a cycle)."""
    g, k = problem.graph, problem.cluster.size
    arcs = {(int(a), int(b)) for a, b in zip(dev[g.src], dev[g.dst]) if a != b}
    indeg = np.zeros(k, dtype=int)
    for _, b in arcs:
        indeg[b] += 1
    ready, pos, rank = [d for d in range(k) if indeg[d] == 0], np.full(k, -1), 0
    while ready:
        d = ready.pop()
        pos[d], rank = rank, rank + 1
        for a, b in arcs:
            if a == d:
                indeg[b] -= 1
                if indeg[b] == 0:
                    ready.append(b)
    return pos if rank == k else None


def _moves(problem: Problem, stage: np.ndarray, movable: np.ndarray) -> list[tuple[int, int]]:
    """``(op, position)`` for every op moved to another position between its predecessors' and successors'."""
    g, k = problem.graph, problem.cluster.size
    out = []
    for v in np.flatnonzero(movable).tolist():
        preds, succs = g.predecessors(v), g.successors(v)
        lo = int(stage[preds].max()) if len(preds) else 0
        hi = int(stage[succs].min()) if len(succs) else k - 1
        out.extend((v, q) for q in range(lo, hi + 1) if q != stage[v])
    return out


def _descend(problem: Problem, loads: _Loads, stage: np.ndarray, movable: np.ndarray,
             deadline: float) -> tuple[np.ndarray, tuple[float, float]]:
    """Best-improvement descent on positions ``stage`` (a copy is returned) and its key."""
    stage = stage.copy()
    key = _key(loads(stage))
    while time.perf_counter() < deadline:
        best, move = key, None
        for v, q in _moves(problem, stage, movable):
            old, stage[v] = stage[v], q
            k2 = _key(loads(stage))
            stage[v] = old
            if k2 < best:
                best, move = k2, (v, q)
        if move is None:
            break
        stage[move[0]], key = move[1], best
    return stage, key


def chain_descent(problem: Problem, start: Placement, seconds: float, seed: int = 0) -> Placement:
    """The best placement the descent and its kicks reach from ``start`` within ``seconds`` (``start`` if none
    beats it). ``problem``: max load on identical stages without overlap, DAG-ordered (``start`` must be)."""
    if local.problem_applies(problem) or not problem.is_valid(start):
        return start
    deadline = time.perf_counter() + seconds
    assign = np.asarray(start.assign, dtype=np.int64)
    pos = _positions(problem, assign)
    if pos is None:
        return start
    loads, rng = _Loads(problem), np.random.default_rng(seed)
    movable = np.ones(problem.graph.n, dtype=bool)
    for members in problem.graph.groups:
        movable[members] = False  # a colocation group moves as one; this search leaves it in place
    best, best_key = _descend(problem, loads, pos[assign], movable, deadline)
    while time.perf_counter() < deadline:
        stage = best.copy()
        for _ in range(int(rng.integers(2, 6))):
            moves = _moves(problem, stage, movable)
            if not moves:
                break
            v, q = moves[int(rng.integers(len(moves)))]
            stage[v] = q
        stage, key = _descend(problem, loads, stage, movable, deadline)
        if key < best_key:
            best, best_key = stage, key
    order = np.argsort(pos)  # position -> device of the start
    found = Placement(problem.graph, problem.cluster, order[best])
    ours, theirs = problem.evaluate(found), problem.evaluate(start)
    if not ours.valid or problem.violations(found) or ours.objective >= theirs.objective:
        return start
    return found
