"""Each device of a contiguous placement holds one block between two cut ops, or a run of cut ops whose
neighbours' tensors it receives and sends (:mod:`placement_dsl.bounds.cut_stages`); ``O(m d + r d)`` for ``r`` cut
ops and runs of at most ``d`` of them under the best max load found."""
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
       doc="each device holds one block between cut ops, or a run of cut ops paying the tensors across it")
def _cut_stages(run: Run, seconds: float) -> Outcome:
    """The least max load at which ``k`` devices, each holding a block or a run of cut ops less the tensors it
    receives and sends, can hold the graph's work: a bound on every contiguous placement of a forward graph."""
    del seconds  # O(m d + r d), r <= cut_stages.MAX_CUTS
    scope = run.scope  # Contiguous's, or DagOrder's: without a backward pass (applies) those are contiguous
    upper = run.best[0]
    if not math.isfinite(upper):
        return None, LevelStatus.NO_BOUND, "no placement found to bisect below", scope
    bound, note = cut_stages.cut_stages_bound(run.problem, upper)
    return bound, LevelStatus.OPTIMAL if bound is not None else LevelStatus.NO_BOUND, note, scope
