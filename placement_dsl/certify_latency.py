"""The certificate's levels for single-sample latency (Tarnawski et al., NeurIPS 2020, §4).

Registered in :data:`placement_dsl.certify.LEVELS`; the table and the class of each bound are in
:mod:`placement_dsl.certify`'s docstring. Each level takes the certification's running state
(``run``: its problem, best placement, solver and gap) and returns ``(bound, status, note, class)``.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from .bounds.latency import critical_path_bound
from .certificate import LevelStatus, model_bound, solve_level
from .deadline import BudgetSpent, call_within
from .errors import PlacementError
from .objectives import Latency
from .placement import PlacementClass
from .problem import Problem

ALL = PlacementClass.ALL
Outcome = tuple[float | None, LevelStatus, str, PlacementClass]


def critical_path(run: Any, seconds: float) -> Outcome:
    """The longest path at the ops' fastest allowed times, without transfers: every placement's latency."""
    bound, path = critical_path_bound(run.problem)
    note = f"{len(path)} ops, {path[0]!r} to {path[-1]!r}" if path else "empty graph"
    return bound, LevelStatus.OPTIMAL, note, ALL


def run_paths(run: Any, seconds: float) -> Outcome:
    """The DP over the cheapest runs of the longest paths: memory splits a path, each split pays its transfers."""
    from .blocks.base import Context
    from .blocks.latency_data import run_path_bound
    from .formulations.latency import subgraphs_per_accelerator

    clock = run.clock.within(seconds)
    ctx = Context(run.problem)
    whole = subgraphs_per_accelerator(run.problem) == 1
    bound = run_path_bound(ctx, None, whole, deadline=clock) * ctx.scale.time
    note = _subgraph_note(run.problem)
    if clock.expired():  # the paths not priced in time are left out: the bound holds, weaker
        if bound <= 0:
            raise BudgetSpent(f"budget spent: no longest path priced in its {clock.seconds:.1f} s")
        return bound, LevelStatus.TIME_LIMIT, f"{note}; budget spent before every path was priced", \
            run.scope if whole else ALL
    return bound, LevelStatus.OPTIMAL, note, run.scope if whole else ALL


def _latency_hinted(run: Any) -> Problem:
    """The problem with the best latency found as the latency IP's horizon: the optimum is at most
    that, so the model's bound (over placements no slower) bounds the optimum too."""
    from .formulations.latency import hinted

    best = run.best[0]
    return hinted(run.problem, best) if math.isfinite(best) and best > 0 else run.problem


def _subgraph_note(problem: Problem) -> str:
    from .formulations.latency import longest_run, subgraphs_per_accelerator

    q = subgraphs_per_accelerator(problem)
    every = q >= max(1, math.ceil(longest_run(problem.graph) / 2))
    return "any number of subgraphs per accelerator" if every else f"at most {q} subgraph(s) per accelerator"


def latency_lp(run: Any, seconds: float) -> Outcome:
    """The linear relaxation of Tarnawski's latency IP with its cuts, the best latency as horizon."""
    from .formulations import get

    problem = _latency_hinted(run)
    bound, status = model_bound(problem, "latency", run.solver, seconds, lp=True, deadline=run.clock)
    if bound is not None and math.isfinite(run.best[0]):
        bound = min(bound, run.best[0])
    return bound, status, f"LP; {_subgraph_note(problem)}", get("latency").placement_class(problem)


def latency_ip(run: Any, seconds: float) -> Outcome:
    """Tarnawski's latency IP (Fig. 3 / Fig. 4) warm-started from the best placement: its dual bound."""
    from .formulations import get

    res, status = solve_level(run, "latency", seconds, run.best[1])
    if res.placement is not None:
        run.offer(res.placement, "latency IP")
    note = _subgraph_note(run.problem) + ("" if res.start_accepted in (None, True) else "; warm start not accepted")
    return res.bound, status, note, get("latency").placement_class(run.problem)


def latency_upper(run: Any, seconds: float) -> None:
    """The best latency heuristic (greedy, DP, DPL splits and the latency local search) under the problem's q."""
    from .formulations.latency import subgraphs_per_accelerator
    from .heuristics import run as heuristic

    model = replace(run.model, max_subgraphs=subgraphs_per_accelerator(run.problem))
    p = run.problem
    try:
        limit = max(seconds, 0.5)  # stopped if it runs past its limit (BudgetSpent, a PlacementError)
        found = call_within(run.clock.within(limit), heuristic, "latency-best", p.graph, p.cluster, model=model,
                            time_limit=limit)
    except PlacementError:
        return
    run.offer(found.placement, "latency-best")


def latency_only(problem: Problem) -> str | None:
    return None if isinstance(problem.objective, Latency) else "bounds single-sample latency (a Latency objective)"


def latency_host_memory(problem: Problem) -> str | None:
    """The levels built on Tarnawski's IP price transfers through host memory: not a cluster with links."""
    reason = latency_only(problem)
    if reason is None and problem.cluster.links:
        return ("prices transfers through host memory (Tarnawski Fig. 3); the cluster's links carry them over "
                "routes, which only the critical-path bound covers")
    return reason


def not_latency(problem: Problem) -> str | None:
    """Lemma 3.3's sum term needs devices that run one op at a time; the latency model's hosts do not."""
    return ("a max-load bound: single-sample latency has its own levels (critical-path, run-paths, latency-lp, "
            "latency)" if isinstance(problem.objective, Latency) else None)
