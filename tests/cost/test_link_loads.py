"""Throughput on a cluster with links: each link's load (bytes over bandwidth of every tensor whose route
crosses it) is a resource like a device's, in the cost model and in the throughput IP, against brute force."""
from __future__ import annotations

import math

import pytest

from placement_dsl import testing
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.compile import compile
from placement_dsl.constraints import Congestion
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import GPipe, Throughput
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.solvers import Status


def cpu_line(k: int, bandwidth: float = 1.0) -> Cluster:
    """``k`` host devices (they pay no transfers themselves) on a line of links."""
    devices = [Device(name=f"d{i}", kind="cpu") for i in range(k)]
    links = [Link(src=f"d{a}", dst=f"d{b}", bandwidth=bandwidth, latency=1.0)
             for a in range(k) for b in range(k) if abs(a - b) == 1]
    return Cluster(devices, links)


def crossing() -> Graph:
    ops = [Op(name="p", work=1, out_bytes=2), Op(name="r", work=1, out_bytes=2), Op(name="q", work=1),
           Op(name="s", work=1)]
    return Graph(ops, [("p", "q"), ("r", "s")], name="crossing")


def test_two_routes_load_their_shared_link():
    ev = evaluate(Placement(crossing(), cpu_line(4), [0, 1, 2, 3]), "throughput")
    loads = {lk.link: lk.load for lk in ev.links}
    assert loads["d1->d2"] == 4.0 and loads["d0->d1"] == loads["d2->d3"] == 2.0 and loads["d2->d1"] == 0.0
    assert ev.objective == 4.0 == ev.max_load  # the busiest link, not a device (each has load 1)
    assert ev.to_dict()["links"][2] == {"link": "d1->d2", "load_fw": 4.0, "load_bw": 0.0, "load": 4.0}


def test_without_links_nothing_changes():
    flat = Cluster([Device(name=f"d{i}", kind="cpu") for i in range(4)])
    ev = evaluate(Placement(crossing(), flat, [0, 1, 2, 3]), "throughput")
    assert ev.links == () and ev.objective == 1.0


def test_gpipe_counts_link_loads_by_pass():
    g = testing.training_graph()
    c = cpu_line(2, bandwidth=0.5)
    p = Placement(g, c, [0 if op.name.startswith("f") or op.name == g.ops[0].name else 1 for op in g.ops])
    ev = evaluate(p, "gpipe")
    fw = max([r.load_fw for r in ev.devices] + [lk.load_fw for lk in ev.links])
    bw = max([r.load_bw for r in ev.devices] + [lk.load_bw for lk in ev.links])
    assert ev.objective == pytest.approx(fw + bw)


@pytest.mark.parametrize("bandwidth, optimum", [(1.0, 2.0), (0.25, 2.0), (4.0, 1.0)])
def test_throughput_ip_with_link_loads_is_brute_force(bandwidth, optimum):
    # four ops on a line of four CPUs: spreading the ops costs the links bytes / bandwidth
    problem = Problem(crossing(), cpu_line(4, bandwidth), Throughput(), [Congestion("link")])
    best, _ = testing.brute_force(problem)
    assert best == pytest.approx(optimum)
    model = compile(problem, "throughput").model
    assert hasattr(model, "link_loads")
    result = solve(problem, "throughput", time_limit=20, gap=1e-9)
    assert result.status is Status.OPTIMAL and result.objective == pytest.approx(best)
    assert result.bound == pytest.approx(best)


def test_hierarchical_clusters_need_no_link_rows():
    # every route one direct link and every device paying its transfers: a link's load is part of its receiver's
    problem = Problem(crossing(), Cluster.hierarchical(2, 2, intra=2.0, inter=1.0), Throughput())
    assert not hasattr(compile(problem, "throughput").model, "link_loads")
    for assign in ([0, 1, 2, 3], [0, 2, 1, 3], [3, 2, 1, 0]):
        ev = evaluate(Placement(problem.graph, problem.cluster, assign), "throughput")
        assert max(lk.load for lk in ev.links) <= max(r.load for r in ev.devices)


def test_gpipe_ip_refuses_link_loads_it_cannot_bound():
    problem = Problem(testing.training_graph(), cpu_line(2), GPipe())
    with pytest.raises(SpecError, match=r"GPipe: the IP bounds each pass by device loads only"):
        solve(problem, "throughput", time_limit=5)


def test_congestion_is_accepted_by_throughput():
    problem = Problem(crossing(), Cluster.stages(2), Throughput(), [Congestion("port")])
    result = solve(problem, "throughput", time_limit=10)
    assert math.isfinite(result.objective) and result.evaluation.valid


def test_the_simulator_pipelines_the_links_too():
    # the shared link d1 -> d2 (load 4) is the pipeline's bottleneck: the simulated time per sample tends to it
    from placement_dsl.simulate import analytic_time_per_sample, simulate

    p = Placement(crossing(), cpu_line(4), [0, 1, 2, 3])
    assert analytic_time_per_sample(p) == 4.0
    run = simulate(p, "pipeline", 200, record=True)
    assert 4.0 <= run.time_per_sample <= 4.05
    assert {t.device for t in run.trace} >= {"d0->d1", "d1->d2", "d2->d3"}


