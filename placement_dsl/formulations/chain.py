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
from ..errors import SpecError
from ..objectives import GPipe
from ..placement import PlacementClass
from ..problem import Problem
from ..solvers.base import Status
from ..structure import device_split
from .base import Formulation, Kind, Plan, drop, register
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
    raise SpecError("chain formulation: the ancestor cuts bound the max load; GPipe's sum of two maxima "
                    "needs formulation='throughput'")


def _shared_colocation(term: Colocate, problem: Problem) -> list[BlockTemplate]:
    if not term.shared:
        raise SpecError("chain formulation: colocation groups must share variables; use Colocate(..., shared=True)")
    return []


def _cluster_order(term: DagOrder, problem: Problem) -> list[BlockTemplate]:
    return [IndexGaps()]


def _windows(term: LoadTarget, problem: Problem) -> list[BlockTemplate]:
    return [PositionWindows(term.target)] if math.isfinite(term.target) else []


CUTOFF_SLACK = 1e-7  # relative: the cutoff sits this far above T*, so a placement of max load T* survives


class ChainFormulation(Formulation):
    """The DP class as a MIP, with position windows from a warm start and the DP-class certificate.

    Option ``windows`` (:func:`~placement_dsl.solve.solve`): ``None`` (default) compiles the
    windows at ``T* = UB / (1 + gap)`` whenever a warm start of value ``UB`` is given; the start
    is then kept as the fallback answer (the windows cut it off, so it is not a MIP start) and
    the bound is ``min(T*, solver bound)``. ``False`` passes the start as a MIP start instead.
    """

    def placement_class(self, problem: Problem) -> PlacementClass:
        return PlacementClass.DP

    def accepts(self, problem: Problem) -> str | None:
        if isinstance(problem.objective, GPipe):
            return "chain formulation: the ancestor cuts bound the max load; use formulation='throughput' for GPipe"
        try:
            device_split(problem.cluster)
        except SpecError as err:
            return f"chain formulation: {err}; use formulation='throughput'"
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


CLOSE = 0.02  # relative distance of floor and best placement at which target_search tries the placement's value
STEP = 0.25  # of the way from the floor to the best placement: the next target while none has failed
FINE = 1e-4  # relative distance of floor and a failed target below which target_search stops


def windowed_bound(problem: Problem, target: float, seconds: float, solver: str = "highs",
                   prune: bool = True) -> tuple[float | None, bool, Placement | None]:
    """``min(T*, bound)`` of the chain MIP windowed at ``target`` within ``seconds`` (build included), whether
    it is proven (the windowed model solved or found empty), and the placement it found (with ``prune``, only
    placements below the cutoff just above ``T*`` are sought; without, the solver's incumbents above it too)."""
    from ..solve import solve

    res = solve(chain_problem(problem, target, prune), formulation="chain", solver=solver, time_limit=seconds, gap=1e-6,
                budget=seconds)
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
    import time

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
    from ..bounds import local

    return 0.0 if local.problem_applies(problem) else local.problem_bound(problem)[0]


BRKGA_SHARE = 0.1  # of target_level's budget spent on a longer BRKGA run: a lower ceiling for the targets
DESCENT_SHARE = 0.15  # ... and on single-op moves from the best placement (heuristics.chain_descent)
BRKGA_CHUNK = 2000  # evaluations per BRKGA run after the first


def _longer_brkga(problem: Problem, seconds: float) -> list[Placement]:
    """BRKGA (seed 1), then runs of :data:`BRKGA_CHUNK` evaluations (seeds 2, 3, ...) seeded with the best keys so
    far while the clock allows another (at most 50,000 evaluations): a loaded machine cannot overrun ``seconds``
    by more than one run."""
    import time

    from ..heuristics import run

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
    import time

    from ..bounds.combinatorial import chain_bound
    from ..heuristics.chain_descent import chain_descent

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
