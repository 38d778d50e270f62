"""The DP over ideals (Tarnawski et al. §5.1, App. B-C): brute force on tiny graphs, Table 1 on the shared data."""
from __future__ import annotations

import csv
import itertools
import math
import re
import sys
import time

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster, Device
from placement_dsl.constraints import Contiguous, DagOrder, Overflow
from placement_dsl.errors import InfeasibleError, SpecError
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import ideal_lattice as lattice
from placement_dsl.heuristics import ideals, run
from placement_dsl.heuristics.base import DP_CLASS
from placement_dsl.heuristics.contract import Contraction, contract
from placement_dsl.heuristics.ideal_lattice import (
    device_classes,
    dfs_order,
    ideal_lattice,
    natural_rank,
    pack_bitsets,
    tensor_sets,
)
from placement_dsl.heuristics.ideals import dp, dpl, peak_rss, replicated_objective, search, setup, table_bytes
from placement_dsl.objectives import Bottleneck
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.progress import Recorder, reporting
from placement_dsl.testing import brute_force as brute_force_problem
from placement_dsl.testing import random_graph
from placement_dsl.training import TrainingMemorySpec

MODELS = [CostModel(), CostModel(overlap="half"), CostModel(overlap="full"),
          CostModel.named("bottleneck")]


# ---------------------------------------------------------------------------- brute force
def _closure(n: int, src, dst) -> tuple[list[int], list[int]]:
    """Descendant and ancestor bitmasks of a DAG with nodes 0..n-1."""
    desc = [0] * n
    succ = [[] for _ in range(n)]
    for u, v in zip(src, dst):
        succ[u].append(v)
    for u in reversed(range(n)):  # numbering is topological: successors are settled first
        for v in succ[u]:
            desc[u] |= (1 << v) | desc[v]
    anc = [0] * n
    for u in range(n):
        for v in range(n):
            if desc[u] >> v & 1:
                anc[v] |= 1 << u
    return desc, anc


def _contiguous(mask: int, desc: list[int], anc: list[int]) -> bool:
    """Def. 3.1: no node outside the set lies on a path between two of its nodes."""
    return not any(not mask >> v & 1 and desc[v] & mask and anc[v] & mask for v in range(len(desc)))


def _compute_bound(graph: Graph, cluster: Cluster, assign: np.ndarray) -> float:
    """The busiest device's compute time under ``assign``: every objective here is a device's load, which includes
    its compute, so a split whose bound is already no better than the best so far need not be evaluated (the
    brute forces below then evaluate a few percent of the splits; test_compute_bound_is_below_every_objective)."""
    times = cluster.times(graph)[np.arange(graph.n), assign]
    return float(np.bincount(assign, weights=times, minlength=cluster.size).max())


def brute_force(con: Contraction, cluster: Cluster, model: CostModel) -> float:
    """Best valid split whose devices hold contiguous supernode sets of ``con``'s DAG."""
    desc, anc = _closure(con.n_nodes, con.src.tolist(), con.dst.tolist())
    best = math.inf
    for assign in itertools.product(range(cluster.size), repeat=con.n_nodes):
        masks = [0] * cluster.size
        for x, d in enumerate(assign):
            masks[d] |= 1 << x
        if not all(_contiguous(m, desc, anc) for m in masks if m):
            continue
        ops = con.lift(np.array(assign))
        if _compute_bound(con.graph, cluster, ops) >= best:
            continue
        ev = evaluate(Placement(con.graph, cluster, ops), model)
        if ev.valid:
            best = min(best, ev.objective)
    return best


def brute_force_groups(graph: Graph, cluster: Cluster, model: CostModel) -> float:
    """Best valid split over all op assignments, contiguous in the colocation quotient graph."""
    gid = np.unique(graph.group_id, return_inverse=True)[1]
    n = int(gid.max()) + 1
    pairs = {(int(gid[u]), int(gid[v])) for u, v in zip(graph.src, graph.dst) if gid[u] != gid[v]}
    import networkx as nx

    q = nx.DiGraph(pairs)
    q.add_nodes_from(range(n))
    desc = [sum(1 << w for w in nx.descendants(q, v)) for v in range(n)]
    anc = [sum(1 << w for w in nx.ancestors(q, v)) for v in range(n)]
    best = math.inf
    for assign in itertools.product(range(cluster.size), repeat=n):
        masks = [0] * cluster.size
        for x, d in enumerate(assign):
            masks[d] |= 1 << x
        if not all(_contiguous(m, desc, anc) for m in masks if m):
            continue
        ops = np.array(assign)[gid]
        if _compute_bound(graph, cluster, ops) >= best:
            continue
        ev = evaluate(Placement(graph, cluster, ops), model)
        if ev.valid:
            best = min(best, ev.objective)
    return best


# ---------------------------------------------------------------------------- random instances
@st.composite
def inference_graphs(draw, max_ops: int = 7, groups: bool = True) -> Graph:
    n = draw(st.integers(1, max_ops))
    ops = []
    for i in range(n):
        acc = draw(st.sampled_from([0, 0, 1, 2, 3, 5, 8]))
        cpu = draw(st.sampled_from([0, 1, 4, 9, 20]))
        work = {"accelerator": acc, "cpu": cpu}
        if draw(st.integers(0, 9)) == 0:
            del work["accelerator"]  # cpu-only op
        group = f"g{draw(st.integers(0, 2))}" if groups and draw(st.booleans()) else None
        ops.append(Op(name=f"v{i}", work=work, out_bytes=draw(st.integers(0, 4)),
                      param_bytes=draw(st.sampled_from([0, 0, 1, 3, 6])), group=group))
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, n) if draw(st.integers(0, 2)) == 0]
    return Graph(ops, edges)


