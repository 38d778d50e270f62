"""Certificates: the best placement found, the best proven lower bound, and the gap between them.

Every bound holds for a class of placements (:data:`~placement_dsl.result.SCOPES`); the
certificate's ``bound`` is the best bound over the problem's own class, and narrower classes'
bounds are reported beside it (``class_bounds``); for a problem its terms restrict (``Term.restricts``), what the run
knows of every placement (the best valid one outside the class, the best bound) is ``family`` (:class:`.Beyond`).

Tarnawski et al.'s throughput problems (NeurIPS 2020; ``Contiguous`` or no structure, no
``DagOrder``), cheapest first:

==============  =====================================================  ==============================
level           bound                                                  class
==============  =====================================================  ==============================
``simple``      ``max(max_v work, sum_v work / k)``; for max load also  all placements
                the packing bound (:mod:`.bounds.packing`)
``capacity``    cheapest work over the devices' speeds; the work of    all placements
                the memory only the hosts can hold (:mod:`.bounds.capacity`)
``one-or-cut``  ``min(one device's load, busiest work + cheapest       all placements (identical devices)
                tensor)`` (:mod:`.bounds.one_or_cut`)
``cut-stages``  the devices hold runs of cut ops (ops comparable with all   contiguous (and DAG-ordered,
                others) in a chain, sharing the blocks between, each        forward graphs)
                paying the tensors across its run and its parts of the
                blocks (:mod:`.bounds.cut_stages`)
``host-share``  the one host's work less the most an ideal and a filter   contiguous (and DAG-ordered)
                within the accelerators' memory hold
                (:mod:`.heuristics.host_share`)
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
neighbourhoods of the best split (:mod:`.search.neighbourhood`): an upper-bound step, with a bound
only when one neighbourhood holds every unit.

Single-sample latency (a ``Latency`` objective, Tarnawski et al. §4), cheapest first:

=================  ==================================================  ==============================
level              bound                                               class
=================  ==================================================  ==============================
``critical-path``  longest path at the fastest allowed times, no        all placements
                   transfers
``cut-spine``      shortest path over the ops comparable with all       all placements
                   others: runs that fit pay their work, reads and
                   writes; the side branches between two runs take
                   their free memory, a host's time or an invocation's
                   transfers (:mod:`.bounds.latency_spine`)
``run-paths``      DP over the cheapest cut of each longest path into   the problem's (``q = 1``: its
                   accelerator runs (memory) and host ops, each run      bodies are Lemma 4.1's), else
                   paying its boundary tensors and side inputs           all placements
``latency-lp``     LP of the latency IP (Fig. 3 / Fig. 4) with its cuts  the problem's
``latency``        the IP warm-started from ``latency-best``, its dual   the problem's
                   bound
=================  ==================================================  ==============================

Both single-sample objectives also take ``route-path`` (the longest path at the fastest allowed times, each edge
paying the cheapest transfer between the devices its ends could run on: the latency model's write and read, the
makespan's route) and ``device-work`` (the serial devices' work between the ops' heads and tails, an energy bound;
the latency model's hosts run any number of ops at once), and ``segment-path`` (the cheapest cut of the heaviest
paths into runs that fit one device's memory, each run paying its boundary transfers), all over all placements
(:mod:`.bounds.latency`, :mod:`.bounds.makespan`, :mod:`.bounds.memory_path`); where devices run one op at a time, also ``split-heads``
(each op's start on each device: the least split of its nearby ancestors into those run there one at a time and
those whose tensors move there, and the device work between those heads and tails, :mod:`.bounds.split_heads`) and
``cut-segments`` (between two ops comparable with all others, each device that joins pays a transfer in and out,
:mod:`.bounds.segments`); a makespan also takes ``window-schedules`` (the whole of a small graph and windows around
its most critical ops, each scheduled by CP-SAT with the split heads as releases and the split tails after them,
:mod:`.bounds.windows`) and ``lifted-heads`` (each anchor's nearest ancestors scheduled by CP-SAT from their heads:
the floor of the heads after it, :mod:`.bounds.head_lift`). The single-sample objective (``Latency`` or its alias
``Makespan``) takes the latency levels where the cluster's accelerators run invocations (Tarnawski's restriction)
and the schedule levels where its devices run one op at a time (MOIRAI §III, :func:`~placement_dsl.evaluate.execution`):
``schedule-lp`` (the LP of the schedule MILP, big-Ms from the best makespan) and ``schedule`` (the MILP warm-started
from the best of list scheduling, CPOP, the best single device and the schedule local search: its dual bound), over
the problem's class. ``certify(formulation=...)`` puts a formulation of one's own
(e.g. derived from ``latency`` or ``schedule``) in the LP and MIP levels' place.

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
``one-or-cut`` one device's load, or Lemma 3.3 plus a cut tensor       closed form, O(n + m)
``cut-stages`` runs of cut ops in a chain sharing the blocks between,   O(m log m + runs), then
               paying the tensors across them (forward graphs)         O(runs) per bisection step
``ordered-``   hosts last (or first): the accelerators hold an ideal    the ideals, enumerated
``memory``     within their memory, the hosts the rest (its work)      (:mod:`.bounds.ordered_memory`)
``host-share`` one host anywhere: an ideal and a filter within the       the ideals, enumerated
               accelerators' memory, the host the rest                 (:mod:`.heuristics.host_share`)
``dp``         exact DP over ideals: a bound for ``Contiguous`` or    (upper bound otherwise)
               identical stages. ``stage-cut``: max_v cheapest stage holding v (n min cuts, every placement);
               ``chain``: the windowed chain MIP from the best placement, on identical stages
``no-cut-io``  three-superblock MIP without transfers (MLSys draft)  O(n) vars, O(m) rows
``no-dag``     three-superblock MIP without eq. (8) (MLSys draft)    O(n), O(m)
``superblock`` §3.2 three-superblock MIP ("bottleneck")              O(n), O(m)
``guess``      §3.3 ``min_j LB_j``, one MIP per guess j               k x (O(n), O(m))
``exact``      Fig. 3                                                O(nk), O(mk)
=============  ==================================================  ===========================

A time-limited MIP contributes its proven dual bound. Heuristics (``dp`` where it applies, ``greedy``, ``pipedream``,
``slicegraph``, ``brkga``) and MIP incumbents give the upper bound; :func:`certify` stops
as soon as ``(best - bound) / best <= gap``. The heuristics run by expected value per second: the work-balanced
slicing (else greedy) first, then the closed forms and, on a graph of few ideals, the DP; PipeDream's path, slicegraph
and BRKGA if the gap is still open before the next level (the certificate's ``upper`` lists what ran). The ``free``
levels run first; single-sample heuristics again before a model level while no placement is held, and at the end.

This module is the driver. The levels live in :mod:`placement_dsl.levels`, one module each (or
one per family of bounds), and register themselves (:func:`~placement_dsl.levels.base.level`)
with their place in the run order and the problem families whose default hierarchy they join
(:func:`default_levels`); a new level is a new module there.
"""
from __future__ import annotations

