"""A time limit is the wall-clock budget of the whole call: the Deadline, sizing models before they are built,
solve() and certify() stopping between phases, and their refusal of budgets that are not budgets."""
from __future__ import annotations

import math
import time

import pytest

from placement_dsl import sizing, testing
from placement_dsl.blocks.base import Context
from placement_dsl.blocks.latency_data import run_path_bound
from placement_dsl.certify import LEVELS, Level, LevelStatus, certify
from placement_dsl.compile import compile
from placement_dsl.deadline import BudgetSpent, Deadline, process_start, seconds
from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Latency
from placement_dsl.problem import Problem, Stages
from placement_dsl.solve import solve
from placement_dsl.solvers import SolveOptions, Status, solve_model

SPENT = Deadline(0.0)


# ---------------------------------------------------------------------------- the deadline
def test_a_deadline_counts_from_its_start_and_clips_to_what_is_left():
    d = Deadline(5.0, start=time.monotonic() - 2.0)
    assert 2.5 < d.left() <= 3.0 and not d.expired() and d.expired(margin=4.0)
    assert d.clip(1.0) == 1.0 and d.clip(10.0) <= 3.0 and d.clip(None) <= 3.0
    assert d.within(1.0).at <= d.at and d.within(100.0).at == d.at
    assert Deadline(1.0, start=time.monotonic() - 2.0).left() == 0.0


def stopped_status(result) -> Status:
    """The status of an answer its deadline stopped: optimal where its proven bound meets it, else time-limited."""
    met = result.bound is not None and result.bound >= result.objective - 1e-9 * max(1.0, abs(result.objective))
    return Status.OPTIMAL if met else Status.TIME_LIMIT_FEASIBLE


def test_a_spent_deadline_stops_with_what_it_was_about_to_do():
    with pytest.raises(BudgetSpent, match="before block 'x'"):
        SPENT.check("block 'x'")


def test_the_process_started_before_now():
    assert process_start() <= time.monotonic()


@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, "10", None, True])
def test_a_budget_that_is_not_a_number_of_seconds_is_refused_by_name(value):
    with pytest.raises(SpecError, match=rf"^budget {value!r}: give") as err:
        seconds(value, "budget")
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------------------- solve
@pytest.mark.parametrize("kwargs, field", [({"time_limit": "10"}, "time_limit"), ({"time_limit": math.nan}, "time_limit"),
                                           ({"time_limit": 0}, "time_limit"), ({"budget": -1}, "budget"),
                                           ({"warm_start": 42}, "warm_start"), ({"gap": "0.1"}, "gap"),
                                           ({"threads": 1.5}, "threads"), ({"windows": "yes"}, "windows"),
                                           ({"solver": 3}, "solver"), ({"log_path": 1}, "log_path"),
                                           ({"formulation": None}, "formulation"), ({"method": 1}, "method")])
def test_solve_refuses_a_wrong_input_naming_it(kwargs, field):
    problem, _ = testing.chain()
    with pytest.raises(SpecError, match=rf"^{field} "):
        solve(problem, **kwargs)


def test_a_spent_deadline_returns_the_start_at_once_with_a_bound(monkeypatch):
    problem, optimum = testing.chain()
    start = testing.brute_force(problem)[1]

    def no_build(*args, **kwargs):
        raise AssertionError("the model was built with no time left")
    monkeypatch.setattr("placement_dsl.compile.compile", no_build)
    t = time.perf_counter()
    result = solve(problem, warm_start=start, deadline=SPENT)
    assert time.perf_counter() - t < 1.0
    assert result.status is stopped_status(result) and result.placement is start
    assert result.objective == pytest.approx(optimum) and result.found_by == "warm start"
    assert result.bound is not None and 0 < result.bound <= result.objective
    assert "budget spent" in result.message


