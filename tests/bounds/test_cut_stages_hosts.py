"""The cut-stages bound beside host devices: a host pays no transfers and takes at least its prices' time for
what it holds (each op at its own host time, faster than the accelerators' or not); the bound never exceeds the
best contiguous placement found by brute force, and over-pricing the host is caught by the same comparison."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.bounds import cut_stages
from placement_dsl.bounds.cut_stages import applies, cut_stages_bound
from placement_dsl.bounds.host_prices import HostPrices
from placement_dsl.cluster import Cluster, Device
from placement_dsl.constraints import Contiguous
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck
from placement_dsl.problem import Problem
from placement_dsl.testing import optimum
from tests.bounds.headed import headed_chains


def with_host(problem: Problem, slower: list[float]) -> Problem:
    """The problem's graph on accelerators and one host, each op ``slower[v]`` times slower there, contiguous."""
    g = problem.graph
    base = g.work("accelerator").tolist()
    ops = [Op(name=op.name, work={"accelerator": base[v], "cpu": base[v] * slower[v]}, out_bytes=op.out_bytes)
           for v, op in enumerate(g.ops)]
    graph = Graph(ops, [(g.names[a], g.names[b]) for a, b in zip(g.src.tolist(), g.dst.tolist())])
    k = problem.cluster.size - 1
    cluster = Cluster.accelerators(k, cpus=1, bandwidth=float(problem.cluster.devices[0].bandwidth))
    return Problem(graph, cluster, Bottleneck(), [Contiguous()])


@st.composite
def hosted(draw):
    problem = draw(headed_chains().filter(lambda p: p.graph.n <= (8 if p.cluster.size == 2 else 6)))  # brute force
    slower = [draw(st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5, 3.0])) for _ in range(problem.graph.n)]
    return with_host(Problem(problem.graph, Cluster.stages(problem.cluster.size + 1,
                                                           bandwidth=problem.cluster.devices[0].bandwidth),
                             Bottleneck(), []), slower)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(hosted())
def test_the_bound_beside_a_host_never_exceeds_the_best_contiguous_placement(problem):
    assert applies(problem) is None
    best = optimum(problem)
    bound, note = cut_stages_bound(problem, best)
    assert bound is not None, note  # declining at a reachable max load would say no placement reaches it
    assert bound <= best * (1 + 1e-9), note


def over_priced(monkeypatch, factor):
    """Hosts' prices in blocks and over the graph ``factor`` times what they are."""
    time_for, work_within = HostPrices.time_for, HostPrices.work_within
    monkeypatch.setattr(HostPrices, "time_for", lambda self, group, x: factor * time_for(self, group, x))
    monkeypatch.setattr(HostPrices, "work_within", lambda self, group, s: work_within(self, group, s / factor))


@pytest.mark.parametrize("blocks", [False, True])
def test_over_pricing_the_host_is_caught(monkeypatch, blocks):
    # a host that holds the middle third beside two accelerators, as a cut op of a chain or inside a block (a
    # diamond between two cut ops); its prices doubled claim the host slower than it is
    ops = [Op(name=n, work={"accelerator": 4.0, "cpu": 4.0 if n != "b" else 2.0}, out_bytes=0.0) for n in "abc"]
    edges = [("a", "b"), ("b", "c")]
    if blocks:
        ops = [Op(name="a", work={"accelerator": 4.0, "cpu": 4.0}, out_bytes=0.0),
               Op(name="b", work={"accelerator": 2.0, "cpu": 1.0}, out_bytes=0.0),
               Op(name="d", work={"accelerator": 2.0, "cpu": 1.0}, out_bytes=0.0),
               Op(name="c", work={"accelerator": 4.0, "cpu": 4.0}, out_bytes=0.0)]
        edges = [("a", "b"), ("a", "d"), ("b", "c"), ("d", "c")]
    problem = Problem(Graph(ops, edges), Cluster.accelerators(2, cpus=1), Bottleneck(), [Contiguous()])
    assert applies(problem) is None
    best = optimum(problem)
    assert best == 4.0
    bound, _ = cut_stages_bound(problem, best)
    assert bound <= best * (1 + 1e-9)
    over_priced(monkeypatch, 3.0 if blocks else 2.5)
    over, _ = cut_stages_bound(problem, best)
    assert over is None or over > best  # the over-priced host cannot take its third: declined or above the best


