"""Certificates: the best placement found, the best proven lower bound, and the gap between them.

Every bound holds for a class of placements (:data:`~placement_dsl.result.SCOPES`); the
certificate's ``bound`` is the best bound over the problem's own class, and narrower classes'
bounds are reported beside it (``class_bounds``).

Tarnawski et al.'s throughput problems (NeurIPS 2020; ``Contiguous`` or no structure, no
``DagOrder``), cheapest first:

==============  =====================================================  ==============================
level           bound                                                  class
==============  =====================================================  ==============================
``simple``      ``max(max_v work, sum_v work / k)``; for max load also  all placements
                the packing bound (:mod:`.bounds.packing`)
``dp``          DP over ideals (§5.1.1): exact, a certificate by itself  DAG-ordered contiguous (DP class)
``chain``       chain MIP with ancestor cuts and position windows at     DP class
                ``T* = DP / (1 + gap)``: ``min(T*, bound)``
                (``docs/strengthening.md``), a solver's proof of the DP
``throughput``  Fig. 6 IP warm-started from the best placement, its      contiguous (Lemma 4.1), or all
                time-limited dual bound                                 placements without ``Contiguous``
==============  =====================================================  ==============================

Without ``Contiguous`` the DP is only an upper bound: the ``dp`` level polishes its split and the
packing bound's packing (:func:`.heuristics.polish.packed_start`), the best the throughput MIP's warm start.
There, ``neighbourhoods`` (after ``throughput``, with twice its share of what is left) re-solves the IP over
neighbourhoods of the best split (:mod:`.heuristics.neighbourhood`): an upper-bound step, with a bound
only when one neighbourhood holds every unit.

Single-sample latency (a ``Latency`` objective, Tarnawski et al. §4), cheapest first:

=================  ==================================================  ==============================
level              bound                                               class
=================  ==================================================  ==============================
``critical-path``  longest path at the fastest allowed times, no        all placements
                   transfers
``run-paths``      DP over the cheapest cut of each longest path into   the problem's (``q = 1``: its
                   accelerator runs (memory) and host ops, each run      bodies are Lemma 4.1's), else
                   paying its boundary tensors and side inputs           all placements
``latency-lp``     LP of the latency IP (Fig. 3 / Fig. 4) with its cuts  the problem's
``latency``        the IP warm-started from ``latency-best``, its dual   the problem's
                   bound
=================  ==================================================  ==============================

Replicated stages (a ``Replicate(R)`` term, Tarnawski App. C.2) widen every class: ``simple``
becomes :func:`~placement_dsl.bounds.simple.replicated_lower_bound` (each op at its cheapest
replica count ``r <= R`` with the all-reduce its own parameters force; all placements), ``dp``
runs with at most ``R`` replicas per stage (exact over the DP class with replicas when each
kind's accelerators are identical and unlinked, else an upper bound), and ``throughput``
solves ``throughput-replicated``; the other levels ignore replicas and read not applicable.
On a hierarchical cluster (``Cluster.hierarchical``) the ``dp`` level runs ``dp-servers``
(App. C.3: server segments, each split over its accelerators), exact over the DP class there.

The MTPP lower-bound hierarchy of Archer et al. (ICML 2024, §3 and §5), cheapest first:

=============  ==================================================  ===========================
level          bound                                               size
=============  ==================================================  ===========================
``simple``     Lemma 3.3, ``max(max_v work, sum_v work / k)``        closed form
``dp``         exact DP over ideals: a bound for ``Contiguous`` or    (upper bound otherwise)
               identical stages. ``stage-cut``: max_v cheapest stage holding v (n min cuts, every placement);
               ``chain``: the windowed chain MIP from the best placement, on identical stages
``no-cut-io``  three-superblock MIP without transfers (MLSys draft)  O(n) vars, O(m) rows
``no-dag``     three-superblock MIP without eq. (8) (MLSys draft)    O(n), O(m)
``superblock`` §3.2 three-superblock MIP ("bottleneck")              O(n), O(m)
``guess``      §3.3 ``min_j LB_j``, one MIP per guess j               k x (O(n), O(m))
``exact``      Fig. 3                                                O(nk), O(mk)
=============  ==================================================  ===========================

A time-limited MIP contributes its proven dual bound. Heuristics (``dp`` where it applies,
``slicegraph``, ``brkga``) and MIP incumbents give the upper bound; :func:`certify` stops
as soon as ``(best - bound) / best <= gap``.
"""
from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any

