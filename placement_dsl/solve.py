"""``solve``: compile a problem, warm-start it, run a solver under the time limit, and certify the answer.

The formulation is resolved once into an object (:func:`placement_dsl.formulations.get`); its
hooks (:meth:`~placement_dsl.formulations.Formulation.prepare` / ``finish``) are the only place
where a formulation changes how a solve runs. Every answer — the solver's, a kept warm start,
an incumbent at a time limit — passes the problem's full validity check (the cost model's
checks and the terms' own, e.g. pins) and is re-evaluated by the cost model; a solver objective
that disagrees raises :class:`~placement_dsl.errors.EvaluationMismatchError` instead of being reported.
"""
from __future__ import annotations

import math
import numbers
import time
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from . import cpsat, cpsat_segments
from .bounds.max_load import max_load_bound
from .bounds.single_sample import single_sample_bound
from .compile import compile
from .deadline import BudgetSpent, Deadline, seconds
from .deprecated import keyword
from .errors import EvaluationMismatchError, PlacementError, SolverUnavailableError, SpecError
from .evaluate import Evaluation, Objective, execution
from .formulations import Formulation, Kind, Plan, get
from .formulations.latency import run_paths_floor
from .heuristics import fallback as fallbacks
from .options import validate
from .placement import Placement
from .problem import Problem
from .progress import scaled
from .result import Result, Seconds
from .sizing import MIN_SEARCH, build_seconds, check_fits
from .solvers import SolveOptions, SolverOutcome, Status, solve_model
from .starts import AUTO, Start, goal, improve, race, resolve

MATCH_TOL = 1e-6  # relative agreement required between solver and cost model
CPSAT = "cpsat"  # the solver name of CP-SAT's interval model (placement_dsl.cpsat), a backend of solve()
RESERVE = 1.0  # seconds kept after the search: reading the answer back and the cost model's checks
EXTRACTION = 1.0  # the arrays' extraction for the solver (not interruptible), in seconds per second of model build:
# ResNet-152 onto 16 stages at load 12 on two cores built in 11.3 s and was handed off with 1.6 s left, ending 21 s late


def solve(problem: Any, formulation: str | Formulation = "auto", solver: str = "highs", time_limit: float = 60.0,
          gap: float = 1e-4, threads: int = 1, warm_start: str | Path | Placement | None = None,
          log_path: str | Path | None = None, method: str = "ip", windows: bool | None = None,
          budget: float | None = None, deadline: Deadline | None = None,
          options: Mapping[str, Any] | None = None) -> Result:
    """Solve ``problem`` with a formulation and a solver; the result is certified by the cost model.

    Parameters
    ----------
    problem
        A :class:`~placement_dsl.problem.Problem`.
    formulation
        A registered formulation name or object (:data:`~placement_dsl.formulations.FORMULATIONS`),
        or ``"auto"`` to let the problem choose. Relaxations are refused: their optima are lower
        bounds, not placements (use :func:`~placement_dsl.certify.certify`).
    solver
        ``"highs"``, ``"scip"``, any installed Pyomo solver name, or ``"cpsat"``: CP-SAT's interval
        model of a makespan problem (:mod:`placement_dsl.cpsat`; formulation ``"auto"`` or ``"schedule"``).
    time_limit
        Wall-clock seconds for the whole call from its start: warm start, model build, hand-off
        and search, enforced by the project (a time limit is a status). A model that cannot be
        built and searched in the time left is not built: the start (if any) is the answer,
        with status ``time_limit``, the best bound known and the reason in ``message``; for
        latency and makespan with the ``"auto"`` start, the rest of the time first continues the
        start (:func:`placement_dsl.starts.improve`), then runs a coarse solve and LNS on contracted
        models (:data:`SEARCHES`), whose phases ``timings`` reports (``coarse``, ``lns``).
    gap
        Relative MIP gap at which to stop (and, with windows, the certificate's target gap).
    threads
        Solver threads.
    warm_start
        A heuristic method name (``"dp"``, ``"slicegraph"``, ...), ``"auto"`` (the best of the
        heuristics that optimize the problem's objective, in a small share of the budget), a
        :class:`Placement`, a mapping ``{op name: device name}``, or the path of a placement file
        (:func:`placement_dsl.starts.resolve`). ``None``: ``"auto"`` for latency and makespan, and for
        a model that fits but whose estimated build takes more than :data:`LARGE` of the time left; no start
        otherwise.
        A start that is invalid for the problem or violates the formulation is refused (and said so),
        not passed.
    log_path
        File for the solver's log.
    method
        The label of this run in the result (e.g. the command-line method name).
    windows
        Deprecated: ``options={"windows": ...}`` of the ``"chain"`` formulation (goes in the next release).
    budget
        Another name of ``time_limit`` (the whole call); with both, the smaller applies.
    deadline
        The caller's :class:`~placement_dsl.deadline.Deadline` (e.g. a command's, from the process
        start): the call ends by it and by ``time_limit``, whichever comes first.

    Returns
    -------
    Result
        Status, placement, cost-model objective, bound and its class, gap, timings and the start's fate.
    """
    t0 = time.perf_counter()
    clock = _clock(time_limit, budget, deadline)
    options = _options(options, windows)
    _check_arguments(gap, threads, warm_start, solver=solver, method=method, log_path=log_path,
                     formulation=formulation)
    running = _segment_bound(problem, clock)
    token = _RUNNING.set(running) if running is not None else None
    try:
        result = _solve(problem, formulation, solver, clock, t0, gap, threads, warm_start, log_path, method, options)
        if running is not None and running.note:
            result.message = "; ".join(m for m in (result.message, running.note) if m)
        return result
    finally:
        if running is not None:
            _RUNNING.reset(token)
            running.close()


