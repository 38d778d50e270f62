"""What a solve starts from, and what it answers when its model is not built or not searched to the end.

The start policy of :func:`placement_dsl.solve.solve` (which start it makes when none is asked for, and when the
objective's improving heuristics continue it) and :class:`Stop`, the answer of a solve stopped without a solution of
its model: the start, else a fallback split held first, with the best bound known without a model.
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import cpsat
from .bounds import cut_stages
from .bounds.makespan import critical_path_bound
from .bounds.max_load import max_load_bound
from .bounds.simple import simple_lower_bound
from .bounds.single_sample import SECONDS as SEGMENT_SECONDS
from .bounds.single_sample import single_sample_bound
from .deadline import BudgetSpent, Deadline, slowdown
from .errors import PlacementError, SpecError
from .evaluate import Evaluation, Objective, execution
from .formulations import Formulation
from .formulations.latency import run_paths_floor
from .heuristics import fallback as fallbacks
from .heuristics import host_share
from .heuristics.base import TimeLimitReached
from .heuristics.fallback import fallback_seconds
from .placement import Placement
from .priced import meets, proven, start_bound
from .restarts import pooled, restart
from .result import Result, Seconds
from .sizing import MIN_SEARCH, build_seconds, check_fits
from .solvers import Status
from .starts import AUTO, NONE, STALE, Start, goal, improve, improving, race, resolve

MATCH_TOL = 1e-6  # relative agreement required between two objectives of one placement
RESERVE = 1.0  # seconds kept after the search: reading the answer back and the cost model's checks
SINGLE_SAMPLE = (Objective.LATENCY, Objective.MAKESPAN)  # objectives whose solve starts from "auto" by default
RUNNING: ContextVar[Any] = ContextVar("segment_schedules", default=None)  # a makespan's segment bound computing
# beside the solve (placement_dsl.cpsat_segments.beside), set by solve for its call
UNREAD: ContextVar[bool] = ContextVar("unread_bounds", default=False)  # see unread_bounds()


@contextmanager
def unread_bounds() -> Iterator[None]:
    """Within the block a solve prices no closed-form bound for its answer (:meth:`Stop.known_bound`): for a caller
    that reads none, as a contracted step, whose coarse model's bound is no bound for the whole graph. The closed
    forms of GPT-3 330M's coarse model took 4.8 s at load 12, past the step's time, and its 60 s solve ended at
    63.8 s."""
    token = UNREAD.set(True)
    try:
        yield
    finally:
        UNREAD.reset(token)


SEARCHES = {"latency": "latency-lns", "makespan": "makespan-lns"}  # by the start's goal (placement_dsl.starts.goal)
"""Per single-sample objective, the search a solve whose model is too large runs after the improving heuristic: a
coarse solve, then LNS over windows of the schedule (:mod:`placement_dsl.search.anytime`, a registered method)."""
IMPROVE_SHARE = 0.3  # of the time left when the model is too large, for the improving heuristic; the search gets the rest
RERUN = 0.5  # of that share, for the searches the start's small share cut short (run again to their end, if they fit)
MIN_LNS = 3.0  # seconds below which the search is not started
PATIENCE = 3  # window steps in a row without a better schedule after which the search gives its time back
SEEDS = {"continued": 1, "instead": 2, "again": 3, "restarts": 1000, "tail": 100_000}  # each continuation of a start its own seed: the improving method
# from a local optimum with the seed that found it found nothing again (GoogLeNet at 60 s: 10 s for the same 1.35716);
# the restarts' seeds count from theirs, past the fresh seeds of again()


HEAVY = 0.35  # of the time left, a single-sample model's estimated build above which the start is continued first
SEARCH_PER_BUILD = 80.0  # seconds of search an "auto" makespan solve asks of its schedule model per second of its
# build (20 when it took 4 times as long, sizing.SCHEDULE_PER_NONZERO): GoogLeNet's (307 ops) built in 5.3 s of a 300 s
# solve and HiGHS kept the start's 1.37343 for 282 s, where the critical-chain and window searches reach 1.33025


def search_per_build(problem: Any, spec: Any) -> float:
    """The seconds of search per second of its estimated build that a solve asks of its model before it builds it
    (:func:`~placement_dsl.sizing.check_fits`'s ``per_build``): :data:`SEARCH_PER_BUILD` for an ``"auto"`` start of
    a makespan (devices that run one op at a time), whose MILP rarely improves a continued start in less, where the
    critical-chain and window searches do (GoogLeNet at 60 s: a 7.6 s build and 23 s of search kept the start's
    1.35716, the searches reach 1.32971; at 300 s, 282 s of search kept 1.37343); 0 otherwise (a useful search
    suffices)."""
    return SEARCH_PER_BUILD if spec == AUTO and goal(problem) == "makespan" else 0.0


def heavy(problem: Any, form: Formulation, spec: Any, clock: Deadline) -> bool:
    """Whether an ``"auto"`` start of a single-sample problem should be continued before its model is built: the
    model fits the time left but its build takes more than :data:`HEAVY` of it (the search after it would rarely
    improve the start; gnmt's 96 layers: a 23 s build of 55 s left, 231.9 kept where the local search continued
    reaches 225.6)."""
    if spec != AUTO or problem.cost_model().objective not in SINGLE_SAMPLE:
        return False
    left = clock.left() - RESERVE
    if left <= MIN_SEARCH:  # no search fits: the estimate (pairs of ops, 4.9 s on 15,838 ops at load 8) is not made
        return False
    need = build_seconds(problem, form)
    return HEAVY * left < need <= left - MIN_SEARCH


CONTINUE_SHARE = 0.15  # of the time left, for the latency local search from an "auto" start before any model is built


def continues(problem: Any, form: Formulation, spec: Any, clock: Deadline) -> bool:
    """Whether an ``"auto"`` start of Tarnawski's latency (accelerators running invocations) is continued by the
    latency local search for :data:`CONTINUE_SHARE` of the time before its model is built, however small the
    model: the IP rarely improves a start the local search can (gnmt at 300 s: the IP kept the start's 231.9 for
    260 s and proved 225.4; the local search reaches the paper's 225.6 within 20 s). A model too large for the
    time left is not built, and its start is continued then (:func:`heuristics_instead`)."""
    if spec != AUTO or problem.cost_model().objective not in SINGLE_SAMPLE or goal(problem) != "latency":
        return False
    try:
        check_fits(problem, form, clock, clock.left() - RESERVE)
    except BudgetSpent:
        return False
    return True


def continued(stop: Stop, clock: Deadline, seconds: float) -> Stop:
    """``stop`` with its start continued by the objective's improving method for ``seconds`` when that is better."""
    current = stop.as_start()
    found = improve(stop.problem, current, seconds, seed=SEEDS["continued"])
    if not found.usable or found.placement is stop.start:
        return stop
    return stop.with_start(found)


def continued_first(stop: Stop, spec: Any, clock: Deadline) -> Stop:
    """``stop`` continued by the objective's improving method before the model is built: for
    :data:`IMPROVE_SHARE` of the time left when the model leaves little time to search (:func:`heavy`), for
    :data:`CONTINUE_SHARE` of it for Tarnawski's latency whatever the model's size (:func:`continues`)."""
    if heavy(stop.problem, stop.form, spec, clock):
        return continued(stop, clock, IMPROVE_SHARE * (clock.left() - RESERVE))
    if continues(stop.problem, stop.form, spec, clock):
        return continued(stop, clock, CONTINUE_SHARE * (clock.left() - RESERVE))
    return stop


def heuristics_instead(stop: Stop, spec: Any, clock: Deadline) -> Stop:
    """A model sized too large for the budget is not built; with an ``"auto"`` start, what is left of the budget
    (all but :data:`RESERVE`) goes to the objective's improving method from the start (:data:`IMPROVE_SHARE` of it,
    :func:`placement_dsl.starts.improve`, after the searches the start's small share cut short run again in
    :data:`RERUN` of it, but for the improving method itself, which runs from the best start next; the objective's
    heuristics again when no start was found), for a makespan whose CP-SAT model is small to CP-SAT on the whole
    graph from the best schedule (:func:`whole_model`), then to the objective's search (:data:`SEARCHES`: a coarse
    solve and LNS on contracted models) until its windows stall (:data:`PATIENCE`), then to the improving method
    again with fresh seeds (:func:`again`); what is still left, or all of it where the search does not start
    (:data:`MIN_COARSE`), goes to restarts until the deadline (:func:`tail`), and the best start is the answer.
    Other starts were asked for by name: they stand."""
    if spec != AUTO or clock.left() <= RESERVE + MIN_SEARCH:
        return stop
    current = stop.as_start()
    method = SEARCHES.get(goal(stop.problem))
    share = IMPROVE_SHARE if method is not None else 1.0
    until = time.perf_counter() + share * (clock.left() - RESERVE)
    rerun = [m for m in stop.unfinished if m != improving(stop.problem)]  # it runs from the best start
    pool = list(stop.others)  # the start's race's next best distinct starts, checked when restarts use them
    if current.usable and rerun:  # the start's share stopped searches that may beat it (GETF on GPT-3
        raced = race(stop.problem, rerun, RERUN * (until - time.perf_counter()),
                     Deadline(max(until - time.perf_counter(), 0.0)), even=False, held=True)[0]  # 330M:
        # 13-20 s; an even share of the rerun, 8 s among five searches at 300 s, stopped it again: 144.75 > 143.60;
        # held to the share: without a deadline the passes' estimates widened it, 155 s of a 30 s solve of 47,584 ops)
        if raced.usable and raced.objective < current.objective:
            current, raced = raced, current
        pool += [raced, *raced.others] if raced.usable else []
    seconds = until - time.perf_counter()
    found = improve(stop.problem, current, seconds, seed=SEEDS["instead"]) if current.usable else \
        resolve(stop.problem, AUTO, deadline=Deadline(seconds), share=1.0, cap=math.inf)
    if found.usable and (not current.usable or found.objective < current.objective):
        current = found
    phases = {"start": time.perf_counter() - stop.t0}
    proved = None
    if method is not None and current.usable and goal(stop.problem) == "makespan":
        began = time.perf_counter()
        searched, proved = whole_model(stop.problem, current, clock)
        if proved is not None or searched is not current:  # CP-SAT ran
            current, phases["solve"] = searched, time.perf_counter() - began
        if proved is not None and (stop.floor is None or proved > stop.floor):  # over every placement: a floor
            stop.floor, stop.floor_source = proved, "CP-SAT on the whole model"
    if method is not None and current.usable and clock.left() - RESERVE >= MIN_COARSE and not \
            (proved is not None and meets(proved, current.objective)):  # CP-SAT proved its answer optimal
        current = improve(stop.problem, current, clock.left() - RESERVE, method=method, patience=PATIENCE)
        phases.update(coarse=current.info.get("coarse_seconds", 0.0), lns=current.info.get("lns_seconds", 0.0))
        began, restarts = time.perf_counter(), goal(stop.problem) == "makespan"
        current = again(stop.problem, current, clock, AGAIN_SHARE if restarts else 1.0, 1 if restarts else STALE)
        phases["again"] = time.perf_counter() - began
        if restarts:  # the time the stalled searches gave back: restarts to the deadline
            began = time.perf_counter()
            current = restart(stop.problem, current, pooled(stop.problem, pool), clock, reserve=RESERVE,
                              least=MIN_LNS, search=method, patience=PATIENCE, seed=SEEDS["restarts"])
            phases["restarts"] = time.perf_counter() - began
            pool = []
            if current.info.get("restarts"):
                stop.note = (f"{current.info['restarts']} restarts after the searches stalled, "
                             f"{current.info.get('restarts_better', 0)} of them better")
    current = tail(stop, current, pool, clock, phases)
    stop.phases = phases
    if not current.usable or current.placement is stop.start:
        return stop
    better = stop.with_start(current)
    better.start_bound = current.bound if stop.start_bound is None or current.bound is None else \
        max(current.bound, stop.start_bound)
    better.phases, better.note = phases, stop.note
    return better


MIN_COARSE = 2.0  # seconds from which the search starts: its coarse solve alone (placement_dsl.search.anytime gives
# it all the time where no window would follow; at 3 s, MIN_LNS, a 4 s solve never searched: transformer-small's
# 50 ops on three GPUs kept the start's 4.328 after 1.1 s, where a 2.5 s coarse HiGHS solve reaches 3.721)
TAIL_LEAST = 0.3  # seconds, at least, of a last restart (and no less than a kick's list schedule and checks)
TAIL_CHECKS = 8  # evaluations' worth of a restart besides its local search: up to restarts.DRAWS kicks, each list-scheduled and checked


def tail(stop: Stop, current: Start, pool: list[Any], clock: Deadline, phases: dict[str, float]) -> Start:
    """``current`` improved by restarts of the objective's improving method alone
    (:func:`~placement_dsl.restarts.restart`, no window search) from the rest of ``pool``, then from kicks, until
    the deadline less :data:`RESERVE`, then, where no kick is valid (a contiguous problem), fresh seeds
    (:func:`again`) until they are stale: the time the searches above leave because they start only with
    :data:`MIN_LNS` or :data:`MIN_COARSE` left, or give back when stalled (a 4 s makespan solve of 16 ops answered
    its start after 0.2 s). Its seconds go to ``phases["restarts"]`` and ``phases["again"]``."""
    problem = stop.problem
    least = max(TAIL_LEAST, fallback_seconds(problem.graph, problem.cluster, "none", TAIL_CHECKS))
    if not current.usable or clock.left() - RESERVE < least:
        return current
    began, before = time.perf_counter(), current.info.get("restarts", 0)
    found = restart(problem, current, pooled(problem, pool), clock, reserve=RESERVE, least=least, search=None, patience=PATIENCE,
                    seed=SEEDS["tail"])
    phases["restarts"] = phases.get("restarts", 0.0) + time.perf_counter() - began
    if clock.left() - RESERVE >= least:  # no kick was valid (a contiguous or pinned problem): fresh seeds instead
        began = time.perf_counter()
        found = again(problem, found, clock, stale_after=STALE, least=least, seed=SEEDS["tail"] + 10_000)
        phases["again"] = phases.get("again", 0.0) + time.perf_counter() - began
    if found.info.get("restarts"):
        done = f"{found.info['restarts']} restarts to the deadline, {found.info.get('restarts_better', 0)} of them better"
        stop.note = "; ".join(m for m in (stop.note, done) if m)
    found.info = {**found.info, "restarts": before + found.info.get("restarts", 0)}
    return found


WHOLE_LEAST = 8.0  # seconds left at least for CP-SAT on the whole model (its child's start-up, ~2.5 s, and build)


def whole_model(problem: Any, current: Start, clock: Deadline) -> tuple[Start, float | None]:
    """``current`` (a makespan's best schedule) searched by CP-SAT on the whole graph's model until the clock's end
    less :data:`RESERVE`, where that model is small enough for CP-SAT to improve it
    (:func:`~placement_dsl.cpsat.whole_fits`, sized before it is built) and :data:`WHOLE_LEAST` seconds are left:
    the better of the two by the cost model, and CP-SAT's bound (over every placement; ``None``: none). The
    list scheduler, which every other search scores with, books a transfer's ports greedily from the start: an
    assignment CP-SAT schedules at 2.310 it schedules at 2.552, so those searches may never see it."""
    if not current.usable or clock.left() - RESERVE < WHOLE_LEAST or not cpsat.whole_fits(problem):
        return current, None
    try:
        found = cpsat.solve_model(problem, current.placement, "", clock.at - RESERVE)
    except (PlacementError, SpecError):  # CP-SAT cannot run (a term it refuses): the searches go on without it
        return current, None
    better = Start() if found.placement is None else resolve(problem, found.placement)
    if better.usable and better.objective < current.objective:
        return replace(better, method=f"{current.method}+cpsat", bound=current.bound), found.bound
    return current, found.bound


AGAIN_SHARE = 0.5  # of the time left, the most one fresh-seed round of a makespan takes: restarts follow them. Given
# all of it, GPT-3 330M's first round (schedule-ls from its local optimum, 4,886 ops) took the 87 s left of a 300 s
# solve and found nothing, and the restarts never ran; at a quarter, a generated GPT of 998 ops kept 6.59186 where
# one round of 83 s had found 6.58988 (a round's segment search needs its time)


def again(problem: Any, current: Start, clock: Deadline, share: float = 1.0, stale_after: int = STALE,
          least: float = MIN_LNS, seed: int = SEEDS["again"]) -> Start:
    """``current`` continued by the objective's improving method with a fresh seed each round (from ``seed``),
    each for ``share`` of the time left less :data:`RESERVE` (at least ``least`` seconds, none started with less),
    until ``stale_after`` rounds in a row end without a better start: the time a stalled search gives back."""
    stale = 0
    while current.usable and clock.left() - RESERVE >= least and stale < stale_after:
        left = clock.left() - RESERVE
        found = improve(problem, current, min(left, max(least, share * left)), seed=seed)
        seed += 1
        better = found.usable and found.objective < current.objective * (1 - 1e-12)
        current, stale = (found, 0) if better else (current, stale + 1)
    return current


HELD_SHARE, HELD_GRACE = 0.2, 2.0  # of the time left, the split held_split builds, or 1.5x its estimate; past a clock
# spent before the solve began by 2 s at most (the promise's 5), and built in this process where it takes 2 s at most


def fallback_split(problem: Any, clock: Deadline, here: bool = False) -> tuple[Placement | None, Evaluation | None, str]:
    """The best O(n + m) split (greedy, one device, work-balanced) valid for ``problem`` and its evaluation, within
    ``clock`` (``here``: in this process), and why there is none ("" when none is valid)."""
    try:  # sized and stopped by the call's clock: 47,584 ops took 42 s for one device's split alone at load 8
        found, valid, ev = fallbacks.scored_fallback(problem, clock, "fallback", "no model", here)
    except PlacementError as err:  # none could be built, or none in the time left (BudgetSpent)
        return None, None, f"fallback split {err}" if isinstance(err, BudgetSpent) else ""
    placement = Placement(problem.graph, problem.cluster, found.placement.assign,
                          source=found.info.get("fallback", "fallback"))
    return (placement, ev, "") if valid and ev.valid else (None, None, "")


def held_split(problem: Any, clock: Deadline, share: float = HELD_SHARE) -> tuple[Placement | None, Evaluation | None]:
    """The fallback split built and scored before anything expensive runs (:data:`HELD_SHARE` of the time left): a
    start or search cut short still leaves it (a 1,500-wide fan at load 15 answered nothing when it was built last)."""
    need = fallback_seconds(problem.graph, problem.cluster, "balanced", 1)
    tiny, here, left = need <= fallbacks.MILLISECONDS, need <= HELD_GRACE, clock.left()  # a stopped child leaves nothing
    held = Deadline(math.inf) if tiny else Deadline(min(max(share * left, 1.5 * need), left + HELD_GRACE))
    placement, ev, _ = fallback_split(problem, held, here)
    return placement, ev


class Stop:
    """The answer of a solve that the budget stops before (or while) its model is built: the start, if any,
    with status time limit and the best bound known without a model."""

    def __init__(self, problem: Any, form: Formulation, method: str, solver: str, warm_start: Any,
                 start: Placement | None, start_eval: Evaluation | None, refusal: str, t0: float):
        self.problem, self.form, self.method, self.solver = problem, form, method, solver
        self.warm_start, self.start, self.start_eval, self.refusal, self.t0 = warm_start, start, start_eval, refusal, t0
        self.start_bound: float | None = None  # a bound the start's heuristic proved over the problem's class
        self.phases: dict[str, float] = {}  # seconds of the start, the coarse solve and the LNS, when they ran
        self.unfinished: tuple[str, ...] = ()  # searches of an "auto" start its small share cut short
        self.others: tuple[tuple, ...] = ()  # the next best distinct starts of its race (Start.others)
        self.floor: float | None = None  # a bound over the problem's placements proved within the budget (run paths)
        self.floor_source: str | None = None  # what proved it, when not the run paths or the host's share
        self.note = ""  # what the search after the start did, for the answer's message (the restarts)
        self.clock = Deadline(math.inf)  # the call's deadline (solve sets it): the fallback split is sized to it
        self.held: tuple[Placement | None, Evaluation | None] = (None, None)  # held_split's, built first
        self.gap = 0.0  # the relative gap within which the floor proves an answer (the solve's, once price_start priced)
        self.priced = math.inf  # the start's max load, where the cut stages were priced on it to their end: not again

    def as_start(self) -> Start:
        """The start as the resolver's :class:`~placement_dsl.starts.Start` (named by its method)."""
        return Start(self.start, self.start_eval, self.refusal, self.start_bound,
                     str(self.warm_start).removeprefix(f"{AUTO}: "))

    def with_start(self, found: Start) -> Stop:
        """This stop with ``found`` (a usable start an improving search made) as its start; the class bound and the
        floor stay, with what proved it (the answer credited the run-paths DP with the cut spine's bound)."""
        better = Stop(self.problem, self.form, self.method, self.solver, f"{AUTO}: {found.method}", found.placement,
                      found.evaluation, "", self.t0)
        better.start_bound, better.floor, better.floor_source = self.start_bound, self.floor, self.floor_source
        better.clock, better.held, better.gap = self.clock, self.held, self.gap
        return better

    def proves_start(self) -> bool:
        """Whether the floor (:attr:`floor`, a bound over the problem's placements) reaches the start's objective
        (within the solve's relative :attr:`gap`): the start is then optimal and needs no search."""
        return self._usable() and self.floor is not None and math.isfinite(self.start_eval.objective) and \
            meets(self.floor, self.start_eval.objective, self.gap)

    def price_start(self, clock: Deadline, gap: float) -> None:
        """For a model whose build takes over :data:`LARGE` of the time left, the cut-stages bound on a usable start
        before the build (:func:`~placement_dsl.priced.start_bound`) raises the floor: a start it proves within ``gap``
        needs no model; the answer's bound is never below it (priced again on a better answer, or if its clock ran out)."""
        large = LARGE * clock.left()
        if not self._usable() or UNREAD.get() or build_seconds(self.problem, self.form) <= large:
            return
        found, finished = start_bound(self.problem, self.start_eval.objective, clock, gap)
        self.priced, self.gap = self.start_eval.objective if finished else math.inf, gap if found is not None else 0.0
        if found is not None and (self.floor is None or found > self.floor):
            self.floor, self.floor_source = min(found, self.start_eval.objective), "the cut stages"

    def _usable(self) -> bool:  # the start is valid and not refused
        return self.start is not None and not self.refusal and self.start_eval is not None and self.start_eval.valid

    def result(self, why: str) -> Result:
        usable = self.start is not None and not self.refusal and self.start_eval is not None
        placement, ev = (self.start, self.start_eval) if usable else self._fallback()
        status = Status.TIME_LIMIT_FEASIBLE if placement is not None else Status.TIME_LIMIT_NO_SOLUTION
        if self.proves_start():
            status = Status.OPTIMAL
        answer = ("; the answer is the warm start" if usable else
                  f"; the answer is the {placement.source} fallback split" if placement is not None else "")
        notes = [m for m in (self.refusal, why + answer, self.note) if m]
        result = Result(status=status, placement=placement,
                        objective=None if ev is None else ev.objective, bound=None, method=self.method,
                        solver=self.solver, formulation=self.form.name, evaluation=ev, message="; ".join(notes),
                        bound_scope=self.form.placement_class(self.problem))
        result.start_objective = None if self.start_eval is None else self.start_eval.objective
        result.start_accepted = False if self.refusal else None  # no solver was asked
        result.found_by = (start_label(self.warm_start) if usable else
                           f"fallback ({placement.source})" if placement is not None else "")
        self.known_bound(result)
        total = time.perf_counter() - self.t0
        result.timings = Seconds(start=self.phases.get("start", total), total=total,
                                 solve=self.phases.get("solve", 0.0), coarse=self.phases.get("coarse", 0.0),
                                 lns=self.phases.get("lns", 0.0),
                                 again=self.phases.get("again", 0.0), restarts=self.phases.get("restarts", 0.0))
        return result

    def no_worse(self, searched: Result, why: str) -> Result:
        """The answer of a searched model, never worse than the start: a search that ended at its time limit
        without a solution of its own (a solver that takes no start, or refused it) answers the start, else the
        fallback split, as :meth:`result` gives them, with the search's bound where it proved more; a usable start
        better by the cost model than the search's answer by any amount is the answer, with the search's
        bound (the solver's own guard compares the model's objective, which a start it was not given, or a model
        value that is not tight, escapes), when the start lies in the formulation's class (:meth:`in_class`; the
        chain formulation answers DP-class placements only). A claim about the model (infeasible, unbounded) is
        reported as it is."""
        if searched.placement is None and searched.status is Status.TIME_LIMIT_NO_SOLUTION:
            answer = self.result("; ".join(m for m in (why, "the solver found no solution in its time") if m))
            if searched.bound is not None and (answer.bound is None or searched.bound > answer.bound):
                answer.bound = searched.bound if answer.objective is None else min(searched.bound, answer.objective)
            answer.start_accepted, answer.log_path = searched.start_accepted, searched.log_path
            return answer
        if not self._usable() or searched.objective is None or searched.status in (Status.INFEASIBLE, Status.UNBOUNDED) or \
                searched.objective <= self.start_eval.objective or not self.in_class():  # the better, however close
            return searched  # a start outside the formulation's class is no answer of it: the class's answer stands
        note = (f"the solver's answer {searched.objective:.10g} is worse than the start "
                f"{self.start_eval.objective:.10g}; the start is the answer")
        searched.message = "; ".join(m for m in (searched.message, note) if m)
        searched.placement, searched.objective, searched.evaluation = self.start, self.start_eval.objective, \
            self.start_eval
        searched.found_by = start_label(self.warm_start)
        if searched.bound is not None:
            searched.bound = min(searched.bound, self.start_eval.objective)
        return searched

    def in_class(self) -> bool:
        """Whether the start lies in the class of placements the formulation optimizes over (a start the search
        may answer; the start is valid for the problem)."""
        return self.start is not None and \
            self.problem.class_of(self.start) in self.form.placement_class(self.problem)

    def _fallback(self) -> tuple[Placement | None, Evaluation | None]:
        """The split held before the start (:func:`held_split`), else one built now (:func:`fallback_split`)."""
        if self.held[0] is not None:
            return self.held
        placement, ev, note = fallback_split(self.problem, self.clock)
        self.note = "; ".join(m for m in (self.note, note) if m)
        return placement, ev

    def known_bound(self, result: Result) -> None:
        """Raise a missing or weaker bound to the best one known without a model: the start heuristic's proof
        over the problem's class, else a closed form over every placement (Lemma 3.3 for max load and
        makespan, the critical path for latency), unless the caller reads none (:func:`unread_bounds`). An answer
        stopped by its time limit whose bound then meets its objective is optimal (over the class the bound covers)."""
        self._raise_bound(result)
        proven(result, self.gap)

    def _raise_bound(self, result: Result) -> None:
        if UNREAD.get():
            return
        bound, source = self.start_bound, self._bound_source()
        if bound is None:
            bound = closed_form_bound(self.problem, self.clock)
        elif (closed := max_load_bound(self.problem)) is not None and closed > bound:  # a heuristic stopped early
            bound, source = closed, "by a closed form"  # proves less than the closed forms
        if self.floor is not None:
            bound = self.floor if bound is None else max(bound, self.floor)
        cut = cut_stages.answer_bound(self.problem, result.objective) if result.objective is not None and \
            result.objective < self.priced else None  # a better answer holds fewer runs: priced again
        if cut is not None and (bound is None or cut > bound):  # inner devices pay the tensors across their cut ops
            bound, source = cut, "by the cut stages"
        if bound is None or (result.bound is not None and result.bound >= bound):
            return
        result.bound = bound if result.objective is None else min(bound, result.objective)
        if bound == self.floor:
            source = (f"by {self.floor_source}" if self.floor_source else "by the run-paths DP"
                      if self.problem.cost_model().objective in SINGLE_SAMPLE else "by the host's share of memory")
        result.message = "; ".join(m for m in (result.message, f"bound {bound:.6g} {source}") if m)

    def _bound_source(self) -> str:
        return "proven by the warm start's heuristic" if self.start_bound is not None else "by a closed form"


FLOOR_SHARE, FLOOR_LEAST, FLOOR_MOST = 0.1, 12.0, 30.0  # of the time left, the run-paths floor's clock (and its limits)


def paths_floor(problem: Any, clock: Deadline) -> float | None:
    """Tarnawski's latency whose model is not built: the run-paths DP (:func:`~.formulations.latency.run_paths_floor`)
    within :data:`FLOOR_SHARE` of the time left (at least :data:`FLOOR_LEAST` s, at most a third of it and
    :data:`FLOOR_MOST` s), else ``None``."""
    if problem.cost_model().objective not in SINGLE_SAMPLE or execution(problem.cluster) != "invocations":
        return None
    left = clock.left() - RESERVE
    return run_paths_floor(problem, clock.within(min(max(FLOOR_SHARE * left, FLOOR_LEAST), left / 3, FLOOR_MOST)))


def floor(problem: Any, clock: Deadline) -> float | None:
    """A bound over the problem's placements proved within the budget when its model is not built: the run-paths
    DP for Tarnawski's latency (:func:`paths_floor`), the host's share of a contiguous max load whose accelerators'
    memory binds (:func:`~placement_dsl.heuristics.host_share.host_share_bound`, by the time left less
    :data:`RESERVE`: 34,023.3 on 20,000 ops of CNN onto 16 accelerators, where the closed forms prove 6,454.6 of
    greedy's 34,141), else ``None``."""
    found = paths_floor(problem, clock)
    if found is not None or not host_share.applies(problem):
        return found
    try:
        return host_share.host_share_bound(problem, deadline=clock.at - 2 * RESERVE - LATE_PER_OP * problem.graph.n)
    except (SpecError, TimeLimitReached):  # too many ideals, or not in the time left
        return None


def first_floor(problem: Any, share: float | None, clock: Deadline) -> float | None:
    """For a solve whose model is too large to be built (its start's ``share`` is :data:`INSTEAD_SHARE`), the
    host's share of a contiguous max load (:func:`floor`) in at most :data:`FLOOR_KEPT` of the time left, before
    the start: where memory binds on 20,000 ops the heuristics find no better than greedy's split, and after a
    start that had taken its share the bound had too little time left at load 12 (6,454.6 reported of 34,023.3)."""
    if share != INSTEAD_SHARE or not host_share.applies(problem):
        return None
    return floor(problem, clock.within(FLOOR_KEPT * max(clock.left() - RESERVE, 0.0) + 2 * RESERVE +
                                       LATE_PER_OP * problem.graph.n))


CLOSED_PER_EDGE = 7e-5  # seconds per op and edge of the single-sample closed forms at load 1 (scaled by slowdown():
# route paths, heads and tails, the segments' set-up: 7.9 s on 47,584 ops and 65,222 edges at load 6 on 2 cores)


def closed_form_bound(problem: Any, clock: Deadline | None = None) -> float | None:
    """A lower bound over every placement that needs no model (``None`` where none is known for the objective); the
    single-sample segment bounds within ``clock`` too (the call's: 6 s past a spent 10 s solve of 15,838 ops)."""
    return closed_form_source(problem, clock)[0]


def closed_form_source(problem: Any, clock: Deadline | None = None) -> tuple[float | None, str]:
    """:func:`closed_form_bound` and what proved it (a level's name, as a certificate's table names it)."""
    objective = problem.cost_model().objective
    if objective is Objective.MAX_LOAD:
        return max_load_bound(problem), "simple"
    if objective not in SINGLE_SAMPLE:
        return None, "none"
    # paths with route costs, work, segments: each by how the devices run
    running = RUNNING.get()
    mine = running is not None and running.problem is problem
    found = running.value(running.until + 1.0) if mine else None
    if mine and running.closed is not None:
        closed, by = running.closed
    elif clock is None or CLOSED_PER_EDGE * (problem.graph.n + problem.graph.m) * slowdown() <= clock.left():
        closed, by = single_sample_bound(problem, None if clock is None else clock.within(SEGMENT_SECONDS))
    else:  # its passes do not fit what is left (8 s on 47,584 ops at load 6): in O(n + m) the critical path, and the
        # load on serial devices (a latency on parallel devices had no bound at all in a spent 1.2 s solve of BERT-large
        # whose critical path, one device's whole work, is its optimum)
        closed, by = critical_path_bound(problem.graph, problem.cluster), "critical-path"
        if not problem.cluster.parallel.any() and (load := simple_lower_bound(problem.graph, problem.cluster)) > closed:
            closed, by = load, "simple"
    return (found, "segment-schedules") if found is not None and found > closed else (closed, by)


def start_spec(problem: Any, warm_start: Any) -> Any:
    """What the start resolver is asked for: ``None`` (no start asked for) means ``"auto"`` for every objective, and
    :data:`~placement_dsl.starts.NONE` (``"none"``) no start. A throughput IP of GPT-3's 217 ops onto 16 stages with
    no start found no incumbent in a 30 s limit and answered greedy's split 12.744 where the linearized DP (``dpl``)
    finds 7.1019 in about a second; the models of the single-sample objectives are hard to start too."""
    if warm_start is None:
        return AUTO
    return None if isinstance(warm_start, str) and warm_start == NONE else warm_start


LARGE = 0.1  # of the time left, a model's estimated build above which a solve with no start asked for gives it more
LARGE_SHARE = 0.5  # of the time left, the "auto" start's share then (see start_share)
INSTEAD_SHARE = 0.75  # of the time left, the "auto" start's share when the model is too large to be built at all
# (the rest: the answer's checks and bounds and the command's output, 5 s and more on 20,000 ops at load 12)
FLOOR_KEPT = 0.5  # of the time left, at most, for the host-share bound before such a start (see first_floor())
LATE_PER_OP = 2e-4  # seconds per op kept after the host-share bound for the answer's checks and output


def start_share(problem: Any, form: Formulation, warm_start: Any, clock: Deadline) -> float | None:
    """The share of the time left for the ``"auto"`` start of a throughput or training solve with no start asked for
    (``warm_start`` ``None``; ``None``: :func:`~placement_dsl.starts.resolve`'s small share, the model is small for
    the time, and for the single-sample objectives). A model whose build takes more than :data:`LARGE` of the time gets
    :data:`LARGE_SHARE`, whether or not its build fits after the start (the start answers when it does not: a
    throughput IP of ResNet-152 onto 16 stages, 208 ops, built for 16 s and kept greedy's 52.84 for 23 s of search
    after a 7 s start, where the DP finds and proves 9.32); a model too large to be built gets
    :data:`INSTEAD_SHARE`, all but the time to check and report the answer, since no model follows (a throughput IP
    of 2,080 ops at load 8 answered greedy's 134.31 after 6.5 s of a 60 s limit, where the DP finds and proves
    132.95 in 1.1 s). The race is stopped at its share (:func:`placement_dsl.starts.race`)."""
    if warm_start is not None or problem.cost_model().objective in SINGLE_SAMPLE:
        return None
    need, left = build_seconds(problem, form), clock.left() - RESERVE
    if need <= LARGE * left or left <= 0:
        return None
    if need > left - MIN_SEARCH:  # the host-share bound comes first (first_floor), then the start
        return INSTEAD_SHARE
    return LARGE_SHARE


def first_start(problem: Any, warm_start: Any, clock: Deadline | None = None, share: float | None = None
                ) -> tuple[Placement | None, Evaluation | None, str, float | None, Any, tuple[str, ...], tuple]:
    """The start placement, its evaluation, why it is refused ('' if it may be used), its class bound
    (:func:`placement_dsl.starts.resolve`, leaving :data:`~placement_dsl.sizing.MIN_SEARCH` of ``clock``; an
    ``"auto"`` start in ``share`` of the time left, without the usual cap, where given: :func:`start_share`),
    the start's name in messages (``"auto: <method>"`` for the heuristic ``"auto"`` picked) and the searches
    ``"auto"``'s share cut short, and the next best distinct starts of its race (:attr:`Start.others`)."""
    shares = {} if share is None else {"share": share, "cap": math.inf}
    found = resolve(problem, warm_start, deadline=clock, keep=MIN_SEARCH, **shares)
    label = f"{AUTO}: {found.method}" if warm_start == AUTO and found.usable else warm_start
    return found.placement, found.evaluation, found.refusal, found.bound, label, found.unfinished, found.others


def start_label(warm_start: Any) -> str:
    return f"warm start ({warm_start})" if isinstance(warm_start, str) and not Path(warm_start).suffix else "warm start"