import math
import time
from functools import partial
from typing import Any

from . import certificate as checks
from .beyond import ROUNDING, TOL, Wider, held
from .certificate import Certificate, LevelResult, LevelStatus, UpperRun, level_status, model_bound
from .constraints import Contiguous, DagOrder
from .deadline import BudgetSpent, Deadline, call_within, seconds, stop_margin
from .errors import PlacementError, SpecError, refuse_spawned_rerun
from .heuristics import jit, kernel_cache
from .heuristics import run as heuristic
from .heuristics.base import ColdKernels, TimeLimitReached
from .heuristics.fallback import spread_applies, spread_split
from .levels.base import FREE_SECONDS, LEVELS, Family, Level, checked_levels, family, family_tuple, load, widened
from .levels.latency import chosen_formulation, fallback_upper, latency_upper, makespan_upper
from .levels.relaxed import guess_bound, guess_problem
from .objectives import Latency
from .placement import Placement, PlacementClass
from .problem import Problem
from .progress import report
from .starts import LEAD, LEAD_SHARE
from .structure import few_ideals

__all__ = ["LEVELS", "Certificate", "Family", "Level", "LevelResult", "LevelStatus", "certify", "default_levels",
           "guess_bound", "guess_problem", "level_status", "model_bound"]

ALL = PlacementClass.ALL
UPPER = ("greedy", *(m for m in LEAD["max_load"] if m != "dp"), "brkga")  # heuristics that always run for the upper
# bound of DAG-ordered problems: the race's leads (the DP is a level here), PipeDream's path before slicegraph;
# greedy (O(n + m)) first where the work-balanced slicing is not valid, with all the share it needs: where memory binds
# its split is often the only valid one, and last, after an even split, it was stopped at 20,000 ops (GPT-3 onto 64
# stages: no placement at all)
LINEAR = frozenset({"greedy", "one-device"})  # upper-bound heuristics in O(n + m), not held to an even share
# heuristics tried for an upper bound when the dp level ran but found no valid placement (e.g. the DP over servers
# refused a training graph with too many ideals): the first valid one is the MIP levels' start
FALLBACK_UPPER = ("pipeline", "pipedream-planner", "slicegraph", "greedy")
MODEL_MARGIN = 4.0  # seconds a MIP level leaves of what is left: its model's build, hand-over and read-back run past
# the solver's own limit (the last MIP level, given all that was left, ended its command 5.7-6.3 s late under load)
MARGIN_SHARE = 0.25  # ... and never more than this share of it: a 2 s certify of a tiny graph builds in milliseconds
UPPER_SHARE = 0.25  # of the call's time, the upper-bound heuristics' (greedy's first, the others' where needed)
LINEAR_SHARE = 0.5  # of the call's time left, what greedy may take when it needs more than the heuristics' share
SLICING_FLOOR = 0.2  # of the call's time left, what slicegraph and BRKGA get at least (after greedy's share)
SLICING_PORTION = 0.75  # of the heuristics' share, slicegraph's when BRKGA follows
HANDOVER_PER_OP = 1.5e-4  # seconds per op the levels leave the certificate's hand-over (_reserved)
BRKGA_GENERATION = 50  # slicegraph's seconds that BRKGA needs for a generation (100 decodes; slicegraph slices 2 orders)
MIN_AGAIN = 2.0  # seconds left after the levels below which no stopped heuristic runs again (_again)
COLD_KEEP = 0.25  # of the time left at the end, what a heuristic stopped in Python on a cold kernel cache keeps to run
# again compiled after waiting for the background compile (cold gpt3-2000 onto 4 stages: 42.498 at 23 s of 60, 28.8249)
DP_FIRST_OPS = 300  # graphs of at most this many ops whose ideals are few (DP_FIRST_IDEALS, :func:`few_ideals`)
DP_FIRST_IDEALS = 300  # run the DP level before slicegraph and BRKGA: it settles its class in milliseconds there
# (the DP in Python, :data:`.heuristics.jit.PYTHON_IDEALS`), and its split is at least theirs on identical stages


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
        self.upper: list[UpperRun] = []  # the upper-bound heuristics that ran, in order
        self.cut: list[str] = []  # the upper-bound heuristics stopped at their time limit (_again runs them again)
        self.unfinished: set[str] = set()  # ... of those, the ones stopped before their search answered
        self.cold: set[str] = set()  # ... of those, the ones stopped running their kernels in Python (a cold cache)
        self.formulation: Any = None  # certify(formulation=...): the single-sample model levels' formulation
        self.label = ""  # the running level's class by name, where it names one (levels.base.ANY_ORDER)
        self.own = False  # the running level bounds only the problem's own placements (levels.base.own_class)
        self.listed = problem.class_label()  # the problem's class, by name
        self.family = Wider(problem, self.listed, TOL, ROUNDING)  # what is known beyond the problem's class
        self.needs: dict[str, float] = {}  # a MIP level's estimated build (Level.needs), once per certification
        self.late = FREE_SECONDS  # what the free levels may take past the budget (Level.late), left

    def offer(self, placement: Placement, who: str, scored: tuple[bool, Any] | None = None) -> float | None:
        """Keep ``placement`` if valid and better than the best; its objective (``None`` if invalid). ``scored``:
        its validity and objective for the problem, where they were found already (in a child)."""
        if scored is None:  # one evaluation for both (twice, 0.1 s of CPU for greedy's split of 20,000 ops)
            broken, ev = self.problem.scored(placement)
            scored = (not broken, ev.objective)
        valid, value = scored
        if not valid:
            self.family.offer(placement, who)
            return None
        if value < self.best[0]:
            self.best = (value, placement, who)
            if self.bound[0] >= value * (1 - ROUNDING):  # the scale's rounding is not a gap (as in prove)
                self.bound = (value, self.bound[1])
        return value

    def prove(self, level: str, bound: float | None, scope: PlacementClass = ALL) -> float | None:
        if bound is None:
            return None
        if scope == ALL and not self.own:  # over every placement of the family
            self.family.prove(level, bound, self.best[0])
        if self.scope not in scope:  # a narrower class: its optimum may exceed the best placement
            if bound > self.class_bounds.get(scope, (-math.inf, ""))[0]:
                self.class_bounds[scope] = (bound, level)
            return bound
        bound = held(level, bound, self.best[0], TOL, ROUNDING, f"above the feasible objective found by {self.best[2]!r},")
        if bound > self.bound[0]:
            self.bound = (bound, level)
        return bound

    def met(self) -> bool:
        ub = self.best[0]
        return math.isfinite(ub) and (ub <= 0 or (ub - self.bound[0]) / ub <= self.gap)

    def settled(self) -> bool:
        """Met, or the gap is within the precision of the level whose bound it is (a bisection's width): no
        placement or level found can move the certificate by more (BRKGA ran twice for 31 s on a 623-op GPT-3 left
        at 6.6e-7 by the cut-stages bisection, to no change; the DP 23 s on ResNet copies beside a host at 1.6e-8)."""
        proved = LEVELS.get(self.bound[1])
        ub = self.best[0]
        return self.met() or (proved is not None and math.isfinite(ub)
                              and ub - self.bound[0] <= proved.precision * ub)

    def certificate(self) -> Certificate:
        value, placement, who = self.best
        return Certificate(placement, value, who, self.bound[0], self.bound[1], self.rows, self.exact_among, self.gap,
                           self.scope, dict(self.class_bounds), list(self.upper), self.listed,
                           self.family.beyond(self.best))