_RUNNING: ContextVar[Any] = ContextVar("segment_schedules", default=None)
SEGMENT_SHARE = 0.5  # of a single-sample solve's time, the most its segment bound's child process runs beside it
SEGMENT_LEAST = 20.0  # seconds it may run however short that share (within the solve's time)
SEGMENT_HERE = (0.15, 45.0)  # with no core free for the child: the share of the time, and the most seconds, in-process
# (GPT-3 330M inter-server's 17 pair LPs of its attention window take 20-35 s at load 8-10: 30 s left the bound at
# 183.3 where they prove 198.6, and its window search had not improved the start in the 150 s it had)


def _segment_bound(problem: Any, clock: Deadline) -> Any:
    """For a makespan on devices that run one op at a time, the segments' bound computing in a child process beside
    the solve when a core is free, else in this process for a small share of the time
    (:func:`~placement_dsl.cpsat_segments.beside`, for :func:`_closed_form_bound`), else ``None``."""
    if _RUNNING.get() is not None or not isinstance(problem, Problem):  # a solve inside a solve (a coarse or
        return None  # contracted model): the outer one's runs; not a problem: solve's checks say so
    if problem.cost_model().objective not in SINGLE_SAMPLE or execution(problem.cluster) == "invocations":
        return None
    left = clock.left() - RESERVE - 1.0  # the child starts in seconds (OR-Tools' import): short solves give it all
    until = time.monotonic() + max(SEGMENT_SHARE * left, min(left, SEGMENT_LEAST))
    if not math.isfinite(until):
        until = time.monotonic() + cpsat_segments.SECONDS
    share, most = SEGMENT_HERE
    running = cpsat_segments.beside(problem, until, min(most, share * left) if math.isfinite(left) else most)
    if running is not None:  # the closed forms now, inside the budget, not after the search has spent it
        running.closed = single_sample_bound(problem)[0]
    return running


