"""CP-SAT's proofs for the makespan's segments (:mod:`placement_dsl.bounds.segment_schedules`), in a child process.

The segments and their problems are the bounds layer's (no solver there); pricing each with the package's CP-SAT model
(:func:`placement_dsl.cpsat.build`) needs OR-Tools, which runs in a child process (:func:`placement_dsl.cpsat.isolated`:
its bundled libraries break HiGHS's in one process). :func:`schedule_segment_bound` prices a problem's segments and
waits (certify's ``segment-schedules`` level): the child answers segment by segment, in two :func:`rounds`
(:func:`placement_dsl.cpsat.isolated_each`), and is stopped at the clock, the segments it answered kept;
:func:`beside` prices them beside a solve (:class:`Running`).

Beside a solve, the bound runs in one child process only when the machine has a core to spare (:func:`free_cores`:
the cores this process may use less the load average, the solve's own core included in that load): CP-SAT's segments
when they hold a share of the graph worth a child, else the segments' LPs (:mod:`placement_dsl.bounds.segment_lp`,
HiGHS in a process without OR-Tools). With no core to spare no child runs beside the solve: for a small share of the
solve's time, before its search, the segments' LPs run in this process and then CP-SAT's segments (when worth it) in
a child the solve waits for — one process at a time (:class:`Done`) — and the note says so.
"""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from .bounds.makespan import route_path_makespan
from .bounds.segment_lp import MAX_OPS as LP_MAX_OPS
from .bounds.segment_lp import segment_lp_bound
from .bounds.segment_schedules import MAX_OPS, combined, distinct, segments, segments_or_reason
from .bounds.windows import WINDOW_OPS, window_problems
from .deadline import Deadline, machine
from .errors import PlacementError

MIN_SECONDS = 0.05  # CP-SAT's least time on a segment
SECONDS = 10.0  # the default clock
MIN_SHARE = 0.1  # of the graph's ops, the least the segments CP-SAT would price hold for a solve to start the child
MIN_OPS = 40  # smaller graphs start no child beside a solve: their models prove them (and the child costs seconds)
MIN_FREE = 0.75  # idle cores (the machine's less its load, the solve's own core in it) a child beside a solve needs:
# a core mostly free. At 1.0 a 2-core machine running the solve alone started the child or not by the load's noise
# (1.00 against 1.02): back to back, MOIRAI's GoogLeNet solved in 20 s proved 1.22309 in one run of four, 1.03557 in
# the others
CHILD_LEAST = 4.0  # seconds the in-process clock must have left for CP-SAT's child after the LPs: starting it (OR-Tools'
# import) took 3-6 s at load 8, and with 1 s left a 1,137-op sheet's 7.9 s share ran to 11.4 s


def schedule_segment_bound(problem: Any, deadline: Deadline | None = None) -> tuple[float, str, bool]:
    """The bound of the module docstring, in cost-model units, a note, and whether CP-SAT proved the optimum of every
    segment it was given. ``deadline`` (default :data:`SECONDS`) bounds the child process (the caller is back by
    it); segments it did not price by then keep their longest paths."""
    return schedule_segment_bounds([problem], deadline)[0]


