"""Tarnawski et al.'s latency IP (NeurIPS 2020, §4, Fig. 3 and §4.1, Fig. 4) as a formulation.

The number ``q`` of contiguous subgraphs per accelerator comes from the problem: 1 under
:class:`~placement_dsl.constraints.Contiguous` or ``Subgraphs(1)`` (Fig. 3), ``q`` under
``Subgraphs(q)`` (Fig. 4), and otherwise as many as any placement can need (half the longest
path), so that the optimum is the problem's over all placements. The slots follow the cost
model's cut into subgraphs (:func:`~placement_dsl.blocks.latency_data.levels`), so the model's latency
of a placement is the cost model's.

Before the solve, :meth:`LatencyFormulation.prepare` adds a :class:`LatencyHint`: the warm
start's latency (else Tarnawski §7's greedy's) as the horizon of the big-Ms, and the start's
device order for the symmetry rows, which the start then satisfies.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..blocks import TensorCut
from ..blocks.base import BlockTemplate, Context
from ..blocks.latency import InvocationTimes, LatencyAssignment, LatencyObjective, SubgraphSlots
from ..blocks.latency_cuts import DeviceOrder, PathCuts, RunFlows
from ..blocks.latency_data import first_use_order, run_path_bound
from ..bounds.single_sample import single_sample_bound
from ..constraints import Congestion, Subgraphs, Term
from ..deadline import BudgetSpent, Deadline
from ..errors import PlacementError, SpecError
from ..evaluate import execution
from ..objectives import Latency
from ..placement import PlacementClass
from ..problem import Problem, subgraphs_per_accelerator
from ..solvers.base import Status
from .base import Kind, ObjectiveFormulation, Plan, check_horizon, drop, register, valid_heuristic
from .rules import BASE

if TYPE_CHECKING:
    from ..evaluate import Evaluation
    from ..placement import Placement
    from ..result import Result


@dataclass(frozen=True)
class LatencyHint(Term):
    """What a known placement tells the latency IP: its latency ``horizon`` (cost-model units) bounds the
    optimum and sets the big-Ms; its device ``order`` orients the symmetry rows (:class:`DeviceOrder`); and what
    the combinatorial bounds proved: ``floor`` (:func:`latency_floor`) bounds TotalLatency from below."""

    horizon: float = math.inf
    order: tuple[str, ...] = ()
    floor: float = 0.0  # a lower bound on every placement's latency (cost-model units): TotalLatency's floor

    def __post_init__(self) -> None:
        object.__setattr__(self, "order", tuple(self.order))
        check_horizon(self, "latency")
        if not 0.0 <= self.floor < math.inf:
            raise SpecError(f"LatencyHint: floor must be a finite latency >= 0, got {self.floor!r}")


FLOOR_PATHS = 8  # longest paths the run-paths floor of a solve without a model cuts, in turn while its clock allows


def run_paths_floor(problem: Problem, deadline: Deadline, paths: int = FLOOR_PATHS) -> float | None:
    """The run-paths DP (:func:`~placement_dsl.blocks.latency_data.run_path_bound`) over up to ``paths`` longest
    paths, as many as ``deadline`` allows, in cost-model units: the floor the model's run flows carry, for a solve
    whose model is not built. ``None`` where it does not apply (not Tarnawski's invocation model, a cluster with
    links, a training graph) or no path was priced in time."""
    if not isinstance(problem.objective, Latency) or execution(problem.cluster) != "invocations" \
            or problem.cluster.links or problem.graph.is_training:
        return None
    try:
        ctx = Context(problem)
        value = run_path_bound(ctx, None, subgraphs_per_accelerator(problem) == 1, paths, deadline=deadline)
    except (BudgetSpent, PlacementError):
        return None
    return value * ctx.scale.time if value > 0 else None


def latency_floor(problem: Problem, deadline: Deadline) -> tuple[float, str]:
    """The best combinatorial bound on ``problem``'s latency within ``deadline`` (cost-model units) and what proved
    it: the closed forms (:func:`~placement_dsl.bounds.single_sample.single_sample_bound`: the critical path, the
    cut-op spine, the segments, the accelerators' work) and the run-paths DP over :data:`FLOOR_PATHS` longest paths
    (:func:`run_paths_floor`), each as far as its clock allows; ``0.0`` when none finished."""
    try:
        closed, name = single_sample_bound(problem, deadline.within(deadline.left() / 2))
    except (BudgetSpent, PlacementError):
        closed, name = 0.0, "none"
    paths = run_paths_floor(problem, deadline) if not deadline.expired() else None
    if paths is not None and paths > closed:
        return paths, "the run-paths DP"
    return float(closed), f"a closed form ({name})"


def _skeleton(problem: Problem) -> list[BlockTemplate]:
    q = subgraphs_per_accelerator(problem)
    cut = [TensorCut(form="commio", routes=False)] if q == 1 else []  # the invocation model pays no routes
    return [LatencyAssignment(), *cut, SubgraphSlots(q)]


def _hint(problem: Problem) -> LatencyHint | None:
    hints = problem.find(LatencyHint)
    return min(hints, key=lambda h: h.horizon) if hints else None


def _latency(term: Latency, problem: Problem) -> list[BlockTemplate]:
    """Fig. 3's times and objective, and the symmetry rows, oriented by the problem's hint."""
    if execution(problem.cluster) == "ops":
        raise SpecError("it writes Tarnawski's invocation model, where accelerators run whole "
                        "contiguous subgraphs; this cluster's devices run one op at a time (MOIRAI: a cluster with "
                        "links, or Device(invocations=False)); use formulation 'schedule'")
    if problem.cluster.links:
        raise SpecError("it prices every transfer through host memory (Tarnawski Fig. 3) and cannot "
                        f"price the routes of a cluster with links ({len(problem.cluster.links)} links); use a latency "
                        "heuristic (latency-best, list), which the cost model scores over the routes")
    hint = _hint(problem)
    horizon = hint.horizon if hint is not None and math.isfinite(hint.horizon) else None
    return [InvocationTimes(horizon), PathCuts(horizon), RunFlows(horizon),
            LatencyObjective(horizon, hint.floor if hint else 0.0), DeviceOrder(hint.order if hint else ())]


class LatencyFormulation(ObjectiveFormulation):
    """The latency IP with a horizon from a known latency and the warm start's symmetry orientation."""

    objective = Latency  # the single-sample family: Latency and its alias Makespan
    minimizes = "single-sample latency in the invocation model"

    def placement_class(self, problem: Problem) -> PlacementClass:
        """The problem's own class: ``q`` comes from the problem's terms (:func:`subgraphs_per_accelerator`),
        so the slots admit exactly the placements the problem does (``Subgraphs(1)`` included)."""
        return problem.placement_class()

    def chosen_for(self, problem: Problem) -> bool:
        """``formulation="auto"``: the family's formulation for the way the cluster runs ops
        (:func:`~placement_dsl.evaluate.execution`: ``"invocations"`` here)."""
        return super().chosen_for(problem) and execution(problem.cluster) == "invocations"

    def prepare(self, problem: Problem, start: Placement | None, start_eval: Evaluation | None, gap: float,
                options: Mapping[str, Any]) -> Plan:
        if options:
            raise SpecError(f"formulation {self.name!r} takes no options {sorted(options)}")
        if _hint(problem) is not None:
            return Plan(problem)
        if start is not None and start_eval is not None and start_eval.valid and math.isfinite(start_eval.objective):
            ctx = Context(problem)
            order = first_use_order(ctx, start.assign)
            return Plan(hinted(problem, start_eval.objective, order), info={"horizon": "warm start"})
        found = valid_heuristic(problem, "greedy")  # Tarnawski §7
        if found is None:
            return Plan(problem, info={"horizon": "serial bound"})
        placement, latency = found
        return Plan(hinted(problem, latency), info={"horizon": "greedy", "fallback": placement})

    def with_floor(self, plan: Plan, deadline: Deadline) -> Plan:
        """The plan's problem with the combinatorial floor (:func:`latency_floor`, by ``deadline``) in its hint:
        TotalLatency starts there, so the MIP's bound is never below it and its search prunes by it."""
        hint = _hint(plan.problem)
        value, source = latency_floor(plan.problem, deadline) if not deadline.expired() else (0.0, "")
        if value <= (hint.floor if hint else 0.0):
            return plan
        plan.problem = hinted(plan.problem, hint.horizon if hint else math.inf, hint.order if hint else (), value)
        plan.info.update(floor=value, floor_source=source)
        return plan

    def finish(self, result: Result, plan: Plan) -> None:
        """The combinatorial floor bounds the answer though the solver stopped before its bound reached it;
        without an incumbent from the solver, the greedy placement that set the horizon is the answer."""
        floor = plan.info.get("floor")
        if floor is not None and (result.bound is None or result.bound < floor):
            result.bound = floor if result.objective is None else min(floor, result.objective)
        fallback = plan.info.get("fallback")
        if result.placement is not None or fallback is None:
            return
        ev = plan.problem.evaluate(fallback)
        result.placement, result.objective, result.evaluation = fallback, ev.objective, ev
        result.found_by = "greedy (the horizon)"
        if result.status is Status.TIME_LIMIT_NO_SOLUTION:
            result.status = Status.TIME_LIMIT_FEASIBLE
        if result.bound is not None:
            result.bound = min(result.bound, ev.objective)


def hinted(problem: Problem, horizon: float, order: tuple[str, ...] = (), floor: float = 0.0) -> Problem:
    """``problem`` with a :class:`LatencyHint` (replacing any earlier one; its floor is kept unless ``floor`` is
    higher)."""
    kept = [t for t in problem.constraints if not isinstance(t, LatencyHint)]
    before = _hint(problem)
    floor = max(floor, before.floor if before else 0.0)
    return Problem(problem.source_graph, problem.cluster, problem.objective,
                   [*kept, LatencyHint(horizon, order, floor)])


LATENCY = register(LatencyFormulation(
    "latency", Kind.EXACT, _skeleton,
    rules={Latency: _latency, Subgraphs: drop, LatencyHint: drop,
           Congestion: drop},  # without links an invocation's reads and writes already take turns; links are refused
    parent=BASE,
    doc="""Tarnawski Fig. 3 / Fig. 4: one-hot ``x`` with merged CPUs, contiguous subgraph slots (Lemma 4.1, or
subgraph levels for ``q > 1``), ``CommIn``/``CommOut`` (4)-(5), SubgraphStart/Finish (6)-(7), host ops (8)-(9),
``Latency_v`` (10), subgraphs in turn (14), longest-path and head/tail cuts, symmetry rows; big-Ms from a
known latency and the data."""))
