"""Warm starts: one resolver from what a caller names to a placement checked against the problem.

:func:`resolve` is the one place a start is found, for :func:`placement_dsl.solve.solve` (every
backend, CP-SAT included), the formulations' horizons and the search layer. A start is named by

* a heuristic method (``"dp"``, ``"list"``, ...; :mod:`~placement_dsl.heuristics.registry`),
  run under the caller's deadline;
* ``"auto"``: the heuristics that search for the problem's objective or for the cost model they are
  given, under a small share of the budget (:data:`AUTO_SHARE` of it, at most :data:`AUTO_SECONDS`),
  and the baselines one device and greedy; the best valid one by the cost model is kept, never one
  fixed method (BERT-3's 235-op latency graph without memory limits: greedy's split 416.2, one
  device 49.4). The passes that construct one schedule each (:data:`PASSES`: HEFT, CPOP, GETF, m-SCT) run first
  and to their end, the share widened by their estimated time; the searches race in :data:`RACE` of the share;
  the rest goes to the objective's improving method (:data:`IMPROVING`: a local search that continues from a
  start) from the best start found (:func:`improve`), not to an even split among methods that stop early;
* a :class:`~placement_dsl.placement.Placement` (with its schedule, if any), a mapping
  ``{op name: device name}``, or the path of a placement file;
* ``None`` or :data:`NONE` (``"none"``): no start (:func:`placement_dsl.solve.solve` reads ``None`` as ``"auto"``).

The answer is a :class:`Start`: the placement, its evaluation by the problem's cost model, why it
is refused (``""`` when usable: a start the problem's validity check rejects, or a heuristic that
found nothing, is refused, not an error) and the bound its heuristic proved over the problem's class.
Bad input (an unknown method, a missing file, a value of another type) is a :class:`SpecError`.
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .deadline import Deadline, call_within, stream_within
from .errors import PlacementError, SpecError
from .evaluate import Evaluation
from .heuristics import registry
from .heuristics.base import DP_CLASS, STOPPED, HeuristicResult, TimeLimitReached, run
from .heuristics.fallback import SCORING, fallback_seconds, sized_call
from .heuristics.latency_chain import round_orders
from .heuristics.pass_costs import PASS_MARGIN, PASSES, Sizes, mean_width, pass_estimates, pass_seconds
from .io import Workload, load_placement
from .placement import Placement, PlacementClass
from .structure import one_order

__all__ = ["AUTO", "AUTO_SECONDS", "AUTO_SHARE", "DISTINCT", "IMPROVING", "KEPT", "NONE", "PASSES", "PASS_MARGIN", "RACE",
           "SPREAD", "SUBSUMED", "Start", "alternatives", "auto_methods", "construction_order", "contiguous_makespan",
           "held_seconds", "improve", "improving", "lead_seconds", "lead_share", "leads", "mean_width", "outside",
           "pass_estimates", "pass_seconds", "race", "rebuilt", "resolve"]

AUTO, NONE = "auto", "none"  # the heuristics' best start; no start at all
AUTO_SHARE = 0.15  # of the caller's time left, at most, that "auto" spends on its heuristics
AUTO_SECONDS = 5.0  # ... and never more than this many seconds (also the share without a deadline)
MIN_METHOD = 0.1  # seconds a method of "auto" is given at least while no valid start is known
KEEP = 1.0  # seconds of the caller's deadline a named heuristic leaves for the caller's own work
BASELINES = frozenset({"greedy", "one-device"})  # O(n + m): "auto" runs them even once its share is spent
RACE = 0.4  # of "auto"'s share in which its searches race; the rest goes to the improving method from the best
HOLD = 0.6  # of the caller's time left, the most a race is widened to for its passes (a 60 s solve of 5,057 ops at load 14: 53.7 s)
FORK = True  # whether a race's searches run in a forked child stopped at the race's end (see race())
LEAD = {"max_load": ("dp", "pipedream", "slicegraph")}  # per goal, the searches a race runs first after the baselines and the
LEAD_SHARE = 0.5  # passes, in order, the first with this share of the time left at least: for max load the DP over
# ideals, exact among contiguous splits, whose class bound closes the gap (ResNet-152 x 10, 2,080 ops: 1.1 s once
# its kernels are loaded, but seventh of eleven searches, it never ran in the share), then the slicings where the DP
# declines a wide graph in milliseconds: PipeDream's path, one slicing DP over the few cuts between levels, and
# SliceGraph's, over every op of two orders. Tenth and first of thirteen with even shares, on GPT-3 of 20,111 ops
# onto 4 devices beside another job neither ran to its end: a 60 s solve answered the work-balanced slicing's 268.19
# where the path finds 250.59 (the cut stages' bound; onto 16 devices 68.437) in a 30 s race at load 8
NEXT_LEAD_SHARE = 0.3  # ... and the leads after the first this share: the searches after them keep most of the rest
PROVEN_TOL = 1e-9  # relative: a start this close to a proven class bound is optimal for the class
SUBSUMED = {"one-device": "one-device-best"}  # a baseline whose split a pass among the methods builds cheaper: the
# race leaves it out (every op on its best device, scored by k + 1 list schedules: 13.7 s of CPU on 47,584 ops, and
# run first it left HEFT no time in a 30 s solve)
IMPROVING = {"latency": "latency-best", "makespan": "schedule-ls"}
"""Per objective, the search that continues from a given start for as long as it is given (kicks and descents, or
critical-chain moves): "auto" gives it the rest of its share, and a solve whose model is too large the rest of
its budget."""
OWN_STARTS = frozenset({"latency-best", "latency-local-search"})  # improving searches that build starts of their own
# beside the one they continue (greedy's, the DP's and DPL's splits, the DP's class bound): a race runs them as searches


@dataclass
class Start:
    """A resolved warm start: ``placement`` (``None``: none), its ``evaluation``, ``refusal`` (``""``: usable),
    the ``bound`` its heuristic proved over the problem's class, and ``method`` (the heuristic that found it)."""

    placement: Placement | None = None
    evaluation: Evaluation | None = None
    refusal: str = ""
    bound: float | None = None
    method: str = ""
    info: dict[str, Any] = field(default_factory=dict)  # what the heuristic that found it reported
    unfinished: tuple[str, ...] = ()  # searches of "auto" its share cut short (stopped, or not run): see race()
    others: tuple[tuple, ...] = ()  # the race's next best distinct starts, unchecked (see race(), alternatives())

    @property
    def usable(self) -> bool:
        return self.placement is not None and not self.refusal

    @property
    def objective(self) -> float | None:
        return None if self.evaluation is None else self.evaluation.objective