from .bounds import simple_lower_bound
from .bounds.packing import packing_bound
from .bounds.simple import replicated_lower_bound
from .certificate import Certificate, LevelResult, LevelStatus, level_status, model_bound, solve_level
from .certify_latency import critical_path, latency_ip, latency_lp, latency_only, latency_upper, not_latency, run_paths
from .certify_latency import latency_host_memory as host_memory_latency
from .constraints import Contiguous, DagOrder
from .deadline import BudgetSpent, Deadline, call_within, seconds
from .errors import PlacementError, SpecError
from .evaluate import Objective
from .objectives import Latency
from .placement import Placement, PlacementClass
from .problem import Problem
from .progress import report

__all__ = ["LEVELS", "Certificate", "Level", "LevelResult", "LevelStatus", "certify", "default_levels",
           "guess_bound", "level_status", "model_bound"]

ALL, DAG_ORDERED, DP_CLASS = PlacementClass.ALL, PlacementClass.DAG_ORDERED, PlacementClass.DP
UPPER = ("slicegraph", "brkga")  # heuristics that always run for the upper bound of DAG-ordered problems
# heuristics tried for an upper bound when the dp level ran but found no valid placement (e.g. the DP over servers
# refused a training graph with too many ideals): the first valid one is the MIP levels' start
FALLBACK_UPPER = ("pipeline", "pipedream-planner", "slicegraph", "greedy")
TOL = 1e-6  # relative slack of a solver's bound over the best objective (solver tolerances)
ROUNDING = 1e-12  # relative difference of bound and objective that is floating-point rounding of the time scale


# ---------------------------------------------------------------------------- MIP levels
def guess_problem(problem: Problem, j: int) -> Problem:
    """``problem`` with the guess ``GuessedBlock(j)`` (Archer §3.3) added."""
    from .formulations import GuessedBlock

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


# ---------------------------------------------------------------------------- the runner
class _Run:
    """State of one certification: best placement, best bound, the table, and the call's deadline (``clock``)."""

    def __init__(self, problem: Problem, solver: str, workers: int, gap: float, clock: Deadline | None = None):
        self.problem, self.solver, self.workers, self.gap = problem, solver, workers, gap
        self.clock = clock or Deadline(math.inf)
        self.model = problem.cost_model()
        self.scope = problem.placement_class()
        self.best: tuple[float, Placement | None, str] = (math.inf, None, "")
        self.bound: tuple[float, str] = (0.0, "none")
        self.class_bounds: dict[PlacementClass, tuple[float, str]] = {}
        self.exact_among: str | None = None
        self.dp: Placement | None = None  # the DP optimum: the chain level's incumbent
        self.rows: list[LevelResult] = []

    def offer(self, placement: Placement, who: str) -> None:
        if not self.problem.is_valid(placement):
            return
        value = self.problem.evaluate(placement).objective
        if value < self.best[0]:
            self.best = (value, placement, who)

    def prove(self, level: str, bound: float | None, scope: PlacementClass = ALL) -> float | None:
        if bound is None:
            return None
        if self.scope not in scope:  # a narrower class: its optimum may exceed the best placement
            if bound > self.class_bounds.get(scope, (-math.inf, ""))[0]:
                self.class_bounds[scope] = (bound, level)
            return bound
        ub = self.best[0]
        assert bound <= ub * (1 + TOL) + 1e-9, (
            f"level {level!r} claims bound {bound!r} above the feasible objective {ub!r} found by {self.best[2]!r}; "
            "the relaxation is invalid")
        bound = ub if bound >= ub * (1 - ROUNDING) else bound  # the scale's rounding is not a gap
        if bound > self.bound[0]:
            self.bound = (bound, level)
        return bound

    def met(self) -> bool:
        ub = self.best[0]
        return math.isfinite(ub) and (ub <= 0 or (ub - self.bound[0]) / ub <= self.gap)

    def certificate(self) -> Certificate:
        value, placement, who = self.best
        return Certificate(placement, value, who, self.bound[0], self.bound[1], self.rows, self.exact_among, self.gap,
                           self.scope, dict(self.class_bounds))


