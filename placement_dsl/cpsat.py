"""CP-SAT (OR-Tools) for makespan problems: MOIRAI's schedule (Zhang et al., eq. 4-8) as an interval model.

:func:`solve_model` is the backend of :func:`placement_dsl.solve.solve` with ``solver="cpsat"``
for single-sample problems (:class:`~placement_dsl.objectives.Latency` or ``Makespan``) on devices that run
one op at a time: ``solve`` checks the arguments, resolves the start (:func:`placement_dsl.starts.resolve`), keeps the deadline and
certifies the answer like any other solver's, and returns one :class:`~placement_dsl.result.Result`.
:func:`solve_schedule` and :func:`solve_schedule_cpsat` are deprecated wrappers of
``solve(problem, "schedule", solver=...)``. CP-SAT always runs in a child process (:func:`isolated`):
OR-Tools bundles HiGHS and SCIP libraries under the sonames highspy and PySCIPOpt use, so
whichever loads first breaks the other in one process. The model (``pip install placement_dsl[cpsat]``):

* a literal per (colocation unit, allowed device), exactly one per unit (eq. 4c);
* an optional interval per (op, device) of positive time, one ``NoOverlap`` per device (eq. 6);
* per transfer task (:class:`~placement_dsl.blocks.schedule.Task`) a literal and an optional
  interval per channel ``a -> b`` (MOIRAI's ``u_{qk'k''}``, eq. 7), ``NoOverlap`` per sending
  and per receiving port (``Congestion("port")``), per ordered pair (``"channel"``) or per physical
  link of the route (``"link"``) (eq. 8);
* precedence over the augmented DAG (eq. 4a), memory as a linear constraint (eq. 5);
* the list schedule (or the warm start's) as a complete hint, re-timed on integer durations.

Times are integers: durations are multiplied by a factor ``f`` and rounded *up*, so every
schedule of the integer model is valid in real units (each op and transfer lasts at most its
rounded time); the answer is re-checked by :func:`~placement_dsl.schedule.check_schedule`. When
``f`` makes every duration integral the integer optimum is the real one; otherwise the bound is
corrected by the rounding: ``(bound_int - N) / f`` with ``N`` the tasks of positive duration.
"""
from __future__ import annotations

import importlib
import math
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from .blocks.base import Context
from .blocks.schedule import ScheduleData, retime, schedule_data
from .constraints import Memory
from .deadline import BudgetSpent, unlinked_locks
from .errors import EvaluationMismatchError, SolverUnavailableError, SpecError
from .evaluate import execution
from .formulations.schedule import horizon_of
from .objectives import Latency
from .placement import Placement
from .problem import Problem
from .result import Result, Seconds
from .schedule import Schedule, check_schedule, list_schedule
from .solvers.base import Status

SUPPORTED = ("Latency", "Memory", "Pin", "Colocate", "AllowedKinds", "Congestion", "ScheduleHint", "Overflow")
MIN_SEARCH = 1.0  # seconds CP-SAT searches at least, even when the child's start-up (imports) ate the budget
RESOLUTION = 10 ** 6  # integer time units over the horizon when no power of ten makes the durations integral


def available() -> bool:
    """OR-Tools is installed (checked without importing it: see :func:`isolated`)."""
    import importlib.util

    return importlib.util.find_spec("ortools") is not None


# ---------------------------------------------------------------------------- integer time
@dataclass(frozen=True)
class TimeScale:
    """Real time ``t`` is ``t * factor`` integer units, rounded up; ``exact`` when no rounding happens."""

    factor: float
    exact: bool

    def up(self, t: float) -> int:
        x = t * self.factor
        return round(x) if self.exact else math.ceil(x - 1e-9 * max(1.0, abs(x)))

    @classmethod
    def of(cls, durations: np.ndarray, horizon: float) -> TimeScale:
        """The least power of ten making every duration integral (with the horizon below 1e9 units), else
        :data:`RESOLUTION` units over the horizon, rounded up."""
        d = durations[np.isfinite(durations) & (durations > 0)]
        for k in range(10):
            f = 10.0 ** k
            if horizon * f > 1e9:
                break
            if np.allclose(d * f, np.round(d * f), rtol=0, atol=1e-9):
                return cls(f, True)
        return cls(RESOLUTION / max(horizon, 1e-300), False)


