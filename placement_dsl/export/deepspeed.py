"""DeepSpeed (>= 0.14) ``PipelineModule``: each stage's layers as the ``parts`` boundaries.

``PipelineModule(layers=..., num_stages=P)`` partitions its layer list into ``parts``: stage
``k`` builds layers ``parts[k]`` to ``parts[k+1] - 1``. The layer list here is the embedding
(one entry, when the graph has one), the repeated layers, then the head (one entry), so
``parts = [0, a, b, ..., n]`` over ``n`` entries; a subclass or a custom ``partition_method``
sets ``self.parts`` to it. The repeated layers alone are ``layers_per_stage``.

A model without one such list (a network of several stages of blocks, an encoder-decoder, a
small CNN of a ``stem``, blocks and a classifier) has as its layer list the modules it calls in
order, at the first depth no stage boundary cuts (1: the model's own children), every one a
layer; ``layer_list`` is then ``None`` and ``depth`` says which.

A module object called under several names on several stages (a tied encoder and decoder) is listed in
``tied_modules``: build its layers with ``TiedLayerSpec(key, ...)`` of one key, which DeepSpeed keeps in
sync across the stages.
"""
from __future__ import annotations

from typing import Any

from ..placement import Placement
from .layers import layer_name, layer_stages, modules_per_stage, sole_layer_list
from .plan import forward_view, pipeline_stages, tied_modules


def deepspeed(placement: Placement) -> dict[str, Any]:
    """``parts`` over the layer list ``[embedding] + layers + [head]`` and the layers per stage (over the modules
    the model calls in order where it has no sole layer list)."""
    placement = forward_view(placement)
    paths = [str(op.attrs["module"]) for op in placement.graph.ops if op.attrs.get("module")]
    if paths and sole_layer_list(paths) is None:
        stages = pipeline_stages(placement, "deepspeed")
        per_stage, depth = modules_per_stage(placement, stages, "deepspeed")
        counts = [len(mods) for mods in per_stage]
        return {"num_stages": len(counts), "parts": [sum(counts[:k]) for k in range(len(counts) + 1)],
                "layers": [m for mods in per_stage for m in mods], "layers_per_stage": counts, "layer_list": None,
                "depth": depth, "tied_modules": tied_modules(placement, stages)}
    ls = layer_stages(placement, "deepspeed")
    counts = list(ls.counts)
    counts[0] += ls.embedding
    counts[-1] += ls.head
    parts = [0]
    for c in counts:
        parts.append(parts[-1] + c)
    entries = ["embedding"] * ls.embedding + [layer_name(ls.prefix, i) for i in range(ls.layers)] + ["head"] * ls.head
    return {"num_stages": len(counts), "parts": parts, "layers": entries, "layers_per_stage": list(ls.counts),
            "layer_list": ls.prefix, "tied_modules": tied_modules(placement, pipeline_stages(placement, "deepspeed"))}
