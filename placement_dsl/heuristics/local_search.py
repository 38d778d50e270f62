"""Tarnawski et al. §6's local search ([MKA07]): from a random memory-feasible split, apply the best single-group
reassignment until a local optimum; 10 restarts, the first of them from the better of the greedy split and SliceGraph's;
the answer is the split the cost model scores best among the descents' ends and that valid start, so it is never worse
than the start. Under a latency model it runs the latency local search (:mod:`.latency`)."""
from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from ..cluster import Cluster
from ..errors import PlacementError
from ..evaluate import CostModel, MemoryMode, Objective, evaluate
from ..graph import Graph
from ..pipeline_orders import FOLDS
from ..placement import Placement
from . import fold_ranks, manifest
from .base import HeuristicResult, deadline_at, expired, kernel_deadline, left, stopped
from .baselines import greedy, group_arrays, group_moves, max_load_model, random_start, scored_result
from .latency import latency_local_search
from .registry import heuristic
from .segments import OVERLAP_CODE
from .slicegraph import slicegraph
from .stage_order import chain_start, needs_chain

SEED_SHARE = 1 / 3  # of the time limit, SliceGraph's for the seeded start (its DP stopped: the balanced slicing)


@heuristic("local-search", optimizes="cost_model", options=manifest.LocalSearch)
def local_search(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
                 restarts: int = 10, max_moves: int = 100_000, seeded: bool = True,
                 time_limit: float | None = None) -> HeuristicResult:
    """Tarnawski §6 local search: best single-group reassignment to a local optimum, best of ``restarts``.

    The first restart descends from the better valid split of greedy and SliceGraph (:func:`seed_split`), the others
    from the paper's random memory-feasible splits: from random splits alone, a GPT-3 graph of 20,111 ops ended at
    13,669 where greedy's split is 983 (every tensor cut between random devices). ``seeded=False`` starts every
    restart from a random split, as the paper's baseline does.

    It descends on max-load; the cost model picks the answer among the descents' ends and the valid start (valid
    first, then by objective; ``info["kept_start"]`` when the start stands), so a max-load optimum the model's
    schedule cannot run (a stage cycle under interleaved 1F1B, ZB-H1 or GPipe's fill and drain) never displaces a
    valid start; under ZBV the lowest max-load split is also tried folded onto the V's ranks (``info["folded"]``).
    Where the schedule runs the stages in a chain (:func:`.stage_order.needs_chain`) the random restarts start from
    a random chain of the groups (:func:`.stage_order.chain_start`) and the descent refuses a move that closes a cycle
    among the devices' forward edges; ``info["valid_ends"]`` counts the descents' ends the cost model accepts.
    Under a latency model (where a max-load optimum from a random
    start is usually non-contiguous and slow) it is the latency local search instead:
    :func:`.latency.latency_local_search`, with ``restarts`` kicks. Past ``time_limit`` seconds
    the descent under way stops and no restart begins: the best split so far (``info["stopped"]``).
    """
    if model is not None and model.objective is Objective.LATENCY:
        res = latency_local_search(graph, cluster, model=model, seed=seed, restarts=restarts, time_limit=time_limit)
        return replace(res, method="local-search", info={**res.info, "search": "latency-local-search"})
    start = time.perf_counter()
    at = deadline_at("local-search", time_limit)
    ml = max_load_model(model)
    times, gid, gmem_idx, gptr, gtime = group_arrays(graph, cluster)
    mem_op = graph.param_bytes + graph.activation_bytes
    gmem = np.bincount(gid, weights=mem_op)
    hard = ml.memory is MemoryMode.HARD
    ovf = np.where((ml.memory is MemoryMode.OVERFLOW) & ~cluster.host, 1.0 / cluster.bandwidth, 0.0)
    rng = np.random.default_rng(seed)
    total_moves, done, valid_ends = 0, 0, 0
    chain = needs_chain(model)  # the schedule runs stages in a chain: descents keep the devices' forward edges acyclic
    fw = ~graph.backward if chain else np.zeros(0, dtype=bool)
    start_split = seed_split(graph, cluster, model, at) if seeded else None
    # the descents minimize max-load; the cost model judges what they reach (a max-load optimum may be a split the
    # model's schedule cannot run, e.g. a stage cycle under interleaved 1F1B), so the valid start is a candidate too
    model = model or CostModel()
    best: tuple[tuple[bool, float, float], np.ndarray, dict] | None = None
    lowest: tuple[float, np.ndarray] | None = None  # the lowest max-load reached, whatever the model's verdict
    if start_split is not None:
        best = ((*_verdict(graph, cluster, model, start_split), np.inf), start_split.copy(), {"kept_start": True})
    for i in range(max(1, int(restarts))):
        if best is not None and expired(at):
            break
        # under a V every other restart descends free: the fold of its lowest max-load split may beat the chains
        free = model.name in FOLDS and i % 2 == 1
        if i == 0 and start_split is not None:
            dev = start_split.copy()
        else:
            drawn = chain_start(graph, gid, gtime, gmem, cluster.memory, hard, rng) if chain and not free else None
            dev = (drawn if drawn is not None else random_start(gtime, gmem, cluster.memory, hard, rng))[gid]
        dev, value, moves = group_moves(dev, gid, gptr, gmem_idx, gtime, gmem, times, mem_op, graph.pred_ptr,
                                        graph.pred_idx, graph.succ_ptr, graph.succ_idx, graph.out_bytes,
                                        cluster.memory, hard, cluster.transfer_scale, ovf,
                                        OVERLAP_CODE[ml.overlap], max_moves, kernel_deadline(at), fw[:0] if free else fw)
        total_moves, done = total_moves + moves, done + 1
        key = (*_verdict(graph, cluster, model, dev), float(value))
        valid_ends += not key[0]
        if best is None or key < best[0]:
            best = (key, dev.copy(), {"max_load": float(value)})
        if lowest is None or value < lowest[0]:
            lowest = (float(value), dev.copy())
    assert best is not None
    if model.name in FOLDS and lowest is not None and math.isinf(_verdict(graph, cluster, model, lowest[1])[1]):
        folded = fold_ranks.fold(Placement(graph, cluster, lowest[1]), model, at)  # as run() folds an answer
        if folded is not None:
            key = (*_verdict(graph, cluster, model, folded.assign), lowest[0])
            if key < best[0]:
                best = (key, folded.assign.copy(), {"max_load": lowest[0], "folded": (
                    "local-search's lowest max-load split folded onto the V's ranks (it was inf)")})
    result = scored_result("local-search", graph, cluster, model, best[1], start, evaluations=done,
                           moves=total_moves, valid_ends=valid_ends, **best[2])
    return stopped(result) if expired(at) else result


def _verdict(graph: Graph, cluster: Cluster, model: CostModel, assign: np.ndarray) -> tuple[bool, float]:
    """How the cost model ranks a split: valid ones first, then by objective."""
    ev = evaluate(Placement(graph, cluster, assign), model)
    return not ev.valid, ev.objective


def seed_split(graph: Graph, cluster: Cluster, model: CostModel | None, at: float | None) -> np.ndarray | None:
    """The device of each op in the better split of greedy and SliceGraph (given :data:`SEED_SHARE` of the time
    left) that the cost model accepts; ``None`` when neither applies or is valid."""
    model = model or CostModel()
    found = []
    for method in (greedy, slicegraph):
        limit = left(at)
        try:
            found.append(method(graph, cluster, model=model, time_limit=None if limit is None else SEED_SHARE * limit))
        except PlacementError:  # e.g. no slicing of the order fits the devices' memory
            continue
    valid = [(r.objective, r.placement.assign) for r in found if evaluate(r.placement, model).valid]
    return np.asarray(min(valid, key=lambda v: v[0])[1], dtype=np.int64) if valid else None
