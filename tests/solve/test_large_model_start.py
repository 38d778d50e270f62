"""A solve whose model is large for its time makes a start though none was asked for.

The throughput IP of a ResNet-152 (208 ops) onto 16 stages found no incumbent in 60 s without a
start; a model that fits but takes a good share of the time to build now starts from the
heuristics' best, and answers at least as well as they do.
"""
from __future__ import annotations

import time

import pytest

from placement_dsl import testing, zoo
from placement_dsl.bounds import one_or_cut
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import DagOrder
from placement_dsl.deadline import Deadline
from placement_dsl.heuristics import run
from placement_dsl.io import Workload
from placement_dsl.presets import problem_for_method, resize
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.solvers import available_solvers
from placement_dsl.starts import resolve

pytestmark = pytest.mark.skipif("highs" not in available_solvers(), reason="needs HiGHS")
LIMIT = 8.0


def test_a_large_throughput_model_without_a_start_answers_at_least_as_well_as_the_heuristics(monkeypatch) -> None:
    # builds estimated 13 times slower than placement MIPs build idle: the model takes more than a tenth of the time
    monkeypatch.setattr("placement_dsl.deadline.SECONDS_PER_NONZERO", 1.3e-4)
    w = zoo.resnet(152)
    problem = problem_for_method(Workload(w.graph, resize(w.cluster, 4)), objective="throughput", method="ip")
    t0 = time.monotonic()
    result = solve(problem, time_limit=3 * LIMIT)
    assert time.monotonic() - t0 <= 3 * LIMIT + 5
    assert result.placement is not None and result.found_by.startswith("warm start (auto")
    heuristic = run("slicegraph", problem.graph, problem.cluster, model=problem.cost_model())
    assert result.objective <= heuristic.objective * (1 + 1e-9)
    assert result.bound is None or result.bound <= result.objective * (1 + 1e-9)


def test_a_throughput_solve_reports_the_one_device_or_cut_bound_when_it_beats_the_starts() -> None:
    """A GPT-3 layer on two devices whose every cut costs more than the whole load (1 kB per ms): one-or-cut proves
    the whole load, Lemma 3.3 half of it, and the DP's class bound, stopped early, less than the whole."""
    w = zoo.gpt3(layers=1, hidden=1024, heads=16, vocab=8192)
    slow = Cluster([d.model_copy(update={"bandwidth": 1e3}) for d in resize(w.cluster, 2).devices])
    problem = problem_for_method(Workload(w.graph, slow), objective="throughput", method="ip")
    result = solve(problem, time_limit=LIMIT)
    assert result.objective is not None and result.bound is not None
    assert result.bound == pytest.approx(one_or_cut.problem_bound(problem), rel=1e-9)
    assert result.bound == pytest.approx(result.objective, rel=1e-9)


def test_the_auto_start_keeps_the_best_class_bound_of_every_search_not_only_the_winners() -> None:
    """On ResNet-152 onto 4 stages slicegraph finds 16.77 first and the DP, finding the same, proves it optimal
    among the DP class (contiguous and DAG-ordered; a residual block's branches leave room for a contiguous split
    whose quotient has a cycle, outside it): the start's bound is the DP's, though slicegraph's split is the one
    kept."""
    w = zoo.resnet(152)
    contiguous = problem_for_method(Workload(w.graph, resize(w.cluster, 4)), objective="throughput", method="ip")
    problem = Problem(contiguous.graph, contiguous.cluster, contiguous.objective, [*contiguous.constraints, DagOrder()])
    found = resolve(problem, "auto", deadline=Deadline(4 * LIMIT), share=1.0, cap=4 * LIMIT)  # time for every
    # search: the race is stopped at its share, and a first run in a process loads its kernels (7 s at load 8)
    dp = run("dp", problem.graph, problem.cluster, model=problem.cost_model())
    assert found.usable and found.bound is not None
    assert found.bound >= dp.bound * (1 - 1e-9) and found.bound <= found.objective * (1 + 1e-9)


def test_a_model_built_too_late_for_its_hand_off_is_not_handed_to_the_solver(monkeypatch) -> None:
    """The arrays' extraction after the build cannot be stopped and takes about as long as the build: a build that
    leaves less than that answers with what it has, within the limit."""
    import placement_dsl.solve as solve_module

    built = solve_module.compile

    def slow_compile(*args, **kwargs):
        out = built(*args, **kwargs)
        time.sleep(2.5)
        return out

    def solver(*args, **kwargs):
        raise AssertionError("the model was handed to the solver")

    monkeypatch.setattr(solve_module, "compile", slow_compile)
    monkeypatch.setattr(solve_module, "solve_model", solver)
    problem, _ = testing.chain()
    t0 = time.monotonic()
    result = solve(problem, time_limit=4.5, warm_start="greedy")
    assert time.monotonic() - t0 <= 4.5 + 1.0
    assert result.placement is not None and "hand-off" in result.message