def schedule_segment_bounds(problems: list[Any], deadline: Deadline | None = None) -> list[tuple[float, str, bool]]:
    """:func:`schedule_segment_bound` of each problem, their segments priced in one child process."""
    from . import cpsat

    clock = deadline or Deadline(SECONDS)
    split = [segments_or_reason(p) for p in problems]
    todo = [(k, i) for k, (_, parts, _) in enumerate(split) for i, s in enumerate(parts) if s.problem is not None]
    priced: list[tuple[float, bool] | None] = [None] * len(todo)
    own, where = distinct([split[k][1][i].problem for k, i in todo])  # identical segments priced once
    if todo and cpsat.available() and not clock.expired(1.0):  # each segment's answer kept as it comes, by the clock
        once = cpsat.isolated_each(segment_by, rounds(own, time.monotonic() + clock.left()), clock.at)
        best = [_better(once[k], once[len(own) + k]) for k in range(len(own))]
        priced = [best[k] for k in where]
    found: list[dict[int, float | None]] = [{} for _ in problems]
    for (k, i), value in zip(todo, priced):
        found[k][i] = None if value is None else value[0]
    out = []
    for k, (cut_total, parts, reason) in enumerate(split):
        if reason:
            out.append((0.0, reason, True))
            continue
        mine = [v for (j, _), v in zip(todo, priced) if j == k]
        done = sum(v is not None for v in mine)
        exact = sum(v is not None and v[1] for v in mine)
        note = (f"{len(parts)} segments between cut ops, {done} of {len(mine)} scheduled by CP-SAT ({exact} to "
                "optimality; its proven bound), the rest their closed forms")
        out.append((max(combined(cut_total, parts, found[k]), route_path_makespan(problems[k])[0]), note,
                    exact == len(mine)))
    return out


def solve_segments(problems: list[Any], until: float) -> list[tuple[float, bool] | None]:
    """Each segment problem's proven lower bound (real units) and whether it is the optimum, sharing the time until ``until`` (a
    :func:`time.monotonic` reading) evenly over the segments left; ``None`` where none was proven. Runs in a process
    without highspy (:func:`placement_dsl.cpsat.isolated`)."""
    out: list[tuple[float, bool] | None] = []
    for k, sub in enumerate(problems):
        left = until - time.monotonic()
        if left <= MIN_SECONDS:
            out.extend([None] * (len(problems) - k))
            break
        out.append(least_makespan(sub, max(MIN_SECONDS, left / (len(problems) - k))))
    return out


FIRST_ROUND = 0.5  # of its even share of the time left, what a segment is given in the first round
_SOLVED: dict[str, tuple[float, bool]] = {}  # in the child of schedule_segment_bounds: each segment's best answer


def rounds(own: list[Any], until: float) -> list[tuple[Any, str, float, tuple[str, ...], float]]:
    """The items of :func:`segment_by` that price the segment problems ``own`` by ``until`` (a :func:`time.monotonic`
    reading) in two rounds: first each in :data:`FIRST_ROUND` of an even share of the time left, then, with what the
    segments proven optimal left, the others again in an even share of it. GoogLeNet's nine inception segments at
    8 s: eight proven in the first round, the ninth needed more than its even 0.6 s while the child stopped 3 s
    early (1.176 where 1.223 is proven)."""
    call = f"{time.monotonic():.9f}"
    keys = [f"{call}:{k}" for k in range(len(own))]
    return [(q, keys[k], until, tuple(keys[k + 1:]), share) for share in (FIRST_ROUND, 1.0) for k, q in enumerate(own)]


def segment_by(item: tuple[Any, str, float, tuple[str, ...], float]) -> tuple[float, bool] | None:
    """One item of :func:`rounds`, ``(problem, key, until, later keys, share)``, in the child: the segment's answer
    when it was proven optimal, else :func:`least_makespan` in ``share`` of an even share of the time left among it
    and the later segments not proven optimal (the better of it and the earlier round's); ``None`` when no time is
    left and it has no answer."""
    problem, key, until, later, share = item
    done = _SOLVED.get(key)
    left = until - time.monotonic()
    if (done is not None and done[1]) or left <= MIN_SECONDS:
        return done
    open_ = 1 + sum(not _SOLVED.get(k, (0.0, False))[1] for k in later)
    found = _better(done, least_makespan(problem, max(MIN_SECONDS, share * left / open_)))
    if found is not None:
        _SOLVED[key] = found
    return found


def _better(a: tuple[float, bool] | None, b: tuple[float, bool] | None) -> tuple[float, bool] | None:
    """The larger of two proven bounds (``None``: none), proven optimal when either is."""
    if a is None or b is None:
        return a or b
    return max(a[0], b[0]), a[1] or b[1]


