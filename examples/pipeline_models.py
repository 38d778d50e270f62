"""The models ``examples/run_pipeline.py`` places and runs, and the idle stages that time the runtime's own cost.

A small GPT (blocks ``h.N``), a ResNet-style CNN and a mobile-style one (blocks ``blocks.N``), a ViT, their sizes
(full and ``--quick``), the factories ``placement-dsl import|profile`` read (``make_gpt`` ...), and
:class:`IdleNet`, a chain of stages that do no work, split by torch as a model is.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import SplitPoint, pipeline


class Block(nn.Module):
    """A pre-norm transformer block: self-attention (causal for the GPT) and an MLP, each with a residual connection."""

    def __init__(self, d: int, heads: int, causal: bool = True):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.ln_1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln_2, self.fc, self.out = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    """Token and position embeddings, ``layers`` blocks ``h.N``, a final norm and the LM head."""

    def __init__(self, vocab: int, seq: int, d: int, heads: int, layers: int):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        return self.head(self.ln_f(x))


class ResBlock(nn.Module):
    """A basic residual block: two 3x3 convolutions with group norms; a strided 1x1 shortcut when the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1, self.norm1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.GroupNorm(4, cout)
        self.conv2, self.norm2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.GroupNorm(4, cout)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride, bias=False) if stride != 1 or cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.norm1(self.conv1(x)))
        y = self.norm2(self.conv2(y))
        return F.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class CNN(nn.Module):
    """A ResNet-style network: a stem, residual blocks ``blocks.N`` over three widths, pooling and a classifier.
    (Group norms instead of batch norms keep each sample's output independent of its micro-batch.)

    ``growth``: the width's factor at each halving of the resolution: 2 as in ResNet (each block about the same
    work, the late ones with 4x the parameters), 1.5 as in the mobile networks, whose early high-resolution blocks
    cost most of the compute and the late ones most of the parameters."""

    def __init__(self, width: int, per_stage: int, classes: int = 10, growth: float = 2.0):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.GroupNorm(4, width), nn.ReLU())
        blocks, cin = [], width
        widths = [4 * round(width * growth ** i / 4) for i in range(3)]  # group norms of 4 groups
        for i, cout in enumerate(widths):
            for j in range(per_stage):
                blocks.append(ResBlock(cin, cout, 2 if j == 0 and i > 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


class ViT(nn.Module):
    """A vision transformer: a patch embedding, a position embedding, ``layers`` blocks ``blocks.N`` (full attention),
    a final norm and a classifier over the mean of the tokens."""

    def __init__(self, image: int, patch: int, d: int, heads: int, layers: int, classes: int = 10):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2, d))
        self.blocks = nn.ModuleList(Block(d, heads, causal=False) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2).contiguous() + self.pos  # gloo sends contiguous tensors
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x).mean(dim=1))


class Idle(nn.Module):
    """A stage that does no work: it scales its input by one parameter (so its backward has a weight gradient too)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.w


class IdleNet(nn.Module):
    """``parts`` :class:`Idle` modules ``h.N`` in a chain. Split by torch between them and run by the same schedule
    as a model, it times the runtime's own cost: its actions, their messages and the call of a traced stage."""

    def __init__(self, parts: int):
        super().__init__()
        self.h = nn.ModuleList(Idle() for _ in range(parts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for part in self.h:
            x = part(x)
        return x


IDLE_FEATURES = 16  # floats per sample of an idle stage's messages: the link's latency, hardly its bandwidth


def idle_batch(samples: int) -> tuple[torch.Tensor, torch.Tensor]:
    """An input and a target batch of ``samples`` for a pipeline of :class:`Idle` stages."""
    return torch.randn(samples, IDLE_FEATURES), torch.randint(0, IDLE_FEATURES, (samples,))


def idle_pipe(stages: int, microbatch: int) -> Any:
    """:class:`IdleNet` split by torch into ``stages`` stages of one :class:`Idle` each."""
    x, _ = idle_batch(microbatch)
    return pipeline(IdleNet(stages), (x,), split_spec={f"h.{k}": SplitPoint.BEGINNING for k in range(1, stages)})


SIZES = {  # (full, --quick)
    "gpt": ({"vocab": 512, "seq": 64, "d": 128, "heads": 4, "layers": 6},
            {"vocab": 256, "seq": 32, "d": 64, "heads": 4, "layers": 4}),
    "cnn": ({"width": 32, "per_stage": 2, "image": 32}, {"width": 16, "per_stage": 2, "image": 16}),
    # GPT-2's vocabulary makes its LM head as heavy as ~5 blocks (50257 / (12 x 768)); here 4096 / (12 x 128) ~ 2.7
    "gpt-vocab": ({"vocab": 4096, "seq": 64, "d": 128, "heads": 4, "layers": 6},
                  {"vocab": 1024, "seq": 32, "d": 64, "heads": 4, "layers": 4}),
    "cnn-mobile": ({"width": 32, "per_stage": 2, "image": 32, "growth": 1.5},
                   {"width": 16, "per_stage": 2, "image": 16, "growth": 1.5}),
    "vit": ({"image": 32, "patch": 4, "d": 128, "heads": 4, "layers": 6},
            {"image": 16, "patch": 4, "d": 64, "heads": 4, "layers": 4}),
}


def make_gpt(batch: int = 4, quick: bool = False) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The GPT and a batch of token ids (a factory for ``placement-dsl import|profile``)."""
    s = SIZES["gpt"][quick]
    return GPT(**s), (torch.randint(0, s["vocab"], (batch, s["seq"])),)


def make_cnn(batch: int = 4, quick: bool = False, family: str = "cnn") -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The CNN and a batch of images."""
    s = SIZES[family][quick]
    return CNN(s["width"], s["per_stage"], growth=s.get("growth", 2.0)), (torch.randn(batch, 3, s["image"], s["image"]),)


def make_gpt_vocab(batch: int = 4, quick: bool = False) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The GPT with a large vocabulary: its embedding and LM head hold most parameters, the head much compute."""
    s = SIZES["gpt-vocab"][quick]
    return GPT(**s), (torch.randint(0, s["vocab"], (batch, s["seq"])),)


def make_cnn_mobile(batch: int = 4, quick: bool = False) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The CNN whose width grows 1.5x a halving: the early blocks are the costly ones."""
    return make_cnn(batch, quick, "cnn-mobile")


def make_vit(batch: int = 4, quick: bool = False) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The ViT and a batch of images."""
    s = SIZES["vit"][quick]
    return ViT(**s), (torch.randn(batch, 3, s["image"], s["image"]),)


def make_gpt_quick(batch: int = 4) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return make_gpt(batch, quick=True)


def make_cnn_quick(batch: int = 4) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return make_cnn(batch, quick=True)


FACTORIES = {"gpt": make_gpt, "cnn": make_cnn, "vit": make_vit, "gpt-vocab": make_gpt_vocab,
             "cnn-mobile": make_cnn_mobile}


def build(name: str, batch: int, quick: bool, seed: int = 0) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """Model ``name`` with the weights of ``seed``, an input batch and a target batch (the same in every process)."""
    torch.manual_seed(seed)
    model, (x,) = FACTORIES[name](batch, quick)
    out = model(x[:1])
    target = torch.randint(0, out.shape[-1], (batch, *out.shape[1:-1]))
    return model, x, target


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the last dimension (the GPT's tokens or the CNN's classes)."""
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))