def _solve(problem: Any, formulation: Any, solver: str, clock: Deadline, t0: float, gap: float, threads: int,
           warm_start: Any, log_path: Any, method: str, options: dict[str, Any]) -> Result:
    """:func:`solve` once its arguments are checked."""
    if solver == CPSAT:
        return _solve_cpsat(problem, formulation, clock, t0, gap, threads, warm_start, log_path, method, options)
    form = get(formulation, problem)
    options = validate(f"formulation {form.name!r}", form.options, options)
    if form.kind is Kind.RELAXATION:
        raise SpecError(f"solve: {form.name!r} is a relaxation; its optimum is a lower bound, not a placement. "
                        "Use certify(problem, levels=...) or `placement-dsl bounds` for bounds")
    reason = form.accepts(problem)
    if reason:
        raise SpecError(reason)
    spec = _start_spec(problem, warm_start)
    if _large(problem, form, spec, clock):
        spec = AUTO
    start, start_eval, refusal, start_bound, warm_start, unfinished = _warm_start(problem, spec, clock)
    stop = _Stop(problem, form, method, solver, warm_start, start, start_eval, refusal, t0)
    stop.start_bound, stop.unfinished = start_bound, unfinished
    heavy = _heavy(problem, form, spec, clock)  # the model leaves little time to search: the start goes on first
    if heavy or _continues(problem, form, spec, clock):  # Tarnawski's latency: the local search first, whatever the model's size
        stop = _continued(stop, clock, (IMPROVE_SHARE if heavy else CONTINUE_SHARE) * (clock.left() - RESERVE))
        start, start_eval, refusal, warm_start = stop.start, stop.start_eval, stop.refusal, stop.warm_start
    if clock.expired(MIN_SEARCH) and not options:  # prepare may run a heuristic of its own (a horizon)
        return stop.result(f"budget spent before the model build ({clock.left():.1f} s left, the warm start took "
                           f"{time.perf_counter() - t0:.1f} s)")
    plan = form.prepare(problem, None if refusal else start, None if refusal else start_eval, gap, options)
    plan.info["label"] = _start_label(warm_start)
    t_start = time.perf_counter() - t0
    if clock.expired(MIN_SEARCH):
        return stop.result(f"budget spent before the model build ({clock.left():.1f} s left, the warm start took "
                           f"{t_start:.1f} s)")
    try:
        check_fits(plan.problem, form, clock, clock.left() - RESERVE)
    except BudgetSpent as err:  # the model cannot be built and searched in time: the heuristics get the rest
        stop.floor = _run_paths_floor(problem, clock)  # the bound the model's run flows would have carried
        return _heuristics_instead(stop, spec, clock).result(str(err))
    try:
        compiled = compile(plan.problem, form, deadline=clock)
    except BudgetSpent as err:
        return stop.result(str(err))
    t_compile = time.perf_counter() - t0 - t_start
    passed = start is not None and not refusal and plan.pass_start
    values = compiled.varmap.values(start) if passed else None
    if clock.expired(RESERVE + 0.1 + EXTRACTION * t_compile):
        return stop.result(f"budget spent by the model build ({t_compile:.1f} s, {clock.left():.1f} s left): the "
                           "model's hand-off to the solver takes about as long and cannot be stopped")
    cutoff = None if plan.cutoff is None else plan.cutoff / compiled.objective_scale
    opts = SolveOptions(time_limit=max(clock.left() - RESERVE, 0.1), gap=gap, threads=threads, log_path=log_path,
                        cutoff=cutoff, deadline=clock.at - RESERVE)
    with scaled(compiled.objective_scale):  # progress reports in the problem's units
        outcome = solve_model(compiled.model, solver, opts, start=values)
    result = _certify(compiled, outcome, method, solver, gap, plan.cutoff)
    _record_start(result, start_eval, refusal, passed, outcome, warm_start)
    form.finish(result, plan)
    _final_check(problem, result, form)
    _no_worse_than_start(result, start, start_eval, refusal, warm_start)
    if result.status.is_ok and result.status is not Status.OPTIMAL:
        stop.known_bound(result)  # a search stopped early may have proved less than a closed form
    result.timings = Seconds(build=t_compile + outcome.timings.build, start=t_start,
                             handoff=outcome.timings.handoff, solve=outcome.timings.solve,
                             total=time.perf_counter() - t0)
    return result


def _solve_cpsat(problem: Any, formulation: Any, clock: Deadline, t0: float, gap: float, threads: int,
                 warm_start: Any, log_path: Any, method: str, options: Mapping[str, Any]) -> Result:
    """``solver="cpsat"``: the makespan problem as CP-SAT's interval model (:func:`placement_dsl.cpsat.solve_model`),
    with this module's start, deadline and checks."""
    cpsat.check_terms(problem)
    if not cpsat.available():
        raise SolverUnavailableError("solver 'cpsat' needs OR-Tools: pip install placement_dsl[cpsat]")
    form = get(formulation, problem)
    if form is not get("schedule"):
        raise SpecError(f"solver 'cpsat' solves the makespan as its own interval model; formulation {form.name!r} "
                        "is not it (give formulation='auto' or 'schedule')")
    if options:
        raise SpecError(f"solver 'cpsat' takes no formulation options; got {sorted(options)} (windows is an option "
                        "of the 'chain' formulation)")
    label = CPSAT if method == "ip" else method  # the default label names the backend
    start, start_eval, refusal, start_bound, warm_start, unfinished = _warm_start(
        problem, _start_spec(problem, warm_start), clock)
    stop = _Stop(problem, form, label, CPSAT, warm_start, start, start_eval, refusal, t0)
    stop.start_bound, stop.unfinished = start_bound, unfinished
    t_start = time.perf_counter() - t0
    if clock.expired(MIN_SEARCH + RESERVE):
        result = stop.result(f"budget spent before the CP-SAT search ({clock.left():.1f} s left, the warm start took "
                             f"{t_start:.1f} s)")
    else:
        result = cpsat.solve_model(problem, start, refusal, clock.at - RESERVE, gap, threads,
                                   None if log_path is None else str(log_path))
        result.method = label
        if result.found_by == "warm start":
            result.found_by = _start_label(warm_start)
        _final_check(problem, result, form)
        if result.status.is_ok and result.status is not Status.OPTIMAL:
            stop.known_bound(result)
        result.timings = Seconds(build=result.timings.build, start=t_start, solve=result.timings.solve,
                                 total=time.perf_counter() - t0)
    result.formulation = CPSAT
    return result