def goal(problem: Any) -> str:
    """What a heuristic searches for ``problem``: :func:`~placement_dsl.heuristics.registry.goal` of its cost model."""
    return registry.goal(problem.cost_model(), problem.cluster)


def auto_methods(problem: Any) -> list[str]:
    """The heuristics ``"auto"`` runs for ``problem``, in order: those that search for its :func:`goal`, and (but for
    the makespan, whose schedules they do not search) those that search for the cost model they are given (each in
    registry order), then the baselines built in ``O(n + m)``
    (:data:`BASELINES`: one device, greedy), which run whatever time is left."""
    goal_ = goal(problem)
    table = registry.load()
    kinds = (goal_,) if goal_ == "makespan" else (goal_, "cost_model")  # local-search keeps max-load under a makespan
    if improving(problem) != IMPROVING.get(goal_):  # a contiguous makespan: the latency searches' splits, first
        kinds = ("latency", *kinds)
    searches = [m for kind in kinds for m in table
                if table[m].optimizes == kind and m not in BASELINES and not _above(m)]
    return [*searches, *(m for m in sorted(BASELINES) if m in table)]


def contiguous_makespan(problem: Any) -> bool:
    """Whether ``problem``'s goal is the makespan (devices run one op at a time) over contiguous splits only: the
    passes and the schedule search build and move ops freely, and their splits are refused; the latency searches
    (Tarnawski's) search contiguous splits under the cost model they are given."""
    return goal(problem) == "makespan" and problem.placement_class() in PlacementClass.CONTIGUOUS


def improving(problem: Any) -> str | None:
    """The search that continues a start for ``problem``: :data:`IMPROVING` by its :func:`goal`, and the latency
    search where the problem is a :func:`contiguous_makespan` (a generated DAG of 2,000 ops onto four accelerators
    with links and routes and a host, contiguous: the schedule search kept greedy's 2798.16 for the 6 s it had,
    the latency search finds 2179.99 in 4 s)."""
    return IMPROVING["latency"] if contiguous_makespan(problem) else IMPROVING.get(goal(problem))


def _above(method: str) -> bool:
    """A method registered by a layer above this one (an absolute module, e.g. ``placement_dsl.search``'s
    schedule LNS, which re-solves with solve): a search around a start, never one."""
    found = registry.load().get(method)
    return found is not None and not found.module.startswith(registry.__package__ + ".")


