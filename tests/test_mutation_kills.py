"""Hand-computed checks that catch mutants the rest of the suite let through (docs/mutation.md).

Each test pins down one behaviour of a core module — the cost model, a block template — with
numbers worked out by hand in its comments, so that a changed operator or dropped term in that
module changes the answer.
"""
from __future__ import annotations

import pyomo.environ as pyo
import pytest

from placement_dsl.cluster import Cluster, Device
from placement_dsl.compile import compile
from placement_dsl.conformance import check_documented
from placement_dsl.constraints import Colocate, Memory, Overflow, Pin
from placement_dsl.errors import InfeasibleError
from placement_dsl.evaluate import DEFAULT_REQUIRE, CostModel, evaluate, invocation_latency
from placement_dsl.formulations import Kind, of_kind
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck, Throughput
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.solvers import Status
from placement_dsl.testing import INSTANCES, brute_force

FORMULATIONS = of_kind(Kind.EXACT)


# ---------------------------------------------------------------------------- the cost model
def _two_stage_training() -> Graph:
    """f0 -> f1 -> b1 -> b0, f0/b0 and f1/b1 colocated; f0 holds 6 parameter bytes."""
    ops = [Op(name="f0", work=4, param_bytes=6, out_bytes=2, group="a"),
           Op(name="f1", work=3, out_bytes=2, group="b"),
           Op(name="b1", work=2, out_bytes=1, backward=True, group="b"),
           Op(name="b0", work=7, backward=True, group="a")]
    return Graph(ops, [("f0", "f1"), ("f1", "b1"), ("b1", "b0")])


def test_replicated_training_stage_splits_passes_and_mirrors_its_replica():
    # stage0 = {f0, b0} on stage0 and its replica stage1; stage3 = {f1, b1}; bandwidth 1 everywhere.
    # stage0: compute fw 4, bw 7; reads b1's tensor (bw 1); writes f0's (fw 2)
    #   load_fw = 4 + 2 = 6, load_bw = 7 + 1 = 8, load = 11 + 1 + 2 = 14
    #   sync = 2 * (2 - 1) / 2 * 6 / 1 = 6 (ring all-reduce of f0's parameters)
    #   replicated (overlap none): load_fw = 6 / 2 = 3, load_bw = 8 / 2 + 6 = 10, load = 14 / 2 + 6 = 13
    # stage3: compute fw 3, bw 2; reads f0's tensor (fw 2); writes b1's (bw 1): load 3 + 2 + 2 + 1 = 8
    p = Placement(_two_stage_training(), Cluster.stages(4), [0, 3, 3, 0], replicas=[2, 1, 1, 1])
    ev = evaluate(p, CostModel(require=frozenset()))
    s0, s1, s2, s3 = ev.devices
    for row in (s0, s1):  # the replica mirrors its stage's row
        assert (row.compute_fw, row.compute_bw, row.in_fw, row.in_bw, row.out_fw, row.out_bw) == (4, 7, 0, 1, 2, 0)
        assert (row.replicas, row.sync) == (2, pytest.approx(6.0))
        assert (row.load_fw, row.load_bw, row.load) == pytest.approx((3.0, 10.0, 13.0))
    assert (s2.load, s2.replicas, s2.ops) == (0.0, 1, 0)
    assert (s3.in_fw, s3.out_bw, s3.load_fw, s3.load_bw) == (2, 1, 5, 3)
    assert s3.load == pytest.approx(8.0) and s3.sync == 0.0
    assert ev.objective == pytest.approx(13.0)
    # overlapped communication: max(share, sync) instead of share + sync
    half = evaluate(p, CostModel(overlap="half", require=frozenset())).devices[0]
    # load_bw = max(7, 1) = 7 -> max(3.5, 6) = 6; load = max(11, 3) = 11 -> max(5.5, 6) = 6; load_fw = max(4, 2) / 2
    assert (half.load_fw, half.load_bw, half.load) == pytest.approx((2.0, 6.0, 6.0))


def test_overflow_is_part_of_the_communication_side_of_an_overlapped_load():
    # a (work 1, 5 parameter bytes, tensor 1) -> b (work 1) on two stages of memory 2, bandwidth 1:
    # stage0 overflows by 3 bytes = 3 time units, computes 1 and writes 1
    g = Graph([Op(name="a", work=1, param_bytes=5, out_bytes=1), Op(name="b", work=1)], [("a", "b")])
    p = Placement(g, Cluster.stages(2, memory=2.0), [0, 1])
    loads = {o: evaluate(p, CostModel.named("bottleneck", overlap=o)).devices[0].load for o in ("none", "half", "full")}
    assert loads == {"none": 1 + 1 + 3, "half": max(1, 1 + 3), "full": max(1, 0, 1 + 3)}
    # stage1 holds nothing and overflows nothing: its load is b's work plus reading a's tensor
    row = evaluate(p, "bottleneck").devices[1]
    assert (row.overflow, row.load) == (0.0, 2.0)


