"""The chain formulation's target search: windowed chain MIPs at climbing load targets (``docs/strengthening.md``).

Every target ``T*`` of a :class:`~placement_dsl.formulations.chain.LoadTarget` gives a valid bound
``min(T*, bound)`` over the DP class; :func:`target_search` climbs the targets between a known bound
and the best placement, and :func:`target_level` (a certify level) first lowers that placement with a
longer BRKGA run and single-op moves. These run :func:`~placement_dsl.solve.solve`, so they sit in the
search layer above it; the formulation itself stays in :mod:`placement_dsl.formulations.chain`.
"""
from __future__ import annotations

import time

from ..bounds import local
from ..bounds.combinatorial import chain_bound
from ..formulations.chain import chain_problem
from ..heuristics import run
from ..heuristics.chain_descent import chain_descent
from ..placement import Placement
from ..problem import Problem
from ..solve import solve
from ..solvers.base import Status
from ..starts import NONE

CLOSE = 0.02  # relative distance of floor and best placement at which target_search tries the placement's value
STEP = 0.25  # of the way from the floor to the best placement: the next target while none has failed
FINE = 1e-4  # relative distance of floor and a failed target below which target_search stops


def windowed_bound(problem: Problem, target: float, seconds: float, solver: str = "highs",
                   prune: bool = True) -> tuple[float | None, bool, Placement | None]:
    """``min(T*, bound)`` of the chain MIP windowed at ``target`` within ``seconds`` (build included), whether
    it is proven (the windowed model solved or found empty), and the placement it found (with ``prune``, only
    placements below the cutoff just above ``T*`` are sought; without, the solver's incumbents above it too)."""
    res = solve(chain_problem(problem, target, prune), formulation="chain", solver=solver, time_limit=seconds, gap=1e-6,
                budget=seconds, warm_start=NONE)  # the model's own proof: an "auto" start's race took the time
    proven = res.status in (Status.OPTIMAL, Status.INFEASIBLE)
    bound = res.bound if res.bound is not None else (target if res.status is Status.INFEASIBLE else None)
    return bound, proven, res.placement if res.status.has_solution else None


def target_search(problem: Problem, upper: float, floor: float, seconds: float, solver: str = "highs",
                  rounds: int = 12) -> tuple[float, list[tuple[float, float | None, bool]], list[Placement]]:
    """The best ``min(T*, bound)`` over windowed chain MIPs at targets between ``floor`` and ``upper``.

    Every ``T*`` gives a valid bound (:class:`LoadTarget`), and a lower ``T*`` fixes more
    positions and lets the solver prune more (its cutoff sits at ``T*``), so the model is
    smaller and proven sooner; proving ``T*`` costs more the closer it is to the optimum. So
    the targets climb: :data:`STEP` of the way from the floor to the best objective ``upper``
    (``upper`` itself once within :data:`CLOSE`); a target proven (nothing below it, or the
    windowed model solved) raises the floor to it; a target not proven in its share of time
    raises the floor to the solver's bound and becomes a ceiling (never tried again). The
    target halfway below it then gets all the time left, without the cutoff: pruned targets
    find no placement, and this round's incumbents may lower the best placement (a proof
    there would rather end the search). Each round before gets half of what is left. Returns the best bound (at least ``floor``), the rounds ``(target, bound, proven)``
    and the placements the windowed models found.
    """
    deadline = time.perf_counter() + seconds
    lo, hi, best, failed = floor, upper, floor, False
    log: list[tuple[float, float | None, bool]] = []
    found: list[Placement] = []
    for i in range(rounds):
        left = deadline - time.perf_counter()
        if left <= 1.0 or hi <= lo * (1 + (FINE if failed else 1e-6)):
            break
        target = hi if not failed and hi - lo <= CLOSE * hi else lo + (hi - lo) * (0.5 if failed else STEP)
        last = failed or i == rounds - 1
        bound, proven, placement = windowed_bound(problem, target, left if last else left / 2, solver, prune=not failed)
        log.append((target, bound, proven))
        if placement is not None:
            found.append(placement)
        if bound is not None:
            best = max(best, bound)
        if proven and bound is not None and bound < target * (1 - 1e-9):
            break  # the windowed optimum lies below T*: it is the optimum
        lo = max(lo, best)
        if not proven:
            hi, failed = target, True
    return best, log, found


