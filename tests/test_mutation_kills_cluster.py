"""Cases that kill mutants of the cluster-level block templates (docs/mutation.md).

Routed transfers (Tarnawski App. C.3, ``blocks/routes.py``), replicated stages (App. C.2,
``blocks/replication.py``) and memory per schedule (``blocks/training.py``): each case is solved and
held to brute force or to a number computed by hand in its comment.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pyomo.environ as pyo
import pytest
from tests.test_mutation_kills_blocks import _warm

from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.compile import compile
from placement_dsl.conformance import check_documented
from placement_dsl.constraints import DagOrder
from placement_dsl.evaluate import evaluate
from placement_dsl.formulations import choose, get
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Throughput
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.testing import brute_force


def _chain(works, sizes):
    names = [f"v{i}" for i in range(len(works))]
    return Graph([Op(name=n, work=w, out_bytes=b) for n, w, b in zip(names, works, sizes)],
                 list(itertools.pairwise(names)))


def _solved_like_brute_force(problem, formulation="throughput"):
    """The IP's optimum and bound are brute force's (the bound within the MIP gap); the answer is valid."""
    best = brute_force(problem)[0]
    r = solve(problem, formulation=formulation, solver="highs", time_limit=60)
    assert r.objective == pytest.approx(best) and r.bound == pytest.approx(best, rel=1e-4)  # within the MIP gap
    assert problem.is_valid(r.placement)
    return r


# ---------------------------------------------------------------------------- blocks/routes.py
@pytest.mark.parametrize("overlap", ["none", "half", "full"])
def test_routed_throughput_ip_equals_brute_force(overlap):
    # two servers of two accelerators, 4 bytes per time unit inside a server and 0.5 between: a tensor of 1 byte
    # costs 0.25 inside and 2 across; the IP prices each tensor over its route like the cost model
    problem = Problem(_chain([4, 3, 5, 2], [2, 1, 3, 1]), Cluster.hierarchical(2, 2, intra=4.0, inter=0.5),
                      Throughput(overlap=overlap))
    _solved_like_brute_force(problem)


def _host_cluster():
    """Accelerators a0 (server s0) and a1 (server s1) and a host CPU on s0: 4 bytes per time unit inside s0,
    0.5 between the servers."""
    devices = [Device(name="a0", server="s0"), Device(name="a1", server="s1"),
               Device(name="cpu", kind="cpu", server="s0")]
    bw = {("a0", "cpu"): 4.0, ("a0", "a1"): 0.5, ("a1", "cpu"): 0.5}
    links = [Link(src=a, dst=b, bandwidth=w) for (x, y), w in bw.items() for a, b in ((x, y), (y, x))]
    return Cluster(devices, links)


def test_routed_ip_charges_accelerators_and_not_the_host():
    # u -> v -> w, 4 on an accelerator, 5 on the CPU, 2-byte tensors: the host pays no transfers, the accelerators
    # pay theirs over the route. Brute force's optimum, proved; the cut has variables for the payers only
    ops = [Op(name=n, work={"accelerator": 4, "cpu": 5}, out_bytes=2) for n in "uvw"]
    problem = Problem(Graph(ops, [("u", "v"), ("v", "w")]), _host_cluster(), Throughput())
    _solved_like_brute_force(problem)
    cut = compile(problem, "throughput").model.tensor_cut
    payers = {(u, d) for u in "uv" for d in ("a0", "a1")}  # w's tensor crosses no edge
    assert set(cut.recv) == set(cut.send) == payers


def test_routed_ip_cuts_only_tensors_with_bytes():
    # v0's tensor has no bytes: no variables for it; v1's single byte is priced like any other
    problem = Problem(_chain([4, 4, 4], [0, 1, 0]), Cluster.hierarchical(3, 1, intra=4.0, inter=0.5), Throughput())
    cut = compile(problem, "throughput").model.tensor_cut
    assert {u for u, _ in cut.recv} == {u for u, _ in cut.send} == {"v1"}
    _solved_like_brute_force(problem)  # all on one device 12; v0, v1 | v2 costs 8 + 2 = 10, the optimum


def _unreachable():
    """a0 and a1 on server s0 (4 bytes per time unit), b0 alone on s1 with no link to either."""
    devices = [Device(name="a0", server="s0"), Device(name="a1", server="s0"), Device(name="b0", server="s1")]
    return Cluster(devices, [Link(src="a0", dst="a1", bandwidth=4.0), Link(src="a1", dst="a0", bandwidth=4.0)])


def test_no_tensor_crosses_a_pair_of_devices_with_no_route():
    # u -> v, work 4 each, one byte: between b0 and s0 there is no route, so the tensor's time there is infinite
    # (the IP once priced it at 0 and answered inf with a bound of 4). The best keeps u, v on s0: 4 + 0.25
    g = Graph([Op(name="u", work=4, out_bytes=1), Op(name="v", work=4)], [("u", "v")])
    problem = Problem(g, _unreachable(), Throughput())
    assert evaluate(Placement(g, problem.cluster, [2, 1])).objective == math.inf
    r = _solved_like_brute_force(problem)
    assert r.objective == 4.25
    blocked = compile(problem, "throughput").model.tensor_cut.no_route
    assert sorted(blocked) == [("u", "v", a, b) for a, b in (("a0", "b0"), ("a1", "b0"), ("b0", "a0"), ("b0", "a1"))]
    assert blocked.doc == "no tensor between devices with no route: its time would be infinite"


def test_a_tensor_of_no_bytes_needs_no_route():
    # the same graph with an empty tensor: u on b0 and v on a1 costs 4 (not 0, not nan: nothing is sent)
    g = Graph([Op(name="u", work=4), Op(name="v", work=4)], [("u", "v")])
    problem = Problem(g, _unreachable(), Throughput())
    assert evaluate(Placement(g, problem.cluster, [2, 1])).objective == 4.0
    assert _solved_like_brute_force(problem).objective == 4.0
    assert len(compile(problem, "throughput").model.tensor_cut.no_route) == 0


def test_routed_warm_start_reads_each_route():
    # u (2 bytes) on s0g0 -> v on s1g0, w on s0g0 reading u too: v reads u over the 0.5 route (4), w nothing;
    # the writer pays its slowest route (4). The values satisfy every row and give the cost model's objective
    g = Graph([Op(name=n, work=4, out_bytes=2 if n == "u" else 0) for n in "uvw"], [("u", "v"), ("u", "w")])
    problem = Problem(g, Cluster.hierarchical(2, 1, intra=4.0, inter=0.5), Throughput())
    placement = Placement(g, problem.cluster, [0, 1, 0])
    c, values = _warm(problem, "throughput", placement)
    cut, scale = c.model.tensor_cut, c.objective_scale
    got = {(k, side): values[var[k]] * scale for side, var in (("in", cut.recv), ("out", cut.send)) for k in var}
    assert got == {(("u", "s0g0"), "in"): 0.0, (("u", "s1g0"), "in"): pytest.approx(4.0),
                   (("u", "s0g0"), "out"): pytest.approx(4.0), (("u", "s1g0"), "out"): 0.0}
    assert pyo.value(c.model.max_load.bottleneck) * scale == pytest.approx(evaluate(placement).objective) == 12.0



def _warm_holds(problem, placement, formulation="throughput"):
    """The start's values satisfy every row and its bottleneck is the cost model's objective; returns the values."""
    c, values = _warm(problem, formulation, placement)
    assert pyo.value(c.model.max_load.bottleneck) * c.objective_scale == pytest.approx(
        evaluate(placement, problem.cost_model()).objective)
    return c, values


def _routed_training(objective=None, terms=(), memory=math.inf):
    """f0 (2) -> f1 (2) forward with a 2-byte tensor, b1 (4) -> b0 (4) backward with an 80-byte tensor, each backward
    op with its forward mate, on two servers of two accelerators (4 bytes per time unit inside, 0.5 between)."""
    ops = [Op(name="f0", work=2, out_bytes=2, group="c0"), Op(name="f1", work=2, group="c1"),
           Op(name="b1", work=4, out_bytes=80, backward=True, group="c1"),
           Op(name="b0", work=4, backward=True, group="c0")]
    g = Graph(ops, [("f0", "f1"), ("f1", "b1"), ("b1", "b0")])
    return Problem(g, Cluster.hierarchical(2, 2, intra=4.0, inter=0.5, memory=memory),
                   objective or Throughput(overlap="half"), list(terms))


def test_routed_ip_prices_each_pass_with_its_own_tensors():
    # the backward tensor (80 bytes) is forty times the forward one: a split inside a server costs max(6, 0.5 + 20)
    # (half overlap), so all on one device (12) is the optimum; priced with the forward tensors only, a split would
    # look like 6. The IP and its warm starts price each pass with its own tensors, like brute force
    problem = _routed_training()
    assert _solved_like_brute_force(problem).objective == 12.0
    for assign in ([0, 1, 1, 0], [0, 2, 2, 0]):
        _warm_holds(problem, Placement(problem.graph, problem.cluster, assign))


def test_routed_warm_start_stashes_what_each_stage_reads():
    # 1F1B memory per stage counts the forward bytes the stage reads (its in-transfer times its bandwidth): f1's
    # stage on s1g0 reads f0's 2 bytes over the 0.5 route (4 time units at bandwidth 4: 16 bytes); f0's stage reads
    # nothing and writes 4. The start's stash values hold every row of the memory template
    from placement_dsl.objectives import PipeDream
    from placement_dsl.training_terms import TrainingMemory

    problem = _routed_training(PipeDream(), [TrainingMemory("1f1b")], memory=1000.0)
    _warm(problem, "throughput", Placement(problem.graph, problem.cluster, [0, 2, 2, 0]))


def test_routed_warm_start_keeps_reads_and_writes_apart():
    # u (2 bytes) on s0g0 read by v on s1g0 (over 0.5: 4) and x on s0g1 (over 4: 0.5): the writer pays its slowest
    # route once (4), each reader its own; loads 1 + 4, 1 + 4 and 1 + 0.5 (no overlap)
    g = Graph([Op(name=n, work=1, out_bytes=2 if n == "u" else 0) for n in "uvx"], [("u", "v"), ("u", "x")])
    problem = Problem(g, Cluster.hierarchical(2, 2, intra=4.0, inter=0.5), Throughput())
    placement = Placement(g, problem.cluster, [0, 2, 1])
    c, _ = _warm_holds(problem, placement)
    assert evaluate(placement).objective == 5.0
    cost = c.model.device_load.device_cost
    loads = {d: pyo.value(cost[d, "total", "total"]) * c.objective_scale for d in ("s0g0", "s0g1", "s1g0")}
    assert loads == {"s0g0": pytest.approx(5.0), "s0g1": pytest.approx(1.5), "s1g0": pytest.approx(5.0)}


def test_routed_warm_start_beside_a_host_and_across_no_route():
    # beside a host CPU the start's values hold every row (the host pays nothing); a start that sends a tensor
    # between devices with no route gets finite values (0 for that tensor) and breaks only the no_route row
    ops = [Op(name=n, work={"accelerator": 4, "cpu": 5}, out_bytes=2) for n in "uvw"]
    problem = Problem(Graph(ops, [("u", "v"), ("v", "w")]), _host_cluster(), Throughput())
    _warm_holds(problem, Placement(problem.graph, problem.cluster, [2, 0, 1]))
    g = Graph([Op(name="u", work=4, out_bytes=1), Op(name="v", work=4)], [("u", "v")])
    unreachable = Problem(g, _unreachable(), Throughput())
    c = compile(unreachable, "throughput")
    values = c.varmap.values(Placement(g, unreachable.cluster, [2, 1]))
    assert values[c.model.tensor_cut.recv["u", "a1"]] == 0.0 and values[c.model.tensor_cut.send["u", "b0"]] == 0.0
    worst, where = c.varmap.residual(values)
    assert worst == pytest.approx(1.0) and "no_route" in where

def test_routed_cluster_refuses_archers_cut_before_building():
    # Archer's cut prices transfers per device: on a routed cluster 'exact' refuses with the reason, and 'auto'
    # takes the throughput IP for a DAG-ordered problem instead of failing at compile time
    problem = Problem(_chain([4, 3], [1, 0]), Cluster.hierarchical(2, 1, intra=4.0, inter=0.5), Throughput(),
                      [DagOrder()])
    assert get("exact").accepts(problem) == (
        "tensor_cut: a routed cluster needs form='commio' (Archer's DAG-ordered cut prices transfers per device, "
        "not per route)")
    assert choose(problem) == "throughput"
    assert choose(Problem(problem.graph, Cluster.stages(2), Throughput(), [DagOrder()])) == "exact"


def test_every_component_of_the_routed_cut_is_documented():
    problem = Problem(Graph([Op(name=n, work={"accelerator": 4, "cpu": 5}, out_bytes=1) for n in "uv"],
                            [("u", "v")]), _unreachable(), Throughput())
    model = compile(problem, "throughput").model
    assert check_documented(model.tensor_cut) == []
    assert {"recv", "send", "route_in", "route_out", "no_route"} <= {c.local_name for c in model.tensor_cut.component_objects()}


def test_certify_proves_a_dag_ordered_problem_on_a_routed_cluster_with_the_throughput_ip():
    # Archer's levels cannot write a routed cluster; the throughput IP (with its DAG-order rows) proves the optimum
    # where the simple bound alone left 5 against 7.25
    from placement_dsl.certify import certify, default_levels

    problem = Problem(_chain([4, 3, 5, 2], [2, 1, 3, 1]), Cluster.hierarchical(2, 2, intra=4.0, inter=0.5),
                      Throughput(), [DagOrder()])
    assert default_levels(problem) == ("simple", "dp", "throughput")
    cert = certify(problem, budget=60)
    assert cert.objective == pytest.approx(brute_force(problem)[0]) == 7.25
    assert cert.bound == pytest.approx(7.25, rel=1e-4) and cert.proved_by == "throughput"


# ---------------------------------------------------------------------------- blocks/replication.py
def _replicated(overlap="none", cpus=0, training=False):
    """v0 (work 8, 4 parameter bytes) -> v1 (work 2, 1 parameter byte), one-byte tensors, on three accelerators of
    bandwidth 2 (and ``cpus`` CPUs), up to 2 replicas; ``training`` adds each op's backward op (twice its work)."""
    from placement_dsl.training_terms import Replicate

    group = (lambda n: n) if training else (lambda n: None)
    ops = [Op(name="v0", work=8, param_bytes=4, out_bytes=1, group=group("v0")),
           Op(name="v1", work=2, param_bytes=1, out_bytes=1, group=group("v1"))]
    edges = [("v0", "v1")]
    if training:
        ops += [Op(name="v1~bw", work=4, out_bytes=1, backward=True, group="v1"),
                Op(name="v0~bw", work=16, backward=True, group="v0")]
        edges += [("v1", "v1~bw"), ("v1~bw", "v0~bw")]
    return Problem(Graph(ops, edges), Cluster.accelerators(3, bandwidth=2.0, cpus=cpus), Throughput(overlap=overlap),
                   [Replicate(2)])


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("overlap", ["none", "half", "full"])
def test_replicated_warm_start_holds_its_replica_counts(overlap, training):
    # v0 on acc0 replicated onto acc2, v1 on acc1 (and a CPU left empty): rho[acc0, 2] = rho[acc1, 1] = 1, acc2 (a
    # replica) picks no count. Inference without overlap: acc0's replica runs (8 + 0.5 out + all-reduce
    # 2 (r - 1) * 4 / 2) / 2 = (8.5 + 4) / 2 = 6.25 against acc1's 2 + 0.5. The values satisfy every row and the
    # bottleneck is the cost model's (backward passes and each stage's own parameters included)
    problem = _replicated(overlap, cpus=1, training=training)
    placement = Placement(problem.graph, problem.cluster, [0, 1, 1, 0][:problem.graph.n],
                          replicas={"acc0": ["acc0", "acc2"]})
    c, values = _warm(problem, "throughput-replicated", placement)
    blk = c.model.replicated_max_load
    rho = {key: values[var] for key, var in blk.rho.items()}
    assert rho == {("acc0", 1): 0.0, ("acc0", 2): 1.0, ("acc1", 1): 1.0, ("acc1", 2): 0.0,
                   ("acc2", 1): 0.0, ("acc2", 2): 0.0}
    objective = evaluate(placement, problem.cost_model()).objective
    assert values[blk.bottleneck] * c.objective_scale == pytest.approx(objective)
    if overlap == "none" and not training:
        assert objective == 6.25