def _upper(run: _Run, methods: tuple[str, ...], seconds: float, first: bool = False) -> None:
    """The upper-bound heuristics, sharing ``seconds`` (each gets what is left of its share); ``first``: stop at
    the first valid placement."""
    from .heuristics import run as heuristic

    g, c = run.problem.graph, run.problem.cluster
    share = run.clock.within(seconds)
    for i, method in enumerate(methods):
        if share.expired(0.1) or (first and math.isfinite(run.best[0])):
            break
        seconds = share.left() / (len(methods) - i)
        try:  # a heuristic still running past its time limit is stopped (BudgetSpent)
            found = call_within(share.within(seconds), heuristic, method, g, c, model=run.model, time_limit=seconds)
            run.offer(found.placement, method)
        except PlacementError:
            continue  # a heuristic that does not apply to this graph (e.g. too many ideals) adds nothing


# ---------------------------------------------------------------------------- levels
Outcome = tuple[float | None, LevelStatus, str, PlacementClass]


@dataclass(frozen=True)
class Level:
    """One rung of the bound hierarchy, registered once in :data:`LEVELS` (run in that order).

    ``run(run, seconds)`` returns the bound, how the level ended, a note, and the class of
    placements the bound holds for; ``accepts(problem)`` is ``None`` when the level bounds the
    problem, else the reason (the row then reads not applicable). ``closed_form`` levels are not
    counted in the MIP levels' shares and may take half of what is left (they stop, or are stopped,
    by it); an ``always`` level runs even after the gap target is met; a
    ``free`` one (a closed form of milliseconds) even after the budget is spent.
    A ``replicates`` level also bounds problems with a :class:`~placement_dsl.training_terms.Replicate`
    term (replicated stages, App. C.2); the others read not applicable there. A MIP level's share
    of what is left is its ``weight`` over the weights of the MIP levels still to run.
    """

    name: str
    run: Callable[[_Run, float], Outcome]
    accepts: Callable[[Problem], str | None] = lambda problem: None
    closed_form: bool = False
    always: bool = False
    free: bool = False
    doc: str = ""
    replicates: bool = False
    weight: float = 1.0


def _widened(problem: Problem) -> str | None:
    """Why no level bounds ``problem``: a term that widens the placements (``widens = True``, e.g.
    :class:`~placement_dsl.training_terms.Replicate`) makes the levels' bounds, which ignore it, no bounds."""
    wide = [type(t).__name__ for t in problem.constraints if getattr(t, "widens", False)]
    return f"{', '.join(wide)} widens the placements beyond what the levels bound" if wide else None


def _replicas(problem: Problem) -> int:
    """The most devices a stage may run on (1 without a ``Replicate`` term)."""
    from .training_terms import Replicate

    return max((t.max_per_stage for t in problem.find(Replicate)), default=1)