def resolve(problem: Any, spec: Any, *, deadline: Deadline | None = None, share: float = AUTO_SHARE,
            cap: float = AUTO_SECONDS, keep: float = KEEP) -> Start:
    """The start ``spec`` names for ``problem`` (see the module docstring).

    ``deadline`` bounds every heuristic run (a heuristic past it is stopped with its best so far);
    a named heuristic leaves ``keep`` seconds of it to the caller; ``"auto"`` spends at most
    ``share`` of what is left and ``cap`` seconds.
    """
    if spec is None or isinstance(spec, str) and spec == NONE:
        return Start()
    if isinstance(spec, str) and spec == AUTO:
        return _auto(problem, deadline, share, cap)
    if isinstance(spec, str) and spec in registry.load():
        seconds = None if deadline is None else max(deadline.left() - keep, 0.1)
        return _method(problem, spec, seconds)
    if isinstance(spec, Placement):
        return _checked(problem, spec)
    if isinstance(spec, Mapping):
        try:
            placement = Placement.from_mapping(problem.graph, problem.cluster, spec, source="warm start")
        except (SpecError, KeyError, TypeError, ValueError) as err:
            raise SpecError(f"warm_start mapping: {str(err).splitlines()[0] if str(err) else err!r}") from None
        return _checked(problem, placement)
    if isinstance(spec, (str, Path)):
        path = Path(spec)
        if not path.exists():
            raise SpecError(f"warm_start {str(spec)!r} is neither a heuristic ({sorted(registry.load())}), 'auto', 'none', "
                            "nor an existing placement file")
        return _checked(problem, load_placement(path, Workload(problem.graph, problem.cluster)))
    raise SpecError(f"warm_start {spec!r}: give a heuristic name, 'auto', 'none', a Placement, a mapping of op to device "
                    f"names or a placement file, not a {type(spec).__name__}")


def _checked(problem: Any, placement: Placement, bound: float | None = None, method: str = "") -> Start:
    """``placement`` evaluated by the problem's cost model, refused when the problem's validity check rejects it."""
    violations, ev = problem.scored(placement)  # one evaluation: a list schedule of 47,584 ops takes 5-7.5 s
    if violations:
        return Start(placement, ev, f"warm start refused: it is invalid for the problem ({'; '.join(violations[:3])})",
                     None, method)
    return Start(placement, ev, "", bound, method)


def _run(problem: Any, method: str, seconds: float | None) -> HeuristicResult:
    """``method`` on the problem's graph and cluster under its cost model; a method past ``seconds`` is stopped."""
    guard = Deadline(math.inf if seconds is None else seconds)
    try:
        return call_within(guard, run, method, problem.graph, problem.cluster, model=problem.cost_model(),
                           time_limit=seconds)
    except SpecError as err:  # the method declines this graph (e.g. the DP's ideal count): no start, no error
        raise PlacementError(f"{method} declined the graph: {str(err).splitlines()[0]}") from None


def _method(problem: Any, method: str, seconds: float | None) -> Start:
    try:
        found = _run(problem, method, seconds)
    except PlacementError as err:
        return Start(refusal=f"warm start refused: {method!r} found no placement ({err})", method=method)
    return _checked(problem, found.placement, _class_bound(problem, found), method)


def _auto(problem: Any, deadline: Deadline | None, share: float, cap: float) -> Start:
    """The best valid start among :func:`auto_methods` (:func:`race` in :data:`RACE` of the share, all of it where
    the objective has no improving method), then improved (:func:`improve`) for what is left of the share. The share
    and the race are widened to the passes' estimated time (:func:`pass_estimates`) where it is more, within
    ``deadline`` less :data:`KEEP`: the cap does not cut a baseline short. The share is wall clock
    from this call's start (the registry's first load, which imports every method's module, included). The
    searches the race cut short are named in the answer's ``unfinished``: a caller with time to spare runs them
    again (a solve whose model is too large). The improving method, which continues the race's best start after
    it, is not raced from its own start too (but where it leads the race, builds starts of its own,
    :data:`OWN_STARTS`, or the race holds no start): on a GPT of 5,057 ops the schedule search raced 5.9 s from
    HEFT's 29.59 (its own start) where the race held CPOP's 25.95."""
    began = time.perf_counter()
    budget = cap if deadline is None else min(cap, max(share * deadline.left(), 0.0))
    end = began + budget
    methods = auto_methods(problem)
    racing = RACE if improving(problem) in registry.load() else 1.0  # no improving method: all of it
    after = improving(problem) if racing < 1 and improving(problem) not in (*leads(problem), *OWN_STARTS) else None
    most = math.inf if deadline is None else HOLD * deadline.left() - KEEP
    need = min(held_seconds(problem, methods), max(most, budget))  # a share too small for the passes (or the
    budget, end = max(budget, need), max(end, began + need)  # contiguous class's search) is widened to hold them
    best, refusals, unfinished = race(problem, [m for m in methods if m != after],
                                      max(racing * budget, need) - (time.perf_counter() - began), deadline)
    if not best.usable and after in methods:  # no start for it to continue: it searches from its own
        best, more, unfinished = race(problem, [after], end - time.perf_counter(), deadline)
        refusals += more
    if best.usable:
        others = best.others
        left = math.inf if deadline is None else deadline.left() - fallback_seconds(
            problem.graph, problem.cluster, "none", SCORING)  # its answer is scored here after it
        best = improve(problem, best, min(end - time.perf_counter(), left))
        best.unfinished, best.others = tuple(unfinished), others
        return best
    return Start(refusal="warm start refused: no heuristic found a valid start" +
                 (f" ({refusals[0]})" if refusals else ""), method=AUTO, unfinished=tuple(unfinished))


