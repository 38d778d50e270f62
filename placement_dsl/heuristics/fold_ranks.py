"""Stages folded onto ranks (ZBV's V): the DP's split re-balanced by the ranks' loads.

Under a schedule that folds its stages onto ranks (:data:`~placement_dsl.pipeline_orders.FOLDS`: ZBV,
Qi et al. §6) rank ``k`` of ``p`` runs stages ``k`` and ``2p - 1 - k``; its load is the sum of two
stages from both ends of the chain of ideals ``I_0 < I_1 < ... < I_2p``. The DP over ideals
(Tarnawski et al. §5.1.1) extends the chain one stage at a time and its value depends on the newest
stage alone, so it minimizes the most work of one stage (device): to carry the pairing it would need a
state per pair of ideals ``(I_k, I_2p-k)`` and transitions between such pairs (``O(N^4)`` for ``N``
ideals), which it does not have. Its split may then leave one rank with two heavy stages, or use an odd
number of stages, which the V cannot fold.

:func:`rebalance` starts from the DP's stages and, while the cost model's objective falls, moves one
supernode across a stage boundary (each prefix stays an ideal, no stage empties); an odd count is first
made even by splitting a stage (or merging the last two). It is a local search scored by
:func:`~placement_dsl.evaluate.evaluate` (the ranks' orders, as the simulator runs them): it proves no
bound, and the heuristics claim none under ``zbv`` (:func:`.base.run`).
"""
from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from ..evaluate import CostModel, evaluate
from ..placement import Placement
from .contract import Contraction

Stages = list[np.ndarray]  # supernodes of each stage, in pipeline order
MAX_EVALUATIONS = 2000  # the cost model's calls one rebalance makes at most
MAX_WORK = 4_000_000  # ... and at most this many ops scored in all (a 20,000-op graph: 200 calls)
MAX_NODES = 64  # off a path, chains of ideals are enumerated on DAGs of at most this many supernodes
REL_TOL = 1e-9


def _neighbours(con: Contraction) -> tuple[list[list[int]], list[list[int]]]:
    succ: list[list[int]] = [[] for _ in range(con.n_nodes)]
    pred: list[list[int]] = [[] for _ in range(con.n_nodes)]
    for a, b in zip(con.src.tolist(), con.dst.tolist()):
        succ[a].append(b)
        pred[b].append(a)
    return succ, pred


def moves(stages: Stages, succ: list[list[int]], pred: list[list[int]]) -> Iterator[Stages]:
    """Every split one supernode away from ``stages``: a node of stage ``k`` whose successors all lie past it moves
    to stage ``k + 1``, a node of stage ``k + 1`` whose predecessors all lie before it to stage ``k`` (so each
    prefix stays an ideal); no stage empties."""
    where = {int(x): s for s, nodes in enumerate(stages) for x in nodes.tolist()}
    for k in range(len(stages) - 1):
        for src, dst in ((k, k + 1), (k + 1, k)):
            if len(stages[src]) < 2:
                continue
            for x in stages[src].tolist():
                if all(where[y] > k for y in succ[x]) if src == k else all(where[y] <= k for y in pred[x]):
                    new = list(stages)
                    new[src] = stages[src][stages[src] != x]
                    new[dst] = np.sort(np.append(stages[dst], x))
                    yield new


def evened(stages: Stages, devices: int) -> list[Stages]:
    """Splits with an even number of stages made from an odd ``stages``: a stage cut in two at its middle supernode
    (supernodes are numbered topologically, so a stage's first half after the stages before it is an ideal) while
    the devices allow, and the last two stages merged."""
    out = []
    if len(stages) < devices:
        for k, nodes in enumerate(stages):
            if len(nodes) > 1:
                half = len(nodes) // 2
                out.append([*stages[:k], nodes[:half], nodes[half:], *stages[k + 1:]])
    if len(stages) > 1:
        out.append([*stages[:-2], np.sort(np.concatenate(stages[-2:]))])
    return out


def splits_of_a_path(con: Contraction, devices: int) -> list[Stages] | None:
    """Where the supernodes form a path (each has an edge to the next: the ideals are the prefixes), every split into
    an even number of stages, at most ``devices``, if there are at most :data:`MAX_EVALUATIONS`; else ``None``."""
    n = con.n_nodes
    if not _is_path(con):
        return None
    counts = range(2, min(devices, n) + 1, 2)
    if sum(math.comb(n - 1, h - 1) for h in counts) > MAX_EVALUATIONS:
        return None
    nodes = np.arange(n)
    return [np.split(nodes, cuts) for h in counts for cuts in itertools.combinations(range(1, n), h - 1)]


def _is_path(con: Contraction) -> bool:
    n = con.n_nodes
    return n > 0 and {(i, i + 1) for i in range(n - 1)} <= set(zip(con.src.tolist(), con.dst.tolist()))