def test_replicated_ip_finds_the_replicated_optimum():
    # the IP replicates v0 (6.25) rather than leave it alone (8.5) or replicate both ops on one stage ((10 + 4) / 2)
    problem = _replicated()
    r = _solved_like_brute_force(problem, "throughput-replicated")
    assert r.objective == 6.25 and r.placement.replicated


def test_replica_choice_takes_the_nearest_free_devices_after_each_stage_in_pipeline_order():
    # eight accelerators named against their order (index 0 is "d7"); stages on indices 0 (2 replicas), 3 (5) and
    # 6 (1). In pipeline order index 0 takes the free device nearest after it (1), then index 3 takes 4, 5, 7 and,
    # wrapping around, 2. A stage of one replica, and a device holding no ops, get no set
    from placement_dsl.blocks.base import Context
    from placement_dsl.blocks.replication import replica_choice

    cluster = Cluster([Device(name=f"d{7 - i}") for i in range(8)])
    ctx = Context(Problem(Graph([Op(name=n, work=1) for n in "ace"]), cluster, Throughput()))
    assign = np.array([0, 3, 6])
    assert replica_choice(ctx, assign, {"d7": 2, "d4": 5, "d1": 1}) == {"d7": ["d7", "d6"],
                                                                       "d4": ["d4", "d3", "d2", "d0", "d5"]}
    assert replica_choice(ctx, assign, {"d6": 2}) == {}  # d6 holds no ops