def least_makespan(problem: Any, seconds: float, release: np.ndarray | None = None,
                   tail: np.ndarray | None = None) -> tuple[float, bool] | None:
    """CP-SAT's proven lower bound on ``problem``'s makespan within ``seconds`` (real units, corrected for the
    rounded-up durations) and whether CP-SAT proved it optimal, ``None`` when it proved none (or the model has no
    schedule within its horizon). With ``release`` and ``tail`` (``(n, D)`` by the graph's ops, ``inf``: the op may
    not run there), op ``v`` on ``d`` starts after ``release[v, d]`` and the objective is at least its end plus
    ``tail[v, d]`` (:mod:`placement_dsl.bounds.windows`; both rounded down to the model's units)."""
    from .cpsat import build
    from .solvers.base import Status

    model, _ = build(problem)
    if release is not None and tail is not None:
        _windowed(model, problem, release, tail)
    solver, _, status = model.solve(seconds)
    lower = float(solver.BestObjectiveBound())
    if not np.isfinite(lower) or status is Status.INFEASIBLE:
        return None
    if not model.scale.exact:  # each op and each transfer lasts at most one unit more in the model
        data = model.data
        lower -= int(data.busy.any(axis=1).sum()) + sum(data.longest_transfer(k) > 0 for k in range(len(data.tasks)))
    return max(lower, 0.0) / model.scale.factor, status is Status.OPTIMAL


def _windowed(model: Any, problem: Any, release: np.ndarray, tail: np.ndarray) -> None:
    """Releases and tails on ``model``'s ops, per device (:func:`least_makespan`), in its integer units rounded down."""
    m, f, index = model.m, model.scale.factor, problem.graph.index
    for i, name in enumerate(model.ctx.ops):
        v = index[name]
        for d in range(release.shape[1]):
            x = model.x(i, d)
            if x is None:
                continue
            if not (np.isfinite(release[v, d]) and np.isfinite(tail[v, d])):
                m.Add(x == 0)  # no schedule runs the op there
                continue
            r, q = _down(release[v, d] * f), _down(tail[v, d] * f)
            if r > 0:
                m.Add(model.start[i] >= r).OnlyEnforceIf(x)
            if q > 0:
                m.Add(model.makespan >= model.end[i] + q).OnlyEnforceIf(x)


def _down(x: float) -> int:
    """``x`` rounded down, a hair below first (a product that should be whole may land just above it)."""
    return max(math.floor(x - 1e-9 * max(1.0, abs(x))), 0)


def schedule_window_bound(problem: Any, deadline: Deadline | None = None) -> tuple[float, str, bool]:
    """The window bound (:mod:`placement_dsl.bounds.windows`): the larger of the split heads' longest path and each
    window's proven least makespan with its releases and tails, a note, and whether CP-SAT proved every window it
    was given optimal (or the whole graph). The heads take at most a third of ``deadline`` (default
    :data:`SECONDS`); the windows share the rest in a child process, stopped at the clock (the windows it answered
    kept). A note starting with ``declined`` says why there are no windows."""
    return schedule_window_bounds([problem], deadline)[0]


def schedule_window_bounds(problems: list[Any], deadline: Deadline | None = None) -> list[tuple[float, str, bool]]:
    """:func:`schedule_window_bound` of each problem, their windows priced in one child process."""
    from . import cpsat

    clock = deadline or Deadline(SECONDS)
    heads = clock.within(clock.left() / 3)
    split = [window_problems(p, heads) for p in problems]
    todo = [(k, w) for k, (_, windows, _) in enumerate(split) for w in windows]
    answers: list[tuple[float, bool] | None] = [None] * len(todo)
    if todo and cpsat.available() and not clock.expired(CHILD_LEAST / 2):
        until, call = time.monotonic() + clock.left(), f"{time.monotonic():.9f}"
        items = [(w.problem, w.release, w.tail, until, len(todo) - i, f"{call}:{k}", w.centre is None)
                 for i, (k, w) in enumerate(todo)]
        answers = cpsat.isolated_each(window_by, items, clock.at)
    out = []
    for k, (path, windows, reason) in enumerate(split):
        mine = [(w, a) for (j, w), a in zip(todo, answers) if j == k]
        out.append((path, reason, False) if reason else _windows_note(path, mine))
    return out


