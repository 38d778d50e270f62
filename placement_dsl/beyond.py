"""What a certificate knows beyond its class: the problem's family, every placement of the same objective.

Terms that only restrict a problem's placements to a class (``Term.restricts``: ``Contiguous``, ``DagOrder``,
``Subgraphs``; Tarnawski's contiguous placements are a restriction of every placement the same latency is defined on)
leave a family (:meth:`~placement_dsl.problem.Problem.unrestricted`) whose best placement may lie outside the class.
:class:`Wider` gathers what a run learns of it (the best valid placement outside the class, the best bound over every
placement), :class:`Beyond` is what a certificate reports of it. A certification (:func:`placement_dsl.certify.certify`)
feeds its ``Wider`` from its levels and heuristics; a solve (:func:`placement_dsl.solve.solve`) from the single-sample
closed forms and, for Tarnawski's invocation model, the same heuristics over the family (:func:`search`), in a share of
its time (:func:`widened`).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from .deadline import Deadline, call_within
from .errors import PlacementError
from .evaluate import execution
from .heuristics import run as heuristic
from .heuristics.fallback import SCORING, fallback_seconds
from .placement import Placement
from .problem import Problem, q_model
from .starts import pass_estimates, rebuilt

__all__ = ["BEYOND", "ROUNDING", "TOL", "Beyond", "Wider", "elsewhere", "held", "reported", "search", "widened"]

TOL = 1e-6  # relative slack of a solver's bound over the best objective (solver tolerances)
ROUNDING = 1e-12  # relative difference of bound and objective that is floating-point rounding of the time scale
BEYOND = ("list", "latency-best")  # the heuristics a restricted latency certificate runs over the family
BEYOND_OPS = ("list", "cpop")  # ... and a solve's family where the devices run one op at a time (links, MOIRAI §III):
# the list schedulers, whose interleaved splits contiguity refuses (a contiguous latency of 2,000 ops onto four
# linked accelerators and a host: the class's best 3,071.7, HEFT's schedule 1,046.2)
UPPER_MARGIN, UPPER_MARGIN_PER_OP = 0.15, 1.5e-4  # of its share, and per op, a schedule pass's limit ends early:
# stopped, a pass completes its schedule (a list schedule of 47,584 ops takes 5-7.5 s), which the throughput
# searches' margin (deadline.stop_margin: a placement scored) does not hold
BOUND_SHARE = 0.25  # of a solve's share for the family, the closed forms' at most (the heuristics get the rest)


def held(level: str, bound: float, ub: float, tol: float, rounding: float, above: str) -> float:
    """A bound ``level`` proved, held to a valid objective ``ub``: past it (beyond ``tol``) the level is invalid
    (``above`` says against what); within the scale's ``rounding`` of it, it is ``ub`` (rounding is not a gap)."""
    assert bound <= ub * (1 + tol) + 1e-9, f"level {level!r} claims bound {bound!r} {above} {ub!r}; the relaxation is invalid"
    return ub if bound >= ub * (1 - rounding) else bound


@dataclass
class Beyond:
    """What a certification knows of the problem's family beyond its class (the problem without the terms that
    restrict it, :meth:`~placement_dsl.problem.Problem.unrestricted`: Tarnawski's contiguous placements are a
    restriction of every placement the same latency is defined on).

    ``objective`` is the best valid objective over the family, ``placement`` its placement, found by ``found_by``:
    one outside the certified class (``outside``) where one beats the class's best, else the class's best itself;
    ``bound`` is the best bound proved over the whole family (``label``), by ``proved_by`` (``0`` and ``"none"``
    when no level proved one).
    """

    label: str
    objective: float
    found_by: str
    placement: Placement | None
    outside: bool
    bound: float = 0.0
    proved_by: str = "none"

    @property
    def gap(self) -> float:
        """``(objective - bound) / objective`` over the family (as :attr:`Certificate.gap`)."""
        if not math.isfinite(self.objective):
            return math.inf
        return 0.0 if self.objective <= 0 else max(0.0, (self.objective - self.bound) / self.objective)

    def note(self, within: str) -> str:
        """The certificate's line on the family (:meth:`line`) where it says anything: a better placement outside
        ``within`` or a bound proved over the family; ``""`` otherwise."""
        return self.line(within) if self.outside or self.bound > 0 else ""

    def line(self, within: str) -> str:
        """The certificate's line on the family, ``within`` the certified class's name."""
        bound = f"bound {self.bound:.6g} by {self.proved_by}; gap {self.gap:.4%}"
        if self.outside:
            return f"outside {within}: {self.objective:.6g} by {self.found_by}, valid; over {self.label}: {bound}"
        return f"over {self.label}: {bound} (no better placement found outside {within})"

    def to_dict(self) -> dict[str, Any]:
        return {"objective": self.objective if math.isfinite(self.objective) else None, "found_by": self.found_by,
                "outside": self.outside, "bound": self.bound, "proved_by": self.proved_by,
                "gap": self.gap if math.isfinite(self.gap) else None,
                "placement": self.placement.mapping() if self.outside and self.placement is not None else None}


