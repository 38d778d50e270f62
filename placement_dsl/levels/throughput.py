"""Tarnawski's Fig. 6 IP warm-started from the best placement, and the IP neighbourhoods around it."""
from __future__ import annotations

from ..bounds.max_load import replicas
from ..certificate import MIP_GAP, LevelStatus, solve_level
from ..problem import Problem
from .base import Family, Outcome, Run, level, placement_mip_needs, tarnawski


def _formulation(problem: Problem) -> str:
    return "throughput-replicated" if replicas(problem) > 1 else "throughput"


@level("throughput", rank=90, defaults={Family.ROUTED_MTPP, Family.THROUGHPUT, Family.NONCONTIGUOUS},
       accepts=tarnawski, replicates=True, precision=MIP_GAP, needs=placement_mip_needs,
       doc="Tarnawski Fig. 6 warm-started, its dual bound")
def _throughput(run: Run, seconds: float) -> Outcome:
    """Tarnawski's Fig. 6 IP warm-started from the best placement: its dual bound over the problem's class
    (with a ``Replicate`` term, App. C.2's ``throughput-replicated``)."""
    res, status = solve_level(run, _formulation(run.problem), seconds, run.best[1])
    if res.placement is not None:
        run.offer(res.placement, "throughput")
    note = "" if res.start_accepted in (None, True) else "warm start not accepted"
    return res.bound, status, note, run.scope


@level("neighbourhoods", rank=100, defaults={Family.NONCONTIGUOUS}, accepts=tarnawski, weight=2.0, precision=MIP_GAP,
       doc="IP neighbourhoods around the best placement: a better upper bound (a bound when one holds every unit)")
def _neighbourhoods(run: Run, seconds: float) -> Outcome:
    """IP neighbourhoods around the best placement (:mod:`placement_dsl.search.neighbourhood`): an upper-bound step.
    Its bound counts only when one neighbourhood held every unit and was solved to optimality."""
    from ..search.neighbourhood import ip_neighbourhoods

    start = run.best[1]
    if start is None:
        return None, LevelStatus.NO_BOUND, "no placement to start from", run.scope
    found = ip_neighbourhoods(run.problem, start, time_limit=seconds, seed=0, solver=run.solver)
    run.offer(found.placement, "ip-neighbourhoods")
    info = found.info
    note = (f"{info['steps']} steps, {info['improvements']} better: {found.objective:.6g}"
            + (", a local optimum of every neighbourhood" if info["local_optimum"] else ""))
    if found.bound is None:
        return None, LevelStatus.NO_BOUND, note, run.scope
    return found.bound, LevelStatus.OPTIMAL, note + "; one neighbourhood held every unit", run.scope