def test_a_stopped_throughput_solve_reports_what_only_the_host_s_memory_can_hold(monkeypatch) -> None:
    """Six ops of 10 GB and work 1 (100 on the CPU) onto two 16 GB accelerators and a CPU: at least 28 GB must run on
    the CPU, a load of at least 280 (the fractional knapsack; each accelerator holds one op, so the optimum is 400),
    which the capacity bound proves and Lemma 3.3 (about 2) does not."""
    import placement_dsl.solve as solve_module
    from placement_dsl.cluster import Cluster
    from placement_dsl.constraints import Memory
    from placement_dsl.graph import Graph, Op
    from placement_dsl.objectives import Throughput
    from placement_dsl.problem import Problem
    from placement_dsl.solvers import SolverOutcome, Status

    ops = [Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 100.0}, param_bytes=10e9) for i in range(6)]
    graph = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(5)])
    problem = Problem(graph, Cluster.accelerators(2, memory=16e9, cpus=1), Throughput(), [Memory()])
    monkeypatch.setattr(solve_module, "solve_model",
                        lambda model, solver, options, start=None: SolverOutcome(Status.TIME_LIMIT_NO_SOLUTION, None,
                                                                                 1e-3, False, solver))
    start = {"v0": "acc0", "v1": "acc1", **{f"v{i}": "cpu0" for i in range(2, 6)}}
    result = solve(problem, warm_start=start, time_limit=LIMIT)
    assert result.bound == pytest.approx(280, rel=1e-9) and "by a closed form" in result.message


def test_a_model_too_large_to_be_built_answers_the_heuristics_best_not_the_fallback(monkeypatch) -> None:
    """A throughput IP of 2,080 ops at load 8 answered greedy's 134.31 after 6.5 s of a 60 s limit: no start was
    made for a model too large to build. Its start now gets the budget, and the DP finds and proves 132.95."""
    import placement_dsl.solve as solve_module
    from placement_dsl import stopped
    from placement_dsl.deadline import BudgetSpent

    def too_large(*args, **kwargs):
        raise BudgetSpent("model too large for the time left")

    monkeypatch.setattr(stopped, "build_seconds", lambda problem, form, loaded=True: 1e6)
    monkeypatch.setattr(solve_module, "check_fits", too_large)
    problem, optimum = testing.chain()  # greedy and one device: 8; the DP: 5
    t0 = time.monotonic()
    result = solve(problem, time_limit=LIMIT)
    assert time.monotonic() - t0 <= LIMIT + 5
    assert result.found_by.startswith("warm start (auto") and result.objective == pytest.approx(optimum)
    assert result.bound == pytest.approx(optimum)


@pytest.mark.parametrize("fraction", [0.05, 0.15, 0.25, 0.4, 2.0])
def test_a_large_model_s_start_gets_a_large_share_and_a_model_too_large_nearly_all(monkeypatch, fraction) -> None:
    """ResNet-152 onto 16 stages (208 ops): a 16 s build after a 7 s start (15 % of the time) whose DP was stopped
    before its end; the MIP kept greedy's 52.84 for 23 s where the DP finds and proves 9.32."""
    from placement_dsl import stopped
    from placement_dsl.formulations import get
    from placement_dsl.sizing import MIN_SEARCH

    problem, _ = testing.chain()
    clock = Deadline(60.0)
    left = clock.left() - stopped.RESERVE
    monkeypatch.setattr(stopped, "build_seconds", lambda problem, form, loaded=True: fraction * left)
    share = stopped.start_share(problem, get("auto", problem), None, clock)
    assert stopped.start_share(problem, get("auto", problem), "greedy", clock) is None  # a start was asked for
    if fraction <= stopped.LARGE:
        assert share is None
    elif fraction * left > left - MIN_SEARCH:
        assert share == stopped.INSTEAD_SHARE
    else:
        assert share == stopped.LARGE_SHARE


def test_a_makespan_too_large_to_model_continues_its_start_with_fresh_seeds_after_the_windows_stall(monkeypatch):
    """GoogLeNet at 60 s: the start was continued twice from its local optimum with the same seed (10 s for the same
    1.35716), and the windows, which found nothing, kept the rest of the time."""
    import placement_dsl.solve as solve_module
    from placement_dsl import stopped
    from placement_dsl.deadline import BudgetSpent
    from placement_dsl.search import anytime

    def too_large(*args, **kwargs):
        raise BudgetSpent("model too large for the time left")

    calls, raced = [], []
    improve, race = stopped.improve, stopped.race

    def recorded(problem, start, seconds, seed=0, method=None, **options):
        calls.append((method or "schedule-ls", seed))
        return improve(problem, start, seconds, seed, method, **options)

    monkeypatch.setattr(stopped, "build_seconds", lambda problem, form, loaded=True: 1e6)
    monkeypatch.setattr(solve_module, "check_fits", too_large)
    monkeypatch.setattr(stopped, "improve", recorded)
    monkeypatch.setattr(stopped, "race", lambda problem, methods, *a, **k: (raced.append(methods), race(
        problem, methods, *a, **k))[1])
    monkeypatch.setattr(anytime, "step", lambda *args, **kwargs: (None, {}))  # windows that find nothing
    problem, _ = testing.makespan_fork()
    t0 = time.monotonic()
    result = solve(problem, time_limit=LIMIT)
    assert time.monotonic() - t0 <= LIMIT + 5 and not problem.violations(result.placement)
    lns = calls.index(("makespan-lns", 0))
    assert calls[lns + 1:] and all(m == "schedule-ls" for m, _ in calls[lns + 1:])  # the time the windows gave back
    seeds = [s for m, s in calls if m == "schedule-ls"]
    assert len(seeds) == len(set(seeds))  # no continuation repeats another's seed
    assert not any("schedule-ls" in methods for methods in raced)  # it runs from the best start, not from its own