def _upper(run: _Run, methods: tuple[str, ...], seconds: float, first: bool = False) -> None:
    """The upper-bound heuristics, sharing ``seconds`` (each gets what is left of its share); ``first``: stop at
    the first valid placement. None starts once the best placement meets the bound: it could not change the
    certificate. Each run is recorded (``run.upper``). The first search's compiled kernels are loaded here before
    the share starts, where the call's time left holds the load and that search's share after it: they serve every
    search after it and every run again (a 5 s bounds of GPT-3 of 1,029 ops onto 4 stages at load 5 gave PipeDream's
    path 0.86 s, in which its child loaded them, 0.35 s of CPU, and was stopped, then slicegraph likewise; the
    certificate read the work-balanced slicing, 42 % above the path's 17.514)."""
    g, c = run.problem.graph, run.problem.cluster
    searches = [m for m in methods if m not in LINEAR]
    if searches and not (first and math.isfinite(run.best[0])) and not run.settled():  # the first search's kernels
        jit.warm_within(g.n, searches[0], run.clock.left() - seconds * _portion(methods[methods.index(searches[0]):]))
    share = run.clock.within(seconds)
    for i, method in enumerate(methods):
        if share.expired(0.1) or (first and math.isfinite(run.best[0])) or run.settled():
            break
        if method == "brkga" and _slow_slicing(run, share.left()):
            continue
        if method not in LINEAR:  # its kernels loaded here once, from its share: not again by each child after it
            jit.warm_within(g.n, method, share.left() * _portion(methods[i:]))
        seconds = share.left() * _portion(methods[i:])
        limit = seconds - stop_margin(seconds, g.n)  # its answer is scored and sent before it is stopped
        t = time.perf_counter()
        try:  # a heuristic still running past its time limit is stopped (BudgetSpent); one in O(n + m) runs here:
            # a forked child's copy-on-write pages and pickled answer doubled greedy's CPU (cnn-20000: 0.16 -> 0.30 s)
            found = (heuristic(method, g, c, model=run.model, time_limit=limit) if method in LINEAR else
                     call_within(share.within(seconds), heuristic, method, g, c, model=run.model, time_limit=limit))
        except PlacementError as err:  # a heuristic that does not apply to this graph (e.g. too many ideals)
            wall = time.perf_counter() - t  # stopped (BudgetSpent): it took all of that
            run.upper.append(UpperRun(method, None, wall, str(err).split(";")[0],
                                      wall if isinstance(err, BudgetSpent) else 0.0))
            if isinstance(err, (BudgetSpent, ColdKernels)) and method not in LINEAR:  # stopped with nothing: _again
                run.cut.append(method)  # (PipeDream's path stopped at 1.75 s of a 20 s bounds on GPT-3 of 20,111 ops
                run.unfinished.add(method)  # onto 16 stages, 2.6 s left unused; its split meets the bound there)
            if isinstance(err, ColdKernels):  # its kernels in Python, compiled in the background meanwhile
                run.cold.add(method)
            continue
        value = run.offer(found.placement, method)
        run.upper.append(UpperRun(method, value, time.perf_counter() - t, "" if value is not None else
                                  "no valid placement", found.seconds))
        if found.info.get("stopped") and method not in LINEAR:
            run.cut.append(method)
            if found.info.get("stopped_in"):  # its search gave no answer of its own (a fallback's)
                run.unfinished.add(method)


