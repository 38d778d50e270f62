"""The cost model's verdicts beyond the loads: violations and their messages, the GPipe and makespan
branches of ``evaluate``, ``to_dict`` and ``CostModel``'s checks of its fields.

The hand-worked numbers are in the comments.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from placement_dsl.cluster import Cluster, Device
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import REL_TOL, CostModel, Overlap, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.placement import Placement
from placement_dsl.training import TrainingMemorySpec
from placement_dsl.validity import contiguity_witness


def _checks(ev) -> list[str]:
    return [v.check for v in ev.violations]


# ---------------------------------------------------------------------------- allowed kinds
def _accelerator_only(n: int) -> Graph:
    """``n`` independent ops that run on accelerators only (no CPU time given)."""
    return Graph([Op(name=f"op{i}", work={"accelerator": 1.0}) for i in range(n)], [])


def test_an_op_on_a_device_of_a_kind_it_cannot_run_on_is_an_allowed_violation_naming_op_device_and_kind():
    c = Cluster.accelerators(1, cpus=1)
    ev = evaluate(Placement(_accelerator_only(2), c, [0, 1]), "throughput")
    assert not ev.valid
    assert [(v.check, v.message) for v in ev.violations] == [
        ("allowed", f"op 'op1' cannot run on device {c.names[1]!r} (kind 'cpu')")]


def test_at_most_ten_ops_that_cannot_run_are_reported():
    c = Cluster.accelerators(1, cpus=1)
    ev = evaluate(Placement(_accelerator_only(12), c, [1] * 12), "throughput")
    assert _checks(ev) == ["allowed"] * 10
    assert [v.message.split("'")[1] for v in ev.violations] == [f"op{i}" for i in range(10)]


# ---------------------------------------------------------------------------- memory at the boundary
def _one_op_holding(nbytes: float) -> Placement:
    g = Graph([Op(name="a", work=1.0, param_bytes=nbytes)], [])
    return Placement(g, Cluster.stages(1, memory=1000.0), [0])


def test_memory_exactly_at_capacity_is_valid():
    ev = evaluate(_one_op_holding(1000.0), "throughput")
    assert ev.valid and ev.violations == ()


def test_memory_at_the_tolerance_edge_is_valid_and_beyond_it_is_not():
    edge = 1000.0 * (1 + REL_TOL)  # used > capacity * (1 + REL_TOL) is the violation: equality is not
    assert evaluate(_one_op_holding(edge), "throughput").valid
    beyond = evaluate(_one_op_holding(1000.0 * (1 + 4 * REL_TOL)), "throughput")
    assert _checks(beyond) == ["memory"] and not beyond.valid


# ---------------------------------------------------------------------------- colocation
def test_a_split_group_is_named_with_its_devices():
    g = Graph([Op(name="a", work=1.0, group="g7"), Op(name="b", work=1.0, group="g7")], [("a", "b")])
    ev = evaluate(Placement(g, Cluster.stages(2), [0, 1]), "throughput")
    assert [(v.check, v.message) for v in ev.violations] == [
        ("colocation", "group 'g7' is split over devices ['stage0', 'stage1']")]


# ---------------------------------------------------------------------------- contiguity
def _three_broken_devices() -> tuple[Graph, Cluster]:
    """a -> b -> c, a -> x -> c, c -> d -> e; stage0 holds a and c, stage1 b and e, stage2 x and d:
    stage0 is reached from itself through stage1 and through stage2 (c, twice), stage2 through
    stage0 (d via x, c), stage1 through stage0 and stage2 (e via b, c, d)."""
    g = Graph([Op(name=n, work=1.0) for n in ("a", "b", "x", "c", "d", "e")],
              [("a", "b"), ("b", "c"), ("a", "x"), ("x", "c"), ("c", "d"), ("d", "e")])
    return g, Cluster.stages(3)


def test_each_non_contiguous_device_is_reported_once_with_its_name_and_part():
    g, c = _three_broken_devices()
    p = Placement(g, c, [0, 1, 2, 0, 2, 1])  # a b x c d e
    assert contiguity_witness(p) == [(0, 3), (0, 3), (4, 4), (2, 5)]  # labels 2 * device; stage0's twice first
    ev = evaluate(p, CostModel(require={"contiguous"}))
    assert not ev.valid
    tail = "is reached from the device through another device)"
    assert [v.message for v in ev.violations if v.check == "contiguous"] == [
        f"device 'stage0': forward ops are not contiguous (op 'c' {tail}",
        f"device 'stage2': forward ops are not contiguous (op 'd' {tail}",
        f"device 'stage1': forward ops are not contiguous (op 'e' {tail}"]


def test_a_backward_part_that_is_not_contiguous_is_named_backward():
    # forward a (stage0); backward b1 (stage1) -> b2 (stage0) -> b3 (stage1): stage1's backward part is broken
    g = Graph([Op(name="a", work=1.0), Op(name="b1", work=1.0, backward=True), Op(name="b2", work=1.0, backward=True),
               Op(name="b3", work=1.0, backward=True)], [("a", "b1"), ("b1", "b2"), ("b2", "b3")])
    ev = evaluate(Placement(g, Cluster.stages(2), [0, 1, 0, 1]), CostModel(require={"contiguous"}))
    assert [v.message for v in ev.violations if v.check == "contiguous"] == [
        "device 'stage1': backward ops are not contiguous (op 'b3' is reached from the device through another device)"]


@pytest.mark.parametrize("first", ["b", "c"])
def test_reach_through_every_predecessor_is_kept(first):
    # a (stage0) -> b (stage1) -> d (stage2) <- c (stage2), d -> e (stage0): e is reached from stage0 through
    # b and d, whichever of d's predecessors comes first
    edges = [("a", "b"), ("b", "d"), ("c", "d"), ("d", "e")]
    if first == "c":
        edges = [("a", "b"), ("c", "d"), ("b", "d"), ("d", "e")]
    g = Graph([Op(name=n, work=1.0) for n in "abcde"], edges)
    assert contiguity_witness(Placement(g, Cluster.stages(3), [0, 1, 2, 2, 0])) == [(0, 4)]


def test_a_cycle_between_devices_is_an_acyclic_violation_naming_the_devices():
    g = Graph([Op(name=n, work=1.0) for n in "abc"], [("a", "b"), ("b", "c")])
    ev = evaluate(Placement(g, Cluster.stages(2), [0, 1, 0]), CostModel(require={"acyclic"}))
    msgs = [v.message for v in ev.violations if v.check == "acyclic"]
    assert len(msgs) == 1 and msgs[0].startswith("quotient graph has a cycle through devices ")
    assert "'stage0'" in msgs[0] and "'stage1'" in msgs[0] and not ev.valid


# ---------------------------------------------------------------------------- GPipe with micro-batches
def test_gpipe_with_microbatches_is_fill_and_drain_per_sample():
    # f1 (2, 1-byte tensor) -> f2 (3) -> b2 (4, 2 bytes) -> b1 (6); [f1, b1] on stage0, [f2, b2] on stage1:
    # per sample stage0 fw 2 + out 1 = 3, bw in 2 + 6 = 8; stage1 fw in 1 + 3 = 4, bw 4 + out 2 = 6.
    # Two micro-batches: forward stage0 ends 3, 6; stage1 7, 11; backward stage1 max(7, 11) + 6 = 17,
    # max(11, 17) + 6 = 23; stage0 17 + 8 = 25, max(23, 25) + 8 = 33: 33 / 2 = 16.5 per sample.
    g = Graph([Op(name="f1", work=2, out_bytes=1, group="1"), Op(name="f2", work=3, group="2"),
               Op(name="b2", work=4, out_bytes=2, backward=True, group="2"),
               Op(name="b1", work=6, backward=True, group="1")], [("f1", "f2"), ("f2", "b2"), ("b2", "b1")])
    p = Placement(g, Cluster.stages(2), [0, 1, 1, 0])
    assert evaluate(p, CostModel.named("gpipe", microbatches=2)).objective == 16.5
    assert evaluate(p, "gpipe").objective == 12.0  # without micro-batches: max fw 4 + max bw 8


# ---------------------------------------------------------------------------- makespan
def _fan_out() -> Placement:
    """a (stage0, 2-byte tensor) feeds b (stage1) and c (stage2), all of work 1, bandwidth 1; the stages run one op at
    a time with transfer tasks through host memory (``invocations=False``, MOIRAI's model)."""
    g = Graph([Op(name="a", work=1.0, out_bytes=2.0), Op(name="b", work=1.0), Op(name="c", work=1.0)],
              [("a", "b"), ("a", "c")])
    return Placement(g, Cluster([Device(name=f"stage{i}", invocations=False) for i in range(3)]), [0, 1, 2])


def test_makespan_uses_the_models_congestion():
    # both transfers leave stage0 at 1 and take 2: at once without congestion (4), one after the other
    # through stage0's port (1 + 2 + 2 + 1 = 6)
    assert evaluate(_fan_out(), CostModel.named("makespan", congestion="none")).objective == 4.0
    assert evaluate(_fan_out(), CostModel.named("makespan")).objective == 6.0


def test_an_unschedulable_placement_is_a_schedule_violation_that_decides_validity_when_required():
    c = Cluster.accelerators(1, cpus=1)
    p = Placement(_accelerator_only(1), c, [1])
    msg = f"op 'op0' cannot run on device {c.names[1]!r} (kind 'cpu')"
    only_schedule = evaluate(p, CostModel.named("makespan", require={"schedule"}))
    assert [(v.check, v.message) for v in only_schedule.violations] == [("allowed", msg), ("schedule", msg)]
    assert not only_schedule.valid and only_schedule.objective == np.inf
    assert evaluate(p, CostModel.named("makespan", require=set())).valid  # the same problems, none required


# ---------------------------------------------------------------------------- latency and to_dict
def test_latency_is_carried_on_the_evaluation_and_in_its_dict():
    g = Graph([Op(name="a", work=1, out_bytes=2), Op(name="b", work=3)], [("a", "b")])
    p = Placement(g, Cluster.stages(2), [0, 1])
    ev = evaluate(p, "latency")
    assert ev.latency == ev.objective == 8.0  # a: 1 + sends 2 = 3; b: receives 2 + 3 = 8
    d = ev.to_dict()
    assert d["latency"] == 8.0 and d["subgraphs"] == {"stage0": 1, "stage1": 1}
    thr = evaluate(p, "throughput").to_dict()
    assert "latency" not in thr and "subgraphs" not in thr


def test_to_dict_is_plain_json_with_every_field():
    spec = TrainingMemorySpec(schedule="gpipe", microbatches=4)
    model = CostModel.named("gpipe", microbatches=4, max_subgraphs=3, training_memory=spec)
    g = Graph([Op(name="a", work=1, group="x"), Op(name="b", work=1, group="x", backward=True)], [("a", "b")])
    d = evaluate(Placement(g, Cluster.stages(2), [0, 1]), model).to_dict()
    assert set(d) == {"objective", "valid", "model", "violations", "devices"}
    assert d["valid"] is False
    assert d["violations"] == [{"check": "colocation", "message": "group 'x' is split over devices "
                                                                  "['stage0', 'stage1']", "required": True}]
    m = d["model"]
    assert m["require"] == sorted(model.require) and isinstance(m["require"], list)
    assert type(m["objective"]) is str and m["objective"] == "gpipe"  # the enum's value, not the enum
    assert type(m["overlap"]) is str and m["overlap"] == "none"
    assert m["microbatches"] == 4 and m["max_subgraphs"] == 3
    assert m["training_memory"] == spec.to_dict()
    assert len(d["devices"]) == 2
    assert json.loads(json.dumps(d)) == d


def test_overlap_repr_is_its_value():
    assert repr(Overlap.HALF) == "'half'" and str(Overlap.HALF) == "half"


# ---------------------------------------------------------------------------- CostModel's field checks
def test_require_is_stored_as_a_frozenset():
    m = CostModel(require={"memory"})
    assert type(m.require) is frozenset and m.require == frozenset({"memory"})


@pytest.mark.parametrize("field", ["max_subgraphs", "microbatches"])
def test_one_is_a_valid_count(field):
    assert getattr(CostModel(**{field: 1}), field) == 1


@pytest.mark.parametrize("field", ["max_subgraphs", "microbatches"])
@pytest.mark.parametrize("value", [0, -2, True, 2.5, "2"])
def test_counts_that_are_not_whole_numbers_from_one_are_refused_by_name(field, value):
    with pytest.raises(SpecError, match=f"{field} must be a whole number >= 1 or None, got {value!r}"):
        CostModel(**{field: value})


def test_microbatches_accepts_numpy_integers():
    assert CostModel(microbatches=np.int64(3)).microbatches == 3


# ---------------------------------------------------------------------------- the text table
def test_table_ends_with_the_objective_then_required_violations_and_notes():
    g = Graph([Op(name=n, work=1.0, param_bytes=4.0) for n in "abc"], [("a", "b"), ("b", "c")])
    lines = evaluate(Placement(g, Cluster.stages(2, memory=5.0), [0, 1, 0]), "throughput").table().splitlines()
    assert lines[0].split()[:3] == ["device", "kind", "ops"] and len(lines) == 9
    assert lines[2].split()[:3] == ["stage0", "accelerator", "2"] and lines[2].split()[-1] == "2"
    assert lines[4:] == [
        "objective (throughput): 2   valid: False",
        "  violation [memory] device 'stage0': ops need 8 > 5 capacity",
        ("  note (not required) [contiguous] device 'stage0': forward ops are not contiguous (op 'c' is reached "
         "from the device through another device)"),
        ("  note (not required) [dag_order] edge 'b' -> 'c' goes from device 'stage1' back to earlier device "
         "'stage0' (1 such edges)"),
        "  note (not required) [acyclic] quotient graph has a cycle through devices ['stage0', 'stage1']"]
