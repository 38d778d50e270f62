"""``max_v min_{S ∋ v} load(S)``: the cheapest stage holding each op, by one minimum cut per op
(:mod:`placement_dsl.bounds.local`); it bounds every placement. Only the ops that can beat the certificate's bound are
cut: those whose smallest stage, and whose device in the best placement, load more than it."""
from __future__ import annotations

from ..bounds import local
from ..bounds.local import problem_bound, problem_reach
from ..certificate import LevelStatus
from ..placement import Placement
from .base import ALL, Family, Outcome, Run, level


def _best(run: Run) -> Placement | None:
    """The best placement, where valid: its device loads bound each op's cheapest stage from above."""
    return run.best[1] if run.best[1] is not None and run.problem.is_valid(run.best[1]) else None


@level("stage-cut", rank=30, defaults={Family.MTPP}, accepts=lambda problem: local.problem_applies(problem),
       closed_form=True, reach=lambda run: problem_reach(run.problem, _best(run)),
       doc="max over ops of the cheapest stage holding it, by minimum cuts")
def _stage_cut(run: Run, seconds: float) -> Outcome:
    """``max_v min_{S ∋ v} load(S)`` by one minimum cut per op (:mod:`placement_dsl.bounds.local`), over the ops
    that can beat the bound found so far."""
    clock = run.clock.within(seconds)
    bound, note = problem_bound(run.problem, deadline=clock, best=_best(run), beat=run.bound[0])
    if clock.expired():
        return bound, LevelStatus.TIME_LIMIT, note + "; budget spent before every op was cut", ALL
    return bound, LevelStatus.OPTIMAL, note, ALL