@pytest.mark.parametrize("fraction", [0.02, 0.3])
def test_an_auto_makespan_solve_builds_its_model_only_with_time_to_search_it(monkeypatch, fraction) -> None:
    """GoogLeNet at 60 s, once its model was sized right: a 7.6 s build and 23 s of search kept the start's 1.35716,
    where the critical-chain and window searches reach 1.32959 in that time. One sizing check
    (:func:`placement_dsl.sizing.check_fits`) with the search the solve asks per second of build."""
    from placement_dsl import sizing, stopped
    from placement_dsl.deadline import BudgetSpent
    from placement_dsl.formulations import get

    problem, _ = testing.makespan_fork()
    clock = Deadline(60.0)
    left = clock.left() - stopped.RESERVE
    monkeypatch.setattr(sizing, "build_times", lambda problem, form, within=None: sizing.Build(fraction * left, fraction * left, 0.0))
    form = get("auto", problem)
    named = stopped.search_per_build(problem, "list")  # a start asked for by name: the model is built
    sizing.check_fits(problem, form, clock, clock.left() - stopped.RESERVE, named)
    per = stopped.search_per_build(problem, "auto")
    if fraction * (1 + per) <= 1:
        sizing.check_fits(problem, form, clock, clock.left() - stopped.RESERVE, per)
    else:
        with pytest.raises(BudgetSpent, match="searched"):
            sizing.check_fits(problem, form, clock, clock.left() - stopped.RESERVE, per)


@pytest.mark.parametrize(("build", "built"), [(0.5, True), (1.5, False)])
def test_a_model_built_within_a_second_is_searched_whatever_the_ratio_asked(monkeypatch, build, built) -> None:
    """8 ops on a line of 4 devices, a makespan solve at 10 s: the model, estimated at 0.45 s to build under load
    (0.12 s built, proved optimal in 0.45 s in all), was refused for want of 20 times its build in search."""
    from placement_dsl import sizing, stopped
    from placement_dsl.deadline import BudgetSpent
    from placement_dsl.formulations import get

    problem, _ = testing.makespan_fork()
    clock = Deadline(10.0)
    monkeypatch.setattr(sizing, "build_times", lambda problem, form, within=None: sizing.Build(build, build, 0.0))
    per = stopped.search_per_build(problem, "auto")
    assert build * (1 + per) > clock.left()  # the ratio alone would refuse both
    if built:
        sizing.check_fits(problem, get("auto", problem), clock, clock.left(), per)
    else:
        with pytest.raises(BudgetSpent, match="searched"):
            sizing.check_fits(problem, get("auto", problem), clock, clock.left(), per)


@pytest.mark.parametrize("warm_start", [None, "none"])
def test_a_small_throughput_model_with_no_start_asked_for_starts_from_auto(monkeypatch, warm_start) -> None:
    """GPT-3 of 217 ops onto 16 stages, 30 s, no start: HiGHS found no incumbent of a quickly built model and the
    answer was greedy's split 12.744 where the linearized DP finds 7.1019 in about a second. No start asked
    for is "auto" for a small model too (in its small share); ``"none"`` asks for no start and gets the fallback split."""
    import placement_dsl.solve as solve_module
    from placement_dsl import stopped
    from placement_dsl.solvers import SolverOutcome, Status

    monkeypatch.setattr(stopped, "build_seconds", lambda problem, form, loaded=True: 1e-3)  # small for the time
    monkeypatch.setattr(solve_module, "solve_model",
                        lambda model, solver, options, start=None: SolverOutcome(Status.TIME_LIMIT_NO_SOLUTION, None,
                                                                                 1e-3, False, solver))
    problem, optimum = testing.chain()  # greedy and one device: 8; the DP: 5
    result = solve(problem, time_limit=LIMIT, warm_start=warm_start)
    if warm_start is None:
        assert result.found_by.startswith("warm start (auto") and result.objective == pytest.approx(optimum)
    else:
        assert result.found_by.startswith("fallback")  # the balanced split, not a start


def test_no_start_asked_for_means_auto_for_every_objective_and_none_means_no_start() -> None:
    from placement_dsl.starts import AUTO, NONE
    from placement_dsl.stopped import start_spec

    problem, _ = testing.chain()
    assert start_spec(problem, None) == AUTO and start_spec(problem, NONE) is None
    assert start_spec(problem, "dpl") == "dpl" and resolve(problem, NONE).placement is None
