"""The certificate's levels for the single-sample family: latency (Tarnawski et al., NeurIPS 2020, §4) and the
makespan of a schedule (MOIRAI, Zhang et al. §III).

Registered in :data:`placement_dsl.levels.base.LEVELS`, the default hierarchies of :attr:`Family.LATENCY` and
:attr:`Family.MAKESPAN`; the table and the class of each bound are in :mod:`placement_dsl.certify`'s docstring.
Each level takes the certification's running state (``run``: its problem, best placement, solver, gap and the
formulation of its model levels) and returns ``(bound, status, note, class)``. The closed forms are in
:mod:`placement_dsl.bounds.latency` and :mod:`placement_dsl.bounds.makespan`.
"""
from __future__ import annotations

import math
import time
from typing import Any

from ..beyond import BEYOND, UPPER_MARGIN, UPPER_MARGIN_PER_OP, search
from ..certificate import MIP_GAP, LevelStatus, UpperRun, model_bound, solve_level
from ..deadline import BudgetSpent, Deadline, call_within
from ..errors import PlacementError, SpecError
from ..heuristics import run as heuristic
from ..heuristics.fallback import SCORING, fallback_seconds, scored_fallback
from ..objectives import Latency
from ..problem import Problem, q_model, subgraphs_per_accelerator
from ..structure import longest_run
from .base import ALL, PATH_PER_EDGE, Family, Outcome, family, latency_only, level, own_class

LATENCY = {Family.LATENCY}
MAKESPAN = {Family.MAKESPAN}


def latency_host_memory(problem: Problem) -> str | None:
    """The levels built on Tarnawski's IP price transfers through host memory: not a cluster with links."""
    reason = latency_only(problem)
    if reason is None and problem.cluster.links:
        return ("prices transfers through host memory (Tarnawski Fig. 3); the cluster's links carry them over "
                "routes, which only the critical-path bound covers")
    return reason


def priced(problem: Problem) -> str | None:
    """The single-sample closed forms price a makespan's transfers over routes, a latency's through host memory
    (so not on a cluster with links, where the latency model moves tensors over routes)."""
    reason = single_sample(problem)
    if reason is None and family(problem) is Family.LATENCY:
        return latency_host_memory(problem)
    return reason


@level("critical-path", rank=120, defaults=LATENCY, accepts=latency_only, closed_form=True, free=True, per_edge=PATH_PER_EDGE,
       doc="latency: longest path at the fastest allowed times, no transfers")
def critical_path(run: Any, seconds: float) -> Outcome:
    """The longest path at the ops' fastest allowed times, without transfers: every placement's latency."""
    from ..bounds.latency import critical_path_bound  # the single-sample bounds: loaded by the levels that run

    bound, path = critical_path_bound(run.problem)
    note = f"{len(path)} ops, {path[0]!r} to {path[-1]!r}" if path else "empty graph"
    return bound, LevelStatus.OPTIMAL, note, ALL


@level("run-paths", rank=130, defaults=LATENCY, accepts=latency_host_memory, closed_form=True,
       doc="latency: the cheapest runs of the longest paths (memory, transfers, side inputs)")
def run_paths(run: Any, seconds: float) -> Outcome:
    """The DP over the cheapest runs of the longest paths: memory splits a path, each split pays its transfers."""
    from ..blocks.base import Context
    from ..blocks.latency_data import run_path_bound

    clock = run.clock.within(seconds)
    ctx = Context(run.problem)
    whole = subgraphs_per_accelerator(run.problem) == 1
    bound = run_path_bound(ctx, None, whole, deadline=clock) * ctx.scale.time
    note = _subgraph_note(run.problem)
    if clock.expired():  # the paths not priced in time are left out: the bound holds, weaker
        if bound <= 0:
            raise BudgetSpent(f"budget spent: no longest path priced in its {clock.seconds:.1f} s")
        return bound, LevelStatus.TIME_LIMIT, f"{note}; budget spent before every path was priced", \
            own_class(run, run.scope) if whole else ALL
    return bound, LevelStatus.OPTIMAL, note, own_class(run, run.scope) if whole else ALL


def _latency_hinted(run: Any) -> Problem:
    """The problem with the best latency found as the latency IP's horizon: the optimum is at most
    that, so the model's bound (over placements no slower) bounds the optimum too."""
    from ..formulations.latency import hinted

    best = run.best[0]
    return hinted(run.problem, best) if math.isfinite(best) and best > 0 else run.problem


