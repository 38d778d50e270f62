"""Megatron's own parser reads our layouts: ``TransformerConfig`` (megatron-core 0.16.1) parses
``--pipeline-model-parallel-layout`` through ``PipelineParallelLayerLayout``, validates it against ``num_layers``,
and gives each pipeline rank and virtual stage the decoder layers we meant; the uneven first/last flags'
counts are accepted the same way. Skipped where megatron-core is not installed (the project does not depend on it);
``pip install --no-deps megatron-core`` (pure Python, imports on CPU without Transformer Engine or Apex) runs it."""
from __future__ import annotations

import warnings

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.export import export
from placement_dsl.placement import Placement

from .test_export import _cut, gpt_like

with warnings.catch_warnings():  # megatron warns that Transformer Engine and Apex are absent
    warnings.simplefilter("ignore")
    layout_module = pytest.importorskip("megatron.core.transformer.pipeline_parallel_layer_layout")
    config_module = pytest.importorskip("megatron.core.transformer.transformer_config")
torch = pytest.importorskip("torch")
LayerType = pytest.importorskip("megatron.core.transformer.enums").LayerType


def megatron_config(data: dict, **layout):
    return config_module.TransformerConfig(num_layers=data["num_layers"], hidden_size=64, num_attention_heads=4,
                                           pipeline_dtype=torch.float32,
                                           pipeline_model_parallel_size=data["pipeline_model_parallel_size"], **layout)


def megatron_stages(data: dict) -> list[list[str]]:
    """Megatron's reading of our layout: each stage's layers in pipeline order (stage k on rank k mod p, virtual
    stage k // p), from the parsed config."""
    parsed = megatron_config(data, pipeline_model_parallel_layout=data["pipeline_model_parallel_layout"])
    layout = parsed.pipeline_model_parallel_layout
    p, v = layout.pipeline_model_parallel_size, layout.virtual_pipeline_model_parallel_size
    assert (p, v) == (data["pipeline_model_parallel_size"], data["num_virtual_stages_per_pipeline_rank"])
    assert (parsed.virtual_pipeline_model_parallel_size or 1) == v
    return [[t.name for t in layout.layout[k % p][k // p]] for k in range(p * v)]


def meant(data: dict) -> list[list[str]]:
    counts = data["layers_per_stage"]
    out = [["decoder"] * n for n in counts]
    out[0].insert(0, "embedding")
    out[-1].append("loss")
    return out


PLACEMENTS = {
    "even": lambda: _cut(gpt_like(4), "h2.ln"),
    "uneven": lambda: _cut(gpt_like(8), "h3.ln", "h6.ln"),
    "uneven-4": lambda: _cut(gpt_like(8), "h1.ln", "h4.ln", "h7.ln"),
    "one stage": lambda: _cut(gpt_like(3)),
    "virtual": lambda: Placement(*_virtual(gpt_like(4), 2)),
    "virtual-3": lambda: Placement(*_virtual(gpt_like(6), 3)),
}


def _virtual(g, ranks: int):
    cut = _cut(g, *(name for name in g.names if name.endswith(".ln") and name != "h0.ln"))
    return cut.graph, Cluster.stages(ranks), [int(d) % ranks for d in cut.assign]


@pytest.mark.parametrize("name", list(PLACEMENTS))
def test_megatron_parses_our_layout_into_the_stages_we_meant(name):
    data = export(PLACEMENTS[name](), "megatron").data
    assert megatron_stages(data) == meant(data)


def test_megatron_reads_the_layers_of_each_rank_as_we_count_them():
    data = export(PLACEMENTS["uneven"](), "megatron").data
    layout = megatron_config(data, pipeline_model_parallel_layout=data["pipeline_model_parallel_layout"]
                             ).pipeline_model_parallel_layout
    assert [layout.get_layer_id_list(pp_rank=r) for r in range(3)] == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_megatron_accepts_the_uneven_first_and_last_counts():
    data = export(PLACEMENTS["uneven-4"](), "megatron").data
    uneven = data["uneven"]
    assert uneven == {"decoder_first_pipeline_num_layers": 1, "decoder_last_pipeline_num_layers": 1}
    config = megatron_config(data, num_layers_in_first_pipeline_stage=uneven["decoder_first_pipeline_num_layers"],
                             num_layers_in_last_pipeline_stage=uneven["decoder_last_pipeline_num_layers"])
    assert config.num_layers_in_first_pipeline_stage == 1 and config.num_layers_in_last_pipeline_stage == 1


def test_megatron_refuses_a_layout_that_miscounts_the_layers():
    data = export(PLACEMENTS["even"](), "megatron").data
    with pytest.raises(AssertionError, match="must match num_layers"):
        megatron_config({**data, "num_layers": data["num_layers"] + 1},
                        pipeline_model_parallel_layout=data["pipeline_model_parallel_layout"])
