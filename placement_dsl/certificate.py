"""What a certification returns: how each level ended, the table of levels, and the certificate.

What it knows beyond its class (:class:`Beyond`, gathered by :class:`Wider`) is :mod:`placement_dsl.beyond`'s, which a
solve's answer reports too.

:class:`Certificate` holds the best placement found, the best proven lower bound and the gap;
:func:`model_bound` and :func:`solve_level` are how a level asks a formulation for its bound
(:mod:`placement_dsl.certify` runs the levels).
"""
from __future__ import annotations

import enum
import math
import numbers
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .beyond import Beyond, elsewhere
from .deadline import Deadline
from .errors import SpecError
from .placement import Placement, PlacementClass
from .problem import Problem
from .progress import scaled
from .starts import NONE

if TYPE_CHECKING:  # the solvers' package loads Pyomo: imported where a model is solved, not by the levels without one
    from .solvers.base import Status

MIP_GAP = 1e-6
"""The relative gap a level's MIP (or a relaxation's) is solved to: its ``precision``
(:class:`~placement_dsl.levels.base.Level`), below which it is not run."""


class LevelStatus(str, enum.Enum):
    """How a level ended."""

    OPTIMAL = "optimal"          # the relaxation (or exact MIP) was solved to optimality
    TIME_LIMIT = "time_limit"    # stopped by the budget; its dual bound counts
    NO_BOUND = "no_bound"        # ran but proved nothing (e.g. dp without Contiguous: upper bound only)
    SKIPPED = "skipped"          # not run: the gap target was met earlier, or no budget was left
    NOT_APPLICABLE = "not_applicable"  # the level does not bound this problem (message says why)


@dataclass
class LevelResult:
    """One row of the certificate's table."""

    level: str
    bound: float | None
    status: LevelStatus
    seconds: float
    message: str = ""
    scope: PlacementClass = PlacementClass.ALL  # the class of placements the bound holds for
    label: str = ""  # the class's name where the scope's alone is ambiguous (DAG order in which device order)

    @property
    def named(self) -> str:
        """The class the row covers, by name."""
        return self.label or str(self.scope)

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "bound": self.bound, "status": self.status.value,
                "seconds": round(self.seconds, 3), "message": self.message, "scope": self.named}


@dataclass
class UpperRun:
    """One upper-bound heuristic a certification ran: its placement's objective (``None``: none valid), its
    seconds (wall, from the call; ``work``: the heuristic's own), and why it found nothing."""

    method: str
    objective: float | None
    seconds: float
    message: str = ""
    work: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "objective": self.objective, "seconds": round(self.seconds, 3),
                "message": self.message}


@dataclass
class Certificate:
    """Best placement and who found it, best bound and which level proved it, and the gap.

    ``exact_among`` names the class (e.g. ``"contiguous"``) over which ``found_by`` is exact
    when the problem asks for exactly that class: the placement is then optimal by itself.
    ``scope`` is the problem's class, which ``bound`` covers; ``class_bounds`` maps narrower
    classes (e.g. the DP class) to their best ``(bound, level)``; ``upper`` lists the upper-bound heuristics
    that ran (:class:`UpperRun`). Where terms restrict the problem to its class (``Contiguous``, ``DagOrder``,
    ``Subgraphs``), ``family`` (:class:`Beyond`) says what the run knows over every placement of the same
    objective: the best valid one (outside the class where that is better) and the best bound over them all.
    """

    placement: Placement | None
    objective: float
    found_by: str
    bound: float
    proved_by: str
    levels: list[LevelResult] = field(default_factory=list)
    exact_among: str | None = None
    gap_target: float = 0.01
    scope: PlacementClass = PlacementClass.ALL
    class_bounds: dict[PlacementClass, tuple[float, str]] = field(default_factory=dict)
    upper: list[UpperRun] = field(default_factory=list)  # the upper-bound heuristics that ran, in order
    scope_label: str = ""  # ``scope`` by name where its alone is ambiguous (as LevelResult.label)
    family: Beyond | None = None  # the problem's family beyond its class, where terms restrict it

    @property
    def label(self) -> str:
        """The certified class by name."""
        return self.scope_label or str(self.scope)

    def gap_in(self, scope: PlacementClass) -> float | None:
        """The gap of the best placement against the best bound over ``scope`` (``None`` without one)."""
        if scope == self.scope:
            return self.gap
        if scope not in self.class_bounds or not math.isfinite(self.objective):
            return None
        return 0.0 if self.objective <= 0 else max(0.0, (self.objective - self.class_bounds[scope][0]) / self.objective)

    @property
    def gap(self) -> float:
        """``(objective - bound) / objective`` (0 when both are 0, inf without a placement)."""
        if not math.isfinite(self.objective):
            return math.inf
        return 0.0 if self.objective <= 0 else max(0.0, (self.objective - self.bound) / self.objective)

    @property
    def certified(self) -> bool:
        return self.gap <= self.gap_target

    def to_dict(self) -> dict[str, Any]:
        return {"objective": self.objective, "found_by": self.found_by, "bound": self.bound,
                "proved_by": self.proved_by, "gap": self.gap, "certified": self.certified,
                "exact_among": self.exact_among, "bound_scope": self.label, "classes": self._classes(),
                "class_bounds": {str(k): {"bound": b, "proved_by": lv, "gap": self.gap_in(k)}
                                 for k, (b, lv) in self.class_bounds.items()},
                "levels": [r.to_dict() for r in self.levels], "heuristics": [u.to_dict() for u in self.upper]}

    def _classes(self) -> dict[str, dict[str, Any]]:
        """One entry per class the certificate speaks of: the certified one, and the family beyond it."""
        own = {"objective": self.objective if math.isfinite(self.objective) else None, "found_by": self.found_by,
               "bound": self.bound, "proved_by": self.proved_by, "gap": self.gap if math.isfinite(self.gap) else None,
               "certified": self.certified, "restricted": self.family is not None}
        return {self.label: own, **({self.family.label: self.family.to_dict()} if self.family else {})}

    def table(self) -> str:
        rows = [f"{'level':<11} {'bound':>14} {'bound/UB':>9} {'status':<15} {'seconds':>8}  class"]
        for r in self.levels:
            b = "-" if r.bound is None else f"{r.bound:.6g}"
            ratio = "-" if r.bound is None or not self.objective else f"{r.bound / self.objective:.4f}"
            rows.append(f"{r.level:<11} {b:>14} {ratio:>9} {r.status.value:<15} {r.seconds:>8.2f}  {r.named}")
        for scope, (b, lv) in self.class_bounds.items():
            rows.append(f"over {scope}: bound {b:.6g} by {lv}; gap {self.gap_in(scope):.4%}")
        exact = f" (exact among {self.exact_among} placements)" if self.exact_among else ""
        only = " only" if self.family is not None else ""
        rows.append(f"best {self.objective:.6g} by {self.found_by}; bound {self.bound:.6g} by {self.proved_by} over "
                    f"{self.label}{only}; gap {self.gap:.4%}{exact}")
        beyond = "" if self.family is None else self.family.note(self.label)
        return "\n".join([*rows, beyond] if beyond else rows)