def _durations(data: ScheduleData) -> np.ndarray:
    """Every op time on an allowed device and every channel time (cost-model units)."""
    ctx = data.ctx
    chans = [data.raw_time(data.tasks[k].producer, a, c) for k, a, c in data.channels]
    return np.concatenate([ctx.work[data.allowed] * ctx.scale.time, np.array(chans, dtype=float)])


# ---------------------------------------------------------------------------- the model
class ScheduleModel:
    """The CP-SAT model of a makespan problem (see the module docstring) and its hint and read-back."""

    def __init__(self, problem: Problem, data: ScheduleData, scale: TimeScale, horizon: int):
        from ortools.sat.python import cp_model

        self.problem, self.data, self.scale, self.ctx = problem, data, scale, data.ctx
        self.m, self.H = cp_model.CpModel(), horizon
        ctx = self.ctx
        self.raw = np.where(data.allowed, ctx.work * ctx.scale.time, np.inf)
        self.lit = {(int(u), d): self.m.NewBoolVar(f"x[{ctx.ops[u]},{ctx.devices[d]}]")
                    for u in ctx.units for d in np.flatnonzero(data.allowed[u])}
        for u in ctx.units:
            self.m.AddExactlyOne(self.lit[int(u), d] for d in np.flatnonzero(data.allowed[u]))
        self.start = [self.m.NewIntVar(0, horizon, f"S[{name}]") for name in ctx.ops]
        self.end = [self.m.NewIntVar(0, horizon, f"C[{name}]") for name in ctx.ops]
        self.ports: dict[Any, list[Any]] = {}  # a resource transfers hold (port, channel, link): their intervals
        self._ops()
        self._tasks()
        self._memory()
        self.makespan = self.m.NewIntVar(0, horizon, "C_max")
        for v in range(ctx.n):
            self.m.Add(self.makespan >= self.end[v])
        self.m.Minimize(self.makespan)

    def x(self, v: int, d: int) -> Any:
        return self.lit.get((int(self.ctx.unit[v]), d))

    def _ops(self) -> None:
        ctx, data, m = self.ctx, self.data, self.m
        device = {d: [] for d in range(ctx.D)}
        for v in range(ctx.n):
            devs = np.flatnonzero(data.allowed[v])
            m.Add(self.end[v] == self.start[v] + sum(self.scale.up(self.raw[v, d]) * self.x(v, d) for d in devs))
            for d in devs:
                size = self.scale.up(self.raw[v, d])
                if size > 0 and not ctx.cluster.parallel[d]:  # a host runs any number of ops at once
                    device[d].append(m.NewOptionalFixedSizeIntervalVar(self.start[v], size, self.x(v, d), f"op{v}@{d}"))
        for intervals in device.values():
            m.AddNoOverlap(intervals)
        for u, v in set(zip(ctx.graph.src.tolist(), ctx.graph.dst.tolist())):
            m.Add(self.start[v] >= self.end[u])

    def _tasks(self) -> None:
        data, m = self.data, self.m
        self.task_start, self.channel = [], {}
        for k, task in enumerate(data.tasks):
            ts = m.NewIntVar(0, self.H, f"T[{data.task_key(k)}]")
            self.task_start.append(ts)
            m.Add(ts >= self.end[task.producer])
            target = self._target(task)
            moved = []
            for a, c in sorted(data.task_channels[k]):
                w = m.NewBoolVar(f"w[{data.task_key(k)},{a},{c}]")
                m.AddBoolAnd([self.x(task.producer, a), target(c)]).OnlyEnforceIf(w)
                m.AddBoolOr([self.x(task.producer, a).Not(), target(c).Not(), w])
                self.channel[k, a, c] = w
                size = self.scale.up(data.raw_time(task.producer, a, c))
                moved.append(size * w)
                if size > 0:
                    self._book(a, c, m.NewOptionalFixedSizeIntervalVar(ts, size, w, f"t{k}:{a}->{c}"))
            self._arrivals(k, ts, moved)
        for intervals in self.ports.values():
            m.AddNoOverlap(intervals)
        for u, a, v, c in data.no_route:
            m.AddBoolOr([self.x(u, a).Not(), self.x(v, c).Not()])

    def _target(self, task: Any) -> Any:
        """``c -> literal``: the task's tensor must reach device ``c``."""
        if task.dest is None:
            return lambda c: self.x(task.consumers[0], c)
        there = [self.x(v, task.dest) for v in task.consumers if self.x(v, task.dest) is not None]
        y = self.m.NewBoolVar(f"needs[{task.producer}@{task.dest}]")
        self.m.AddMaxEquality(y, there)
        return lambda c: y

    def _book(self, a: int, c: int, interval: Any) -> None:
        """The interval of a transfer ``a -> c`` on every resource it holds (:attr:`ScheduleData.held`)."""
        for resource in self.data.held(a, c):
            self.ports.setdefault(resource, []).append(interval)

    def _arrivals(self, k: int, ts: Any, moved: list[Any]) -> None:
        task = self.data.tasks[k]
        for v in self.data.arrivals(k):
            row = self.m.Add(self.start[v] >= ts + sum(moved))
            if task.dest is not None:
                row.OnlyEnforceIf(self.x(v, task.dest))

    def _memory(self) -> None:
        """Eq. (5) on integer bytes: exact when the sizes are whole numbers, else in units of max / 1e12 with sizes
        rounded up and capacities down (a placement within a hair of a capacity may be refused)."""
        if not self.problem.has(Memory):
            return
        ctx, g, cap = self.ctx, self.ctx.graph, self.ctx.cluster.memory
        mem = np.bincount(ctx.unit, weights=g.param_bytes + g.activation_bytes, minlength=ctx.n)
        finite = np.isfinite(cap)
        whole = all(float(v).is_integer() for v in [*mem, *cap[finite]])
        unit = 1.0 if whole else max(float(mem.max(initial=0.0)), float(cap[finite].max(initial=0.0)), 1e-300) / 1e12
        for d in np.flatnonzero(finite):
            terms = [(math.ceil(mem[u] / unit), self.lit[int(u), d]) for u in ctx.units
                     if (int(u), d) in self.lit and mem[u] > 0]
            self.m.Add(sum(k * lit for k, lit in terms) <= math.floor(cap[d] / unit))

    # ------------------------------------------------------------------ solving
    def fix(self, devices: Mapping[int, int]) -> None:
        """Solve with op ``v`` on device ``devices[v]`` (CP-SAT assumptions, replacing earlier ones)."""
        self.m.ClearAssumptions()
        self.m.AddAssumptions([self.x(v, d) for v, d in devices.items()])

    def solve(self, seconds: float, threads: int = 1, gap: float = 1e-4,
              log: bool | str | None = False) -> tuple[Any, Any, Status]:
        """Run CP-SAT; returns the solver (for :meth:`read`), the first-solution watch and the status. ``log``:
        echo the search log (``True``), or append it to the file of that path."""
        from ortools.sat.python import cp_model

        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = max(seconds, 0.01)
        solver.parameters.num_workers = int(threads)
        solver.parameters.relative_gap_limit = float(gap)
        solver.parameters.log_search_progress = bool(log)
        if isinstance(log, str):
            solver.parameters.log_to_stdout = False
            sink = open(log, "a")  # noqa: SIM115 - closed after the search
            solver.log_callback = lambda line: sink.write(line + "\n")
        else:
            sink = None
        solver.parameters.cp_model_probing_level = 0  # probing the optional intervals costs more than it prunes here
        watch = _First()
        try:
            code = solver.Solve(self.m, watch)
        finally:
            if sink is not None:
                sink.close()
        return solver, watch, STATUS.get(solver.StatusName(code), Status.ERROR)

    # ------------------------------------------------------------------ hint and read-back
    def hint(self, placement: Placement, schedule: Schedule) -> int:
        """Hint every variable with ``schedule`` re-timed on the integer durations (replacing earlier hints);
        returns its makespan."""
        self.m.ClearHints()
        starts, moves, makespan = integer_schedule(placement, schedule, self.scale, self.data.congestion)
        a = placement.assign
        for (u, d), lit in self.lit.items():
            self.m.AddHint(lit, bool(a[u] == d))
        for v in range(self.ctx.n):
            self.m.AddHint(self.start[v], starts[v])
            self.m.AddHint(self.end[v], starts[v] + self.scale.up(self.raw[v, a[v]]))
        for k, task in enumerate(self.data.tasks):
            to = a[task.consumers[0]] if task.dest is None else task.dest
            needed = (task.producer, int(to)) in moves
            done = starts[task.producer] + self.scale.up(self.raw[task.producer, a[task.producer]])
            self.m.AddHint(self.task_start[k], moves.get((task.producer, int(to)), done))
            for s, c in self.data.task_channels[k]:
                self.m.AddHint(self.channel[k, s, c], bool(needed and s == a[task.producer] and c == to))
        self.m.AddHint(self.makespan, makespan)
        return makespan

    def read(self, solver: Any) -> Placement:
        """The solution's placement with its schedule in real units."""
        ctx = self.ctx
        unit_dev = {u: d for (u, d), lit in self.lit.items() if solver.Value(lit)}
        assign = np.array([unit_dev[int(ctx.unit[v])] for v in range(ctx.n)])
        start = np.array([solver.Value(s) for s in self.start], dtype=float) / self.scale.factor
        moves = {}
        for (k, a, c), w in self.channel.items():
            if solver.Value(w):
                moves[(self.data.tasks[k].producer, c)] = solver.Value(self.task_start[k]) / self.scale.factor
        return Placement(ctx.graph, ctx.cluster, assign, "cpsat", schedule=Schedule(start, moves))