def race(problem: Any, methods: list[str], seconds: float, deadline: Deadline | None = None, even: bool = True,
         held: bool = False) -> tuple[Start, list[str], list[str]]:
    """The best valid start among ``methods``, run one after another in ``seconds`` of wall clock: the constructions
    first (:func:`construction_order`: the baselines, :data:`BASELINES`, built in ``O(n + m)``; where passes are
    among the methods, the passes, :data:`PASSES`, cheapest first by :func:`pass_estimates`, each with all the time
    left, then the baselines; ``seconds`` widened to the passes' estimated sum, within ``deadline`` less
    :data:`KEEP`), then the goal's lead searches (:data:`LEAD`, before the passes for a :func:`contiguous_makespan`:
    theirs is the search of the class, the passes' splits are refused there; each with
    :data:`LEAD_SHARE` of the time left at least), then each search under its own ``time_limit`` (the
    heuristics' contract: their best so far when it passes), the time left split evenly among the searches still
    to run (a fast one leaves its time to the next; ``even=False``: each may take all the time left, for searches
    known to need more than their even share), at least :data:`MIN_METHOD` each while ``deadline`` (the caller's)
    is more than :data:`KEEP` away. Returns the best start, why methods found nothing, and the searches cut short
    (stopped at their limit, stopped by the race's end, or not run at all) in order, but for the passes of a
    :func:`contiguous_makespan`, whose splits the class refuses (a solve would run them again in its time left).

    The searches run in one forked child, stopped by force when ``seconds`` have passed: a search that checks its
    clock too seldom cannot hold the race past its share (under load, on 5,000 ops, the DP's set-up alone took
    4.6 s of a 0.15 s limit, polish's 6 s, and a first run in a process loads its compiled kernels, 7 s for
    slicegraph's). One child for the race, not one per search: each child loads the kernels its searches use
    again. The best start found is evaluated again here by the problem's cost model and validity check. Where no
    child may be forked (a daemonic worker) the searches run here, trusted to stop by their clocks; so do the
    baselines when the race found no valid start by its end.

    Besides the best start, the answer keeps in ``others`` the next best valid starts of the race (at most
    :data:`KEPT` in all), each distinct from the best and from one another (:data:`DISTINCT`) and within
    :data:`SPREAD` of the best: later phases restart their searches from them (:func:`alternatives`) once the best
    start's local optimum has stalled."""
    lead = leads(problem)
    passes = pass_estimates(problem, methods)
    order = construction_order(problem, methods, passes)
    first = [m for m in lead if m in methods and m not in order]
    if contiguous_makespan(problem):  # the passes' splits leave the class: its search first, after the baselines
        order = [m for m in order if m not in passes] + first + [m for m in order if m in passes]
    else:
        order += first
    order += [m for m in methods if m not in BASELINES and m not in lead and m not in passes]
    need = held_seconds(problem, methods, passes)  # the passes' time, however small the race: each is run to its
    # end (under contiguity, where their splits are refused, the lead search's estimated time instead)
    seconds = max(seconds, need if deadline is None else min(need, HOLD * deadline.left() - KEEP))
    if deadline is not None:  # its best start is scored here after it (two list schedules of 47,584 ops: 10 s)
        seconds = min(seconds, deadline.left() - fallback_seconds(problem.graph, problem.cluster, "none", SCORING))
    clock = Deadline(max(seconds, 0.0)) if deadline is None else deadline.within(max(seconds, 0.0))
    best_sent, proven, refusals, done, seen = None, None, [], {}, []
    kept = OUTSIDE.get() if OUTSIDE.get() is not None and problem.unrestricted() is not None else None  # outside()
    sizes = Sizes(passes, {m: fallback_seconds(problem.graph, problem.cluster, "none", SET_UP[m])
                           for m in order if m in SET_UP}, held)
    stream = stream_within(clock, _race_child, problem, order, time.monotonic() + max(seconds, 0.0), deadline,
                           even, kept is not None, sizes) if FORK and math.isfinite(clock.at) else \
        _here(problem, order, seconds, deadline, even, kept is not None, sizes)
    for kind, method, *rest in stream:
        if kind == "outside" and kept is not None:
            kept[:] = sorted([*kept, (rest[-1], method, rest[0])], key=lambda s: s[0])[:OUTSIDE_KEPT]
        elif kind in ("best", "found"):
            seen.append((rest[-1], method, *rest[:-1]))  # (objective, method, parts, bound)
            best_sent = (method, *rest[:-1]) if kind == "best" else best_sent
        elif kind == "done":
            refusal, done[method], bound = rest
            refusals += [refusal] if refusal else []
            proven = max((b for b in (proven, bound) if b is not None), default=None)
    best = Start() if best_sent is None else _received(problem, *best_sent)
    if not best.usable:  # nothing valid by the race's end: the baselines not run yet, which take O(n + m), here
        best = _best_baseline(problem, [m for m in order if m in BASELINES and m not in done], best, deadline)
    if best.usable and proven is not None:  # every search's proof holds for the class, not only the best one's
        best.bound = proven  # (slicegraph finds ResNet-152's 16.77 on 4 stages first; the DP proves it optimal)
    if best.usable:
        best.others = _distinct(best, seen)
    refused = set(passes) if contiguous_makespan(problem) else set()  # their splits leave the class: not run again
    unfinished = [m for m in order if m not in BASELINES and m not in refused and done.get(m, True)]
    return best, refusals, unfinished


