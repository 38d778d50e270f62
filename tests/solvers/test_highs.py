"""The HiGHS backend (solvers/highs.py) driven by stand-ins for ``highspy.Highs`` and its callback events: the
options it sets, the hand-off, the start's verdict, bounds and interrupts, the final status, and ``run``; every
option, callback and status path is checked entry by entry without solving.
"""
from __future__ import annotations

import math
import sys
import time
from types import SimpleNamespace

import highspy
import numpy as np
import pytest

from placement_dsl.solvers import highs
from placement_dsl.solvers.base import Bound, Final, HandedOff, Incumbent, Native, SolveOptions, StartVerdict


# ---------------------------------------------------------------------------- stand-ins
class Recorder:
    """A ``highspy.Highs`` stand-in that records every option set on it."""

    def __init__(self):
        self.options: dict[str, object] = {}

    def setOptionValue(self, name, value):
        assert name not in self.options or name == "time_limit", f"{name} set twice"
        self.options[name] = value

    def getOptionValue(self, name):
        defaults = {"mip_feasibility_tolerance": 1e-6, "mip_abs_gap": 1e-6}
        return highspy.HighsStatus.kOk, self.options.get(name, defaults.get(name))


def event(objective=0.0, seconds=0.0, bound=-math.inf, x=(), message=""):
    """A callback event as HiGHS hands it to a subscriber (only the fields the backend reads)."""
    out = SimpleNamespace(objective_function_value=objective, running_time=seconds, mip_dual_bound=bound,
                          mip_solution=list(x))
    ev = SimpleNamespace(data_out=out, message=message, interrupted=False)
    ev.interrupt = lambda: setattr(ev, "interrupted", True)
    return ev


def watch(start_objective=None, deadline=math.inf):
    reports = []
    return highs._Watch(reports.append, deadline, start_objective), reports


# ---------------------------------------------------------------------------- _configure
def test_configure_sets_each_option_by_its_highs_name():
    h = Recorder()
    highs._configure(h, SolveOptions(threads=3, gap=0.25, cutoff=7), 12.5)
    assert h.options == {"output_flag": False, "log_to_console": False, "threads": 3, "time_limit": 12.5,
                         "mip_rel_gap": 0.25, "objective_bound": 7.0}
    assert type(h.options["threads"]) is int and type(h.options["objective_bound"]) is float


def test_configure_logs_to_file_or_console_as_asked(tmp_path):
    h = Recorder()
    highs._configure(h, SolveOptions(log_path=tmp_path / "h.log"), 1.0)
    # a log file switches HiGHS's output on, but not the console
    assert h.options["output_flag"] is True and h.options["log_to_console"] is False
    assert h.options["log_file"] == str(tmp_path / "h.log")
    assert "objective_bound" not in h.options  # no cutoff
    h = Recorder()
    highs._configure(h, SolveOptions(verbose=True), 1.0)
    assert h.options["output_flag"] is True and h.options["log_to_console"] is True
    assert "log_file" not in h.options


def test_configure_never_hands_highs_a_time_limit_below_a_hundredth():
    # a deadline already past (-3 s left) still gives HiGHS 0.01 s, never a negative limit
    for seconds, expected in ((-3.0, 0.01), (0.0, 0.01), (0.02, 0.02)):
        h = Recorder()
        highs._configure(h, SolveOptions(), seconds)
        assert h.options["time_limit"] == expected


# ---------------------------------------------------------------------------- _hand_off
def test_hand_off_refuses_a_model_highs_rejects():
    lm = SimpleNamespace(n_cols=1, n_rows=0, value=np.zeros(0), cost=np.ones(1), col_lower=np.zeros(1),
                         col_upper=np.ones(1), row_lower=np.zeros(0), row_upper=np.zeros(0),
                         start=np.zeros(2, dtype=np.int32), index=np.zeros(0, dtype=np.int32),
                         integer=np.zeros(1, dtype=bool))
    seen = []

    class Refuses:
        def passModel(self, *args):
            seen.append(args)
            return highspy.HighsStatus.kError

    class Warns:
        def passModel(self, *args):
            return highspy.HighsStatus.kWarning

    with pytest.raises(RuntimeError, match=r"^HiGHS refused the model: HighsStatus\.kError$"):
        highs._hand_off(Refuses(), lm)
    highs._hand_off(Warns(), lm)  # a warning is no refusal
    # columns, rows, nonzeros, column-wise (1), minimize (1), offset 0, then the arrays
    assert seen[0][:6] == (1, 0, 0, 1, 1, 0.0)
    assert seen[0][-1].dtype == np.int32