def ideals(con: Contraction, cap: int = MAX_EVALUATIONS) -> list[int] | None:
    """Every ideal (a set of supernodes closed under predecessors) of ``con``'s DAG as a bit mask, smallest first, if
    there are at most ``cap``; else ``None``. Each ideal grows by the supernodes all of whose predecessors it holds
    (kept per ideal, so a step costs its ready nodes and their successors, not a pass over the DAG)."""
    succ, pred = _neighbours(con)
    start = frozenset(x for x in range(con.n_nodes) if not pred[x])
    seen, frontier = {0}, [(0, start)]
    while frontier:
        grown = []
        for ideal, ready in frontier:
            for x in ready:
                bigger = ideal | 1 << x
                if bigger in seen:
                    continue
                seen.add(bigger)
                if len(seen) > cap:
                    return None
                new = [y for y in succ[x] if all(bigger >> z & 1 for z in pred[y])]
                grown.append((bigger, (ready - {x}) | frozenset(new)))
        frontier = grown
    return sorted(seen, key=lambda i: (i.bit_count(), i))


def splits_of_ideals(con: Contraction, devices: int, cap: int = MAX_EVALUATIONS) -> list[Stages] | None:
    """Every chain of ideals ``{} < I_1 < ... < I_h = all`` with an even number ``h`` of stages, at most ``devices``
    (the DP's class, folded: stage ``k`` is ``I_k+1 - I_k``), if there are at most ``cap``; else ``None``. On a path
    the ideals are the prefixes (:func:`splits_of_a_path`); off one, DAGs of at most :data:`MAX_NODES` supernodes."""
    n = con.n_nodes
    if _is_path(con) or n > MAX_NODES:
        return splits_of_a_path(con, devices)
    every = ideals(con, cap) if n else None
    if every is None:
        return None
    full, inner = (1 << n) - 1, [i for i in every if i not in (0, (1 << n) - 1)]
    out: list[Stages] = []
    steps = 0

    def grow(chain: list[int]) -> bool:
        nonlocal steps
        if (len(chain) + 1) % 2 == 0 and len(chain) + 1 <= devices:
            out.append(_stages_of([0, *chain, full]))
            if len(out) > cap:
                return False
        if len(chain) + 2 > devices:
            return True
        last = chain[-1] if chain else 0
        steps += len(inner)
        return steps <= 50 * cap and all(grow([*chain, i]) for i in inner if i & last == last and i != last)

    return out if grow([]) else None


def _stages_of(chain: list[int]) -> Stages:
    """The stages of a chain of ideals (bit masks): the supernodes each adds, in order."""
    return [np.array([x for x in range(b.bit_length()) if (b & ~a) >> x & 1], dtype=np.int64)
            for a, b in itertools.pairwise(chain)]


def rebalance(con: Contraction, stages: Stages, score: Callable[[Stages], float], devices: int,
              deadline: float | None = None, evaluations: int = MAX_EVALUATIONS) -> Stages:
    """``stages`` (supernodes per stage, in pipeline order) improved by single moves while ``score`` (the cost model's
    objective; ``inf`` when invalid) falls by more than a relative ``1e-9``: steepest descent, at most
    ``evaluations`` scores, none started after ``deadline`` (``time.monotonic()``). Where the supernodes
    form a small DAG, the best of all its chains of ideals into an even number of stages instead
    (:func:`splits_of_ideals`: the best of the DP's class under the ranks' loads)."""
    succ, pred = _neighbours(con)
    spent = 0

    def best_of(candidates: Iterable[Stages], current: float) -> tuple[float, Stages | None]:
        nonlocal spent
        found, chosen = current, None
        for c in candidates:
            if spent >= evaluations or (deadline is not None and time.monotonic() > deadline):
                break
            spent += 1
            value = score(c)
            if value < found and (np.isinf(found) or value < found - REL_TOL * max(1.0, abs(found))):
                found, chosen = value, c
        return found, chosen

    every = splits_of_ideals(con, devices) if evaluations >= MAX_EVALUATIONS else None
    value = score(stages)
    if every is not None:  # the best of them, or the start if none beats it before the deadline
        found, chosen = best_of(every, value)
        return stages if chosen is None else chosen
    if len(stages) % 2:
        found, chosen = best_of(evened(stages, devices), np.inf)
        if chosen is not None:
            value, stages = found, chosen
    while True:
        found, chosen = best_of(moves(stages, succ, pred), value)
        if chosen is None:
            return stages
        value, stages = found, chosen


def scorer(graph, cluster, model: CostModel, place: Callable[[Stages], np.ndarray]) -> Callable[[Stages], float]:
    """The cost model's objective of a split (``place``: stages -> op assignment), ``inf`` when it is invalid."""
    def score(stages: Stages) -> float:
        ev = evaluate(Placement(graph, cluster, place(stages)), model)
        return float(ev.objective) if ev.valid else float("inf")
    return score