@pytest.mark.parametrize("bandwidth", [0.1, 1.0])
def test_pipedream_ip_with_link_loads_is_brute_force(bandwidth):
    # the training graph (forward 2, 3, 1; backward 4, 6, 2) on three CPUs on a line: the gradients cross links too
    from placement_dsl.objectives import PipeDream

    problem = Problem(testing.training_graph(gradient_bytes=3.0), cpu_line(3, bandwidth), PipeDream())
    best, _ = testing.brute_force(problem)
    result = solve(problem, "throughput", time_limit=30, gap=1e-9)
    assert result.status is Status.OPTIMAL and result.objective == pytest.approx(best)
    without = Problem(problem.graph, Cluster(problem.cluster.devices), PipeDream())
    if bandwidth < 1:
        assert best > testing.brute_force(without)[0]  # the links bind


def test_a_replicated_stage_sends_over_its_replicas_routes_and_all_reduces_over_the_links_between_them():
    """A stage on two replicas takes every other sample: its tensor to the next stage leaves half from each replica,
    over each one's own link, and its parameters' ring all-reduce (2 (r - 1) / r of the bytes per sample from each
    replica to the next) holds the links between them in the backward pass. Before, a replicated placement had no
    link rows: its links' occupancy was unpriced, and a link one of its routes overloaded bound nothing."""
    from placement_dsl.simulate import simulate

    c = Cluster.hierarchical(2, 2, intra=4.0, inter=0.25)
    g = Graph([Op(name="a", work=4, out_bytes=4, param_bytes=2.0), Op(name="b", work=1)], [("a", "b")])
    p = Placement(g, c, [0, 2], replicas={"s0g0": ["s0g0", "s0g1"]})
    ev = evaluate(p, "throughput")
    links = {lk.link: (lk.load_fw, lk.load_bw) for lk in ev.links if lk.load_fw or lk.load_bw}
    assert links == {"s0g0->s1g0": (8.0, 0.0), "s0g1->s1g0": (8.0, 0.0),  # 2 bytes each at 0.25
                     "s0g0->s0g1": (0.0, 0.5), "s0g1->s0g0": (0.0, 0.5)}  # 2 (2 - 1) / 2 x 2 bytes at 4
    assert ev.objective == max(r.load for r in ev.devices)  # b's device receives 4 bytes at 0.25 per sample
    assert simulate(p, "pipeline", 64).time_per_sample == pytest.approx(ev.objective, rel=0.05)
    one_way = Cluster([Device(name="a0"), Device(name="a1"), Device(name="b")],
                      [Link(src="a0", dst="b", bandwidth=1.0), Link(src="a1", dst="b", bandwidth=1.0),
                       Link(src="a0", dst="a1", bandwidth=1.0)])
    ev = evaluate(Placement(g, one_way, [0, 2], replicas={"a0": ["a0", "a1"]}), "throughput")
    assert not ev.valid and [v.message for v in ev.violations if v.check == "allowed"] == [
        "the all-reduce of 'a0''s stage has no route from device 'a1' to 'a0'"]



def test_the_gantt_chart_draws_the_links_after_the_devices(tmp_path):
    pytest.importorskip("matplotlib")
    from placement_dsl.viz import gantt

    p = Placement(crossing(), cpu_line(4), [0, 1, 2, 3])
    out = gantt.draw(gantt.simulated(p, "pipeline", 4), tmp_path / "g.svg", p.cluster.names)
    assert out.exists() and "d1-&gt;d2" in out.read_text()


@pytest.mark.parametrize("m", [1, 4])
def test_gpipe_fill_and_drain_runs_the_links_as_the_simulator_does(m):
    # the gradients (3 bytes) cross a 0.5-wide link: the links are pipeline stages of the fill and drain too
    from placement_dsl.evaluate import CostModel
    from placement_dsl.simulate import simulate

    g = testing.training_graph(gradient_bytes=3.0)
    c = cpu_line(3, bandwidth=0.5)
    p = Placement(g, c, [0, 1, 2, 0, 1, 2])
    ev = evaluate(p, CostModel.named("gpipe", microbatches=m))
    flat = evaluate(Placement(g, Cluster(c.devices), p.assign), CostModel.named("gpipe", microbatches=m))
    assert ev.valid and ev.objective == pytest.approx(simulate(p, "gpipe", m).time_per_sample)
    assert ev.objective > flat.objective  # the links add their time


def test_a_links_latency_is_paid_by_gpipes_fill_and_drain_not_by_its_steady_state():
    """A link's latency delays each micro-batch's tensors (the fill and the drain of a step of m micro-batches, in
    the cost model's recurrence and the simulator alike) and not the link, which carries the next one meanwhile:
    the steady state (no micro-batches), the links' occupancy, is bytes over bandwidth alone."""
    from placement_dsl.evaluate import CostModel
    from placement_dsl.simulate import simulate

    g = testing.training_graph(gradient_bytes=3.0)
    late = cpu_line(3, bandwidth=0.5)  # a latency of 1 on every link
    plain = Cluster(late.devices, [lk.model_copy(update={"latency": 0.0}) for lk in late.links])
    p, q = Placement(g, late, [0, 1, 2, 0, 1, 2]), Placement(g, plain, [0, 1, 2, 0, 1, 2])
    for m in (1, 4, 16):
        paid, free = (evaluate(x, CostModel.named("gpipe", microbatches=m)).objective for x in (p, q))
        assert paid == pytest.approx(simulate(p, "gpipe", m).time_per_sample)
        assert free < paid <= free + 4.0 / m + 1e-9  # two links on the way down, two back: once per step
    assert evaluate(p, "gpipe").objective == evaluate(q, "gpipe").objective
    assert evaluate(p, "gpipe").links == evaluate(q, "gpipe").links
