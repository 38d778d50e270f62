"""A zoo of computation graphs generated from analytic cost models.

Every generator counts the floating-point operations (FLOPs), the bytes an op moves to and
from device memory and the bytes of its weights and output tensor, and turns them into a
running time on each device kind with a roofline (Williams et al.)::

    time_ms(op, kind) = 1e3 * max(flops / peak_flops[kind], bytes_moved / mem_bandwidth[kind])

so that every op has work for both the ``"accelerator"`` and the ``"cpu"`` kind (Tarnawski
et al. §3). Units: times in ms, sizes in bytes, bandwidth in bytes per ms. Weights and
activations are ``BYTES_PER_ELEMENT``-byte floats.

Generators: :func:`transformer` (BERT/GPT-style stacks), :func:`resnet` (bottleneck CNNs),
:func:`inception` (branching CNNs merging by concat), :func:`gnmt` (LSTM encoder/decoder with
attention) and :func:`regal` (random DAGs following Archer et al., App. C.2). With
``training=True`` each forward op ``v`` gets a backward op ``v.grad`` (Tarnawski et al. §5.3,
App. B; see :func:`with_backward`). :func:`names` and :func:`get` give named configurations.

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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cluster import ACCELERATOR, CPU, Cluster
from .errors import SpecError
from .graph import Graph, Op
from .io.workload import Workload

BYTES_PER_ELEMENT = 4
"""fp32 weights and activations."""
PCIE_BANDWIDTH = 16e9 / 1e3
"""Accelerator <-> host link: 16 GB/s (PCIe 3.0 x16), in bytes per ms."""
ACCELERATOR_MEMORY = 16e9
"""Default accelerator memory: 16 GB."""
SIGNIFICANT_DIGITS = 6
"""Times are rounded to this many significant digits (compact, platform-stable files)."""


@dataclass(frozen=True)
class Roofline:
    """A device kind's roofline: ``time_ms = 1e3 * max(flops / peak_flops, bytes / mem_bandwidth)``.

    Parameters
    ----------
    kind
        Device kind the times are for.
    peak_flops
        Peak arithmetic throughput, FLOP/s.
    mem_bandwidth
        Device memory bandwidth, bytes/s.
    """

    kind: str
    peak_flops: float
    mem_bandwidth: float

    def time_ms(self, flops: float, bytes_moved: float) -> float:
        """Running time in ms of a kernel doing ``flops`` and moving ``bytes_moved``."""
        return 1e3 * max(flops / self.peak_flops, bytes_moved / self.mem_bandwidth)


ACCELERATOR_ROOFLINE = Roofline(ACCELERATOR, peak_flops=15.7e12, mem_bandwidth=900e9)
"""A V100-class accelerator: 15.7 TFLOP/s fp32, 900 GB/s HBM2."""
CPU_ROOFLINE = Roofline(CPU, peak_flops=1.0e12, mem_bandwidth=100e9)
"""A two-socket server CPU: 1 TFLOP/s fp32 (AVX-512), 100 GB/s DRAM."""
ROOFLINES = (ACCELERATOR_ROOFLINE, CPU_ROOFLINE)


# ============================================================================ cost pieces
@dataclass(frozen=True)
class Cost:
    """Analytic cost of one kernel: ``flops``, ``bytes_moved`` (reads + writes), weight and output bytes."""

    flops: float
    bytes_moved: float
    out_bytes: float
    param_bytes: float = 0.0


def matmul(rows: int, inner: int, cols: int, batch: int = 1, weight: bool = True) -> Cost:
    """``batch`` products ``(rows x inner) @ (inner x cols)``: ``2 * batch * rows * inner * cols`` FLOPs.

    With ``weight`` the right factor is a shared weight matrix plus a bias of ``cols``
    (``param_bytes = e * (inner * cols + cols)``); otherwise it is a per-batch activation.
    Bytes moved = both operands + the result.
    """
    e = BYTES_PER_ELEMENT
    params = e * (inner * cols + cols) if weight else 0.0
    right = params if weight else e * batch * inner * cols
    out = e * batch * rows * cols
    return Cost(2.0 * batch * rows * inner * cols, e * batch * rows * inner + right + out, out, params)


def elementwise(elems: int, flops_per_elem: float = 1.0, inputs: int = 1, params: int = 0) -> Cost:
    """An elementwise kernel over ``elems`` outputs: ``flops_per_elem * elems`` FLOPs,
    ``e * elems * (inputs + 1) + e * params`` bytes moved."""
    e = BYTES_PER_ELEMENT
    return Cost(flops_per_elem * elems, e * (elems * (inputs + 1) + params), e * elems, e * params)


def layernorm(elems: int, features: int) -> Cost:
    """Layer normalization: ~8 FLOPs per element (mean, variance, scale, shift), ``2 * features`` weights."""
    return elementwise(elems, 8.0, params=2 * features)


def softmax(elems: int) -> Cost:
    """Softmax: ~5 FLOPs per element (max, subtract, exp, sum, divide)."""
    return elementwise(elems, 5.0)


def embedding(tokens: int, vocab: int, hidden: int) -> Cost:
    """Token lookup plus position add: ``tokens * hidden`` FLOPs, ``e * vocab * hidden`` weight bytes."""
    e = BYTES_PER_ELEMENT
    out = e * tokens * hidden
    return Cost(float(tokens * hidden), 2 * out, out, e * vocab * hidden)


def conv_out(size: int, kernel: int, stride: int, same: bool) -> int:
    """Output side of a convolution or pooling window: ``ceil(size / stride)`` with same padding,
    ``floor((size - kernel) / stride) + 1`` without."""
    return -(-size // stride) if same else (size - kernel) // stride + 1


def conv(batch: int, size: int, c_in: int, c_out: int, kh: int, kw: int, stride: int = 1,
         same: bool = True) -> tuple[Cost, int]:
    """A 2-D convolution with batch norm and ReLU folded in, on a square ``size x size`` input.

    FLOPs ``= 2 * B * H_o * W_o * C_out * C_in * kh * kw + 3 * B * H_o * W_o * C_out``; weights
    ``C_out * C_in * kh * kw + 2 * C_out`` (the batch-norm scale and shift). Returns the cost and
    the output side (``kh`` sets it; factorized ``1 x 7`` / ``7 x 1`` kernels use same padding).
    """
    e = BYTES_PER_ELEMENT
    out_side = conv_out(size, max(kh, kw), stride, same)
    out_elems = batch * out_side * out_side * c_out
    params = e * (c_out * c_in * kh * kw + 2 * c_out)
    flops = 2.0 * out_elems * c_in * kh * kw + 3.0 * out_elems
    moved = e * batch * size * size * c_in + params + e * out_elems
    return Cost(flops, moved, e * out_elems, params), out_side


def pool(batch: int, size: int, channels: int, kernel: int, stride: int, same: bool = False) -> tuple[Cost, int]:
    """Max/average pooling: ``kernel^2`` FLOPs per output element; returns the cost and the output side."""
    out_side = conv_out(size, kernel, stride, same)
    out_elems = batch * out_side * out_side * channels
    cost = elementwise(out_elems, float(kernel * kernel))
    e = BYTES_PER_ELEMENT
    return Cost(cost.flops, e * (batch * size * size * channels + out_elems), cost.out_bytes), out_side


def concat(out_elems: int) -> Cost:
    """Channel concatenation: no FLOPs, every element read and written once."""
    e = BYTES_PER_ELEMENT
    return Cost(0.0, 2.0 * e * out_elems, e * out_elems)


def lstm(batch: int, steps: int, in_size: int, hidden: int, extra_inputs: int = 0) -> Cost:
    """One LSTM layer over ``steps`` time steps.

    Per step the four gates cost ``2 * B * (in + H) * 4H`` FLOPs plus ~10 elementwise FLOPs per
    hidden unit, and the step streams the weights ``4H * (in + H) + 4H`` once (the recurrence
    forbids batching steps). ``extra_inputs`` counts residual adds on the input
    (``B * in`` FLOPs each per step).
    """
    e = BYTES_PER_ELEMENT
    weights = 4 * hidden * (in_size + hidden) + 4 * hidden
    step_flops = 2.0 * batch * (in_size + hidden) * 4 * hidden + 10.0 * batch * hidden
    step_flops += extra_inputs * batch * in_size
    out = e * batch * steps * hidden
    moved = steps * e * (weights + batch * (in_size * (1 + extra_inputs) + 2 * hidden))
    return Cost(steps * step_flops, moved, out, e * weights)


# ============================================================================ building graphs
def _round(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def op_from_costs(name: str, pieces: Sequence[Cost], **attrs: Any) -> Op:
    """An op running ``pieces`` back to back.

    ``work[kind] = sum_p roofline_kind(p)``; ``param_bytes = sum_p param_bytes(p)``;
    ``out_bytes`` = the last piece's output; ``activation_bytes = sum_p out_bytes(p)`` (every
    intermediate tensor is kept for the backward pass).
    """
    work = {r.kind: _round(sum(r.time_ms(p.flops, p.bytes_moved) for p in pieces)) for r in ROOFLINES}
    return Op(name=name, work=work, param_bytes=sum(p.param_bytes for p in pieces),
              out_bytes=pieces[-1].out_bytes, activation_bytes=sum(p.out_bytes for p in pieces), attrs=attrs)


class _Builder:
    """Collects ops and edges in creation order (which is a topological order)."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.edges: list[tuple[str, str]] = []

    def add(self, name: str, pieces: Cost | Sequence[Cost], inputs: Iterable[str] = (), kind: str = "") -> str:
        pieces = [pieces] if isinstance(pieces, Cost) else list(pieces)
        self.ops.append(op_from_costs(name, pieces, **({"type": kind} if kind else {})))
        self.edges.extend((u, name) for u in inputs if u)  # "" = no producer (a graph input)
        return name