def _again(run: _Run, seconds: float | None = None, only: set[str] | None = None) -> None:
    """The upper-bound heuristics that their share stopped (:data:`UPPER_SHARE`), run again with the time the
    levels left, while the gap is open: at 20,000 ops slicegraph's share ended before its slicing DP did (its
    fallback, the work-balanced slicing, 268.19 on GPT-3 onto 4 stages at load 5), and the levels then left 35 s
    of a 60 s ``bounds`` unused, where the DP ends in 6-8 s at 250.59 (the bound 245.81). Before a level of
    seconds, those of them (``only``) stopped before their search answered run with ``seconds``
    (:meth:`_Pending.before`)."""
    last, compiling = seconds is None, bool(run.cold) and kernel_cache.compiling()
    methods = tuple(m for m in dict.fromkeys(run.cut) if (only is None or m in only)
                    and (last or not compiling or m not in run.cold))  # before a level: compiled, or not again
    run.cut = [m for m in run.cut if m not in methods]
    if last and compiling and run.cold.intersection(methods) and not run.settled():  # the call's end: they wait
        kernel_cache.wait_compiled(run.clock.at - max(COLD_KEEP * run.clock.left(), MIN_AGAIN))  # for the compile
    seconds = run.clock.left() if seconds is None else seconds
    if methods and not run.settled() and seconds >= MIN_AGAIN:
        _upper(run, methods, seconds)


