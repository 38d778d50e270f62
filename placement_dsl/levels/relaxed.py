"""Archer's relaxations (§3.2, §3.3, and the MLSys draft's): each a formulation's dual bound over the class the
relaxation holds for; ``guess`` is ``min_j LB_j`` over one MIP per guess ``j``."""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from ..certificate import MIP_GAP, LevelStatus, model_bound
from ..deadline import BudgetSpent
from ..problem import Problem
from .base import ALL, Family, Level, Outcome, Run, placement_mip_needs, register


def guess_problem(problem: Problem, j: int) -> Problem:
    """``problem`` with the guess ``GuessedBlock(j)`` (Archer §3.3) added."""
    from ..formulations import GuessedBlock

    return Problem(problem.source_graph, problem.cluster, problem.objective, [*problem.constraints, GuessedBlock(j)])


def _guess_one(args: tuple[Problem, int, str, float]) -> tuple[int, float | None, LevelStatus]:
    problem, j, solver, seconds = args
    bound, status = model_bound(guess_problem(problem, j), "guess", solver, seconds)
    return j, bound, status


def guess_bound(problem: Problem, solver: str = "highs", seconds: float = 60.0, workers: int = 1,
                every_j: bool = False) -> tuple[float | None, LevelStatus, dict[int, float | None]]:
    """``min_j LB_j`` over ``j = 1..k`` (Archer §3.3), the k MIPs in ``workers`` processes.

    ``seconds`` is the level's wall-clock budget, shared by the guesses each worker runs; no
    guess starts after it is spent. Returns the bound (``None`` if some guess proved none, or,
    unless ``every_j``, was not run), the worst status, and every ``LB_j`` that ran. With
    ``every_j`` (Tarnawski's setting, where each ``LB_j`` bounds every placement) the bound is the
    largest ``LB_j`` that ran.
    """
    k = int((~problem.cluster.host).sum())  # the stages, or the accelerators beside CPUs
    deadline = time.perf_counter() + seconds
    rounds = math.ceil(k / max(workers, 1))
    jobs = [(problem, j, solver, seconds / rounds) for j in range(1, k + 1)]
    if workers <= 1:
        results = []
        for job in jobs:
            left = deadline - time.perf_counter()
            if left <= 0.5:
                break
            try:
                results.append(_guess_one((*job[:3], min(job[3], left))))
            except BudgetSpent:  # this guess's model cannot fit in what is left: the later ones neither
                break
    else:
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("fork")) as pool:
            results = list(pool.map(_guess_one, jobs))
    per = {j: b for j, b, _ in results}
    statuses = {s for _, _, s in results} | ({LevelStatus.TIME_LIMIT} if len(per) < k else set())
    worst = next((s for s in (LevelStatus.NO_BOUND, LevelStatus.TIME_LIMIT) if s in statuses), LevelStatus.OPTIMAL)
    proved = [b for b in per.values() if b is not None]
    if every_j:
        return (max(proved) if proved else None), worst, per
    bound = None if len(proved) < k else min(proved)
    return bound, worst, per


def _relaxed(name: str) -> Callable[[Run, float], Outcome]:
    """A relaxation level: its formulation's dual bound over the class the relaxation holds for."""
    def level(run: Run, seconds: float) -> Outcome:
        from ..formulations import get

        scope = get(name).placement_class(run.problem)
        bound, status = model_bound(run.problem, name, run.solver, seconds, deadline=run.clock)
        return bound, status, "", scope
    return level


def _guess(run: Run, seconds: float) -> Outcome:
    from ..formulations import get

    scope = get("guess").placement_class(guess_problem(run.problem, 1))
    every_j = scope is ALL  # unordered superblocks: every LB_j bounds every placement
    bound, status, per = guess_bound(run.problem, run.solver, seconds, run.workers, every_j=every_j)
    k = int((~run.problem.cluster.host).sum())
    ran = f"{len(per)} of {k} guesses ran"
    if bound is None:
        return None, status, ran, scope
    pick = (max if every_j else min)(per, key=lambda j: per[j] if per[j] is not None else -math.inf)
    return bound, status, f"{'max' if every_j else 'min'} over j: j = {pick}; {ran}", scope


def _relaxation_accepts(name: str) -> Callable[[Problem], str | None]:
    def accepts(problem: Problem) -> str | None:
        from ..formulations import get

        return get(name).accepts(problem)
    return accepts


# Archer's relaxations, cheapest first; superblock also joins the default hierarchies of Tarnawski's problems
# (cheap, and stronger than Fig. 6's LP where that IP stalls)
for _name, _rank, _defaults in (("no-cut-io", 50, ()), ("no-dag", 60, ()),
                                ("superblock", 70, (Family.MTPP, Family.THROUGHPUT, Family.NONCONTIGUOUS))):
    register(Level(_name, _relaxed(_name), _relaxation_accepts(_name), rank=_rank, defaults=frozenset(_defaults),
                   precision=MIP_GAP, needs=placement_mip_needs))
register(Level("guess", _guess, lambda problem: _relaxation_accepts("guess")(guess_problem(problem, 1)),
               doc="Archer §3.3, one MIP per guess j", rank=80, defaults=frozenset({Family.MTPP}),
               precision=MIP_GAP, needs=placement_mip_needs))