def test_a_model_too_large_for_the_time_left_is_not_built(monkeypatch):
    problem, optimum = testing.chain()
    monkeypatch.setattr("placement_dsl.deadline.SECONDS_PER_NONZERO", 1e3)
    monkeypatch.setattr("placement_dsl.compile.compile", lambda *a, **k: pytest.fail("built"))
    monkeypatch.setattr("placement_dsl.stopped.start_bound", lambda *a: (None, False))  # else the cut stages prove the
    # start before the sizing: tests/solve/test_priced_start.py
    result = solve(problem, time_limit=60, warm_start="dp")
    assert result.status is stopped_status(result) and result.objective == pytest.approx(optimum)
    assert "model too large for the time left" in result.message
    assert result.found_by == "warm start (dp)" and 0 < result.bound <= result.objective


def test_a_model_is_sized_for_the_machine_as_loaded(monkeypatch):
    # builds hold one core's share: at load 8 on two cores a schedule model estimated within its 10 s took 19.7 s
    from placement_dsl import deadline
    from placement_dsl.formulations import get
    from placement_dsl.sizing import check_fits, estimate_nonzeros

    monkeypatch.setattr(deadline.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(deadline.os, "getloadavg", lambda: (1.5, 0.0, 0.0))
    idle = deadline.model_seconds(1e4)
    assert idle == pytest.approx(deadline.model_cpu(1e4))  # CPU seconds, measured on an idle core
    monkeypatch.setattr(deadline.os, "getloadavg", lambda: (16.0, 0.0, 0.0))
    assert deadline.model_seconds(1e4) == pytest.approx(8 * idle)  # one core's share of 8 jobs per core
    problem, _ = testing.chain()
    nonzeros = estimate_nonzeros(problem, get("auto", problem))
    monkeypatch.setattr(deadline, "SECONDS_PER_NONZERO", 1.5 / nonzeros)  # the chain's model: 1.5 s idle
    with pytest.raises(deadline.BudgetSpent, match="model too large for the time left"):
        check_fits(problem, "auto", deadline.Deadline(60.0), 3.0)  # 4 times that, loaded, and a second of search
    monkeypatch.setattr(deadline.os, "getloadavg", lambda: (1.5, 0.0, 0.0))
    check_fits(problem, "auto", deadline.Deadline(60.0), 3.0)


def test_a_contiguous_problem_keeps_the_dps_bound_when_the_model_is_not_built(monkeypatch):
    problem, optimum = testing.contiguity_binds()
    monkeypatch.setattr("placement_dsl.deadline.SECONDS_PER_NONZERO", 1e3)
    result = solve(problem, time_limit=60, warm_start="dp")
    assert result.objective == pytest.approx(optimum) and result.bound == pytest.approx(optimum)
    assert "proven by the warm start's heuristic" in result.message


def test_without_a_start_the_stopped_solve_answers_a_fallback_split_with_a_bound():
    problem, optimum = testing.chain()
    result = solve(problem, deadline=SPENT, warm_start="none")
    assert result.status is stopped_status(result) and result.placement is not None
    assert result.found_by.startswith("fallback (") and "fallback split" in result.message
    assert problem.is_valid(result.placement) and 0 < result.bound <= optimum <= result.objective


def test_without_a_start_or_a_fallback_the_stopped_solve_has_no_placement_but_a_bound(monkeypatch):
    from placement_dsl.errors import PlacementError

    def none(*args, **kwargs):
        raise PlacementError("no split")
    monkeypatch.setattr("placement_dsl.heuristics.fallback.fallback", none)
    problem, _ = testing.chain()
    result = solve(problem, deadline=SPENT, warm_start="none")
    assert result.status is Status.TIME_LIMIT_NO_SOLUTION and result.placement is None
    assert result.bound is not None and result.bound > 0


def test_a_warm_start_heuristic_that_declines_the_graph_is_a_refused_start_not_an_error(monkeypatch):
    from placement_dsl.heuristics import base

    real = base.resolve

    def resolve(method):
        if method != "dp":
            return real(method)

        def declines(graph, cluster, model=None, seed=None, time_limit=None):
            raise SpecError("dp: graph 'chain' has at least 2^48 ideals")
        return declines
    monkeypatch.setattr(base, "resolve", resolve)
    problem, optimum = testing.chain()
    result = solve(problem, time_limit=30, warm_start="dp")
    assert result.status.is_ok and result.objective == pytest.approx(optimum)
    assert "warm start refused" in result.message and "2^48 ideals" in result.message


def test_the_build_stops_between_blocks_once_the_deadline_passes():
    problem, _ = testing.chain()
    with pytest.raises(BudgetSpent, match="before block '.*' of the '.*' model"):
        compile(problem, deadline=SPENT)


def test_a_hand_off_past_the_callers_deadline_returns_the_start():
    problem, optimum = testing.chain()
    compiled = compile(problem)
    start = compiled.varmap.values(testing.brute_force(problem)[1])
    out = solve_model(compiled.model, "highs", SolveOptions(time_limit=30, deadline=time.monotonic() - 1), start)
    assert out.status is Status.TIME_LIMIT_FEASIBLE
    assert out.objective * compiled.objective_scale == pytest.approx(optimum)
    assert "budget spent before the hand-off" in out.message


# ---------------------------------------------------------------------------- certify
@pytest.mark.parametrize("budget", [0, -1, math.nan, "10"])
def test_certify_refuses_a_budget_that_is_not_one(budget):
    problem, _ = testing.chain()
    with pytest.raises(SpecError, match=r"^budget "):
        certify(problem, budget=budget)


def test_a_level_that_outruns_the_budget_leaves_the_later_ones_skipped(monkeypatch):
    problem, _ = testing.contiguity_binds()

    def slow(run, share):
        time.sleep(1.2)
        return None, LevelStatus.NO_BOUND, "slow", run.scope
    monkeypatch.setitem(LEVELS, "simple", Level("simple", slow, closed_form=True))
    t = time.perf_counter()
    cert = certify(problem, budget=1.0, levels=("simple", "superblock", "throughput"), gap=0.0)
    assert time.perf_counter() - t < 2.5
    rows = {r.level: r for r in cert.levels}
    assert rows["superblock"].status is LevelStatus.SKIPPED and rows["superblock"].message == "budget spent"
    assert rows["throughput"].status is LevelStatus.SKIPPED


def test_a_mip_level_whose_model_cannot_fit_is_skipped_with_the_reason(monkeypatch):
    problem, _ = testing.contiguity_binds()
    monkeypatch.setattr("placement_dsl.deadline.SECONDS_PER_NONZERO", 1e3)
    cert = certify(problem, budget=5.0, levels=("superblock", "throughput"), gap=0.0)
    for row in cert.levels:
        assert row.status is LevelStatus.SKIPPED and "model too large for the time left" in row.message


def test_the_estimate_grows_with_the_graph_and_prices_the_latency_ip_highest():
    from placement_dsl.formulations import get

    small, _ = testing.chain()
    big = Problem(Graph([Op(name=f"v{i}", work=1.0, out_bytes=1.0) for i in range(200)],
                        [(f"v{i}", f"v{i + 1}") for i in range(199)]), Stages(4), Latency())
    assert sizing.estimate_nonzeros(big, get("latency")) > 10 * sizing.estimate_nonzeros(small, get("auto", small))
    with pytest.raises(BudgetSpent, match="model too large"):
        sizing.check_fits(big, "latency", Deadline(0.5))


def test_run_paths_prices_no_path_after_the_deadline():
    big = Problem(Graph([Op(name=f"v{i}", work=1.0, out_bytes=1.0) for i in range(30)],
                        [(f"v{i}", f"v{i + 1}") for i in range(29)]), Stages(3), Latency())
    ctx = Context(big)
    assert run_path_bound(ctx, None, True, deadline=SPENT) == 0.0
    assert run_path_bound(ctx, None, True) > 0.0
    cert = certify(big, budget=60.0, levels=("run-paths",), gap=0.0, deadline=SPENT)  # the caller's clock is spent
    assert cert.levels[0].status is LevelStatus.SKIPPED


def test_a_solver_stopped_by_the_guard_still_answers_with_the_start_and_a_bound(monkeypatch):
    from placement_dsl.solvers import guard

    problem, optimum = testing.contiguity_binds()
    start = testing.brute_force(problem)[1]
    stopped = guard.Collected(stopped=True, notes=["solver overran the time limit and was stopped by the project"])
    monkeypatch.setattr(guard, "run", lambda *args: stopped)
    result = solve(problem, warm_start=start, time_limit=30)
    assert result.status is stopped_status(result) and result.objective == pytest.approx(optimum)
    assert result.found_by == "warm start" and result.start_accepted is None  # not refused: never asked
    assert result.bound is not None and 0 < result.bound <= optimum
    assert "stopped by the project" in result.message


def test_the_command_line_solve_ends_by_its_time_limit_on_a_thousand_op_graph(tmp_path, capsys):
    import json

    from placement_dsl import zoo
    from placement_dsl.cli import main
    from placement_dsl.io import save_workload

    path = tmp_path / "gpt3.json"
    save_workload(zoo.gpt3(layers=5, hidden=1024, heads=16, vocab=8192), path)
    capsys.readouterr()
    t = time.perf_counter()
    assert main(["solve", str(path), "--method", "ip", "--objective", "throughput", "--time-limit", "12",
                 "--json"]) == 0
    assert time.perf_counter() - t <= 12 + 5
    out = json.loads(capsys.readouterr().out)
    assert out["status"].startswith("time_limit") or out["status"] == "optimal"
    assert out["bound"] is not None


def test_the_stage_cut_bound_cuts_no_op_after_the_deadline():
    from placement_dsl.bounds.local import stage_cut_bound
    from placement_dsl.bounds.simple import simple_lower_bound
    from placement_dsl.cluster import Cluster

    g = Graph([Op(name="a", work=1, out_bytes=5), Op(name="b", work=4, out_bytes=0)], [("a", "b")])
    assert stage_cut_bound(g, Cluster.stages(2))[0] == pytest.approx(5.0)
    assert stage_cut_bound(g, Cluster.stages(2), deadline=SPENT) == (simple_lower_bound(g, Cluster.stages(2)), None)


def _slow(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _refuse() -> None:
    raise SpecError("no")


def test_a_guarded_call_returns_its_value_raises_its_error_and_is_stopped_at_the_deadline():
    from placement_dsl.deadline import GRACE, call_within

    assert call_within(Deadline(30.0), _slow, 0.01) == 0.01
    with pytest.raises(SpecError, match="no"):
        call_within(Deadline(30.0), _refuse)
    t = time.perf_counter()
    with pytest.raises(BudgetSpent, match="_slow was stopped at the deadline"):
        call_within(Deadline(0.2), _slow, 30.0)
    assert time.perf_counter() - t < 0.2 + GRACE + 1.0
    with pytest.raises(BudgetSpent, match="before _slow started"):
        call_within(SPENT, _slow, 30.0)


def _greedy_of(graph, cluster, changed: list):
    from placement_dsl.heuristics import run

    changed.append(1)  # plain data the child changed comes back changed
    return run("greedy", graph, cluster), changed


def test_a_guarded_answer_holds_the_callers_own_graph_not_a_copy():
    """A placement holds its graph: copied back whole, a 20,111-op GPT-3 answer was 5.9 MB and took 0.6 s to send and
    read at load 7 (its assignment 0.16 MB), time its search was held back for; the caller's own graph and cluster
    come back in its place."""
    from placement_dsl.cluster import Cluster
    from placement_dsl.deadline import call_within, stream_within

    g = Graph([Op(name=f"v{i}", work=1.0 + i, out_bytes=1.0) for i in range(4)],
              [(f"v{i}", f"v{i + 1}") for i in range(3)], name="chain4")
    c = Cluster.stages(2)
    found, changed = call_within(Deadline(30.0), _greedy_of, g, c, [])
    assert found.placement.graph is g and found.placement.cluster is c and changed == [1]
    sent = list(stream_within(Deadline(30.0), lambda send, graph: send(graph), g))
    assert len(sent) == 1 and sent[0] is g


def test_a_warm_start_heuristic_past_its_limit_is_stopped_and_the_solve_answers(monkeypatch):
    from placement_dsl.heuristics import base

    problem, _ = testing.contiguity_binds()
    real = base.resolve

    def resolve(method):
        if method != "dp":
            return real(method)

        def stuck(graph, cluster, model=None, seed=None, time_limit=None):  # ignores its time_limit
            time.sleep(60)
        return stuck
    monkeypatch.setattr(base, "resolve", resolve)
    t = time.perf_counter()
    result = solve(problem, time_limit=3, warm_start="dp")
    assert time.perf_counter() - t < 3 + 5
    assert result.status.value.startswith("time_limit") or result.status is Status.OPTIMAL
    assert "warm start refused: 'dp' found no placement (budget spent" in result.message


def test_a_schedule_crosses_to_the_parent_of_a_guarded_heuristic():
    import pickle

    from placement_dsl.schedule import Schedule

    schedule = Schedule([0.0, 1.5], {(0, 1): 1.0})
    again = pickle.loads(pickle.dumps(schedule))
    assert again.start.tolist() == [0.0, 1.5] and dict(again.transfer_start) == {(0, 1): 1.0}


@pytest.mark.parametrize("command", ["solve", "bounds"])
def test_the_help_calls_the_time_limit_the_whole_commands_budget(command, capsys):
    from placement_dsl.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "wall-clock seconds for the whole command from its start" in text and "per MIP level" not in text


def test_a_stopped_search_reports_the_closed_form_bound_when_it_proved_less(monkeypatch):
    import placement_dsl.solve as solve_module
    from placement_dsl.solvers import SolverOutcome

    problem, _ = testing.contiguity_binds()
    start = testing.brute_force(problem)[1]

    def weak(model, solver, options, start=None):
        return SolverOutcome(Status.TIME_LIMIT_NO_SOLUTION, None, 1e-3, False, solver)
    monkeypatch.setattr(solve_module, "solve_model", weak)
    result = solve(problem, warm_start=start, time_limit=30)
    # not 0.001: the closed forms (Lemma 3.3's 6, the one-device-or-cut bound's (12 + 2 x 0.25) / 2 = 6.25), of
    # which cut-stages' is the best: the optimum 7.25 (the two devices hold consecutive runs of the chain; each on
    # its own, the most either could hold, gave 6.5)
    assert result.bound == pytest.approx(7.25, rel=1e-5) and "by the cut stages" in result.message


@pytest.mark.parametrize("limit", [1e7, 1e9])
def test_a_guarded_call_takes_a_limit_longer_than_the_systems_longest_wait(limit):
    """poll() takes its timeout in ms as a C int: a wait of --time-limit 1e7 raised OverflowError (internal error)."""
    from placement_dsl.deadline import call_within, stream_within

    assert call_within(Deadline(limit), _slow, 0.01) == 0.01
    assert list(stream_within(Deadline(limit), lambda send, x: send(x), 3)) == [3]


def test_a_guarded_call_waits_past_one_clamped_wait_until_its_answer(monkeypatch):
    from placement_dsl import deadline
    from placement_dsl.deadline import call_within, stream_within

    monkeypatch.setattr(deadline, "MAX_WAIT", 0.05)
    assert call_within(Deadline(30.0), _slow, 0.3) == 0.3

    def later(send, x):
        time.sleep(0.3)
        send(x)
    assert list(stream_within(Deadline(30.0), later, 4)) == [4]