def _portion(methods: tuple[str, ...]) -> float:
    """The first method's portion of the heuristics' share left: all of it for a method in ``O(n + m)``; else an
    even split among the searches left (a method in ``O(n + m)`` after them takes what they leave), but PipeDream's
    path before others takes :data:`~.starts.LEAD_SHARE`, as in the start race (one slicing DP over the cuts between
    levels: 68.437 on GPT-3 of 20,111 ops onto 16 stages in 0.5 s of CPU, a third of a 10 s share at load 6 stopped
    it), and slicegraph before BRKGA takes :data:`SLICING_PORTION` (BRKGA's decodes are slicings: if one slicing does
    not fit, its generation does not either, :func:`_slow_slicing`)."""
    searches = [m for m in methods if m not in LINEAR]
    if methods[0] in LINEAR:
        return 1.0
    if methods[:2] == ("slicegraph", "brkga"):
        return SLICING_PORTION
    if methods[0] == "pipedream" and len(searches) > 1:
        return LEAD_SHARE
    return 1.0 / len(searches)


def _spread(run: _Run) -> None:
    """The work-balanced slicing (:func:`.heuristics.fallback.spread_split`), offered in ``O(n + m)`` where it
    applies (:func:`.heuristics.fallback.spread_applies`): on graphs of :data:`SLOW_SLICING_OPS` ops or more
    without a host (below, slicegraph always runs and slices optimally)."""
    g, c = run.problem.graph, run.problem.cluster
    if not spread_applies(g, c, SLOW_SLICING_OPS):
        return
    name = "spread" if any(c.host) else "balanced"
    t = time.perf_counter()
    try:
        placement = spread_split(g, c, run.model, run.clock.left(), python=run.clock.left() < WARM_LEAST)
    except PlacementError as err:  # ops the accelerators cannot run
        run.upper.append(UpperRun(name, None, time.perf_counter() - t, str(err).split(";")[0]))
        return
    value = run.offer(placement, name)
    run.upper.append(UpperRun(name, value, time.perf_counter() - t, "" if value is not None else
                              "no valid placement", time.perf_counter() - t))


def _slow_slicing(run: _Run, left: float) -> bool:
    """Whether BRKGA cannot decode one generation in ``left`` seconds, going by slicegraph's run: each decode is
    a slicing of an order, as slicegraph's two; its first is slicegraph's own order, so short of a generation it
    only repeats slicegraph (on 20,000 ops at load 10 it was stopped with nothing)."""
    sliced = [u for u in run.upper if u.method == "slicegraph"]
    return (bool(sliced) and run.problem.graph.n >= SLOW_SLICING_OPS
            and left < BRKGA_GENERATION * sliced[-1].work)


SLOW_SLICING_OPS = 1_000
"""Below this many ops BRKGA always runs: a slicing there takes milliseconds, and slicegraph's measured seconds are
its start-up (loading kernels on a busy machine), which left BRKGA out of one run of a sweep and not of its rerun."""


# ---------------------------------------------------------------------------- levels
load()  # the levels of placement_dsl.levels, registered in LEVELS in rank order