def _clock(time_limit: Any, budget: Any, deadline: Deadline | None) -> Deadline:
    """The call's deadline: ``time_limit`` and ``budget`` (one meaning: the whole call) from now, and the caller's."""
    limit = seconds(time_limit, "time_limit")
    if budget is not None:
        limit = min(limit, seconds(budget, "budget"))
    return Deadline(limit) if deadline is None else deadline.within(limit)


def _options(options: Any, windows: Any) -> dict[str, Any]:
    """The formulation's options, with the deprecated ``windows=`` keyword moved into them (warned)."""
    if options is not None and not isinstance(options, Mapping):
        raise SpecError(f"options {options!r}: give a mapping of the formulation's option names to values")
    found = dict(options or {})
    if windows is not None:
        keyword("solve", "windows", "options={'windows': ...}", stacklevel=4)
        if not isinstance(windows, bool):
            raise SpecError(f"windows {windows!r}: give True, False or None")
        found.setdefault("windows", windows)
    return found


def _check_arguments(gap: Any, threads: Any, warm_start: Any, **names: Any) -> None:
    """Every other public input of :func:`solve`, refused with its name and value."""
    for name, value in names.items():
        kinds = {"solver": (str,), "method": (str,), "log_path": (str, Path, type(None)),
                 "formulation": (str, Formulation)}[name]
        if not isinstance(value, kinds):
            raise SpecError(f"{name} {value!r}: give a {' or '.join(k.__name__ for k in kinds if k is not type(None))}"
                            f"{' or None' if type(None) in kinds else ''}, not a {type(value).__name__}")
    if isinstance(gap, bool) or not isinstance(gap, numbers.Real) or not 0 <= gap < 1:
        raise SpecError(f"gap {gap!r}: give a relative gap in [0, 1)")
    if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1:
        raise SpecError(f"threads {threads!r}: give a whole number of solver threads, 1 or more")
    if warm_start is not None and not isinstance(warm_start, (str, Path, Placement, Mapping)):
        raise SpecError(f"warm_start {warm_start!r}: give a heuristic name, 'auto', a Placement, a mapping of op to "
                        f"device names or a placement file, not a {type(warm_start).__name__}")


SEARCHES = {"latency": "latency-lns", "makespan": "makespan-lns"}  # by the start's goal (placement_dsl.starts.goal)
"""Per single-sample objective, the search a solve whose model is too large runs after the improving heuristic: a
coarse solve, then LNS over windows of the schedule (:mod:`placement_dsl.search.anytime`, a registered method)."""
IMPROVE_SHARE = 0.3  # of the time left when the model is too large, for the improving heuristic; the search gets the rest
RERUN = 0.5  # of that share, for the searches the start's small share cut short (run again to their end, if they fit)
MIN_LNS = 3.0  # seconds below which the search is not started


HEAVY = 0.35  # of the time left, a single-sample model's estimated build above which the start is continued first


def _heavy(problem: Any, form: Formulation, spec: Any, clock: Deadline) -> bool:
    """Whether an ``"auto"`` start of a single-sample problem should be continued before its model is built: the
    model fits the time left but its build takes more than :data:`HEAVY` of it (the search after it would rarely
    improve the start; gnmt's 96 layers: a 23 s build of 55 s left, 231.9 kept where the local search continued
    reaches 225.6)."""
    if spec != AUTO or problem.cost_model().objective not in SINGLE_SAMPLE:
        return False
    need, left = build_seconds(problem, form), clock.left() - RESERVE
    return HEAVY * left < need <= left - MIN_SEARCH


CONTINUE_SHARE = 0.15  # of the time left, for the latency local search from an "auto" start before any model is built