# ---------------------------------------------------------------------------- _Watch
def test_first_incumbent_at_the_start_objective_accepts_the_start():
    w, reports = watch(start_objective=5.0)
    w.logging(event(message="... MIP start solution is feasible, objective 5 ..."))
    w.improving(event(objective=5.0, seconds=0.0, bound=3.0, x=[1, 0]))
    verdict, incumbent, bound = reports
    assert verdict == StartVerdict(True, "HiGHS's first incumbent (t=0.000s) is the start; "
                                         "log: MIP start solution is feasible")
    assert isinstance(incumbent, Incumbent) and (incumbent.seconds, incumbent.objective) == (0.0, 5.0)
    assert incumbent.x.dtype == float and incumbent.x.tolist() == [1.0, 0.0]
    assert bound == Bound(0.0, 3.0)
    # later incumbents are not judged again
    w.improving(event(objective=4.0, seconds=1.0, bound=3.0, x=[0, 1]))
    assert [type(r) for r in reports[3:]] == [Incumbent]


def test_first_incumbent_elsewhere_refuses_the_start_with_both_values():
    w, reports = watch(start_objective=5.0)
    w.logging(event(message="Presolving model"))  # not the feasibility line
    w.improving(event(objective=6.0, seconds=0.25))
    assert reports[0] == StartVerdict(False, "HiGHS's first incumbent (t=0.250s) differs from the start: "
                                             "6 vs 5 in model units")
    # a relative difference of 1e-5 is no match at HiGHS's feasibility tolerance (1e-6)
    w, reports = watch(start_objective=5.0)
    w.improving(event(objective=5.0 + 5e-5))
    assert reports[0].accepted is False
    # within it: 5 + 4e-6 is 8e-7 apart relatively
    w, reports = watch(start_objective=5.0)
    w.improving(event(objective=5.0 + 4e-6))
    assert reports[0].accepted is True


def test_a_start_repaired_within_the_feasibility_tolerance_is_the_start():
    # HiGHS recomputed an optimal latency start of 5.25 as 5.250000006: 1.1e-9 apart relatively,
    # far inside what HiGHS can tell apart, so the start was taken
    w, reports = watch(start_objective=5.25)
    w.improving(event(objective=5.250000006))
    assert reports[0].accepted is True
    # the tolerances are HiGHS's own: at a feasibility tolerance and absolute gap of 1e-10 it is not the start
    reports = []
    w = highs._Watch(reports.append, math.inf, 5.25, (1e-10, 1e-10))
    w.improving(event(objective=5.250000006))
    assert reports[0].accepted is False


def test_start_tolerance_reads_the_options_highs_solves_with():
    h = highs.new_highs()
    assert highs.start_tolerance(h) == (1e-6, 1e-6)  # HiGHS's defaults
    h.setOptionValue("mip_feasibility_tolerance", 1e-8)
    h.setOptionValue("mip_abs_gap", 1e-5)
    assert highs.start_tolerance(h) == (1e-8, 1e-5)
    h.setOptionValue("mip_abs_gap", 1e-9)  # the absolute tolerance is never below the feasibility one
    assert highs.start_tolerance(h) == (1e-8, 1e-8)
    # later highspy versions answer the value alone
    assert highs._option(SimpleNamespace(getOptionValue=lambda name: 3e-7), "mip_abs_gap", 1.0) == 3e-7


def test_a_start_at_zero_matches_within_the_absolute_tolerance():
    # at 0 no relative tolerance helps: 5e-7 from a start of 0 is within abs_tol = 1e-6, 5e-6 is not
    w, reports = watch(start_objective=0.0)
    w.improving(event(objective=5e-7))
    assert reports[0].accepted is True
    w, reports = watch(start_objective=0.0)
    w.improving(event(objective=5e-6))
    assert reports[0].accepted is False


def test_without_a_start_no_verdict_is_reported():
    w, reports = watch(start_objective=None)
    w.improving(event(objective=2.0, seconds=0.5, x=[1]))
    assert [type(r) for r in reports] == [Incumbent]


