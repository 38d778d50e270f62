"""MOIRAI's baselines m-SCT (Baechi) and GETF: valid schedules the cost model reproduces, the favourite-child rule,
a hand-computed GETF schedule, memory, pins, colocation and the time limit."""
from __future__ import annotations

import random

import numpy as np
import pytest

from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.errors import PlacementError, SpecError
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import etf, run
from placement_dsl.heuristics.base import METHODS, OPTIMIZES, methods_for
from placement_dsl.heuristics.etf import favourite_lp, favourites
from placement_dsl.schedule import check_schedule
from placement_dsl.testing import structured_graph

MODEL = CostModel.named("makespan")
BASELINES = ("m-sct", "getf")


def two(kinds: tuple[str, str] = ("acc", "acc"), memory: float = float("inf")) -> Cluster:
    devices = [Device(name=f"d{i}", kind=k, memory=memory) for i, k in enumerate(kinds)]
    return Cluster(devices, [Link(src="d0", dst="d1", bandwidth=1.0), Link(src="d1", dst="d0", bandwidth=1.0)])


@pytest.mark.parametrize("method", BASELINES)
def test_registered_for_the_makespan(method):
    assert method in METHODS and OPTIMIZES[method] == "makespan" and method in methods_for("makespan")


@pytest.mark.parametrize("method", BASELINES)
@pytest.mark.parametrize("seed", range(8))
def test_tiny_graphs_get_valid_schedules_the_cost_model_reproduces(method, seed):
    rng = random.Random(seed)
    graph = structured_graph(rng, rng.choice(("chain", "diamond", "fork_join", "random")), rng.randint(4, 7),
                             cpu=seed % 2 == 1)
    cluster = Cluster.accelerators(2, cpus=seed % 2)
    for model in (MODEL, CostModel.named("latency")):
        r = run(method, graph, cluster, model=model, time_limit=5)
        ev = evaluate(r.placement, model)
        assert ev.valid, ev.violations
        assert r.objective == pytest.approx(ev.objective)
    assert check_schedule(r.placement, r.placement.schedule, MODEL.congestion)[1] == []


def test_getf_matches_the_hand_computed_schedule():
    """a -> b, a -> c; a: f 1 / s 2, b: f 3 / s 3.5, c: f 2 / s 3; a's output takes 1 on the link.

    Ready {a}: finishes f 1, s 2 -> a on f [0, 1]. Ready {b, c}: b finishes f 4, s 1 + 1 + 3.5 = 5.5;
    c finishes f 3, s 5 -> c on f [1, 3]. Then b: f 3 + 3 = 6, s 5.5 -> b on s [2, 5.5] after the
    transfer [1, 2]. Makespan 5.5."""
    ops = [Op(name="a", work={"fast": 1.0, "slow": 2.0}, out_bytes=1.0),
           Op(name="b", work={"fast": 3.0, "slow": 3.5}), Op(name="c", work={"fast": 2.0, "slow": 3.0})]
    graph = Graph(ops, [("a", "b"), ("a", "c")])
    r = run("getf", graph, two(("fast", "slow")), model=MODEL)
    assert r.placement.assign.tolist() == [0, 1, 0]
    assert r.placement.schedule.start.tolist() == [0.0, 2.0, 1.0]
    assert r.placement.schedule.transfer_start == {(0, 1): 1.0}
    assert r.objective == pytest.approx(5.5)


def crafted() -> Graph:
    """``a -> b`` (a's output costs 3 to move, b is long) and ``p -> w`` (free to move, w longer than b).

    Earliest-start list scheduling (ties by rank) puts a on d0 and p on d1; at time 1 both b and w can
    start on d0, w has the larger rank and takes d0, so b moves to d1 and pays the transfer:
    makespan 1 + 21 vs 4 + 20 = 24. m-SCT's LP makes b a's favourite child (the transfer would
    lengthen the critical path) and keeps it on d0: makespan 22."""
    ops = [Op(name="a", work=1.0, out_bytes=3.0), Op(name="b", work=20.0),
           Op(name="p", work=1.0, out_bytes=0.0), Op(name="w", work=21.0)]
    return Graph(ops, [("a", "b"), ("p", "w")])


def test_m_sct_keeps_a_favourite_child_with_its_parent_when_communication_dominates():
    graph = crafted()
    x = favourite_lp(graph, np.array([1.0, 20.0, 1.0, 21.0]), np.array([3.0, 0.0]), seconds=5)
    assert x is not None and x[0] < 0.5  # the a -> b transfer is on the LP's critical path
    assert favourites(graph, x)[graph.index["b"]] == graph.index["a"]
    r = run("m-sct", graph, two(), model=MODEL)
    assign = r.placement.assign
    assert assign[graph.index["b"]] == assign[graph.index["a"]]
    assert r.objective == pytest.approx(22.0)
    assert r.info["favourites"] == "lp"


