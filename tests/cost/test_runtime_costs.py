"""A pipeline runtime's fixed costs in the cost model: a latency per message and an overhead per task."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel, device_costs, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.placement import Placement
from placement_dsl.simulate import simulate
from placement_dsl.zoo.training import with_backward

FREE = {"memory": "overflow", "require": frozenset()}


def chain(works, out_bytes=2.0) -> Graph:
    ops = [Op(name=f"l{i}", work=float(w), out_bytes=float(out_bytes), param_bytes=1.0) for i, w in enumerate(works)]
    ops, edges = with_backward(ops, [(f"l{i}", f"l{i + 1}") for i in range(len(works) - 1)])
    return Graph(ops, edges)


def test_hand_instance_of_latency_and_overhead():
    """l0 (1) | l1 (3) on two devices of bandwidth 4, tensors of 2 bytes: the forward tensor l0 -> l1 and the
    gradient l1_grad -> l0_grad each cost 2 / 4 + 0.25 on both sides, every pass of a device 1 more."""
    p = Placement(chain([1, 3]), Cluster.stages(2, bandwidth=4.0), [0, 1, 1, 0])
    plain = device_costs(p, CostModel(**FREE))
    rows = device_costs(p, CostModel(**FREE, message_latency=0.25, task_overhead=1.0))
    assert [(r.load_fw, r.load_bw) for r in plain] == [(1.5, 2.5), (3.5, 6.5)]
    assert [(r.in_fw, r.out_fw, r.in_bw, r.out_bw) for r in rows] == [(0, 0.75, 0.75, 0), (0.75, 0, 0, 0.75)]
    assert [(r.load_fw, r.load_bw, r.load) for r in rows] == [(2.75, 3.75, 6.5), (4.75, 7.75, 12.5)]
    assert evaluate(p, CostModel(**FREE, message_latency=0.25, task_overhead=1.0)).objective == 12.5


def test_a_device_without_a_pass_pays_no_overhead_for_it_and_hosts_no_latency():
    g = Graph([Op(name="a", work=1.0, out_bytes=1.0), Op(name="b", work=2.0)], [("a", "b")])
    p = Placement(g, Cluster.accelerators(1, cpus=1), [0, 1])
    rows = device_costs(p, CostModel(**FREE, message_latency=0.5, task_overhead=1.0))
    assert [(r.load_fw, r.load_bw) for r in rows] == [(1.0 + 1.0 + 1.5, 0.0), (2.0 + 1.0, 0.0)]


@pytest.mark.parametrize("field", ["task_overhead", "message_latency"])
@pytest.mark.parametrize("value", [-1.0, float("inf"), float("nan"), True, "1"])
def test_bad_values_are_refused(field, value):
    with pytest.raises(SpecError, match=field):
        CostModel(**{field: value})


def test_the_searches_refuse_what_they_do_not_price():
    p = Placement(chain([1, 3]), Cluster.stages(2), [0, 1, 1, 0])
    with pytest.raises(SpecError, match="message_latency"):
        run("dp", p.graph, p.cluster, model=CostModel.named("pipedream", message_latency=1.0))
    with pytest.raises(SpecError, match="task_overhead.*objective 'interleaved-1f1b'"):
        run("dp", p.graph, p.cluster, model=CostModel.named("interleaved-1f1b", task_overhead=1.0))
    with pytest.raises(SpecError, match="task_overhead.*without replication"):
        run("dp", p.graph, p.cluster, model=CostModel.named("pipedream", task_overhead=1.0), replication=True)


@pytest.mark.parametrize("name", ["pipedream", "gpipe", "bottleneck"])
@pytest.mark.parametrize("method", ["dp", "greedy", "slicegraph"])
def test_the_searches_price_a_fixed_time_per_stage_as_the_cost_model_does(name, method):
    """A fixed time per pass (``task_overhead``) on every device holding ops of a training graph, whose ops share a
    group with their gradients: every valid split pays it twice on each busy device, so the search's split is its
    split without the term, priced with it, and the DP's optimum and bound rise by twice the term."""
    g = chain([4, 1, 1, 1, 2, 3])
    plain = run(method, g, Cluster.stages(3), model=CostModel.named(name))
    priced = run(method, g, Cluster.stages(3), model=CostModel.named(name, task_overhead=0.75))
    assert priced.placement.assign.tolist() == plain.placement.assign.tolist()
    assert priced.objective == pytest.approx(plain.objective + 1.5)
    assert priced.objective == pytest.approx(evaluate(priced.placement, CostModel.named(name, task_overhead=0.75))
                                             .objective)
    if plain.bound is not None:
        assert priced.bound == pytest.approx(plain.bound + 1.5) and priced.exact_among == plain.exact_among


