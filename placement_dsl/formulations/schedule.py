"""MOIRAI's makespan MILP (Zhang et al., §III-D, eq. 4-8) as a formulation: placement and schedule at once.

The skeleton is the one-hot assignment (eq. 4c) and the schedule blocks of
:mod:`placement_dsl.blocks.schedule`: op start times and precedence over the augmented DAG
(eq. 4a-4b), transfer tasks with their channel choice (eq. 7), device non-overlap (eq. 6)
and congestion (eq. 8, in the problem's :class:`~placement_dsl.constraints.Congestion` mode).
Memory (eq. 5), pins, colocation and allowed kinds come from the inherited :data:`~.rules.BASE_RULES`.
Non-overlap is a disjunction per pair written directly as big-M rows (one binary per choice, exactly
one per pair), each big-M derived from variable bounds (heads, tails and the horizon): the MILP
``gdp.bigm`` made of the same disjunctions, row for row, built without Pyomo's disjuncts and their
transformation, which were 60 % of the build (506 ops: 45 of 59 CPU s built and extracted, now 11).
The hull reformulation lost to big-M on MOIRAI's sheets when it was compared: on GoogLeNet 13 times
the columns and 9 times the rows, 172 s to build against 9 s, an LP bound barely higher (0.8607
against 0.8597) and a lower root bound within 15 minutes (0.876 against big-M's 0.891 in 78 s).

Before the solve, :meth:`ScheduleFormulation.prepare` adds a :class:`ScheduleHint`: the warm
start's makespan (else list scheduling's, when its placement is valid for the problem) is the
horizon every big-M is derived from, so the start stays feasible and the bounds stay tight.
The solution's schedule is read back with the placement (a
:class:`~placement_dsl.blocks.base.ScheduleLink`) and re-checked by the cost model.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..blocks import Assignment
from ..blocks.base import BlockTemplate
from ..blocks.schedule import DeviceOverlap, MakespanObjective, OpTimes, TransferCongestion, TransferTasks
from ..blocks.subgraph_limit import SubgraphLimit
from ..constraints import Congestion, Overflow, Subgraphs, Term
from ..errors import SpecError
from ..evaluate import execution
from ..objectives import Latency, Makespan
from ..problem import Problem
from .base import Kind, ObjectiveFormulation, Plan, check_horizon, drop, register, valid_heuristic
from .rules import BASE

if TYPE_CHECKING:
    from ..evaluate import Evaluation
    from ..placement import Placement


@dataclass(frozen=True)
class ScheduleHint(Term):
    """A known makespan ``horizon`` (cost-model units): it bounds the optimum, and every big-M of the
    schedule MILP is derived from it (start times lie within ``[head, horizon - tail]``)."""

    horizon: float = math.inf

    def __post_init__(self) -> None:
        check_horizon(self, "makespan")


def horizon_of(problem: Problem) -> float | None:
    """The least hinted horizon, or ``None`` (the templates then take the serial bound)."""
    hints = [h.horizon for h in problem.find(ScheduleHint) if math.isfinite(h.horizon)]
    return min(hints) if hints else None


def hinted(problem: Problem, horizon: float) -> Problem:
    """``problem`` with a :class:`ScheduleHint` of ``horizon``."""
    return Problem(problem.source_graph, problem.cluster, problem.objective,
                   [*problem.constraints, ScheduleHint(float(horizon))])


def _skeleton(problem: Problem) -> list[BlockTemplate]:
    h = horizon_of(problem)
    return [Assignment(), OpTimes(h), TransferTasks(h), DeviceOverlap(h), TransferCongestion(h)]


def _makespan(term: Latency, problem: Problem) -> list[BlockTemplate]:
    """Eq. (4): ``minimize C_max``, with device and port busy-time cuts; devices that run one op at a time (the
    invocation restriction is the ``latency`` formulation's)."""
    if execution(problem.cluster) == "invocations":
        raise SpecError("it schedules devices that run one op at a time (MOIRAI); this cluster's "
                        "accelerators run invocations (Tarnawski's model: a cluster without links, or "
                        "Device(invocations=True)); use formulation 'latency'")
    return [MakespanObjective(horizon_of(problem))]


def _subgraphs(term: Subgraphs, problem: Problem) -> list[BlockTemplate]:
    """Tarnawski Fig. 4 (2): at most ``q`` contiguous subgraphs per accelerator, the least ``q`` asked (one block
    for all the problem's ``Subgraphs`` terms); the schedule times the ops, so the limit needs no slots."""
    least = min(problem.find(Subgraphs), key=lambda t: t.q)
    return [SubgraphLimit(term.q)] if term is least else []


RULES = {
    Latency: _makespan,  # the single-sample family: Latency and its alias Makespan
    Makespan: _makespan,  # its own key too, so a table derived with ``rules={Makespan: ...}`` overrides it
    Congestion: drop,    # the templates read the mode from the problem (ScheduleData.congestion)
    ScheduleHint: drop,  # read by the skeleton and the objective rule (the horizon)
    Overflow: drop,      # a schedule's makespan charges no overflow: soft memory never binds it
    Subgraphs: _subgraphs,
}


class ScheduleFormulation(ObjectiveFormulation):
    """The schedule MILP with a horizon from a known makespan (the warm start's, else list scheduling's)."""

    objective = Latency
    minimizes = "single-sample latency, the makespan of a schedule (MOIRAI eq. 4)"

    def chosen_for(self, problem: Problem) -> bool:
        """``formulation="auto"``: the family's formulation for the way the cluster runs ops
        (:func:`~placement_dsl.evaluate.execution`: ``"ops"`` here)."""
        return super().chosen_for(problem) and execution(problem.cluster) == "ops"

    def prepare(self, problem: Problem, start: Placement | None, start_eval: Evaluation | None, gap: float,
                options: Mapping[str, Any]) -> Plan:
        if options:
            raise SpecError(f"formulation {self.name!r} takes no options {sorted(options)}")
        return self._plan(problem, start_eval)

    @staticmethod
    def _plan(problem: Problem, start_eval: Evaluation | None) -> Plan:
        if horizon_of(problem) is not None:
            return Plan(problem, info={"horizon": "hint"})
        if start_eval is not None and start_eval.valid and math.isfinite(start_eval.objective):
            return Plan(hinted(problem, start_eval.objective), info={"horizon": "warm start"})
        found = list_horizon(problem)
        if found is None:
            return Plan(problem, info={"horizon": "serial bound"})
        return Plan(hinted(problem, found[1]), info={"horizon": "list", "fallback": found[0]})


def list_horizon(problem: Problem) -> tuple[Placement, float] | None:
    """List scheduling's placement and makespan when that placement is valid for the problem, else ``None``."""
    return valid_heuristic(problem, "list")


SCHEDULE = register(ScheduleFormulation("schedule", Kind.EXACT, _skeleton, RULES, parent=BASE, doc="""
MOIRAI (Zhang et al. §III-D): assignment (4c), start times and precedence over the augmented DAG
(4a-4b), transfer tasks with channel choice (7), device non-overlap (6) and port or channel
congestion (8) as a disjunction per pair written as big-M rows with bounds from the data, memory (5);
``minimize C_max`` (4); ``Subgraphs(q)`` by Tarnawski Fig. 4's levels (at most ``q`` contiguous subgraphs per
accelerator)."""))
