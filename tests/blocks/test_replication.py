"""Replicated stages (Tarnawski App. C.2, blocks/replication.py): warm starts holding their replica counts, the
replicated optimum, which free devices replicas take, the all-reduce and the host's load under the bottleneck.
"""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl.cluster import Cluster, Device
from placement_dsl.compile import compile
from placement_dsl.conformance import check_documented
from placement_dsl.evaluate import evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Throughput
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.testing import brute_force
from tests.blocks.helpers import warm


def _solved_like_brute_force(problem, formulation="throughput"):
    """The IP's optimum and bound are brute force's (the bound within the MIP gap); the answer is valid."""
    best = brute_force(problem)[0]
    r = solve(problem, formulation=formulation, solver="highs", time_limit=60)
    assert r.objective == pytest.approx(best) and r.bound == pytest.approx(best, rel=1e-4)  # within the MIP gap
    assert problem.is_valid(r.placement)
    return r


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
    c, values = warm(problem, "throughput-replicated", placement)
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