@st.composite
def training_graphs(draw, max_fw: int = 4) -> Graph:
    """A forward DAG, mirrored backward ops colocated with their forward op, stash edges, orphans."""
    nf = draw(st.integers(1, max_fw))
    ops, edges = [], []
    for i in range(nf):
        ops.append(Op(name=f"f{i}", work={"accelerator": draw(st.integers(0, 5)), "cpu": draw(st.integers(1, 12))},
                      out_bytes=draw(st.integers(0, 3)), param_bytes=draw(st.integers(0, 4)), group=f"c{i}"))
    fw_edges = [(i, j) for i in range(nf) for j in range(i + 1, nf) if draw(st.booleans())]
    edges += [(f"f{i}", f"f{j}") for i, j in fw_edges]
    nb = 0
    for i in range(nf):
        if len(ops) >= 7 or not draw(st.booleans()):
            continue
        ops.append(Op(name=f"b{i}", work={"accelerator": draw(st.integers(0, 5)), "cpu": draw(st.integers(1, 12))},
                      out_bytes=draw(st.integers(0, 3)), backward=True, group=f"c{i}"))
        nb += 1
        if draw(st.booleans()):
            edges.append((f"f{i}", f"b{i}"))
    names = {op.name for op in ops}
    edges += [(f"b{j}", f"b{i}") for i, j in fw_edges if f"b{i}" in names and f"b{j}" in names]
    if len(ops) < 7 and nb and draw(st.booleans()):  # an orphaned backward op (no forward mate)
        tail = next(op.name for op in ops if op.backward)
        ops.append(Op(name="orphan", work=draw(st.integers(0, 4)), out_bytes=1, backward=True))
        edges.append((tail, "orphan") if draw(st.booleans()) else ("orphan", tail))
    return Graph(ops, edges)


@st.composite
def clusters(draw) -> Cluster:
    memory = draw(st.sampled_from([math.inf, 8.0, 12.0]))
    return Cluster.accelerators(2, memory=memory, cpus=draw(st.integers(0, 1)),
                                cpu_memory=draw(st.sampled_from([math.inf, math.inf, 6.0])))


def _dp(graph: Graph, cluster: Cluster, model: CostModel, **options):
    try:
        return run("dp", graph, cluster, model=model, **options)
    except InfeasibleError:
        return None


def _value(result) -> float:
    return math.inf if result is None else result.objective


# ---------------------------------------------------------------------------- brute-force equality
@settings(max_examples=30)
@given(graph=st.one_of(inference_graphs(), training_graphs()), cluster=clusters(), model=st.sampled_from(MODELS),
       seed=st.integers(0, 2**32 - 1))
def test_compute_bound_is_below_every_objective(graph, cluster, model, seed):
    """The brute forces' pruning is sound: no valid placement's objective is below its busiest compute time."""
    rng, gid = np.random.default_rng(seed), np.unique(graph.group_id, return_inverse=True)[1]
    checked = 0
    for _ in range(20):
        assign = rng.integers(0, cluster.size, gid.max() + 1)[gid]  # colocated ops together
        ev = evaluate(Placement(graph, cluster, assign), model)
        if ev.valid:
            checked += 1
            assert _compute_bound(graph, cluster, assign) <= ev.objective * (1 + 1e-12) + 1e-12
    event(f"valid placements checked: {min(checked, 5)}")


@given(graph=inference_graphs(groups=False), cluster=clusters(), model=st.sampled_from(MODELS))
def test_dp_equals_brute_force_on_contiguous_splits(graph, cluster, model):
    result = _dp(graph, cluster, model)
    expected = brute_force_groups(graph, cluster, model)
    assert _value(result) == pytest.approx(expected, rel=1e-9)
    if result is not None:
        assert result.bound == result.objective and result.exact_among == DP_CLASS


@given(graph=inference_graphs(), cluster=clusters(), model=st.sampled_from(MODELS[:2]))
def test_dp_with_colocation_equals_brute_force(graph, cluster, model):
    """App. B steps 1, 3, 4 keep the optimum over colocation-respecting contiguous splits."""
    assert _value(_dp(graph, cluster, model)) == pytest.approx(brute_force_groups(graph, cluster, model), rel=1e-9)


@given(graph=training_graphs(), cluster=clusters(), model=st.sampled_from(MODELS[:2]))
def test_training_dp_equals_brute_force(graph, cluster, model):
    """Forward-contiguous splits carrying the backward ops (App. B); zero-cost merging keeps the optimum."""
    unmerged = contract(graph, kinds={d.kind for d in cluster.devices}, merge_zero_cost=False)
    assert _value(_dp(graph, cluster, model)) == pytest.approx(brute_force(unmerged, cluster, model), rel=1e-9)


@given(graph=inference_graphs(max_ops=6), cluster=clusters())
def test_dpl_is_never_better_than_dp(graph, cluster):
    exact = _dp(graph, cluster, CostModel())
    try:
        linear = run("dpl", graph, cluster)
    except InfeasibleError:
        linear = None
    assert _value(linear) >= _value(exact) - 1e-9
    if linear is not None:
        assert linear.bound is None and linear.info["ideals"] == linear.info["nodes"] + 1