def integer_schedule(placement: Placement, schedule: Schedule, scale: TimeScale,
                     congestion: str) -> tuple[list[int], dict[tuple[int, int], int], int]:
    """``schedule`` re-timed on integer durations (rounded up), each resource keeping its order (:func:`retime`)."""
    return retime(placement, schedule, congestion, scale.up)


# ---------------------------------------------------------------------------- solve
STATUS = {"OPTIMAL": Status.OPTIMAL, "FEASIBLE": Status.TIME_LIMIT_FEASIBLE, "INFEASIBLE": Status.INFEASIBLE,
          "UNKNOWN": Status.TIME_LIMIT_NO_SOLUTION, "MODEL_INVALID": Status.ERROR}


def check_terms(problem: Problem) -> None:
    """Refuse (:class:`SpecError`) a problem CP-SAT does not model: another objective, or terms outside :data:`SUPPORTED`."""
    if not isinstance(problem.objective, Latency):
        raise SpecError(f"solver 'cpsat' minimizes the makespan; the problem's objective is "
                        f"{type(problem.objective).__name__} (use solve() with a MILP solver)")
    if execution(problem.cluster) == "invocations":
        raise SpecError("solver 'cpsat' schedules devices that run one op at a time; this cluster's accelerators "
                        "run invocations (Tarnawski's model, a cluster without links): use solve() with a MILP solver")
    other = sorted({type(t).__name__ for t in problem.constraints  # a subclass (Boundaries of Colocate) is its base
                    if not any(c.__name__ in SUPPORTED for c in type(t).__mro__)})
    if other:
        raise SpecError(f"solver 'cpsat' does not model the terms {other}; it supports {list(SUPPORTED)}")


