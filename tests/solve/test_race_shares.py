"""How the "auto" start shares its time among its searches for a throughput problem.

The DP over ideals is exact among contiguous splits, and its class bound closes the gap; on ResNet-152 x 10 (2,080
ops) it takes 1.1 s once its kernels are loaded, yet seventh of eleven searches in a 2 s race it never ran. A
max-load problem has no improving method either, so the share's last 60 % was left unused.
"""
from __future__ import annotations

import pytest

from placement_dsl import starts, testing
from placement_dsl.deadline import Deadline
from placement_dsl.starts import BASELINES, LEAD_SHARE, race, resolve


@pytest.fixture
def calls(monkeypatch):
    """The searches' names and time limits, in the order the race ran them (here, not in a child)."""
    seen: list[tuple[str, float]] = []
    real = starts.run

    def recording(method, *args, time_limit=None, **kwargs):
        seen.append((method, time_limit))
        return real(method, *args, time_limit=time_limit, **kwargs)
    monkeypatch.setattr(starts, "run", recording)
    monkeypatch.setattr(starts, "FORK", False)
    return seen


def test_a_throughput_race_runs_the_dp_first_after_the_baselines_with_its_lead_share(calls):
    problem, optimum = testing.chain()
    best, _, _ = race(problem, ["slicegraph", "mla", "random", "dp", "greedy"], 4.0)
    searches = [(m, t) for m, t in calls if m not in BASELINES]
    assert searches[0][0] == "dp" and searches[0][1] >= LEAD_SHARE * 4.0 - 0.5
    assert calls[0][0] == "greedy"
    assert best.usable and best.objective == pytest.approx(optimum)


def test_auto_without_an_improving_method_races_in_its_whole_share(monkeypatch):
    given = []
    raced = starts.race

    def racing(problem, methods, seconds, *args, **kwargs):
        given.append(seconds)
        return raced(problem, methods, seconds, *args, **kwargs)
    monkeypatch.setattr(starts, "race", racing)
    problem, _ = testing.chain()
    assert starts.goal(problem) not in starts.IMPROVING
    found = resolve(problem, "auto", deadline=Deadline(100.0), share=0.02, cap=2.0)
    assert found.usable and given and given[0] > starts.RACE * 2.0


def test_a_race_ends_once_a_start_meets_the_class_bound_a_search_proved(calls):
    """The DP's split is optimal among contiguous splits: the metaheuristics after it cannot beat it, and their
    share went unused (the race of ResNet-152 onto 16 stages ran 25 s after the DP's 9.32 was proven)."""
    from placement_dsl.constraints import Contiguous
    from placement_dsl.objectives import Bottleneck
    from placement_dsl.problem import Problem, Stages

    problem, optimum = Problem(testing.chain_graph([2, 2, 2, 2]), Stages(2), Bottleneck(), [Contiguous()]), 5.0
    best, _, unfinished = race(problem, ["dp", "slicegraph", "random", "greedy"], 30.0)
    assert [m for m, _ in calls] == ["greedy", "dp"] and unfinished == []
    assert best.objective == pytest.approx(optimum) and best.bound == pytest.approx(optimum)


def test_a_makespan_race_runs_cpop_first_after_the_baselines(calls):
    # schedule-ls gets furthest from CPOP's schedule (GPT-3 330M inter-server: 214.1 in 30 s from its 253.6), but
    # sixth of eight in the race, behind GETF and m-SCT (30 s each under load), it never ran in a solve's start
    from placement_dsl.constraints import Congestion
    from placement_dsl.objectives import Makespan
    from placement_dsl.problem import Problem
    from placement_dsl.zoo import gpt3

    w = gpt3(None, layers=1, hidden=512, heads=8, seq_len=512, cluster="inter-server")
    problem = Problem(w.graph, w.cluster, Makespan(), [Congestion("port")])
    methods = starts.auto_methods(problem)
    assert methods.index("cpop") > methods.index("getf")  # the registry's order, which the race no longer follows
    best, _, _ = race(problem, methods, 20.0)
    searches = [m for m, _ in calls if m not in BASELINES]
    assert searches[0] == "cpop" and best.usable
