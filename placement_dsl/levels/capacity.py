"""Each device counted for the work it can do (speed) and the memory it can hold: a slow host CPU is a fraction of
a device, and what the accelerators' memory cannot hold runs on the hosts (:mod:`placement_dsl.bounds.capacity`);
every placement, in O(n D + n log n)."""
from __future__ import annotations

from ..bounds.capacity import capacity_bound
from ..certificate import LevelStatus
from ..evaluate import MemoryMode, Objective
from ..problem import Problem
from .base import ALL, VECTOR_PER_EDGE, Family, Outcome, Run, level

MAX_LOAD = {Family.MTPP, Family.ROUTED_MTPP, Family.THROUGHPUT, Family.NONCONTIGUOUS}


def _accepts(problem: Problem) -> str | None:
    model = problem.cost_model()
    if model.objective is not Objective.MAX_LOAD:
        return f"the capacity bound bounds a max load, not {model.objective.value!r}"
    return None


@level("capacity", rank=11, defaults=MAX_LOAD, accepts=_accepts, closed_form=True, free=True, per_edge=VECTOR_PER_EDGE,
       doc="the work each device can do at its speed, and what only the hosts' memory can hold")
def _capacity(run: Run, seconds: float) -> Outcome:
    del seconds  # O(n D + n log n)
    p = run.problem
    bound = capacity_bound(p.graph, p.cluster, hard_memory=run.model.memory is MemoryMode.HARD)
    return bound, LevelStatus.OPTIMAL, "work at each device's speed; memory the accelerators cannot hold", ALL
