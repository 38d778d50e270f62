"""vLLM (>= 0.6) ``VLLM_PP_LAYER_PARTITION``: the decoder layers of each pipeline rank, comma-separated.

The counts sum to the model's number of hidden layers; vLLM keeps the embedding on the first
rank and the final norm and LM head on the last, so the plan must too.
"""
from __future__ import annotations

from typing import Any

from ..placement import Placement
from .layers import layer_stages


def vllm(placement: Placement) -> dict[str, Any]:
    """The ``VLLM_PP_LAYER_PARTITION`` value and ``--pipeline-parallel-size`` of ``placement``."""
    ls = layer_stages(placement, "vllm", transformer=True)
    value = ",".join(str(c) for c in ls.counts)
    return {"VLLM_PP_LAYER_PARTITION": value, "pipeline_parallel_size": len(ls.counts), "num_layers": ls.layers,
            "layer_list": ls.prefix, "env": f"VLLM_PP_LAYER_PARTITION={value}"}