__getattr__ = partial(family_tuple, __name__)  # the old per-family tuples (MTPP_LEVELS, ...), deprecated


def default_levels(problem: Problem) -> tuple[str, ...]:
    """The levels whose registration puts the problem's :class:`~placement_dsl.levels.base.Family` among its
    ``defaults``, in rank order: latency; DAG-ordered (MTPP, or routed where Archer's MIP cannot write it);
    Tarnawski's contiguous and non-contiguous throughput problems."""
    fam = family(problem)
    return tuple(name for name, lv in LEVELS.items() if fam in lv.defaults)


def certify(problem: Problem, budget: float = 60.0, levels: tuple[str, ...] | None = None,
            gap: float = 0.01, solver: str = "highs", workers: int = 1, stop_at_gap: bool = True,
            start: Placement | None = None, deadline: Deadline | None = None,
            formulation: Any = None) -> Certificate:
    """Run the bound hierarchy cheapest-first until the gap target is met or the budget is spent.

    Parameters
    ----------
    problem
        An MTPP (``Bottleneck`` objective, ``DagOrder``) for Archer's MIP levels, or one of Tarnawski's throughput
        problems (``Contiguous`` or no structure term) for ``chain`` and ``throughput``; ``simple``, ``dp``: any.
    budget
        Wall-clock seconds for the whole call from its start (upper-bound heuristics, model
        builds included); each MIP level gets its share of what is left, and a level that cannot fit (its model
        too large for its share, sized before a formulation loads, or nothing left) is skipped with the reason.
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
    formulation
        For a single-sample problem, the formulation (a registered name or object, e.g. one derived
        from ``latency`` or ``schedule``) the LP and MIP levels solve in place of their own.

    Examples
    --------
    >>> from placement_dsl.graph import Graph, Op
    >>> from placement_dsl.problem import Stages
    >>> from placement_dsl.objectives import Bottleneck
    >>> g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2)], [("a", "b")])
    >>> cert = certify(Problem(g, Stages(2), Bottleneck(), [DagOrder()]), budget=20)
    >>> cert.objective, cert.bound, cert.proved_by
    (3.0, 3.0, 'one-or-cut')
    """
    refuse_spawned_rerun("certify")
    limit = seconds(budget, "budget")  # the call's deadline: budget seconds from now, or the caller's if sooner
    outer = Deadline(limit) if deadline is None else deadline.within(limit)
    clock = _reserved(outer, problem.graph.n)
    checks.check_arguments(gap, workers, start)
    chosen = [LEVELS[name] for name in checked_levels(problem, levels)]
    run = _Run(problem, solver, workers, gap, clock)
    run.formulation = chosen_formulation(problem, formulation)
    if start is not None:
        run.offer(start, start.source or "start")
    pipelines = problem.has(DagOrder) or (problem.has(Contiguous) and not isinstance(problem.objective, Latency))
    pending = _Pending(run, UPPER if pipelines else (), chosen)  # their splits are contiguous (slicings of an order)
    first = next((i for i, lv in enumerate(chosen) if not lv.free), len(chosen))  # the free levels before the
    _levels(run, chosen, range(first), pending, outer, stop_at_gap)  # heuristics (4 s, 1,502 ops: bound 0 after)
    pending.greedy()
    upper = None if not isinstance(problem.objective, Latency) else latency_upper if family(problem) is Family.LATENCY \
        else makespan_upper  # the single-sample levels' horizon and warm start, by how the devices run
    if upper is not None:
        upper(run, clock.clip(min(20.0, clock.seconds / 4)))
    report("certify", level="start", bound=run.bound[0], best=run.best[0])
    _levels(run, chosen, range(first, len(chosen)), pending, outer, stop_at_gap, upper)
    pending.rest()
    _again(run)
    if upper is not None and not run.settled() and clock.left() >= MIN_AGAIN:  # the time the levels left (a 5-op graph's: 6 s
        upper(run, clock.left())  # of 8, after a 2 s share had ended latency-best's chain split, 3.0, at 4.5)
    if not math.isfinite(run.best[0]):  # every heuristic stopped (a loaded machine): the splits they fall back on
        fallback_upper(run, outer)
    return run.certificate()