def _subgraph_note(problem: Problem) -> str:
    q = subgraphs_per_accelerator(problem)
    every = q >= max(1, math.ceil(longest_run(problem.graph) / 2))
    return "any number of subgraphs per accelerator" if every else f"at most {q} subgraph(s) per accelerator"


@level("latency-lp", rank=140, defaults=LATENCY, accepts=latency_host_memory,
       needs=lambda run: _needs(run, _latency_hinted(run), "latency"),
       doc="latency: the LP of Tarnawski Fig. 3 / Fig. 4 with its cuts")
def latency_lp(run: Any, seconds: float) -> Outcome:
    """The linear relaxation of Tarnawski's latency IP with its cuts, the best latency as horizon."""
    problem = _latency_hinted(run)
    bound, status, form = _model_lp(run, problem, "latency", seconds)
    return bound, status, f"LP; {_subgraph_note(problem)}", own_class(run, form.placement_class(problem))


def _model_lp(run: Any, problem: Problem, default: str, seconds: float) -> tuple[float | None, LevelStatus, Any]:
    """The LP relaxation of the model level's formulation (``certify(formulation=...)``, else ``default``) on
    ``problem`` (the best objective as its horizon), capped by the best objective found: bound, status,
    formulation."""
    from ..formulations import get  # the formulations load Pyomo: only where a model level runs

    form = get(formulation(run, default))
    bound, status = model_bound(problem, form, run.solver, seconds, lp=True, deadline=run.clock)
    if bound is not None and math.isfinite(run.best[0]):
        bound = min(bound, run.best[0])
    return bound, status, form


@level("latency", rank=150, defaults=LATENCY, accepts=latency_host_memory, precision=MIP_GAP,
       needs=lambda run: _needs(run, _latency_hinted(run), "latency"),
       doc="latency: Tarnawski Fig. 3 / Fig. 4 warm-started, its dual bound")
def latency_ip(run: Any, seconds: float) -> Outcome:
    """Tarnawski's latency IP (Fig. 3 / Fig. 4) warm-started from the best placement: its dual bound."""
    bound, status, refused, form = _model_ip(run, "latency", seconds, "latency IP")
    return bound, status, _subgraph_note(run.problem) + ("; " + refused if refused else ""), \
        own_class(run, form.placement_class(run.problem))


def _model_ip(run: Any, default: str, seconds: float, who: str | None = None) -> tuple[Any, Any, str, Any]:
    """The model level's formulation (``certify(formulation=...)``, else ``default``) solved warm-started from the
    best placement, its answer offered as ``who`` (the formulation's name when ``None``): dual bound, status,
    a note when the start was refused, formulation."""
    from ..formulations import get  # the formulations load Pyomo: only where a model level runs

    form = get(formulation(run, default))
    res, status = solve_level(run, form, seconds, run.best[1])
    if res.placement is not None:
        run.offer(res.placement, who or form.name)
    return res.bound, status, "" if res.start_accepted in (None, True) else "warm start not accepted", form


def latency_upper(run: Any, seconds: float) -> None:
    """The family's best heuristics in the share: greedy in O(n + m) first, here (on 20,000 ops the others are stopped
    with nothing), then the start solve makes (:func:`~placement_dsl.starts.resolve` ``"auto"``: the family's searches
    raced, the baselines, then the latency search from the best). Where terms restrict the problem to a class
    (contiguous placements: Tarnawski's invocations of whole subgraphs), that start searches without the class's limit
    on subgraphs per accelerator (q), so latency-best under it runs in its place (the start only where greedy and it
    find no valid placement), and list scheduling and latency-best over the
    family (:data:`BEYOND`) follow with the rest of the share: a placement outside the class that beats the class's
    best is the certificate's to report (12 ops beside a CPU: 99.049 where the contiguous optimum is 212.802). Each
    answer is recorded in ``run.upper``. Before, greedy and latency-best alone ran, after a Pyomo import that took
    3 s of a 2 s share at load 14: a certificate of a 5-op graph held the fallback split's 4.5, or nothing, where
    latency-best finds 3.0."""
    share = run.clock.within(max(seconds, 0.5))
    wide = run.family.problem
    mine = share.within(share.left() * (CLASS_SHARE if wide is not None else 1.0))
    t = time.perf_counter()

    def offer(placement: Any, who: str) -> None:
        value = run.offer(placement, who)
        run.upper.append(UpperRun(who, value, time.perf_counter() - t, "" if value is not None else
                                  NO_PLACEMENT))

    if not any(u.method == "greedy" and not u.message.startswith("skipped") for u in run.upper):  # the same
        # split every time: run once
        _greedy(run, mine, offer)
    if not math.isfinite(run.best[0]):  # greedy's split broke a term (a Pin beside Subgraphs(1) on 6 ops): the split
        fallback_upper(run, mine)  # that keeps them (every op on the CPU), a start for all that follows
    if wide is not None:
        search(run.problem, ("latency-best",), mine, offer)
    if (wide is None or not math.isfinite(run.best[0])) and not mine.expired(0.1):
        _start(run, mine, offer)
    if wide is not None:
        search(wide, BEYOND, share, run.offer)


