"""BERT/GPT-style transformer stacks."""
from __future__ import annotations

from ..cluster import Cluster
from ..errors import SpecError
from ..workload import Workload
from .build import GraphBuilder, build_workload, check_choice, check_positive, default_cluster
from .costs import Cost, elementwise, embedding, layernorm, matmul, softmax


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


def _transformer_block(g: GraphBuilder, prefix: str, pieces: list[tuple[str, Cost, str]], x: str,
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
    check_positive("transformer", layers=layers, hidden=hidden, heads=heads, seq_len=seq_len, batch=batch, vocab=vocab)
    check_choice("transformer", "granularity", granularity, ("layer", "operator"))
    if hidden % heads:
        raise SpecError(f"transformer: hidden={hidden} must be a multiple of heads={heads}")
    params = {"layers": layers, "hidden": hidden, "heads": heads, "seq_len": seq_len, "batch": batch, "vocab": vocab,
                  "granularity": granularity}
    g = GraphBuilder()
    x = g.add("embed", embedding(batch * seq_len, vocab, hidden), kind="embedding")
    for i in range(layers):
        x = _transformer_block(g, f"L{i:02d}.attn", _attention_pieces(batch, seq_len, hidden, heads), x,
                               granularity, "attention")
        x = _transformer_block(g, f"L{i:02d}.ffn", _ffn_pieces(batch, seq_len, hidden), x, granularity, "ffn")
    g.add("head", [layernorm(batch * seq_len * hidden, hidden), matmul(batch * seq_len, hidden, vocab)], [x], "head")
    name = name or f"transformer-{layers}x{hidden}-{granularity}"
    return build_workload(name, g, training, cluster or default_cluster(), "transformer", params)
