"""Exports of virtual stages (interleaved 1F1B, ZB-H1): split points, Megatron's layout, torch's schedule CSV."""
from __future__ import annotations

import csv
import io

import pytest

from placement_dsl.boundaries import Boundaries
from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.export import export
from placement_dsl.heuristics import run
from placement_dsl.objectives import Interleaved1F1B
from placement_dsl.pipeline_orders import rank_orders
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem

from .test_export import _cut, gpt_like
from .titan_rule import flattened


def interleaved(layers: int = 4, ranks: int = 2) -> Placement:
    """One block per stage (embedding with h.0, head with the last), stage k on device k mod ``ranks``."""
    cut = _cut(gpt_like(layers), *(f"h{i}.ln" for i in range(1, layers)))
    return Placement(cut.graph, Cluster.stages(ranks), [int(d) % ranks for d in cut.assign])


def _flat(p: Placement) -> Placement:
    """``p`` on the GPT with its blocks a top-level list (``h.N``), which torchtitan splits."""
    return Placement(flattened(p.graph, "transformer", ("h",)), p.cluster, p.assign)


def test_split_points_and_module_lists_name_every_virtual_stage():
    p = interleaved()
    spec = export(p, "torch-pipelining", schedule="interleaved-1f1b").data
    assert spec["split_spec"] == {f"transformer.h.{i}": "beginning" for i in (1, 2, 3)}
    assert spec["stage_ranks"] == [0, 1, 0, 1] and spec["virtual_stages_per_rank"] == 2
    assert spec["stage_devices"] == ["stage0", "stage1", "stage0", "stage1"]
    assert spec["schedule_class"] == "ScheduleInterleaved1F1B" and spec["stage_index_per_rank"] == [[0, 2], [1, 3]]
    titan = export(_flat(p), "torchtitan", schedule="interleaved-1f1b").data
    assert titan["module_fqns_per_model_part"][1:3] == [["h.1"], ["h.2"]]
    assert titan["stage_ranks"] == [0, 1, 0, 1]


@pytest.mark.parametrize("to", ["torch-pipelining", "torchtitan", "schedule-csv"])
@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_a_single_stage_schedule_with_several_stages_per_rank_is_refused_naming_the_classes_that_run_them(to,
                                                                                                          schedule):
    """torch-pipelining wrote Schedule1F1B (or ScheduleGPipe), single-stage classes in torch, with
    stage_index_per_rank [[0, 2], [1, 3]]; schedule-csv refused it as a non-contiguous plan."""
    classes = {"1f1b": "Schedule1F1B", "gpipe": "ScheduleGPipe"}
    with pytest.raises(SpecError, match=rf"{to}: --schedule {schedule} is torch's {classes[schedule]}, which runs one "
                                        r"stage per rank, and rank 0 holds stages \[0, 2\]; export with --schedule "
                                        r"interleaved-1f1b \(ScheduleInterleaved1F1B\)"):
        export(interleaved(), to, schedule=schedule)


def test_megatron_layout_with_virtual_stages():
    data = export(interleaved(), "megatron").data
    assert data["pipeline_model_parallel_layout"] == "Et|t|t|tL"
    assert data["pipeline_model_parallel_size"] == 2 and data["num_virtual_stages_per_pipeline_rank"] == 2
    assert data["args"] == ["--pipeline-model-parallel-size", "2", "--num-layers", "4",
                            "--pipeline-model-parallel-layout", "Et|t|t|tL"]
    assert data["uneven"] is None


@pytest.mark.parametrize("runtime", ["vllm", "deepspeed"])
def test_runtimes_without_virtual_stages_refuse_them(runtime):
    with pytest.raises(SpecError, match=rf"{runtime}: device 'stage0' holds stages \[0, 2\].*one contiguous stage per "
                                        "rank"):
        export(interleaved(), runtime)


def test_stages_not_round_robin_are_refused_with_the_layout_they_need():
    cut = _cut(gpt_like(6), *(f"h{i}.ln" for i in range(1, 6)))
    p = Placement(cut.graph, Cluster.stages(3), [[0, 1, 2, 1, 0, 2][int(d)] for d in cut.assign])
    with pytest.raises(SpecError, match=r"round-robin \(stage k on the \(k mod p\)-th device\)"):
        export(p, "torch-pipelining")


@pytest.mark.parametrize("schedule", ["interleaved-1f1b", "zb-h1"])
def test_schedule_csv_is_torchs_order_and_passes_its_validation(schedule):
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    m = 4
    text = export(interleaved(), "schedule-csv", microbatches=m, schedule=schedule).text
    rows = list(csv.reader(io.StringIO(text)))
    actions = {r: [schedules._Action.from_str(cell) for cell in row] for r, row in enumerate(rows)}
    assert schedules._validate_schedule(actions, 2, 4, m) == {0: 0, 1: 1, 2: 0, 3: 1}  # stage -> rank
    assert [[c for c in row if c] for row in rows] == [[str(a) for a in o] for o in rank_orders(schedule, 2, 2, m)]
    if schedule == "zb-h1":
        assert any(c.endswith("W0") for c in rows[0]) and not any("B" in c for row in rows for c in row)