def test_heterogeneous_accelerators_equal_brute_force():
    """Devices of different speed and memory form separate classes; the DP counts each."""
    g = Graph([Op(name=f"v{i}", work=w, out_bytes=1, param_bytes=p)
               for i, (w, p) in enumerate([(4, 1), (2, 5), (6, 2), (3, 3), (5, 1)])],
              [("v0", "v1"), ("v0", "v2"), ("v1", "v3"), ("v2", "v3"), ("v3", "v4")])
    cluster = Cluster([Device(name="fast", speed=2.0, memory=7), Device(name="slow0", memory=9),
                       Device(name="slow1", memory=9)])
    result = run("dp", g, cluster)
    assert result.objective == pytest.approx(brute_force_groups(g, cluster, CostModel()))
    assert result.info["stages"]


# ---------------------------------------------------------------------------- contraction
def test_contraction_orphans_get_mirrored_images():
    ops = [Op(name="f0", work=1, group="a"), Op(name="f1", work=1, group="b"),
           Op(name="b1", work=1, backward=True, group="b"), Op(name="o", work=1, backward=True)]
    g = Graph(ops, [("f0", "f1"), ("f1", "b1"), ("b1", "o")])
    con = contract(g, kinds=["*"])
    assert con.stats["orphaned_groups"] == 1 and con.artificial.sum() == 1
    # mirrored edge: b1 -> o in the backward pass becomes image(o) -> f1 in the forward DAG
    img = con.image
    assert (int(img[3]), int(img[1])) in set(zip(con.src.tolist(), con.dst.tolist()))


def test_contraction_merges_strongly_connected_components():
    ops = [Op(name="u", work=1, group="g"), Op(name="v", work=1), Op(name="w", work=1, group="g")]
    con = contract(Graph(ops, [("u", "v"), ("v", "w")]), kinds=["*"])
    assert con.n_nodes == 1 and con.stats["scc_merges"] == 1


def test_zero_cost_leaf_with_memory_is_kept_when_memory_can_bind():
    ops = [Op(name="x", work=0, param_bytes=5, out_bytes=1), Op(name="a", work=3, param_bytes=5)]
    g = Graph(ops, [("x", "a")])
    assert contract(g, kinds=["*"], memory=100).n_nodes == 1
    assert contract(g, kinds=["*"], memory=6).n_nodes == 2
    # with memory 6 the leaf must leave 'a''s device: the DP still finds that split
    assert run("dp", g, Cluster.stages(2, memory=6)).objective == pytest.approx(4.0)


def test_ideal_lattice_of_a_diamond():
    g = Graph([Op(name=n) for n in "abcd"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    lat = ideal_lattice(contract(g))
    assert lat.count == 6
    assert [len(lat.nodes(i)) for i in range(lat.count)] == sorted(len(lat.nodes(i)) for i in range(lat.count))
    order = dfs_order(contract(g))
    assert sorted(order.tolist()) == [0, 1, 2, 3] and order[0] == 0 and order[-1] == 3


# ---------------------------------------------------------------------------- errors and options
def test_memory_infeasibility_raises():
    g = Graph([Op(name="a", work=1, param_bytes=10, out_bytes=1), Op(name="b", work=1, param_bytes=10)], [("a", "b")])
    with pytest.raises(InfeasibleError, match=r"fits on the cluster .* \(CostModel\(memory='overflow'\)\)$"):
        dp(g, Cluster.accelerators(2, memory=9))
    with pytest.raises(InfeasibleError):
        dpl(g, Cluster.accelerators(2, memory=9))
    # soft memory: the overflow is charged instead (each op alone overflows 1 byte at bandwidth 1)
    streamed = dp(g, Cluster.accelerators(2, memory=9), model=CostModel.named("bottleneck"))
    best, _ = brute_force_problem(Problem(g, Cluster.accelerators(2, memory=9), Bottleneck(),
                                          [Overflow(), Contiguous(), DagOrder()]))
    assert streamed.objective == pytest.approx(best)


def test_too_many_ideals_raises_spec_error():
    g = Graph([Op(name=f"v{i}", work=1) for i in range(12)])  # no edges: 2^12 ideals, declined before enumerating
    with pytest.raises(SpecError, match="^" + re.escape(
            "dp: graph 'graph' has at least 2^12 ideals (12 of its 12 supernodes lie side by side at one depth), "
            "more than max_ideals=1000; use method 'dpl' (linearized DP) or 'slicegraph'") + "$"):
        dp(g, Cluster.stages(2), max_ideals=1000)
    # two chains of 40 side by side: 41^2 = 1681 ideals, no level wider than 2, found out by enumerating
    ops = [Op(name=f"{c}{i}", work=1) for c in "ab" for i in range(40)]
    g = Graph(ops, [(f"{c}{i}", f"{c}{i + 1}") for c in "ab" for i in range(39)])
    with pytest.raises(SpecError, match="^" + re.escape(
            "dp: graph 'graph' has more than 1000 ideals (80 supernodes); use method 'dpl' (linearized DP) or raise "
            "max_ideals") + "$"):
        dp(g, Cluster.stages(2), max_ideals=1000, incumbent=False)


def test_non_max_load_model_returns_the_max_load_split_without_bound():
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=1, backward=True)], [("a", "b")])
    result = run("dp", g, Cluster.stages(2), model=CostModel.named("gpipe"))
    assert result.bound is None and result.info["optimized"] == "max_load"


