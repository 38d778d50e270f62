"""The project's own time limit: run a solver worker so that it can be stopped at the deadline.

A worker is ``run(lm, options, start, start_objective, deadline, emit)``: it reports
:class:`~.base.Incumbent`, :class:`~.base.Bound`, :class:`~.base.StartVerdict` and
:class:`~.base.HandedOff` as they happen and ends with a :class:`~.base.Final`. Two layers
enforce the deadline:

1. cooperative — the worker asks its solver to stop at the deadline (callbacks, interrupt API);
2. forced — with ``isolate=True`` the worker runs in a child process that streams its reports
   through a pipe; at ``deadline + grace`` the child is terminated and the best incumbent and
   bound received so far are the answer.

Inside a daemonic process (which may not have children) only layer 1 is available.
"""
from __future__ import annotations

import math
import multiprocessing as mp
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..progress import report_mip
from .base import Bound, Final, HandedOff, Incumbent, Native, Report, SolveOptions, StartVerdict
from .matrix import LinearModel

Worker = Callable[..., None]


@dataclass
class Collected:
    """Everything a worker reported, folded into the best incumbent and bound."""

    objective: float | None = None
    x: np.ndarray | None = None
    bound: float | None = None
    verdict: StartVerdict | None = None
    handoff: float = 0.0
    final: Final | None = None
    stopped: bool = False
    solve_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def drain(self, recv) -> bool:
        """Fold in every report waiting in the pipe ``recv``; False when the sender has closed it (a worker that
        ended, or died, as the deadline passed: what it sent before is in)."""
        try:
            while recv.poll(0):
                self.add(recv.recv())
        except (EOFError, OSError):
            return False
        return True

    def add(self, report: Report) -> None:
        if isinstance(report, Incumbent):
            self._incumbent(report.objective, report.x)
            report_mip(self.objective, self.bound)
        elif isinstance(report, Bound):
            self._bound(report.bound)
            report_mip(self.objective, self.bound)
        elif isinstance(report, StartVerdict):
            self.verdict = self.verdict or report
        elif isinstance(report, HandedOff):
            self.handoff = report.seconds
        elif isinstance(report, Final):
            self.final = report
            if report.x is not None and report.objective is not None:
                self._incumbent(report.objective, report.x)
            if report.bound is not None:
                self._bound(report.bound)

    def _incumbent(self, objective: float, x: np.ndarray) -> None:
        if self.objective is None or objective <= self.objective:
            self.objective, self.x = objective, x

    def _bound(self, bound: float) -> None:
        if math.isfinite(bound) and (self.bound is None or bound > self.bound):
            self.bound = bound

    @property
    def native(self) -> Native:
        if self.final is not None:
            return self.final.native
        return Native.LIMIT if self.stopped else Native.ERROR


def _child(conn, worker: Worker, lm: LinearModel, options: SolveOptions, start, start_objective, deadline) -> None:
    try:
        worker(lm, options, start, start_objective, deadline, conn.send)
    except BaseException as err:  # noqa: BLE001 - whatever ends the worker is reported; the parent decides
        conn.send(Final(Native.ERROR, f"{type(err).__name__}: {err}", None, None, None, 0.0))
    finally:
        conn.close()


def _context() -> mp.context.BaseContext:
    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods else "spawn")


def can_isolate() -> bool:
    """Whether this process may start a child process (daemonic processes may not)."""
    return not mp.current_process().daemon


def run_in_process(worker: Worker, lm: LinearModel, options: SolveOptions, start, start_objective,
                   deadline: float) -> Collected:
    """Layer 1 only: the worker runs here and stops itself at the deadline."""
    got = Collected()
    t0 = time.perf_counter()
    try:
        worker(lm, options, start, start_objective, deadline, got.add)
    except Exception as err:  # noqa: BLE001 - a worker's fault is an ERROR outcome, as in the child process
        got.add(Final(Native.ERROR, f"{type(err).__name__}: {err}", None, None, None, 0.0))
    got.solve_seconds = max(time.perf_counter() - t0 - got.handoff, 0.0)
    return got


def run_isolated(worker: Worker, lm: LinearModel, options: SolveOptions, start, start_objective,
                 deadline: float) -> Collected:
    """Layers 1 and 2: the worker runs in a child process, stopped at ``deadline + grace``."""
    ctx = _context()
    recv, send = ctx.Pipe(duplex=False)
    args = (send, worker, lm.payload(), options, start, start_objective, deadline)
    proc = ctx.Process(target=_child, args=args, daemon=True, name="placement_dsl-solver")
    got = Collected()
    t0 = time.perf_counter()
    proc.start()
    send.close()
    try:
        _pump(recv, proc, got, deadline + options.grace)
    finally:
        _stop(proc)
        recv.close()
    got.solve_seconds = max(time.perf_counter() - t0 - got.handoff, 0.0)
    return got


def _pump(recv, proc, got: Collected, hard_deadline: float) -> None:
    """Fold reports into ``got`` until the worker's final report, its death, or the hard deadline."""
    while got.final is None:
        left = hard_deadline - time.monotonic()
        if left <= 0:
            got.drain(recv)
            got.stopped = got.final is None
            if not got.stopped:
                return
            got.notes.append("solver overran the time limit and was stopped by the project")
            return
        try:
            if recv.poll(min(left, 0.05)):
                got.add(recv.recv())
            elif not proc.is_alive() and not recv.poll(0):
                got.notes.append(f"solver process ended without a final report (exit code {proc.exitcode})")
                return
        except EOFError:  # the child is exiting: wait a moment for its exit code
            proc.join(timeout=1.0)
            got.notes.append(f"solver process closed its pipe (exit code {proc.exitcode})")
            return


def _stop(proc) -> None:
    proc.join(timeout=0.2)
    if proc.is_alive():
        proc.terminate()
        proc.join(timeout=1.0)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=1.0)


def run(worker: Worker, lm: LinearModel, options: SolveOptions, start, start_objective, deadline: float) -> Collected:
    """Run ``worker`` under the deadline, isolated in a child process when allowed."""
    if options.isolate and can_isolate():
        return run_isolated(worker, lm, options, start, start_objective, deadline)
    return run_in_process(worker, lm, options, start, start_objective, deadline)