# ---------------------------------------------------------------------------- statuses
def level_status(status: Status, has_bound: bool = True) -> LevelStatus:
    """How a level ended, from its solve's status (the one mapping of solver to level statuses)."""
    from .solvers.base import Status

    if status is Status.OPTIMAL:
        return LevelStatus.OPTIMAL
    return LevelStatus.TIME_LIMIT if status.is_ok and has_bound else LevelStatus.NO_BOUND


# ---------------------------------------------------------------------------- MIP levels
def model_bound(problem: Problem, formulation: str, solver: str, seconds: float,
                lp: bool = False, deadline: Deadline | None = None) -> tuple[float | None, LevelStatus]:
    """Compile ``formulation`` and solve it within ``seconds`` (build included; and by ``deadline``); its dual
    bound in cost-model units.

    ``lp``: solve the linear relaxation instead (integrality dropped), whose optimum is the bound.
    A model too large for the time (:func:`~placement_dsl.sizing.check_fits`) is not built, and a
    build that runs out of it stops: :class:`~placement_dsl.deadline.BudgetSpent`."""
    import pyomo.environ as pyo

    from .compile import compile
    from .sizing import check_fits
    from .solvers import SolveOptions, solve_model
    from .solvers.base import Status

    clock = (deadline or Deadline(math.inf)).within(seconds)
    check_fits(problem, formulation, clock)
    compiled = compile(problem, formulation, deadline=clock)
    if lp:
        pyo.TransformationFactory("core.relax_integer_vars").apply_to(compiled.model)
    clock.check(f"the hand-off of the {formulation!r} model")
    with scaled(compiled.scale.time):
        out = solve_model(compiled.model, solver, SolveOptions(time_limit=max(clock.left(), 0.1), gap=MIP_GAP,
                                                               threads=1, deadline=clock.at))
    bound = out.bound if out.bound is not None else (out.objective if out.status is Status.OPTIMAL else None)
    status = level_status(out.status)
    return (None if bound is None else max(bound, 0.0) * compiled.scale.time), status


def solve_level(run: Any, formulation: str, seconds: float, start: Placement | None,
                 **options: Any) -> tuple[Any, LevelStatus]:
    """Solve ``formulation`` on ``run``'s problem, warm-started from ``start``: the result and how the level ended."""
    from .sizing import check_fits
    from .solve import solve

    clock = run.clock.within(seconds)
    check_fits(run.problem, formulation, clock)
    with elsewhere():  # the certification keeps the family itself
        res = solve(run.problem, formulation=formulation, solver=run.solver, time_limit=max(seconds, 0.1),
                    gap=max(run.gap, MIP_GAP), warm_start=NONE if start is None else start, deadline=clock,
                    **options)  # a level without a start searches from none: the upper phase already raced them
    return res, level_status(res.status, res.bound is not None)


def check_arguments(gap: Any, workers: Any, start: Any) -> None:
    """:func:`~placement_dsl.certify.certify`'s other inputs, refused with their name and value."""
    if isinstance(gap, bool) or not isinstance(gap, numbers.Real) or not 0 <= gap < 1:
        raise SpecError(f"gap {gap!r}: give a relative gap in [0, 1)")
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise SpecError(f"workers {workers!r}: give a whole number of processes, 1 or more")
    if start is not None and not isinstance(start, Placement):
        raise SpecError(f"start {start!r}: give a Placement, not a {type(start).__name__}")
