"""Operator fusion (MOIRAI Alg. 1, Table I): which chains fuse, and placements and schedules mapped back."""
from __future__ import annotations

import pytest

from placement_dsl import zoo
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.coarsen import DEFAULT_RULES, TABLE_I, FusionRule, coarsen, op_type
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.schedule import check_schedule


def typed(name: str, kind: str, work: float | dict[str, float] = 1.0, out: float = 1.0) -> Op:
    return Op(name=name, work=work, out_bytes=out, param_bytes=2.0, attrs={"type": kind})


def fig7() -> Graph:
    """MOIRAI Fig. 7 in small: conv1 -> bn and conv2 -> bn -> add (residual input from x) -> relu -> fc."""
    ops = [typed("x", "Input"), typed("conv1", "Conv", 2), typed("bn1", "BatchNormalization"),
           typed("conv2", "Conv", 3), typed("bn2", "BatchNormalization"), typed("add", "Add", 0.5),
           typed("relu", "Relu", 0.5), typed("fc", "Gemm", 2)]
    edges = [("x", "conv1"), ("conv1", "bn1"), ("bn1", "add"), ("x", "conv2"), ("conv2", "bn2"), ("bn2", "add"),
             ("add", "relu"), ("relu", "fc")]
    return Graph(ops, edges, name="fig7")


def test_table_i_fuses_the_longest_rule_over_direct_and_multi_input_links():
    c = coarsen(fig7())
    fused = {c.coarse.names[k]: rule for k, rule in enumerate(c.rules) if rule}
    assert set(fused.values()) == {"conv-bn-add-relu", "conv-bn"}
    assert len(fused) == 2 and c.coarse.n == 4  # x, conv1+bn1, conv+bn+add+relu, fc
    report = c.report()
    assert report["ops"] == 8 and report["coarse_ops"] == 4 and report["reduction"] == pytest.approx(0.5)
    merged = next(op for op in c.coarse.ops if op.name.endswith("+relu"))
    assert merged.work == {"*": 3 + 1 + 0.5 + 0.5} and merged.param_bytes == 8 and merged.out_bytes == 1


def test_a_multi_output_link_is_never_fused():
    ops = [typed("conv", "Conv"), typed("bn", "BatchNormalization"), typed("other", "Relu")]
    g = Graph(ops, [("conv", "bn"), ("conv", "other")])
    assert coarsen(g).coarse.n == 3  # conv feeds two ops: fusing it with bn would hide its output


def test_rules_match_prefixes_and_repeats():
    conv_bn = FusionRule("r", ("conv", "bn"))
    assert conv_bn.matches(["conv", "bn", "act"]) == 2 and conv_bn.matches(["bn", "conv"]) == 0
    chain = FusionRule("e", ("eltwise", "eltwise+"))
    assert chain.matches(["add", "mul", "act", "conv"]) == 3 and chain.matches(["add", "conv"]) == 0
    assert [r.name for r in TABLE_I] == ["conv-bn-add-relu", "conv-bn-relu", "conv-bn"]
    assert DEFAULT_RULES[:3] == TABLE_I


def test_types_come_from_attributes_else_names():
    assert op_type(Op(name="a", attrs={"type": "BatchNormalization"})) == "bn"
    assert op_type(Op(name="layer1.0.relu")) == "act" and op_type(Op(name="block/conv2d_3")) == "conv"
    assert op_type(Op(name="mystery")) is None


def test_ops_no_device_kind_runs_together_stay_apart():
    ops = [typed("conv", "Conv", {"gpu": 1.0}), typed("bn", "BatchNormalization", {"cpu": 1.0})]
    assert coarsen(Graph(ops, [("conv", "bn")])).coarse.n == 2


def test_a_coarse_schedule_expands_to_a_valid_one_with_the_same_makespan():
    c = coarsen(fig7())
    devices = [Device(name=f"d{i}", kind="*") for i in range(2)]
    cluster = Cluster(devices, [Link(src="d0", dst="d1", bandwidth=1.0), Link(src="d1", dst="d0", bandwidth=1.0)])
    coarse = run("list", c.coarse, cluster, model=CostModel.named("makespan")).placement
    fine = c.expand(coarse)
    assert [fine.assign[v] for v in c.members[1]] == [coarse.assign[1]] * len(c.members[1])
    makespan, bad = check_schedule(fine, fine.schedule)
    assert bad == [] and makespan == pytest.approx(check_schedule(coarse, coarse.schedule)[0])
    with pytest.raises(SpecError, match="coarse graph"):
        c.expand(fine)


def test_the_zoo_transformer_shrinks():
    report = coarsen(zoo.get("transformer-small").graph).report()
    assert report["coarse_ops"] < report["ops"] and report["fused"].get("matmul-add", 0) > 0