_check_terms = check_terms


WHOLE_LITERALS = 1200  # op-device literals (ops times the devices that may run them) up to which a makespan solve
# whose MILP is too large searches CP-SAT's model of the whole graph from its best schedule: on one worker its fixed
# search improves such a start steadily where the local and window searches stall (generated sheets of 60 wide
# layers, 174-183 ops onto 5 devices: from schedule-ls's 1.444, 2.203 and 1.403 to 1.265, 1.904 and 1.157 in 40-60 s
# at load 5-7), and does not on larger models (327 ops onto 5: 1.927 to 1.926 in 40 s; a 897-op sheet 10.492 to 10.472)


def literals(problem: Problem) -> int:
    """The op-device literals of CP-SAT's model of ``problem`` (each op's devices of finite time), counted before it
    is built: the size :data:`WHOLE_LITERALS` compares."""
    return int(np.isfinite(problem.cluster.times(problem.graph)).sum())


def whole_fits(problem: Problem) -> bool:
    """Whether CP-SAT searches ``problem`` whole (:data:`WHOLE_LITERALS`): OR-Tools is installed, CP-SAT models the
    problem (:func:`check_terms`) and its model is small enough for its search to improve a schedule."""
    if not available() or literals(problem) > WHOLE_LITERALS:
        return False
    try:
        check_terms(problem)
    except SpecError:
        return False
    return True