def _windows_note(path: float, priced: list[tuple[Any, tuple[float, bool] | None]]) -> tuple[float, str, bool]:
    """The bound of one problem's windows and their answers (``None``: not priced), its note, and whether complete."""
    best, done, exact = path, 0, 0
    for w, found in priced:
        if found is not None:
            best, done, exact = max(best, found[0] + w.offset), done + 1, exact + found[1]
    if priced and priced[0][0].centre is None and priced[0][1] is not None and priced[0][1][1]:
        return best, WHOLE_NOTE, True  # the whole graph's optimum: every window's is at most it
    whole = ", and the whole graph" if priced and priced[0][0].centre is None else ""
    return best, (f"{len(priced)} windows (up to {WINDOW_OPS} ops around the most critical ops{whole}), {done} "
                  f"priced by CP-SAT ({exact} to optimality) with the split heads and tails as releases and tails"), \
        exact == len(priced)


WINDOW_SECONDS = 3.0  # CP-SAT's most time on a window around a critical op: the 60-op windows of 60- and 300-task
# sheets are proven in under a second or not in 13 s, and the time is the later levels' (the schedule MILP's incumbents
# on a 60-task sheet: 1.388 with its time, 1.459 after windows that took 26 s for 1 %); the whole graph has its share
WHOLE_NOTE = "the whole graph scheduled by CP-SAT to optimality, the split heads and tails its releases and tails"


def window_by(item: tuple[Any, np.ndarray, np.ndarray, float, int, str, bool]) -> tuple[float, bool] | None:
    """One window ``(problem, release, tail, until, windows left, call, whole graph)`` in the child:
    :func:`least_makespan` in an even share of the time left among it and the windows after it (at most
    :data:`WINDOW_SECONDS` for a window around a critical op); nothing once the call's whole graph was proven optimal
    (no window of it proves more)."""
    problem, release, tail, until, left, call, whole = item
    seconds = min((until - time.monotonic()) / max(left, 1), math.inf if whole else WINDOW_SECONDS)
    if seconds <= MIN_SECONDS or _SOLVED.get(call, (0.0, False))[1]:
        return None
    found = least_makespan(problem, seconds, release, tail)
    if whole and found is not None:
        _SOLVED[call] = found
    return found


def free_cores() -> float:
    """Cores this process may run on (its affinity) less the one-minute load average, at least 0."""
    cores, load = machine()
    return max(0.0, cores - load)


class Running:
    """A bound computing in a child process while the caller searches (a solve's model or heuristics): ``fn(*args)``
    in the child, ``finish`` of its answer the bound; :meth:`value` collects it, :meth:`close` stops the child
    (always call it, e.g. in ``finally``)."""

    def __init__(self, problem: Any, until: float, fn: Any, args: tuple, finish: Any, note: str = ""):
        from .cpsat import spawn_pool

        self.problem, self.until, self.finish, self.note = problem, until, finish, note
        self.found: float | None = None
        self.closed: tuple[float, str] | None = None  # the caller's closed-form bound and its proof, kept beside
        # (solve computes it once)
        self.pool = spawn_pool()
        self.job = self.pool.apply_async(fn, args)

    def value(self, by: float) -> float | None:
        """The bound (cost-model units) when the child has answered by ``by`` (a :func:`time.monotonic` reading),
        else ``None``."""
        import multiprocessing

        if self.found is not None:
            return self.found
        try:
            answer = self.job.get(max(0.0, min(by, self.until + 1.0) - time.monotonic()))
        except (multiprocessing.TimeoutError, PlacementError):  # a child that failed or is late proves nothing
            return None
        self.found = self.finish(answer)
        return self.found

    def close(self) -> None:
        self.pool.terminate()
        self.pool.join()


