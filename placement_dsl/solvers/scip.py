"""SCIP through pyscipopt: hand-off via an MPS file written by HiGHS in bulk, MIP start by
``addSol``, incumbents and bounds from an event handler, and an interrupt from a timer.

SCIP has been seen to overrun its own ``limits/time`` by 40 % and more; the timer calls
``interruptSolve`` at the deadline while the search runs without the GIL, and the process
guard (:mod:`.guard`) stops the worker outright if even that does not end it.
"""
from __future__ import annotations

import math
import re
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from .base import Bound, Capabilities, Emit, Final, HandedOff, Incumbent, Native, SolveOptions, StartVerdict, lookup
from .matrix import LinearModel

NAME = "scip"
CAPABILITIES = Capabilities(mip_start=True, time_limit=True, gap=True, reports_bound=True, streams_incumbents=True)

STATUS = {
    "optimal": Native.OPTIMAL,
    "gaplimit": Native.OPTIMAL,  # optimal within the requested relative gap
    "infeasible": Native.INFEASIBLE,
    "unbounded": Native.UNBOUNDED,
    "inforunbd": Native.INF_OR_UNBD,
    "timelimit": Native.LIMIT,
    "userinterrupt": Native.LIMIT,
    "nodelimit": Native.LIMIT,
    "totalnodelimit": Native.LIMIT,
    "stallnodelimit": Native.LIMIT,
    "sollimit": Native.LIMIT,
    "bestsollimit": Native.LIMIT,
    "restartlimit": Native.LIMIT,
    "primallimit": Native.LIMIT,
    "duallimit": Native.LIMIT,
    "terminate": Native.LIMIT,
    "memlimit": Native.ERROR,
    "unknown": Native.UNKNOWN,
}


def available() -> bool:
    try:
        import pyscipopt  # noqa: F401
    except ImportError:
        return False
    return True


def _write_mps(lm: LinearModel, path: Path) -> None:
    from .highs import new_highs

    h = new_highs()
    h.setOptionValue("output_flag", False)
    h.passModel(lm.n_cols, lm.n_rows, len(lm.value), 1, 1, 0.0, lm.cost, lm.col_lower, lm.col_upper,
                lm.row_lower, lm.row_upper, lm.start, lm.index, lm.value, lm.integer.astype(np.int32))
    for j in range(lm.n_cols):
        h.passColName(j, f"x{j}")
    h.writeModel(str(path))


def _load(lm: LinearModel, options: SolveOptions, tmp: Path, log: Path):
    """A pyscipopt model of ``lm`` and its variables in column order."""
    import pyscipopt

    model = pyscipopt.Model()
    model.hideOutput(not options.verbose)
    model.setLogfile(str(log))
    path = tmp / "model.mps"
    _write_mps(lm, path)
    model.readProblem(str(path))
    cols = [None] * lm.n_cols
    for var in model.getVars():
        cols[int(var.name[1:])] = var
    model.setParam("parallel/maxnthreads", int(options.threads))
    model.setParam("limits/gap", float(options.gap))
    if options.cutoff is not None:
        model.setObjlimit(float(options.cutoff))
    return model, cols


def _handler_class():
    import pyscipopt

    class Watch(pyscipopt.Eventhdlr):
        """Streams incumbents and bounds; interrupts at the deadline."""

        def __init__(self, cols, emit: Emit, deadline: float, start_objective: float | None, log: Path | None):
            self.cols, self.emit, self.deadline, self.log = cols, emit, deadline, log
            self.start_objective, self.first, self.bound = start_objective, True, -math.inf

        def eventinit(self):
            for kind in (pyscipopt.SCIP_EVENTTYPE.BESTSOLFOUND, pyscipopt.SCIP_EVENTTYPE.NODESOLVED):
                self.model.catchEvent(kind, self)

        def eventexit(self):
            for kind in (pyscipopt.SCIP_EVENTTYPE.BESTSOLFOUND, pyscipopt.SCIP_EVENTTYPE.NODESOLVED):
                self.model.dropEvent(kind, self)

        def eventexec(self, event):
            m = self.model
            self.judge_start()
            if event.getType() == pyscipopt.SCIP_EVENTTYPE.BESTSOLFOUND:
                self._incumbent(m, m.getBestSol())
            self._bound(m)
            if time.monotonic() > self.deadline:
                m.interruptSolve()

        def _incumbent(self, m, sol) -> None:
            self.judge_start()
            x = np.array([m.getSolVal(sol, v) for v in self.cols])
            self.emit(Incumbent(float(m.getSolvingTime()), float(m.getSolObjVal(sol)), x))

        def judge_start(self) -> None:
            """Judge the start once, from SCIP's log line about its solution candidate storage."""
            if self.first and self.start_objective is not None and self.log is not None:
                self.first = False
                self.emit(_verdict(self.log, self.start_objective))

        def _bound(self, m) -> None:
            b = float(m.getDualbound())
            if math.isfinite(b) and abs(b) < 1e19 and b > self.bound + 1e-12 * max(1.0, abs(b)):
                self.bound = b
                self.emit(Bound(float(m.getSolvingTime()), b))

    return Watch