def _greedy(run: Any, deadline: Deadline, offer: Any) -> None:
    """Greedy's split under the problem's q, here (not in a child stopped at the share: it is the placement the
    certificate always has), where its estimate fits what is left of ``deadline`` or the held split's grace past it
    (:data:`~placement_dsl.stopped.HELD_GRACE`, as solve's): unsized, a spent call of 48,000 ops ran it 2.8 s past
    its clock at load 6, and it grows with the graph."""
    from ..stopped import HELD_GRACE

    p, t = run.problem, time.perf_counter()
    need, left = fallback_seconds(p.graph, p.cluster, "greedy", SCORING), deadline.left()
    if need > left + HELD_GRACE:
        run.upper.append(UpperRun("greedy", None, 0.0, f"skipped: {need:.1f} s estimated for {p.graph.n} ops, "
                                                      f"{left:.1f} s left"))
        return
    q = q_model(p, run.model)
    try:
        offer(heuristic("greedy", p.graph, p.cluster, model=q, time_limit=left).placement, "greedy")
    except PlacementError as err:  # the accelerators cannot run every op
        run.upper.append(UpperRun("greedy", None, time.perf_counter() - t, str(err).split(";")[0]))


def _start(run: Any, deadline: Deadline, offer: Any) -> None:
    """Solve's start (``"auto"``) within ``deadline``, offered; recorded with the reason where it found none."""
    from ..starts import AUTO, resolve

    t = time.perf_counter()
    try:
        start = resolve(run.problem, AUTO, deadline=deadline, share=1.0, cap=math.inf, keep=0.0)
    except PlacementError as err:  # stopped (e.g. a kernel in Python on a cold cache)
        run.upper.append(UpperRun(AUTO_START, None, time.perf_counter() - t, str(err).split(";")[0]))
        return
    if start.placement is None:
        run.upper.append(UpperRun(AUTO_START, None, time.perf_counter() - t, start.refusal))
    else:
        offer(start.placement, start.method or AUTO_START)


AUTO_START = "auto"  # the upper-bound run of solve's start, in run.upper
NO_PLACEMENT = "no valid placement"  # a construction's answer the cost model rejects, in run.upper
CLASS_SHARE = 0.75  # of the heuristics' share, the class's where the family's follow


# ---------------------------------------------------------------------------- the whole family
def formulation(run: Any, default: str) -> Any:
    """The formulation of the model levels: the one given to ``certify(formulation=...)``, else ``default``."""
    return getattr(run, "formulation", None) or default


def single_sample(problem: Problem) -> str | None:
    return None if isinstance(problem.objective, Latency) else \
        "bounds the single-sample family (a Latency or Makespan objective)"


def makespan_only(problem: Problem) -> str | None:
    return None if single_sample(problem) is None and family(problem) is Family.MAKESPAN else \
        "bounds the makespan of a schedule whose devices run one op at a time (MOIRAI)"


@level("route-path", rank=122, defaults=LATENCY | MAKESPAN, accepts=lambda problem: priced(problem), closed_form=True, free=True, per_edge=PATH_PER_EDGE,
       doc="single sample: longest path at the fastest allowed times, each edge its cheapest transfer")
