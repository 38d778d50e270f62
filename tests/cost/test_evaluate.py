"""The cost model: hand-computed cases, brute-force recounts, properties, the papers' numbers."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel, MemoryMode, Objective, Overlap, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.placement import Placement
from placement_dsl.validity import contiguity_witness


def chain3() -> Graph:
    """a -> b -> c, each of work 1 with 3-byte tensors (c's is unused)."""
    return Graph([Op(name=n, work=1.0, out_bytes=3.0) for n in "abc"], [("a", "b"), ("b", "c")])


# ---------------------------------------------------------------------------- hand-computed
@pytest.mark.parametrize("overlap, expected", [("none", 7.0), ("half", 6.0), ("full", 3.0)])
def test_overlap_modes(overlap, expected):
    # middle stage: compute 1, in 3, out 3 -> none 1+3+3, half max(1, 6), full max(1, 3, 3)
    p = Placement(chain3(), Cluster.stages(3), [0, 1, 2])
    ev = evaluate(p, CostModel(overlap=overlap))
    assert ev.objective == expected
    assert [d.load for d in ev.devices][1] == expected


def test_tensor_paid_once_per_boundary():
    # a feeds b and c on stage1 and d on stage2; a's tensor (2) leaves stage0 once
    g = Graph([Op(name="a", work=1, out_bytes=2), Op(name="b", work=3, out_bytes=1), Op(name="c", work=2, out_bytes=1),
               Op(name="d", work=1)], [("a", "b"), ("a", "c"), ("a", "d"), ("b", "d"), ("c", "d")])
    ev = evaluate(Placement(g, Cluster.stages(3, bandwidth=2.0), [0, 1, 1, 2]))
    s0, s1, s2 = ev.devices
    assert (s0.compute, s0.transfer_in, s0.transfer_out, s0.load) == (1, 0, 1, 2)
    assert (s1.compute, s1.transfer_in, s1.transfer_out, s1.load) == (5, 1, 1, 7)
    assert (s2.compute, s2.transfer_in, s2.transfer_out, s2.load) == (1, 2, 0, 3)
    assert ev.objective == 7 and ev.valid


def test_memory_hard_and_overflow():
    g = Graph([Op(name="a", work=1, param_bytes=6, activation_bytes=2), Op(name="b", work=1, param_bytes=1)],
              [("a", "b")])
    p = Placement(g, Cluster.stages(2, memory=5.0, bandwidth=2.0), [0, 1])
    hard = evaluate(p, "throughput")
    assert not hard.valid and hard.objective == 1.0
    assert [v.check for v in hard.violations] == ["memory"] and "'stage0'" in hard.violations[0].message
    soft = evaluate(p, "bottleneck")  # Archer eq. 2: (8 - 5) / 2 streamed per sample
    assert soft.valid and soft.devices[0].overflow == 1.5 and soft.objective == 2.5
    assert soft.model.memory is MemoryMode.OVERFLOW


def test_host_devices_pay_no_transfers():
    g = Graph([Op(name="a", work={"accelerator": 1, "cpu": 5}, out_bytes=2),
               Op(name="b", work={"accelerator": 2, "cpu": 1}, out_bytes=3),
               Op(name="c", work={"accelerator": 1, "cpu": 4})], [("a", "b"), ("b", "c")])
    c = Cluster.accelerators(2, cpus=1)
    p = Placement(g, c, [0, 2, 1])
    ev = evaluate(p, "throughput")
    assert [d.load for d in ev.devices] == [3.0, 4.0, 1.0]
    lat = evaluate(p, "latency")  # acc0: 1 + 2 = 3; b on the CPU: 3 -> 4; acc1: 4 + 3 + 1 = 8
    assert lat.objective == 8.0 and lat.finish_times == {"a": 3.0, "b": 4.0, "c": 8.0}


def training_graph(b1_work: float = 6.0) -> Graph:
    return Graph([Op(name="f1", work=2, out_bytes=1, group="1"), Op(name="f2", work=3, group="2"),
                  Op(name="b2", work=4, out_bytes=2, backward=True, group="2"),
                  Op(name="b1", work=b1_work, backward=True, group="1")],
                 [("f1", "f2"), ("f2", "b2"), ("b2", "b1")])


def test_training_split_pipedream_and_gpipe():
    p = Placement(training_graph(), Cluster.stages(2), [0, 1, 1, 0])
    rows = evaluate(p, "pipedream").devices
    # a transfer belongs to the pass of the tensor's producer: f1's tensor is forward, b2's backward
    assert (rows[0].load_fw, rows[0].load_bw) == (3.0, 8.0)  # 2 + out 1 ; in 2 + 6
    assert (rows[1].load_fw, rows[1].load_bw) == (4.0, 6.0)  # in 1 + 3 ; 4 + out 2
    assert evaluate(p, "pipedream").objective == 11.0  # max(3 + 8, 4 + 6)
    assert evaluate(p, "gpipe").objective == 12.0  # max FW 4 + max BW 8


def test_gpipe_overflow_charged_forward():
    g = training_graph()
    g = g.replace(ops=[op.model_copy(update={"param_bytes": 4.0}) if op.name == "f1" else op for op in g.ops])
    p = Placement(g, Cluster.stages(2, memory=1.0), [0, 1, 1, 0])
    ev = evaluate(p, CostModel(objective="gpipe", memory="overflow", require=frozenset()))
    assert ev.devices[0].load_fw == 6.0 and ev.devices[0].load_bw == 8.0
    assert ev.objective == 6.0 + 8.0


def test_colocation_and_order_violations():
    p = Placement(training_graph(), Cluster.stages(2), [0, 1, 1, 1])
    checks = {v.check for v in evaluate(p).violations}
    assert "colocation" in checks
    q = Placement(chain3(), Cluster.stages(2), [1, 0, 1])
    checks = {v.check for v in evaluate(q).violations}
    assert {"dag_order", "acyclic", "contiguous"} <= checks
    assert evaluate(q, CostModel(require=frozenset({"contiguous"}))).valid is False
    ev = evaluate(q, "latency")  # cut into contiguous subgraphs (Tarnawski §4.1), not infinite
    assert ev.objective == 15.0 and ev.subgraphs == {"stage0": 1, "stage1": 2}


def test_cost_model_errors():
    with pytest.raises(SpecError, match="unknown overlap 'partial'"):
        CostModel(overlap="partial")
    with pytest.raises(SpecError, match="unknown checks"):
        CostModel(require=frozenset({"speed"}))
    with pytest.raises(SpecError, match="unknown objective 'fastest'"):
        CostModel.named("fastest")
    assert CostModel.named("gpipe").objective is Objective.GPIPE
    assert CostModel.named("throughput", overlap="full").overlap is Overlap.FULL


# ---------------------------------------------------------------------------- brute force & properties
@st.composite
def placed_dags(draw, max_n: int = 9, max_d: int = 4):
    n = draw(st.integers(1, max_n))
    D = draw(st.integers(1, max_d))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    edges = {(min(u, v), max(u, v)) for u, v in pairs if u != v}
    work = draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
    size = draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
    ops = [Op(name=f"v{i}", work=float(work[i]), out_bytes=float(size[i])) for i in range(n)]
    g = Graph(ops, [(f"v{u}", f"v{v}") for u, v in edges])
    assign = draw(st.lists(st.integers(0, D - 1), min_size=n, max_size=n))
    bw = draw(st.sampled_from([1.0, 2.0, 0.5]))
    return Placement(g, Cluster.stages(D, bandwidth=bw), assign)


def brute_transfers(p: Placement) -> tuple[list[float], list[float]]:
    """Per-device bytes in/out, recounted with plain loops: each tensor once per boundary."""
    g, D = p.graph, p.cluster.size
    consumers = {u: [] for u in range(g.n)}
    for u, v in zip(g.src.tolist(), g.dst.tolist()):
        consumers[u].append(v)
    tin, tout = [0.0] * D, [0.0] * D
    for d in range(D):
        for u in range(g.n):
            on = p.assign[u] == d
            if not on and any(p.assign[v] == d for v in consumers[u]):
                tin[d] += g.ops[u].out_bytes / p.cluster.devices[d].bandwidth
            if on and any(p.assign[v] != d for v in consumers[u]):
                tout[d] += g.ops[u].out_bytes / p.cluster.devices[d].bandwidth
    return tin, tout


@given(placed_dags())
def test_tensor_once_matches_brute_force(p):
    tin, tout = brute_transfers(p)
    rows = evaluate(p).devices
    assert np.allclose([r.transfer_in for r in rows], tin)
    assert np.allclose([r.transfer_out for r in rows], tout)


@given(placed_dags())
def test_costs_non_negative(p):
    for model in ("throughput", "bottleneck", "gpipe", "latency"):
        ev = evaluate(p, model)
        assert ev.objective >= 0
        for r in ev.devices:
            assert min(r.compute, r.transfer_in, r.transfer_out, r.overflow, r.load) >= 0


@given(placed_dags(), st.data())
def test_all_on_one_device(p, data):
    d = data.draw(st.integers(0, p.cluster.size - 1))
    q = Placement(p.graph, p.cluster, np.full(p.graph.n, d))
    ev = evaluate(q)
    row = ev.devices[d]
    assert row.compute == pytest.approx(float(p.graph.work("*").sum()))
    assert row.transfer_in == row.transfer_out == 0.0
    assert ev.objective == pytest.approx(row.compute)
    assert not contiguity_witness(q)


@given(placed_dags(), st.randoms(use_true_random=False))
def test_relabelling_identical_stages_keeps_max_load(p, rnd):
    perm = list(range(p.cluster.size))
    rnd.shuffle(perm)
    q = Placement(p.graph, p.cluster, np.asarray(perm)[p.assign])
    assert evaluate(q).max_load == pytest.approx(evaluate(p).max_load)


def brute_non_contiguous(p: Placement) -> set[int]:
    """Devices whose op set S is not contiguous (Tarnawski Def. 3.1): some v outside S lies on a path S -> v -> S."""
    g = p.graph
    succ = {u: [] for u in range(g.n)}
    for u, v in zip(g.src.tolist(), g.dst.tolist()):
        succ[u].append(v)

    def reach(u: int) -> set[int]:
        seen, stack = set(), [u]
        while stack:
            for w in succ[stack.pop()]:
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
        return seen

    closure = {u: reach(u) for u in range(g.n)}
    bad = set()
    for d in set(p.assign.tolist()):
        S = {u for u in range(g.n) if p.assign[u] == d}
        for v in range(g.n):
            if v not in S and any(v in closure[u] for u in S) and closure[v] & S:
                bad.add(d)
    return bad


@given(placed_dags())
def test_contiguity_matches_def_3_1(p):
    assert {lab // 2 for lab, _ in contiguity_witness(p)} == brute_non_contiguous(p)


# ---------------------------------------------------------------------------- the papers' numbers
EXPERT_TPS = {  # Tarnawski et al. Table 1, expert column
    "bert24_inference": 20.08, "resnet50_inference": 43.92, "inceptionv3_inference": 102.48,
    "gnmt_inference": 46.21, "bert24_training": 49.40, "gnmt_training": 137.15,
}


@pytest.mark.shared
@pytest.mark.parametrize("name", sorted(EXPERT_TPS))
def test_tarnawski_table1_expert_tps(dnn_partitioning, name):
    from placement_dsl.io import load_placement, load_workload

    w = load_workload(dnn_partitioning / "throughput-inputs" / "LayerGraphs" / f"{name}.json")
    p = load_placement(dnn_partitioning / "human-experts" / f"{name}_expert.json", w)
    ev = evaluate(p, "pipedream" if w.graph.is_training else "throughput")
    assert ev.valid
    assert float(f"{ev.objective:.4g}") == float(f"{EXPERT_TPS[name]:.4g}")


@pytest.mark.shared
def test_tarnawski_table4_gnmt_expert_latency(dnn_partitioning):
    from placement_dsl.io import load_placement, load_workload

    w = load_workload(dnn_partitioning / "latency-inputs" / "LayerGraphs" / "gnmt_inference.json")
    p = load_placement(dnn_partitioning / "human-experts" / "gnmt_inference_expert.json", w)
    ev = evaluate(p, "latency")
    assert round(ev.objective, 2) == 293.40
    assert not ev.valid and {v.check for v in ev.violations} == {"memory"}  # Table 4: "mem-violating"