def test_replicated_ip_keeps_an_overlapped_all_reduce_under_the_bottleneck():
    # full overlap, v0's parameters 12 bytes: on two replicas its all-reduce takes 2 (r - 1) / r * 12 / 2 = 6 per
    # sample, above its halved compute (8 / 2). Replicated, the bottleneck is that 6; alone v0 takes 8
    from placement_dsl.training_terms import Replicate

    g = Graph([Op(name="v0", work=8, param_bytes=12, out_bytes=1), Op(name="v1", work=2)], [("v0", "v1")])
    problem = Problem(g, Cluster.accelerators(3, bandwidth=2.0), Throughput(overlap="full"), [Replicate(2)])
    r = _solved_like_brute_force(problem, "throughput-replicated")
    assert r.objective == 6.0 and r.placement.replicated


def test_replicas_come_from_free_devices_of_the_stage_kind():
    # two ops that run on GPUs only, two GPUs and a TPU, up to three replicas: counting the TPU as a replica of a GPU
    # stage would claim 16 / 3; a GPU stage has at most the two GPUs, so the best is 8 (both ops on one GPU twice, or
    # one op per GPU)
    from placement_dsl.training_terms import Replicate

    cluster = Cluster([Device(name="g0", kind="gpu"), Device(name="g1", kind="gpu"), Device(name="t0", kind="tpu")])
    g = Graph([Op(name=n, work={"gpu": 8}) for n in "ab"])
    problem = Problem(g, cluster, Throughput(), [Replicate(3)])
    assert _solved_like_brute_force(problem, "throughput-replicated").objective == 8.0
    budget = compile(problem, "throughput-replicated").model.replicated_max_load.budget
    assert {k: budget[k].upper for k in budget} == {"gpu": 2.0, "tpu": 1.0}