def _continues(problem: Any, form: Formulation, spec: Any, clock: Deadline) -> bool:
    """Whether an ``"auto"`` start of Tarnawski's latency (accelerators running invocations) is continued by the
    latency local search for :data:`CONTINUE_SHARE` of the time before its model is built, however small the
    model: the IP rarely improves a start the local search can (gnmt at 300 s: the IP kept the start's 231.9 for
    260 s and proved 225.4; the local search reaches the paper's 225.6 within 20 s). A model too large for the
    time left is not built, and its start is continued then (:func:`_heuristics_instead`)."""
    if spec != AUTO or problem.cost_model().objective not in SINGLE_SAMPLE or goal(problem) != "latency":
        return False
    try:
        check_fits(problem, form, clock, clock.left() - RESERVE)
    except BudgetSpent:
        return False
    return True


def _continued(stop: _Stop, clock: Deadline, seconds: float) -> _Stop:
    """``stop`` with its start continued by the objective's improving method for ``seconds`` when that is better."""
    current = Start(stop.start, stop.start_eval, stop.refusal, stop.start_bound,
                    str(stop.warm_start).removeprefix(f"{AUTO}: "))
    found = improve(stop.problem, current, seconds, seed=1)
    if not found.usable or found.placement is stop.start:
        return stop
    better = _Stop(stop.problem, stop.form, stop.method, stop.solver, f"{AUTO}: {found.method}", found.placement,
                   found.evaluation, "", stop.t0)
    better.start_bound = stop.start_bound
    return better


def _heuristics_instead(stop: _Stop, spec: Any, clock: Deadline) -> _Stop:
    """A model sized too large for the budget is not built; with an ``"auto"`` start, what is left of the budget
    (all but :data:`RESERVE`) goes to the objective's improving method from the start (:data:`IMPROVE_SHARE` of it,
    :func:`placement_dsl.starts.improve`, after the searches the start's small share cut short run again in
    :data:`RERUN` of it; the objective's heuristics again when no start was found), then to the
    objective's search (:data:`SEARCHES`: a coarse solve and LNS on contracted models), and the best start is the
    answer. Other starts were asked for by name: they stand."""
    if spec != AUTO or clock.left() <= RESERVE + MIN_SEARCH:
        return stop
    current = Start(stop.start, stop.start_eval, stop.refusal, stop.start_bound,
                    str(stop.warm_start).removeprefix(f"{AUTO}: "))
    method = SEARCHES.get(goal(stop.problem))
    share = IMPROVE_SHARE if method is not None else 1.0
    until = time.perf_counter() + share * (clock.left() - RESERVE)
    if current.usable and stop.unfinished:  # the start's share stopped searches that may beat it (GETF on GPT-3
        raced = race(stop.problem, list(stop.unfinished), RERUN * (until - time.perf_counter()), even=False)[0]  # 330M:
        # 13-20 s; an even share of the rerun, 8 s among five searches at 300 s, stopped it again: 144.75 > 143.60)
        if raced.usable and raced.objective < current.objective:
            current = raced
    seconds = until - time.perf_counter()
    found = improve(stop.problem, current, seconds, seed=1) if current.usable else \
        resolve(stop.problem, AUTO, deadline=Deadline(seconds), share=1.0, cap=math.inf)
    if found.usable and (not current.usable or found.objective < current.objective):
        current = found
    phases = {"start": time.perf_counter() - stop.t0}
    if method is not None and current.usable and clock.left() - RESERVE >= MIN_LNS:
        current = improve(stop.problem, current, clock.left() - RESERVE, method=method)
        phases.update(coarse=current.info.get("coarse_seconds", 0.0), lns=current.info.get("lns_seconds", 0.0))
    stop.phases = phases
    if not current.usable or current.placement is stop.start:
        return stop
    better = _Stop(stop.problem, stop.form, stop.method, stop.solver, f"{AUTO}: {current.method}", current.placement,
                   current.evaluation, "", stop.t0)
    better.start_bound = current.bound if stop.start_bound is None or current.bound is None else \
        max(current.bound, stop.start_bound)
    better.phases, better.floor = phases, stop.floor
    return better


