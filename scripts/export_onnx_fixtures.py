"""Export the ONNX test models of tests/data with PyTorch's own exporter (not by this package).

Two models as their users have them, from the Hugging Face ``transformers`` library:

* ``resnet18.onnx``: ``ResNetForImageClassification`` with ResNet-18's configuration (basic
  blocks, depths 2-2-2-2, widths 64-512, 1000 classes), exported by the TorchScript exporter
  (``torch.onnx.export(..., dynamo=False)``, opset 13), a dynamic ``batch`` dimension: node names
  are name scopes (``/resnet/encoder/stages.0/...``), shapes are computed with
  ``Shape``/``Gather``/``Concat`` chains and ``Constant`` nodes;
* ``gpt2.onnx``: ``GPT2LMHeadModel`` with a small configuration (4 layers, width 256, 4 heads,
  GPT-2's vocabulary of 50257 tokens, tied input and output embeddings), exported by the
  ``torch.export``-based exporter (``dynamo=True``, opset 18), dynamic ``batch`` and ``seq``:
  module paths are in each node's ``pkg.torch.onnx.name_scopes`` metadata;
* ``gpt_blocks.onnx``: a GPT-style decoder from PyTorch's own modules (``nn.Embedding``, pre-norm
  ``nn.TransformerEncoderLayer`` blocks under a causal mask, a head tied to the embedding; 2 layers
  of width 128, 4 heads, 1000 tokens), exported by the TorchScript exporter (opset 14) with dynamic
  ``batch`` and ``sequence``: ``nn.MultiheadAttention`` splits its heads with ``Shape``/``Gather``/
  ``Unsqueeze``/``Concat`` chains and ``Constant`` nodes, and the tracer bakes the traced sequence
  length (32) into some of them, so the model holds at that length only.

The weights are written as ONNX external data next to each file and then deleted: the
committed ``.onnx`` files hold the graph and the initializers' shapes and types only (a few
hundred kB), which is all the importer reads. Rerun with::

    pip install torch transformers onnxscript
    python scripts/export_onnx_fixtures.py [--out tests/data]
"""
from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path


def _resnet18():
    import torch
    from transformers import ResNetConfig, ResNetForImageClassification

    config = ResNetConfig(num_channels=3, embedding_size=64, hidden_sizes=[64, 128, 256, 512], depths=[2, 2, 2, 2],
                          layer_type="basic", hidden_act="relu", num_labels=1000)
    config.return_dict = False  # the logits as a tuple, not an output dataclass
    model = ResNetForImageClassification(config).eval()
    with torch.no_grad():  # batch-norm statistics as after training (fresh ones fold into equal, shared biases)
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
    return model


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=50257, n_positions=256, n_embd=256, n_layer=4, n_head=4, use_cache=False,
                        tie_word_embeddings=True)
    return GPT2LMHeadModel(config).eval()


def _gpt_blocks():
    """A GPT-style decoder from PyTorch's own modules: token and position embeddings, pre-norm
    ``nn.TransformerEncoderLayer`` blocks under a causal mask, a final norm and a head tied to the embedding."""
    import torch
    from torch import nn

    class GPT(nn.Module):
        def __init__(self, vocab: int = 1000, width: int = 128, heads: int = 4, layers: int = 2, context: int = 256):
            super().__init__()
            self.wte = nn.Embedding(vocab, width)
            self.wpe = nn.Embedding(context, width)
            block = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.h = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
            self.ln_f = nn.LayerNorm(width)
            self.lm_head = nn.Linear(width, vocab, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, input_ids):
            seq = input_ids.shape[1]
            positions = torch.arange(seq, device=input_ids.device).unsqueeze(0)
            mask = torch.triu(torch.full((seq, seq), float("-inf"), device=input_ids.device), diagonal=1)
            x = self.wte(input_ids) + self.wpe(positions)
            return self.lm_head(self.ln_f(self.h(x, mask=mask)))

    model = GPT().eval()
    with torch.no_grad():  # distinct weights per layer, as after training (the encoder deep-copies one layer)
        for param in model.parameters():
            param.normal_(0.0, 0.02)
    return model


def _strip_weights(path: Path) -> None:
    """Rewrite ``path`` with its initializers' data external, then drop the data file."""
    import onnx

    model = onnx.load(str(path), load_external_data=True)
    data = path.name + ".data"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=data,
                    size_threshold=0)
    (path.parent / data).unlink()


def export_resnet18(out: Path) -> Path:
    import torch

    path = out / "resnet18.onnx"
    model = _resnet18()
    x = torch.randn(2, 3, 224, 224)
    torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=13, input_names=["pixel_values"],
                      output_names=["logits"], dynamic_axes={"pixel_values": {0: "batch"}, "logits": {0: "batch"}})
    _strip_weights(path)
    return path


def export_gpt2(out: Path) -> Path:
    import torch

    path = out / "gpt2.onnx"
    model = _gpt2()
    ids = torch.randint(0, 50257, (2, 32))
    batch, seq = torch.export.Dim("batch", min=1, max=64), torch.export.Dim("seq", min=2, max=256)
    with tempfile.TemporaryDirectory() as tmp:
        program = torch.onnx.export(model, (ids,), dynamo=True, opset_version=18, input_names=["input_ids"],
                                    output_names=["logits"], dynamic_shapes={"input_ids": {0: batch, 1: seq}})
        program.save(os.path.join(tmp, "gpt2.onnx"), external_data=True)
        import onnx

        model = onnx.load(os.path.join(tmp, "gpt2.onnx"), load_external_data=False)
    _drop_traces(model)
    onnx.save_model(model, str(path))
    return path


def export_gpt_blocks(out: Path) -> Path:
    import torch

    path = out / "gpt_blocks.onnx"
    ids = torch.randint(0, 1000, (2, 32))
    axes = {0: "batch", 1: "sequence"}
    torch.onnx.export(_gpt_blocks(), (ids,), str(path), dynamo=False, opset_version=14, input_names=["input_ids"],
                      output_names=["logits"], dynamic_axes={"input_ids": axes, "logits": axes})
    _strip_weights(path)
    return path


def _drop_traces(model) -> None:
    """Drop the exporter's Python stack traces and FX node texts (nine tenths of the file, debugging aids only)."""
    for node in model.graph.node:
        keep = [(p.key, p.value) for p in node.metadata_props
                if p.key not in ("pkg.torch.onnx.stack_trace", "pkg.torch.onnx.fx_node")]
        del node.metadata_props[:]
        for key, value in keep:
            node.metadata_props.add(key=key, value=value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "tests" / "data"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for export in (export_resnet18, export_gpt2, export_gpt_blocks):
        path = export(out)
        print(f"{path}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
