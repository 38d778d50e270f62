"""The single-pass makespan heuristics within a budget: the re-check of their answer is sized into their share, a
cut list schedule says so, the tables every schedule reads are built once per graph, and a spent budget in the
contracted LNS's start is no bad input."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

from placement_dsl import deadline
from placement_dsl.cluster import Cluster, Device
from placement_dsl.deadline import SCHEDULE_CPU_PER_OP, SCORE_CPU_PER_OP, BudgetSpent
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph
from placement_dsl.heuristics import base, run
from placement_dsl.heuristics.base import STOPPED, TimeLimitReached, cut_at
from placement_dsl.placement import Placement
from placement_dsl.schedule import exact_transfer_table, list_schedule
from placement_dsl.zoo import regal

MAKESPAN = CostModel.named("makespan")


def serial(k: int) -> Cluster:
    """``k`` devices that run one op at a time (MOIRAI's), as the list schedulers search them."""
    return Cluster([Device(name=f"d{i}", invocations=False) for i in range(k)])


def with_flows(graph: Graph, k: int, seed: int = 0) -> Graph:
    """``graph`` with every other op carrying an exact ``k x k`` transfer-time matrix (MOIRAI's flows)."""
    rng = np.random.default_rng(seed)
    ops = []
    for i, op in enumerate(graph.ops):
        attrs = dict(op.attrs)
        if i % 2 == 0:
            mat = rng.random((k, k))
            np.fill_diagonal(mat, 0.0)
            attrs["transfer_time"] = mat.tolist()
        ops.append(op.model_copy(update={"attrs": attrs}))
    return Graph(ops, graph.edges, name=graph.name)


def loaded(monkeypatch: pytest.MonkeyPatch, factor: float) -> None:
    """The machine as loaded as ``factor`` jobs per core (a slowed clock for the sizing: :func:`deadline.contention`)."""
    monkeypatch.setattr(deadline, "contention", lambda: factor)


def test_the_exact_transfer_table_and_predecessor_lists_are_built_once_per_graph():
    # rebuilt for every schedule and twice per evaluation, the table was a third of an evaluation of a 63,874-op sheet
    g = with_flows(regal(3, n=120).graph, 3)
    pos, stack = exact_transfer_table(g, 3)
    assert exact_transfer_table(g, 3)[1] is stack and not stack.flags.writeable
    assert (pos >= 0).sum() == (g.n + 1) // 2
    assert all(g.predecessor_lists[v] == g.predecessors(v).tolist() for v in range(g.n))
    fewer = g.without_edges(np.arange(g.m) % 2 == 0)  # its own lists, not the copied ones
    assert all(fewer.predecessor_lists[v] == fewer.predecessors(v).tolist() for v in range(g.n))
    p = Placement(g, serial(3), np.arange(g.n) % 3)
    again = Placement(g, serial(3), p.assign, schedule=list_schedule(p))
    assert evaluate(again, MAKESPAN).objective == pytest.approx(evaluate(p, MAKESPAN).objective)


@pytest.mark.parametrize(("method", "model", "rate"), [("list", MAKESPAN, SCHEDULE_CPU_PER_OP),
                                                        ("greedy", CostModel(), SCORE_CPU_PER_OP)])
def test_run_gives_a_method_its_limit_less_the_recheck_of_its_answer(monkeypatch, method, model, rate):
    # a list schedule of a 20,000-task sheet given the whole limit was re-checked past it (18.1 s of a 15 s command)
    g = regal(1, n=400).graph
    loaded(monkeypatch, 3.0)
    seen = {}
    real = base.resolve

    def spy(name):
        fn = real(name)

        def recorded(*args, **kwargs):
            seen["time_limit"] = kwargs["time_limit"]
            return fn(*args, **kwargs)
        return recorded

    monkeypatch.setattr(base, "resolve", spy)
    run(method, g, serial(4), model=model, time_limit=30.0)
    assert seen["time_limit"] == pytest.approx(30.0 - rate * g.n * 3.0, rel=1e-9)
    run(method, g, serial(4), model=model, time_limit=0.002)  # at most half: the method keeps a share
    assert seen["time_limit"] == pytest.approx(0.001)


def test_a_list_schedule_stops_comparing_devices_when_the_rest_of_it_and_its_score_need_the_time_left(monkeypatch):
    g = regal(2, n=300).graph
    loaded(monkeypatch, 1e6)  # scoring estimated past any limit: the cut comes at half of what is left
    at = time.monotonic() + 100.0
    assert at - 50.0 <= cut_at(at, g) <= at - 49.0
    assert cut_at(None, g) is None
    loaded(monkeypatch, 2.0)
    assert cut_at(at, g) == pytest.approx(at - SCHEDULE_CPU_PER_OP * g.n * 2.0)


@pytest.mark.parametrize("method", ["list", "cpop", "getf", "m-sct", "one-device-best"])
def test_every_single_pass_makespan_method_cut_at_once_says_so_with_a_valid_schedule(method):
    # CPOP compared every device for every op whatever its limit ("one pass, nothing to cut short")
    g = regal(4, n=200).graph
    found = run(method, g, serial(4), model=MAKESPAN, time_limit=0.0)
    assert found.info.get("stopped") == STOPPED and found.valid
    assert found.placement.schedule is not None


def test_a_start_stopped_at_its_deadline_is_no_bad_input_for_the_contracted_lns(monkeypatch):
    # a 20,000-task sheet under load: "error: contracted LNS: the start 'list' is refused (... budget spent ...)",
    # exit 2 and no JSON; the LNS now starts from the cheapest split and says why
    from placement_dsl import starts

    def spent(*args, **kwargs):
        raise BudgetSpent("budget spent: run was stopped at the deadline (2.0 s)")

    monkeypatch.setattr(starts, "call_within", spent)
    g = regal(5, n=60).graph
    with pytest.warns(DeprecationWarning):
        found = run("schedule-lns", g, serial(3), model=MAKESPAN, time_limit=4.0)
    assert found.valid and "budget spent" in found.info["start_refused"]
    assert found.objective == pytest.approx(evaluate(found.placement, MAKESPAN).objective)


def test_a_command_whose_heuristic_found_no_placement_in_its_time_prints_whole_json(monkeypatch, tmp_path, capsys):
    from placement_dsl import heuristics
    from placement_dsl.cli import main
    from placement_dsl.io import Workload, save_workload

    path = tmp_path / "g.json"
    save_workload(Workload(regal(6, n=40).graph, serial(2)), path)

    def late(*args, **kwargs):
        raise TimeLimitReached("contracted LNS: no placement within the time limit")

    monkeypatch.setattr(heuristics, "run", late)
    code = main(["solve", str(path), "--method", "list", "--objective", "makespan", "--time-limit", "5", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "time_limit_no_solution" and out["objective"] is None
    assert "no placement within the time limit" in out["message"]


@pytest.mark.parametrize("method", ["greedy", "one-device"])
def test_a_single_sample_answer_comes_back_with_the_schedule_its_recheck_listed(method):
    # greedy's split carried none: the method's score, run's re-check and the command's report each built a list
    # schedule of every op anew (0.5-1.2 s of CPU each on a 20,000-task sheet)
    g = with_flows(regal(7, n=150).graph, 3)
    found = run(method, g, serial(3), model=MAKESPAN)
    assert found.placement.schedule is not None
    bare = Placement(g, serial(3), found.placement.assign)
    assert evaluate(found.placement, MAKESPAN).objective == pytest.approx(evaluate(bare, MAKESPAN).objective)
    assert found.objective == pytest.approx(evaluate(bare, MAKESPAN).objective)


@pytest.mark.parametrize(("seconds", "kept"), [(4.0, 0.0), (20.0, 10.0)])
def test_the_contracted_lns_gives_its_start_the_time_no_window_step_could_use(monkeypatch, seconds, kept):
    # 15 s on a 20,000-task sheet under load left the LNS 2.9 s: half was kept for steps that need 3 s, the list
    # start got 0.1 s and was stopped; now a start too short to share gets it all (the 5,000-task sheet at 10 s
    # answers list's 103.53 where it answered 204.11)
    from placement_dsl.search import anytime

    seen = {}

    class Seen(Exception):
        pass

    def spy(problem, spec, **kwargs):
        seen.update(kwargs, left=kwargs["deadline"].left())
        raise Seen

    monkeypatch.setattr(anytime, "resolve", spy)
    with pytest.raises(Seen):
        anytime.contracted_lns(regal(8, n=40).graph, serial(2), model=MAKESPAN, time_limit=seconds, start="list")
    assert seen["keep"] == pytest.approx(kept and seen["left"] / 2)


@pytest.mark.parametrize("method", ["getf", "m-sct"])
def test_a_cut_earliest_time_first_schedule_tries_the_near_devices_before_listing_every_devices_room(monkeypatch,
                                                                                                      method):
    # each op left after the cut listed the room of all 16 devices: most of a GETF cut at once on GPT-3 of 20,111 ops
    # (11 s at load 16, past a 60 s command's limit)
    from placement_dsl.heuristics.listsched import Packing

    g = regal(7, n=300).graph
    calls = [0]
    real = Packing.room

    def counted(self, u, d):
        calls[0] += 1
        return real(self, u, d)

    monkeypatch.setattr(Packing, "room", counted)
    found = run(method, g, serial(16), model=MAKESPAN, time_limit=0.0)
    assert found.info.get("stopped") == STOPPED and found.valid
    assert calls[0] < 8 * g.n  # every device's room listed for every op: 16 per op (ops without a placed input
    # or group still list them: 5 per op here)