class _Stop:
    """The answer of a solve that the budget stops before (or while) its model is built: the start, if any,
    with status time limit and the best bound known without a model."""

    def __init__(self, problem: Any, form: Formulation, method: str, solver: str, warm_start: Any,
                 start: Placement | None, start_eval: Evaluation | None, refusal: str, t0: float):
        self.problem, self.form, self.method, self.solver = problem, form, method, solver
        self.warm_start, self.start, self.start_eval, self.refusal, self.t0 = warm_start, start, start_eval, refusal, t0
        self.start_bound: float | None = None  # a bound the start's heuristic proved over the problem's class
        self.phases: dict[str, float] = {}  # seconds of the start, the coarse solve and the LNS, when they ran
        self.unfinished: tuple[str, ...] = ()  # searches of an "auto" start its small share cut short
        self.floor: float | None = None  # a bound over the problem's placements proved within the budget (run paths)

    def result(self, why: str) -> Result:
        usable = self.start is not None and not self.refusal and self.start_eval is not None
        placement, ev = (self.start, self.start_eval) if usable else self._fallback()
        status = Status.TIME_LIMIT_FEASIBLE if placement is not None else Status.TIME_LIMIT_NO_SOLUTION
        answer = ("; the answer is the warm start" if usable else
                  f"; the answer is the {placement.source} fallback split" if placement is not None else "")
        notes = [m for m in (self.refusal, why + answer) if m]
        result = Result(status=status, placement=placement,
                        objective=None if ev is None else ev.objective, bound=None, method=self.method,
                        solver=self.solver, formulation=self.form.name, evaluation=ev, message="; ".join(notes),
                        bound_scope=self.form.placement_class(self.problem))
        result.start_objective = None if self.start_eval is None else self.start_eval.objective
        result.start_accepted = False if self.refusal else None  # no solver was asked
        result.found_by = (_start_label(self.warm_start) if usable else
                           f"fallback ({placement.source})" if placement is not None else "")
        self.known_bound(result)
        total = time.perf_counter() - self.t0
        result.timings = Seconds(start=self.phases.get("start", total), total=total,
                                 coarse=self.phases.get("coarse", 0.0), lns=self.phases.get("lns", 0.0))
        return result

    def _fallback(self) -> tuple[Placement | None, Evaluation | None]:
        """Without a usable start, the best of the splits built in O(n + m) (greedy, one device, the
        work-balanced slicing), when it is valid for the problem: a stopped solve still answers."""
        try:
            found = fallbacks.fallback("fallback", self.problem.graph, self.problem.cluster,
                                            self.problem.cost_model(), phase="no model")
        except PlacementError:
            return None, None
        placement = Placement(self.problem.graph, self.problem.cluster, found.placement.assign,
                              source=found.info.get("fallback", "fallback"))
        ev = self.problem.evaluate(placement)
        if not ev.valid or self.problem.violations(placement):
            return None, None
        return placement, ev

    def known_bound(self, result: Result) -> None:
        """Raise a missing or weaker bound to the best one known without a model: the start heuristic's proof
        over the problem's class, else a closed form over every placement (Lemma 3.3 for max load and
        makespan, the critical path for latency)."""
        bound, source = self.start_bound, self._bound_source()
        if bound is None:
            bound = _closed_form_bound(self.problem)
        elif (closed := max_load_bound(self.problem)) is not None and closed > bound:  # a heuristic stopped early
            bound, source = closed, "by a closed form"  # proves less than the closed forms
        if self.floor is not None:
            bound = self.floor if bound is None else max(bound, self.floor)
        if bound is None or (result.bound is not None and result.bound >= bound):
            return
        result.bound = bound if result.objective is None else min(bound, result.objective)
        source = "by the run-paths DP" if bound == self.floor else source
        result.message = "; ".join(m for m in (result.message, f"bound {bound:.6g} {source}") if m)

    def _bound_source(self) -> str:
        return "proven by the warm start's heuristic" if self.start_bound is not None else "by a closed form"


FLOOR_SHARE, FLOOR_LEAST, FLOOR_MOST = 0.1, 12.0, 30.0  # of the time left, the run-paths floor's clock (and its limits)


def _run_paths_floor(problem: Any, clock: Deadline) -> float | None:
    """Tarnawski's latency whose model is not built: the run-paths DP (:func:`~.formulations.latency.run_paths_floor`)
    within :data:`FLOOR_SHARE` of the time left (at least :data:`FLOOR_LEAST` s, at most a third of it and
    :data:`FLOOR_MOST` s), else ``None``."""
    if problem.cost_model().objective not in SINGLE_SAMPLE or execution(problem.cluster) != "invocations":
        return None
    left = clock.left() - RESERVE
    return run_paths_floor(problem, clock.within(min(max(FLOOR_SHARE * left, FLOOR_LEAST), left / 3, FLOOR_MOST)))