def route_path(run: Any, seconds: float) -> Outcome:
    """The longest path with route costs: each op on its fastest allowed device, each edge the cheapest transfer
    between the devices its ends could run on (0 when they can share one): every placement's objective."""
    from ..bounds.latency import route_path_latency
    from ..bounds.makespan import route_path_makespan

    bound, note = (route_path_latency if family(run.problem) is Family.LATENCY else route_path_makespan)(
        run.problem)
    return bound, LevelStatus.OPTIMAL, note, ALL


@level("device-work", rank=124, defaults=LATENCY | MAKESPAN, accepts=lambda problem: priced(problem), closed_form=True, free=True,
       doc="single sample: the serial devices' work between the ops' heads and tails")
def device_work(run: Any, seconds: float) -> Outcome:
    """Work over devices between heads and tails (:func:`~placement_dsl.bounds.makespan.energy_bound`): every
    placement's objective."""
    from ..bounds.latency import energy_latency
    from ..bounds.makespan import energy_makespan

    bound, note = (energy_latency if family(run.problem) is Family.LATENCY else energy_makespan)(run.problem)
    return bound, LevelStatus.OPTIMAL, note, ALL


def cut_paths(problem: Problem) -> str | None:
    """The segment bound prices what :func:`priced` prices, with the memory an inference graph's ops hold."""
    reason = priced(problem)
    if reason is None and problem.graph.is_training:
        return "counts an inference graph's memory (param + activation bytes); a training graph holds more"
    return reason


@level("segment-path", rank=126, defaults=LATENCY | MAKESPAN, accepts=cut_paths, closed_form=True, free=True,
       doc="single sample: the cheapest cut of long paths into runs that fit in memory, each cut paying its transfer")
def segment_path(run: Any, seconds: float) -> Outcome:
    """The cheapest cut of the heaviest paths into runs that fit a device's memory, each run paying its boundary
    transfers (:func:`~placement_dsl.bounds.memory_path.segment_bound`): every placement's objective."""
    from ..bounds.memory_path import segment_bound

    bound, note, complete = segment_bound(run.problem, run.clock.within(seconds))
    return bound, LevelStatus.OPTIMAL if complete else LevelStatus.TIME_LIMIT, note, ALL


@level("split-heads", rank=127.5, defaults=MAKESPAN, accepts=makespan_only, closed_form=True,
       doc="makespan: each op's start on each device, its ancestors split between running there and moving there")
def split_heads(run: Any, seconds: float) -> Outcome:
    """Heads and tails that price the split of an op's ancestors between its device (run there one at a time) and
    the others (their tensors moved to it), the least split found by sorting, then the work over the devices
    between them (:func:`~placement_dsl.bounds.split_heads.split_bound`): every placement's makespan."""
    from ..bounds.split_heads import split_bound

    bound, note, complete = split_bound(run.problem, run.clock.within(seconds))
    return bound, LevelStatus.OPTIMAL if complete else LevelStatus.TIME_LIMIT, note, ALL


def spine_priced(problem: Problem) -> str | None:
    """The cut-op spine prices Tarnawski's invocations through host memory, with an inference graph's memory."""
    return latency_only(problem) or cut_paths(problem)


@level("cut-spine", rank=125, defaults=LATENCY, accepts=spine_priced, closed_form=True, free=True,
       doc="latency: runs of the ops comparable with all others, the side branches between them priced")
def cut_spine(run: Any, seconds: float) -> Outcome:
    """The shortest path over the cut ops: runs that fit, each paying its reads and writes, and the side branches
    between two runs in their free memory, on a host or in an invocation of their own
    (:func:`~placement_dsl.bounds.latency_spine.spine_bound`): every placement's latency, any split."""
    from ..bounds.latency_spine import spine_bound

    bound, note = spine_bound(run.problem, run.clock.within(seconds))
    return bound, LevelStatus.OPTIMAL, note, ALL


def all_serial(problem: Problem) -> str | None:
    """The cut segments count every device's share of a segment's work as run one op at a time."""
    reason = makespan_only(problem)
    if reason is None and problem.cluster.parallel.any():
        return "counts every device as running one op at a time; this cluster has parallel hosts"
    return reason


@level("cut-segments", rank=127, defaults=MAKESPAN, accepts=all_serial, closed_form=True, free=True,
       doc="makespan: the segments between ops comparable with all others, each device paying its way in and out")
