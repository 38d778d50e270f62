"""DeepSpeed (>= 0.14) ``PipelineModule``: each stage's layers as the ``parts`` boundaries.

``PipelineModule(layers=..., num_stages=P)`` partitions its layer list into ``parts``: stage
``k`` builds layers ``parts[k]`` to ``parts[k+1] - 1``. The layer list here is the embedding
(one entry, when the graph has one), the repeated layers, then the head (one entry), so
``parts = [0, a, b, ..., n]`` over ``n`` entries; a subclass or a custom ``partition_method``
sets ``self.parts`` to it. The repeated layers alone are ``layers_per_stage``.
"""
from __future__ import annotations

from typing import Any

from ..placement import Placement
from .layers import layer_name, layer_stages


def deepspeed(placement: Placement) -> dict[str, Any]:
    """``parts`` over the layer list ``[embedding] + layers + [head]`` and the layers per stage."""
    ls = layer_stages(placement, "deepspeed")
    counts = list(ls.counts)
    counts[0] += ls.embedding
    counts[-1] += ls.head
    parts = [0]
    for c in counts:
        parts.append(parts[-1] + c)
    entries = ["embedding"] * ls.embedding + [layer_name(ls.prefix, i) for i in range(ls.layers)] + ["head"] * ls.head
    return {"num_stages": len(counts), "parts": parts, "layers": entries, "layers_per_stage": list(ls.counts),
            "layer_list": ls.prefix}