def test_a_host_faster_on_one_op_prices_the_others_at_their_own_times():
    # a chain of 6 ops of work 3 on 2 accelerators and a host 9 times slower, but for one small op it runs in half
    # the accelerators' time: one least ratio (1/6 of 3 at 0.5) would let the host hold 2 T of work; at its own
    # prices it holds the small op and a ninth of T of the rest, so the bound stays near what two accelerators need
    ops = [Op(name=f"v{i}", work={"accelerator": 3.0, "cpu": 27.0}, out_bytes=0.0) for i in range(6)]
    ops.append(Op(name="v6", work={"accelerator": 0.2, "cpu": 0.1}, out_bytes=0.0))
    graph = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(6)])
    problem = Problem(graph, Cluster.accelerators(2, cpus=1), Bottleneck(), [Contiguous()])
    assert applies(problem) is None
    best = optimum(problem)
    bound, _ = cut_stages_bound(problem, best)
    assert 8.9 < bound <= best * (1 + 1e-9)


def test_unlike_accelerators_are_refused_by_name():
    unlike = Cluster([Device(name="x"), Device(name="y", speed=2.0), Device(name="h", kind="cpu", host=True)])
    assert "identical accelerators" in applies(Problem(Graph([Op(name="a", work=1.0)]), unlike, Bottleneck(),
                                                       [Contiguous()]))


@pytest.mark.parametrize("slower", [1.0, 9.0])
def test_a_slow_host_raises_the_bound_above_work_over_all_devices(slower):
    # a chain of 6 ops of work 3 on 2 accelerators and a host: the host at 9x holds a third of an op's work at
    # T = 9 on its own, so the bound nears what two accelerators alone need
    ops = [Op(name=f"v{i}", work={"accelerator": 3.0, "cpu": 3.0 * slower}, out_bytes=0.0) for i in range(6)]
    graph = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(5)])
    problem = Problem(graph, Cluster.accelerators(2, cpus=1), Bottleneck(), [Contiguous()])
    bound, _ = cut_stages_bound(problem, 9.0)
    assert bound == pytest.approx(18.0 / (2 + 1 / slower) if slower == 1.0 else 9.0, rel=1e-5)


def test_a_bound_known_already_starts_the_search_or_ends_it():
    # six ops of work 3 in a chain, tensors of 1, on 2 accelerators and a host 9 times slower
    ops = [Op(name=f"v{i}", work={"accelerator": 3.0, "cpu": 27.0}, out_bytes=1.0) for i in range(6)]
    graph = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(5)])
    problem = Problem(graph, Cluster.accelerators(2, cpus=1), Bottleneck(), [Contiguous()])
    best = optimum(problem)
    plain = cut_stages.cut_stages_search(problem, best).bound
    assert plain is not None and plain <= best
    assert cut_stages.cut_stages_search(problem, best, floor=0.5 * plain).bound == pytest.approx(plain, rel=1e-5)
    assert cut_stages.cut_stages_search(problem, 2 * best, floor=plain * (1 + 1e-3)).bound is None  # it holds there
    whole = cut_stages.cut_stages_search(problem, 100.0, floor=18.0)  # one device computes all 18 within it
    assert whole.bound is None and "at least the graph's work" in whole.note


def test_a_bound_at_the_graph_s_work_ends_the_search_before_its_tables(monkeypatch):
    """cnn-20000 onto 16 accelerators beside a CPU: the capacity bound 6,454.6 is above the graph's work 5,073, and
    the level built its cut ops, segments and block prices (0.33 s of a 5 s ``bounds`` at load 5) to say so."""
    ops = [Op(name=f"v{i}", work={"accelerator": 3.0, "cpu": 27.0}, out_bytes=1.0) for i in range(6)]
    problem = Problem(Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(5)]), Cluster.accelerators(2, cpus=1),
                      Bottleneck(), [Contiguous()])

    def no_tables(*args, **kwargs):
        raise AssertionError("the tables were built")

    monkeypatch.setattr(cut_stages, "cut_ops", no_tables)
    found = cut_stages.cut_stages_search(problem, 100.0, floor=18.0)
    assert found.bound is None and "at least the graph's work" in found.note