def leads(problem: Any) -> tuple[str, ...]:
    """The searches a race for ``problem`` runs first, in order, each with :data:`LEAD_SHARE` of the time left at
    least (:data:`LEAD`, by the problem's :func:`goal`; a single name is one search)."""
    found = (improving(problem),) if contiguous_makespan(problem) else LEAD.get(goal(problem), ())
    return (found,) if isinstance(found, str) else tuple(found)


def lead_share(problem: Any, method: str) -> float:
    """The least share of a race's time left that ``method`` takes: :data:`LEAD_SHARE` for the first of the
    problem's :func:`leads`, :data:`NEXT_LEAD_SHARE` for the others, none for other methods."""
    found = leads(problem)
    return 0.0 if method not in found else LEAD_SHARE if found.index(method) == 0 else NEXT_LEAD_SHARE


LEAD_EVALUATIONS = 30
"""The cost-model evaluations' worth of time (:func:`~.heuristics.fallback.fallback_seconds`, on this graph and machine
as loaded now) the latency search is given at least in a race of a :func:`contiguous_makespan`: its greedy, chain
and max-load splits and a descent from the best. On a generated DAG of 2,000 ops onto four linked accelerators and a
host it needs about 5 s (the chain split 0.3-1.2 s, DPL 2-7 s at load 7), 4.7 s by this; given half of a 10 s
solve's race (1.1 s) it answered greedy's split, 2,884.8, where its chain split is 2,266.6."""


LEAD_CHECKS = 4  # evaluations' worth a sized lead leaves of the race: its answer checked by the registry and scored
# here, then sent (given all but one, latency-best on 2,000 ops at load 7.7 ended past the race, which lost its split)


def lead_seconds(problem: Any, method: str) -> float:
    """The seconds a race gives ``method`` at least, sized from the graph (:data:`LEAD_EVALUATIONS`): the latency
    search where it leads a :func:`contiguous_makespan`'s race, 0 otherwise."""
    if not contiguous_makespan(problem) or method not in leads(problem):
        return 0.0
    return fallback_seconds(problem.graph, problem.cluster, "none", LEAD_EVALUATIONS)


def held_seconds(problem: Any, methods: list[str], passes: dict[str, float] | None = None) -> float:
    """The seconds a race of ``methods`` is widened to hold whatever its share: the passes' estimated time
    (:func:`pass_estimates`, or ``passes``), run to their end; for a :func:`contiguous_makespan`, whose class refuses
    the passes' splits (they run last, in what is left), the lead search's :func:`lead_seconds` instead."""
    if contiguous_makespan(problem):
        return sum(lead_seconds(problem, m) for m in leads(problem) if m in methods)
    return sum((pass_estimates(problem, methods) if passes is None else passes).values())


