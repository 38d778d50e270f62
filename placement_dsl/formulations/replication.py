"""``throughput-replicated``: Tarnawski Fig. 6 with App. C.2's replicated stages.

Derived from ``throughput``: the same skeleton and table, except that the objective terms build
only the device loads and a :class:`~placement_dsl.training_terms.Replicate` term builds the
objective over per-replica loads (:class:`~placement_dsl.blocks.replication.ReplicatedMaxLoad`).
The plain ``throughput`` formulation has no rule for ``Replicate``, so it says so by name; a
relaxation's ``drop`` refuses it (``Replicate.widens``), as its bound would ignore the replicas.
"""
from __future__ import annotations

from ..blocks import DeviceLoad
from ..blocks.base import BlockTemplate
from ..blocks.replication import ReplicatedMaxLoad
from ..errors import SpecError
from ..evaluate import Objective
from ..objectives import GPipe, ObjectiveTerm
from ..problem import Problem
from ..training_terms import Replicate
from .base import Auto, Kind, register
from .throughput import THROUGHPUT


def replicated_objective(term: ObjectiveTerm, problem: Problem) -> list[BlockTemplate]:
    """The loads; the objective comes from the ``Replicate`` term (max-load objectives only)."""
    if term.cost_objective is not Objective.MAX_LOAD or not term.bounds_max_load:
        raise SpecError(f"throughput-replicated: objective {type(term).__name__} is not a max-load; replicated "
                        "stages are written for Throughput / PipeDream / Bottleneck")
    if not problem.has(Replicate):
        raise SpecError("throughput-replicated needs a Replicate(max_per_stage) term; use 'throughput' without one")
    if problem.cluster.routed:
        raise SpecError("throughput-replicated: the IP prices transfers through host memory; on a hierarchical "
                        "cluster use method 'pipeline'")
    if problem.cluster.links:
        raise SpecError(f"throughput-replicated: the IP has no rows for the loads of the cluster's "
                        f"{len(problem.cluster.links)} links; use a heuristic, which the cost model scores with them")
    return [DeviceLoad()]


def replicate(term: Replicate, problem: Problem) -> list[BlockTemplate]:
    """App. C.2: replica counts per device and the per-replica max-load objective."""
    return [ReplicatedMaxLoad(term.max_per_stage)]


THROUGHPUT_REPLICATED = register(THROUGHPUT.derive(
    "throughput-replicated", Kind.EXACT, rules={ObjectiveTerm: replicated_objective, GPipe: replicated_objective, Replicate: replicate},
    auto=Auto(rank=2, requires=(Replicate,)), doc="""
Tarnawski Fig. 6 with App. C.2: binaries ``rho_{dr}`` choose each stage's replica count, the budget of devices per
kind holds stages and replicas, and big-M rows bound ``(load_d + 2 (r-1) param_d / B_d) / r`` (or the overlapped
parts) by ``MaxLoad``."""))

