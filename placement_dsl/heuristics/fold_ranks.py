"""Stages folded onto ranks (ZBV's V): the DP's split re-balanced by the ranks' loads; any split made one torch's
orders run.

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
bound, and the heuristics claim none under ``zbv`` (:func:`.base.run`). Where the DAG has few chains of
ideals (:func:`splits_of_ideals`) all of them are scored instead: the best of the DP's class.

:func:`fold` makes any heuristic's answer that the V cannot fold into one that it folds (its colocation
groups as nodes, :func:`group_nodes`), then re-balances it; :func:`.base.run` applies it under ``zbv``. The same
mechanism makes an answer the round-robin orders (``interleaved-1f1b``, ``zb-h1``) cannot run into one they run:
one stage per device, their count one whose rounds split the micro-batches (:func:`~placement_dsl.pipeline_orders.runs`:
5 ranks do not split 64 micro-batches into rounds, as torch refuses too, so a split over 4 accelerators and a host
CPU is merged to 4 stages), re-balanced by the cost model; ``fits`` says which stage counts a schedule runs.

Where the cost model asks for ``v >= 2`` virtual stages per rank (``CostModel.virtual``; Megatron's virtual pipeline
stages), :func:`fold` answers with :func:`interleave`: the forward DAG's supernodes cut along their topological
numbering into ``p v`` stages (of the least bottleneck, :func:`balanced_cuts`, the path DP; of equal work; of equal
layers, Megatron's even layout: :func:`even_cuts`), stage ``s`` on rank ``s mod p``, each re-balanced by the cost
model as above with the count held at ``p v``, the best kept. Nothing here is exact: the cut is the DP's class on a
path and the ranks' loads sum stages from all along it, as under the V.
"""
from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..evaluate import CostModel, evaluate
from ..pipeline_orders import FOLDS, runs
from ..placement import Placement
from ..structure import ideal_masks

if TYPE_CHECKING:  # the DP's contraction; fold builds its own nodes (contract imports jit, which runs heuristics)
    from .contract import Contraction

Stages = list[np.ndarray]  # supernodes of each stage, in pipeline order
MAX_EVALUATIONS = 2000  # the cost model's calls one rebalance makes at most
MAX_WORK = 4_000_000  # ... and at most this many ops scored in all (a 20,000-op graph: 200 calls)
MAX_NODES = 64  # off a path, chains of ideals are enumerated on DAGs of at most this many supernodes
REL_TOL = 1e-9


def even(stages: int) -> bool:
    """The V's stage counts (ZBV): even, at least 2; the default ``fits`` of :func:`rebalance`."""
    return runs("zbv", stages)


def stage_counts(model: CostModel) -> Callable[[int], bool]:
    """The stage counts (one device each) whose orders ``model``'s schedule runs at its micro-batches."""
    name, m = str(model.name), model.microbatches
    return lambda stages: runs(name, stages, m)


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


def evened(stages: Stages, devices: int, fits: Callable[[int], bool] = even) -> list[Stages]:
    """Splits of a count ``fits`` accepts (the V's: even) made from ``stages`` one stage away: a stage cut in two at its
    middle supernode (supernodes are numbered topologically, so a stage's first half after the stages before it is an
    ideal) while the devices allow, and two adjacent stages merged (the last two last)."""
    out = []
    if len(stages) < devices and fits(len(stages) + 1):
        for k, nodes in enumerate(stages):
            if len(nodes) > 1:
                half = len(nodes) // 2
                out.append([*stages[:k], nodes[:half], nodes[half:], *stages[k + 1:]])
    if fits(len(stages) - 1):
        out += [[*stages[:k], np.sort(np.concatenate(stages[k:k + 2])), *stages[k + 2:]] for k in range(len(stages) - 1)]
    return out


