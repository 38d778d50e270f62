"""The DAG-ordered chain formulation of Tarnawski et al.'s contiguous throughput problem.

The search space of Tarnawski et al.'s DP over ideals (NeurIPS 2020, §5.1.1, App. B) written
with Archer et al.'s cumulative variables (ICML 2024, Fig. 3), CPUs in gaps of the accelerator
sequence, ancestor/descendant cuts and, for a target max load ``T*``, position windows
(``docs/strengthening.md``). A :class:`LoadTarget` term in the problem switches the windows on;
the optimum is then certified by ``min(T*, solver bound)`` (:func:`certified_bound`).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..blocks.base import BlockTemplate
from ..blocks.chain import (
    AncestorCuts,
    ChainAssignment,
    ChainOrder,
    ChainTensorCut,
    CpuGaps,
    IndexGaps,
    PositionWindows,
)
from ..constraints import Colocate, Contiguous, DagOrder, Term
from ..deprecated import moved
from ..errors import SpecError
from ..objectives import GPipe
from ..options import Options, option
from ..placement import PlacementClass
from ..problem import Problem
from ..solvers.base import Status
from ..structure import device_split
from .base import Formulation, Kind, Plan, Refused, drop, register
from .exact import EXACT

if TYPE_CHECKING:
    from ..evaluate import Evaluation
    from ..placement import Placement
    from ..result import Result


@dataclass(frozen=True)
class LoadTarget(Term):
    """Seek the optimum only below ``target``: placements of max load ``<= target`` must survive.

    The ``chain`` formulation realizes it by :class:`~placement_dsl.blocks.chain.PositionWindows`;
    with an incumbent of value ``UB`` and ``target = UB / (1 + gap)`` the optimum is certified
    within ``gap`` by ``min(target, bound)``. Other formulations have no rule for it. With ``prune``
    (default) the solver also prunes at ``target`` (a cutoff), so it finds no placement above it;
    without, it may return better placements above ``target`` than the start (same bound).
    """

    target: float = math.inf
    prune: bool = True

    def __post_init__(self) -> None:
        if not self.target > 0:
            raise SpecError(f"LoadTarget(target={self.target!r}): the target must be a positive max load")


def _skeleton(problem: Problem) -> list[BlockTemplate]:
    """CPU gaps (row 2), cumulative slots (row 1), forward DAG order (rows 3-4), tensor cut (row 5) and
    ancestor cuts (row 7); the terms add loads, memory, pins and the max-load objective (row 6) and,
    with a :class:`LoadTarget`, position windows (row 8)."""
    return [CpuGaps(), ChainAssignment(), ChainOrder(), ChainTensorCut(), AncestorCuts()]


def _no_gpipe(term: GPipe, problem: Problem) -> list[BlockTemplate]:
    raise SpecError("the ancestor cuts bound the max load; GPipe's sum of two maxima "
                    "needs formulation='throughput'")


def _shared_colocation(term: Colocate, problem: Problem) -> list[BlockTemplate]:
    if not term.shared:
        raise SpecError("colocation groups must share variables; use Colocate(..., shared=True)")
    return []


def _cluster_order(term: DagOrder, problem: Problem) -> list[BlockTemplate]:
    return [IndexGaps()]


def _windows(term: LoadTarget, problem: Problem) -> list[BlockTemplate]:
    return [PositionWindows(term.target)] if math.isfinite(term.target) else []


CUTOFF_SLACK = 1e-7  # relative: the cutoff sits this far above T*, so a placement of max load T* survives


class ChainOptions(Options):
    """The chain restriction's options (``solve(..., formulation="chain", options={...})``)."""

    windows: bool | None = option(None, "position windows at the warm start's max load / (1 + gap) (None: whenever "
                                        "a warm start is given; True needs one)")