def with_backward(ops: Sequence[Op], edges: Sequence[tuple[str, str]]) -> tuple[list[Op], list[tuple[str, str]]]:
    """Append the backward pass of a forward graph (Tarnawski et al. §5.3, App. B).

    Each forward op ``v`` gets a backward op ``v.grad`` with ``work = 2 * work(v)`` (the
    gradients with respect to inputs and to weights each cost about one forward pass),
    ``param_bytes = param_bytes(v)`` (the weight gradient), ``out_bytes = sum_{u -> v}
    out_bytes(u)`` (the gradients of ``v``'s inputs) and ``activation_bytes = out_bytes``.
    Edges: every forward edge ``u -> v`` is mirrored as ``v.grad -> u.grad``, and ``v -> v.grad``
    carries the stashed activation. ``v`` and ``v.grad`` share the colocation group of ``v``
    (its ``group`` if set, else its name).
    """
    by_name = {op.name: op for op in ops}
    preds: dict[str, list[str]] = {op.name: [] for op in ops}
    for u, v in edges:
        preds[v].append(u)
    forward = [op.model_copy(update={"group": op.group or op.name}) for op in ops]
    backward = []
    for op in reversed(forward):
        grad_bytes = sum(by_name[u].out_bytes for u in preds[op.name])
        backward.append(Op(name=f"{op.name}.grad", work={k: _round(2.0 * t) for k, t in op.work.items()},
                           param_bytes=op.param_bytes, out_bytes=grad_bytes, activation_bytes=grad_bytes,
                           backward=True, group=op.group, attrs=op.attrs))
    grad_edges = [(f"{v}.grad", f"{u}.grad") for u, v in edges] + [(op.name, f"{op.name}.grad") for op in ops]
    return forward + backward, list(edges) + grad_edges