def _start_schedule(problem: Problem, start: Placement) -> Schedule:
    """The start's own schedule when it is valid, else its list schedule."""
    congestion = problem.cost_model().congestion
    if start.schedule is not None and not check_schedule(start, start.schedule, congestion)[1]:
        return start.schedule
    return list_schedule(start, congestion)


def solve_model(problem: Problem, start: Placement | None, refusal: str, at: float, gap: float = 1e-4,
                threads: int = 1, log_path: str | None = None) -> Result:
    """CP-SAT on a makespan problem, hinted with ``start`` (unless ``refusal``), ending by ``at`` (a
    :func:`time.monotonic` reading; the child process's start-up included): the answer (or the start when
    CP-SAT finds nothing better), re-evaluated by the cost model. The backend of
    :func:`placement_dsl.solve.solve` with ``solver="cpsat"``, which resolves the start and checks the answer.

    CP-SAT runs in a child process (:func:`isolated`): OR-Tools bundles its own HiGHS and SCIP
    libraries, which cannot share a process with highspy's and PySCIPOpt's. ``log_path``: a file
    for CP-SAT's search log.
    """
    if not available():
        raise SolverUnavailableError("solver 'cpsat' needs OR-Tools: pip install placement_dsl[cpsat]")
    check_terms(problem)
    hint = None if start is None or refusal else _with_schedule(start, _start_schedule(problem, start))
    try:
        out = isolated(_solve, problem, None if hint is None else to_data(hint), at, gap, threads,
                       None if log_path is None else str(log_path), until=at)
    except BudgetSpent:  # the child outran its deadline (e.g. building a model too large): the start stands
        out = {"assign": None, "status": Status.TIME_LIMIT_NO_SOLUTION.value, "build": 0.0, "wall": 0.0, "bound": None,
               "exact": True, "factor": 1.0, "accepted": None}
    found = None if out["assign"] is None else from_data(problem, out)
    result = _certify(problem, found, hint, Status(out["status"]), out, refusal)
    result.log_path = None if log_path is None else str(log_path)
    result.timings = Seconds(build=out["build"], solve=out["wall"])
    return result


def solve_schedule_cpsat(problem: Problem, time_limit: float = 60.0, warm_start: str | Placement | None = "list",
                         gap: float = 1e-4, threads: int = 1, log: bool = False) -> Result:
    """Deprecated: ``solve(problem, "schedule", solver="cpsat", ...)`` (``log``: CP-SAT's log on stdout)."""
    warnings.warn("placement_dsl.cpsat.solve_schedule_cpsat is deprecated; use placement_dsl.solve.solve(problem, "
                  "'schedule', solver='cpsat')", DeprecationWarning, stacklevel=2)
    return _solve_entry()(problem, "schedule", solver="cpsat", time_limit=time_limit, warm_start=warm_start, gap=gap,
                          threads=threads, log_path="/dev/stdout" if log else None, method="cpsat")


def _solve_entry() -> Callable[..., Result]:
    """:func:`placement_dsl.solve.solve`, looked up when a deprecated wrapper is called (solve imports this module)."""
    return importlib.import_module("placement_dsl.solve").solve


def build(problem: Problem, hint: Placement | None = None) -> tuple[ScheduleModel, int | None]:
    """The CP-SAT model of ``problem`` (horizon: the hint's integer makespan, else the serial bound), hinted
    with the schedule ``hint`` carries. Call it in a process without highspy (:func:`isolated`)."""
    _check_terms(problem)
    ctx = Context(problem)
    data = schedule_data(ctx, horizon_of(problem))
    scale = TimeScale.of(_durations(data), data.horizon * ctx.scale.time)
    serial = sum(scale.up(t) for t in data.slowest * ctx.scale.time) + sum(
        scale.up(data.longest_transfer(k) * ctx.scale.time) for k in range(len(data.tasks)))
    hinted = None if hint is None else integer_schedule(hint, hint.schedule, scale, data.congestion)[2]
    model = ScheduleModel(problem, data, scale, serial if hinted is None else min(serial, hinted))
    if hint is not None:
        model.hint(hint, hint.schedule)
    return model, hinted