def construction_order(problem: Any, methods: list[str], passes: dict[str, float] | None = None) -> list[str]:
    """The constructions among ``methods`` in the order a race runs them (and a certificate's makespan heuristics):
    where passes are among them (the makespan's, :data:`PASSES`), the passes cheapest first by
    :func:`pass_estimates`, then the baselines (:data:`BASELINES`; greedy scores its split by list schedules as they
    do, at HEFT's cost: 4 s of CPU on 47,584 ops, for 777.6 where HEFT finds 319.5), but those a pass builds
    (:data:`SUBSUMED`); else the baselines, built in ``O(n + m)``, first."""
    passes = list(pass_estimates(problem, methods) if passes is None else passes)  # (a mean width: 0.2 s on 47k ops)
    baselines = [m for m in dict.fromkeys(methods) if m in BASELINES and SUBSUMED.get(m) not in passes]
    return passes + baselines if passes else baselines


def _here(problem: Any, methods: list[str], seconds: float, deadline: Deadline | None, even: bool,
          wide: bool, sizes: Sizes | None = None) -> list[tuple]:
    """The race's messages with its searches run in this process."""
    sent: list[tuple] = []
    _race_child(sent.append, problem, methods, time.monotonic() + seconds, deadline, even, wide, sizes)
    return sent


def _best_baseline(problem: Any, methods: list[str], best: Start, deadline: Deadline | None = None) -> Start:
    """``best``, else the best valid split of the baselines among ``methods``, each sized from the op count and its
    evaluations first (:func:`~.heuristics.fallback.sized_call`): one that does not fit ``deadline`` is not run
    (a makespan schedule's one-device split of 15,838 ops took 29.5 s of a 10 s solve at load 8)."""
    clock = deadline or Deadline(math.inf)
    for method in (m for m in methods if m in BASELINES):
        need = fallback_seconds(problem.graph, problem.cluster, method, SCORING)
        try:
            found = sized_call(clock, need, method, run, method, problem.graph, problem.cluster,
                               model=problem.cost_model())
        except PlacementError:  # it does not apply, or does not fit the time left (BudgetSpent)
            continue
        start = _checked(problem, found.placement, None, method)
        if start.usable and (not best.usable or start.objective < best.objective):
            best = start
    return best


def _race_child(send: Any, problem: Any, methods: list[str], until: float, deadline: Deadline | None,
                even: bool, wide: bool = False, sizes: Sizes | None = None) -> None:
    """The race's searches in order, each reported as ``("done", method, refusal, cut short, class bound)``, and
    each valid start as ``("best" or "found", method, its placement's parts, class bound, objective)``: ``"best"``
    when it is better than every start before it; with ``wide``, each start the problem refuses with a finite
    objective as ``("outside", method, parts, objective)`` (its family may take it: :func:`outside`). Once a start meets a class
    bound a search proved (the DP's optimum), no search can beat it: the rest are done without running. Once a start
    is held (here, or by the caller: ``sizes.held``), a method whose ``sizes`` need (a pass's estimate times the
    race's passes' overrun so far; an improving method's :data:`SET_UP`) passes the race's end is not started but
    done as cut short (GPT of 5,057 ops: m-SCT cut at 1.5 s of its 3.9 s, schedule-ls given 0.1 s took 1.0 s)."""
    best: float | None = None
    proven = -math.inf
    sizes = sizes or Sizes({})
    for i, method in enumerate(methods):
        if best is not None and best <= proven * (1 + PROVEN_TOL):
            send(("done", method, "", False, None))
            continue
        left = until - time.monotonic()
        if (best is not None or sizes.held) and sizes.need(method) > left:
            send(("done", method, "", True, None))
            continue
        if deadline is not None and deadline.left() <= KEEP and best is not None and method not in BASELINES:
            continue  # every search runs (a first run in a process may spend the share loading its kernels)
        searches_left = sum(m not in BASELINES for m in methods[i:]) if even and method not in PASSES else 1
        given = max(left / max(searches_left, 1), lead_share(problem, method) * left,
                    min(lead_seconds(problem, method), left - fallback_seconds(problem.graph, problem.cluster, "none",
                                                                               LEAD_CHECKS)))
        began = time.monotonic()
        try:
            found = run(method, problem.graph, problem.cluster, model=problem.cost_model(),
                        time_limit=max(given, MIN_METHOD))
        except PlacementError as err:  # SpecError too: the method declines the graph
            send(("done", method, f"{method!r} found no placement ({str(err).splitlines()[0]})",
                  isinstance(err, TimeLimitReached), None))
            continue
        finally:
            sizes.ran(method, time.monotonic() - began)
        start = _checked(problem, found.placement, _class_bound(problem, found), method)
        cut = found.info.get("stopped") == STOPPED
        if start.usable:  # every valid start, the best so far as such (the caller keeps a few distinct others)
            kind, best = ("best", start.objective) if best is None or start.objective < best else ("found", best)
            send((kind, method, _parts(start.placement), start.bound, start.objective))
        elif wide and start.evaluation is not None and math.isfinite(start.evaluation.objective):
            send(("outside", method, _parts(start.placement), start.evaluation.objective))
        send(("done", method, start.refusal.removeprefix("warm start refused: "), cut, start.bound))
        proven = max(proven, -math.inf if start.bound is None else start.bound)