def test_without_favourites_the_crafted_child_leaves_its_parent(monkeypatch):
    """The instance discriminates: earliest start without favourite children moves b off a's device."""
    graph = crafted()
    monkeypatch.setattr(etf, "_favourite_parents", lambda g, *a: (np.full(g.n, -1), "none"))
    r = run("m-sct", graph, two(), model=MODEL)
    assert r.placement.assign[graph.index["b"]] != r.placement.assign[graph.index["a"]]
    assert r.objective == pytest.approx(24.0)


def test_m_sct_reserves_the_parents_device_for_its_ready_favourite_child(monkeypatch):
    """Only b is a favourite child: at time 1 w (larger rank) ties b on d0, but d0 is reserved for b (w would
    end after b starts), so w takes d1 and b follows a: 22, where taking d0 for w makes b pay the transfer: 24."""
    graph = crafted()
    parent = np.full(graph.n, -1)
    parent[graph.index["b"]] = graph.index["a"]
    monkeypatch.setattr(etf, "_favourite_parents", lambda g, *a: (parent, "given"))
    r = run("m-sct", graph, two(), model=MODEL)
    assert r.placement.assign[graph.index["w"]] == 1 and r.placement.assign[graph.index["b"]] == 0
    assert r.objective == pytest.approx(22.0)


def test_favourites_take_each_parent_and_child_once():
    graph = Graph([Op(name=n, work=1.0) for n in "abcd"], [("a", "b"), ("a", "c"), ("d", "c")])
    parent = favourites(graph, np.array([0.2, 0.1, 0.0]))
    assert parent.tolist() == [-1, 0, 3, -1]  # c takes d (smallest x), so a's favourite is b
    parent = favourites(graph, np.array([0.3, 0.1, 0.4]))
    assert parent.tolist() == [-1, -1, 0, -1]


@pytest.mark.parametrize("method", BASELINES)
def test_memory_is_honoured(method):
    """Three ops of 1 unit on a fast device holding 2: one goes to the slow device."""
    ops = [Op(name=f"o{i}", work={"fast": 1.0, "slow": 5.0}, param_bytes=1.0) for i in range(3)]
    graph = Graph(ops, [("o0", "o1"), ("o1", "o2")])
    r = run(method, graph, two(("fast", "slow"), memory=2.0), model=MODEL)
    assert evaluate(r.placement, MODEL).valid
    assert np.bincount(r.placement.assign, minlength=2).tolist() == [2, 1]


@pytest.mark.parametrize("method", BASELINES)
def test_pins_and_colocation_are_honoured(method):
    ops = [Op(name="a", work=1.0, out_bytes=1.0), Op(name="b", work=1.0, group="g"),
           Op(name="c", work=1.0, group="g"), Op(name="z", work=1.0)]
    graph = Graph(ops, [("a", "b"), ("a", "c"), ("b", "z"), ("c", "z")])
    r = run(method, graph, two(), model=MODEL, pins={"b": "d1", "z": "d1"})
    assign = r.placement.assign
    assert assign[1] == assign[2] == assign[3] == 1
    with pytest.raises(SpecError, match="unknown device 'd9'"):
        run(method, graph, two(), model=MODEL, pins={"b": "d9"})
    with pytest.raises(SpecError, match="unknown op 'q'"):
        run(method, graph, two(), model=MODEL, pins={"q": "d0"})
    only_acc = Graph([Op(name="a", work={"acc": 1.0})], [])
    with pytest.raises(PlacementError, match="cannot run on device 'd1'"):
        run(method, only_acc, two(("acc", "cpu")), model=MODEL, pins={"a": "d1"})


@pytest.mark.parametrize("method", BASELINES)
def test_time_limit_zero_still_answers_a_valid_schedule(method):
    graph = structured_graph(random.Random(3), "random", 30)
    r = run(method, graph, Cluster.accelerators(3), model=MODEL, time_limit=0)
    assert r.info.get("stopped") == "time limit"
    assert evaluate(r.placement, MODEL).valid
    with pytest.raises(SpecError, match="time_limit"):
        run(method, graph, Cluster.accelerators(3), model=MODEL, time_limit=-1)


def test_m_sct_places_a_graph_without_edges_when_the_lp_has_no_time(monkeypatch):
    """The greedy favourites (the LP unsolved in the time left) took the largest transfer of no edges: ValueError."""
    monkeypatch.setattr(etf, "favourite_lp", lambda *a: None)
    graph = Graph([Op(name="a", work=2.0), Op(name="b", work=3.0)], [])
    r = run("m-sct", graph, two(), model=MODEL)
    assert r.info["favourites"] == "greedy"
    assert r.objective == pytest.approx(evaluate(r.placement, MODEL).objective) == pytest.approx(3.0)