def test_replication_halves_a_heavy_stage():
    g = Graph([Op(name="a", work=10, param_bytes=2)])
    plain = dp(g, Cluster.accelerators(2))
    rep = run("dp", g, Cluster.accelerators(2), replication=True)
    assert plain.objective == 10.0
    assert rep.info["replicas"] == {"acc0": ["acc0", "acc1"]}
    assert rep.objective == pytest.approx(10 / 2 + 2 * (2 - 1) / 2 * 2)  # load / r + ring all-reduce
    assert rep.objective == pytest.approx(rep.info["dp_value"]) == rep.bound
    assert rep.objective == evaluate(rep.placement).objective and rep.placement.replicas.tolist() == [2, 1]
    assert plain.info["contiguous"] is True and plain.exact_among == DP_CLASS
    # at most one device per stage is no replication at all; zero (or a bool) is refused by name
    one = run("dp", g, Cluster.accelerators(2), replication=True, max_replicas=1)
    assert one.objective == 10.0 and one.info["replicas"] == {}
    for bad in (0, True, 1.5):
        with pytest.raises(SpecError, match=r"max_replicas must be a whole number >= 1 or None"):
            dp(g, Cluster.accelerators(2), replication=True, max_replicas=bad)


@pytest.mark.parametrize("per_kind", [False, True])
def test_replication_keeps_a_zero_work_leaf_with_parameters_apart(per_kind):
    # a (work 10, tensor 1) -> z (no work, 10 parameter bytes) on three accelerators: a replicated over two
    # (10 / 2, plus half its tensor each: 5.5) and z alone on the third. App. B's merge of zero-cost leaves
    # would put z on a's stage, whose all-reduce then carries z's parameters: 10 at best (no replication).
    # per_kind: times given for the accelerator only (idle is judged on the cluster's kinds, not a default)
    work = (lambda w: {"accelerator": w}) if per_kind else (lambda w: w)
    g = Graph([Op(name="a", work=work(10), out_bytes=1), Op(name="z", work=work(0), param_bytes=10)], [("a", "z")])
    r = run("dp", g, Cluster.accelerators(3), replication=True)
    assert r.objective == pytest.approx(5.5) and r.info["contraction"]["zero_cost_merges"] == 0
    assert r.info["replicas"] == {"acc0": ["acc0", "acc1"]} and r.placement.assign.tolist() == [0, 2]


def test_too_many_device_classes_names_them():
    devices = [Device(name=f"a{i}", kind="accelerator", memory=float(i + 1)) for i in range(lattice.MAX_STATES.bit_length())]
    cluster = Cluster(devices)
    sizes = ", ".join("1 x 'accelerator'" for _ in devices)
    with pytest.raises(SpecError, match=rf"\({sizes}\).*use a heuristic such as 'slicegraph'$"):
        lattice.device_classes(cluster)


@given(graph=inference_graphs(max_ops=6, groups=False), model=st.sampled_from(MODELS[:3]))
def test_replication_never_hurts_and_is_rechecked(graph, model):
    cluster = Cluster.accelerators(3, memory=math.inf, cpus=1)
    plain = dp(graph, cluster, model=model)
    rep = dp(graph, cluster, model=model, replication=True)
    assert rep.objective <= plain.objective + 1e-9
    assert replicated_objective(rep.placement, rep.info["replicas"], model) == pytest.approx(rep.info["dp_value"])
    assert evaluate(rep.placement, model).objective == pytest.approx(rep.info["dp_value"])


# ---------------------------------------------------------------------------- Table 1
def _table1(dnn_partitioning):
    with open(dnn_partitioning / "paper_throughput.csv") as fh:
        return {r["file"]: r for r in csv.DictReader(line for line in fh if not line.startswith("#"))}


SMALL = ["LayerGraphs/bert24_inference.json", "LayerGraphs/bert24_training.json",
         "LayerGraphs/resnet50_inference.json", "LayerGraphs/resnet50_training.json",
         "LayerGraphs/gnmt_inference.json", "LayerGraphs/gnmt_training.json",
         "OperatorGraphs/bert_l-3_inference.json", "OperatorGraphs/bert_l-3_training.json"]
BIG = ["LayerGraphs/inceptionv3_inference.json", "LayerGraphs/inceptionv3_training.json"]


def _check_table1(dnn_partitioning, name):
    from placement_dsl.io import load_workload

    row = _table1(dnn_partitioning)[f"throughput-inputs/{name}"]
    w = load_workload(dnn_partitioning / "throughput-inputs" / name)
    exact = run("dp", w.graph, w.cluster)
    linear = run("dpl", w.graph, w.cluster)
    assert exact.info["ideals"] == int(row["ideals"])
    assert f"{exact.objective:.2f}" == row["dp_tps"]
    assert f"{linear.objective:.2f}" == row["dpl_tps"]
    assert evaluate(exact.placement).valid and exact.bound == exact.objective


@pytest.mark.shared
@pytest.mark.parametrize("name", SMALL)
def test_table1_small(dnn_partitioning, name):
    _check_table1(dnn_partitioning, name)


@pytest.mark.shared
@pytest.mark.slow
@pytest.mark.parametrize("name", BIG)
def test_table1_inceptionv3(dnn_partitioning, name):
    _check_table1(dnn_partitioning, name)


# ---------------------------------------------------------------------------- kills (docs/mutation.md)
def _with_zero_cost_leaf() -> Graph:
    """a -> b -> z with z a zero-work leaf: App. B merges it into b (one supernode fewer, same optimum 5)."""
    return Graph([Op(name="a", work=4, out_bytes=1), Op(name="b", work=4, out_bytes=1), Op(name="z", work=0)],
                 [("a", "b"), ("b", "z")])