def _simple(run: _Run, seconds: float) -> Outcome:
    p = run.problem
    R = _replicas(p)
    if R > 1:
        bound = replicated_lower_bound(p.graph, p.cluster, R, run.model.overlap.value)
        return bound, LevelStatus.OPTIMAL, f"Lemma 3.3 with up to {R} replicas per stage", ALL
    bound = simple_lower_bound(p.graph, p.cluster)
    if run.model.objective is Objective.MAX_LOAD:  # one device's compute bounds max load, not GPipe's sum of maxima
        hole = packing_bound(p.graph, p.cluster)  # at least the pigeonhole bound
        if hole > bound:
            return hole, LevelStatus.OPTIMAL, "packing: units too slow for a host are packed on the accelerators", ALL
    return bound, LevelStatus.OPTIMAL, "Lemma 3.3", ALL


def _dp(run: _Run, seconds: float) -> Outcome:
    from .heuristics import run as heuristic

    scope = run.scope if _dp_class_is_dag_order(run.problem) else DP_CLASS
    R = _replicas(run.problem)
    options = {"replication": True, "max_replicas": R} if R > 1 else {}
    routed = run.problem.cluster.routed and R == 1  # servers: the DP nests one over each server's accelerators
    try:
        res = call_within(run.clock.within(seconds), heuristic, "dp-servers" if routed else "dp", run.problem.graph,
                          run.problem.cluster, model=run.model, time_limit=run.clock.clip(seconds), **options)
    except BudgetSpent:
        raise  # the level is skipped, with the reason
    except PlacementError as err:
        return None, LevelStatus.NOT_APPLICABLE, str(err).split(";")[0], scope
    run.offer(res.placement, "dp")
    run.dp = res.placement if run.problem.is_valid(res.placement) else None
    if R == 1 and not routed and not run.problem.has(Contiguous) and not run.problem.has(DagOrder):
        _polish(run, res.placement, max(run.clock.clip(min(20.0, max(1.0, seconds / 4))), 0.1))
    if R > 1 and not _dp_replicates_exactly(run.problem.cluster):
        return None, LevelStatus.NO_BOUND, (f"upper bound {res.objective:.6g}: the DP replicates a stage within its "
                                            "class of identical devices, the cost model over any devices of its "
                                            "kind"), scope
    if res.exact_among == "contiguous" and run.problem.has(Contiguous):
        run.exact_among = "contiguous" if run.scope in DP_CLASS else None
        return res.bound, LevelStatus.OPTIMAL, "exact over the DP class: a certificate for that class by itself", scope
    if res.exact_among == "contiguous" and run.dp is not None and _dp_class_is_dag_order(run.problem):
        run.exact_among = "dag-ordered"
        return res.bound, LevelStatus.OPTIMAL, "exact: on identical stages the DP class is the DAG-ordered class", scope
    return None, LevelStatus.NO_BOUND, f"upper bound {res.objective:.6g} (exact among {res.exact_among})", scope


def _polish(run: _Run, split: Placement, seconds: float) -> None:
    """Without structure the DP's split is only a start: polish (blocks moved off the busiest stage) from it and
    from the packing bound's packing (``heuristics.polish.packed_start``, where it packs anything), each in
    ``seconds``."""
    from .heuristics import run as heuristic
    from .heuristics.polish import packed_start

    packed = packed_start(run.problem.graph, run.problem.cluster)
    for start, label in ((split, "polish"), (packed, "polish-packed")):
        if start is not None:
            polished = heuristic("polish", run.problem.graph, run.problem.cluster, model=run.model, start=start,
                                 time_limit=seconds)
            run.offer(polished.placement, label)


def _dp_replicates_exactly(cluster: Any) -> bool:
    """Whether the DP's replicas (devices of the stage's class, ring at the class's bandwidth) are every
    replica set the cost model allows (any non-host devices of the stage's kind, ring over their routes):
    the non-host devices of each kind are identical and no links are given."""
    if cluster.links or cluster.routed:
        return False
    kinds = [cluster.devices[g[0]].kind for g in cluster.homogeneous_groups() if not cluster.host[g[0]]]
    return len(kinds) == len(set(kinds))


