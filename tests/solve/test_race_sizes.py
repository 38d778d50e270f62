"""A race starts no method its time left cannot hold once a start is held: a pass whose estimate, corrected by what the
passes before it overran theirs, passes the race's end, and an improving search with less than its set-up.

On a GPT of 5,057 ops onto MOIRAI's inter-server cluster (60 s solve, load 5) the passes ran 1.5 times their
estimates; m-SCT was started with 1.5 s of its 3.9 s and cut short for nothing, and the schedule search, given 0.1 s,
took 1.0 s before its first look at its clock. The clock here is a counter the methods advance: no timing.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from placement_dsl import starts
from placement_dsl.cluster import Cluster, Device
from placement_dsl.deadline import Deadline
from placement_dsl.heuristics import run as real_run
from placement_dsl.heuristics.pass_costs import Sizes
from placement_dsl.objectives import Makespan
from placement_dsl.problem import Problem
from placement_dsl.testing import chain_graph


def _problem() -> Problem:
    """A three-op chain onto two devices that run one op at a time (MOIRAI's schedule: the makespan's searches)."""
    return Problem(chain_graph([1.0, 2.0, 3.0]), Cluster([Device(name=f"d{i}", invocations=False) for i in range(2)]),
                   Makespan(), [])


class Clock:
    """A monotonic clock that moves only when a method runs."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


def _race(monkeypatch, took: dict[str, float], passes: dict[str, float], until: float,
          set_up: float = 0.0) -> tuple[list[str], list[tuple]]:
    """The race child's messages on a small makespan, each method taking ``took[method]`` seconds of the clock."""
    clock, ran = Clock(), []

    def running(method, graph, cluster, **kwargs):
        ran.append(method)
        clock.now += took.get(method, 0.0)
        return real_run("one-device" if method not in ("greedy", "one-device") else method, graph, cluster,
                        model=kwargs.get("model"))
    monkeypatch.setattr(starts, "run", running)
    monkeypatch.setattr(starts, "time", SimpleNamespace(monotonic=clock.monotonic, perf_counter=clock.monotonic))
    problem = _problem()
    sent: list[tuple] = []
    sizes = Sizes(passes, {"schedule-ls": set_up * starts.SET_UP["schedule-ls"]})
    starts._race_child(sent.append, problem, [*passes, "greedy", "schedule-ls"], clock.now + until, None, True,
                       sizes=sizes)
    return ran, sent


def test_a_pass_its_corrected_estimate_cannot_fit_is_not_started(monkeypatch):
    """HEFT ran twice its estimate: GETF's 1 s is 2 s now, more than the 1 s left; it is done as cut short."""
    ran, sent = _race(monkeypatch, {"list": 2.0}, {"list": 1.0, "getf": 1.0}, until=3.0)
    assert ran[:2] == ["list", "greedy"]
    assert ("done", "getf", "", True, None) in sent


def test_a_pass_that_fits_its_corrected_estimate_runs(monkeypatch):
    ran, _ = _race(monkeypatch, {"list": 1.0}, {"list": 1.0, "getf": 1.0}, until=3.0)
    assert ran[:3] == ["list", "getf", "greedy"]


def test_an_improving_search_is_not_started_with_less_than_its_set_up(monkeypatch):
    """schedule-ls builds its state (3 evaluations' worth, ``starts.SET_UP``) before it reads its clock."""
    ran, sent = _race(monkeypatch, {"list": 1.0}, {"list": 1.0}, until=2.0, set_up=0.5)
    assert "schedule-ls" not in ran
    assert ("done", "schedule-ls", "", True, None) in sent
    ran, _ = _race(monkeypatch, {"list": 1.0}, {"list": 1.0}, until=4.0, set_up=0.5)
    assert "schedule-ls" in ran


@pytest.mark.parametrize("held", [False, True])
def test_a_race_for_a_caller_that_holds_a_start_starts_no_pass_its_time_cannot_hold(monkeypatch, held):
    """Solve's rerun of the passes its start cut short holds the start already: m-SCT, estimated at 10 s, is not
    started in a race of 1 s (on a GPT of 5,057 ops it was run again with 4.8 s of its 6.6 s, and cut again)."""
    ran = []

    def running(method, graph, cluster, **kwargs):
        ran.append(method)
        return real_run("one-device", graph, cluster, model=kwargs.get("model"))
    monkeypatch.setattr(starts, "run", running)
    monkeypatch.setattr(starts, "FORK", False)
    monkeypatch.setattr(starts, "pass_estimates", lambda problem, methods: {"m-sct": 10.0})
    _, _, unfinished = starts.race(_problem(), ["m-sct"], 1.0, Deadline(3.0), even=False, held=held)
    assert ran == ([] if held else ["m-sct"])
    assert unfinished == (["m-sct"] if held else [])


