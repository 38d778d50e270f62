"""The answer of :func:`placement_dsl.solve.solve`: a placement with its certificate."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .evaluate import Evaluation
from .placement import Placement, PlacementClass
from .report import device_rows, stage_lines, stage_ranges

if TYPE_CHECKING:  # a heuristic's answer (placement_report, relative_gap) needs no solver stack: solvers loads Pyomo
    from .beyond import Beyond
    from .solvers.base import Status


@dataclass(frozen=True)
class Seconds:
    """Wall-clock seconds of each phase of a solve.

    ``build`` compiles the problem and extracts the model's arrays, ``start`` finds and checks
    the warm start, ``handoff`` gives the model to the solver, ``solve`` is the search;
    ``coarse`` and ``lns`` are the coarse solve and the LNS of a single-sample solve whose model was too
    large to build (:mod:`placement_dsl.search.anytime`), ``again`` the improving method's fresh-seed rounds after
    them (:func:`placement_dsl.stopped.again`), ``restarts`` the makespan's restarts after those
    (:mod:`placement_dsl.restarts`), ``family`` what the answer learns beyond its class
    (:func:`placement_dsl.beyond.widened`); ``total`` is the whole call.
    """

    build: float = 0.0
    start: float = 0.0
    handoff: float = 0.0
    solve: float = 0.0
    total: float = 0.0
    coarse: float = 0.0
    lns: float = 0.0
    again: float = 0.0
    restarts: float = 0.0
    family: float = 0.0

    def to_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """``(objective - bound) / objective``; 0 when both are 0, ``None`` when undefined.

    Examples
    --------
    >>> relative_gap(10.0, 9.0), relative_gap(0.0, 0.0), relative_gap(5.0, None)
    (0.1, 0.0, None)
    """
    if objective is None or bound is None or not math.isfinite(objective) or not math.isfinite(bound):
        return None
    if objective == 0:
        return 0.0 if bound >= 0 else None
    return max(objective - bound, 0.0) / abs(objective)


@dataclass
class Result:
    """A solve's placement, its cost-model objective, the proven bound and how they were found.

    ``objective`` is the cost model's value of ``placement`` (re-evaluated, never taken from the
    solver); ``bound`` is the proven lower bound in cost-model units, never above ``objective``.
    ``found_by`` says who found the placement (``"solver"`` or the warm start, e.g.
    ``"warm start (dp)"``); ``bound_scope`` is the class of placements the bound holds for
    (:class:`~placement_dsl.placement.PlacementClass`; ``DP`` for the ``chain`` restriction). Where terms restrict
    the problem to that class, ``family`` (:class:`~placement_dsl.beyond.Beyond`) says what the solve knows over every
    placement of the same objective, as a certificate's does: the best valid one (outside the class where that is
    better) and a bound over them all.
    """

    status: Status
    placement: Placement | None
    objective: float | None
    bound: float | None
    method: str
    solver: str
    formulation: str
    timings: Seconds = field(default_factory=Seconds)
    log_path: str | None = None
    start_objective: float | None = None
    start_accepted: bool | None = None
    evaluation: Evaluation | None = None
    message: str = ""
    found_by: str = ""
    bound_scope: PlacementClass | None = None
    bound_label: str = ""  # ``bound_scope`` by name where its flag alone is ambiguous (Problem.class_label)
    family: Beyond | None = None  # the problem's family beyond its class, where terms restrict it

    @property
    def gap(self) -> float | None:
        return relative_gap(self.objective, self.bound)

    @property
    def seconds(self) -> float:
        return self.timings.total

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary: the certificate, the placement (op -> device), device rows and stage ranges.

        Non-finite numbers are ``None``; the rows come from :func:`placement_report`.
        """
        out: dict[str, Any] = {
            "objective": _finite(self.objective), "bound": _finite(self.bound), "gap": _finite(self.gap),
            "status": self.status.value, "method": self.method, "solver": self.solver,
            "formulation": self.formulation, "seconds": self.seconds, "timings": self.timings.to_dict(),
            "valid": None if self.evaluation is None else self.evaluation.valid,
        }
        if self.start_accepted is not None or self.start_objective is not None:
            out["start_objective"] = _finite(self.start_objective)
            out["start_accepted"] = self.start_accepted
        if self.found_by:
            out["found_by"] = self.found_by
        if self.bound_scope:
            out["bound_scope"] = self.bound_label or str(self.bound_scope)
        if self.log_path:
            out["log_path"] = self.log_path
        if self.message:
            out["message"] = self.message
        if out["bound"] is None:
            out["no_bound"] = self.no_bound()
        if self.family is not None:  # one entry per class, as a certificate's
            own = {"objective": out["objective"], "found_by": self.found_by, "bound": out["bound"], "gap": out["gap"],
                   "status": out["status"], "restricted": True}
            out["classes"] = {self.bound_label or str(self.bound_scope): own, self.family.label: self.family.to_dict()}
        out.update(placement_report(self.placement, self.evaluation))
        return out

    def summary(self) -> str:
        """A few lines for people: status, objective, bound, gap, time, and the per-device table."""
        gap = "n/a" if self.gap is None else f"{100 * self.gap:.3g}%"
        lines = [f"{self.method} [{self.formulation}] with {self.solver}: {self.status.value} in {self.seconds:.2f}s",
                 f"objective {_fmt(self.objective)}  bound {_fmt(self.bound)}  gap {gap}"]
        if self.start_accepted is not None:
            lines.append(f"warm start {_fmt(self.start_objective)} "
                         f"({'accepted' if self.start_accepted else 'not accepted'})")
        if self.message:
            lines.append(self.message)
        if _finite(self.bound) is None:
            lines.append(self.no_bound())
        if self.evaluation is not None:
            lines.append(self.evaluation.table())
        if self.placement is not None:
            lines.extend(stage_lines(stage_ranges(self.placement)))
        lines.append(self.certificate_line())
        beyond = "" if self.family is None else self.family.note(self.bound_label or str(self.bound_scope))
        return "\n".join([*lines, beyond] if beyond else lines)

    def no_bound(self) -> str:
        """Why the answer carries no lower bound (its bound is ``None`` or not finite), in one line.

        >>> from placement_dsl.solvers.base import Status
        >>> Result(Status.TIME_LIMIT_NO_SOLUTION, None, None, None, "ip", "highs", "latency").no_bound()
        'no bound: neither the solver nor a closed form for the latency formulation proved one within the time limit'
        """
        if self.status.value == "infeasible":
            return "no bound: the model has no feasible solution"
        if self.status.value == "unbounded":
            return "no bound: the model is unbounded"
        if self.status.value == "error":
            return "no bound: the solver failed"
        if self.bound is not None and not math.isfinite(self.bound):
            return f"no bound: the bound found ({self.bound}) is not a finite number"
        when = "within the time limit" if self.status.value.startswith("time_limit") else "for this problem"
        return f"no bound: neither the solver nor a closed form for the {self.formulation} formulation proved one {when}"

    def certificate_line(self) -> str:
        """One line: best objective and who found it, proven bound and its class, gap, status.

        Examples
        --------
        >>> from placement_dsl.solvers.base import Status
        >>> r = Result(Status.OPTIMAL, None, 2.0, 1.9, "ip", "highs", "throughput", found_by="solver",
        ...            bound_scope=PlacementClass.CONTIGUOUS)
        >>> r.certificate_line()
        'certificate: objective 2 (found by solver), bound 1.9 over contiguous placements, gap 5%, status optimal'
        """
        gap = "n/a" if self.gap is None else f"{100 * self.gap:.3g}%"
        only = " only" if self.family is not None else ""
        scope = f" over {self.bound_label or self.bound_scope}{only}" if self.bound_scope and self.bound is not None else ""
        who = f" (found by {self.found_by})" if self.found_by else ""
        return (f"certificate: objective {_fmt(self.objective)}{who}, bound {_fmt(self.bound)}{scope}, "
                f"gap {gap}, status {self.status.value}")


def placement_report(placement: Placement | None, evaluation: Evaluation | None) -> dict[str, Any]:
    """``placement`` (op -> device name), ``devices`` (one row per device, units in the keys), ``stages`` (each
    device's ops as runs in topological order) and ``violations`` (every check the placement breaks, with whether
    the problem requires it: the list ``evaluate`` gives); empty when there is no placement."""
    return {
        "placement": None if placement is None else placement.mapping(),
        "devices": [] if evaluation is None else device_rows(evaluation.devices),
        "stages": [] if placement is None else stage_ranges(placement),
        "violations": [] if evaluation is None else evaluation.violation_rows(),
    }


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.6g}"