class Wider:
    """What a certification learns of ``problem``'s family beyond its class (``listed``, by name): the best valid
    placement outside the class (:meth:`offer`, every placement the class refuses) and the best bound over every
    placement (:meth:`prove`), each held to the other (a bound above a valid objective is an invalid level)."""

    def __init__(self, problem: Problem, listed: str, tol: float, rounding: float):
        self.problem, self.listed, self.tol, self.rounding = problem.unrestricted(), listed, tol, rounding
        self.outside: tuple[float, Placement | None, str] = (math.inf, None, "")
        self.wide: tuple[float, str] = (0.0, "none")

    def offer(self, placement: Placement, who: str) -> None:
        """Keep ``placement`` (outside the class) if it is valid over the family and the best such."""
        if self.problem is None:
            return
        broken, ev = self.problem.scored(placement)  # one evaluation for both
        if broken:
            return
        value = ev.objective
        assert self.wide[0] <= value * (1 + self.tol) + 1e-9, (
            f"level {self.wide[1]!r} claims bound {self.wide[0]!r} over all placements above the objective {value!r} "
            f"of {who!r}'s valid placement outside {self.listed}; the bound is invalid")
        if value < self.outside[0]:
            self.outside = (value, placement, who)

    def prove(self, level: str, bound: float, best: float) -> None:
        """A bound ``level`` proved over every placement (``best``: the class's best objective, valid here too)."""
        ub = min(best, self.outside[0])
        if self.problem is None:
            return
        bound = held(level, bound, ub, self.tol, self.rounding, "over all placements above the valid objective")
        if bound > self.wide[0]:
            self.wide = (bound, level)

    def beyond(self, best: tuple[float, Placement | None, str]) -> Beyond | None:
        """The certificate's view of the family, the class's ``best`` (objective, placement, finder) beside."""
        if self.problem is None:
            return None
        outside = self.outside[0] < best[0]
        value, placement, who = self.outside if outside else best
        return Beyond(self.problem.class_label(), value, who, placement, outside, *self.wide)


Offer = Callable[[Placement, str], Any]


def search(problem: Problem, methods: tuple[str, ...], share: Deadline, offer: Offer) -> None:
    """``methods`` in turn on ``problem``'s cost model, with its q (the subgraphs per accelerator its terms allow) on
    Tarnawski's invocations, within ``share``, each answer given to ``offer`` with the method's name (a method stopped
    past its limit, or that does not apply, gives none; a pass whose estimated time does not fit is not run)."""
    model = q_model(problem)
    estimates = pass_estimates(problem, list(methods))
    for method in methods:
        if share.expired(max(0.1, estimates.get(method, 0.0))):
            continue
        limit = share.left()  # its own limit ends a margin before it is stopped, so that it returns its best
        margin = min(max(UPPER_MARGIN * limit, UPPER_MARGIN_PER_OP * problem.graph.n), 0.5 * limit)
        try:
            found = call_within(share.within(limit), heuristic, method, problem.graph, problem.cluster, model=model,
                                time_limit=limit - margin)
        except PlacementError:  # stopped past its limit (BudgetSpent), or it does not apply
            continue
        offer(found.placement, method)


Bound = Callable[[Deadline], "tuple[float | None, str]"]


def widened(problem: Problem, answer: tuple[float, Placement | None, str], deadline: Deadline,
            bound: Bound, offered: list[tuple] = ()) -> Beyond | None:
    """What a solve's ``answer`` (objective, placement, finder; its class's best) leaves open beyond its class, found
    within ``deadline``: ``bound`` (a bound over every placement and what proved it) in :data:`BOUND_SHARE` of it;
    then, while that bound does not meet the answer, the placements the solve's start race scored and the class
    refused (``offered``: ``(objective, method, parts)``, :func:`~placement_dsl.starts.outside`), each while its
    scoring fits, and the family's heuristics (:data:`BEYOND` on Tarnawski's invocations, as a certification runs
    them; :data:`BEYOND_OPS` where the devices run one op at a time) in the rest, each placement the class refuses
    offered as one outside it. ``None`` where no term restricts the problem."""
    wider = Wider(problem, problem.class_label(), TOL, ROUNDING)
    if wider.problem is None:
        return None
    value, by = bound(deadline.within(BOUND_SHARE * deadline.left()))
    if value is not None:
        wider.prove(by, value, answer[0])
    if wider.wide[0] >= answer[0] * (1 - wider.rounding):
        return wider.beyond(answer)

    def outside(placement: Placement, who: str) -> None:
        if not problem.is_valid(placement):  # one the class accepts is no answer beyond it
            wider.offer(placement, who)

    scoring = fallback_seconds(problem.graph, problem.cluster, "none", 2 * SCORING)  # the class's check and the family's
    for _, method, parts in offered:
        if deadline.expired(scoring):
            break
        outside(rebuilt(problem, parts), method)
    search(wider.problem, BEYOND if execution(problem.cluster) == "invocations" else BEYOND_OPS, deadline, outside)
    return wider.beyond(answer)


ELSEWHERE: ContextVar[bool] = ContextVar("family_elsewhere", default=False)


@contextmanager
def elsewhere() -> Iterator[None]:
    """Within the block a solve reports no family (:func:`reported`): its caller keeps one (a certification's model
    level), or it is a step of a solve that reports its own (a coarse model, an LNS window)."""
    token = ELSEWHERE.set(True)
    try:
        yield
    finally:
        ELSEWHERE.reset(token)


def reported() -> bool:
    """Whether a solve started here reports its family (not inside :func:`elsewhere`)."""
    return not ELSEWHERE.get()
