"""A zoo of computation graphs generated from analytic cost models.

Every generator counts the floating-point operations (FLOPs), the bytes an op moves to and
from device memory and the bytes of its weights and output tensor, and turns them into a
running time on each device kind with a roofline (Williams et al.)::

    time_ms(op, kind) = 1e3 * max(flops / peak_flops[kind], bytes_moved / mem_bandwidth[kind])

so that every op has work for both the ``"accelerator"`` and the ``"cpu"`` kind (Tarnawski
et al. §3). Units: times in ms, sizes in bytes, bandwidth in bytes per ms. Weights and
activations are ``BYTES_PER_ELEMENT``-byte floats.

Generators: :func:`transformer` (BERT/GPT-style stacks), :func:`gpt3` (MOIRAI's operator-level
GPT-3 on the GPUs of :func:`moirai_cluster`, MOIRAI Table III; not in :func:`names`, whose
models run on the accelerator/CPU kinds), :func:`resnet` (bottleneck CNNs),
:func:`inception` (branching CNNs merging by concat), :func:`gnmt` (LSTM encoder/decoder with
attention) and :func:`regal` (random DAGs following Archer et al., App. C.2). With
``training=True`` each forward op ``v`` gets a backward op ``v.grad`` (Tarnawski et al. §5.3,
App. B; see :func:`with_backward`). :func:`names` and :func:`get` give named configurations.

Modules: :mod:`.costs` (roofline and kernel formulas), :mod:`.transformer`, :mod:`.cnn` (ResNet,
Inception), :mod:`.rnn` (GNMT), :mod:`.regal`, :mod:`.training` (backward pass) and :mod:`.build`
(the builder and checks they share); this package holds the registry.

Examples
--------
>>> w = get("transformer-small")
>>> w.graph.n, sorted(w.graph.kinds)
(50, ['accelerator', 'cpu'])
>>> get("transformer-small-train").graph.n
100
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..cluster import ACCELERATOR
from ..errors import SpecError
from ..workload import Workload
from .build import default_cluster
from .cnn import INCEPTION_V3_MODULES, RESNET_STAGES, inception, resnet
from .costs import (
    ACCELERATOR_MEMORY,
    ACCELERATOR_ROOFLINE,
    BYTES_PER_ELEMENT,
    CPU_ROOFLINE,
    PCIE_BANDWIDTH,
    ROOFLINES,
    SIGNIFICANT_DIGITS,
    Cost,
    Roofline,
    concat,
    conv,
    conv_out,
    elementwise,
    embedding,
    layernorm,
    lstm,
    matmul,
    op_from_costs,
    pool,
    softmax,
)
from .gpt3 import GPT3_SIZES, gpt3
from .gpus import GPU_ROOFLINES, TABLE_III, moirai_cluster
from .regal import REGAL_FRACTION_STD, REGAL_MODELS, REGAL_TENSOR_MEAN, REGAL_TENSOR_STD, regal
from .rnn import gnmt
from .training import with_backward
from .transformer import transformer

__all__ = [
    "ACCELERATOR_MEMORY", "ACCELERATOR_ROOFLINE", "BYTES_PER_ELEMENT", "CPU_ROOFLINE", "GPT3_SIZES", "GPU_ROOFLINES",
    "INCEPTION_V3_MODULES", "PCIE_BANDWIDTH", "REGAL_FRACTION_STD", "REGAL_MODELS", "REGAL_TENSOR_MEAN", "REGAL_TENSOR_STD",
    "RESNET_STAGES", "ROOFLINES", "SIGNIFICANT_DIGITS", "TABLE_III", "TRAIN_SUFFIX", "Cost", "Roofline", "concat",
    "conv", "conv_out", "default_cluster", "elementwise", "embedding", "get", "gnmt", "gpt3", "inception", "layernorm",
    "lstm", "matmul", "moirai_cluster", "names", "op_from_costs", "pool", "regal", "resnet", "softmax", "total_work",
    "transformer", "with_backward",
]


_REGISTRY: dict[str, tuple[Callable[..., Workload], dict[str, Any]]] = {
    "transformer-small": (transformer, {"layers": 4, "hidden": 512, "heads": 8, "seq_len": 128, "batch": 8, "vocab": 8000,
                                            "granularity": "operator", "cluster": default_cluster(3, 1)}),
    "bert-base-layers": (transformer, {"layers": 12, "hidden": 768, "heads": 12, "seq_len": 128, "batch": 32}),
    "bert-large-layers": (transformer, {"layers": 24, "hidden": 1024, "heads": 16, "seq_len": 512, "batch": 8}),
    "bert-large-ops": (transformer, {"layers": 24, "hidden": 1024, "heads": 16, "seq_len": 512, "batch": 8,
                                         "granularity": "operator"}),
    "gpt2-medium-layers": (transformer, {"layers": 24, "hidden": 1024, "heads": 16, "seq_len": 1024, "batch": 8, "vocab": 50257}),
    "resnet50": (resnet, {"depth": 50}),
    "resnet101": (resnet, {"depth": 101}),
    "inception-v3-ish": (inception, {}),
    "gnmt-ish": (gnmt, {}),
}
_REGAL_SEEDS = tuple(range(6))  # covers all three base models
TRAIN_SUFFIX = "-train"


def names() -> list[str]:
    """Names of the registered configurations: each model, its ``-train`` variant, and ``regal-<seed>``.

    :func:`get` also accepts ``regal-<seed>`` for any seed and ``-train`` after any name.
    """
    models = list(_REGISTRY)
    return models + [m + TRAIN_SUFFIX for m in models] + [f"regal-{s}" for s in _REGAL_SEEDS]


def get(name: str) -> Workload:
    """Build the named configuration (see :func:`names`); deterministic."""
    base, training = (name[: -len(TRAIN_SUFFIX)], True) if name.endswith(TRAIN_SUFFIX) else (name, False)
    if base in _REGISTRY:
        generator, kwargs = _REGISTRY[base]
        return generator(**kwargs, training=training, name=name)
    if base.startswith("regal-") and base[len("regal-"):].isdigit():
        return regal(int(base[len("regal-"):]), training=training, name=name)
    raise SpecError(f"zoo: unknown model {name!r}; choose from {names()} or 'regal-<seed>'")


def total_work(workload: Workload, kind: str = ACCELERATOR) -> float:
    """Sum of the ops' running times on ``kind`` (``math.inf`` if some op cannot run there)."""
    work = workload.graph.work(kind)
    return float(work.sum()) if np.isfinite(work).all() else math.inf