def cut_segments(run: Any, seconds: float) -> Outcome:
    """The ops comparable with all others split every schedule in time; between two of them each device that joins
    pays a transfer in and out (:func:`~placement_dsl.bounds.segments.transfer_segment_bound`): every placement's
    makespan."""
    from ..bounds.segments import transfer_segment_bound

    bound, note = transfer_segment_bound(run.problem, run.clock.within(seconds))
    return bound, LevelStatus.OPTIMAL if "budget spent" not in note else LevelStatus.TIME_LIMIT, note, ALL


@level("segment-schedules", rank=129, defaults=MAKESPAN, accepts=makespan_only, closed_form=True,
       doc="makespan: each segment between cut ops scheduled alone by CP-SAT, with its transfers and congestion")
def segment_schedules(run: Any, seconds: float) -> Outcome:
    """The ops comparable with all others split every schedule in time; each segment between two of them is a small
    schedule of its own, priced by CP-SAT's proven bound
    (:func:`~placement_dsl.cpsat_segments.schedule_segment_bound`): every placement's makespan."""
    from ..cpsat_segments import schedule_segment_bound

    bound, note, complete = schedule_segment_bound(run.problem, run.clock.within(seconds))
    return bound, LevelStatus.OPTIMAL if complete else LevelStatus.TIME_LIMIT, note, ALL


@level("window-schedules", rank=129.5, defaults=MAKESPAN, accepts=makespan_only, closed_form=True,
       doc="makespan: windows around the most critical ops scheduled by CP-SAT from the split heads to the tails")
def window_schedules(run: Any, seconds: float) -> Outcome:
    """Windows of the graph (the whole of a small one, and the ops around the most critical), each scheduled alone by
    CP-SAT with the split heads as its ops' releases and the split tails after them
    (:func:`~placement_dsl.cpsat_segments.schedule_window_bound`): every placement's makespan."""
    from ..cpsat_segments import schedule_window_bound

    bound, note, complete = schedule_window_bound(run.problem, run.clock.within(seconds))
    if note.startswith("declined"):
        raise BudgetSpent(f"window-schedules {note}")
    return bound, LevelStatus.OPTIMAL if complete else LevelStatus.TIME_LIMIT, note, ALL


def lift_needs(run: Any) -> float:
    """The lifted heads' seconds before their first window (the child's start and two passes over the ops)."""
    from ..cpsat_lift import needs

    return needs(run.problem)


@level("lifted-heads", rank=129.7, defaults=MAKESPAN, accepts=makespan_only, closed_form=True, needs=lift_needs,
       doc="makespan: split heads lifted window by window, each window of an op's ancestors scheduled by CP-SAT")
def lifted_heads(run: Any, seconds: float) -> Outcome:
    """The split heads carried along the topological order, each anchor's nearest ancestors scheduled alone by
    CP-SAT from their heads, its proven least makespan the floor of the heads after it
    (:func:`~placement_dsl.cpsat_lift.lifted_head_bound`): every placement's makespan."""
    from ..cpsat_lift import lifted_head_bound

    bound, note, complete = lifted_head_bound(run.problem, run.clock.within(seconds))
    if note.startswith("declined"):
        raise BudgetSpent(f"lifted-heads {note}")
    return bound, LevelStatus.OPTIMAL if complete else LevelStatus.TIME_LIMIT, note, ALL


@level("segment-lp", rank=128, defaults=MAKESPAN, accepts=makespan_only, closed_form=True,
       doc="makespan: a shortest path over the cut ops' devices, each segment its LP of work and port loads")
def segment_lp(run: Any, seconds: float) -> Outcome:
    """The ops comparable with all others split every schedule in time; each segment between two of them is priced,
    for every pair of devices of its cut ops, by its path and an LP of its devices' work and its transfers' loads on
    the congested resources, and the cut ops' devices are chosen by a shortest path
    (:func:`~placement_dsl.bounds.segment_lp.segment_lp_bound`): every placement's makespan."""
    from ..bounds.segment_lp import segment_lp_bound

    bound, note, complete = segment_lp_bound(run.problem, run.clock.within(seconds))
    return bound, LevelStatus.OPTIMAL if complete else LevelStatus.TIME_LIMIT, note, ALL


