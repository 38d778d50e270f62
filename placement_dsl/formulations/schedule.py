"""MOIRAI's makespan MILP (Zhang et al., §III-D, eq. 4-8) as a formulation: placement and schedule at once.

The skeleton is the one-hot assignment (eq. 4c) and the schedule blocks of
:mod:`placement_dsl.blocks.schedule`: op start times and precedence over the augmented DAG
(eq. 4a-4b), transfer tasks with their channel choice (eq. 7), device non-overlap (eq. 6)
and congestion (eq. 8, in the problem's :class:`~placement_dsl.constraints.Congestion` mode).
Memory (eq. 5), pins, colocation and allowed kinds come from the inherited :data:`~.rules.BASE_RULES`.
Non-overlap is written as ``pyomo.gdp`` disjunctions and reformulated by ``gdp.bigm`` (the
default; :func:`transformed` derives a ``gdp.hull`` variant for comparison, without warm starts).
Big-M wins on MOIRAI's sheets (``benchmarks/bench_moirai.py --hull``): on example-1 the hull has
6.5 times the columns and 5 times the rows for the same LP bound (26) and root bound (28); on
GoogLeNet 13 times the columns and 9 times the rows (99,460 x 148,922 against 7,606 x 17,324),
takes 172 s to build against 9 s, and its LP bound is barely higher (0.8607 against 0.8597) while
HiGHS's root node on it ends lower within 15 minutes (0.876 against big-M's 0.891 in 78 s). The
big-Ms are tight anyway: each is derived from variable bounds (heads, tails and the horizon).

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
from .base import Formulation, Kind, ObjectiveFormulation, Plan, check_horizon, drop, register, valid_heuristic
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
        plan = self._plan(problem, start_eval)
        plan.pass_start = self.transformation == "gdp.bigm"  # the hull's disaggregated variables get no start values
        return plan

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


def transformed(name: str, transformation: str) -> Formulation:
    """The schedule formulation under another GDP reformulation (e.g. ``"gdp.hull"``), unregistered:
    pass the object to ``solve`` or ``compile``."""
    return SCHEDULE.derive(name, doc=f"{SCHEDULE.doc} Reformulated by {transformation}.", cls=ScheduleFormulation,
                           transformation=transformation)


SCHEDULE = register(ScheduleFormulation("schedule", Kind.EXACT, _skeleton, RULES, parent=BASE, doc="""
MOIRAI (Zhang et al. §III-D): assignment (4c), start times and precedence over the augmented DAG
(4a-4b), transfer tasks with channel choice (7), device non-overlap (6) and port or channel
congestion (8) as GDP disjunctions reformulated by big-M with bounds from the data, memory (5);
``minimize C_max`` (4); ``Subgraphs(q)`` by Tarnawski Fig. 4's levels (at most ``q`` contiguous subgraphs per
accelerator).""", transformation="gdp.bigm"))