def test_sizes_correct_the_estimates_by_the_passes_overrun_only():
    sizes = Sizes({"list": 1.0, "getf": 2.0}, {"schedule-ls": 0.7})
    assert sizes.need("getf") == 2.0 and sizes.need("greedy") == 0.0 and sizes.need("schedule-ls") == 0.7
    sizes.ran("greedy", 5.0)  # not a pass: corrects nothing
    assert sizes.overrun() == 1.0
    sizes.ran("list", 3.0)
    assert sizes.overrun() == pytest.approx(3.0) and sizes.need("getf") == pytest.approx(6.0)
    sizes = Sizes({"list": 1.0})
    sizes.ran("list", 0.2)  # faster than estimated: never below the estimate
    assert sizes.overrun() == 1.0


def _raced(monkeypatch, found_nothing: bool = False) -> list[list[str]]:
    """The methods of each race an "auto" start of a small makespan runs (the first finding nothing, if asked)."""
    raced, real = [], starts.race

    def racing(problem, methods, seconds, *args, **kwargs):
        raced.append(list(methods))
        if found_nothing and len(raced) == 1:
            return starts.Start(), [], list(methods)
        return real(problem, methods, seconds, *args, **kwargs)
    monkeypatch.setattr(starts, "race", racing)
    monkeypatch.setattr(starts, "FORK", False)
    problem = _problem()
    assert starts.resolve(problem, "auto", share=1.0, cap=2.0).usable
    return raced


def test_the_improving_method_continues_the_race_s_best_and_is_not_raced_from_its_own_start(monkeypatch):
    """schedule-ls continues the best start after the race (improve); raced from HEFT's too, it took 5.9 s of a
    5,057-op GPT's start for 29.59 where the race held CPOP's 25.95."""
    raced = _raced(monkeypatch)
    assert len(raced) == 1 and "list" in raced[0] and "schedule-ls" not in raced[0]


def test_the_improving_method_searches_on_its_own_where_the_race_holds_no_start(monkeypatch):
    raced = _raced(monkeypatch, found_nothing=True)
    assert raced[1] == ["schedule-ls"]


def test_solve_reruns_what_its_start_cut_short_as_a_race_for_a_held_start(monkeypatch):
    """heuristics_instead (a model too large) reruns the searches the start cut short in a race told that a start
    is held, so that it starts no pass its time cannot hold."""
    from placement_dsl import stopped
    from placement_dsl.formulations import get

    calls = []

    def racing(problem, methods, seconds, deadline=None, even=True, held=False):
        calls.append((list(methods), held))
        return starts.Start(), [], list(methods)
    monkeypatch.setattr(stopped, "race", racing)
    monkeypatch.setattr(stopped, "improve", lambda problem, current, *args, **kwargs: current)
    monkeypatch.setattr(stopped, "whole_model", lambda problem, current, clock: (current, None))
    monkeypatch.setattr(stopped, "MIN_COARSE", 1e9)  # no window search, nor restarts: the rerun alone
    monkeypatch.setattr(stopped, "tail", lambda stop, current, pool, clock, phases: current)
    problem = _problem()
    placement = real_run("one-device", problem.graph, problem.cluster, model=problem.cost_model()).placement
    stop = stopped.Stop(problem, get("schedule"), "ip", "highs", "auto: one-device", placement,
                        problem.evaluate(placement), "", 0.0)
    stop.unfinished = ("m-sct",)
    stopped.heuristics_instead(stop, starts.AUTO, Deadline(30.0))
    assert calls == [(["m-sct"], True)]


def test_a_pass_estimate_reads_the_load_as_every_wall_estimate_does(monkeypatch):
    """A pass's wall seconds are its CPU seconds times the margin and the machine's contention, the one reading of
    the load (``deadline.contention``): the pass costs computed the load per core again from ``machine()``."""
    from placement_dsl import deadline
    from placement_dsl.heuristics.pass_costs import PASS_MARGIN, cpu_seconds, pass_wall

    p = _problem()
    monkeypatch.setattr(deadline, "machine", lambda: (2, 7.0))
    wall = pass_wall(p.graph, p.cluster, ["list"])["list"]
    assert wall == pytest.approx(cpu_seconds(p.graph, p.cluster.size, "list") * PASS_MARGIN * 3.5)
