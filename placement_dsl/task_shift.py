"""A runtime's fixed time per pass as one shift of every split's objective: the one place it is priced where the
searches, the formulations and the bounds leave it out.

The cost model's ``task_overhead`` (``t``, :mod:`placement_dsl.evaluate`; a calibrated run's time per stage pass,
:mod:`placement_dsl.calibrate`) adds ``t`` to a device's load per pass of a sample it runs ops of. Under a max-load
or GPipe objective without replicas, links, fill and drain or rank orders, every device holding ops pays the same
``k t`` (``k``: :func:`task_passes`; an empty device's load is 0), so the objective of every valid placement is its
objective without the term plus ``k t``: a search or a formulation runs without it (its answer and its class's
optimum are the same), its answer is priced with it by the cost model, and a bound rises by ``k t``. Where ``k``
is not one number (a device may run one pass or two), a bound rises by ``t`` only, as every placement's busiest
device runs one pass at least. Elsewhere the term moves the best split: :attr:`TaskShift.refusal` says why.

>>> from placement_dsl.cluster import Cluster
>>> from placement_dsl.graph import Graph, Op
>>> g = Graph([Op(name="a", work=1.0), Op(name="b", work=1.0)], [("a", "b")])
>>> shift = task_shift(CostModel.named("max_load", task_overhead=0.5), g, Cluster.stages(2))
>>> shift.exact, shift.raised(3.0)
(0.5, 3.5)
>>> task_shift(CostModel.named("latency", task_overhead=0.5), g, Cluster.stages(2)).exact is None
True
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cluster import Cluster
from .evaluate import CostModel, Objective
from .graph import Graph
from .pipeline_orders import ORDERS


def task_passes(graph: Graph) -> int | None:
    """The passes every device holding ops of ``graph`` runs in each valid placement: 1 for a forward graph, 2 for a
    training graph whose every colocation group holds forward and backward ops (as
    :func:`~placement_dsl.zoo.training.with_backward` groups ``v`` with ``v.grad``), else ``None`` (a device may
    run one pass or two)."""
    if not graph.is_training:
        return 1
    ids = np.unique(graph.group_id, return_inverse=True)[1]
    both = np.bincount(ids, weights=graph.backward) * np.bincount(ids, weights=~graph.backward)
    return 2 if bool(np.all(both > 0)) else None


@dataclass(frozen=True)
class TaskShift:
    """What the fixed time per pass ``per_pass`` adds to every valid split's objective: ``passes`` of it on every
    device holding ops (``None``: one or two), or nothing that one amount says where ``refusal`` is not empty."""

    per_pass: float
    passes: int | None
    refusal: str = ""

    @property
    def exact(self) -> float | None:
        """The shift of every valid split's objective, ``k t``; ``None`` where it is not one amount."""
        return None if self.refusal or self.passes is None else self.per_pass * self.passes

    def raised(self, bound: float | None, uniform: bool = True) -> float | None:
        """A bound without the term raised to one with it: by :attr:`exact` where it is one amount and ``uniform``
        (the answer runs no replicated stage), else by ``t``, the one pass every busiest device runs."""
        if bound is None:
            return None
        exact = self.exact
        return bound + (exact if exact is not None and uniform else self.per_pass)


def task_shift(model: CostModel, graph: Graph, cluster: Cluster, replication: bool = False) -> TaskShift:
    """The shift ``model.task_overhead`` makes of every split's objective of ``graph`` on ``cluster`` (with
    ``replication``: replicated stages allowed), refused (:attr:`TaskShift.refusal`) where it is not one."""
    t = model.task_overhead
    uniform = (model.objective in (Objective.MAX_LOAD, Objective.GPIPE) and model.name not in ORDERS
               and model.microbatches is None and not cluster.routed and not replication)
    why = "" if uniform or not t else (
        f"the cost model's task_overhead ({t}) is a fixed time per stage that the searches price under a max-load or "
        f"GPipe objective without replication, links, micro-batches or rank orders (objective "
        f"{model.name or model.objective.value!r})")
    return TaskShift(t, task_passes(graph), why)
