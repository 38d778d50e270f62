"""Pin everything outside a free set and re-solve: the repair step of every search in this package.

A *free set* is a set of colocation units, each named by its representative op (the op
``graph.group_id`` points to). :func:`pin_outside` pins every other unit where the incumbent runs
it (:class:`~placement_dsl.constraints.Pin`), and :func:`resolve_free` solves that problem with a
formulation, warm-started by the incumbent, so a step is never worse than the incumbent whenever
the incumbent is a valid start.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..constraints import Pin
from ..placement import Placement
from ..problem import Problem
from ..result import Result
from ..solve import solve

__all__ = ["pin_outside", "resolve_free", "units"]


def units(problem: Problem) -> list[int]:
    """The representative op of every colocation unit of the problem's graph, in order."""
    return sorted({int(r) for r in problem.graph.group_id})


def pin_outside(problem: Problem, incumbent: Placement, free: Iterable[int]) -> Problem:
    """``problem`` with every unit whose representative is not in ``free`` pinned where ``incumbent`` runs it."""
    g, c = problem.graph, problem.cluster
    keep = set(units(problem)) - {int(u) for u in free}
    pins = [Pin(g.names[r], c.names[int(incumbent.assign[r])]) for r in sorted(keep)]
    return Problem(problem.source_graph, c, problem.objective, [*problem.constraints, *pins])


def resolve_free(problem: Problem, incumbent: Placement, free: Iterable[int], formulation: str, *, seconds: float,
                 solver: str = "highs", **options: Any) -> Result:
    """:func:`~placement_dsl.solve.solve` of :func:`pin_outside` with ``formulation`` in ``seconds`` (the whole
    call), warm-started by ``incumbent``; ``options`` go to ``solve`` (``threads``, ``gap``, ...)."""
    return solve(pin_outside(problem, incumbent, free), formulation, solver=solver, time_limit=seconds,
                 warm_start=incumbent, **options)
