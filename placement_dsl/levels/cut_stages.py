"""The devices of a contiguous placement hold runs of cut ops in a chain, sharing the blocks between, each paying the
tensors across its hull and the price of its parts of the blocks (:mod:`placement_dsl.bounds.cut_stages`);
the runs some chain under the max load tried may hold (those ending near a multiple of it in work) priced once,
``O(m log m + r + runs)``, then each bisection step over those, stopped by the level's share of the time."""
from __future__ import annotations

import math

from ..bounds import cut_stages
from ..certificate import LevelStatus
from ..problem import Problem
from .base import ALL, Family, Outcome, Run, level


def _accepts(problem: Problem) -> str | None:
    if problem.placement_class() is ALL:
        return "bounds contiguous placements (Contiguous or DagOrder)"
    return cut_stages.applies(problem)


@level("cut-stages", rank=12.5, defaults={Family.MTPP, Family.THROUGHPUT}, accepts=_accepts, closed_form=True,
       precision=cut_stages.PRECISION,
       doc="devices hold runs of cut ops in a chain, sharing the blocks between, paying the tensors across")
def _cut_stages(run: Run, seconds: float) -> Outcome:
    """The least max load at which a chain of ``k`` devices, each holding a run of cut ops and parts of the blocks
    beside it (or a part of one block) and paying what it receives and sends, can hold the graph: a bound on every
    contiguous placement of a forward graph."""
    scope = run.scope  # Contiguous's, or DagOrder's: without a backward pass (applies) those are contiguous
    upper = run.best[0]
    if not math.isfinite(upper):
        return None, LevelStatus.NO_BOUND, "no placement found to bisect below", scope
    # the bound so far (over the problem's class, the relaxation's): the relaxation holding there bounds no higher
    found = cut_stages.cut_stages_search(run.problem, upper, seconds=seconds, floor=run.bound[0])
    status = (LevelStatus.NO_BOUND if found.bound is None else LevelStatus.OPTIMAL if found.finished else
              LevelStatus.TIME_LIMIT)
    return found.bound, status, found.note, scope