def test_replicated_ip_bounds_the_bottleneck_by_the_hosts_load_too():
    # c runs on the CPU only (9): hosts are not replicated, and their load bounds the bottleneck like any stage's
    from placement_dsl.training_terms import Replicate

    base = _replicated(cpus=1)
    g = Graph([*base.graph.ops, Op(name="c", work={"cpu": 9})], [*base.graph.edges, ("v1", "c")])
    problem = Problem(g, base.cluster, base.objective, [Replicate(2)])
    assert _solved_like_brute_force(problem, "throughput-replicated").objective == 9.0


def test_replicated_objective_rows_and_links():
    # one count per accelerator (at most one of rho[d, 1..R]); the block's bottleneck is the one other templates read;
    # every component documented
    from placement_dsl.blocks.base import BottleneckLink
    from placement_dsl.blocks.replication import ReplicatedMaxLoad

    c = compile(_replicated(cpus=1), "throughput-replicated")
    blk = c.model.replicated_max_load
    assert {d: (row.upper, len(list(row.body.args))) for d, row in blk.one_count.items()} == {
        d: (1.0, 2) for d in ("acc0", "acc1", "acc2")}
    assert c.varmap.context.link(BottleneckLink).bottleneck is blk.bottleneck
    assert repr(ReplicatedMaxLoad()) == "ReplicatedMaxLoad(max_per_stage=2)"  # the default of Replicate too
    assert check_documented(blk) == []


