"""Megatron-LM (core >= 0.13): ``--pipeline-model-parallel-layout`` and the uneven first/last stage flags.

The layout names each stage's layers, stages split by ``|``: ``E`` the embedding, ``t`` a
transformer layer (``t*3`` three of them), ``L`` the loss (with the final norm and output
layer); e.g. ``Et*3|t*3|t*2L``. The embedding is on the first stage and the head on the last,
where Megatron builds them. When every middle stage holds the same number of layers the plan
is also ``--decoder-first-pipeline-num-layers A --decoder-last-pipeline-num-layers B``.

Virtual stages (interleaved 1F1B): a placement whose ``p`` devices hold ``v`` stages each,
round-robin, is a layout of ``p v`` stages in Megatron's order (stage ``k`` on pipeline rank
``k mod p``, virtual rank ``k // p``) with ``--pipeline-model-parallel-size p``; Megatron reads
``v`` from the layout (its stage count over ``p``), and the uneven first/last flags, which
cannot express it, are left out.

Checked by Megatron itself: megatron-core 0.16.1's ``TransformerConfig`` parses our layouts
(``PipelineParallelLayerLayout``) into the stages and virtual stages meant, validates them against
``num_layers``, and accepts the uneven first/last counts (``num_layers_in_first_pipeline_stage``,
``num_layers_in_last_pipeline_stage``, which Megatron-LM's two flags set); see
``tests/export/test_megatron_accepts.py``, which runs where megatron-core is installed. Megatron has
no ZBV layout: a placement folded into a V exports as ``2p`` plain stages.
"""
from __future__ import annotations

from typing import Any

from ..placement import Placement
from .layers import LayerStages, layer_stages
from .plan import forward_view, pipeline_stages, stage_ranks


def _run(n: int) -> str:
    return "" if n == 0 else "t" if n == 1 else f"t*{n}"


def layout_string(ls: LayerStages) -> str:
    """The layout of ``ls``: ``E`` on the first stage, ``L`` on the last, ``t*N`` for N layers.

    >>> layout_string(LayerStages("h", 8, (3, 3, 2), True, True))
    'Et*3|t*3|t*2L'
    """
    parts = [_run(n) for n in ls.counts]
    parts[0] = "E" + parts[0]
    parts[-1] = parts[-1] + "L"
    return "|".join(parts)


def _first_last(ls: LayerStages) -> dict[str, int] | None:
    c = ls.counts
    if len(c) < 3 or len(set(c[1:-1])) != 1:
        return None
    return {"decoder_first_pipeline_num_layers": c[0], "decoder_last_pipeline_num_layers": c[-1]}


def megatron(placement: Placement) -> dict[str, Any]:
    """Megatron's arguments for ``placement`` (its layer list as Megatron's decoder layers)."""
    placement = forward_view(placement)
    ls = layer_stages(placement, "megatron", virtual=True, transformer=True)
    ranks = max(stage_ranks(pipeline_stages(placement, "megatron", virtual=True))) + 1
    v = len(ls.counts) // ranks
    layout = layout_string(ls)
    args = ["--pipeline-model-parallel-size", str(ranks), "--num-layers", str(ls.layers),
            "--pipeline-model-parallel-layout", layout]
    uneven = _first_last(ls) if v == 1 else None
    return {"pipeline_model_parallel_size": ranks, "num_virtual_stages_per_pipeline_rank": v,
            "num_layers": ls.layers, "layer_list": ls.prefix, "layers_per_stage": list(ls.counts),
            "pipeline_model_parallel_layout": layout, "uneven": uneven, "args": args}