def test_a_graph_whose_passes_are_not_grouped_keeps_a_bound_of_one_pass_and_no_exactness():
    g = chain([4, 1, 1, 2])
    loose = g.replace(ops=[op.model_copy(update={"group": None}) for op in g.ops])
    plain = run("dp", loose, Cluster.stages(2), model=CostModel.named("pipedream"))
    priced = run("dp", loose, Cluster.stages(2), model=CostModel.named("pipedream", task_overhead=1.0))
    assert priced.objective == pytest.approx(evaluate(priced.placement, CostModel.named("pipedream", task_overhead=1.0))
                                             .objective)
    assert (priced.bound is None) == (plain.bound is None) and priced.exact_among is None
    if plain.bound is not None:
        assert priced.bound == pytest.approx(plain.bound + 1.0) and priced.bound <= priced.objective + 1e-9


@settings(deadline=None, max_examples=12)
@given(st.lists(st.integers(1, 5), min_size=2, max_size=6), st.integers(0, 3), st.integers(1, 3),
       st.sampled_from(["1f1b", "gpipe", "interleaved-1f1b", "zb-h1"]), st.data())
def test_the_simulator_runs_every_task_longer_by_the_fixed_costs(works, latency, overhead, schedule, data):
    """On two stages every pass of a device sends or receives one tensor: the run with the fixed costs is the
    run of the same placement whose first op of each pass on each device works ``latency + overhead`` longer;
    under ZB-H1 the split backward's W is an action of its own, whose ``overhead`` that op's W adds too."""
    n = len(works)
    cut = data.draw(st.integers(1, n - 1))
    g = chain(works)
    assign = [0] * cut + [1] * (n - cut) + [1] * (n - cut) + [0] * cut
    p = Placement(g, Cluster.stages(2), assign)
    extra = float(latency + overhead)
    first = {(assign[i], g.ops[i].backward): i for i in reversed(range(g.n))}

    def grown(w_extra: float) -> Graph:
        return g.replace(ops=[op.model_copy(update={"work": {"*": op.work["*"] + extra + op.backward * w_extra}})
                              if i in first.values() else op for i, op in enumerate(g.ops)])

    w_extra = float(overhead) if schedule == "zb-h1" else 0.0
    q = Placement(grown(w_extra), Cluster.stages(2), assign)
    model = CostModel(**FREE, message_latency=float(latency), task_overhead=float(overhead))
    m = data.draw(st.sampled_from([2, 4]))
    share = [(0.5 * op.work["*"] + op.backward * w_extra) / (op.work["*"] + extra + op.backward * w_extra)
             if i in first.values() else 0.5 for i, op in enumerate(g.ops)]
    want = simulate(q, schedule, m, CostModel(**FREE), weight_share=share).makespan  # W plus its action's cost
    assert simulate(p, schedule, m, model).makespan == pytest.approx(want)
    q = Placement(grown(0.0), Cluster.stages(2), assign)
    assert evaluate(p, model).objective == pytest.approx(evaluate(q, CostModel(**FREE)).objective)