def test_dp_merges_zero_cost_leaves_by_default_and_reports_each_phase():
    with reporting(Recorder()) as rec:
        merged = dp(_with_zero_cost_leaf(), Cluster.stages(2))
    kept = dp(_with_zero_cost_leaf(), Cluster.stages(2), merge_zero_cost=False)
    assert merged.objective == kept.objective == 5.0
    assert (merged.info["nodes"], kept.info["nodes"]) == (2, 3)
    assert [e.fields["phase"] for e in rec.of("dp") if "ideals" in e.fields] == ["dpl", "dpl", "dp", "dp"]


def test_memory_per_schedule_keeps_zero_cost_leaves_apart():
    # a merged leaf's activations would be stashed on its neighbour's stage: no merging under training memory

    # z: a zero-work forward leaf with no backward op (say, a logged metric), b's only neighbour
    ops = [Op(name=n, work=4, out_bytes=1, group=n) for n in "ab"] + [Op(name="z", work=0)]
    ops += [Op(name=f"{n}~bw", work=4, backward=True, group=n) for n in "ab"]
    g = Graph(ops, [("a", "b"), ("b", "z"), ("b", "b~bw"), ("b~bw", "a~bw")])
    cluster = Cluster.stages(2, memory=100.0)
    plain = dp(g, cluster)
    per_schedule = dp(g, cluster, model=CostModel(training_memory=TrainingMemorySpec("1f1b")))
    assert (plain.info["nodes"], per_schedule.info["nodes"]) == (2, 3)


def test_dpl_optimizes_the_model_it_is_given_and_names_itself():
    # a -> b -> c of work 10 with 3-byte tensors: overlap none splits in 3 (middle 10 + 3 + 3 = 16), overlap
    # half too (max(10, 6) = 10); 2 stages would give 23 and 20, one stage 30
    g = Graph([Op(name=n, work=10.0, out_bytes=3.0) for n in "abc"], [("a", "b"), ("b", "c")])
    half = dpl(g, Cluster.stages(3), model=CostModel(overlap="half"))
    assert half.objective == 10.0 and dpl(g, Cluster.stages(3)).objective == 16.0
    assert half.method == half.placement.source == "dpl"


@pytest.mark.parametrize("method, search", [(dp, "contiguous split"), (dpl, "split along the DFS order")],
                         ids=["dp", "dpl"])
def test_infeasible_messages_name_the_search_that_found_no_split(method, search):
    g = Graph([Op(name="a", work=1, param_bytes=10.0)], [])
    with pytest.raises(InfeasibleError, match="^" + re.escape(
            f"dp: no {search} of graph 'graph' (total memory 10) fits on the cluster (2 x 'accelerator' of "
            "memory 5) respecting colocation; add devices or memory, or let memory overflow "
            "(CostModel(memory='overflow'))") + "$"):
        method(g, Cluster.stages(2, memory=5.0))


def test_memory_per_schedule_refusals_give_the_whole_reason():
    g = Graph([Op(name="a", work=1, group="a"), Op(name="a~bw", work=1, backward=True, group="a")], [("a", "a~bw")])
    tail = (" are not modelled (it counts the stages to the end on identical accelerators with hard memory); use "
            "method 'pipeline'")
    spec = TrainingMemorySpec("1f1b")
    for cluster, options, model, why in [
            (Cluster.accelerators(2, cpus=1), {}, CostModel(training_memory=spec), "several device classes or host devices"),
            (Cluster.stages(3), {"replication": True}, CostModel(training_memory=spec), "replicated stages"),
            (Cluster.stages(3), {}, CostModel(training_memory=spec, memory="overflow"), "soft memory")]:
        with pytest.raises(SpecError, match=f"^{re.escape('dp over ideals with memory per schedule: ' + why + tail)}$"):
            dp(g, cluster, model=model, **options)


def test_a_bound_below_the_optimum_is_dropped():
    su = setup(_with_zero_cost_leaf(), Cluster.stages(2), CostModel(), False, True)
    sol, _ = search(su, linearize=False, max_ideals=1000, upper_bound=2.5)  # the optimum is 5
    assert sol.value == 5.0 and sol.stages


def test_bit_tables_take_a_word_per_64_states():
    classes = device_classes(Cluster.stages(64))  # 65 states: two words of bits, a float32 per state and class + 1
    assert table_bytes(10, classes, exact=False) == 10 * (8 * 2 + 4 * 65 * 2)
    assert table_bytes(10, device_classes(Cluster.stages(63)), exact=False) == 10 * (8 * 1 + 4 * 64 * 2)


def test_bitsets_take_a_word_per_64_nodes():
    rows = pack_bitsets(np.eye(65, dtype=bool), 65)
    assert rows.shape == (65, 2) and rows[64].tolist() == [0, 1] and rows[63].tolist() == [1 << 63, 0]


def test_lattice_and_tensor_arrays_have_the_kernels_types_and_widths():
    with_tensors = Graph([Op(name="a", work=1, out_bytes=1), Op(name="b", work=1)], [("a", "b")])
    without = Graph([Op(name="a", work=1), Op(name="b", work=1)], [("a", "b")])
    for g in (with_tensors, without):
        con = contract(g)
        lat = ideal_lattice(con)
        masks, owner, cost, lo, hi = tensor_sets(con)
        assert masks.shape[1] == lat.ideals.shape[1] == 1  # a tensor's node set has the ideals' words
        assert lat.sub_ptr.dtype == lat.sub_idx.dtype == owner.dtype == lo.dtype == hi.dtype == np.int64
        assert cost.dtype == np.float64
    assert len(tensor_sets(contract(without))[0]) == 0