class Done:
    """A bound computed in this process (no core to spare for a child), with :class:`Running`'s interface."""

    def __init__(self, problem: Any, until: float, found: float | None, note: str):
        self.problem, self.until, self.found, self.note = problem, until, found, note
        self.closed: tuple[float, str] | None = None  # as Running's

    def value(self, by: float) -> float | None:
        return self.found

    def close(self) -> None:
        pass


def lp_bound(problem: Any, until: float) -> float:
    """:func:`~placement_dsl.bounds.segment_lp.segment_lp_bound` by ``until`` (a :func:`time.monotonic` reading)."""
    return segment_lp_bound(problem, Deadline(max(0.0, until - time.monotonic())))[0]


def _sized(problem: Any) -> bool:
    return MIN_OPS <= problem.graph.n <= MAX_OPS


def start(problem: Any, until: float) -> Running | None:
    """CP-SAT's segments of ``problem`` in a child process until ``until`` (a :func:`time.monotonic` reading), or
    ``None`` when it has no segment to price (or they hold under :data:`MIN_SHARE` of its ops), fewer than
    :data:`MIN_OPS` ops, too many for the cut ops' reachability, or OR-Tools is missing."""
    from . import cpsat

    if not _sized(problem) or not cpsat.available() or until - time.monotonic() < 2.0:
        return None
    cut_total, parts = segments(problem)
    if not _worth(problem, parts):
        return None  # e.g. GPT-3's one small segment beside 24 layers of 166 ops: nothing to gain for a child
    todo = [i for i, s in enumerate(parts) if s.problem is not None]
    own, where = distinct([parts[i].problem for i in todo])  # identical segments priced once

    def finish(once: list[tuple[float, bool] | None]) -> float:
        return combined(cut_total, parts, {i: None if once[k] is None else once[k][0] for i, k in zip(todo, where)})

    return Running(problem, until, solve_segments, (own, until), finish)


def _worth(problem: Any, parts: list[Any]) -> bool:
    """Whether the segments CP-SAT would price hold :data:`MIN_SHARE` of the graph's ops or more."""
    return sum(s.ops for s in parts if s.problem is not None) >= MIN_SHARE * problem.graph.n


def beside(problem: Any, until: float, in_process: float, lps_alone: float | None = None) -> Running | Done | None:
    """The segments' bound beside a solve until ``until``: CP-SAT's (:func:`start`) or else the segments' LPs in a
    child process when a core is free (:func:`free_cores`), else the LPs in this process for ``in_process`` seconds,
    or ``lps_alone`` (default ``in_process``) where CP-SAT's segments are not worth a child after them
    (:class:`Done`, its note naming the load); ``None`` for a graph outside :data:`MIN_OPS` .. :data:`MAX_OPS` ops
    or a budget under 2 s."""
    if not _sized(problem) or until - time.monotonic() < 2.0:
        return None
    spare = free_cores()
    if spare < MIN_FREE:  # one process at a time: the LPs here, then CP-SAT's segments in a child it waits for
        from . import cpsat

        worth = cpsat.available() and _worth(problem, segments(problem)[1])
        seconds = in_process if worth or lps_alone is None else lps_alone
        clock = Deadline(min(seconds, until - time.monotonic()))
        found = segment_lp_bound(problem, clock.within(clock.left() / 2 if worth else clock.left()))[0] \
            if problem.graph.n <= LP_MAX_OPS else 0.0
        if worth and not clock.expired(CHILD_LEAST):
            found = max(found, schedule_segment_bound(problem, clock)[0])
        return Done(problem, until, found, f"segment bound priced for {clock.seconds:.1f} s before the search, "
                    f"{'by LPs and CP-SAT' if worth else 'by LPs'}: no core free for a child ({spare:.1f} idle)")
    running = start(problem, until)
    if running is None and problem.graph.n <= LP_MAX_OPS:
        running = Running(problem, until, lp_bound, (problem, until), float)
    return running