def _dp_class_is_dag_order(problem: Problem) -> bool:
    """Identical stages, no host devices, an inference graph, under DagOrder: the DP is exact.

    An acyclic quotient numbered in DAG order makes every prefix of stages an ideal, so a
    DAG-ordered placement is a chain of ideals (Tarnawski Fact 5.2) — the DP's search space —
    and conversely; stages being identical, the numbering costs nothing.
    """
    c = problem.cluster
    return (problem.has(DagOrder) and not problem.graph.is_training and not c.host.any()
            and len(c.homogeneous_groups()) == 1)


def _exact(run: _Run, seconds: float) -> Outcome:
    start = run.best[1]
    res, status = solve_level(run, "exact", seconds, start if start is not None and run.problem.is_valid(start)
                               else None)
    if res.placement is not None:
        run.offer(res.placement, "exact")
    return res.bound, status, "", run.scope


def _chain(run: _Run, seconds: float) -> Outcome:
    """The chain MIP windowed at ``DP / (1 + gap)``; on identical stages under DagOrder (its class) without a DP,
    at targets bisected between the known bound and the best placement (``formulations.chain.target_level``)."""
    ordered = _dp_class_is_dag_order(run.problem)
    scope = run.scope if ordered else DP_CLASS
    if run.dp is None and ordered and run.best[1] is not None:  # targets bisected below the best placement
        from .formulations.chain import target_level
        bound, done, note, found = target_level(run.problem, run.best[0], run.bound[0], seconds, run.solver,
                                                start=run.best[1])
        for placement in found:
            run.offer(placement, "chain")
        return bound, LevelStatus.OPTIMAL if done else LevelStatus.TIME_LIMIT, note, scope
    if run.dp is None:
        return None, LevelStatus.NOT_APPLICABLE, "needs the DP's placement as incumbent; run level 'dp'", scope
    try:
        res, status = solve_level(run, "chain", seconds, run.dp, windows=True)
    except SpecError as err:
        return None, LevelStatus.NOT_APPLICABLE, str(err), scope
    if res.placement is not None and res.found_by == "solver":
        run.offer(res.placement, "chain")
    return res.bound, status, "min(T*, bound) of the windowed chain MIP", scope


def _stage_cut(run: _Run, seconds: float) -> Outcome:
    """``max_v min_{S ∋ v} load(S)`` by one minimum cut per op (:mod:`placement_dsl.bounds.local`)."""
    from .bounds.local import problem_bound

    clock = run.clock.within(seconds)
    bound, note = problem_bound(run.problem, deadline=clock)
    if clock.expired():
        return bound, LevelStatus.TIME_LIMIT, note + "; budget spent before every op was cut", ALL
    return bound, LevelStatus.OPTIMAL, note, ALL


def _throughput(run: _Run, seconds: float) -> Outcome:
    """Tarnawski's Fig. 6 IP warm-started from the best placement: its dual bound over the problem's class
    (with a ``Replicate`` term, App. C.2's ``throughput-replicated``)."""
    formulation = "throughput-replicated" if _replicas(run.problem) > 1 else "throughput"
    res, status = solve_level(run, formulation, seconds, run.best[1])
    if res.placement is not None:
        run.offer(res.placement, "throughput")
    note = "" if res.start_accepted in (None, True) else "warm start not accepted"
    return res.bound, status, note, run.scope


def _neighbourhoods(run: _Run, seconds: float) -> Outcome:
    """IP neighbourhoods around the best placement (:mod:`.heuristics.neighbourhood`): an upper-bound step.
    Its bound counts only when one neighbourhood held every unit and was solved to optimality."""
    from .heuristics.neighbourhood import ip_neighbourhoods

    start = run.best[1]
    if start is None:
        return None, LevelStatus.NO_BOUND, "no placement to start from", run.scope
    found = ip_neighbourhoods(run.problem, start, time_limit=seconds, seed=0, solver=run.solver)
    run.offer(found.placement, "ip-neighbourhoods")
    info = found.info
    note = (f"{info['steps']} steps, {info['improvements']} better: {found.objective:.6g}"
            + (", a local optimum of every neighbourhood" if info["local_optimum"] else ""))
    if found.bound is None:
        return None, LevelStatus.NO_BOUND, note, run.scope
    return found.bound, LevelStatus.OPTIMAL, note + "; one neighbourhood held every unit", run.scope