def _schedule_hinted(run: Any) -> Problem:
    """The problem with the best makespan found as the schedule model's horizon (its big-Ms)."""
    best = run.best[0]
    from ..formulations.schedule import hinted as schedule_hinted
    from ..formulations.schedule import horizon_of

    if horizon_of(run.problem) is not None or not math.isfinite(best):
        return run.problem
    return schedule_hinted(run.problem, best)


def schedule_needs(run: Any) -> float:
    """The estimated build of the schedule model the makespan's model levels solve (the best makespan its horizon),
    counted only as far as the certification's time left needs (a model that cannot fit is not sized further: its
    pairs took 5 s to count at 18,164 ops, before the level's own clock started)."""
    return _needs(run, _schedule_hinted(run), "schedule")


def _needs(run: Any, problem: Problem, default: str) -> float:
    from ..formulations import get
    from ..sizing import build_seconds

    return build_seconds(problem, get(formulation(run, default), problem), within=run.clock.left())


@level("schedule-lp", rank=160, defaults=MAKESPAN, accepts=makespan_only, needs=schedule_needs,
       doc="makespan: the LP of MOIRAI's schedule MILP")
def schedule_lp(run: Any, seconds: float) -> Outcome:
    """The linear relaxation of the schedule MILP (MOIRAI eq. 4-8, big-M from the best makespan as horizon)."""
    problem = _schedule_hinted(run)
    bound, status, form = _model_lp(run, problem, "schedule", seconds)
    return bound, status, "LP", own_class(run, form.placement_class(problem))


@level("schedule", rank=170, defaults=MAKESPAN, accepts=makespan_only, precision=MIP_GAP, needs=schedule_needs,
       doc="makespan: MOIRAI's schedule MILP warm-started, its dual bound")
def schedule_ip(run: Any, seconds: float) -> Outcome:
    """The schedule MILP warm-started from the best placement: its dual bound, and its incumbent."""
    bound, status, note, form = _model_ip(run, "schedule", seconds)
    return bound, status, note, own_class(run, form.placement_class(run.problem))


IMPROVE = "schedule-ls"  # continues from the best schedule of the passes for what is left of the share


WIDEN = 1.2  # the cheapest split's estimate, times this: the time makespan_upper keeps for it (the load may rise
# between the estimate and the split's own sizing; the next split, greedy's, does not fit then)