def _closed_form_bound(problem: Any) -> float | None:
    """A lower bound over every placement that needs no model (``None`` where none is known for the objective)."""
    objective = problem.cost_model().objective
    if objective is Objective.MAX_LOAD:
        return max_load_bound(problem)
    if objective in SINGLE_SAMPLE:  # paths with route costs, work, segments: each by how the devices run
        running = _RUNNING.get()
        mine = running is not None and running.problem is problem
        found = running.value(running.until + 1.0) if mine else None
        closed = running.closed if mine and running.closed is not None else single_sample_bound(problem)[0]
        return max(closed, found or 0.0)
    return None


def _start_label(warm_start: Any) -> str:
    return f"warm start ({warm_start})" if isinstance(warm_start, str) and not Path(warm_start).suffix else "warm start"


def _record_start(result: Result, start_eval: Evaluation | None, refusal: str, passed: bool,
                  outcome: SolverOutcome, warm_start: Any) -> None:
    """The start's objective and fate, and who found the answer (the solver, or the start it did not improve)."""
    if start_eval is None and not refusal:
        result.found_by = "solver" if result.objective is not None else ""
        return
    result.start_objective = None if start_eval is None else start_eval.objective
    result.start_accepted = outcome.start_accepted if passed else (False if refusal else None)
    if refusal:
        result.message = "; ".join(m for m in (refusal, result.message) if m)
    if result.objective is None:
        return
    kept = passed and start_eval is not None and result.objective >= start_eval.objective * (1 - MATCH_TOL)
    result.found_by = _start_label(warm_start) if kept else "solver"


def _no_worse_than_start(result: Result, start: Placement | None, start_eval: Evaluation | None, refusal: str,
                         warm_start: Any) -> None:
    """A usable start better by the cost model than the solver's answer (or than none) is the answer: the solver's
    own guard compares the model's objective, which a start it was not given, or a model value that is not tight,
    escapes; the solver's bound stays."""
    if start is None or refusal or start_eval is None or not start_eval.valid or \
            result.status in (Status.INFEASIBLE, Status.UNBOUNDED):  # a claim about the model: reported as it is
        return
    if result.objective is not None and result.objective <= start_eval.objective * (1 + MATCH_TOL):
        return
    if result.objective is not None:
        note = (f"the solver's answer {result.objective:.10g} is worse than the start {start_eval.objective:.10g}; "
                "the start is the answer")
        result.message = "; ".join(m for m in (result.message, note) if m)
    result.placement, result.objective, result.evaluation = start, start_eval.objective, start_eval
    result.found_by = _start_label(warm_start)
    if result.status is Status.TIME_LIMIT_NO_SOLUTION:
        result.status = Status.TIME_LIMIT_FEASIBLE
    if result.bound is not None:
        result.bound = min(result.bound, start_eval.objective)


# ---------------------------------------------------------------------------- warm start
SINGLE_SAMPLE = (Objective.LATENCY, Objective.MAKESPAN)  # objectives whose solve starts from "auto" by default


def _start_spec(problem: Any, warm_start: Any) -> Any:
    """What the start resolver is asked for: ``None`` means ``"auto"`` for the single-sample objectives
    (latency, makespan), whose models are hard to start without a good incumbent, and no start otherwise."""
    if warm_start is None and problem.cost_model().objective in SINGLE_SAMPLE:
        return AUTO
    return warm_start


LARGE = 0.1  # of the time left, a model's estimated build above which a solve with no start asked for makes one


def _large(problem: Any, form: Formulation, spec: Any, clock: Deadline) -> bool:
    """Whether a solve with no start asked for starts from ``"auto"`` all the same: its model fits the time left, but
    its estimated build takes more than :data:`LARGE` of it. The solver rarely finds an incumbent of such a model in
    the time left (the throughput IP of a ResNet-152 of 208 ops onto 16 stages: none in 60 s). A model too large to
    be built keeps the fallback: on 5,000 ops and more the heuristics' race overran its share under load (20,000
    ops: 50 s past a 60 s limit)."""
    if spec is not None:
        return False
    need, left = build_seconds(problem, form), clock.left() - RESERVE
    return LARGE * left < need <= left - MIN_SEARCH


