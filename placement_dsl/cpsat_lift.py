"""CP-SAT's proofs for the lifted split heads (:mod:`placement_dsl.bounds.head_lift`), in a child process.

The pass and its windows are the bounds layer's; each window's proven least makespan comes from the package's CP-SAT
model with the window's releases (:func:`placement_dsl.cpsat_segments.least_makespan`), which needs OR-Tools in a
child process (:func:`placement_dsl.cpsat.isolated_each`). The pass is sequential (a window's releases are the lifts
of the windows before it), so the child keeps it between items: the first item builds it and prices the tails, each
later one carries it on for :data:`STEP_SECONDS` and answers the bound so far, which the parent keeps as it comes
(anytime: stopped at the clock, the last answer stands).

The clock is shared out as the pass goes: what is left, less the time the heads of the ops not yet reached take
(measured on the tails), over the anchors left, at most :data:`ANCHOR_SECONDS` a window; when that is less than
:data:`ANCHOR_LEAST`, the anchors are spaced further apart (the ops between them priced by their split heads alone).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from .bounds.head_lift import ANCHOR_OPS, MAX_OPS, STRIDE, HeadLift
from .bounds.windows import critical_windows
from .cpsat_segments import CHILD_LEAST, MIN_SECONDS, WINDOW_SECONDS, least_makespan
from .deadline import Deadline, slowdown

SECONDS = 10.0  # the default clock
STEP_SECONDS = 1.0  # the child's work per item: how often the parent gets the bound so far
ANCHOR_SECONDS = 0.5  # CP-SAT's most time on one window: 32-op windows are proven in 0.05-0.3 s or not in 2 s
ANCHOR_LEAST = 0.15  # a window's least share before the anchors are spaced further apart
PASS_PER_OP = 3e-4  # seconds per op of one split-heads pass (a 300-task sheet's 897 ops: 0.25 s at load 7 on 2 cores)
_LIFTS: dict[str, HeadLift] = {}  # in the child: each call's pass
_PACE: dict[str, float] = {}  # in the child: each call's measured seconds per op of a pass
_OVERHEAD: dict[str, float] = {}  # in the child: each call's seconds per window beyond CP-SAT's search (its build)
GRACE = 1.0  # seconds the windows leave before the clock: the pass's last answer must reach the parent by then
PASS_MARGIN = 1.5  # the pass's heads after the last window may take this times the tails' pace


def needs(problem: Any) -> float:
    """Seconds the level needs before its first window: the child's start and both passes over the ops."""
    return CHILD_LEAST + 2 * PASS_PER_OP * problem.graph.n * slowdown()


def lifted_head_bound(problem: Any, deadline: Deadline | None = None, anchor_ops: int = ANCHOR_OPS,
                      stride: int = STRIDE, by: Callable[[Any], Any] | None = None) -> tuple[float, str, bool]:
    """The lifted split heads' bound of :mod:`placement_dsl.bounds.head_lift`, a note, and whether the pass reached
    the last op. Declined at once (the note starts with ``declined``, the bound is 0) for a graph past
    :data:`~placement_dsl.bounds.head_lift.MAX_OPS` ops, without OR-Tools, or when ``deadline`` (default
    :data:`SECONDS`) leaves less than :func:`needs`. ``anchor_ops`` and ``stride``: the windows' ops and the
    positions between two anchors; ``by``: the child's step (default :func:`lift_by`, which a variant may wrap)."""
    from . import cpsat

    clock = deadline or Deadline(SECONDS)
    n = problem.graph.n
    if n > MAX_OPS:
        return 0.0, f"declined: {n} ops (the ancestor sets of at most {MAX_OPS} ops)", True
    if not cpsat.available():
        return 0.0, "declined: CP-SAT (OR-Tools) is not installed", True
    need = needs(problem)
    if clock.left() < need:
        return 0.0, f"declined: {clock.left():.1f} s left, the child and the passes need {need:.1f} s", True
    until, key = time.monotonic() + clock.left(), f"{time.monotonic():.9f}"
    steps = 1 + math.ceil(clock.left() / STEP_SECONDS) + 1
    items = [(problem, key, until, anchor_ops, stride)] + [(None, key, until, 0, 0)] * steps
    answers = [a for a in cpsat.isolated_each(by or lift_by, items, clock.at) if a is not None]
    if not answers:
        return 0.0, "declined: the child priced no tails in time", False
    value, note, complete = answers[-1]
    return value, note, complete


