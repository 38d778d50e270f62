"""Analytic kernel costs and the roofline that turns them into running times (Williams et al.).

``time_ms(op, kind) = 1e3 * max(flops / peak_flops[kind], bytes_moved / mem_bandwidth[kind])``;
units: times in ms, sizes in bytes. Weights and activations are ``BYTES_PER_ELEMENT``-byte floats.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..cluster import ACCELERATOR, CPU
from ..graph import Op

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


def round_significant(value: float) -> float:
    """``value`` rounded to :data:`SIGNIFICANT_DIGITS` significant digits (the generators' costs as written)."""
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def op_from_costs(name: str, pieces: Sequence[Cost], **attrs: Any) -> Op:
    """An op running ``pieces`` back to back.

    ``work[kind] = sum_p roofline_kind(p)``; ``param_bytes = sum_p param_bytes(p)``;
    ``out_bytes`` = the last piece's output; ``activation_bytes = sum_p out_bytes(p)`` (every
    intermediate tensor is kept for the backward pass).
    """
    work = {r.kind: round_significant(sum(r.time_ms(p.flops, p.bytes_moved) for p in pieces)) for r in ROOFLINES}
    return Op(name=name, work=work, param_bytes=sum(p.param_bytes for p in pieces),
              out_bytes=pieces[-1].out_bytes, activation_bytes=sum(p.out_bytes for p in pieces), attrs=attrs)