def test_bounds_are_reported_only_when_they_rise_past_a_relative_hair():
    w, reports = watch()
    w.mip_logging(event(bound=-math.inf))  # none yet
    w.mip_logging(event(bound=math.nan))
    w.mip_logging(event(bound=0.5, seconds=1.0))
    w.mip_logging(event(bound=0.5, seconds=2.0))  # the same bound again
    w.mip_logging(event(bound=0.5 + 1e-12, seconds=2.5))  # exactly at the hair (the same float sum): no rise
    # below |b| = 1 the hair is 1e-12 absolute: 0.5 + 1.5e-12 counts, 0.5 + 1.5e-12 + 5e-13 does not
    w.mip_logging(event(bound=0.5 + 1.5e-12, seconds=3.0))
    w.mip_logging(event(bound=0.5 + 2.0e-12, seconds=4.0))
    # above 1 it is relative: at 1000 a rise of 5e-10 (below 1e-9) is none, 2e-9 is one
    w.mip_logging(event(bound=1000.0, seconds=5.0))
    w.mip_logging(event(bound=1000.0 + 5e-10, seconds=6.0))
    w.mip_logging(event(bound=1000.0 + 2e-9, seconds=7.0))
    w.mip_logging(event(bound=math.inf, seconds=8.0))
    w.mip_logging(event(bound=999.0, seconds=9.0))  # a lower bound than the best is never reported
    assert [(r.seconds, r.bound) for r in reports] == [(1.0, 0.5), (3.0, 0.5 + 1.5e-12), (5.0, 1000.0),
                                                      (7.0, 1000.0 + 2e-9)]
    assert all(type(r) is Bound for r in reports)
    assert w.bound == 1000.0 + 2e-9


def test_interrupt_only_past_the_deadline_and_reads_the_bound_first():
    w, reports = watch(deadline=math.inf)
    ev = event(bound=2.0, seconds=0.1)
    w.interrupt(ev)
    assert not ev.interrupted and reports == [Bound(0.1, 2.0)]
    w, reports = watch(deadline=-math.inf)
    ev = event(bound=2.0, seconds=0.1)
    w.interrupt(ev)
    assert ev.interrupted and reports == [Bound(0.1, 2.0)]


def test_no_interrupt_at_the_deadline_itself(monkeypatch):
    # the clock reads exactly the deadline (100): not past it, so the search goes on
    monkeypatch.setattr(highs.time, "monotonic", lambda: 100.0)
    w, _ = watch(deadline=100.0)
    ev = event()
    w.interrupt(ev)
    assert not ev.interrupted
    w, _ = watch(deadline=99.5)
    w.interrupt(ev)
    assert ev.interrupted


def test_subscribe_wires_each_callback_to_its_handler():
    w, _ = watch()
    subscribed = {}

    def channel(name):
        return SimpleNamespace(subscribe=lambda f: subscribed.setdefault(name, f))

    h = SimpleNamespace(**{n: channel(n) for n in ("cbMipImprovingSolution", "cbMipLogging", "cbMipInterrupt",
                                                    "cbLogging")})
    highs._subscribe(h, w)
    assert subscribed == {"cbMipImprovingSolution": w.improving, "cbMipLogging": w.mip_logging,
                          "cbMipInterrupt": w.interrupt, "cbLogging": w.logging}


# ---------------------------------------------------------------------------- _final
class Ended:
    """A ``highspy.Highs`` stand-in after ``run()``."""

    def __init__(self, status, solution_status=2, objective=4.0, bound=3.0, cols=2, x=(1.0, 0.0)):
        self.status, self.cols = status, cols
        self.info = SimpleNamespace(primal_solution_status=solution_status, objective_function_value=objective,
                                    mip_dual_bound=bound)
        self.x = list(x)

    def getModelStatus(self):
        return self.status

    def getInfo(self):
        return self.info

    def getSolution(self):
        return SimpleNamespace(col_value=self.x)

    def getNumCol(self):
        return self.cols

    def modelStatusToString(self, status):
        return _NAMER.modelStatusToString(status)


S = highspy.HighsModelStatus
_NAMER = highspy.Highs()  # HiGHS's own names of its statuses (the real class, before any test replaces it)


def test_final_of_a_mip_with_a_solution_and_a_bound():
    f = highs._final(Ended(S.kTimeLimit, objective=4.0, bound=3.0), highs._status_table(), 1.5)
    assert (f.native, f.code, f.objective, f.bound, f.seconds) == (Native.LIMIT, "Time limit reached", 4.0, 3.0, 1.5)
    assert f.x.dtype == float and f.x.tolist() == [1.0, 0.0]