# ---------------------------------------------------------------------------- blocks/training.py
def _training_memory_problem(spec, routed):
    """f0 -> f1 -> f2 (activations 3, 2, 1; tensors 2, 1; parameters 1 each) with mirrored backward ops, on four
    accelerators of memory 1000 (two servers of two when ``routed``) and, flat, a CPU of memory 1000 too."""
    from placement_dsl.objectives import PipeDream

    fw = [Op(name=f"f{i}", work={"accelerator": 2, "cpu": 6}, out_bytes=b, activation_bytes=a, param_bytes=1,
             group=f"c{i}") for i, (a, b) in enumerate(((3, 2), (2, 1), (1, 0)))]
    bw = [Op(name=f"b{i}", work={"accelerator": 4, "cpu": 12}, out_bytes=1, backward=True, group=f"c{i}")
          for i in range(3)]
    edges = [("f0", "f1"), ("f1", "f2"), ("f2", "b2"), ("b2", "b1"), ("b1", "b0")]
    cluster = (Cluster.hierarchical(2, 2, intra=4.0, inter=0.5, memory=1000.0) if routed
               else Cluster.accelerators(4, memory=1000.0, cpus=1, cpu_memory=1000.0))
    return Problem(Graph(fw + bw, edges), cluster, PipeDream(), [spec])


