"""GNMT-like recurrent encoder/decoder with attention."""
from __future__ import annotations

from ..cluster import Cluster
from ..errors import SpecError
from ..workload import Workload
from .build import GraphBuilder, build_workload, check_positive, default_cluster
from .costs import Cost, concat, embedding, lstm, matmul, softmax


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
    check_positive("gnmt", enc_layers=enc_layers, dec_layers=dec_layers, hidden=hidden, src_len=src_len,
                   tgt_len=tgt_len, batch=batch, vocab=vocab)
    if enc_layers < 2:
        raise SpecError(f"gnmt: enc_layers must be >= 2 (bidirectional first layer + top), got {enc_layers}")
    h = hidden
    g = GraphBuilder()
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
    params = {"enc_layers": enc_layers, "dec_layers": dec_layers, "hidden": hidden, "src_len": src_len, "tgt_len": tgt_len,
                  "batch": batch, "vocab": vocab}
    return build_workload(name or "gnmt", g, training, cluster or default_cluster(), "gnmt", params)