KEPT = 3  # starts a race keeps: its best and the next best distinct ones (Start.others)
DISTINCT = 0.02  # of the ops, at least, on other devices than in every start kept before (at least one op)
SPREAD = 0.25  # relative: a start kept beside the best is at most this much worse than it


def _distinct(best: Start, seen: list[tuple]) -> tuple[tuple, ...]:
    """The race's valid starts ``seen`` (objective, method, parts, bound) next best after ``best``, at most
    :data:`KEPT` - 1 of them, each on other devices than every start kept before it for at least :data:`DISTINCT` of
    the ops and within :data:`SPREAD` of the best: (method, parts, bound) each."""
    kept, out = [best.placement.assign], []
    least = max(1, math.ceil(DISTINCT * best.placement.graph.n))
    for objective, method, parts, bound in sorted(seen, key=lambda s: s[0]):
        if len(out) == KEPT - 1 or objective > best.objective * (1 + SPREAD):
            break
        assign = np.asarray(parts[0])
        if all(int((assign != other).sum()) >= least for other in kept):
            kept.append(assign)
            out.append((method, parts, bound))
    return tuple(out)


def alternatives(problem: Any, others: tuple[tuple, ...]) -> list[Start]:
    """The other starts a race kept beside its best (:attr:`Start.others`), rebuilt on the problem's graph and
    cluster and checked by its cost model and validity check; those it refuses are left out."""
    found = [_received(problem, method, parts, bound) for method, parts, bound in others]
    return [s for s in found if s.usable]


def _parts(placement: Placement) -> tuple:
    """What rebuilds ``placement`` on its graph and cluster: its assignment, source, schedule and replicas."""
    names = placement.cluster.names
    replicas = {names[d]: [names[x] for x in members] for d, members in enumerate(placement.replica_sets)
                if len(members) > 1}
    return placement.assign, placement.source, placement.schedule, replicas or None


def rebuilt(problem: Any, parts: tuple) -> Placement:
    """The placement a race's child sent as its ``parts`` (:func:`_parts`), on ``problem``'s graph and cluster."""
    assign, source, schedule, replicas = parts
    return Placement(problem.graph, problem.cluster, assign, source, schedule=schedule, replicas=replicas)


def _received(problem: Any, method: str, parts: tuple, bound: float | None) -> Start:
    """The start a race's child sent, rebuilt on the problem's graph and cluster and checked here."""
    return _checked(problem, rebuilt(problem, parts), bound, method)


OUTSIDE, OUTSIDE_KEPT = ContextVar[list[tuple] | None]("outside_starts", default=None), 2  # see outside()


@contextmanager
def outside() -> Iterator[list[tuple]]:
    """Within the block each race on a problem its terms restrict keeps the best :data:`OUTSIDE_KEPT` placements the
    class refuses with a finite objective (``(objective, method, parts)``, best first; :func:`rebuilt`) in the list it
    yields, for the problem's family (HEFT's schedule, refused under contiguity, on a cluster with links)."""
    token = OUTSIDE.set([])
    try:
        yield OUTSIDE.get()
    finally:
        OUTSIDE.reset(token)