@pytest.mark.parametrize("routed", [False, True])
@pytest.mark.parametrize("schedule, microbatches, recompute", [("1f1b", None, False), ("1f1b", None, True),
                                                               ("gpipe", 3, False), ("gpipe", 2, True)])
def test_memory_rows_at_a_start_are_the_cost_models_memory(schedule, microbatches, recompute, routed):
    # each stage on its own device (f2's stage on the CPU when flat): at the start's values the left-hand side of
    # every device's capacity row is the memory the cost model charges that device, and every row holds
    from placement_dsl.training_terms import TrainingMemory

    spec = TrainingMemory(schedule, microbatches, recompute=recompute)
    problem = _training_memory_problem(spec, routed)
    last = 2 if routed else 4  # s1g0, or the CPU
    placement = Placement(problem.graph, problem.cluster, [0, 1, last, 0, 1, last])
    c, _ = _warm(problem, "throughput", placement)
    rows = c.model.training_memory.capacity
    used = {r.device: r.memory_used for r in evaluate(placement, problem.cost_model()).devices}
    scale = c.varmap.context.scale.memory
    for name in (problem.cluster.names[d] for d in (0, 1, last)):
        assert pyo.value(rows[name].body) * scale == pytest.approx(used[name]), name
    assert used[problem.cluster.names[1]] > 0
    assert check_documented(c.model.training_memory) == []


def test_training_memory_template_refuses_what_it_cannot_write():
    from placement_dsl.blocks.training import TrainingMemoryCapacity
    from placement_dsl.errors import SpecError
    from placement_dsl.training import TrainingMemorySpec

    with pytest.raises(SpecError, match=r"^training_memory: the IP writes 1F1B's k - s micro-batches in flight; a "
                                        r"microbatches cap on it is not written \(drop microbatches, or use method "
                                        r"'pipeline'\)$"):
        TrainingMemoryCapacity(TrainingMemorySpec("1f1b", 2))
    assert TrainingMemoryCapacity(TrainingMemorySpec("gpipe", 2)).spec.microbatches == 2
    inference = Problem(_chain([4, 3], [1, 0]), Cluster.stages(2, memory=10.0), Throughput())
    with pytest.raises(SpecError, match=r"^training_memory: the graph has no backward pass$"):
        compile(inference, get("throughput").derive("with_training_memory", skeleton=lambda p: [
            *get("throughput").skeleton(p), TrainingMemoryCapacity()]))


