"""Operator-level GPT-3 graphs at MOIRAI's scale (Zhang et al., Table IV), on the GPUs of Table III.

MOIRAI places GPT-3 as the operator graph PyTorch traces: layer norms, attention heads and GELU
written out in their elementary kernels. :func:`gpt3` builds that graph for one inference of a
``seq_len``-token sequence (MOIRAI: 2048 tokens): per pre-norm decoder layer

* each layer norm as 9 kernels: ``mean, sub, pow, mean (variance), add (eps), sqrt, div,
  mul (gamma), add (beta)``;
* attention: ``qkv`` matmul and its bias add, three slices and three views (q, k, v split into
  heads), and per head ``q, k, v`` slices, a transpose of ``k``, the ``scores`` matmul, ``div``
  by ``sqrt(d)``, the causal-mask ``where``, ``softmax``, ``dropout`` and the ``context``
  matmul (10 kernels); a ``concat`` of the heads, the projection matmul, its bias add and
  the residual add;
* the feed-forward net: matmul, bias add, GELU's tanh approximation as 8 elementwise kernels
  (``pow, mul, add, mul, tanh, add, mul, mul``), matmul, bias add and the residual add;

that is ``43 + 10 * heads`` kernels (203 for GPT-3 330M's 16 heads: 24 layers give 4,872, the
count in MOIRAI's Table IV), plus the token and position embeddings, their add and dropout,
the final layer norm and the LM head (14 more). Slices, views and inference dropout are free
(zero time); every other kernel's time on each GPU model of :data:`~.gpus.GPU_ROOFLINES` is
its roofline, so the same graph runs on both Table III clusters. Memory (MOIRAI eq. 5) is the
kernels' weights: in inference a tensor is freed once its consumers ran.
"""
from __future__ import annotations

import math

from ..cluster import Cluster
from ..errors import SpecError
from ..graph import Graph, Op
from ..workload import Workload
from .build import check_positive
from .costs import BYTES_PER_ELEMENT, SIGNIFICANT_DIGITS, Cost, concat, elementwise, embedding, matmul, softmax
from .gpus import GPU_ROOFLINES, moirai_cluster

GPT3_SIZES: dict[str, dict[str, int]] = {
    "330M": {"layers": 24, "hidden": 1024, "heads": 16},
    "1.3B": {"layers": 32, "hidden": 2048, "heads": 32},
    "2.7B": {"layers": 32, "hidden": 2560, "heads": 32},
    "13B": {"layers": 40, "hidden": 5120, "heads": 40},
}
"""MOIRAI Table IV's GPT-3 configurations (layers, hidden size, heads)."""


def _reduce(rows: int, width: int) -> Cost:
    """A mean over the last axis: ``rows * width`` FLOPs, the input read and one value per row written."""
    e = BYTES_PER_ELEMENT
    return Cost(float(rows * width), e * (rows * width + rows), e * rows)


def _view(elems: int) -> Cost:
    """A slice, view or inference dropout: no kernel runs, the tensor is the input's."""
    return Cost(0.0, 0.0, BYTES_PER_ELEMENT * elems)