def improve(problem: Any, start: Start, seconds: float, seed: int = 0, method: str | None = None,
            **options: Any) -> Start:
    """``start`` continued by ``method`` (default: the objective's improving method, :data:`IMPROVING`) for
    ``seconds``: the better of the two by the cost model (``start`` itself when the method is not registered,
    declines, finds nothing valid or better, or there is less than :data:`MIN_METHOD` to give it, or than its set-up,
    :data:`SET_UP`). The improved
    start keeps ``start``'s method name (``"latency-best+latency-local-search"``) and its class bound. ``options``
    go to ``method`` (a search registered above this layer takes the start as ``start=``, and the problem). The
    latency searches run in rounds of at most :data:`ROUND` seconds, each from the best split so far with the next
    seed: their kicks may not leave one local optimum, a fresh seed does (BERT-3: 408.79 for 90 s from one seed,
    408.47 within 10 s from another). Only the first round also descends from greedy's, the DP's and DPL's splits;
    the later ones kick the best split only (on BERT-3 the DP's split alone took 3 s of each 10 s round). The rounds
    stop after :data:`STALE` in a row that end on their own with nothing better (a small graph's search is done)."""
    method = method or improving(problem)
    if not start.usable or method is None or method not in registry.load() or seconds < MIN_METHOD or \
            seconds < fallback_seconds(problem.graph, problem.cluster, "none", SET_UP.get(method, 0)):
        return start
    end = time.perf_counter() + seconds
    rounds, first = method in OWN_STARTS, seed
    ordered = rounds and contiguous_makespan(problem)  # the later rounds start from chain splits in other orders
    own = ordered and method in start.method.split("+")  # the start is latency-best's: its baselines were searched
    best, info, stale = start, {}, 0
    while True:
        left = end - time.perf_counter()
        if left < MIN_METHOD or (best is not start and not rounds):
            break
        again = rounds and (seed > first or own)  # the baselines were descended from in the first round
        given = min(left, ROUND) if rounds else left
        found = _continue(problem, best, "latency-local-search" if again else method, given, seed,
                          {"starts": round_orders(problem.graph, problem.cluster, problem.cost_model(), seed, given)
                           if ordered else [], "restarts": ROUND_RESTARTS, **options} if again
                          else options)
        seed += 1
        if found is None:
            break
        info = dict(found.info)
        better = _checked(problem, found.placement, start.bound, f"{start.method}+{method}")
        if better.usable and better.objective < best.objective:
            best, stale = better, 0
        elif not rounds:
            break
        elif found.info.get("stopped") != STOPPED:  # the round ran all its restarts and found nothing better
            stale += 1
            if stale == STALE:
                break
    best.info = {**info, "rounds": seed - first}
    return best


SET_UP = {"schedule-ls": 3}  # evaluations' worth of an improving method's set-up before it first reads its clock
# (its state, the start's list schedule and check): improve() gives it no less (on 47,584 ops 2.9-3.4 s of CPU, 8.6-9.7 s
# at load 5.8, where 2 s were given; 0.8 s of CPU on 15,764 ops)
ROUND = 10.0  # seconds of one round of a latency search continued by improve()
ROUND_RESTARTS = 50  # restarts of a later round (the first runs to its clock): a round that runs them all ends on its
# own, and STALE such rounds end the search; given the first round's unbounded restarts, every round of a 4-op graph
# ran to its clock and a 60 s solve's search took all 60 s
STALE = 3  # rounds in a row that end on their own without a better split, after which improve() stops (a graph of a
# few ops: each round's 50 restarts take milliseconds, and fresh seeds ran until the share was spent, 16 s of a 60 s
# solve on four ops); a round its time stops keeps the rounds going (BERT-3: a fresh seed found what 90 s did not)


def _continue(problem: Any, start: Start, method: str, seconds: float, seed: int,
              options: dict[str, Any]) -> HeuristicResult | None:
    """``method`` run from ``start`` for ``seconds`` (``None`` when it declines)."""
    placement = start.placement
    if method in OWN_STARTS:  # the start beside greedy's, the DP's and DPL's splits
        options = {"also": [(start.method or "start", placement.assign)], "restarts": 10 ** 9,
                   "max_evaluations": 10 ** 12, **options}
    else:
        options = {"start": placement, **({"problem": problem} if _above(method) else {}), **options}
    try:
        return run(method, problem.graph, problem.cluster, model=problem.cost_model(), seed=seed,
                   time_limit=seconds, **options)
    except PlacementError:
        return None


def _class_bound(problem: Any, found: HeuristicResult) -> float | None:
    """A heuristic's bound when it holds for the problem's class: exact among the DP class (the DP over ideals:
    contiguous splits with an acyclic quotient, in any device order) on a problem whose class lies in it
    (contiguous and DAG-ordered) and whose terms do not widen the placements. A contiguous problem without DAG
    order also admits splits whose quotient has a cycle, which may be better."""
    widens = problem.widens
    within = problem.placement_class() in PlacementClass.DP or (problem.placement_class() == PlacementClass.CONTIGUOUS
                                                                 and one_order(problem.graph))
    if found.bound is None or found.exact_among != DP_CLASS or not within or widens:
        return None
    return float(found.bound)