START_LINE = re.compile(r"feasible solution given by solution candidate storage, new primal bound (\S+)")


def _verdict(log: Path, start_objective: float) -> StartVerdict:
    """Whether SCIP's log shows the start entering as the first primal bound."""
    try:
        text = log.read_text(errors="replace")
    except OSError as err:
        return StartVerdict(False, f"SCIP log unreadable: {err}")
    found = START_LINE.search(text)
    if found is None:
        return StartVerdict(False, "SCIP's log does not show the start being taken")
    bound = float(found.group(1))
    same = math.isclose(bound, start_objective, rel_tol=1e-6, abs_tol=1e-9)
    return StartVerdict(same, "SCIP log: the start from candidate storage became the incumbent" if same else
                        f"SCIP log: candidate storage gave primal bound {found.group(1)} (model units), not the start")


def _add_start(model, cols, start: np.ndarray, emit: Emit) -> bool:
    sol = model.createSol()
    for var, val in zip(cols, start.tolist()):
        model.setSolVal(sol, var, val)
    stored = model.addSol(sol, free=True)
    if not stored:
        emit(StartVerdict(False, "SCIP addSol did not store the start"))
    return bool(stored)


def _final(model, cols, seconds: float) -> Final:
    code = model.getStatus()
    has_x = model.getNSols() > 0
    x = obj = None
    if has_x:
        best = model.getBestSol()
        x = np.array([model.getSolVal(best, v) for v in cols])
        obj = float(model.getObjVal())
    b = float(model.getDualbound())
    bound = b if math.isfinite(b) and abs(b) < 1e19 else None
    return Final(lookup(STATUS, code), code, obj, bound, x, seconds)


def run(lm: LinearModel, options: SolveOptions, start: np.ndarray | None, start_objective: float | None,
        deadline: float, emit: Emit) -> None:
    """Solve ``lm`` with SCIP, reporting progress through ``emit`` and ending with a :class:`Final`."""
    with tempfile.TemporaryDirectory(prefix="placement_dsl_scip_") as tmp:
        log = Path(options.log_path) if options.log_path else Path(tmp) / "scip.log"
        _run(lm, options, start, start_objective, deadline, emit, Path(tmp), log)


def _run(lm, options, start, start_objective, deadline, emit, tmp: Path, log: Path) -> None:
    t0 = time.perf_counter()
    model, cols = _load(lm, options, tmp, log)
    watch = _handler_class()(cols, emit, deadline, start_objective, log)
    model.includeEventhdlr(watch, "placement_dsl_watch", "streams incumbents and bounds")
    if start is not None and not _add_start(model, cols, start, emit):
        watch.start_objective = None
    emit(HandedOff(time.perf_counter() - t0))
    model.setParam("limits/time", max(deadline - time.monotonic(), 0.01))
    timer = threading.Timer(max(deadline - time.monotonic(), 0.0), model.interruptSolve)
    timer.daemon = True
    t1 = time.perf_counter()
    timer.start()
    try:
        model.optimizeNogil()
    finally:
        timer.cancel()
    final = _final(model, cols, time.perf_counter() - t1)
    watch.judge_start()
    emit(final)
