"""Problem terms of training pipelines: memory per schedule and replicated stages.

* :class:`TrainingMemory` — hard memory counted per schedule (weights, gradients and optimizer
  state per parameter byte, activations of every micro-batch in flight, optional recomputation;
  :class:`placement_dsl.training.TrainingMemorySpec`). Chosen as a constraint term rather than
  an option of the objective terms because it changes what a device's memory *holds*, not what
  a placement costs; the objective keeps its own options (``GPipe(microbatches=m)`` for the
  fill and drain). The schedule is stated, not inferred, so a GPipe-memory check of a
  PipeDream-optimized split reads as written.
* :class:`Replicate` — stages may run on up to ``max_per_stage`` devices each (Tarnawski App. C.2).
  The formulation ``throughput-replicated`` writes it (:mod:`placement_dsl.blocks.replication`);
  the DP over ideals and the pipeline planner take ``replication=True``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from .constraints import Term
from .errors import SpecError
from .graph import Graph
from .training import TrainingMemorySpec

if TYPE_CHECKING:
    from .cluster import Cluster
    from .placement import Placement


@dataclass(frozen=True)
class TrainingMemory(Term, TrainingMemorySpec):
    """Memory per schedule: ``state * param + in-flight micro-batches * activations <= M_d`` per replica.

    The fields and their checks are :class:`~placement_dsl.training.TrainingMemorySpec`'s: ``schedule``
    (``"1f1b"``: stage ``s`` of ``k`` stashes ``k - s`` micro-batches; ``"gpipe"``: all
    ``microbatches``), ``microbatches``, ``optimizer_bytes`` per parameter (16: Adam in mixed
    precision) over ``weight_bytes`` per parameter in the graph (2: fp16), ``recompute``.
    """

    def spec(self) -> TrainingMemorySpec:
        return TrainingMemorySpec(self.schedule, self.microbatches, self.optimizer_bytes, self.weight_bytes,
                                  self.recompute)

    def require(self) -> frozenset[str]:
        return frozenset({"memory"})

    def validate(self, graph: Graph, cluster: Cluster) -> None:
        if not graph.is_training:
            raise SpecError(f"TrainingMemory: graph {graph.name!r} has no backward pass; it counts a training "
                            "stage's stashed activations (use a training graph, or Memory())")

    def cost_model_fields(self) -> dict[str, Any]:
        """What the cost model reads (:meth:`placement_dsl.problem.Problem.cost_model`)."""
        return {"training_memory": self.spec()}


@dataclass(frozen=True)
class Replicate(Term):
    """A stage may run on up to ``max_per_stage`` identical devices (Tarnawski App. C.2).

    Each replica takes every ``r``-th sample (``load / r``) and the replicas all-reduce the
    stage's weights, ``2 (r-1)/r * param / B`` per sample (:mod:`placement_dsl.replication`).
    """

    max_per_stage: int = 2
    widens: ClassVar[bool] = True  # more placements than without it: bounds that ignore it are none

    def __post_init__(self) -> None:
        r = self.max_per_stage
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise SpecError(f"Replicate(max_per_stage={r!r}): give a whole number of devices >= 1")

    def validate(self, graph: Graph, cluster: Cluster) -> None:
        accelerators = int((~cluster.host).sum())
        if self.max_per_stage > max(accelerators, 1):
            raise SpecError(f"Replicate(max_per_stage={self.max_per_stage}): the cluster has only {accelerators} "
                            "non-host devices to replicate a stage over")

    def check(self, placement: Placement) -> list[str]:
        names = placement.cluster.names
        return [f"stage on {names[d]!r} runs on {r} replicas, more than Replicate(max_per_stage={self.max_per_stage})"
                for d, r in enumerate(placement.replicas.tolist()) if r > self.max_per_stage]