# ---------------------------------------------------------------------------- the child process
ISOLATED_GRACE = 3.0  # seconds a child may run past its own deadline (its clean-up) before it is stopped


def isolated(fn: Callable[..., Any], *args: Any, until: float | None = None) -> Any:
    """``fn(*args)`` in a fresh child process (``spawn``): OR-Tools' bundled HiGHS and SCIP libraries share
    their sonames with highspy's and PySCIPOpt's, so whichever loads first breaks the other in one process.

    ``until`` (a :func:`time.monotonic` reading): the child is stopped :data:`ISOLATED_GRACE` seconds after it,
    whatever it is doing (a model build that outgrew its budget), and :class:`~placement_dsl.deadline.BudgetSpent`
    is raised: a caller's promise holds even when the child's own clock checks come too late."""
    import multiprocessing

    pool = spawn_pool()
    try:
        job = pool.apply_async(fn, args)
        wait = None if until is None else max(until - time.monotonic(), 0.0) + ISOLATED_GRACE
        try:
            out = job.get(wait)
        except multiprocessing.TimeoutError:
            raise BudgetSpent(f"the child process passed its deadline by {ISOLATED_GRACE:g} s and was stopped") \
                from None
        pool.close()
        return out
    finally:
        pool.terminate()
        pool.join()


def isolated_each(fn: Callable[[Any], Any], items: list[Any], until: float) -> list[Any]:
    """``fn(item)`` for each item in turn, in one fresh child process (as :func:`isolated`), each answer kept as it
    arrives: the answers given by ``until`` (a :func:`time.monotonic` reading), ``None`` for the items not answered
    by then. The caller is back at ``until`` (the child is stopped there, without :data:`ISOLATED_GRACE`): what
    the child finished is kept, a late item costs only itself."""
    import multiprocessing

    out: list[Any] = [None] * len(items)
    if not items or until <= time.monotonic():
        return out
    pool = spawn_pool()
    try:
        answers = pool.imap(fn, items)
        for k in range(len(items)):
            try:
                out[k] = answers.next(max(until - time.monotonic(), 0.0))
            except multiprocessing.TimeoutError:
                break
        return out
    finally:
        pool.terminate()
        pool.join()


def spawn_pool() -> Any:
    """A ``spawn`` pool of one worker (see :func:`isolated`) whose locks leave nothing to the resource tracker
    (:func:`~placement_dsl.deadline.unlinked_locks`): the pool stops it by force when its caller is done."""
    import multiprocessing

    with spawning():  # e.g. "<stdin>": the child cannot re-run it
        return multiprocessing.get_context("spawn").Pool(1, initializer=unlinked_locks)


@contextmanager
def spawning() -> Iterator[None]:
    """Within the block a ``spawn`` child may be started from a ``__main__`` it cannot re-run (``"<stdin>"``)."""
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    hidden = path is not None and not os.path.exists(path)
    if hidden:
        del main.__file__
    try:
        yield
    finally:
        if hidden:
            main.__file__ = path


def to_data(placement: Placement) -> dict[str, Any]:
    """A placement with its schedule as plain data for a child process (a schedule's mapping proxy does not pickle)."""
    return {"assign": placement.assign.tolist(), "start": placement.schedule.start.tolist(),
            "moves": dict(placement.schedule.transfer_start)}


def from_data(problem: Problem, payload: Mapping[str, Any], source: str = "cpsat") -> Placement:
    """The placement :func:`to_data` wrote, on the problem's graph."""
    return Placement(problem.graph, problem.cluster, payload["assign"], source,
                     schedule=Schedule(np.array(payload["start"], dtype=float), payload["moves"]))