def test_final_without_a_feasible_solution_has_neither_values_nor_objective():
    # primal_solution_status 1 is "infeasible point", 0 "no solution": only 2 is a solution
    for solution_status in (0, 1):
        f = highs._final(Ended(S.kTimeLimit, solution_status=solution_status), highs._status_table(), 0.0)
        assert f.x is None and f.objective is None and f.bound == 3.0


def test_final_bound_of_an_lp_is_its_optimum_and_of_an_empty_model_none():
    # an LP: HiGHS's MIP dual bound is infinite; solved to optimality its value (4) is its own bound
    f = highs._final(Ended(S.kOptimal, bound=math.inf), highs._status_table(), 0.0)
    assert f.bound == 4.0 and f.native is Native.OPTIMAL
    # not optimal: no bound from the value
    f = highs._final(Ended(S.kTimeLimit, bound=math.inf), highs._status_table(), 0.0)
    assert f.bound is None
    # optimal without a solution: nothing to take the bound from
    f = highs._final(Ended(S.kOptimal, solution_status=0, bound=math.inf), highs._status_table(), 0.0)
    assert f.bound is None
    # no columns: the dual bound HiGHS reports (here 3) is not read, the optimum (4) is the bound
    f = highs._final(Ended(S.kOptimal, bound=3.0, cols=0), highs._status_table(), 0.0)
    assert f.bound == 4.0


# ---------------------------------------------------------------------------- run
class FakeHighs(Recorder, Ended):
    """``highspy.Highs`` for :func:`highs.run`: takes any model, refuses the start if told, ends at ``status``."""

    refuse_start = False

    def __init__(self):
        Recorder.__init__(self)
        Ended.__init__(self, S.kTimeLimit, solution_status=0, bound=math.inf)
        for name in ("cbMipImprovingSolution", "cbMipLogging", "cbMipInterrupt", "cbLogging"):
            setattr(self, name, SimpleNamespace(subscribe=lambda f: None))
        self.time_limits = []
        FakeHighs.last = self

    def setOptionValue(self, name, value):
        if name == "time_limit":
            self.time_limits.append(value)
        Recorder.setOptionValue(self, name, value)

    def passModel(self, *args):
        return highspy.HighsStatus.kOk

    def setSolution(self, n, index, values):
        return highspy.HighsStatus.kError if self.refuse_start else highspy.HighsStatus.kOk

    def run(self):
        pass


def _one_column():
    return SimpleNamespace(n_cols=1, n_rows=0, value=np.zeros(0), cost=np.ones(1), col_lower=np.zeros(1),
                           col_upper=np.ones(1), row_lower=np.zeros(0), row_upper=np.zeros(0),
                           start=np.zeros(2, dtype=np.int32), index=np.zeros(0, dtype=np.int32),
                           integer=np.ones(1, dtype=bool))


@pytest.mark.parametrize("refuse", [True, False])
def test_run_reports_a_refused_start_once_and_limits_the_time_from_now(monkeypatch, refuse):
    monkeypatch.setattr(highspy, "Highs", FakeHighs)
    monkeypatch.setattr(FakeHighs, "refuse_start", refuse)
    reports = []
    deadline = time.monotonic() + 5.0
    highs.run(_one_column(), SolveOptions(), np.ones(1), 1.0, deadline, reports.append)
    # both time limits are what is left of the 5 s, set just before: above 4, at most 5
    assert all(4.0 < limit <= 5.0 for limit in FakeHighs.last.time_limits)
    assert len(FakeHighs.last.time_limits) == 2
    verdicts = [r for r in reports if isinstance(r, StartVerdict)]
    final = reports[-1]
    assert isinstance(final, Final) and final.native is Native.LIMIT
    assert 0.0 <= final.seconds < 5.0  # the search's own time (run() returns at once), not a clock reading
    handed = [r for r in reports if isinstance(r, HandedOff)]
    assert len(handed) == 1 and 0.0 <= handed[0].seconds < 5.0
    if refuse:  # refused: said once, not again as "no incumbent at the start"
        assert verdicts == [StartVerdict(False, "HiGHS setSolution refused the start")]
    else:  # taken, but no incumbent came: said at the end with HiGHS's status
        assert verdicts == [StartVerdict(False, "HiGHS reported no incumbent at the start (Time limit reached)")]