def _stage_cut_floor(problem: Problem) -> float:
    """The stage-cut bound where it applies (:mod:`placement_dsl.bounds.local`), else 0."""
    return 0.0 if local.problem_applies(problem) else local.problem_bound(problem)[0]


BRKGA_SHARE = 0.1  # of target_level's budget spent on a longer BRKGA run: a lower ceiling for the targets
DESCENT_SHARE = 0.15  # ... and on single-op moves from the best placement (heuristics.chain_descent)
BRKGA_CHUNK = 2000  # evaluations per BRKGA run after the first


def _longer_brkga(problem: Problem, seconds: float) -> list[Placement]:
    """BRKGA (seed 1), then runs of :data:`BRKGA_CHUNK` evaluations (seeds 2, 3, ...) seeded with the best keys so
    far while the clock allows another (at most 50,000 evaluations): a loaded machine cannot overrun ``seconds``
    by more than one run."""
    g, c, model = problem.graph, problem.cluster, problem.cost_model()
    deadline = time.perf_counter() + seconds
    t0 = time.perf_counter()
    best = run("brkga", g, c, model=model, seed=1)
    per = max(time.perf_counter() - t0, 1e-6) / 1000
    out, seed = [best.placement], 2
    while (seed - 1) * BRKGA_CHUNK < 50_000 and deadline - time.perf_counter() > per * BRKGA_CHUNK:
        t0 = time.perf_counter()
        res = run("brkga", g, c, model=model, seed=seed, evaluations=BRKGA_CHUNK, initial=best.info["keys"][None])
        per, seed = max(time.perf_counter() - t0, 1e-6) / BRKGA_CHUNK, seed + 1
        if res.objective < best.objective:
            best = res
            out.append(res.placement)
    return out


def _best(problem: Problem, placements: list[Placement]) -> Placement | None:
    valid = [p for p in placements if p is not None and problem.is_valid(p)]
    return min(valid, key=lambda p: problem.evaluate(p).objective, default=None)


def target_level(problem: Problem, upper: float, floor: float, seconds: float, solver: str = "highs",
                 start: Placement | None = None) -> tuple[float, bool, str, list[Placement]]:
    """:func:`target_search` from the largest of ``floor``, the ancestor and the stage-cut bounds, below the best of
    ``upper``, a longer BRKGA run (:data:`BRKGA_SHARE` of the time) and single-op moves from the best placement
    (``start`` included; :data:`DESCENT_SHARE`): the bound, whether it meets the best placement or a windowed
    optimum (proven optimal), a note, and the placements found."""
    t0 = time.perf_counter()
    floor = max(floor, chain_bound(problem.graph, problem.cluster), _stage_cut_floor(problem))
    found = _longer_brkga(problem, seconds * BRKGA_SHARE)
    best = _best(problem, [start, *found])
    if best is not None:
        found.append(chain_descent(problem, best, seconds * DESCENT_SHARE))
    upper = min([upper, *(problem.evaluate(p).objective for p in found if problem.is_valid(p))])
    bound, log, more = target_search(problem, upper, floor, seconds - (time.perf_counter() - t0), solver)
    found += more
    best_value = min([upper, *(problem.evaluate(p).objective for p in found if problem.is_valid(p))])
    proven = [t for t, _, ok in log if ok]
    note = f"{len(log)} windowed MIPs" + (f"; targets proven up to {max(proven):.6g}" if proven else "")
    return bound, bound >= best_value * (1 - 1e-9), note, found