def _solve(problem: Problem, hint: Mapping[str, Any] | None, at: float, gap: float, threads: int,
           log_path: str | None) -> dict[str, Any]:
    """The child's work: build, hint, solve until ``at`` (:func:`time.monotonic`; :data:`MIN_SEARCH` at least),
    read back (plain data)."""
    t0 = time.perf_counter()
    model, hinted = build(problem, None if hint is None else from_data(problem, hint, "warm start"))
    built = time.perf_counter() - t0
    solver, watch, status = model.solve(max(at - time.monotonic(), MIN_SEARCH), threads, gap, log_path)
    found = to_data(model.read(solver)) if status.has_solution else {"assign": None}
    return {**found, "status": status.value, "build": built, "wall": solver.WallTime(),
            "bound": _bound(model, solver, status), "exact": model.scale.exact, "factor": model.scale.factor,
            "accepted": None if hinted is None else watch.first is not None and watch.first <= hinted}


class _First:
    """Records CP-SAT's first solution's objective (the hint's, when CP-SAT took it)."""

    def __new__(cls) -> Any:
        from ortools.sat.python import cp_model

        class Callback(cp_model.CpSolverSolutionCallback):
            def __init__(self) -> None:
                super().__init__()
                self.first: float | None = None

            def on_solution_callback(self) -> None:
                if self.first is None:
                    self.first = self.ObjectiveValue()

        return Callback()


def _bound(model: ScheduleModel, solver: Any, status: Status) -> float | None:
    """CP-SAT's bound in real units, corrected for rounded durations (see the module docstring)."""
    if status not in (Status.OPTIMAL, Status.TIME_LIMIT_FEASIBLE):
        return None
    lower = float(solver.BestObjectiveBound())
    if not model.scale.exact:
        data = model.data
        lower -= int(data.busy.any(axis=1).sum()) + sum(data.longest_transfer(k) > 0 for k in range(len(data.tasks)))
    return max(lower, 0.0) / model.scale.factor


def _certify(problem: Problem, found: Placement | None, start: Placement | None, status: Status,
             out: Mapping[str, Any], refusal: str) -> Result:
    """The result: CP-SAT's answer (or the start when that is no worse), re-evaluated by the cost model."""
    notes = [refusal] if refusal else []
    start_eval = None if start is None else problem.evaluate(start)
    kept = start is not None and (found is None or problem.evaluate(found).objective > start_eval.objective)
    if kept:
        notes.append("CP-SAT found nothing better than the start; returning the start")
        found, status = start, Status.OPTIMAL if status is Status.OPTIMAL else Status.TIME_LIMIT_FEASIBLE
    ev = None if found is None else problem.evaluate(found)
    if ev is not None and not ev.valid:
        raise EvaluationMismatchError(f"'cpsat': the schedule is invalid for the cost model "
                                      f"({'; '.join(v.message for v in ev.violations[:3])}); the model misses a constraint")
    if not out["exact"]:
        notes.append(f"durations rounded up to 1/{out['factor']:.6g}; the bound accounts for the rounding")
    bound = out["bound"]
    return Result(status=status, placement=found, objective=None if ev is None else ev.objective,
                  bound=None if bound is None or ev is None else min(bound, ev.objective), method="cpsat",
                  solver="cpsat", formulation="cpsat", evaluation=ev, message="; ".join(notes),
                  bound_scope=problem.placement_class(), start_accepted=out["accepted"],
                  start_objective=None if start_eval is None else start_eval.objective,
                  found_by="" if ev is None else "warm start" if kept else "solver")


def _with_schedule(start: Placement, schedule: Schedule) -> Placement:
    return Placement(start.graph, start.cluster, start.assign, start.source or "warm start", schedule=schedule)


def solve_schedule(problem: Problem, solver: str = "highs", **options: Any) -> Result:
    """Deprecated: ``solve(problem, "schedule", solver=solver, **options)`` (``solver="cpsat"`` included)."""
    warnings.warn("placement_dsl.cpsat.solve_schedule is deprecated; use placement_dsl.solve.solve(problem, "
                  "'schedule', solver=...)", DeprecationWarning, stacklevel=2)
    if options.pop("log", False):
        options["log_path"] = "/dev/stdout"
    return _solve_entry()(problem, "schedule", solver=solver, **options)