def default_cluster(accelerators: int = 4, cpus: int = 1, memory: float = ACCELERATOR_MEMORY) -> Cluster:
    """``accelerators`` devices of ``memory`` bytes and ``cpus`` CPUs on a PCIe-like link (bytes per ms)."""
    return Cluster.accelerators(accelerators, memory=memory, cpus=cpus, bandwidth=PCIE_BANDWIDTH)


def _workload(name: str, builder: _Builder, training: bool, cluster: Cluster, generator: str,
              params: dict[str, Any]) -> Workload:
    ops, edges = (with_backward(builder.ops, builder.edges) if training else (builder.ops, builder.edges))
    meta = {"generator": f"placement_dsl.zoo.{generator}", "params": params, "training": training,
            "units": {"time": "ms", "size": "bytes", "bandwidth": "bytes/ms"}}
    return Workload(Graph(ops, edges, name=name), cluster, "native", meta)


# ============================================================================ validation
def _positive(generator: str, **values: Any) -> None:
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise SpecError(f"{generator}: {key} must be an integer >= 1, got {value!r}")


def _choice(generator: str, key: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise SpecError(f"{generator}: {key} must be one of {list(allowed)}, got {value!r}")


# ============================================================================ transformer
def _attention_pieces(b: int, s: int, h: int, a: int) -> list[tuple[str, Cost, str]]:
    tokens = b * s
    return [
        ("ln1", layernorm(tokens * h, h), "layernorm"),
        ("qkv", matmul(tokens, h, 3 * h), "matmul"),
        ("scores", matmul(s, h // a, s, batch=b * a, weight=False), "batched_matmul"),
        ("softmax", softmax(b * a * s * s), "softmax"),
        ("context", matmul(s, s, h // a, batch=b * a, weight=False), "batched_matmul"),
        ("proj", matmul(tokens, h, h), "matmul"),
        ("add1", elementwise(tokens * h, inputs=2), "add"),
    ]


def _ffn_pieces(b: int, s: int, h: int) -> list[tuple[str, Cost, str]]:
    tokens = b * s
    return [
        ("ln2", layernorm(tokens * h, h), "layernorm"),
        ("ffn1", matmul(tokens, h, 4 * h), "matmul"),
        ("gelu", elementwise(tokens * 4 * h, 8.0), "gelu"),
        ("ffn2", matmul(tokens, 4 * h, h), "matmul"),
        ("add2", elementwise(tokens * h, inputs=2), "add"),
    ]


_LAYER_INPUTS = {  # operator-granularity wiring inside a block; "x" is the block input
    "ln1": ("x",), "qkv": ("ln1",), "scores": ("qkv",), "softmax": ("scores",), "context": ("softmax", "qkv"),
    "proj": ("context",), "add1": ("proj", "x"),
    "ln2": ("x",), "ffn1": ("ln2",), "gelu": ("ffn1",), "ffn2": ("gelu",), "add2": ("ffn2", "x"),
}


def _transformer_block(g: _Builder, prefix: str, pieces: list[tuple[str, Cost, str]], x: str,
                       granularity: str, kind: str) -> str:
    if granularity == "layer":
        return g.add(prefix, [c for _, c, _ in pieces], [x], kind)
    local = {"x": x}
    for piece, cost, piece_kind in pieces:
        local[piece] = g.add(f"{prefix}.{piece}", cost, [local[i] for i in _LAYER_INPUTS[piece]], piece_kind)
    return local[pieces[-1][0]]


def transformer(layers: int = 12, hidden: int = 768, heads: int = 12, seq_len: int = 128, batch: int = 32,
                vocab: int = 30522, granularity: str = "layer", training: bool = False,
                cluster: Cluster | None = None, name: str | None = None) -> Workload:
    """A BERT/GPT-style encoder stack: embedding, ``layers`` pre-norm blocks, LM head.

    A block is attention (``ln1 -> qkv (2*T*H*3H) -> scores (2*B*S^2*H) -> softmax -> context
    (2*B*S^2*H) -> proj (2*T*H^2) -> add1``, with ``T = B*S`` tokens) and a feed-forward net
    (``ln2 -> ffn1 (2*T*H*4H) -> gelu -> ffn2 (2*T*4H*H) -> add2``), with residual edges from the
    block input to the adds. ``granularity="layer"`` makes one op per block piece (``attn`` and
    ``ffn``: 2 per layer), ``"operator"`` one op per kernel (12 per layer). The head is
    ``2*T*H*V`` FLOPs.
    """
    _positive("transformer", layers=layers, hidden=hidden, heads=heads, seq_len=seq_len, batch=batch, vocab=vocab)
    _choice("transformer", "granularity", granularity, ("layer", "operator"))
    if hidden % heads:
        raise SpecError(f"transformer: hidden={hidden} must be a multiple of heads={heads}")
    params = dict(layers=layers, hidden=hidden, heads=heads, seq_len=seq_len, batch=batch, vocab=vocab,
                  granularity=granularity)
    g = _Builder()
    x = g.add("embed", embedding(batch * seq_len, vocab, hidden), kind="embedding")
    for i in range(layers):
        x = _transformer_block(g, f"L{i:02d}.attn", _attention_pieces(batch, seq_len, hidden, heads), x,
                               granularity, "attention")
        x = _transformer_block(g, f"L{i:02d}.ffn", _ffn_pieces(batch, seq_len, hidden), x, granularity, "ffn")
    g.add("head", [layernorm(batch * seq_len * hidden, hidden), matmul(batch * seq_len, hidden, vocab)], [x], "head")
    name = name or f"transformer-{layers}x{hidden}-{granularity}"
    return _workload(name, g, training, cluster or default_cluster(), "transformer", params)


# ============================================================================ resnet
RESNET_STAGES = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def _bottleneck(g: _Builder, prefix: str, x: str, batch: int, size: int, c_in: int, width: int,
                stride: int) -> tuple[str, int, int]:
    c_out = 4 * width
    a, s1 = conv(batch, size, c_in, width, 1, 1)
    b, s2 = conv(batch, s1, width, width, 3, 3, stride)
    c, _ = conv(batch, s2, width, c_out, 1, 1)
    h = g.add(f"{prefix}.conv1", a, [x], "conv")
    h = g.add(f"{prefix}.conv2", b, [h], "conv")
    h = g.add(f"{prefix}.conv3", c, [h], "conv")
    skip = x
    if stride != 1 or c_in != c_out:
        d, _ = conv(batch, size, c_in, c_out, 1, 1, stride)
        skip = g.add(f"{prefix}.down", d, [x], "conv")
    out = g.add(f"{prefix}.add", elementwise(batch * s2 * s2 * c_out, 2.0, inputs=2), [h, skip], "add")
    return out, s2, c_out


def resnet(depth: int = 50, batch: int = 32, image: int = 224, classes: int = 1000, training: bool = False,
           cluster: Cluster | None = None, name: str | None = None) -> Workload:
    """A ResNet with bottleneck blocks (He et al.): stem, four stages, average pool, classifier.

    Stem: ``7x7/2`` conv to 64 channels and a ``3x3/2`` max pool. Stage ``j`` has ``blocks[j]``
    bottlenecks of width ``64 * 2^j`` (``1x1 -> 3x3 -> 1x1`` to ``4 * width`` channels, the first
    with stride 2 from stage 2 on and a ``1x1`` projection on the skip), each ending in a residual
    ``add`` (with ReLU). ``depth`` selects the blocks: 50 ``(3,4,6,3)``, 101 ``(3,4,23,3)``,
    152 ``(3,8,36,3)``.
    """
    _positive("resnet", batch=batch, image=image, classes=classes)
    _choice("resnet", "depth", depth, list(RESNET_STAGES))
    g = _Builder()
    stem, size = conv(batch, image, 3, 64, 7, 7, 2)
    x = g.add("stem.conv", stem, kind="conv")
    mp, size = pool(batch, size, 64, 3, 2, same=True)
    x, channels = g.add("stem.pool", mp, [x], "pool"), 64
    for j, blocks in enumerate(RESNET_STAGES[depth]):
        for i in range(blocks):
            stride = 2 if (i == 0 and j > 0) else 1
            x, size, channels = _bottleneck(g, f"s{j + 1}.b{i}", x, batch, size, channels, 64 * 2**j, stride)
    avg, _ = pool(batch, size, channels, size, size)
    x = g.add("avgpool", avg, [x], "pool")
    g.add("fc", matmul(batch, channels, classes), [x], "matmul")
    params = dict(depth=depth, batch=batch, image=image, classes=classes)
    return _workload(name or f"resnet{depth}", g, training, cluster or default_cluster(), "resnet", params)


# ============================================================================ inception
# A branch is a list of layers; a layer is ("conv", c_out, kh, kw, stride, same) or ("pool", k, stride, same,
# avg) or a tuple of convs run in parallel on the branch so far (all of them feed the concat).
def _c(c_out: int, kh: int, kw: int | None = None, stride: int = 1, same: bool = True) -> tuple:
    return ("conv", c_out, kh, kh if kw is None else kw, stride, same)


_POOL_SAME = ("pool", 3, 1, True)
_POOL_DOWN = ("pool", 3, 2, False)


def _module_a(pool_features: int) -> list[list]:
    return [[_c(64, 1)], [_c(48, 1), _c(64, 5)], [_c(64, 1), _c(96, 3), _c(96, 3)], [_POOL_SAME, _c(pool_features, 1)]]


def _module_c(c7: int) -> list[list]:
    return [[_c(192, 1)], [_c(c7, 1), _c(c7, 1, 7), _c(192, 7, 1)],
            [_c(c7, 1), _c(c7, 7, 1), _c(c7, 1, 7), _c(c7, 7, 1), _c(192, 1, 7)], [_POOL_SAME, _c(192, 1)]]


def _module_e() -> list[list]:
    fork = (_c(384, 1, 3), _c(384, 3, 1))
    return [[_c(320, 1)], [_c(384, 1), fork], [_c(448, 1), _c(384, 3), fork], [_POOL_SAME, _c(192, 1)]]


INCEPTION_V3_MODULES = (
    [("a", _module_a(32)), ("a", _module_a(64)), ("a", _module_a(64)),
     ("b", [[_c(384, 3, stride=2, same=False)], [_c(64, 1), _c(96, 3), _c(96, 3, stride=2, same=False)],
            [_POOL_DOWN]]),
     ("c", _module_c(128)), ("c", _module_c(160)), ("c", _module_c(160)), ("c", _module_c(192)),
     ("d", [[_c(192, 1), _c(320, 3, stride=2, same=False)],
            [_c(192, 1), _c(192, 1, 7), _c(192, 7, 1), _c(192, 3, stride=2, same=False)], [_POOL_DOWN]]),
     ("e", _module_e()), ("e", _module_e())]
)
"""Inception-v3's modules (Szegedy et al. 2016, Fig. 5-7): 3 x A (35x35), B, 4 x C (17x17), D, 2 x E (8x8)."""


def _layer(g: _Builder, name: str, layer: tuple, x: str, batch: int, size: int, ch: int) -> tuple[str, int, int]:
    if layer[0] == "conv":
        _, c_out, kh, kw, stride, same = layer
        cost, out = conv(batch, size, ch, c_out, kh, kw, stride, same)
        return g.add(name, cost, [x], "conv"), out, c_out
    _, k, stride, same = layer
    cost, out = pool(batch, size, ch, k, stride, same)
    return g.add(name, cost, [x], "pool"), out, ch


def _branch(g: _Builder, prefix: str, layers: list, x: str, batch: int, size: int,
            ch: int) -> tuple[list[str], int, int]:
    for i, layer in enumerate(layers):
        if isinstance(layer[0], tuple):  # parallel fork ending the branch
            outs = [_layer(g, f"{prefix}.{i}{chr(97 + j)}", f, x, batch, size, ch) for j, f in enumerate(layer)]
            return [o[0] for o in outs], outs[0][1], sum(o[2] for o in outs)
        x, size, ch = _layer(g, f"{prefix}.{i}", layer, x, batch, size, ch)
    return [x], size, ch


def _inception_module(g: _Builder, prefix: str, branches: list, x: str, batch: int, size: int,
                      ch: int) -> tuple[str, int, int]:
    tails, channels = [], 0
    for j, layers in enumerate(branches):
        outs, out_size, out_ch = _branch(g, f"{prefix}.br{j}", layers, x, batch, size, ch)
        tails += outs
        channels += out_ch
    return g.add(f"{prefix}.concat", concat(batch * out_size * out_size * channels), tails, "concat"), out_size, channels


def inception(batch: int = 32, image: int = 299, classes: int = 1000, training: bool = False,
              cluster: Cluster | None = None, name: str | None = None) -> Workload:
    """An Inception-v3-style CNN: a conv stem, then modules of parallel branches merging by ``concat``.

    Stem (valid convolutions unless noted): ``3x3/2 -> 3x3 -> 3x3 same -> pool/2 -> 1x1 -> 3x3 ->
    pool/2`` (299 -> 35), then :data:`INCEPTION_V3_MODULES`, global average pool and classifier.
    Auxiliary heads are left out.
    """
    _positive("inception", batch=batch, image=image, classes=classes)
    if image < 75:
        raise SpecError(f"inception: image must be >= 75 pixels for the stem and reductions, got {image}")
    g = _Builder()
    stem = [_c(32, 3, stride=2, same=False), _c(32, 3, same=False), _c(64, 3), _POOL_DOWN, _c(80, 1),
            _c(192, 3, same=False), _POOL_DOWN]
    (x,), size, ch = _branch(g, "stem", stem, "", batch, image, 3)
    for i, (letter, branches) in enumerate(INCEPTION_V3_MODULES):
        x, size, ch = _inception_module(g, f"m{i}{letter}", branches, x, batch, size, ch)
    avg, _ = pool(batch, size, ch, size, size)
    x = g.add("avgpool", avg, [x], "pool")
    g.add("fc", matmul(batch, ch, classes), [x], "matmul")
    params = dict(batch=batch, image=image, classes=classes)
    return _workload(name or "inception-v3", g, training, cluster or default_cluster(), "inception", params)


# ============================================================================ gnmt
def _attention(batch: int, src: int, tgt: int, hidden: int) -> list[Cost]:
    return [matmul(batch * tgt, hidden, hidden), matmul(tgt, hidden, src, batch=batch, weight=False),
            softmax(batch * tgt * src), matmul(tgt, src, hidden, batch=batch, weight=False)]


def gnmt(enc_layers: int = 8, dec_layers: int = 8, hidden: int = 1024, src_len: int = 50, tgt_len: int = 50,
         batch: int = 128, vocab: int = 32000, training: bool = False, cluster: Cluster | None = None,
         name: str | None = None) -> Workload:
    """A GNMT-like LSTM encoder/decoder with attention (Wu et al. 2016), one op per layer.

    Encoder: embedding, a bidirectional first layer (two LSTM ops and a concat), then
    ``enc_layers - 1`` LSTM layers with residual inputs from the third layer on. Decoder:
    embedding, a first LSTM layer whose output queries an attention over the encoder output
    (query projection ``2*B*T*H^2``, scores and context ``2*B*T*S*H`` each, softmax), then
    ``dec_layers - 1`` LSTM layers fed the attention context, residual from the third layer on, and
    a projection to the vocabulary (``2*B*T*H*V``) with softmax.
    """
    _positive("gnmt", enc_layers=enc_layers, dec_layers=dec_layers, hidden=hidden, src_len=src_len,
              tgt_len=tgt_len, batch=batch, vocab=vocab)
    if enc_layers < 2:
        raise SpecError(f"gnmt: enc_layers must be >= 2 (bidirectional first layer + top), got {enc_layers}")
    h = hidden
    g = _Builder()
    emb = g.add("enc.embed", embedding(batch * src_len, vocab, h), kind="embedding")
    fw = g.add("enc.L0.fw", lstm(batch, src_len, h, h // 2), [emb], "lstm")
    bw = g.add("enc.L0.bw", lstm(batch, src_len, h, h // 2), [emb], "lstm")
    outs = [g.add("enc.L0.concat", concat(batch * src_len * h), [fw, bw],
                  "concat")]
    for i in range(1, enc_layers):
        res = outs[-2:] if i >= 2 else outs[-1:]
        outs.append(g.add(f"enc.L{i}", lstm(batch, src_len, h, h, len(res) - 1), res, "lstm"))
    enc = outs[-1]
    emb = g.add("dec.embed", embedding(batch * tgt_len, vocab, h), kind="embedding")
    outs = [g.add("dec.L0", lstm(batch, tgt_len, h, h), [emb], "lstm")]
    att = g.add("dec.attention", _attention(batch, src_len, tgt_len, h), [outs[0], enc], "attention")
    for i in range(1, dec_layers):
        res = outs[-2:] if i >= 2 else outs[-1:]
        outs.append(g.add(f"dec.L{i}", lstm(batch, tgt_len, 2 * h, h, len(res) - 1), res + [att], "lstm"))
    g.add("dec.project", [matmul(batch * tgt_len, h, vocab), softmax(batch * tgt_len * vocab)], [outs[-1]], "head")
    params = dict(enc_layers=enc_layers, dec_layers=dec_layers, hidden=hidden, src_len=src_len, tgt_len=tgt_len,
                  batch=batch, vocab=vocab)
    return _workload(name or "gnmt", g, training, cluster or default_cluster(), "gnmt", params)


# ============================================================================ regal
REGAL_MODELS = ("erdos_renyi", "barabasi_albert", "watts_strogatz")
REGAL_TENSOR_MEAN, REGAL_TENSOR_STD, REGAL_FRACTION_STD = 50.0, 10.0, 0.1
"""Archer et al. App. C.2: tensor sizes ~ N(50, 10); node cost fraction r ~ N(0, 0.1)."""


def _erdos_renyi(rng: np.random.Generator, n: int) -> list[tuple[int, int]]:
    """G(n, p) with mean degree 4: ``p = 4 / (n - 1)``."""
    iu, ju = np.triu_indices(n, 1)
    keep = rng.random(len(iu)) < 4.0 / (n - 1)
    return list(zip(iu[keep].tolist(), ju[keep].tolist()))


def _barabasi_albert(rng: np.random.Generator, n: int, m: int = 2) -> list[tuple[int, int]]:
    """Preferential attachment: each new node links to ``m`` distinct nodes drawn by degree."""
    edges = [(0, 1)]
    ends = [0, 1]
    for v in range(2, n):
        targets: set[int] = set()
        while len(targets) < min(m, v):
            targets.add(int(ends[rng.integers(len(ends))]))
        for u in sorted(targets):
            edges.append((u, v))
            ends += [u, v]
    return edges


def _watts_strogatz(rng: np.random.Generator, n: int, k: int = 4, beta: float = 0.3) -> list[tuple[int, int]]:
    """A ring lattice with ``k`` neighbours, each edge rewired with probability ``beta``."""
    edges: set[tuple[int, int]] = set()
    for u in range(n):
        for d in range(1, k // 2 + 1):
            v = (u + d) % n
            if rng.random() < beta:
                v = int(rng.integers(n))
                while v == u or (min(u, v), max(u, v)) in edges:
                    v = int(rng.integers(n))
            edges.add((min(u, v), max(u, v)))
    return sorted(edges)


_REGAL_BASE: dict[str, Callable[[np.random.Generator, int], list[tuple[int, int]]]] = {
    "erdos_renyi": _erdos_renyi, "barabasi_albert": _barabasi_albert, "watts_strogatz": _watts_strogatz,
}


def _regal_sizes(seed: int, n: int | None, model: str | None) -> tuple[np.random.Generator, int, str]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 201)) if n is None else n
    model = REGAL_MODELS[int(rng.integers(len(REGAL_MODELS)))] if model is None else model
    return rng, n, model


def regal(seed: int = 0, n: int | None = None, model: str | None = None, stages: int = 4, training: bool = False,
          cluster: Cluster | None = None, name: str | None = None) -> Workload:
    """A REGAL-style random computation graph (Paliwal et al. 2020, as summarized by Archer et al. App. C.2).

    1. ``n ~ U{50..200}`` and a base model from :data:`REGAL_MODELS` (both drawn from ``seed``
       unless given); the undirected base graph is oriented by a random topological order.
    2. Every node has one output tensor of size ``s_v ~ N(50, 10)`` (clipped to >= 1).
    3. Node cost ``c_v = s_v + sum_{u -> v} s_u + |r_v| * sum_w s_w`` with ``r_v ~ N(0, 0.1)``
       (the magnitude of r: a cost cannot be negative).

    Costs are unitless: ``work["accelerator"] = c_v`` and ``work["cpu"] = c_v`` times the
    accelerator/CPU peak-FLOPs ratio; ``out_bytes = activation_bytes = s_v``. The default
    cluster is ``stages`` pipeline stages with unit bandwidth (Archer et al.'s MTPP setting, in
    which a tensor crossing a boundary costs its size). Paliwal et al.'s filter for graphs hard
    for peak-memory scheduling is not applied.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise SpecError(f"regal: seed must be an integer >= 0, got {seed!r}")
    if n is not None:
        _positive("regal", n=n)
        if n < 2:
            raise SpecError(f"regal: n must be >= 2, got {n}")
    if model is not None:
        _choice("regal", "model", model, REGAL_MODELS)
    _positive("regal", stages=stages)
    rng, n, model = _regal_sizes(int(seed), n, model)
    order = rng.permutation(n)  # order[v] = position of v in the random topological order
    pairs = [(u, v) if order[u] < order[v] else (v, u) for u, v in _REGAL_BASE[model](rng, n)]
    size = np.maximum(rng.normal(REGAL_TENSOR_MEAN, REGAL_TENSOR_STD, n), 1.0).round(3)
    frac = np.abs(rng.normal(0.0, REGAL_FRACTION_STD, n))
    cost = size + frac * size.sum()
    for u, v in pairs:
        cost[v] += size[u]
    ratio = ACCELERATOR_ROOFLINE.peak_flops / CPU_ROOFLINE.peak_flops
    ops = [Op(name=f"n{v:03d}", work={ACCELERATOR: _round(cost[v]), CPU: _round(cost[v] * ratio)},
              out_bytes=float(size[v]), activation_bytes=float(size[v])) for v in range(n)]
    edges = [(f"n{u:03d}", f"n{v:03d}") for u, v in pairs]
    g = _Builder()
    g.ops, g.edges = ops, edges
    params = dict(seed=int(seed), n=n, model=model)
    return _workload(name or f"regal-{seed}", g, training, cluster or Cluster.stages(stages), "regal", params)


# ============================================================================ registry
_REGISTRY: dict[str, tuple[Callable[..., Workload], dict[str, Any]]] = {
    "transformer-small": (transformer, dict(layers=4, hidden=512, heads=8, seq_len=128, batch=8, vocab=8000,
                                            granularity="operator", cluster=default_cluster(3, 1))),
    "bert-base-layers": (transformer, dict(layers=12, hidden=768, heads=12, seq_len=128, batch=32)),
    "bert-large-layers": (transformer, dict(layers=24, hidden=1024, heads=16, seq_len=512, batch=8)),
    "bert-large-ops": (transformer, dict(layers=24, hidden=1024, heads=16, seq_len=512, batch=8,
                                         granularity="operator")),
    "gpt2-medium-layers": (transformer, dict(layers=24, hidden=1024, heads=16, seq_len=1024, batch=8, vocab=50257)),
    "resnet50": (resnet, dict(depth=50)),
    "resnet101": (resnet, dict(depth=101)),
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