def _levels(run: _Run, chosen: list[Level], span: range, pending: _Pending, outer: Deadline, stop_at_gap: bool,
            upper: Any = None) -> None:
    """The levels ``chosen[i]``, ``i`` in ``span``, each with its share of what is left (or skipped)."""
    clock, problem = run.clock, run.problem
    for i in span:
        level = chosen[i]
        left = clock.left()
        if (stop_at_gap and run.met() and not level.always) or (left <= 0 and not level.late(problem, outer, run.late)):
            run.rows.append(LevelResult(level.name, None, LevelStatus.SKIPPED, 0.0,
                                        "gap target met" if run.met() else "budget spent"))
            continue
        run.late -= level.late_seconds(problem) if left <= 0 else 0.0  # the free levels' time past the budget
        large = level.too_large(run, left)  # sized before its accepts or its run loads a formulation
        reason = large or level.accepts(problem) or (None if level.replicates else widened(problem))
        if reason:
            run.rows.append(LevelResult(level.name, None, LevelStatus.SKIPPED if large else LevelStatus.NOT_APPLICABLE,
                                        0.0, reason, run.scope, run.listed))
            continue
        if pending.before(level):  # the heuristics ran: the gap may be met, and the time left is less
            if stop_at_gap and run.met() and not level.always:
                run.rows.append(LevelResult(level.name, None, LevelStatus.SKIPPED, 0.0, "gap target met"))
                continue
            left = clock.left()
        beyond = (None if not stop_at_gap or level.always else f"the gap is within the precision of {run.bound[1]}"
                  if run.settled() else level.beyond_reach(run.best[0], run.bound[0], run))
        if beyond:
            run.rows.append(LevelResult(level.name, None, LevelStatus.SKIPPED, 0.0, beyond))
            continue
        if not level.closed_form and not math.isfinite(run.best[0]) and (upper or LEVELS["dp"] in chosen[:i]):
            # the MIP levels' start: in place of the DP's; or the single-sample heuristics again (6 ops: a Pin
            _upper(run, FALLBACK_UPPER, left / 4, first=True) if upper is None else upper(run, left / 4)  # refused
            left = clock.left()  # greedy's split, and latency-best's share stopped it)
        mips = [lv for lv in chosen[i:] if not lv.closed_form]
        weights = 0.0 if level.free else sum(lv.weight for lv in mips if lv is level or (
            stop_at_gap and run.met() and not lv.always) or (lv.accepts(problem) is None and lv.fits(run, left)))
        # a closed form may take half of what is left, a MIP level its weight's share; MIP levels that do not apply
        # or whose models cannot be built in all that is left take none (GoogLeNet at 10 s: 3 s unused); a free level
        # half, unsized (sizing the MIP levels loaded Pyomo: 13 s at load 16 on 5 ops, before any heuristic)
        later = level.free or weights > 0 or (mips and any(lv.closed_form for lv in chosen[i + 1:]))
        free = max(left - pending.held(), LINEAR_SHARE * left) if level.closed_form else left  # the heuristics' kept
        share = free * (0.5 if later else 1.0) if level.closed_form else left * (level.weight / weights if weights else 1.0)
        if not level.closed_form:
            share = min(share, max(left - min(MODEL_MARGIN, MARGIN_SHARE * left), 0.0))
        t, run.label, run.own = time.perf_counter(), "", False
        try:
            if large := level.too_large(run, share):
                raise BudgetSpent(large)
            bound, status, note, scope = level.run(run, share)
        except SpecError as err:  # the level's formulation does not apply to this problem (found while building)
            bound, status, note, scope = None, LevelStatus.NOT_APPLICABLE, str(err), run.scope
        except BudgetSpent as err:  # the level found it cannot fit (e.g. its model is too large for its share)
            bound, status, note, scope = None, LevelStatus.SKIPPED, str(err), run.scope
        except TimeLimitReached as err:  # a heuristic the level runs here was stopped with nothing (ColdKernels: its
            bound, status, note, scope = None, LevelStatus.NO_BOUND, str(err), run.scope  # kernel in Python)
        label = run.label or (run.listed if scope == run.scope and (run.own or scope != ALL) else "")
        run.rows.append(LevelResult(level.name, run.prove(level.name, bound, scope), status, time.perf_counter() - t,
                                    note, scope, label))
        report("certify", level=level.name, bound=run.bound[0], best=run.best[0])