def splits_of_a_path(con: Contraction, devices: int, fits: Callable[[int], bool] = even) -> list[Stages] | None:
    """Where the supernodes form a path (each has an edge to the next: the ideals are the prefixes), every split into
    a count of stages ``fits`` accepts (the V's: even), at most ``devices``, if there are at most
    :data:`MAX_EVALUATIONS`; else ``None``."""
    n = con.n_nodes
    if not _is_path(con):
        return None
    counts = [h for h in range(1, min(devices, n) + 1) if fits(h)]
    if sum(math.comb(n - 1, h - 1) for h in counts) > MAX_EVALUATIONS:
        return None
    nodes = np.arange(n)
    return [np.split(nodes, cuts) for h in counts for cuts in itertools.combinations(range(1, n), h - 1)]


def _is_path(con: Contraction) -> bool:
    n = con.n_nodes
    return n > 0 and {(i, i + 1) for i in range(n - 1)} <= set(zip(con.src.tolist(), con.dst.tolist()))


def ideals(con: Contraction, cap: int = MAX_EVALUATIONS) -> list[int] | None:
    """Every ideal (a set of supernodes closed under predecessors) of ``con``'s DAG as a bit mask, smallest first, if
    there are at most ``cap``; else ``None`` (:func:`~placement_dsl.structure.ideal_masks`)."""
    return ideal_masks(*_neighbours(con), cap)


def splits_of_ideals(con: Contraction, devices: int, cap: int = MAX_EVALUATIONS,
                     fits: Callable[[int], bool] = even) -> list[Stages] | None:
    """Every chain of ideals ``{} < I_1 < ... < I_h = all`` whose count ``h`` of stages ``fits`` accepts (the V's:
    even), at most ``devices`` (the DP's class, folded: stage ``k`` is ``I_k+1 - I_k``), if there are at most ``cap``;
    else ``None``. On a path the ideals are the prefixes (:func:`splits_of_a_path`); off one, DAGs of at most
    :data:`MAX_NODES` supernodes."""
    n = con.n_nodes
    if _is_path(con) or n > MAX_NODES:
        return splits_of_a_path(con, devices, fits)
    every = ideals(con, cap) if n else None
    if every is None:
        return None
    full, inner = (1 << n) - 1, [i for i in every if i not in (0, (1 << n) - 1)]
    out: list[Stages] = []
    steps = 0

    def grow(chain: list[int]) -> bool:
        nonlocal steps
        if fits(len(chain) + 1) and len(chain) + 1 <= devices:
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


Score = float | tuple[float, float]  # the cost model's objective, or (bytes over memory, objective): scorer


def below(a: Score, b: Score) -> bool:
    """``a`` better than ``b`` by more than a relative ``1e-9`` (anything finite below infinite): a float is an
    objective, a pair (bytes over memory, objective) is compared by its bytes first."""
    pair_a, pair_b = (v if isinstance(v, tuple) else (0.0, v) for v in (a, b))
    for u, w in zip(pair_a, pair_b, strict=True):
        if u < w and (np.isinf(w) or u < w - REL_TOL * max(1.0, abs(w))):
            return True
        if w < u and (np.isinf(u) or w < u - REL_TOL * max(1.0, abs(u))):
            return False
    return False


def rebalance(con: Contraction, stages: Stages, score: Callable[[Stages], Score], devices: int,
              deadline: float | None = None, evaluations: int = MAX_EVALUATIONS,
              fits: Callable[[int], bool] = even, least: int = 0) -> Stages:
    """``stages`` (supernodes per stage, in pipeline order) improved by single moves while ``score`` (the cost model's
    objective, ``inf`` when invalid; or :func:`scorer`'s pair) falls (:func:`below`): steepest descent, at most
    ``evaluations`` scores, none started after ``deadline`` (``time.monotonic()``) but the first ``least``. Where the supernodes
    form a small DAG, the best of all its chains of ideals into a count of stages ``fits`` accepts (the V's: even)
    instead (:func:`splits_of_ideals`: the best of the DP's class under the ranks' loads); a count it does not accept
    is first made one (:func:`evened`)."""
    succ, pred = _neighbours(con)
    spent = 0

    def best_of(candidates: Iterable[Stages], current: float) -> tuple[float, Stages | None]:
        nonlocal spent
        found, chosen = current, None
        for c in candidates:
            if spent >= evaluations or (spent >= least and past(deadline)):
                break
            spent += 1
            value = score(c)
            if below(value, found):
                found, chosen = value, c
        return found, chosen

    every = splits_of_ideals(con, devices, fits=fits) if evaluations >= MAX_EVALUATIONS else None
    value = score(stages)
    if every is not None:  # the best of them, or the start if none beats it before the deadline
        found, chosen = best_of(every, value)
        return stages if chosen is None else chosen
    if not fits(len(stages)):
        found, chosen = best_of(evened(stages, devices, fits), (np.inf, np.inf))
        if chosen is not None:
            value, stages = found, chosen
    while True:
        found, chosen = best_of(moves(stages, succ, pred), value)
        if chosen is None:
            return stages
        value, stages = found, chosen


