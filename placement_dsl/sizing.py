"""Sizes of models before they are built, so that a budget can refuse one it cannot hold.

The module sits above the formulations it sizes (it reads them, they never read it) and below
:func:`~placement_dsl.solve.solve` and the certificates, which call :func:`check_fits` before a build.

The estimates are counts of constraint-matrix nonzeros from the problem's shape (ops ``n``,
edges ``m``, devices ``D``, accelerators ``A``, subgraphs per accelerator ``q``), fitted to the
project's formulations on the reference workloads (``benchmarks/bench_budget.py`` prints the
build times they predict); :func:`placement_dsl.deadline.model_seconds` turns them into seconds.

==================  ===========================  ===========================================
formulation         nonzeros                     measured
==================  ===========================  ===========================================
latency (Fig. 3/4)  ``3.5 n m A min(q, 6)``       bert24 32 ops: 30k; gnmt 96: 163k; bert_l-3
                                                 235: 667k (q = 1); bert24, any q: 158k
schedule            ``12 (n + m) D + 4 n^2 D``    the disjunctive pairs of ops on one device;
                                                 MOIRAI example-1 27 ops: 3.5k; GPT-3 97
                                                 ops: 135k (built at 4 times the rate: the
                                                 disjunctions' big-M transformation)
others              ``9 (n + m) D``              bert_l-3 training 600 ops: throughput 34k,
                                                 exact 12k, without contiguity 10k; GPT-3
                                                 826 ops: throughput 65k
==================  ===========================  ===========================================
"""
from __future__ import annotations

from typing import Any

from .deadline import BudgetSpent, Deadline, model_seconds
from .formulations import get
from .formulations.latency import LatencyFormulation, subgraphs_per_accelerator
from .formulations.schedule import ScheduleFormulation

__all__ = ["build_seconds", "check_fits", "estimate_nonzeros", "fitting_ops"]

MIN_SEARCH = 1.0  # seconds of search below which a model is not worth building


def estimate_nonzeros(problem: Any, formulation: Any) -> float:
    """The nonzeros of ``formulation``'s model of ``problem`` (a registered formulation object), estimated."""
    return _nonzeros(problem, formulation, problem.graph.n, problem.graph.m)


def _nonzeros(problem: Any, formulation: Any, n: float, m: float) -> float:
    """The estimate of :func:`estimate_nonzeros` for a graph of ``n`` ops and ``m`` edges on the problem's cluster."""
    D = problem.cluster.size
    A = max(int((~problem.cluster.host).sum()), 1)
    if isinstance(formulation, LatencyFormulation):  # by the model written: both take the one single-sample objective
        q = subgraphs_per_accelerator(problem)
        return 3.5 * n * max(m, 1) * A * min(max(q, 1), 6)
    if isinstance(formulation, ScheduleFormulation):
        return 12.0 * (n + m) * D + 4.0 * n * n * D
    return 9.0 * (n + m) * D


def _slower(formulation: Any) -> float:
    return 4.0 if isinstance(formulation, ScheduleFormulation) else 1.0  # a Pyomo transformation more


def fitting_ops(problem: Any, formulation: Any, seconds: float) -> int:
    """The most ops a coarsening of ``problem``'s graph may keep so that ``formulation``'s model of it builds in
    ``seconds`` (its edges taken in proportion to its ops, at least one per op but the first); 0 when not even
    two ops fit."""
    form = get(formulation, problem)
    n, m = problem.graph.n, problem.graph.m
    per = max(m / max(n, 1), 1.0)

    def fits(k: int) -> bool:
        return model_seconds(_nonzeros(problem, form, k, per * (k - 1))) * _slower(form) <= seconds

    if not fits(2):
        return 0
    lo, hi = 2, max(n, 2)
    while lo < hi:  # the largest k in [lo, hi] that fits
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def build_seconds(problem: Any, formulation: Any) -> float:
    """Seconds to build and extract ``formulation``'s model of ``problem``, estimated."""
    return model_seconds(estimate_nonzeros(problem, formulation)) * _slower(formulation)


def check_fits(problem: Any, formulation: Any, deadline: Deadline, seconds: float | None = None) -> None:
    """Raise :class:`~placement_dsl.deadline.BudgetSpent` ("model too large for the time left") when building
    ``formulation``'s model of ``problem`` and a useful search (:data:`MIN_SEARCH`) cannot fit into ``seconds``
    (at most what is left of ``deadline``)."""
    form = get(formulation, problem)
    left = deadline.clip(seconds)
    nonzeros = estimate_nonzeros(problem, form)
    need = build_seconds(problem, form)
    if need + MIN_SEARCH > left:
        raise BudgetSpent(f"model too large for the time left: the {form.name!r} model has ~{nonzeros:,.0f} "
                          f"nonzeros, ~{need:.0f} s to build, {left:.1f} s left; not built")
