"""The combinatorial bound a solve prices on its start before the model is built, and when a bound proves an answer.

A throughput model of thousands of ops takes tens of seconds to build; the cut-stages bound
(:mod:`placement_dsl.bounds.cut_stages`, the ``bounds`` command's ``cut-stages`` level) on the start takes seconds,
and often proves the start within the solve's gap (cnn-5000 onto 16 accelerators and a host: 81.3598 below a start of
81.36). Priced first, a start it proves is the answer without a build; otherwise it is the solve's floor, so that the
answer's bound is the larger of the model's and it (cnn-10000 onto 8 stages: 81 % where ``bounds`` proved 0.2 %).
"""
from __future__ import annotations

import math
from typing import Any

from .bounds import cut_stages
from .deadline import Deadline, slowdown
from .result import Result
from .solvers import Status

CUT_SHARE, CUT_MOST = 0.3, 20.0  # of the time left, the cut stages' clock before the model is built, and its most
CUT_PER_EDGE = 3e-5  # seconds per op and edge of the cut stages' tables, block prices and first chain, before the
# search reads its clock (at deadline.LOAD_MEASURED, scaled by slowdown(): gpt3-20000 onto 16 stages, 45,668 ops
# and edges, 2.0 s at load 6.1 on 2 cores)
CUT_PER_EDGE_HOSTS = 1.3e-4  # ... beside host devices (their prices and reach: cnn-5000 onto 16 accelerators and a
# host, 11,183 ops and edges, 2.0 s at load 5.6)


def cut_seconds(problem: Any) -> float:
    """The estimated seconds, here now, of the cut stages' work before their search reads its clock."""
    rate = CUT_PER_EDGE_HOSTS if problem.cluster.host.any() else CUT_PER_EDGE
    return rate * (problem.graph.n + problem.graph.m) * slowdown()


def start_bound(problem: Any, upper: float, clock: Deadline, gap: float) -> tuple[float | None, bool]:
    """The cut-stages bound over the problem's class below a start of max load ``upper``, its first step at the start
    less half the relative ``gap`` (ruled out, it proves the start within the gap, where the start less the gap
    falls short by the bound's shave), in :data:`CUT_SHARE` of ``clock``'s time left (at most :data:`CUT_MOST` s),
    and whether it is the search's last word (its bisection ended, or the start is proven): ``None`` where the bound
    does not apply or its tables do not fit that time, unfinished where its clock stopped it."""
    if not cut_stages.bounds_answer(problem, upper):
        return None, False
    seconds = min(CUT_SHARE * clock.left(), CUT_MOST)
    if cut_seconds(problem) > seconds:
        return None, False
    found = cut_stages.cut_stages_search(problem, upper, cut_stages.SOLVE_PAIRS, seconds,
                                         probe=upper * (1 - 0.5 * gap) if gap > 0 else None)
    return found.bound, found.finished


def meets(bound: float, objective: float, gap: float = 0.0) -> bool:
    """Whether ``bound`` proves ``objective`` optimal within the relative ``gap``: it reaches it within that (and
    within a relative 1e-9, absolute below 1)."""
    return bound >= objective - max(1e-9 * max(1.0, abs(objective)), gap * abs(objective))


def proven(result: Result, gap: float = 0.0) -> None:
    """A time-limited answer whose bound meets its objective (within the relative ``gap``, the solve's: a solver
    stops there too) is :attr:`Status.OPTIMAL`: the bound proves it over the class it covers (``bound_scope``),
    however the search ended."""
    objective, bound = result.objective, result.bound
    if result.status is Status.TIME_LIMIT_FEASIBLE and objective is not None and bound is not None and \
            math.isfinite(objective) and meets(bound, objective, gap):
        result.status = Status.OPTIMAL