def _relaxed(name: str) -> Callable[[_Run, float], Outcome]:
    """A relaxation level: its formulation's dual bound over the class the relaxation holds for."""
    def level(run: _Run, seconds: float) -> Outcome:
        from .formulations import get

        scope = get(name).placement_class(run.problem)
        bound, status = model_bound(run.problem, name, run.solver, seconds, deadline=run.clock)
        return bound, status, "", scope
    return level


def _guess(run: _Run, seconds: float) -> Outcome:
    from .formulations import get

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
        from .formulations import get

        return get(name).accepts(problem)
    return accepts


def _tarnawski(problem: Problem) -> str | None:
    """Tarnawski's problems, and DAG-ordered ones Archer's MIP cannot write (a routed cluster: its rows hold DAG
    order too)."""
    if problem.has(DagOrder) and _archer_writes(problem):
        return "bounds Tarnawski's problems (no DagOrder); use 'exact'"
    return None


def _archer_writes(problem: Problem) -> bool:
    from .formulations import get

    return get("exact").accepts(problem) is None


def _chain_accepts(problem: Problem) -> str | None:
    """Tarnawski's problems, and DAG-ordered ones on identical stages (where the chain's class is the problem's)."""
    if problem.has(DagOrder) and not _dp_class_is_dag_order(problem):
        return "bounds Tarnawski's problems, or DAG-ordered ones on identical stages; use 'exact'"
    return None


def _local() -> Any:
    from .bounds import local

    return local


def _archer(problem: Problem) -> str | None:
    return None if problem.has(DagOrder) else "Archer's exact MIP bounds DAG-ordered problems"


LEVELS: dict[str, Level] = {lv.name: lv for lv in (
    Level("simple", _simple, not_latency, closed_form=True, free=True,
          doc="Lemma 3.3, max(max_v work, sum_v work / k)", replicates=True),
    Level("dp", _dp, closed_form=True, doc="the DP over ideals, exact for its class", replicates=True),
    Level("stage-cut", _stage_cut, lambda problem: _local().problem_applies(problem), closed_form=True,
          doc="max over ops of the cheapest stage holding it, by minimum cuts"),
    Level("chain", _chain, _chain_accepts, always=True, doc="windowed chain MIP: a solver's proof of the DP"),
    *(Level(name, _relaxed(name), _relaxation_accepts(name)) for name in ("no-cut-io", "no-dag", "superblock")),
    Level("guess", _guess, lambda problem: _relaxation_accepts("guess")(guess_problem(problem, 1)),
          doc="Archer §3.3, one MIP per guess j"),
    Level("throughput", _throughput, _tarnawski, doc="Tarnawski Fig. 6 warm-started, its dual bound",
          replicates=True),
    Level("neighbourhoods", _neighbourhoods, _tarnawski, weight=2.0,
          doc="IP neighbourhoods around the best placement: a better upper bound (a bound when one holds every unit)"),
    Level("exact", _exact, _archer, doc="Archer Fig. 3 warm-started, its dual bound"),
    Level("critical-path", critical_path, latency_only, closed_form=True, free=True,
          doc="latency: longest path at the fastest allowed times, no transfers"),
    Level("run-paths", run_paths, host_memory_latency, closed_form=True,
          doc="latency: the cheapest runs of the longest paths (memory, transfers, side inputs)"),
    Level("latency-lp", latency_lp, host_memory_latency, doc="latency: the LP of Tarnawski Fig. 3 / Fig. 4 with its cuts"),
    Level("latency", latency_ip, host_memory_latency, doc="latency: Tarnawski Fig. 3 / Fig. 4 warm-started, its dual bound"),
)}
MTPP_LEVELS = ("simple", "dp", "stage-cut", "superblock", "guess", "exact")  # default for DagOrder problems
ROUTED_MTPP_LEVELS = ("simple", "dp", "throughput")  # DagOrder on a routed cluster: Archer's cut prices per device
# default for Tarnawski's contiguous problems: the DP and chain certify the DP class; superblock bounds every
# placement (cheap, and stronger than Fig. 6's LP where that IP stalls); the Fig. 6 IP covers the contiguous class
THROUGHPUT_LEVELS = ("simple", "dp", "chain", "superblock", "throughput")
# without structure terms the DP (polished) is the warm start; the IP's own search stalls on these graphs, so the
# re-solves of neighbourhoods of the best split get twice the IP's share (benchmarks/bench_certify.py (b))
NONCONTIG_LEVELS = ("simple", "dp", "superblock", "throughput", "neighbourhoods")
LATENCY_LEVELS = ("critical-path", "run-paths", "latency-lp", "latency")  # single-sample latency (Tarnawski §4)