def test_schedule_csv_refuses_what_torch_refuses():
    with pytest.raises(SpecError, match=r"microbatches=5 is not a multiple of its 2 rounds"):
        export(interleaved(), "schedule-csv", microbatches=5, schedule="interleaved-1f1b")


def zbv(layers: int = 4) -> Placement:
    """One block per stage on a device of its own (the V's stage slots): stage k on device k."""
    cut = _cut(gpt_like(layers), *(f"h{i}.ln" for i in range(1, layers)))
    return Placement(cut.graph, Cluster.stages(layers), [int(d) for d in cut.assign])


def test_zbv_split_points_name_torchs_class_and_the_v_of_stages_per_rank():
    spec = export(zbv(), "torch-pipelining", schedule="zbv").data
    assert spec["split_spec"] == {f"transformer.h.{i}": "beginning" for i in (1, 2, 3)}
    assert spec["stage_ranks"] == [0, 1, 1, 0] and spec["virtual_stages_per_rank"] == 2
    assert spec["schedule_class"] == "ScheduleZBVZeroBubble" and spec["stage_index_per_rank"] == [[0, 3], [1, 2]]
    plain = export(zbv(), "torch-pipelining").data  # 1F1B: each device a rank
    assert plain["schedule_class"] == "Schedule1F1B" and plain["stage_index_per_rank"] == [[0], [1], [2], [3]]


def test_torchtitan_ranks_the_stages_as_torch_pipelining_does_under_every_schedule():
    """torchtitan ignored --schedule zbv: stage_ranks [0, 1, 2, 3] where torch-pipelining wrote the V, and it
    accepted zbv on 3 stages, which torch-pipelining refuses."""
    for schedule in ("1f1b", "zbv"):
        spec, titan = (export(zbv(), "torch-pipelining", schedule=schedule).data,
                       export(_flat(zbv()), "torchtitan", schedule=schedule).data)
        assert titan["stage_ranks"] == spec["stage_ranks"] and titan["schedule_class"] == spec["schedule_class"]
        assert titan["stage_index_per_rank"] == spec["stage_index_per_rank"]
    assert export(_flat(zbv()), "torchtitan", schedule="zbv").data["stage_ranks"] == [0, 1, 1, 0]
    for to in ("torch-pipelining", "torchtitan"):
        with pytest.raises(SpecError, match="zbv runs 2 stages per rank in a V, and the placement has 3 stages"):
            export(zbv(3), to, schedule="zbv")


def test_zbv_schedule_csv_is_torchs_order_and_passes_its_validation():
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    text = export(zbv(), "schedule-csv", microbatches=4, schedule="zbv").text
    rows = list(csv.reader(io.StringIO(text)))
    actions = {r: [schedules._Action.from_str(cell) for cell in row] for r, row in enumerate(rows)}
    assert schedules._validate_schedule(actions, 2, 4, 4) == {0: 0, 1: 1, 2: 1, 3: 0}  # stage -> rank: the V
    assert [[c for c in row if c] for row in rows] == [[str(a) for a in o] for o in rank_orders("zbv", 2, 2, 4)]
    with pytest.raises(SpecError, match="zbv runs 2 stages per rank in a V, and the placement has 3 stages"):
        export(zbv(3), "schedule-csv", schedule="zbv")


def test_a_split_of_two_stages_per_rank_the_package_finds_is_exported_by_each_runtime_that_runs_it():
    """Asked for 2 virtual stages per rank with stage boundaries between modules, the heuristics' answer is 4
    stages round-robin on 2 ranks: Megatron's layout with 2 virtual stages, torch's ScheduleInterleaved1F1B stage
    list; runtimes of one stage per rank refuse it with the reason."""
    problem = Problem(gpt_like(8), Cluster.stages(2), Interleaved1F1B(microbatches=4, virtual=2),
                      [Boundaries.modules(depth=3)])
    found = run("dp", problem.graph, problem.cluster, model=problem.cost_model(), time_limit=20)
    assert found.valid
    placement = Placement(gpt_like(8), problem.cluster, found.placement.assign)
    data = export(placement, "megatron").data
    assert data["pipeline_model_parallel_size"] == 2 and data["num_virtual_stages_per_pipeline_rank"] == 2
    assert data["pipeline_model_parallel_layout"].count("|") == 3 and sum(data["layers_per_stage"]) == 8
    spec = export(placement, "torch-pipelining", schedule="interleaved-1f1b").data
    assert spec["schedule_class"] == "ScheduleInterleaved1F1B" and spec["stage_index_per_rank"] == [[0, 2], [1, 3]]
    assert len(spec["split_spec"]) == 3
    for runtime in ("vllm", "deepspeed"):  # the remedy named slicegraph, as for a DP split out of order
        with pytest.raises(SpecError, match=r"one contiguous stage per rank \(the plan holds 2 virtual stages per rank "
                                            r"round-robin: export it to megatron, torch-pipelining"):
            export(placement, runtime)