def test_host_devices_never_overflow_and_rows_carry_kind_and_op_count():
    # the CPU (a host) holds 5 parameter bytes in 1 byte of memory: hosts hold the model in RAM, no overflow;
    # the accelerator holds b (2 bytes in 1): overflow 1 / bandwidth 1
    g = Graph([Op(name="a", work=1, param_bytes=5, out_bytes=1), Op(name="b", work=1, param_bytes=2)], [("a", "b")])
    c = Cluster.accelerators(1, memory=1.0, cpus=1, cpu_memory=1.0)
    acc, cpu = evaluate(Placement(g, c, [1, 0]), "bottleneck").devices
    assert (cpu.kind, cpu.ops, cpu.overflow, cpu.load) == ("cpu", 1, 0.0, 1.0)
    assert (acc.kind, acc.ops, acc.overflow, acc.load) == ("accelerator", 1, 1.0, 1 + 1 + 1)


def test_training_load_adds_both_passes_outgoing_tensors():
    # without replication, overlap none: stage1 reads f0's tensor (forward, 2 bytes) and writes b1's (backward, 1)
    p = Placement(_two_stage_training(), Cluster.stages(2), [0, 1, 1, 0])
    s0, s1 = evaluate(p).devices
    assert (s0.out_fw, s0.in_bw, s0.load) == (2, 1, 4 + 7 + 2 + 1)
    assert (s1.in_fw, s1.out_bw, s1.load) == (2, 1, 3 + 2 + 2 + 1)


def test_named_models_require_the_checks_their_objective_scores():
    assert CostModel.named("throughput").require == DEFAULT_REQUIRE == {"allowed", "memory", "colocation"}
    assert CostModel.named("bottleneck").require == {"allowed", "colocation"}  # memory is a cost, not a limit
    assert CostModel.named("makespan").require == {"allowed", "memory", "colocation", "schedule"}
    assert CostModel.named("bottleneck", overlap="half").require == {"allowed", "colocation"}


