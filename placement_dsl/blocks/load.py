"""Device cost templates: memory (hard), overflow (soft), and the per-device load.

For device ``d`` and pass ``p`` (Archer et al. eq. (3), (7); Tarnawski et al. Fig. 6 eq. (20)-(21)):

``compute_{dp} = sum_{v in p} t_{vd} x_{vd}``, ``in_{dp}`` / ``out_{dp}`` the tensor-cut
transfer times (producer's pass), ``overflow_d`` charged to the forward pass.
The load is the sum of these, or with overlapped communication (Tarnawski App. C.1) the
maximum of its *parts*: ``"half"``: ``compute`` and ``in + out + overflow``; ``"full"``:
``compute``, ``in`` and ``out + overflow``. An objective bounds every part, so the maximum
needs no extra variable beyond the objective's epigraph.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..evaluate import Overlap
from .base import (
    AssignmentLink,
    BlockTemplate,
    Context,
    LoadLink,
    OverflowLink,
    Stage,
    TransferLink,
    Warm,
    register,
    settle,
)
from .lazy import pyo

PARTS = {Overlap.NONE: ("total",), Overlap.HALF: ("compute", "comm"), Overlap.FULL: ("compute", "in", "out")}


def _memory_expr(ctx: Context, d: int) -> Any:
    return sum(ctx.mem[v] * ctx.x(v, d) for v in range(ctx.n) if ctx.mem[v] > 0 and ctx.op_allowed(v, d))


def _tight(ctx: Context) -> list[int]:
    """Devices whose capacity could be exceeded (finite and below the most their allowed ops need)."""
    most = (ctx.mem[:, None] * ctx.unit_allowed[ctx.unit]).sum(axis=0)
    return [d for d in range(ctx.D) if np.isfinite(ctx.capacity[d]) and most[d] > ctx.capacity[d]]


@register
class MemoryCapacity(BlockTemplate):
    """Hard capacity (Tarnawski eq. (3)): ``sum_v (param_v + act_v) x_{vd} <= M_d``."""

    name = "memory"
    stage = Stage.COST

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        blk.capacity = pyo.Constraint([ctx.devices[d] for d in _tight(ctx)],
                                      rule=lambda b, d: self._row(ctx, ctx.cluster.index[d]),
                                      doc="parameters and activations of device d fit its memory "
                                      "(divided by its capacity)")

    @staticmethod
    def _row(ctx: Context, d: int) -> Any:
        w = ctx.memory_weight(d)
        return settle(w * _memory_expr(ctx, d) <= w * float(ctx.capacity[d]))

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        return iter(())


@register
class OverflowCost(BlockTemplate):
    """Archer eq. (2) linearized: ``overflow_d >= (sum_v (param_v + act_v) x_{vd} - M_d) / B_d``, ``>= 0``."""

    name = "overflow"
    stage = Stage.COST
    provides = (OverflowLink,)

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        devs = [d for d in _tight(ctx) if ctx.overflow_rate[d] > 0]
        blk.overflow = pyo.Var([ctx.devices[d] for d in devs], domain=pyo.NonNegativeReals,
                               doc="time to stream device d's parameters beyond its memory")
        dev = ctx.cluster.index
        blk.overflow_excess = pyo.Constraint(
            blk.overflow.index_set(),
            rule=lambda b, d: b.overflow[d] >= float(ctx.overflow_rate[dev[d]])
            * (_memory_expr(ctx, dev[d]) - float(ctx.capacity[dev[d]])),
            doc="overflow is at least the excess bytes over the bandwidth")
        names = set(blk.overflow.index_set())
        ctx.provide(OverflowLink(lambda d: blk.overflow[ctx.devices[d]] if ctx.devices[d] in names else 0.0),
                    by=repr(self))

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        over = warm.overflow()
        for d, var in blk.overflow.items():
            yield var, float(over[ctx.cluster.index[d]])


def load_parts(overlap: Overlap, compute: Any, tin: Any, tout: Any, extra: Any, merged: Any = None) -> dict[str, Any]:
    """The parts whose maximum is the load (their sum without overlap)."""
    comm = merged if merged is not None else tin + tout
    if overlap is Overlap.NONE:
        return {"total": compute + comm + extra}
    if overlap is Overlap.HALF:
        return {"compute": compute, "comm": comm + extra}
    return {"compute": compute, "in": tin, "out": tout + extra}


@register
class DeviceLoad(BlockTemplate):
    """Per-device cost parts ``device_cost[d, pass, part]`` (pass ``total``, and ``forward``/``backward`` in training)."""

    name = "device_load"
    stage = Stage.LOAD
    provides = (LoadLink,)
    needs = (AssignmentLink, TransferLink)
    uses = (OverflowLink,)

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        dev = ctx.cluster.index
        blk.passes = pyo.Set(initialize=self.passes(ctx), doc="total, and forward/backward for training")
        blk.parts = pyo.Set(initialize=PARTS[ctx.overlap], doc="parts whose maximum is the load (overlap)")
        blk.compute = pyo.Expression(ctx.devices, blk.passes, rule=lambda b, d, p: self._compute(ctx, dev[d], p),
                                     doc="running time of device d's ops of pass p")
        blk.device_cost = pyo.Expression(
            ctx.devices, blk.passes, blk.parts, rule=lambda b, d, p, part: self._parts(b, ctx, d, p)[part],
            doc="part of device d's load in pass p; the load is the max over parts (sum when no overlap)")
        ctx.provide(LoadLink(blk.device_cost, tuple(blk.parts)), by=repr(self))

    @staticmethod
    def passes(ctx: Context) -> list[str]:
        return ["total", "forward", "backward"] if ctx.training else ["total"]

    @staticmethod
    def _compute(ctx: Context, d: int, p: str) -> Any:
        rows = range(ctx.n) if p == "total" else ctx.pass_ops(p)
        return sum(ctx.work[v, d] * ctx.x(v, d) for v in rows if ctx.work[v, d] > 0 and ctx.op_allowed(v, d))

    @staticmethod
    def _parts(blk: pyo.Block, ctx: Context, name: str, p: str) -> dict[str, Any]:
        d = ctx.cluster.index[name]
        passes = ctx.passes if p == "total" else (p,)
        extra = ctx.overflow_expr(d) if p in ("total", "forward") else 0.0
        if ctx.overlap is Overlap.FULL:
            tin = sum(ctx.comm_expr(d, q, "in") for q in passes)
            tout = sum(ctx.comm_expr(d, q, "out") for q in passes)
            return load_parts(Overlap.FULL, blk.compute[name, p], tin, tout, extra)
        both = sum(ctx.comm_expr(d, q, "both") for q in passes)
        return load_parts(ctx.overlap, blk.compute[name, p], 0, 0, extra, merged=both)

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        return iter(())


def warm_parts(ctx: Context, warm: Warm, p: str) -> np.ndarray:
    """``(D, parts)`` values of ``device_cost[:, p, :]`` for a placement, in model units."""
    passes = ctx.passes if p == "total" else (p,)
    compute = sum(warm.compute(q) for q in passes)
    tin = sum(warm.transfer(q, "in") for q in passes)
    tout = sum(warm.transfer(q, "out") for q in passes)
    has_overflow = ctx.has(OverflowLink)
    extra = warm.overflow() if has_overflow and p in ("total", "forward") else np.zeros(ctx.D)
    parts = load_parts(ctx.overlap, compute, tin, tout, extra)
    return np.column_stack([parts[k] for k in PARTS[ctx.overlap]])