def test_run_past_its_deadline_still_hands_highs_a_hundredth(monkeypatch):
    # the deadline passed a second ago: both limits are the floor 0.01 s, never what a clock reads
    monkeypatch.setattr(highspy, "Highs", FakeHighs)
    highs.run(_one_column(), SolveOptions(), None, None, time.monotonic() - 1.0, lambda report: None)
    assert FakeHighs.last.time_limits == [0.01, 0.01]


class PresolvedHighs(FakeHighs):
    """HiGHS whose presolve alone (no node, no LP iteration) calls the MIP infeasible, and which solves it
    (optimal, at 2.0) once presolve is off; it records the starts it is given."""

    def __init__(self):
        super().__init__()
        self.starts = []
        self.first_run = 0.0
        self._verdict(S.kInfeasible, solution_status=0)

    def _verdict(self, status, solution_status, nodes=0):
        self.status = status
        self.info = SimpleNamespace(primal_solution_status=solution_status, objective_function_value=2.0,
                                    mip_dual_bound=2.0, mip_node_count=nodes, simplex_iteration_count=0)

    def setSolution(self, n, index, values):
        self.starts.append(None if values is None else list(values))
        return highspy.HighsStatus.kOk

    def getRunTime(self):
        return self.first_run  # the first run's seconds, which HiGHS counts against the second's limit

    def run(self):
        if self.options.get("presolve") == "off":
            self._verdict(S.kOptimal, solution_status=2, nodes=1)


@pytest.mark.parametrize("left", [5.0, 0.5])
def test_run_checks_a_verdict_presolve_reached_alone_without_presolve(monkeypatch, left):
    monkeypatch.setattr(highspy, "Highs", PresolvedHighs)
    reports = []
    highs.run(_one_column(), SolveOptions(), np.ones(1), 1.0, time.monotonic() + left, reports.append)
    h, final = FakeHighs.last, reports[-1]
    assert h.options["presolve"] == "off" and h.starts == [[1.0], [1.0]]  # the start passed to both solves
    assert len(h.time_limits) == 3 and all(left - 1.0 < limit <= left for limit in h.time_limits)
    assert (final.native, final.objective, final.bound) == (Native.OPTIMAL, 2.0, 2.0)
    assert 0.0 <= final.seconds < left  # both searches' own time, not a clock reading


def test_the_run_without_presolve_gets_the_time_left_beyond_what_the_first_run_used(monkeypatch):
    # HiGHS counts an instance's runs together: after a 30 s first run, a limit of the 5 s left would stop the
    # re-run at once, so its limit is the first run's seconds plus the time left
    class Slow(PresolvedHighs):
        def __init__(self):
            super().__init__()
            self.first_run = 30.0

    monkeypatch.setattr(highspy, "Highs", Slow)
    highs.run(_one_column(), SolveOptions(), None, None, time.monotonic() + 5.0, lambda report: None)
    assert 34.0 < FakeHighs.last.time_limits[-1] <= 35.0


@pytest.mark.parametrize("verbose", [False, True])
def test_run_makes_its_highs_as_loud_as_asked(monkeypatch, verbose):
    made = []
    monkeypatch.setattr(highs, "new_highs", lambda loud: made.append(loud) or FakeHighs())
    highs.run(_one_column(), SolveOptions(verbose=verbose), None, None, time.monotonic() + 5.0, lambda report: None)
    assert made == [verbose]


def test_run_trusts_a_verdict_reached_past_presolve(monkeypatch):
    # infeasible after a node: no second solve, presolve stays as HiGHS chose it
    class Searched(PresolvedHighs):
        def __init__(self):
            super().__init__()
            self._verdict(S.kInfeasible, solution_status=0, nodes=1)

    monkeypatch.setattr(highspy, "Highs", Searched)
    reports = []
    highs.run(_one_column(), SolveOptions(), None, None, time.monotonic() + 5.0, reports.append)
    assert "presolve" not in FakeHighs.last.options and reports[-1].native is Native.INFEASIBLE


def test_available_says_no_without_highspy(monkeypatch):
    monkeypatch.setitem(sys.modules, "highspy", None)  # importing it raises ImportError
    assert highs.available() is False
    monkeypatch.undo()
    assert highs.available() is True


