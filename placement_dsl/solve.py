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
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import cpsat, cpsat_segments
from .beyond import elsewhere, reported, widened
from .bounds.segments import reused
from .bounds.single_sample import SECONDS as SECONDS_CLOSED
from .bounds.single_sample import single_sample_bound
from .deadline import BudgetSpent, Deadline, call_within, seconds
from .deprecated import keyword
from .errors import EvaluationMismatchError, SolverUnavailableError, SpecError, refuse_spawned_rerun
from .evaluate import Evaluation, execution
from .formulations import Formulation, Kind, Plan, get
from .formulations.base import unwritten
from .options import validate
from .placement import Placement
from .problem import Problem
from .progress import scaled
from .result import Result, Seconds
from .sizing import MIN_SEARCH, check_fits
from .solvers import SolveOptions, SolverOutcome, Status, known
from .starts import AUTO, outside
from .stopped import (
    MATCH_TOL,
    RESERVE,
    RUNNING,
    SINGLE_SAMPLE,
    Stop,
    closed_form_source,
    continued_first,
    first_floor,
    first_start,
    floor,
    held_split,
    heuristics_instead,
    search_per_build,
    start_label,
    start_share,
    start_spec,
)

CPSAT = "cpsat"  # the solver name of CP-SAT's interval model (placement_dsl.cpsat), a backend of solve()
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
        models (:data:`placement_dsl.stopped.SEARCHES`), then restarts to the deadline
        (:func:`placement_dsl.stopped.tail`), whose phases ``timings`` reports (``coarse``, ``lns``, ``restarts``).
    gap
        Relative MIP gap at which to stop (and, with windows, the certificate's target gap).
    threads
        Solver threads.
    warm_start
        A heuristic method name (``"dp"``, ``"slicegraph"``, ...), ``"auto"`` (the best of the
        heuristics that optimize the problem's objective, in a small share of the budget), a
        :class:`Placement`, a mapping ``{op name: device name}``, or the path of a placement file
        (:func:`placement_dsl.starts.resolve`). ``None``: ``"auto"`` for every objective, in its small
        share, or a larger one for a throughput or training model whose estimated build takes more than
        :data:`~placement_dsl.stopped.LARGE` of the time left (:func:`~placement_dsl.stopped.start_share`);
        ``"none"``: no start, the solver searches from nothing.
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
        Status, placement, cost-model objective, bound and its class, gap, timings and the start's fate; for a
        single-sample problem its terms restrict to a class, what lies beyond it (``family``: the better placement
        outside the class, a bound over every placement), found in :data:`FAMILY_SHARE` of the time.
    """
    refuse_spawned_rerun("solve")
    t0 = time.perf_counter()
    clock = _clock(time_limit, budget, deadline)
    options = _options(options, windows)
    _check_arguments(gap, threads, warm_start, solver=solver, method=method, log_path=log_path,
                     formulation=formulation)
    if solver != CPSAT:  # refused before any start or bound work (a start proven optimal builds no model)
        known(solver)
    kept = _family_seconds(problem, clock)  # what the answer learns beyond its class, after the search
    inner = clock.within(clock.left() - kept) if kept else clock
    running = _segment_bound(problem, inner)
    token = RUNNING.set(running) if running is not None else None
    try:
        with elsewhere(), outside() as offered:  # a solve inside this one (a coarse model, a window) reports no
            # family of its own; the start's races keep what the class refuses for this one's
            result = _solve(problem, formulation, solver, inner, t0, gap, threads, warm_start, log_path, method,
                            options)
        if result.bound_scope is not None:  # its class by name: which device order a DAG order follows, q, ...
            result.bound_label = problem.class_label(result.bound_scope)
        if kept:
            _widen(problem, result, clock.within(kept), t0, offered)
        if running is not None and running.note:
            result.message = "; ".join(m for m in (result.message, running.note) if m)
        return result
    finally:
        if running is not None:
            RUNNING.reset(token)
            running.close()


FLOOR_SHARE, FLOOR_MOST = 0.1, 10.0  # of the time left, the clock of the formulation's floor (with_floor), and its most
FAMILY_SHARE, FAMILY_MOST = 0.1, 5.0  # of the call's time, what a restricted single-sample solve keeps to report its
# family (certify gives the family's heuristics a quarter of its heuristics' share: 1.9 s of 30 s, 5 s at most)


def _family_seconds(problem: Any, clock: Deadline) -> float:
    """The seconds a solve keeps for its answer's family (:func:`_widen`): a share of its time where terms restrict a
    single-sample problem to a class (``Contiguous``, ``Subgraphs``: a user who asked for contiguity sees what it cost,
    one who did not sees that the answer is restricted), none otherwise or inside a solve or a certification
    (:func:`~placement_dsl.beyond.elsewhere`)."""
    if not reported() or not isinstance(problem, Problem) or problem.unrestricted() is None or \
            problem.cost_model().objective not in SINGLE_SAMPLE:
        return 0.0
    return min(FAMILY_SHARE * clock.left(), FAMILY_MOST)


def _widen(problem: Problem, result: Result, clock: Deadline, t0: float, offered: list[tuple]) -> None:
    """``result``'s family beyond its class, as a certificate reports it (:func:`~placement_dsl.beyond.widened`: the
    placements the start's races scored and the class refused, ``offered``, the family's heuristics, the closed forms
    over every placement), within ``clock``."""
    began = time.perf_counter()
    answer = (math.inf if result.objective is None else result.objective, result.placement, result.found_by or "solve")
    result.family = widened(problem, answer, clock, lambda left: closed_form_source(problem, left), offered)
    result.timings = replace(result.timings, family=time.perf_counter() - began, total=time.perf_counter() - t0)

SEGMENT_SHARE = 0.5  # of a single-sample solve's time, the most its segment bound's child process runs beside it
SEGMENT_LEAST = 20.0  # seconds it may run however short that share (within the solve's time)
SEGMENT_HERE = (0.15, 45.0)  # with no core free for the child: the share of the time, and the most seconds, in-process
# (GPT-3 330M inter-server's 17 pair LPs of its attention window take 20-35 s at load 8-10: 30 s left the bound at
# 183.3 where they prove 198.6, and its window search had not improved the start in the 150 s it had)
LPS_ALONE = 0.35  # that share where the LPs run alone (CP-SAT's segments not worth a child after them): a cap, not a
# reservation (a 500-op GPT's LPs end in 2 s). 60 s solves of 5,057-op GPTs at load 8-11, 0.15 against 0.35 (answer /
# bound): inter-server seed 11 25.932 / 22.155 against 25.918 / 24.766 (the LPs done in 14.4 s), seed 12 26.016 /
# 22.491 against 26.014 / 24.748, intra-server seed 11 17.957 / 17.427 against 17.960 / 17.428 (unfinished either
# way). With CP-SAT's child after the LPs the larger share cost MOIRAI's GoogLeNet 5 s of a 20 s search (1.373 to
# 1.420) for no better bound, so there the share stays


def _segment_bound(problem: Any, clock: Deadline) -> Any:
    """For a makespan on devices that run one op at a time, the segments' bound computing in a child process beside
    the solve when a core is free, else in this process for a small share of the time
    (:func:`~placement_dsl.cpsat_segments.beside`, for :func:`~placement_dsl.stopped.closed_form_bound`), else ``None``."""
    if RUNNING.get() is not None or not isinstance(problem, Problem):  # a solve inside a solve (a coarse or
        return None  # contracted model): the outer one's runs; not a problem: solve's checks say so
    if problem.cost_model().objective not in SINGLE_SAMPLE or execution(problem.cluster) == "invocations":
        return None
    left = clock.left() - RESERVE - 1.0  # the child starts in seconds (OR-Tools' import): short solves give it all
    until = time.monotonic() + max(SEGMENT_SHARE * left, min(left, SEGMENT_LEAST))
    if not math.isfinite(until):
        until = time.monotonic() + cpsat_segments.SECONDS
    share, most = SEGMENT_HERE

    def capped(part: float) -> float:  # ``part`` of the time left, at most ``most`` seconds
        return min(most, part * left) if math.isfinite(left) else most

    with reused():  # the closed forms ask again for what the in-process bound priced
        running = cpsat_segments.beside(problem, until, capped(share), capped(LPS_ALONE))
        if running is not None:  # the closed forms now, inside the budget, not after the search has spent it; held
            # to the in-process share too (by their own 3 s clock, 4.2 s of a 10 s solve of 2,000 ops at load 7)
            running.closed = single_sample_bound(problem, Deadline(min(SECONDS_CLOSED, max(share * left, 0.0)))
                                                 if math.isfinite(left) else None)
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
    if reason:  # 'auto' chose a formulation that refuses: say so when none writes the objective (and what does)
        why = unwritten(problem)
        raise SpecError(reason if why is None else why if formulation == "auto" else f"{reason}; {why}")
    spec = start_spec(problem, warm_start)
    share = start_share(problem, form, warm_start, clock)  # a large model's start with none asked for: a larger share
    held = held_split(problem, clock)  # an answer in hand before anything expensive runs
    early = first_floor(problem, share, clock)  # a model too large to build: the host's share of memory first
    start, start_eval, refusal, start_bound, warm_start, unfinished, others = first_start(problem, spec, clock, share)
    stop = Stop(problem, form, method, solver, warm_start, start, start_eval, refusal, t0)
    stop.start_bound, stop.unfinished, stop.floor, stop.others = start_bound, unfinished, early, others
    stop.clock, stop.held = clock, held
    stop = continued_first(stop, spec, clock)
    start, start_eval, refusal, warm_start = stop.start, stop.start_eval, stop.refusal, stop.warm_start
    if clock.expired(MIN_SEARCH) and not options:  # prepare may run a heuristic of its own (a horizon)
        return stop.result(f"budget spent before the model build ({clock.left():.1f} s left, the warm start took "
                           f"{time.perf_counter() - t0:.1f} s)")
    try:  # without a valid start a horizon comes from a heuristic of its own: 9.9 s of HEFT on 47,584 ops at load 4
        plan = call_within(clock, form.prepare, problem, None if refusal else start,
                           None if refusal else start_eval, gap, options) if start_eval is None or refusal or \
            not start_eval.valid else form.prepare(problem, start, start_eval, gap, options)
    except BudgetSpent as err:
        return stop.result(f"{err} (the model's preparation)")
    plan = form.with_floor(plan, clock.within(min(FLOOR_SHARE * max(clock.left() - RESERVE, 0.0), FLOOR_MOST)))
    plan.info["label"] = start_label(warm_start)
    t_start = time.perf_counter() - t0
    if early is None and plan.info.get("floor") is not None:
        stop.floor, stop.floor_source = plan.info["floor"], plan.info.get("floor_source")
    stop.price_start(clock, gap)  # the cut stages on the start, before the model: the floor of its answer's bound
    if stop.proves_start():  # nothing to search: the start meets the floor (within the gap)
        return stop.result("the start meets the floor proven before the model build; not built")
    if clock.expired(MIN_SEARCH):
        return stop.result(f"budget spent before the model build ({clock.left():.1f} s left, the warm start took "
                           f"{t_start:.1f} s)")
    try:
        check_fits(plan.problem, form, clock, clock.left() - RESERVE, search_per_build(plan.problem, spec))
    except BudgetSpent as err:  # the model cannot be built and searched in time: the heuristics get the rest
        if stop.floor is None:  # a bound the model would have carried (run paths, the host's share)
            stop.floor = floor(problem, clock)
        if stop.proves_start():
            return stop.result(f"{err}; the start meets the floor")
        return heuristics_instead(stop, spec, clock).result(str(err))
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
    answer = _answer(compiled, outcome)
    if answer is not None and not answer[1].valid:  # the solver's point meets the rows only within its tolerances,
        # or the formulation misses a constraint: neither the point nor its bound is an answer, nor the user's error
        result = heuristics_instead(stop, AUTO, clock).result(_discarded(compiled, solver, answer[1]))
        _final_check(problem, result, form)
        return result
    result = _certify(compiled, outcome, method, solver, gap, plan.cutoff, answer)
    _record_start(result, start_eval, refusal, passed, outcome, warm_start)
    form.finish(result, plan)
    result = stop.no_worse(result, outcome.message)  # the start answers a search that found nothing better
    _final_check(problem, result, form)
    if result.status.is_ok and result.status is not Status.OPTIMAL:
        stop.known_bound(result)  # a search stopped early may have proved less than a closed form
    result.timings = Seconds(build=t_compile + outcome.timings.build, start=t_start,
                             handoff=outcome.timings.handoff, solve=outcome.timings.solve,
                             total=time.perf_counter() - t0)
    return result


def compile(problem: Problem, form: Formulation, **kwargs: Any) -> Any:
    """:func:`placement_dsl.compile.compile`, imported (with Pyomo) by the first model build, not by a solve that
    answers before it."""
    from .compile import compile as build

    return build(problem, form, **kwargs)


def solve_model(model: Any, solver: str, options: SolveOptions, start: Any = None) -> SolverOutcome:
    """:func:`placement_dsl.solvers.solve_model`, imported (with the backends) by the first model handed off."""
    from .solvers import solve_model as run

    return run(model, solver, options, start=start)


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
    held = held_split(problem, clock)
    start, start_eval, refusal, start_bound, warm_start, unfinished, _ = first_start(
        problem, start_spec(problem, warm_start), clock)
    stop = Stop(problem, form, label, CPSAT, warm_start, start, start_eval, refusal, t0)
    stop.start_bound, stop.unfinished, stop.clock, stop.held = start_bound, unfinished, clock, held
    t_start = time.perf_counter() - t0
    if clock.expired(MIN_SEARCH + RESERVE):
        result = stop.result(f"budget spent before the CP-SAT search ({clock.left():.1f} s left, the warm start took "
                             f"{t_start:.1f} s)")
    else:
        result = cpsat.solve_model(problem, start, refusal, clock.at - RESERVE, gap, threads,
                                   None if log_path is None else str(log_path))
        result.method = label
        if result.found_by == "warm start":
            result.found_by = start_label(warm_start)
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
        raise SpecError(f"warm_start {warm_start!r}: give a heuristic name, 'auto', 'none', a Placement, a mapping of op "
                        f"to device names or a placement file, not a {type(warm_start).__name__}")


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
    result.found_by = start_label(warm_start) if kept else "solver"



# ---------------------------------------------------------------------------- certificate
def _answer(compiled: Any, outcome: SolverOutcome) -> tuple[Placement, Evaluation] | None:
    """The solver's placement read back and its evaluation by the cost model, or ``None`` without a solution."""
    if not outcome.has_solution:
        return None
    placement = compiled.varmap.placement(compiled.model)
    return placement, compiled.problem.evaluate(placement)


def _discarded(compiled: Any, solver: str, ev: Evaluation) -> str:
    """The warning of a solver answer that the cost model finds invalid (the answer and its bound are dropped)."""
    return (f"warning: {compiled.formulation.name!r} with {solver!r} answered a placement the cost model finds "
            f"invalid ({'; '.join(v.message for v in ev.violations[:3])}); it is discarded with the solver's bound "
            "(its rows held only within the solver's tolerances, or the formulation misses a constraint)")


def _certify(compiled: Any, outcome: SolverOutcome, method: str, solver: str, gap: float,
             cutoff: float | None = None, answer: tuple[Placement, Evaluation] | None = None) -> Result:
    """Read the placement back (unless ``answer`` is it), re-evaluate it, check agreement, and assemble the result."""
    scale = compiled.objective_scale
    notes = [m for m in (outcome.message,) if m]
    placement = ev = objective = None
    if outcome.has_solution:
        placement, ev = answer if answer is not None else _answer(compiled, outcome)
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
