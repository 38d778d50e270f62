"""Archer's Fig. 3 MIP warm-started from the best placement: its dual bound over DAG-ordered placements."""
from __future__ import annotations

from ..certificate import MIP_GAP, solve_level
from ..constraints import DagOrder
from ..problem import Problem
from .base import Family, Outcome, Run, level, placement_mip_needs


def _archer(problem: Problem) -> str | None:
    return None if problem.has(DagOrder) else "Archer's exact MIP bounds DAG-ordered problems"


@level("exact", rank=110, defaults={Family.MTPP}, accepts=_archer, precision=MIP_GAP, needs=placement_mip_needs,
       doc="Archer Fig. 3 warm-started, its dual bound")
def _exact(run: Run, seconds: float) -> Outcome:
    start = run.best[1]
    res, status = solve_level(run, "exact", seconds, start if start is not None and run.problem.is_valid(start)
                               else None)
    if res.placement is not None:
        run.offer(res.placement, "exact")
    return res.bound, status, "", run.scope