def lift_by(item: tuple[Any, str, float, int, int]) -> tuple[float, str, bool] | None:
    """One item ``(problem or None, call, until, anchor ops, stride)`` in the child: the first builds the pass and
    prices the tails, each later one carries the pass on for :data:`STEP_SECONDS` (module docstring), or once it
    reached the last op prices the critical windows from the lifted heads; the bound so far, its note and whether
    the pass is complete (``None`` before the tails are priced)."""
    problem, key, until, anchor_ops, stride = item
    if problem is not None:
        t0 = time.monotonic()
        state = HeadLift(problem, anchor_ops, stride)
        if not state.start(Deadline(until - time.monotonic())):
            return None
        _LIFTS[key] = state
        _PACE[key] = (time.monotonic() - t0) / max(problem.graph.n, 1)
        return _answer(state)
    state = _LIFTS.get(key)
    if state is None:
        return None
    stop = min(until, time.monotonic() + STEP_SECONDS)
    n = len(state.order)
    if state.done >= n and state.windows < 0:  # the pass was answered: the devices' work, then the critical windows
        if not state.worked:
            state.work()
            return _answer(state)
        _critical(state, until - GRACE)
        return _answer(state)
    while state.done < n and time.monotonic() < stop:
        left = until - GRACE - time.monotonic() - _PACE[key] * (n - state.done) * PASS_MARGIN
        if left <= 0:  # what is left prices the heads of the ops not reached, without windows
            state.advance(n, Deadline(until - time.monotonic()))
            break
        anchors = max((n - max(state.cursor, state.done)) / state.stride, 1.0)
        cost = ANCHOR_LEAST + _OVERHEAD.get(key, 0.0)
        if left / anchors < cost:  # space the anchors out to what the clock affords
            state.stride = max(state.stride, math.ceil((n - state.done) / max(left / cost, 1.0)))
            anchors = max((n - max(state.cursor, state.done)) / state.stride, 1.0)
        anchor = state.next_anchor(Deadline(until - time.monotonic()))
        if anchor is None:
            break
        seconds = min(ANCHOR_SECONDS, left / anchors - _OVERHEAD.get(key, 0.0), until - time.monotonic())
        if seconds <= MIN_SECONDS:
            continue
        w, t0 = anchor.window, time.monotonic()
        found = least_makespan(w.problem, seconds, w.release, w.tail)
        spent = max(time.monotonic() - t0 - seconds, 0.0)  # the window's build (the first: OR-Tools' import too)
        if state.anchors > 1:
            _OVERHEAD[key] = spent if key not in _OVERHEAD else 0.7 * _OVERHEAD[key] + 0.3 * spent
        if found is not None:
            state.lift(anchor, found[0] + w.offset)
    return _answer(state)


def _critical(state: HeadLift, until: float) -> None:
    """The windows around the most critical ops (:func:`~placement_dsl.bounds.windows.critical_windows`) priced
    from the lifted heads and the tails by ``until``, each in an even share of the time left (at most
    :data:`~placement_dsl.cpsat_segments.WINDOW_SECONDS`), the best kept as the state's :attr:`best`."""
    _, windows = critical_windows(state.problem, state.heads, state.tails, state.times)
    state.windows = 0
    for k, w in enumerate(windows):
        seconds = min(WINDOW_SECONDS, (until - time.monotonic()) / (len(windows) - k))
        if seconds <= MIN_SECONDS:
            break
        found = least_makespan(w.problem, seconds, w.release, w.tail)
        state.windows += 1
        if found is not None:
            state.best = max(state.best, found[0] + w.offset)


def _answer(state: HeadLift) -> tuple[float, str, bool]:
    value, op = state.bound()
    n = len(state.order)
    complete = state.done >= n
    reached = "" if complete else f", the pass stopped at {state.done} of {n} ops"
    what = (f"op {op!r}: its lifted head, time and tail" if op is not None else
            f"the devices' work between the lifted heads and the tails, or a window of the {max(state.windows, 0)} "
            "around the most critical ops from them")
    return value, (f"split heads lifted by {state.anchors} windows of up to {state.anchor_ops} ancestors scheduled "
                   f"by CP-SAT ({state.lifted} lifted); {what}{reached}"), complete
