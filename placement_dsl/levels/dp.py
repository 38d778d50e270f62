"""The DP over ideals (Tarnawski §5.1.1): exact over the DP class, a certificate by itself there; an upper
bound (and, without structure terms, polish's start) elsewhere. On a routed cluster it runs ``dp-servers``."""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..bounds.max_load import replicas
from ..certificate import LevelStatus, UpperRun
from ..constraints import Contiguous, DagOrder
from ..deadline import BudgetSpent, call_within, contention
from ..errors import PlacementError
from ..heuristics import run as heuristic
from ..heuristics.base import DP_CLASS as DP_EXACT
from ..heuristics.polish import packed_start
from ..placement import Placement
from .base import ANY_ORDER, DP_CLASS, Family, Outcome, Run, dp_class_is_dag_order, level, numbered

MAX_LOAD = {Family.MTPP, Family.ROUTED_MTPP, Family.THROUGHPUT, Family.NONCONTIGUOUS}
STOP_MARGIN = 0.15  # of its share, the DP ends this early: on a loaded machine it reads its clock late and
# evaluates its split after, and past its share it is killed with its answer (cnn-10000: a split 10 % better)
SUM_SECONDS = 8e-9  # CPU seconds per ideal and supernode inside it of the DP's sums over its lattice (seven columns
# beside a host), the first of its passes over the ideals: cnn-20000 onto 4 accelerators and a CPU, 21,121 ideals of
# 19,968 supernodes, 1.73 s of CPU; its sweep then ran 2.2 s more and stopped before a first split (8 s, load 6)
SWEEPS = 2.0  # the sums and at least one sweep over the same ideals after them, which took longer (above)
ESTIMATE_OPS = 2_000  # below this many ops the DP's own checks decline in milliseconds


@level("dp", rank=20, defaults=MAX_LOAD, closed_form=True, replicates=True,
       doc="the DP over ideals, exact for its class")
def _dp(run: Run, seconds: float) -> Outcome:
    scope = run.scope if dp_class_is_dag_order(run.problem) else DP_CLASS
    R = replicas(run.problem)
    options = {"replication": True, "max_replicas": R} if R > 1 else {}
    routed = run.problem.cluster.routed and R == 1  # servers: the DP nests one over each server's accelerators
    limit = run.clock.clip(seconds)
    slow = past_share(run.problem, limit)
    if slow:
        raise BudgetSpent(slow)
    try:  # the DP's own limit ends a margin before it would be stopped: stopped, it returns its split and bound
        res = call_within(run.clock.within(seconds), heuristic, "dp-servers" if routed else "dp", run.problem.graph,
                          run.problem.cluster, model=run.model, time_limit=limit - min(STOP_MARGIN * limit, 5.0),
                          **options)
    except BudgetSpent:
        raise  # the level is skipped, with the reason
    except PlacementError as err:
        return None, LevelStatus.NOT_APPLICABLE, str(err).split(";")[0], scope
    run.offer(res.placement, "dp")
    run.dp = res.placement if run.problem.is_valid(res.placement) else None
    if R == 1 and not routed and not run.problem.has(Contiguous) and not run.problem.has(DagOrder):
        _polish(run, res.placement, max(run.clock.clip(min(20.0, max(1.0, seconds / 4))), 0.1))
    if R > 1 and not _dp_replicates_exactly(run.problem.cluster):
        return None, LevelStatus.NO_BOUND, (f"upper bound {res.objective:.6g}: the DP replicates a stage within its "
                                            "class of identical devices, the cost model over any devices of its "
                                            "kind"), scope
    exact = res.exact_among == DP_EXACT  # over contiguous splits with an acyclic quotient (the DP class)
    if exact and run.problem.has(Contiguous):
        run.exact_among = DP_EXACT if run.scope in DP_CLASS and run.dp is not None else None
        return res.bound, LevelStatus.OPTIMAL, "exact over the DP class: a certificate for that class by itself", scope
    if exact and run.dp is not None and dp_class_is_dag_order(run.problem):
        run.exact_among = "dag-ordered"
        return res.bound, LevelStatus.OPTIMAL, "exact: on identical stages the DP class is the DAG-ordered class", scope
    if R == 1 and not routed and res.bound is not None and chains_hold_dag_order(run.problem):
        status = LevelStatus.OPTIMAL if exact else LevelStatus.TIME_LIMIT
        if numbered(run.problem):  # its optimum is the wider class's: below the listed order's (exact's row)
            run.label = f"{run.scope} {ANY_ORDER}"
        return res.bound, status, ("the DP over contiguous splits in any device order: every DAG-ordered placement "
                                   "is one"), run.scope
    why = res.info.get("no_bound") or f"exact among {res.exact_among or 'no class'}"
    return None, LevelStatus.NO_BOUND, f"upper bound {res.objective:.6g} ({why})", scope