def default_levels(problem: Problem) -> tuple[str, ...]:
    """:data:`LATENCY_LEVELS` for latency, :data:`MTPP_LEVELS` for DAG-ordered problems (:data:`ROUTED_MTPP_LEVELS`
    where Archer's MIP cannot write them), :data:`THROUGHPUT_LEVELS` for Tarnawski's contiguous ones,
    :data:`NONCONTIG_LEVELS` for non-contiguous ones."""
    if isinstance(problem.objective, Latency):
        return LATENCY_LEVELS
    if problem.has(DagOrder):
        return MTPP_LEVELS if _archer_writes(problem) else ROUTED_MTPP_LEVELS
    return THROUGHPUT_LEVELS if problem.has(Contiguous) else NONCONTIG_LEVELS


def certify(problem: Problem, budget: float = 60.0, levels: tuple[str, ...] | None = None,
            gap: float = 0.01, solver: str = "highs", workers: int = 1, stop_at_gap: bool = True,
            start: Placement | None = None, deadline: Deadline | None = None) -> Certificate:
    """Run the bound hierarchy cheapest-first until the gap target is met or the budget is spent.

    Parameters
    ----------
    problem
        An MTPP (``Bottleneck`` objective, ``DagOrder``) for Archer's MIP levels, or one of
        Tarnawski's throughput problems (``Contiguous`` or no structure term) for ``chain``
        and ``throughput``; ``simple`` and ``dp`` apply to any max-load problem.
    budget
        Wall-clock seconds for the whole call from its start (upper-bound heuristics, model
        builds included); each MIP level gets its share of what is left, and a level that
        cannot fit (its model too large for its share, or nothing left) is skipped with the reason.
    levels
        Names from :data:`LEVELS`, run in the order of :data:`LEVELS`; ``None`` chooses
        :func:`default_levels`. ``chain`` always runs when asked (it checks the DP by a MIP);
        the others are skipped once the gap over the problem's class is met.
    gap
        Stop when ``(best - bound) / best <= gap``.
    workers
        Processes for the ``guess`` level's k MIPs (one solver thread each).
    stop_at_gap
        ``False`` runs every level (the bound-quality table).
    start
        A placement found beforehand (e.g. by a heuristic run outside the budget), the upper
        bound the levels start from when valid.
    deadline
        The caller's :class:`~placement_dsl.deadline.Deadline` (e.g. a command's, from the process
        start): the call ends by it and by ``budget``, whichever comes first.

    Examples
    --------
    >>> from placement_dsl.graph import Graph, Op
    >>> from placement_dsl.problem import Stages
    >>> from placement_dsl.objectives import Bottleneck
    >>> g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2)], [("a", "b")])
    >>> cert = certify(Problem(g, Stages(2), Bottleneck(), [DagOrder()]), budget=20)
    >>> cert.objective, cert.bound, cert.proved_by
    (3.0, 3.0, 'dp')
    """
    clock = _clock(budget, deadline)
    _check_arguments(gap, workers, start)
    chosen = [LEVELS[name] for name in _checked_levels(problem, levels)]
    run = _Run(problem, solver, workers, gap, clock)
    if start is not None:
        run.offer(start, start.source or "start")
    if problem.has(DagOrder):
        _upper(run, UPPER, clock.left() / 4)
    if isinstance(problem.objective, Latency):  # the latency levels' horizon and warm start
        latency_upper(run, clock.clip(min(20.0, clock.seconds / 4)))
    report("certify", level="start", bound=run.bound[0], best=run.best[0])
    for i, level in enumerate(chosen):
        left = clock.left()
        if (stop_at_gap and run.met() and not level.always) or (left <= 0 and not level.free):
            run.rows.append(LevelResult(level.name, None, LevelStatus.SKIPPED, 0.0,
                                        "gap target met" if run.met() else "budget spent"))
            continue
        reason = level.accepts(problem) or (None if level.replicates else _widened(problem))
        if reason:
            run.rows.append(LevelResult(level.name, None, LevelStatus.NOT_APPLICABLE, 0.0, reason, run.scope))
            continue
        if not level.closed_form and not math.isfinite(run.best[0]) and LEVELS["dp"] in chosen[:i]:
            _upper(run, FALLBACK_UPPER, left / 4, first=True)  # in place of the DP's: the MIP levels' start
            left = clock.left()
        weights = sum(lv.weight for lv in chosen[i:] if not lv.closed_form)
        # a closed form (the DP, the cuts) may take half of what is left, a MIP level its weight's share
        share = left * ((0.5 if level.closed_form else level.weight / weights) if weights else 1.0)
        t = time.perf_counter()
        try:
            bound, status, note, scope = level.run(run, share)
        except SpecError as err:  # the level's formulation does not apply to this problem (found while building)
            bound, status, note, scope = None, LevelStatus.NOT_APPLICABLE, str(err), run.scope
        except BudgetSpent as err:  # the level found it cannot fit (e.g. its model is too large for its share)
            bound, status, note, scope = None, LevelStatus.SKIPPED, str(err), run.scope
        run.rows.append(LevelResult(level.name, run.prove(level.name, bound, scope), status, time.perf_counter() - t,
                                    note, scope))
        report("certify", level=level.name, bound=run.bound[0], best=run.best[0])
    return run.certificate()