def test_replicated_big_m_leaves_a_many_op_stage_free_to_replicate():
    # 40 unit ops, v0 broadcasting a 0.1-byte tensor to the rest, on four accelerators with up to four replicas:
    # all on one stage replicated four times gives 10 with no transfer; the row for one replica, inactive there,
    # must allow the stage's whole load (40) above the bottleneck, far more than any single op's work
    from placement_dsl.training_terms import Replicate

    ops = [Op(name=f"v{i}", work=1, out_bytes=0.1 if i == 0 else 0) for i in range(40)]
    problem = Problem(Graph(ops, [("v0", f"v{i}") for i in range(1, 40)]), Cluster.accelerators(4), Throughput(),
                      [Replicate(4)])
    r = solve(problem, formulation="throughput-replicated", solver="highs", time_limit=60)
    assert r.objective == pytest.approx(10.0) and r.bound == pytest.approx(10.0, rel=1e-4)


def test_replicated_big_m_leaves_a_parameter_heavy_stage_unreplicated():
    # 20 ops of work 1 and 100 parameter bytes on two accelerators: replicating would all-reduce far more than it
    # saves, so the best is 10 | 10 unreplicated; the rows for two replicas, inactive, must allow the stage's whole
    # all-reduce (20 x 100 bytes) above the bottleneck
    from placement_dsl.training_terms import Replicate

    ops = [Op(name=f"v{i}", work=1, param_bytes=100) for i in range(20)]
    problem = Problem(Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(19)]), Cluster.accelerators(2), Throughput(),
                      [Replicate(2)])
    r = solve(problem, formulation="throughput-replicated", solver="highs", time_limit=60)
    assert (r.objective, r.bound) == (10.0, pytest.approx(10.0)) and not r.placement.replicated


def test_a_stage_stashes_what_it_reads_from_a_producer_that_cannot_run_there():
    # p runs on the CPU only and sends 0.2 bytes to q on the accelerator (memory scale: the 0.5-byte accelerator):
    # 1F1B stashes those 0.2 bytes on q's stage, first of two, for two micro-batches: 0.4. The start (p alone on
    # the CPU, the second accelerator empty) holds every row; with 0.35 bytes nothing fits, with 0.45 it does;
    # every component is documented, the linearized stash and the reads non-negative
    from placement_dsl.objectives import PipeDream
    from placement_dsl.solvers import Status
    from placement_dsl.training_terms import TrainingMemory

    def problem(memory):
        ops = [Op(name="p", work={"cpu": 1}, out_bytes=0.2), Op(name="q", work={"accelerator": 1}, group="q"),
               Op(name="q~bw", work={"accelerator": 2}, backward=True, group="q")]
        return Problem(Graph(ops, [("p", "q"), ("q", "q~bw")]), Cluster.accelerators(2, memory=memory, cpus=1),
                       PipeDream(), [TrainingMemory("1f1b")])

    start = problem(0.5)
    c, values = _warm(start, "throughput", Placement(start.graph, start.cluster, [2, 0, 0]))  # acc1 left empty
    blk = c.model.training_memory
    assert values[blk.reads["p", "acc0"]] * c.varmap.context.scale.memory == pytest.approx(0.2)
    assert all(v.lb == 0 for v in [*blk.reads.values(), *blk.stash.values()])
    assert all(v.is_binary() for v in blk.used.values())  # a half-used stage would halve its successors' stash
    assert check_documented(blk) == []
    assert solve(problem(0.35), formulation="throughput", time_limit=20).status is Status.INFEASIBLE
    tight = problem(0.45)
    assert solve(tight, formulation="throughput", time_limit=20).objective == brute_force(tight)[0]


def test_replicated_big_m_leaves_a_transfer_heavy_stage_free_to_replicate():
    # thirty CPU ops send a byte each to one accelerator op (work 1) on two accelerators, up to two replicas: the
    # stage reads 30, so alone it takes 31 and replicated 15.5. The row for one replica, inactive there, must
    # allow the stage's whole load above the bottleneck (31 - 15.5), far more than its work plus any one tensor
    from placement_dsl.training_terms import Replicate

    ops = [Op(name=f"p{i}", work={"cpu": 0.01}, out_bytes=1) for i in range(30)] + [Op(name="q", work={"accelerator": 1})]
    problem = Problem(Graph(ops, [(f"p{i}", "q") for i in range(30)]), Cluster.accelerators(2, cpus=1), Throughput(),
                      [Replicate(2)])
    r = solve(problem, formulation="throughput-replicated", solver="highs", time_limit=60)
    assert r.objective == pytest.approx(15.5) and r.bound == pytest.approx(15.5, rel=1e-4) and r.placement.replicated