def test_infeasible_message_lists_every_device_class():
    g = Graph([Op(name="a", work=1, param_bytes=10.0)], [])
    cluster = Cluster([Device(name="acc0", kind="accelerator", memory=5.0), Device(name="cpu0", kind="cpu", memory=4.0)])
    with pytest.raises(InfeasibleError, match=re.escape("(1 x 'accelerator' of memory 5, 1 x 'cpu' of memory 4)")):
        dp(g, cluster)



def test_infeasible_message_names_the_first_five_ops_that_run_nowhere():
    # v0..v5 run only on a 'tpu' the cluster lacks, v6 anywhere: the message names five of the six, in graph order
    g = Graph([Op(name=f"v{i}", work={"tpu": 1} if i < 6 else 1) for i in range(7)],
              [(f"v{i}", f"v{i + 1}") for i in range(6)])
    with pytest.raises(InfeasibleError, match=re.escape(
            "respecting colocation; ops ['v0', 'v1', 'v2', 'v3', 'v4'] can run on no device kind of the cluster; add")):
        dp(g, Cluster.accelerators(2))


def test_dp_prices_the_backward_pass_tensors():
    # f0 -> f1 forward (no tensor), b1 -> b0 backward with a tensor of 10, each backward op colocated with its forward
    # mate; work 2 each on two accelerators of bandwidth 1. Split {f0, b0} | {f1, b1}: 4 + 10 (b1's tensor read
    # and written) = 14 on each side; one device holds all: 8, the optimum
    ops = [Op(name="f0", work=2, group="c0"), Op(name="f1", work=2, out_bytes=0, group="c1"),
           Op(name="b1", work=2, out_bytes=10, backward=True, group="c1"), Op(name="b0", work=2, backward=True, group="c0")]
    g = Graph(ops, [("f0", "f1"), ("f1", "b1"), ("b1", "b0")])
    result = dp(g, Cluster.accelerators(2))
    assert result.objective == result.info["dp_value"] == result.bound == 8.0
    assert len(set(result.placement.assign.tolist())) == 1


def test_tables_above_the_limit_are_refused_with_both_sizes(monkeypatch):
    monkeypatch.setattr(ideals, "MAX_TABLE_BYTES", 3 * 2**30)
    monkeypatch.setattr(ideals, "table_bytes", lambda *args, **kwargs: 4 * 2**30)
    with pytest.raises(SpecError, match=re.escape("need about 4.0 GiB of tables, above the limit of 3.0 GiB")):
        dp(_with_zero_cost_leaf(), Cluster.stages(2))


def test_dpl_passes_the_replica_limit():
    # one op of work 8 on two stages: replicated over both 4, at most one replica 8
    g = Graph([Op(name="a", work=8)], [])
    assert dpl(g, Cluster.stages(2), replication=True).objective == 4.0
    assert dpl(g, Cluster.stages(2), replication=True, max_replicas=1).objective == 8.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux reports ru_maxrss in KiB")
def test_peak_rss_is_ru_maxrss_in_bytes():
    import resource


    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert before <= peak_rss() <= resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_names_rank_in_natural_order_integers_first():
    assert natural_rank(["2", "10", "9", "b", "a", "-3"]).tolist() == [1, 3, 2, 5, 4, 0]
    assert natural_rank(["X2", "1", "X10"]).tolist() == [2, 0, 1]  # letters then digits: a name, not a number


def _replicable() -> Graph:
    """a (work 10, 1 parameter byte) -> z (no work): on 3 accelerators a runs on 3 replicas (10 / 3 + 2/3 x 2 x 1
    all-reduced = 4.67), on at most 2: 5 + 1/2 x 2 = 6; z merges into a (it holds no parameters)."""
    return Graph([Op(name="a", work=10, param_bytes=1, out_bytes=1), Op(name="z", work=0)], [("a", "z")])


@pytest.mark.parametrize("max_replicas, best", [(None, 14 / 3), (2, 6.0)])
def test_the_retry_without_a_bound_keeps_replication_and_its_limit(max_replicas, best):
    su = setup(_replicable(), Cluster.accelerators(3), CostModel(), True, True, max_replicas)
    assert search(su, linearize=False, max_ideals=1000, upper_bound=1.0)[0].value == pytest.approx(best)


def test_replication_merges_zero_cost_leaves_without_parameters_and_reports_its_stages():
    with reporting(Recorder()) as rec:
        r = dp(_replicable(), Cluster.accelerators(3), replication=True, max_replicas=2)
    assert r.info["contraction"]["zero_cost_merges"] == 1 and r.objective == pytest.approx(6.0)
    assert r.info["stages"] == [{"device_class": "accelerator", "replicas": 2, "nodes": 1}]
    assert set(r.info["seconds"]) == {"ideals", "prepare", "sweep"}
    first, last = [e.fields for e in rec.of("dp") if e.fields.get("phase") == "dp" and "ideals" in e.fields]
    assert first == {"phase": "dp", "ideals": 2, "incumbent": pytest.approx(6.0)}
    assert last == {"phase": "dp", "ideals": 2, "pairs": r.info["pairs"], "best": pytest.approx(6.0)}