def past(deadline: float | None) -> bool:
    """Whether ``deadline`` (``time.monotonic()``, ``None``: none) has passed."""
    return deadline is not None and time.monotonic() > deadline


def scorer(graph, cluster, model: CostModel, place: Callable[[Stages], np.ndarray]
           ) -> Callable[[Stages], tuple[float, float]]:
    """``(bytes over memory, objective)`` of a split by the cost model (``place``: stages -> op assignment): ``(0,
    objective)`` when it is valid; where memory alone is over, the bytes over every device's capacity and the
    objective, so a descent from an overfull split moves towards one that fits; ``(inf, inf)`` otherwise."""
    def score(stages: Stages) -> tuple[float, float]:
        ev = evaluate(Placement(graph, cluster, place(stages)), model)
        if ev.valid:
            return 0.0, float(ev.objective)
        if any(v.check != "memory" for v in ev.binding):
            return math.inf, math.inf
        return sum(max(0.0, d.memory_used - d.memory_capacity) for d in ev.devices), float(ev.objective)
    return score


def fold(placement: Placement, model: CostModel, deadline: float | None = None, least: int = 0) -> Placement | None:
    """A split ``model``'s orders run, made from ``placement`` (which they do not run: under the V an odd number of
    devices, or devices whose ops reach each other through another device; under the round-robin orders a rank count
    whose rounds do not split the micro-batches, or a device holding stages they cannot interleave), then re-balanced
    by the cost model (:func:`rebalance`); ``None`` where none exists (fewer than 2 devices).

    The placement's colocation groups (:func:`group_nodes`) keep their devices' order where the device graph is
    acyclic (each device one stage, in a topological order); else each maximal run of one device along the supernodes'
    topological numbering is a stage, adjacent stages merged (the lightest pair first) down to the devices, and on
    down while no count one stage away is one the orders run (:func:`stage_counts`). Either way every prefix of stages
    is an ideal. A count they do not run is then made one (:func:`evened`: the V's odd count even); each stage keeps
    the device that held most of its supernodes, or takes an unused one (accelerators first). Where the orders still
    run no stage count of the re-balanced split (a stage whose ops are not joined by edges on its device is as many
    stages as it has parts, and their count may not divide among the ranks), its adjacent stages are merged, the
    lightest pair first, one stage fewer at a time, each re-balanced, down to the fewest the orders run (one device's
    stages on one rank, under the round-robin orders). The first ``least``
    scores of the cost model are made whatever the ``deadline`` (a method stopped by its limit leaves the fold none:
    its answer would be the unbalanced split, which may overfill a device)."""
    graph, cluster = placement.graph, placement.cluster
    if (model.virtual or 1) > 1 and model.name not in FOLDS:
        return interleave(placement, model, deadline, least)
    con = group_nodes(graph)
    if cluster.size < 2 or con is None:
        return None
    fw = ~graph.backward
    held = np.bincount(con.image[fw] * cluster.size + placement.assign[fw], minlength=con.n_nodes * cluster.size)
    owner = held.reshape(con.n_nodes, cluster.size).argmax(axis=1)  # the device holding most of each node's ops
    stages = _stages_by_device(con, owner)
    work = node_work(graph, cluster, con)
    fits = stage_counts(model)

    def near(h: int) -> bool:  # a count the orders run at most one stage away
        return fits(h) or fits(h - 1) or (h < cluster.size and fits(h + 1))

    def merged(st: Stages, cap: int, ok: Callable[[int], bool]) -> Stages:  # the lightest adjacent pair first
        st = list(st)
        while len(st) > 1 and (len(st) > cap or not ok(len(st))):
            k = min(range(len(st) - 1), key=lambda j: work[st[j]].sum() + work[st[j + 1]].sum())
            st[k:k + 2] = [np.sort(np.concatenate(st[k:k + 2]))]
        return st

    def place(st: Stages) -> np.ndarray:
        return _devices_of(con, st, owner, cluster)

    score = scorer(graph, cluster, model, place)
    stages = merged(stages, cluster.size, near)
    if not fits(len(stages)):
        candidates = evened(stages, cluster.size, fits)
        if not candidates:
            return None
        value, chosen = score(candidates[-1]), candidates[-1]  # scored whatever the deadline (the V: the last two merged)
        for k, c in enumerate(candidates[:-1]):
            if k >= least and past(deadline):
                break
            if below(v := score(c), value):
                value, chosen = v, c
        stages = chosen
    budget = min(MAX_EVALUATIONS, max(20, MAX_WORK // max(1, graph.n)))
    while True:
        stages = rebalance(con, stages, score, cluster.size, deadline, budget, fits, least)
        if past(deadline) or math.isfinite(score(stages)[0]) or not any(map(fits, range(1, len(stages)))):
            break
        stages = merged(stages, len(stages) - 1, fits)  # stages the orders do not run: one fewer (see above)
    return Placement(graph, cluster, place(stages), source=placement.source)


def node_work(graph, cluster, con: Contraction | Nodes) -> np.ndarray:
    """Each supernode's compute on its fastest device kind, forward and backward (0 for an op no device runs)."""
    times = cluster.times(graph)
    least = np.where(np.isfinite(times), times, np.inf).min(axis=1)
    return np.bincount(con.image, weights=np.where(np.isfinite(least), least, 0.0), minlength=con.n_nodes)


def balanced_cuts(work: np.ndarray, count: int) -> Stages:
    """``range(len(work))`` cut into ``count`` non-empty runs whose largest sum is least (the path DP of the bottleneck,
    by bisection on it: a greedy cut at a cap is optimal for that cap), the runs of a count below ``count`` split at
    their middles, the longest first. ``count <= len(work)``.

    >>> [c.tolist() for c in balanced_cuts(np.array([1.0, 1.0, 2.0, 1.0, 1.0]), 3)]
    [[0, 1], [2], [3, 4]]
    """
    n = len(work)
    prefix = np.concatenate([[0.0], np.cumsum(work)])

    def cuts_at(cap: float) -> list[int] | None:
        out, at = [], 0
        while at < n:
            end = max(at + 1, int(np.searchsorted(prefix, prefix[at] + cap * (1 + REL_TOL), side="right")) - 1)
            out.append(end)
            at = end
            if len(out) > count:
                return None
        return out

    lo, hi = float(work.max(initial=0.0)), float(prefix[-1])
    for _ in range(60):
        if hi - lo <= REL_TOL * max(hi, 1e-300):
            break
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if cuts_at(mid) is not None else (mid, hi)
    ends = cuts_at(hi) or list(range(1, n + 1))
    runs_ = [np.arange(a, b) for a, b in itertools.pairwise([0, *ends])]
    while len(runs_) < count:
        k = max(range(len(runs_)), key=lambda j: len(runs_[j]))
        half = len(runs_[k]) // 2
        runs_[k:k + 1] = [runs_[k][:half], runs_[k][half:]]
    return runs_


def even_cuts(weight: np.ndarray, count: int) -> Stages | None:
    """``range(len(weight))`` cut into ``count`` runs of equal shares of the total weight, each index in the run its
    middle falls in (Megatron's even layout where every weight is 1: equal layers per virtual stage); ``None`` where a
    run is empty.

    >>> [c.tolist() for c in even_cuts(np.ones(6), 3)]
    [[0, 1], [2, 3], [4, 5]]
    """
    total = float(weight.sum())
    if total <= 0:
        return None
    part = np.minimum(((np.cumsum(weight) - weight / 2) / total * count).astype(np.int64), count - 1)
    runs_ = [np.flatnonzero(part == k) for k in range(count)]
    return runs_ if all(len(r) for r in runs_) else None


def interleave(placement: Placement, model: CostModel, deadline: float | None = None,
               least: int = 0) -> Placement | None:
    """A split of ``model.virtual = v`` virtual stages per rank made for ``placement``'s graph and cluster: ``p``
    ranks, the accelerators (every device where there are fewer than 2: a pipeline runtime runs no stage on a host
    CPU), the most of them whose rounds split the micro-batches with ``p v`` stages at most the supernodes, and the
    answer's own count of accelerators if that one fits too. The supernodes are cut into ``p v`` stages
    three ways (:func:`balanced_cuts`, the bottleneck's path DP; equal work and equal layers, Megatron's even layout:
    :func:`even_cuts`), stage ``s`` on the ``(s mod p)``-th device, each re-balanced by the cost model with ``p v``
    stages (:func:`rebalance`, memory first: :func:`scorer`); where the chains of ideals into ``p v`` stages are few
    (:func:`splits_of_ideals`: on a path, the cuts) every one is scored instead, the best of the DP's class. The best
    is the answer. ``None`` where no ``p`` fits. The first ``least`` scores of each descent, and of the chains, are made
    whatever the ``deadline`` (:func:`fold`)."""
    graph, cluster, v = placement.graph, placement.cluster, int(model.virtual or 1)
    con = group_nodes(graph)
    if con is None:
        return None
    devices = [d for d in range(cluster.size) if not cluster.host[d]]
    devices = devices if len(devices) > 1 else list(range(cluster.size))
    fits = stage_counts(model)
    used = len(set(placement.assign.tolist()) & set(devices))
    counts = [h for h in range(len(devices), 1, -1) if fits(h) and h * v <= con.n_nodes]
    counts = [h for h in dict.fromkeys([counts[0], used]) if h in counts] if counts else []
    work = node_work(graph, cluster, con)
    full = min(MAX_EVALUATIONS, max(20, MAX_WORK // max(1, graph.n)))
    budget = max(20, full // (3 * max(1, len(counts))))
    best: tuple[Score, Placement] | None = None
    for p in counts:
        count = p * v
        ranks = np.array(devices[:p])

        def place(st: Stages, ranks: np.ndarray = ranks, p: int = p) -> np.ndarray:
            device = np.empty(con.n_nodes, dtype=np.int64)
            for k, nodes in enumerate(st):
                device[nodes] = ranks[k % p]
            return device[con.image]

        score = scorer(graph, cluster, model, place)
        starts: list[Stages] = []
        for st in (balanced_cuts(work, count), even_cuts(work, count), even_cuts(np.ones(con.n_nodes), count)):
            if st is not None and not any(all(np.array_equal(a, b) for a, b in zip(st, o)) for o in starts):
                starts.append(st)
        every = splits_of_ideals(con, count, fits=lambda h, n=count: h == n) if full >= MAX_EVALUATIONS else None
        if every is not None:  # few enough: every chain of ideals (on a path, every cut), the starts scored first
            candidates = [*starts, *every]
        else:  # the bottleneck's cut, then equal work and equal layers (Megatron's even layout), each descended
            candidates = [rebalance(con, st, score, count, deadline, budget, lambda h, n=count: h == n, least)
                          for st in starts]  # a rebalance past the deadline keeps its start
        for k, stages in enumerate(candidates):
            if k >= len(starts) + least and past(deadline):
                break
            value = score(stages)
            if best is None or below(value, best[0]):
                best = value, Placement(graph, cluster, place(stages), source=placement.source)
    return None if best is None else best[1]


@dataclass(frozen=True)
class Nodes:
    """A graph's colocation groups as the nodes of its forward DAG, numbered topologically (what :func:`rebalance` reads
    of a :class:`~.contract.Contraction`): ``image[op]`` is the node of each op."""

    n_nodes: int
    src: np.ndarray
    dst: np.ndarray
    image: np.ndarray


def group_nodes(graph) -> Nodes | None:
    """The colocation groups holding forward ops, joined by the forward edges between them, numbered in a topological
    order (ties by first op); ``None`` where they form a cycle or a group holds backward ops only."""
    fw = ~graph.backward
    _, gid = np.unique(graph.group_id, return_inverse=True)
    if set(gid[~fw].tolist()) - set(gid[fw].tolist()):
        return None
    cross = fw[graph.src] & fw[graph.dst] & (gid[graph.src] != gid[graph.dst])
    pairs = set(zip(gid[graph.src[cross]].tolist(), gid[graph.dst[cross]].tolist()))
    groups = sorted(set(gid[fw].tolist()))
    succ: dict[int, list[int]] = {x: [] for x in groups}
    indeg = dict.fromkeys(groups, 0)
    for a, b in pairs:
        succ[a].append(b)
        indeg[b] += 1
    _, at = np.unique(gid, return_index=True)
    first = {x: int(at[x]) for x in groups}
    ready = [(first[x], x) for x in groups if indeg[x] == 0]
    heapq.heapify(ready)
    number: dict[int, int] = {}
    while ready:
        _, x = heapq.heappop(ready)
        number[x] = len(number)
        for y in succ[x]:
            indeg[y] -= 1
            if indeg[y] == 0:
                heapq.heappush(ready, (first[y], y))
    if len(number) < len(groups):
        return None
    edges = sorted((number[a], number[b]) for a, b in pairs)
    return Nodes(len(groups), np.array([a for a, _ in edges], dtype=np.int64),
                 np.array([b for _, b in edges], dtype=np.int64), np.array([number[x] for x in gid.tolist()]))


def _stages_by_device(con: Contraction, owner: np.ndarray) -> Stages:
    """Supernodes per stage: one stage per device in a topological order of the device graph (ties by device), or
    the maximal runs of one device along the topological numbering where the device graph has a cycle."""
    devices = sorted(set(owner.tolist()))
    succ = {d: set() for d in devices}
    for a, b in zip(con.src.tolist(), con.dst.tolist()):
        if owner[a] != owner[b]:
            succ[int(owner[a])].add(int(owner[b]))
    indeg = {d: 0 for d in devices}
    for after in succ.values():
        for d in after:
            indeg[d] += 1
    ready, order = [d for d in devices if indeg[d] == 0], []
    while ready:
        d = min(ready)
        ready.remove(d)
        order.append(d)
        for e in succ[d]:
            indeg[e] -= 1
            if indeg[e] == 0:
                ready.append(e)
    nodes = np.arange(con.n_nodes)
    if len(order) == len(devices):
        return [nodes[owner == d] for d in order]
    cuts = np.flatnonzero(np.diff(owner)) + 1
    return np.split(nodes, cuts)


def _devices_of(con: Contraction, stages: Stages, owner: np.ndarray, cluster) -> np.ndarray:
    """The op assignment of ``stages``: stage ``k`` on the device that held most of its supernodes if no earlier stage
    took it, else on an unused device (accelerators first, then by number)."""
    taken: list[int] = []
    for st in stages:
        mine = [int(d) for d in np.bincount(owner[st], minlength=cluster.size).argsort()[::-1]
                if np.isin(d, owner[st]) and int(d) not in taken]
        spare = sorted((d for d in range(cluster.size) if d not in taken), key=lambda d: (bool(cluster.host[d]), d))
        taken.append(mine[0] if mine else spare[0])
    device = np.empty(con.n_nodes, dtype=np.int64)
    for d, st in zip(taken, stages):
        device[st] = d
    return device[con.image]
