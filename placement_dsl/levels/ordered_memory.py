"""The hosts' share of a DAG-ordered placement when the accelerators' memory binds: the accelerators before (or
after) every host hold an ideal within their summed memory (:mod:`placement_dsl.heuristics.ordered_memory`); the
problem's DAG-ordered placements, its ideals enumerated where they are few."""
from __future__ import annotations

from ..certificate import LevelStatus
from ..constraints import DagOrder
from ..deadline import BudgetSpent
from ..errors import SpecError
from ..evaluate import MemoryMode, Objective
from ..heuristics.base import TimeLimitReached
from ..heuristics.ordered_memory import host_side, ordered_memory_bound
from ..problem import Problem
from .base import Family, Outcome, Run, level


def _accepts(problem: Problem) -> str | None:
    model = problem.cost_model()
    if model.objective is not Objective.MAX_LOAD:
        return f"bounds a max load, not {model.objective.value!r}"
    if not problem.has(DagOrder):
        return "bounds DAG-ordered placements"
    if model.memory is not MemoryMode.HARD:
        return "needs hard memory"
    if host_side(problem.cluster) is None:
        return "needs the host devices after (or before) every other device"
    return None


@level("ordered-memory", rank=13, defaults={Family.MTPP}, accepts=_accepts, closed_form=True,
       doc="DAG order: the hosts run what an ideal within the accelerators' memory leaves")
def _ordered_memory(run: Run, seconds: float) -> Outcome:
    p = run.problem
    try:
        bound = ordered_memory_bound(p.graph, p.cluster, deadline=run.clock.within(seconds).at)
    except TimeLimitReached as err:
        raise BudgetSpent(f"budget spent: {err}") from None
    except SpecError as err:  # too many ideals
        return None, LevelStatus.NOT_APPLICABLE, str(err).split(";")[0], run.scope
    if bound is None:
        return None, LevelStatus.NOT_APPLICABLE, ("needs accelerators of finite memory and no "
                                                   "backward pass"), run.scope
    return bound, LevelStatus.OPTIMAL, "the hosts run what an ideal within the accelerators' memory leaves", run.scope