def _clock(budget: Any, deadline: Deadline | None) -> Deadline:
    """The call's deadline: ``budget`` seconds from now, and the caller's ``deadline`` if sooner."""
    limit = seconds(budget, "budget")
    return Deadline(limit) if deadline is None else deadline.within(limit)


def _check_arguments(gap: Any, workers: Any, start: Any) -> None:
    """:func:`certify`'s other inputs, refused with their name and value."""
    if isinstance(gap, bool) or not isinstance(gap, numbers.Real) or not 0 <= gap < 1:
        raise SpecError(f"gap {gap!r}: give a relative gap in [0, 1)")
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise SpecError(f"workers {workers!r}: give a whole number of processes, 1 or more")
    if start is not None and not isinstance(start, Placement):
        raise SpecError(f"start {start!r}: give a Placement, not a {type(start).__name__}")


def _checked_levels(problem: Problem, levels: tuple[str, ...] | list[str] | None) -> list[str]:
    """The requested level names (or the problem's default hierarchy) in run order; unknown names refused."""
    levels = default_levels(problem) if levels is None else tuple(levels)
    unknown = sorted(set(levels) - set(LEVELS))
    if unknown:
        raise SpecError(f"certify: unknown level(s) {unknown}; choose from {list(LEVELS)}")
    return [name for name in LEVELS if name in levels]