class ChainFormulation(Formulation):
    """The DP class as a MIP, with position windows from a warm start and the DP-class certificate.

    Option ``windows`` (:func:`~placement_dsl.solve.solve`): ``None`` (default) compiles the
    windows at ``T* = UB / (1 + gap)`` whenever a warm start of value ``UB`` is given; the start
    is then kept as the fallback answer (the windows cut it off, so it is not a MIP start) and
    the bound is ``min(T*, solver bound)``. ``False`` passes the start as a MIP start instead.
    """

    options = ChainOptions

    def placement_class(self, problem: Problem) -> PlacementClass:
        return PlacementClass.DP

    def accepts(self, problem: Problem) -> str | None:
        if isinstance(problem.objective, GPipe):
            return str(Refused(self.name, "the ancestor cuts bound the max load; use formulation='throughput' for GPipe"))
        try:
            device_split(problem.cluster)
        except SpecError as err:
            return str(Refused(self.name, f"{err}; use formulation='throughput'"))
        return super().accepts(problem)

    def prepare(self, problem: Problem, start: Placement | None, start_eval: Evaluation | None, gap: float,
                options: Mapping[str, Any]) -> Plan:
        """The plan of :meth:`_plan`, with the solver's cutoff just above the :class:`LoadTarget` ``T*``: only
        placements below ``T*`` matter, so nodes whose bound reaches it are pruned (``min(T*, bound)`` stays valid)."""
        plan = self._plan(problem, start, start_eval, gap, options)
        targets = [t.target for t in plan.problem.find(LoadTarget) if math.isfinite(t.target) and t.prune]
        if targets:
            plan.cutoff = min(targets) * (1 + CUTOFF_SLACK)
        return plan

    def _plan(self, problem: Problem, start: Placement | None, start_eval: Evaluation | None, gap: float,
              options: Mapping[str, Any]) -> Plan:
        windows = options.get("windows")
        unknown = sorted(set(options) - {"windows"})
        if unknown:
            raise SpecError(f"formulation 'chain' takes the option 'windows' only, not {unknown}")
        if windows and start is None:
            raise SpecError("solve: windows=True needs a warm start that sets the target")
        if start is None or windows is False:
            return Plan(problem)
        assert start_eval is not None
        if not start_eval.valid or not math.isfinite(start_eval.objective) or start_eval.objective <= 0:
            why = "; ".join(v.message for v in start_eval.violations[:3])
            return Plan(problem, pass_start=False, info={"refused": (
                f"warm start refused: the cost model finds it invalid or without a positive max load ({why}); "
                "solved without windows")})
        if problem.class_of(start) not in PlacementClass.DP:  # its target may lie below every placement of the class
            return Plan(problem, pass_start=False, info={"refused": (
                "warm start refused: it lies outside the DP class (its stages are not contiguous or its quotient "
                "graph has a cycle); solved without windows")})
        target = start_eval.objective / (1 + gap)
        return Plan(chain_problem(problem, target), pass_start=False,
                    info={"target": target, "start": start, "start_eval": start_eval})

    def finish(self, result: Result, plan: Plan) -> None:
        """``min(T*, bound)`` certifies the DP class; the start stays the answer unless the solver beat it."""
        native = result.status
        result.bound = certified_bound(plan.problem, result.bound, infeasible=native is Status.INFEASIBLE)
        if "refused" in plan.info:
            result.start_accepted = False
            result.message = "; ".join(m for m in (plan.info["refused"], result.message) if m)
        if "target" not in plan.info:
            return
        start, start_eval = plan.info["start"], plan.info["start_eval"]
        result.found_by = "solver"
        if result.objective is None or start_eval.objective <= result.objective * (1 + 1e-6):
            result.placement, result.objective, result.evaluation = start, start_eval.objective, start_eval
            result.found_by = plan.info.get("label", "warm start")
        if result.bound is not None:
            result.bound = min(result.bound, result.objective)
        result.start_accepted = True  # as the incumbent; the windows cut it off, so it is not a MIP start
        if native in (Status.OPTIMAL, Status.INFEASIBLE):
            result.status = Status.OPTIMAL  # windowed model solved or empty: min(T*, bound) is proven
        elif native in (Status.TIME_LIMIT_FEASIBLE, Status.TIME_LIMIT_NO_SOLUTION):
            result.status = Status.TIME_LIMIT_FEASIBLE
        note = (f"position windows at T* = {plan.info['target']:.6g} (start / (1 + gap)); the start is kept as the "
                f"incumbent; the windowed model ended {native.value}")
        result.message = "; ".join(m for m in (note, result.message) if m)


CHAIN = register(EXACT.derive(
    "chain", Kind.RESTRICTION, _skeleton, cls=ChainFormulation,
    rules={Contiguous: drop, DagOrder: _cluster_order,  # the chain's order implies contiguity; CPUs keep their place
           Colocate: _shared_colocation, GPipe: _no_gpipe, LoadTarget: _windows},
    doc="""The DAG-ordered chain: the search space of Tarnawski et al.'s DP over ideals (§5.1.1, App. B)
written with Archer et al.'s cumulative variables, CPUs in gaps of the accelerator sequence,
ancestor/descendant cuts and, for a target max load, position windows (``docs/strengthening.md``). Under
DagOrder, which orders the devices as the cluster lists them, each CPU sits in the gap where it is listed."""))


def chain_problem(problem: Problem, target: float, prune: bool = True) -> Problem:
    """``problem`` with a :class:`LoadTarget` (replacing any earlier one)."""
    kept = [t for t in problem.constraints if not isinstance(t, LoadTarget)]
    return Problem(problem.source_graph, problem.cluster, problem.objective, [*kept, LoadTarget(target, prune)])


def certified_bound(problem: Problem, bound: float | None, infeasible: bool = False) -> float | None:
    """``min(T*, bound)`` with the problem's :class:`LoadTarget` ``T*`` (the bound alone without one).

    ``bound`` is the solver's bound of the windowed model in cost-model units. A windowed model
    proved ``infeasible`` (nothing below the cutoff just above ``T*``, whatever bound the solver
    last streamed) certifies ``T*``; without a bound and without that proof (e.g. a time limit
    before any bound) nothing is certified (``None``).

    Examples
    --------
    >>> from placement_dsl.problem import Stages
    >>> from placement_dsl.graph import Graph, Op
    >>> p = chain_problem(Problem(Graph([Op(name="a", work=1)], []), Stages(1)), 2.0)
    >>> certified_bound(p, 3.0), certified_bound(p, 1.5), certified_bound(p, None, infeasible=True)
    (2.0, 1.5, 2.0)
    >>> certified_bound(p, 1.5, infeasible=True)
    2.0
    >>> certified_bound(p, None) is None
    True
    """
    targets = [t.target for t in problem.find(LoadTarget)]
    if not targets:
        return bound
    floor = min(targets)
    if infeasible:
        return floor
    return None if bound is None else min(floor, bound)


_MOVED = {name: "placement_dsl.search.chain" for name in (
    "windowed_bound", "target_search", "target_level", "CLOSE", "STEP", "FINE", "BRKGA_SHARE", "DESCENT_SHARE",
    "BRKGA_CHUNK")}


__getattr__ = moved(__name__, _MOVED)  # the chain's target search moved to placement_dsl.search.chain (it runs solve)