def test_a_routed_cluster_is_refused_with_the_whole_reason():
    with pytest.raises(SpecError, match="^" + re.escape(
            "dp over ideals: the cost model routes transfers between servers, which is not a sum over ideals; use "
            "method 'pipeline' (the pipeline planner, exact along the DFS order)") + "$"):
        dp(_replicable(), Cluster.hierarchical(2, 2, intra=4.0, inter=1.0))


def test_tensor_masks_of_65_nodes_without_tensors_take_two_words():
    g = Graph([Op(name=f"o{i}", work=1 + i) for i in range(65)], [(f"o{i}", f"o{i + 1}") for i in range(64)])
    con = contract(g)
    assert con.n_nodes == 65 and tensor_sets(con)[0].shape == (0, 2)


@pytest.mark.parametrize("method", ["dp", "dpl"])
def test_a_split_that_is_not_contiguous_by_def_3_1_is_no_certificate(method):
    # f1 -> b -> f2 with b backward: the forward quotient is {f1, f2} (b hangs off it), so a stage holding f1 and f2
    # leaves its forward set through b and comes back. The DP's 3.0 is not the contiguous optimum (4): no bound
    g = Graph([Op(name="f1", work=2), Op(name="b", work=3, backward=True), Op(name="f2", work=1)],
              [("f1", "b"), ("b", "f2")])
    r = run(method, g, Cluster.stages(2))
    assert r.objective == 3.0 and r.info["contiguous"] is False
    assert r.bound is None and r.exact_among is None