def makespan_upper(run: Any, seconds: float) -> None:
    """The single-sample schedule heuristics for the makespan levels' horizon and warm start, sharing ``seconds``:
    the constructions solve's start race runs, in its order (:func:`~placement_dsl.starts.construction_order`: the
    passes, :data:`~placement_dsl.starts.PASSES`, cheapest first by their estimates, then greedy), each with all the
    share left, then the critical-chain search from the best of them for the rest (a pass cut short offers nothing).
    The share is widened to hold the cheapest pass's estimate, and once a valid schedule is held a construction whose
    estimate exceeds the share left is not started (it would be stopped with nothing). MOIRAI's GoogLeNet on one core:
    one device 2.336, HEFT 1.530, CPOP 1.519, GETF 1.524, m-SCT 1.977, each under 0.05 s; from CPOP's the search
    found 1.373 in a 10 s certificate. On a 15,000-task sheet (47,584 ops) HEFT finds 319.5 in 3 s of CPU; run after
    the best single device by estimates 20 times too high, it was left no time and ``bounds`` answered the fallback
    split's 1,078.51.

    The share leaves the levels' clock the time of the cheapest fallback split and its scoring
    (:func:`~placement_dsl.heuristics.fallback.fallback_seconds`, :data:`WIDEN`), built here where no pass found a
    valid schedule: on 47,584 ops the passes took their 7.5 s of a 30 s ``bounds`` and were stopped with nothing, and
    the split after the levels no longer fitted ("best inf"). Where the cheapest pass and the split do not both fit,
    the cheaper of the two has the time (HEFT, ~10 s at load 6 on 47,584 ops, where the split takes 17 s for 1,078.51
    and had left it 3.3 s after 11 s of reading the sheet).

    Run again with the time the levels leave, the constructions that answered (a schedule, valid or not: each is
    deterministic) are not run twice; those cut short or skipped run, and the search from the best has the rest
    (on a 1,500-op sheet the second run built the same eight schedules again).
    """
    from ..starts import auto_methods, construction_order, improve, pass_estimates, resolve

    p = run.problem
    split = WIDEN * fallback_seconds(p.graph, p.cluster, "balanced", SCORING)
    methods = auto_methods(p)
    passes = pass_estimates(p, methods)
    order = construction_order(p, methods, passes)
    needs = {m: passes.get(m) or fallback_seconds(p.graph, p.cluster, m) for m in order}
    first, left = (needs[order[0]] if order else 0.0), run.clock.left()
    kept = split if first + split <= left or first > split else 0.0  # both fit, or the split is the cheaper
    share = run.clock.within(max(min(max(seconds, first), left - kept), 0.5))
    done = {u.method for u in run.upper if u.objective is not None or u.message == NO_PLACEMENT}
    for method in (m for m in order if m not in done):  # run again: those cut short or skipped, not their answers
        if share.expired(0.1):
            break
        if math.isfinite(run.best[0]) and needs[method] > share.left():
            run.upper.append(UpperRun(method, None, 0.0, f"skipped: ~{needs[method]:.1f} s estimated, "
                                                         f"{share.left():.1f} s left"))
            continue
        limit = share.left()  # its own limit ends a margin before it is stopped: a cut pass completes its schedule
        margin = min(max(UPPER_MARGIN * limit, UPPER_MARGIN_PER_OP * p.graph.n), 0.5 * limit)
        t = time.perf_counter()
        try:
            found = call_within(share.within(limit), heuristic, method, p.graph, p.cluster, model=run.model,
                                time_limit=limit - margin)
        except PlacementError as err:
            run.upper.append(UpperRun(method, None, time.perf_counter() - t, str(err).split(";")[0]))
            continue
        value = run.offer(found.placement, method)
        run.upper.append(UpperRun(method, value, time.perf_counter() - t, "" if value is not None else
                                  NO_PLACEMENT, found.seconds))
    if not math.isfinite(run.best[0]):  # the passes found no valid schedule: the cheapest split, in the time kept
        fallback_upper(run, run.clock.within(max(share.left(), split)))
    best = run.best[1]
    if best is not None and not share.expired(0.1):
        better = improve(p, resolve(p, best), share.left() - 0.05, method=IMPROVE)
        if better.usable:
            run.offer(better.placement, f"{run.best[2]}+{IMPROVE}")


def fallback_upper(run: Any, deadline: Deadline) -> None:
    """The splits the heuristics fall back on, built and scored within ``deadline``, sized first
    (:func:`~placement_dsl.heuristics.fallback.scored_fallback`; 88 s past a 30 s limit on 47,584 ops at load 8),
    offered and recorded in ``run.upper``; not again once built (the same splits: the upper phase's answer stands)."""
    if any(u.method == "fallback" and (u.objective is not None or u.message.startswith(NO_PLACEMENT))
           for u in run.upper):
        return
    t = time.perf_counter()
    try:
        found, valid, ev = scored_fallback(run.problem, deadline, "certify", "certify")
    except PlacementError as err:  # no split could be built, or none in the time left (BudgetSpent)
        run.upper.append(UpperRun("fallback", None, time.perf_counter() - t, str(err)))
        return
    kept, skipped = run.offer(found.placement, "fallback", (valid, ev.objective)), found.info.get("skipped")
    note = ("" if valid else f"{NO_PLACEMENT}; ") + ("skipped " + ", ".join(skipped) if skipped else "")
    run.upper.append(UpperRun("fallback", kept, time.perf_counter() - t, note.rstrip("; "), found.seconds))


def chosen_formulation(problem: Problem, name: Any) -> Any:
    """``certify(formulation=...)``: the formulation object of the single-sample model levels (``None``: theirs).

    A registered name or an object, e.g. a formulation derived from ``latency`` or ``schedule``; refused with the
    reason when the problem is not single-sample or the formulation cannot write it."""
    if name is None:
        return None
    from ..formulations import get

    form = get(name, problem)
    if single_sample(problem) is not None:
        raise SpecError(f"certify: formulation {form.name!r} is for the single-sample model levels; the objective is "
                        f"{type(problem.objective).__name__} (leave formulation out)")
    reason = form.accepts(problem)
    if reason:
        raise SpecError(f"certify: formulation {form.name!r} cannot write the problem: {reason}")
    return form