class _Graph:
    """Ops (work per GPU model by roofline) and edges in creation order."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.edges: list[tuple[str, str]] = []

    def add(self, name: str, cost: Cost, kind: str, *inputs: str) -> str:
        work = {r.kind: float(f"{r.time_ms(cost.flops, cost.bytes_moved):.{SIGNIFICANT_DIGITS}g}")
                for r in GPU_ROOFLINES.values()}
        self.ops.append(Op(name=name, work=work, param_bytes=cost.param_bytes, out_bytes=cost.out_bytes,
                           attrs={"type": kind}))
        self.edges += [(u, name) for u in inputs]
        return name

    def layernorm(self, p: str, x: str, rows: int, width: int) -> str:
        n = rows * width
        mean = self.add(f"{p}.mean", _reduce(rows, width), "reducemean", x)
        sub = self.add(f"{p}.sub", elementwise(n, inputs=2), "sub", x, mean)
        sq = self.add(f"{p}.pow", elementwise(n), "pow", sub)
        var = self.add(f"{p}.var", _reduce(rows, width), "reducemean", sq)
        eps = self.add(f"{p}.eps", elementwise(rows), "add", var)
        root = self.add(f"{p}.sqrt", elementwise(rows), "sqrt", eps)
        div = self.add(f"{p}.div", elementwise(n, inputs=2), "div", sub, root)
        mul = self.add(f"{p}.mul", elementwise(n, params=width), "mul", div)
        return self.add(f"{p}.add", elementwise(n, params=width), "add", mul)


def _attention(g: _Graph, p: str, x: str, b: int, s: int, h: int, heads: int) -> str:
    t, d = b * s, h // heads
    qkv = g.add(f"{p}.qkv", matmul(t, h, 3 * h), "matmul", g.layernorm(f"{p}.ln", x, t, h))
    qkv = g.add(f"{p}.qkv_bias", elementwise(3 * t * h), "add", qkv)
    split = {c: g.add(f"{p}.view_{c}", _view(t * h), "view", g.add(f"{p}.split_{c}", _view(t * h), "slice", qkv))
             for c in "qkv"}
    ctx = []
    for i in range(heads):
        q, k, v = (g.add(f"{p}.h{i}.{c}", _view(t * d), "slice", split[c]) for c in "qkv")
        kt = g.add(f"{p}.h{i}.kT", elementwise(t * d, 0.0), "transpose", k)
        scores = g.add(f"{p}.h{i}.scores", matmul(s, d, s, batch=b, weight=False), "matmul", q, kt)
        scaled = g.add(f"{p}.h{i}.scale", elementwise(b * s * s), "div", scores)
        masked = g.add(f"{p}.h{i}.mask", elementwise(b * s * s, inputs=2), "where", scaled)
        probs = g.add(f"{p}.h{i}.dropout", _view(b * s * s), "dropout",
                      g.add(f"{p}.h{i}.softmax", softmax(b * s * s), "softmax", masked))
        ctx.append(g.add(f"{p}.h{i}.context", matmul(s, s, d, batch=b, weight=False), "matmul", probs, v))
    out = g.add(f"{p}.proj", matmul(t, h, h), "matmul", g.add(f"{p}.concat", concat(t * h), "concat", *ctx))
    out = g.add(f"{p}.proj_bias", elementwise(t * h), "add", out)
    return g.add(f"{p}.residual", elementwise(t * h, inputs=2), "add", out, x)


def _ffn(g: _Graph, p: str, x: str, t: int, h: int) -> str:
    n = 4 * t * h
    a = g.add(f"{p}.bias1", elementwise(n), "add", g.add(f"{p}.fc1", matmul(t, h, 4 * h), "matmul",
                                                          g.layernorm(f"{p}.ln", x, t, h)))
    cube = g.add(f"{p}.gelu.mul1", elementwise(n), "mul", g.add(f"{p}.gelu.pow", elementwise(n, 2.0), "pow", a))
    inner = g.add(f"{p}.gelu.mul2", elementwise(n), "mul", g.add(f"{p}.gelu.add1", elementwise(n, inputs=2), "add",
                                                                 a, cube))
    one = g.add(f"{p}.gelu.add2", elementwise(n), "add", g.add(f"{p}.gelu.tanh", elementwise(n, 4.0), "tanh", inner))
    gelu = g.add(f"{p}.gelu.mul4", elementwise(n), "mul", g.add(f"{p}.gelu.mul3", elementwise(n, inputs=2), "mul",
                                                                a, one))
    out = g.add(f"{p}.bias2", elementwise(t * h), "add", g.add(f"{p}.fc2", matmul(t, 4 * h, h), "matmul", gelu))
    return g.add(f"{p}.residual", elementwise(t * h, inputs=2), "add", out, x)


def gpt3(size: str | None = "330M", *, layers: int | None = None, hidden: int | None = None,
         heads: int | None = None, seq_len: int = 2048, batch: int = 1, vocab: int = 50257,
         cluster: str | Cluster = "inter-server", name: str | None = None) -> Workload:
    """GPT-3 ``size`` (MOIRAI Table IV) as an operator graph (module docstring) on a Table III cluster.

    ``layers``, ``hidden`` and ``heads`` override the size's; ``cluster`` is a Table III
    scenario (:func:`~.gpus.moirai_cluster`) or a cluster whose device kinds are GPU models.

    >>> w = gpt3(layers=2, seq_len=128)
    >>> w.graph.n, w.cluster.names
    (420, ('A', 'B', 'C', 'D'))
    """
    if size is not None and size not in GPT3_SIZES:
        raise SpecError(f"gpt3: unknown size {size!r}; choose from {sorted(GPT3_SIZES)} or give layers/hidden/heads")
    base = dict(GPT3_SIZES.get(size or "", {}))
    base.update({k: v for k, v in {"layers": layers, "hidden": hidden, "heads": heads}.items() if v is not None})
    missing = sorted({"layers", "hidden", "heads"} - set(base))
    if missing:
        raise SpecError(f"gpt3: give a size or {', '.join(missing)}")
    L, h, a = base["layers"], base["hidden"], base["heads"]
    check_positive("gpt3", layers=L, hidden=h, heads=a, seq_len=seq_len, batch=batch, vocab=vocab)
    if h % a:
        raise SpecError(f"gpt3: hidden={h} must be a multiple of heads={a}")
    cluster = moirai_cluster(cluster) if isinstance(cluster, str) else cluster
    t = batch * seq_len
    g = _Graph()
    tokens = g.add("wte", embedding(t, vocab, h), "embedding")
    position = g.add("wpe", embedding(t, seq_len, h), "embedding")
    x = g.add("embed.drop", _view(t * h), "dropout", g.add("embed.add", elementwise(t * h, inputs=2), "add",
                                                             tokens, position))
    for i in range(L):
        x = _ffn(g, f"L{i:02d}.ffn", _attention(g, f"L{i:02d}.attn", x, batch, seq_len, h, a), t, h)
    g.add("lm_head", matmul(t, h, vocab), "matmul", g.layernorm("ln_f", x, t, h))
    label = size if (layers, hidden, heads) == (None, None, None) else f"{L}x{h}x{a}"
    params = {"layers": L, "hidden": h, "heads": a, "seq_len": seq_len, "batch": batch, "vocab": vocab}
    meta = {"generator": "placement_dsl.zoo.gpt3", "params": params, "training": False, "objective": "makespan",
            "parameters": sum(op.param_bytes for op in g.ops) / BYTES_PER_ELEMENT,
            "units": {"time": "ms", "size": "bytes", "bandwidth": "bytes/ms"}}
    graph = Graph(g.ops, g.edges, name=name or f"gpt3-{label}-ops")
    if not all(math.isfinite(graph.ops[0].time_on(d.kind)) for d in cluster.devices):
        raise SpecError(f"gpt3: the cluster's device kinds {sorted({d.kind for d in cluster.devices})} are not GPU "
                        f"models; choose from {sorted(GPU_ROOFLINES)}")
    return Workload(graph, cluster, "native", meta)