def test_a_zero_cost_leaf_with_parameters_merges_without_replication():
    # merging is exact without replicas (the leaf's parameters just join its neighbour's memory, which never binds
    # here); the result counts its pairs as evaluations and reports the memory it used
    g = Graph([Op(name="a", work=10, out_bytes=1), Op(name="z", work=0, param_bytes=10)], [("a", "z")])
    r = dp(g, Cluster.stages(2))
    assert r.info["contraction"]["zero_cost_merges"] == 1 and r.objective == 10.0
    assert set(r.info["memory"]) == {"lattice_bytes", "table_bytes", "peak_rss_bytes"}
    diamond = Graph([Op(name=n, work=w, out_bytes=1) for n, w in zip("abcd", (4, 1, 1, 4))],
                    [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    r = dp(diamond, Cluster.stages(2), incumbent=False)
    assert r.evaluations == r.info["pairs"] > 0


def test_a_cluster_at_the_state_limit_is_accepted():
    m = lattice.MAX_STATES.bit_length() - 1  # m classes of one device each: 2 ** m = MAX_STATES states
    assert 2 ** m == lattice.MAX_STATES
    cluster = Cluster([Device(name=f"a{i}", kind="accelerator", memory=float(i + 1)) for i in range(m)])
    assert dp(Graph([Op(name="a", work=1)], []), cluster).objective == 1.0


def test_tensors_with_the_same_owner_and_readers_are_summed():
    # a1 and a2 (colocated, one supernode) both feed b: 5 + 2 bytes cross the split, so {a1, a2} | {b} costs
    # max(4 + 7, 7 + 5) = 12 and one stage (9) is optimal; counting one tensor only would price the split at 7

    ops = [Op(name="a1", work=2, out_bytes=5, group="g"), Op(name="a2", work=2, out_bytes=2, group="g"),
           Op(name="b", work=5)]
    g = Graph(ops, [("a1", "b"), ("a2", "b")])
    assert tensor_sets(contract(g))[2].tolist() == [7.0]
    r = dp(g, Cluster.stages(2))
    assert r.objective == r.bound == 9.0 == brute_force_problem(Problem(g, Cluster.stages(2), Bottleneck()))[0]



def test_dp_counts_activation_bytes_as_memory():
    # a and b hold 2 parameter and 3 activation bytes each: 5 on a device of 6, 10 together. Splitting costs the
    # 10-byte tensor on both sides (2 + 10); together they would take 4 but do not fit. The refusal names the
    # graph's whole memory, parameters and activations (10)
    g = Graph([Op(name="a", work=2, param_bytes=2, activation_bytes=3, out_bytes=10),
               Op(name="b", work=2, param_bytes=2, activation_bytes=3)], [("a", "b")])
    result = dp(g, Cluster.accelerators(2, memory=6.0))
    assert result.objective == result.bound == 12.0 and evaluate(result.placement).valid
    with pytest.raises(InfeasibleError, match=re.escape("dp: no contiguous split of graph 'graph' (total memory 10)")):
        dp(g, Cluster.accelerators(1, memory=6.0))


def test_dp_over_three_device_classes_equals_brute_force():
    # a fast and a slow accelerator and a CPU: three classes, one device each (mixed-radix states of 2 x 2 x 2)
    g = Graph([Op(name=f"v{i}", work={"accelerator": w, "cpu": 3 * w}, out_bytes=1) for i, w in enumerate((4, 2, 6, 3))],
              [("v0", "v1"), ("v1", "v2"), ("v2", "v3")])
    cluster = Cluster([Device(name="fast", speed=2.0), Device(name="slow"), Device(name="cpu0", kind="cpu")])
    assert len(device_classes(cluster)) == 3
    assert dp(g, cluster).objective == pytest.approx(brute_force_groups(g, cluster, CostModel()))


def test_dp_refuses_a_model_that_is_not_a_cost_model_by_its_type():
    with pytest.raises(SpecError, match=re.escape("dp: model must be a CostModel, got str; e.g. "
                                                  "CostModel.named('throughput')")):
        dp(_with_zero_cost_leaf(), Cluster.stages(2), model="throughput")


def test_replication_keeps_an_idle_leaf_with_parameters_off_a_replicated_stage():
    # z does no work but holds 1 parameter byte; merged into a (work 8) its parameters would join a's all-reduce:
    # (8 + 2 (r - 1) * 1) / r is 5 on two replicas, and all three ops on three (10 + 4) / 3. Kept apart, z sits
    # with b: max(8 / 2, 2) = 4
    g = Graph([Op(name="a", work=8), Op(name="b", work=2), Op(name="z", work=0, param_bytes=1)],
              [("a", "b"), ("a", "z")])
    result = dp(g, Cluster.stages(3), replication=True)
    assert result.objective == 4.0 and result.info["contraction"]["zero_cost_merges"] == 0


def test_dp_with_a_time_limit_it_does_not_reach_is_exact():
    g = random_graph(np.random.default_rng(0), 16, density=0.3)
    result = dp(g, Cluster.stages(3), time_limit=600)
    assert result.bound == result.objective == dp(g, Cluster.stages(3)).objective


def test_tables_at_the_limit_are_accepted(monkeypatch):
    monkeypatch.setattr(ideals, "MAX_TABLE_BYTES", 3 * 2**30)
    monkeypatch.setattr(ideals, "table_bytes", lambda *args, **kwargs: 3 * 2**30)
    assert dp(_with_zero_cost_leaf(), Cluster.stages(2)).objective == 5.0


def test_dp_reports_its_times_memory_and_label():
    # 70 nodes (two 64-bit words): the best split cuts v63 -> v64, a tensor across the word boundary
    ws = [1] * 64 + [12] * 6
    g = Graph([Op(name=f"v{i}", work=w, out_bytes=1) for i, w in enumerate(ws)],
              [(f"v{i}", f"v{i + 1}") for i in range(69)])
    t0 = time.perf_counter()
    result = dp(g, Cluster.stages(2), time_limit=600)
    wall = time.perf_counter() - t0
    assert result.objective == result.bound == result.info["dp_value"] == 73.0  # {v0..v63} 64 + 1, the rest 72 + 1
    assert result.placement.source == "dp" and result.exact_among == DP_CLASS
    assert 0 <= result.info["seconds"]["ideals"] <= result.seconds <= wall
    lat = ideal_lattice(contract(g))
    assert result.info["memory"]["lattice_bytes"] == lat.ideals.nbytes + lat.sub_ptr.nbytes + lat.sub_idx.nbytes
    # a chain's ideals are its 71 prefixes; each but the empty one links to the prefix one op shorter
    assert len(lat.ideals) == 71 and lat.sub_ptr[-1] == len(lat.sub_idx) == 70
    assert lat.sub_idx.tolist() == list(range(70)) and lat.sub_ptr.tolist() == [0, *range(71)]


def test_dp_finds_a_split_of_no_cost():
    # every op free and no tensors: the optimum is 0, which the incumbent bound must not prune
    g = Graph([Op(name=n, work=0) for n in "abc"], [("a", "b"), ("b", "c")])
    result = dp(g, Cluster.stages(2), merge_zero_cost=False)
    assert result.objective == result.bound == 0.0


def test_dpl_merges_zero_cost_leaves_unless_told_not_to():
    assert dpl(_with_zero_cost_leaf(), Cluster.stages(2)).info["contraction"]["zero_cost_merges"] == 1
    assert dpl(_with_zero_cost_leaf(), Cluster.stages(2), merge_zero_cost=False).info["contraction"][
        "zero_cost_merges"] == 0


def test_dfs_order_pushes_successors_in_natural_name_order():
    # r's successors "10" and "9" are pushed in natural order (9 before 10), so "10", pushed last, is visited
    # first; pushing them in node order ("10" is node 1) would visit "9" first
    g = Graph([Op(name=n, work=1) for n in ("r", "10", "9")], [("r", "10"), ("r", "9")])
    con = contract(g, merge_zero_cost=False)
    assert [g.names[con.rep[v]] for v in dfs_order(con)] == ["r", "10", "9"]


@pytest.mark.parametrize("seed", range(4))
def test_boundaries_match_each_ideals_tensors_counted_from_scratch(seed):
    """The ideals' in/out traffic and split tensors, built from each ideal's immediate sub-ideal (work: the
    output plus the tensors at each added node, where a pass over ideals x tensors took 47 s on a 20k chain)."""
    from placement_dsl.heuristics import ideal_kernels as K

    g = random_graph(np.random.default_rng(seed), 70, density=0.3)  # 70 nodes: tensors across two words
    lat = ideal_lattice(contract(g), 200_000)
    masks, owner, cost, _, _ = found = tensor_sets(lat.contraction)
    tin, tout, ptr, idx = K.boundaries(lat.ideals, lat.sub_ptr, lat.sub_idx, *found)
    sets = [set(np.flatnonzero(np.unpackbits(m.view(np.uint8), bitorder="little")).tolist()) for m in masks]
    for i in range(0, lat.count, max(1, lat.count // 300)):
        inside = set(lat.nodes(i).tolist())
        split = [t for t, s in enumerate(sets) if s & inside and not s <= inside]
        assert idx[ptr[i]:ptr[i + 1]].tolist() == split
        assert tout[i] == pytest.approx(sum(cost[t] for t in split if owner[t] in inside), abs=1e-12)
        assert tin[i] == pytest.approx(sum(cost[t] for t in split if owner[t] not in inside), abs=1e-12)