class _Pending:
    """The upper-bound heuristics of a DAG-ordered problem, run by expected value per second: the work-balanced
    slicing, else greedy, first; then the closed-form bounds ranked before the DP and, on few ideals (:func:`few_ideals`),
    the DP level; PipeDream's path, slicegraph and BRKGA only before the first other level, and only while the
    best placement does not meet the bound (once it does, nothing they find can change the certificate). They share
    :data:`UPPER_SHARE` of the call's time, greedy's included."""

    def __init__(self, run: _Run, methods: tuple[str, ...], chosen: list[Level]):
        self.run, self.methods = run, tuple(methods)
        self.share, self.spent = run.clock.left() * UPPER_SHARE, 0.0  # the heuristics' seconds, and what they took
        self.chosen, names = chosen, {lv.name for lv in chosen}
        self.dp_first = bool(self.methods) and "dp" in names and few_ideals(run.problem.graph, DP_FIRST_IDEALS, DP_FIRST_OPS)
        self.retried = False  # the stopped heuristics ran again before a level (_again)

    def _share(self, floor: float = 0.0) -> float:
        """What is left of the heuristics' seconds (not a window from the call's start, which the levels before them
        used up: the cut stages' 5.9 s of a 20 s ``bounds`` of 20,111 ops left PipeDream's path 0.4 s), at least
        ``floor`` of the call's time left."""
        return max(0.0, self.share - self.spent, floor * self.run.clock.left())

    def held(self) -> float:
        """The seconds of the heuristics' share that the levels run before them leave them (none once they ran)."""
        return max(0.0, self.share - self.spent) if self.methods else 0.0

    def _upper(self, methods: tuple[str, ...], seconds: float) -> None:
        """:func:`_upper`, its wall time taken from the share."""
        t = time.monotonic()
        _upper(self.run, methods, seconds)
        self.spent += time.monotonic() - t

    def greedy(self) -> None:
        """The work-balanced slicing (:func:`_spread`, milliseconds) first; only where it found no valid split, the
        heuristics in ``O(n + m)`` with the share and up to half of the call: the only valid placement where memory
        binds (greedy: 9.3 s on 20,000 ops at load 19). Else they run with the others (:meth:`rest`): first, greedy
        took 1 s of a 5 s ``bounds`` of 20,000 ops that the cut stages needed (250.59 below the slicing's 268.19)."""
        if self.methods and not self.run.met():
            _spread(self.run)
        linear = tuple(m for m in self.methods if m in LINEAR)
        others = tuple(m for m in self.methods if m not in LINEAR)
        if linear and not math.isfinite(self.run.best[0]):
            self._upper(linear, max(self._share(), LINEAR_SHARE * self.run.clock.left()))
            self.methods = others
        elif linear:  # a valid slicing is known: greedy's fill comes last, with what the searches leave (first of
            self.methods = others + linear  # the rest it took their whole share: 983.2 on GPT-3 onto 16 stages
            # beside the slicing's 78.306, and PipeDream's path, 68.437, never ran in a 10 s bounds)

    def before(self, level: Level) -> bool:
        """Run the rest before ``level`` (which applies) unless it is a closed-form bound ranked before the DP
        (the memory bounds: on cnn-20000 k=16 ordered-memory's 34,094 closes an 81 % gap, and after the heuristics
        at load 14 it had no time left), or, on few ideals, the DP; whether any ran."""
        if level.free or (level.closed_form and level.rank < LEVELS["dp"].rank) or (self.dp_first and level.name == "dp"):
            return False
        ran = self.rest()
        if self.retried or self.run.settled() or not self.run.unfinished.intersection(self.run.cut):
            return ran
        self.retried = True  # stopped by their share before their search answered: again, once, with half of
        left = self.run.clock.left()  # what is left, or all of it where no level from here can use any
        idle = all(not lv.closed_form and not lv.fits(self.run, left) for lv in self.chosen[self.chosen.index(level):])
        _again(self.run, left if idle else LINEAR_SHARE * left, self.run.unfinished)
        return True

    def rest(self) -> bool:
        """Run the heuristics not run yet (none once the gap is met); whether any ran."""
        methods, self.methods = self.methods, ()
        ran = len(self.run.upper)
        if methods:  # greedy may have spent the share: slicegraph is the better placement at scale
            self._upper(methods, self._share(SLICING_FLOOR))
        return len(self.run.upper) > ran


WARM_METHODS = (*UPPER, "dp")  # the upper-bound heuristics and the DP level's
WARM_LEAST = 15.0  # seconds left below which the work-balanced slicing runs its kernels in Python (_spread)


def _reserved(clock: Deadline, ops: int) -> Deadline:
    """The levels' deadline: ``clock`` less :data:`HANDOVER_PER_OP` per op (at most a tenth of it), kept for the
    certificate's hand-over (checked, written out): on 20,000 ops at load 19 the command ended 5.7 s after its last level."""
    return clock.within(clock.left() - min(HANDOVER_PER_OP * ops, 0.1 * clock.left()))