def _warm_start(problem: Any, warm_start: Any, clock: Deadline | None = None
                ) -> tuple[Placement | None, Evaluation | None, str, float | None, Any, tuple[str, ...]]:
    """The start placement, its evaluation, why it is refused ('' if it may be used), its class bound
    (:func:`placement_dsl.starts.resolve`, leaving :data:`~placement_dsl.sizing.MIN_SEARCH` of ``clock``),
    the start's name in messages (``"auto: <method>"`` for the heuristic ``"auto"`` picked) and the searches
    ``"auto"``'s share cut short."""
    found = resolve(problem, warm_start, deadline=clock, keep=MIN_SEARCH)
    label = f"{AUTO}: {found.method}" if warm_start == AUTO and found.usable else warm_start
    return found.placement, found.evaluation, found.refusal, found.bound, label, found.unfinished


# ---------------------------------------------------------------------------- certificate
def _certify(compiled: Any, outcome: SolverOutcome, method: str, solver: str, gap: float,
             cutoff: float | None = None) -> Result:
    """Read the placement back, re-evaluate it, check agreement, and assemble the result."""
    scale = compiled.objective_scale
    notes = [m for m in (outcome.message,) if m]
    placement = ev = objective = None
    if outcome.has_solution:
        placement = compiled.varmap.placement(compiled.model)
        ev = compiled.problem.evaluate(placement)
        objective = ev.objective
        _check_agreement(compiled, outcome, ev, solver, notes, gap, cutoff)
    bound = None if outcome.bound is None else outcome.bound * scale
    if bound is not None and objective is not None:
        bound = min(bound, objective)
    form = compiled.formulation
    return Result(status=outcome.status, placement=placement, objective=objective, bound=bound, method=method,
                  solver=solver, formulation=form.name, log_path=outcome.log_path, evaluation=ev,
                  message="; ".join(notes), bound_scope=form.placement_class(compiled.problem))


def _final_check(problem: Any, result: Result, form: Formulation) -> None:
    """Every answer passes the problem's full validity check (pins, colocation, ... included)."""
    if result.placement is None:
        return
    violations = problem.violations(result.placement)
    if violations:
        raise EvaluationMismatchError(f"formulation {form.name!r}: the answer found by {result.found_by or 'the solver'} "
                                      f"is invalid for the problem ({'; '.join(violations[:3])}); "
                                      "the formulation misses a constraint")
    if result.bound is not None and result.objective is not None:
        result.bound = min(result.bound, result.objective)


def check_agreement(compiled: Any, outcome: SolverOutcome, ev: Evaluation, solver: str, notes: list[str],
                     gap: float, cutoff: float | None = None) -> None:
    """Raise when the solver's objective and the cost model's disagree in a way that signals a bug.

    A solver objective *below* the cost model's means the model under-counts (e.g. a big-M that
    let schedules overlap): always an error. An incumbent whose objective variable is not tight
    (solver *above* the cost model) is a valid placement: the evaluator's value is kept and the
    difference noted. That happens under a time limit and also at "optimal" within a relative gap
    tolerance (a solver may stop with slack in the max-load variable), and for an answer above the
    solver's ``cutoff`` (cost-model units), which "optimal" does not claim: it proves only that
    nothing lies below the cutoff. Beyond that, an "optimal" claim above the cost model is an error.
    """
    claimed = outcome.objective * compiled.objective_scale
    tol = MATCH_TOL * max(abs(ev.objective), abs(claimed), 1e-9)
    name = f"{compiled.formulation.name!r} with {solver!r}"
    if not ev.valid:
        raise EvaluationMismatchError(f"{name}: the solver's placement is invalid for the cost model "
                                      f"({'; '.join(v.message for v in ev.violations[:3])}); "
                                      "the formulation misses a constraint")
    if not math.isfinite(ev.objective):  # e.g. a tensor over an unreachable route: the model priced it finitely
        raise EvaluationMismatchError(f"{name}: solver objective {claimed:.10g} but the cost model gives "
                                      f"{ev.objective} for its placement; the formulation under-counts it")
    if abs(claimed - ev.objective) <= tol:
        return
    slack_ok = outcome.status is Status.TIME_LIMIT_FEASIBLE or (outcome.status is Status.OPTIMAL and (
        claimed - ev.objective <= gap * claimed + tol or (cutoff is not None and claimed > cutoff)))
    if claimed > ev.objective and slack_ok:
        notes.append(f"incumbent objective {claimed:.10g} was not tight; the cost model gives {ev.objective:.10g}")
        return
    raise EvaluationMismatchError(f"{name}: solver objective {claimed:.10g} (model {outcome.objective:.10g} x scale "
                                  f"{compiled.objective_scale:.6g}) but the cost model gives {ev.objective:.10g}")


_check_agreement = check_agreement  # the former name, kept for one release


__all__ = ["Plan", "solve"]