def test_latency_violations_are_contiguity_checks_and_the_limit_is_optional():
    # a -> b -> c -> d -> e alternating over two stages: stage0 runs three subgraphs, stage1 two
    g = Graph([Op(name=n, work=1, out_bytes=1) for n in "abcde"], [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e")])
    p = Placement(g, Cluster.stages(2), [0, 1, 0, 1, 0])
    latency, finish, subgraphs, problems = invocation_latency(p)  # no model: no limit on subgraphs
    assert (latency, subgraphs, problems) == (13.0, {"stage0": 3, "stage1": 2}, [])
    assert finish["e"] == 13.0
    (v,) = invocation_latency(p, CostModel.named("latency", max_subgraphs=2))[3]
    assert v.check == "contiguous" and "'stage0' needs 3" in v.message
    ev = evaluate(p, CostModel.named("latency", max_subgraphs=2))
    assert [v.check for v in ev.violations if "max_subgraphs" in v.message] == ["contiguous"]
    # two invocations waiting on each other (a -> b, c -> d; stage0 {a, d}, stage1 {b, c}): a contiguity violation
    g2 = Graph([Op(name=n, work=1, out_bytes=1) for n in "abcd"], [("a", "b"), ("c", "d")])
    latency, finish, _, problems = invocation_latency(Placement(g2, Cluster.stages(2), [0, 1, 1, 0]))
    assert latency == float("inf") and finish == {}
    assert [v.check for v in problems] == ["contiguous"]
    assert problems[0].message.endswith("wait on each other, e.g. the cycle stage0#1 -> stage1#1")


# ---------------------------------------------------------------------------- the DP over ideals (linearized)
def test_dpl_passes_its_options_to_the_search():
    from placement_dsl.heuristics.ideals import dpl

    heavy = Graph([Op(name="a", work=12)], [])
    # one op of work 12 on four stages: replicas share it (no parameters, so no all-reduce)
    assert dpl(heavy, Cluster.stages(4)).objective == 12.0
    assert dpl(heavy, Cluster.stages(4), replication=True).objective == 3.0
    assert dpl(heavy, Cluster.stages(4), replication=True, max_replicas=2).objective == 6.0
    # a (work 4, tensor 2) -> b (work 4) on two stages: split, each stage computes 4 and moves 2
    g = Graph([Op(name="a", work=4, out_bytes=2), Op(name="b", work=4)], [("a", "b")])
    r = dpl(g, Cluster.stages(2))
    assert (r.objective, r.bound, r.method, r.placement.source) == (6.0, None, "dpl", "dpl")
    assert dpl(g, Cluster.stages(2), model=CostModel(overlap="half")).objective == 4.0  # max(4, 2)


def test_dpl_merges_zero_cost_leaves_by_default():
    from placement_dsl.heuristics.ideals import dpl

    # z is a zero-work leaf hanging off b: App. B merges it into its neighbour, one supernode fewer
    g = Graph([Op(name="a", work=4, out_bytes=1), Op(name="b", work=4, out_bytes=1), Op(name="z", work=0)],
              [("a", "b"), ("b", "z")])
    merged, kept = dpl(g, Cluster.stages(2)), dpl(g, Cluster.stages(2), merge_zero_cost=False)
    assert merged.objective == kept.objective == 5.0
    assert merged.info["nodes"] < kept.info["nodes"]


# ---------------------------------------------------------------------------- block templates' warm starts
def _compiled_at(problem, placement):
    """Every formulation that accepts ``problem``, compiled, with ``placement``'s warm-start values loaded."""
    for name, formulation in sorted(FORMULATIONS.items()):
        if formulation.accepts(problem):
            continue
        c = compile(problem, name)
        c.varmap.set_values(placement)
        yield name, c


@pytest.mark.parametrize("instance", sorted(INSTANCES))
def test_warm_values_decode_to_their_placement_and_price_it_like_the_cost_model(instance):
    # every block's warm-start values (assignment, tensor cut, overflow, objective epigraphs) of the
    # brute-force optimum: the model decodes them back to that placement and its objective is the referee's
    problem, optimum = INSTANCES[instance]()
    _, placement = brute_force(problem)
    checked = 0
    for name, c in _compiled_at(problem, placement):
        assert c.varmap.placement().assign.tolist() == placement.assign.tolist(), name
        assert pyo.value(c.objective) * c.objective_scale == pytest.approx(optimum, rel=1e-9), name
        checked += 1
    assert checked


@pytest.mark.parametrize("instance", sorted(INSTANCES))
def test_every_exact_formulation_proves_the_known_optimum(instance):
    # the blocks' constraints, solved in this process: a dropped or weakened row lowers the bound below the
    # optimum, a wrong one cuts the optimum off or prices it higher
    problem, optimum = INSTANCES[instance]()
    solved = 0
    for name, formulation in sorted(FORMULATIONS.items()):
        if formulation.accepts(problem):
            continue
        r = solve(problem, formulation=name, solver="highs", time_limit=20, gap=1e-9)
        assert r.objective == pytest.approx(optimum, rel=1e-6), name
        assert r.bound == pytest.approx(optimum, rel=1e-6), name
        solved += 1
    assert solved


@pytest.mark.parametrize("instance", sorted(INSTANCES))
def test_every_component_of_every_exact_formulation_is_documented(instance):
    problem, _ = INSTANCES[instance]()
    for name, formulation in sorted(FORMULATIONS.items()):
        if not formulation.accepts(problem):
            assert check_documented(compile(problem, name).model) == [], name


def _mixed_kinds_problem(colocate: bool):
    # one accelerator (memory 4) and one CPU (a host: no transfers); p1, p2 need 3 bytes each and run far faster
    # on the accelerator; c runs on the CPU only and holds no memory (its 0 / not-allowed must not hide the
    # accelerator's capacity)
    ops = [Op(name="p1", work={"accelerator": 1, "cpu": 20}, param_bytes=3, out_bytes=1),
           Op(name="p2", work={"accelerator": 1, "cpu": 10}, param_bytes=3, out_bytes=1),
           Op(name="c", work={"cpu": 1})]
    g = Graph(ops, [("p1", "p2"), ("p2", "c")])
    terms = [Memory()] + ([Colocate([["p1", "c"]], shared=False)] if colocate else [])
    return Problem(g, Cluster.accelerators(1, memory=4.0, cpus=1), Throughput(), terms)


@pytest.mark.parametrize("colocate", [False, True])
def test_memory_and_equality_colocation_bind_with_kind_restricted_ops(colocate):
    problem = _mixed_kinds_problem(colocate)
    best, _ = brute_force(problem)
    # both on the accelerator would need 6 > 4 bytes (max load 2). Without colocation: p1 there (load 1 + its
    # tensor 1), p2 and c on the CPU (10 + 1); with p1 colocated with the CPU-only c: p1, c on the CPU (20 + 1)
    assert best == (11.0 if not colocate else 21.0)
    solved = 0
    for name, formulation in sorted(FORMULATIONS.items()):
        if formulation.accepts(problem):
            continue
        r = solve(problem, formulation=name, solver="highs", time_limit=20, gap=1e-9)
        assert (r.objective, r.bound) == (pytest.approx(best), pytest.approx(best)), name
        solved += 1
    assert solved


def test_overflow_is_zero_on_a_device_whose_memory_cannot_overflow():
    # "small" (memory 2) may overflow, "big" (unbounded) never does and gets no overflow variable.
    # a (work 1, 5 bytes, tensor 1) -> b (work 1, 1 byte): a on big and b on small costs max(1 + 1, 1 + 1) = 2,
    # and so does everything on big; a on small overflows by 3
    g = Graph([Op(name="a", work=1, param_bytes=5, out_bytes=1), Op(name="b", work=1, param_bytes=1)], [("a", "b")])
    cluster = Cluster([Device(name="small", memory=2.0), Device(name="big")])
    problem = Problem(g, cluster, Bottleneck(), [Overflow()])
    best, _ = brute_force(problem)
    assert best == 2.0
    for name, formulation in sorted(FORMULATIONS.items()):
        if not formulation.accepts(problem):
            r = solve(problem, formulation=name, solver="highs", time_limit=20, gap=1e-9)
            assert (r.objective, r.bound) == (pytest.approx(2.0), pytest.approx(2.0)), name


def test_a_pin_where_the_group_cannot_run_is_refused_with_the_reason():
    # a may run on the CPU, but its group mate c may not: the pin cannot hold
    ops = [Op(name="a", work={"accelerator": 1, "cpu": 1}), Op(name="c", work={"accelerator": 1})]
    problem = Problem(Graph(ops, [("a", "c")]), Cluster.accelerators(1, cpus=1), Throughput(),
                      [Colocate([["a", "c"]]), Pin("a", "cpu0")])
    with pytest.raises(InfeasibleError, match=r"Pin\('a', 'cpu0'\): op 'a' or an op colocated with it cannot run "
                                              r"there; pin the group to an allowed device"):
        compile(problem, "throughput")


def test_equality_colocation_of_ops_with_no_common_device_is_infeasible():
    # a runs on the accelerator only, c on the CPU only: colocating them leaves no device
    ops = [Op(name="a", work={"accelerator": 1}, out_bytes=1), Op(name="c", work={"cpu": 1})]
    problem = Problem(Graph(ops, [("a", "c")]), Cluster.accelerators(1, cpus=1), Throughput(),
                      [Colocate([["a", "c"]], shared=False)])
    for name, formulation in sorted(FORMULATIONS.items()):
        if not formulation.accepts(problem):
            assert solve(problem, formulation=name, solver="highs", time_limit=20).status is Status.INFEASIBLE, name


def test_warm_start_prices_the_overflow_of_the_optimum():
    # a and b hold 3 bytes each on stages of memory 2: split, each stage streams 1 byte (load 1 + 1 = 2);
    # together they stream 4 (load 2 + 4). The warm start's bottleneck must include the overflow.
    g = Graph([Op(name="a", work=1, param_bytes=3), Op(name="b", work=1, param_bytes=3)], [("a", "b")])
    problem = Problem(g, Cluster.stages(2, memory=2.0), Bottleneck(), [Overflow()])
    best, placement = brute_force(problem)
    assert best == 2.0
    for name, c in _compiled_at(problem, placement):
        assert pyo.value(c.objective) * c.objective_scale == pytest.approx(2.0), name


def test_dp_prunes_with_the_dpl_incumbent():
    from placement_dsl.heuristics.ideals import dp, dpl

    # the diamond of dp's docstring: {a, b} | {c, d}, work 5 plus two tensors on each stage
    g = Graph([Op(name=n, work=w, out_bytes=1) for n, w in zip("abcd", (4, 1, 1, 4))],
              [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    pruned, plain = dp(g, Cluster.stages(2)), dp(g, Cluster.stages(2), incumbent=False)
    assert pruned.info["incumbent"] == dpl(g, Cluster.stages(2)).info["dp_value"] == 7.0
    assert plain.info["incumbent"] is None and pruned.objective == plain.objective == 7.0