def chains_hold_dag_order(problem: Any) -> bool:
    """Whether the DP's least max-load bounds the DAG-ordered placements of an inference graph on any devices
    (hosts, several classes). Under ``DagOrder`` the ops on devices ``<= d`` form an ideal (a predecessor's device
    is no later), so device ``d`` holds the difference of two nested ideals: every DAG-ordered placement is a chain
    of ideals with its stages on the devices in index order, one of the splits the DP searches (it also tries every
    order of the classes, so its optimum may lie below, and its own split need not be DAG-ordered). A training
    graph's backward edges run the other way; the DP pairs its passes instead (App. B), so it is left out."""
    return problem.has(DagOrder) and not problem.has(Contiguous) and not problem.graph.is_training


def _polish(run: Run, split: Placement, seconds: float) -> None:
    """Without structure the DP's split is only a start: polish (blocks moved off the busiest stage) from it and
    from the packing bound's packing (``heuristics.polish.packed_start``, where it packs anything), each in
    ``seconds``."""
    packed = packed_start(run.problem.graph, run.problem.cluster)
    for start, label in ((split, "polish"), (packed, "polish-packed")):
        if start is not None:
            t = time.perf_counter()
            try:
                polished = heuristic("polish", run.problem.graph, run.problem.cluster, model=run.model, start=start,
                                     time_limit=seconds)
            except PlacementError as err:  # stopped with nothing: its kernel in Python on a cold cache (ColdKernels,
                # raised out of certify on a 4-op graph), or past its limit; the certificate goes on without it
                run.upper.append(UpperRun(label, None, time.perf_counter() - t, str(err).split(";")[0]))
                continue
            value = run.offer(polished.placement, label)
            run.upper.append(UpperRun(label, value, time.perf_counter() - t, "" if value is not None else
                                      "no valid placement", polished.seconds))


def _dp_replicates_exactly(cluster: Any) -> bool:
    """Whether the DP's replicas (devices of the stage's class, ring at the class's bandwidth) are every
    replica set the cost model allows (any non-host devices of the stage's kind, ring over their routes):
    the non-host devices of each kind are identical and no links are given."""
    if cluster.links or cluster.routed:
        return False
    kinds = [cluster.devices[g[0]].kind for g in cluster.homogeneous_groups() if not cluster.host[g[0]]]
    return len(kinds) == len(set(kinds))


def past_share(problem: Any, seconds: float) -> str | None:
    """Why the DP cannot end within ``seconds`` beside a host (``None`` where it may, or elsewhere), estimated in
    ``O(n)`` without contracting. With several classes of devices it takes no slicing path (one class of identical
    devices only) and sums every ideal of its contraction over its supernodes before anything else. Without
    colocation groups the contraction merges only ops of zero work into a neighbour (App. B), so it keeps at least
    ``c`` supernodes, ``c`` the ops that work, and has at least ``c + 1`` ideals (a topological order's prefixes) of
    ``c / 2`` supernodes on average: at least ``(c + 1) c / 2`` :data:`SUM_SECONDS` of CPU, and a sweep after
    (:data:`SWEEPS`), times the machine's :func:`~placement_dsl.deadline.contention`. Its fork, stopped at its share, took 1.2 s of a 5 s ``bounds`` of
    cnn-20000 beside a CPU at load 6 (4.6 s of a 20 s one), where host-share had met the best split within 0.3 %."""
    graph, cluster = problem.graph, problem.cluster
    if (graph.n < ESTIMATE_OPS or len(cluster.homogeneous_groups()) < 2 or cluster.routed or replicas(problem) > 1
            or np.any(graph.group_id != np.arange(graph.n))):
        return None
    works = np.zeros(graph.n, dtype=bool)
    for kind in {d.kind for d in cluster.devices}:
        works |= graph.work(kind) != 0.0  # a zero-cost leaf takes zero time on every kind
    c = int(works.sum())
    need = (c + 1) * c / 2 * SUM_SECONDS * SWEEPS * contention()
    if need <= seconds:
        return None
    return (f"budget spent: beside a host the DP sums and sweeps at least {c + 1:,} ideals over their supernodes, "
            f"about {need:.1f} s here, more than its {seconds:.1f} s; not started")
