"""A max load's closed forms over every placement, without a model: the counterpart for the throughput objectives of
:func:`~placement_dsl.bounds.single_sample.single_sample_bound`, which a solve stopped short reports."""
from __future__ import annotations

from ..evaluate import MemoryMode, Objective
from ..problem import Problem
from ..training_terms import Replicate
from . import one_or_cut
from .capacity import capacity_bound
from .simple import replicated_lower_bound, simple_lower_bound


def replicas(problem: Problem) -> int:
    """The most devices a stage may run on: the largest ``max_per_stage`` of the problem's
    :class:`~placement_dsl.training_terms.Replicate` terms (1 without one), the ``R`` of Lemma 3.3 over replicas
    (App. C.2, :func:`~placement_dsl.bounds.simple.replicated_lower_bound`)."""
    return max((t.max_per_stage for t in problem.find(Replicate)), default=1)


def max_load_bound(problem: Problem) -> float | None:
    """In O(n D + n log n): Lemma 3.3; one device's load or a cut tensor on each device used
    (:mod:`~placement_dsl.bounds.one_or_cut`; a GPT-3 of 217 ops whose tied embedding keeps it on one device: 12.74
    where Lemma 3.3 gives 6.37 on two); and each device's work at its speed with what only the hosts' memory can
    hold (:mod:`~placement_dsl.bounds.capacity`, without replicated stages: 20,000 ops of CNN onto 16 accelerators
    of 16 GB whose overflow must run on the host CPU, where the others prove 298 of 34,141). ``None`` for other
    objectives."""
    model = problem.cost_model()
    if model.objective is not Objective.MAX_LOAD:
        return None
    if problem.widens:  # replicated stages divide their loads: the
        # others proved 10 (the largest op) and 11 (one device or a cut) on a chain whose two replicas reach 7.5
        most = replicas(problem)
        return float(replicated_lower_bound(problem.graph, problem.cluster, most, model.overlap.value)) \
            if most > 1 else None
    found = [float(simple_lower_bound(problem.graph, problem.cluster))]
    if not one_or_cut.problem_applies(problem):
        found.append(one_or_cut.problem_bound(problem))
    found.append(capacity_bound(problem.graph, problem.cluster, hard_memory=model.memory is MemoryMode.HARD))
    return max(found)
