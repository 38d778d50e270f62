"""The certificate's levels for single-sample latency (Tarnawski et al., NeurIPS 2020, §4).

Registered in :data:`placement_dsl.levels.base.LEVELS`, the default hierarchy of :attr:`Family.LATENCY`;
the table and the class of each bound are in :mod:`placement_dsl.certify`'s docstring. Each level takes the
certification's running state (``run``: its problem, best placement, solver and gap) and returns
``(bound, status, note, class)``.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ..bounds.latency import critical_path_bound
from ..certificate import LevelStatus, model_bound, solve_level
from ..deadline import BudgetSpent, call_within
from ..errors import PlacementError
from ..heuristics import run as heuristic
from ..problem import Problem
from .base import ALL, Family, Outcome, latency_only, level

LATENCY = {Family.LATENCY}


@level("critical-path", rank=120, defaults=LATENCY, accepts=latency_only, closed_form=True, free=True,
       doc="latency: longest path at the fastest allowed times, no transfers")
def critical_path(run: Any, seconds: float) -> Outcome:
    """The longest path at the ops' fastest allowed times, without transfers: every placement's latency."""
    bound, path = critical_path_bound(run.problem)
    note = f"{len(path)} ops, {path[0]!r} to {path[-1]!r}" if path else "empty graph"
    return bound, LevelStatus.OPTIMAL, note, ALL


@level("run-paths", rank=130, defaults=LATENCY, accepts=latency_only, closed_form=True,
       doc="latency: the cheapest runs of the longest paths (memory, transfers, side inputs)")
def run_paths(run: Any, seconds: float) -> Outcome:
    """The DP over the cheapest runs of the longest paths: memory splits a path, each split pays its transfers."""
    from ..blocks.base import Context
    from ..blocks.latency_data import run_path_bound
    from ..formulations.latency import subgraphs_per_accelerator

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
    from ..formulations.latency import hinted

    best = run.best[0]
    return hinted(run.problem, best) if math.isfinite(best) and best > 0 else run.problem


def _subgraph_note(problem: Problem) -> str:
    from ..formulations.latency import longest_run, subgraphs_per_accelerator

    q = subgraphs_per_accelerator(problem)
    every = q >= max(1, math.ceil(longest_run(problem.graph) / 2))
    return "any number of subgraphs per accelerator" if every else f"at most {q} subgraph(s) per accelerator"


@level("latency-lp", rank=140, defaults=LATENCY, accepts=latency_only,
       doc="latency: the LP of Tarnawski Fig. 3 / Fig. 4 with its cuts")
def latency_lp(run: Any, seconds: float) -> Outcome:
    """The linear relaxation of Tarnawski's latency IP with its cuts, the best latency as horizon."""
    from ..formulations import get

    problem = _latency_hinted(run)
    bound, status = model_bound(problem, "latency", run.solver, seconds, lp=True, deadline=run.clock)
    if bound is not None and math.isfinite(run.best[0]):
        bound = min(bound, run.best[0])
    return bound, status, f"LP; {_subgraph_note(problem)}", get("latency").placement_class(problem)


@level("latency", rank=150, defaults=LATENCY, accepts=latency_only,
       doc="latency: Tarnawski Fig. 3 / Fig. 4 warm-started, its dual bound")
def latency_ip(run: Any, seconds: float) -> Outcome:
    """Tarnawski's latency IP (Fig. 3 / Fig. 4) warm-started from the best placement: its dual bound."""
    from ..formulations import get

    res, status = solve_level(run, "latency", seconds, run.best[1])
    if res.placement is not None:
        run.offer(res.placement, "latency IP")
    note = _subgraph_note(run.problem) + ("" if res.start_accepted in (None, True) else "; warm start not accepted")
    return res.bound, status, note, get("latency").placement_class(run.problem)


def latency_upper(run: Any, seconds: float) -> None:
    """The best latency heuristic (greedy, DP, DPL splits and the latency local search) under the problem's q."""
    from ..formulations.latency import subgraphs_per_accelerator

    model = replace(run.model, max_subgraphs=subgraphs_per_accelerator(run.problem))
    p = run.problem
    try:
        limit = max(seconds, 0.5)  # stopped if it runs past its limit (BudgetSpent, a PlacementError)
        found = call_within(run.clock.within(limit), heuristic, "latency-best", p.graph, p.cluster, model=model,
                            time_limit=limit)
    except PlacementError:
        return
    run.offer(found.placement, "latency-best")

