"""Objective terms: what a placement's cost is.

With ``load_d = compute_d + in_d + out_d + overflow_d`` the cost of device ``d`` (Archer
et al. eq. (3); Tarnawski et al. Fig. 6 eq. (20)-(21)), training graphs split into a
forward part ``FW_d`` and a backward part ``BW_d`` (a transfer belongs to the pass of the
tensor's producer):

* :class:`Bottleneck` — Archer's MTPP, ``min max_d load_d`` (eq. (4)-(6)); with
  :class:`~placement_dsl.constraints.Overflow` the overflow term is charged;
* :class:`Throughput` — Tarnawski's max device load over accelerators and CPUs (Fig. 6);
* :class:`PipeDream` — ``max_d (FW_d + BW_d)`` (Tarnawski §5.3), the same max load;
* :class:`GPipe` — ``max_d FW_d + max_d BW_d`` (Tarnawski §5.3 and App. A), exact.

``overlap`` replaces each sum by a maximum (Tarnawski App. C.1): ``"half"``:
``max(compute, in + out + overflow)``; ``"full"``: ``max(compute, in, out + overflow)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .constraints import TemplateRef, Term
from .errors import SpecError
from .evaluate import Objective as CostObjective
from .evaluate import Overlap

OVERLAPS = tuple(o.value for o in Overlap)


@dataclass(frozen=True)
class ObjectiveTerm(Term):
    """Base of the objective terms: a cost-model objective and a communication overlap mode."""

    overlap: str = "none"
    kind: ClassVar[str] = "objective"
    cost_objective: ClassVar[CostObjective] = CostObjective.MAX_LOAD

    def __post_init__(self) -> None:
        if self.overlap not in OVERLAPS:
            raise SpecError(f"{type(self).__name__}(overlap={self.overlap!r}): choose overlap from {list(OVERLAPS)}")

    def templates(self, formulation: str) -> list[TemplateRef]:
        return ["device_load", "max_load"]


@dataclass(frozen=True)
class Bottleneck(ObjectiveTerm):
    """Archer et al. MTPP: ``minimize bottleneck >= block_b`` for every block ``b`` (eq. (5)-(7))."""


@dataclass(frozen=True)
class Throughput(ObjectiveTerm):
    """Tarnawski et al. Fig. 6: ``minimize MaxLoad >= Load_i`` over accelerators (eq. 20) and CPUs (eq. 21)."""


@dataclass(frozen=True)
class PipeDream(ObjectiveTerm):
    """Tarnawski et al. §5.3, PipeDream schedule: ``minimize max_d (FW_d + BW_d)``."""


@dataclass(frozen=True)
class GPipe(ObjectiveTerm):
    """Tarnawski et al. §5.3 / App. A, GPipe schedule: ``minimize max_d FW_d + max_d BW_d`` (two epigraphs)."""

    cost_objective: ClassVar[CostObjective] = CostObjective.GPIPE

    def templates(self, formulation: str) -> list[TemplateRef]:
        return ["device_load", "gpipe"]


BY_NAME: dict[str, type[ObjectiveTerm]] = {
    "bottleneck": Bottleneck, "throughput": Throughput, "max_load": Throughput,
    "pipedream": PipeDream, "gpipe": GPipe,
}


def objective_named(name: str, overlap: str = "none") -> ObjectiveTerm:
    """An objective term by its cost-model name (``throughput``, ``bottleneck``, ``pipedream``, ``gpipe``)."""
    if name not in BY_NAME:
        raise SpecError(f"objective {name!r} has no MIP formulation; choose from {sorted(BY_NAME)} "
                        "(latency is scored by the cost model and the heuristics only)")
    return BY_NAME[name](overlap=overlap)
