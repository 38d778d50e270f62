"""Memory per schedule in the IPs: the rule for :class:`~placement_dsl.training_terms.TrainingMemory`.

In the table of ``throughput`` (Tarnawski Fig. 6; inherited by ``throughput-replicated``):
:class:`~placement_dsl.blocks.training.TrainingMemoryCapacity`. Archer's ``exact`` needs
``DagOrder``, which a training graph's backward edges never satisfy, so it has no rule for it.
"""
from __future__ import annotations

from ..blocks.base import BlockTemplate
from ..blocks.training import TrainingMemoryCapacity
from ..errors import SpecError
from ..problem import Problem
from ..training_terms import Replicate, TrainingMemory


def training_memory(term: TrainingMemory, problem: Problem) -> list[BlockTemplate]:
    """Memory per schedule (GPipe's ``m`` or 1F1B's ``k - s`` micro-batches in flight)."""
    if problem.has(Replicate):
        raise SpecError("TrainingMemory with Replicate: replicas share the micro-batches in flight "
                        "(ceil(n / r)), which the IP does not write; use method 'pipeline'")
    return [TrainingMemoryCapacity(term.spec())]

