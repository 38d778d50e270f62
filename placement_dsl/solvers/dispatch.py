"""Solver backends behind one call: :func:`solve_model` (re-exported by :mod:`placement_dsl.solvers`).

``"highs"`` and ``"scip"`` are native backends (bulk array hand-off, verified MIP starts,
streamed incumbents and bounds); any other name is a Pyomo solver (``"glpk"``, ``"gurobi"``,
``"appsi_highs"``, ...); the prefix ``"pyomo:"`` forces Pyomo's interface (``"pyomo:highs"``).
Every solve runs under the project's own wall-clock limit (:mod:`.guard`).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo
from pyomo.core.base.var import VarData

from ..errors import InfeasibleError, SolverUnavailableError
from . import guard, highs, pyomo_generic, scip
from .base import Capabilities, Native, SolveOptions, SolverOutcome, Status, Timings, classify
from .matrix import LinearModel, extract

__all__ = ["Backend", "available_solvers", "backend", "solve_model"]  # the results' names: the package (.base)

# Pyomo names probed when listing what is installed
PYOMO_CANDIDATES = ("appsi_highs", "scip_direct", "pyomo:highs", "gurobi_direct", "gurobi", "cplex", "cbc", "glpk",
                    "xpress")
START_TOL = 1e-6  # largest residual of a start that is still passed to the solver
CLAIM_TOL = 1e-6  # relative slack between a solver's claimed objective or bound and what its answer is worth
RETRY_SECONDS = 0.5  # least time left for solving again without a start the solver mishandled
MIN_HANDOFF = 0.05  # least time left to hand a model to the solver at all


@dataclass(frozen=True)
class Backend:
    """A solver by name: what it can do and the worker that runs it."""

    name: str
    capabilities: Capabilities
    make_worker: Callable[[pyo.ConcreteModel, LinearModel], Callable[..., None]]


NATIVE = {
    "highs": (highs.available, Backend("highs", highs.CAPABILITIES, lambda model, lm: highs.run)),
    "scip": (scip.available, Backend("scip", scip.CAPABILITIES, lambda model, lm: scip.run)),
}


def _pyomo_backend(name: str) -> Backend | None:
    pyomo_name = name.removeprefix("pyomo:")
    if pyomo_generic.factory(pyomo_name) is None:
        return None
    return Backend(name, pyomo_generic.CAPABILITIES,
                   lambda model, lm: pyomo_generic.PyomoWorker(pyomo_name, model, lm))


def available_solvers() -> list[str]:
    """Names of the solvers installed here (probed, not assumed)."""
    names = [n for n, (ok, _) in NATIVE.items() if ok()]
    return names + [n for n in PYOMO_CANDIDATES if _pyomo_backend(n) is not None]


def backend(solver: str) -> Backend:
    """The backend of ``solver``; :class:`SolverUnavailableError` when unknown or not installed."""
    if solver in NATIVE:
        ok, found = NATIVE[solver]
        if ok():
            return found
    else:
        found = _pyomo_backend(solver)
        if found is not None:
            return found
    raise SolverUnavailableError(
        f"solver {solver!r} is unknown or not installed; available here: {available_solvers()} "
        "(install the solver, or pass one of these names)")


def _prepare_start(lm: LinearModel, start: Mapping | None) -> tuple[np.ndarray | None, float | None, str]:
    """Start vector, its objective, and why it is refused ('' when it is fine)."""
    if start is None:
        return None, None, ""
    x0 = lm.vector(start)
    x0 = np.where(lm.integer, np.round(x0), x0)
    objective = lm.objective(x0)
    worst, where = lm.residual(x0)
    if worst > START_TOL * max(1.0, float(np.abs(x0).max(initial=0.0))):
        return x0, objective, f"start refused: it violates {where!r} by {worst:.3g}"
    return x0, objective, ""


def solve_model(model: pyo.ConcreteModel, solver: str, options: SolveOptions | None = None,
                start: Mapping[VarData, float] | Mapping[str, float] | None = None) -> SolverOutcome:
    """Solve a linear Pyomo model with one active minimize objective.

    Parameters
    ----------
    model
        The model; on return the solution's values are loaded into its variables when there is one.
    solver
        ``"highs"``, ``"scip"`` or a Pyomo solver name (see :func:`available_solvers`).
    options
        Time limit (enforced by the project), gap, threads, log file.
    start
        A value for every variable (a ``ComponentMap`` {var: value}, or {var name: value}):
        passed as a MIP start where the backend takes one, and in any case the answer is never
        worse than a feasible start.

    Examples
    --------
    >>> m = pyo.ConcreteModel(); m.x = pyo.Var([0, 1], within=pyo.Binary)
    >>> m.c = pyo.Constraint(expr=m.x[0] + m.x[1] >= 1); m.o = pyo.Objective(expr=3 * m.x[0] + 2 * m.x[1])
    >>> out = solve_model(m, "highs", SolveOptions(time_limit=5))
    >>> out.status, out.objective, m.x[1].value
    (<Status.OPTIMAL: 'optimal'>, 2.0, 1)
    """
    options = options or SolveOptions()
    chosen = backend(solver)
    t0 = time.perf_counter()
    try:
        lm = extract(model)
    except InfeasibleError as err:  # a row that constants alone violate: infeasible without a search
        return SolverOutcome(Status.INFEASIBLE, None, None, False, solver, Timings(build=time.perf_counter() - t0),
                             start_accepted=None if start is None else False, message=str(err))
    build = time.perf_counter() - t0
    x0, start_obj, refusal = _prepare_start(lm, start)
    if lm.n_cols == 0:
        return SolverOutcome(Status.OPTIMAL, lm.offset, lm.offset, True, solver, Timings(build=build),
                             start_objective=start_obj, start_accepted=None if start is None else True)
    passed, note = _start_to_pass(chosen, lm, x0, refusal)
    deadline = time.monotonic() + options.time_limit
    if options.deadline is not None:
        deadline = min(deadline, options.deadline)
    worker = chosen.make_worker(model, lm)
    start_off = None if passed is None else start_obj - lm.offset
    if deadline - time.monotonic() <= MIN_HANDOFF:  # the arrays took the time: the start (if any) is the answer
        got = guard.Collected(stopped=True, notes=["budget spent before the hand-off to the solver"])
    else:
        got = guard.run(worker, lm, options, passed, start_off, deadline)
    doubt = _contradiction(lm, got, options)
    if doubt and passed is not None and deadline - time.monotonic() > RETRY_SECONDS:
        # a solver fault around the MIP start (HiGHS 1.16 lost the objective's presolve offset and
        # proved a start optimal at a bound of 0): solve again without the start
        again = guard.run(chosen.make_worker(model, lm), lm, options, None, None, deadline)
        again.notes.insert(0, f"{doubt} with the MIP start; solved again without it")
        got, doubt = again, _contradiction(lm, again, options)
    outcome = _outcome(lm, got, solver, options, x0 if not refusal else None, start_obj, doubt)
    outcome.timings = Timings(build=build, handoff=got.handoff, solve=got.solve_seconds)
    if start is not None:
        outcome.start_accepted = bool(passed is not None and got.verdict and got.verdict.accepted)
        if passed is not None and got.verdict is None and got.stopped:  # stopped before it said: not a refusal
            outcome.start_accepted = None
        evidence = got.verdict.evidence if got.verdict else ""
        outcome.message = "; ".join(filter(None, [refusal or note, evidence, outcome.message]))
    return outcome


def _contradiction(lm: LinearModel, got: guard.Collected, options: SolveOptions) -> str:
    """Why the solver's claim of optimality contradicts its own numbers ('' when it does not).

    Its answer must be worth what it says, and its bound must close the gap it was asked for,
    unless the answer lies above the cutoff: "optimal" then says only that nothing lies below it.
    """
    final = got.final
    if final is None or final.native is not Native.OPTIMAL or final.x is None or not lm.is_mip:
        return ""
    worth = lm.objective(final.x) - lm.offset  # model units, as the solver reports them
    scale = max(1.0, abs(worth))
    if final.objective is not None and abs(final.objective - worth) > CLAIM_TOL * scale:
        return (f"{final.code!r} claims objective {final.objective:.10g} for an answer worth {worth:.10g}")
    if options.cutoff is not None and worth > options.cutoff:
        return ""
    if got.bound is not None and worth - got.bound > 2 * options.gap * scale + CLAIM_TOL * scale:
        return (f"{final.code!r} claims optimality at {worth:.10g} with a bound of {got.bound:.10g} "
                f"(gap asked: {options.gap:g})")
    return ""


def _start_to_pass(chosen: Backend, lm: LinearModel, x0, refusal: str) -> tuple[np.ndarray | None, str]:
    if x0 is None or refusal:
        return None, ""
    if not chosen.capabilities.mip_start:
        return None, f"start not passed: {chosen.name!r} takes no MIP start (kept as the fallback answer)"
    if not lm.is_mip:
        return None, "start not passed: the model has no integer variables"
    return x0, ""


def _outcome(lm: LinearModel, got: guard.Collected, solver: str, options: SolveOptions, x0,
             start_obj, doubt: str) -> SolverOutcome:
    """Fold the worker's reports into an outcome; fall back to a feasible start that is better.

    ``doubt`` (from :func:`_contradiction`): the solver's optimality claim is not supported by its
    own numbers, so the answer stands but the claim and the bound do not."""
    x = got.x
    notes = list(got.notes)
    if got.final is not None and got.final.native in (Native.ERROR, Native.UNKNOWN):
        notes.append(f"solver ended with {got.final.code!r}")
    objective = None if x is None else lm.objective(x)
    if x0 is not None and (objective is None or objective > start_obj + 1e-9 * max(1.0, abs(start_obj))):
        if objective is not None:
            notes.append(f"solver's answer {objective:.10g} is worse than the start {start_obj:.10g}; "
                         "returning the start")
        x, objective = x0, start_obj
    status = classify(got.native, x is not None)
    if status is Status.INFEASIBLE and x is not None:
        status = Status.ERROR
        notes.append("solver claims infeasible although a feasible start exists")
    # infeasible or unbounded: no bound, whatever a search streamed before its proof
    bound = None if got.bound is None or status in (Status.INFEASIBLE, Status.UNBOUNDED) else got.bound + lm.offset
    if not lm.is_mip:  # a MIP dual bound means nothing for an LP; its optimum is its own bound
        bound = objective if status is Status.OPTIMAL else None
    if bound is not None and objective is not None:
        bound = min(bound, objective)
    if bound is not None and options.cutoff is not None:  # nodes were pruned at the cutoff: it caps what is proven
        bound = min(bound, options.cutoff + lm.offset)
    if doubt:
        status, bound = (Status.TIME_LIMIT_FEASIBLE if x is not None else Status.ERROR), None
        notes.append(f"{doubt}: status and bound not trusted")
    if x is not None:
        lm.load(x)
    log = str(options.log_path) if options.log_path else None
    return SolverOutcome(status, objective, bound, x is not None, solver, log_path=log, start_objective=start_obj,
                         message="; ".join(notes))
