"""``max_v min_{S ∋ v} load(S)``: the cheapest stage holding each op, by one minimum cut per op
(:mod:`placement_dsl.bounds.local`); it bounds every placement."""
from __future__ import annotations

from ..bounds import local
from ..bounds.local import problem_bound
from ..certificate import LevelStatus
from .base import ALL, Family, Outcome, Run, level


@level("stage-cut", rank=30, defaults={Family.MTPP}, accepts=lambda problem: local.problem_applies(problem),
       closed_form=True, doc="max over ops of the cheapest stage holding it, by minimum cuts")
def _stage_cut(run: Run, seconds: float) -> Outcome:
    """``max_v min_{S ∋ v} load(S)`` by one minimum cut per op (:mod:`placement_dsl.bounds.local`)."""
    clock = run.clock.within(seconds)
    bound, note = problem_bound(run.problem, deadline=clock)
    if clock.expired():
        return bound, LevelStatus.TIME_LIMIT, note + "; budget spent before every op was cut", ALL
    return bound, LevelStatus.OPTIMAL, note, ALL
