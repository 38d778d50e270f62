"""Tensor cut: which tensors cross each device's boundary (each tensor once per boundary).

A tensor is the output of its producer ``u``; it is paid for on device ``d`` once, however
many consumers it has (Archer et al. eq. (1)). Only producers with a non-empty tensor and
non-host devices (which pay transfers) get variables.

Forms
-----
``"commio"`` — Tarnawski et al. Fig. 6 eq. (15)-(19), valid for any placement:
    ``CommIn_{ud} >= x_{vd} - x_{ud}``, ``CommOut_{ud} >= x_{ud} - x_{vd}`` per edge ``(u, v)``.
``"archer"`` — Archer et al. Fig. 3 eq. (9)-(10), valid under DAG order:
    ``c_{ub} >= y_{u(b-1)} + x_{vb} - 1`` (input), ``c_{ub} >= x_{ub} - y_{vb}`` (output).
    With ``merged=True`` one ``c_{ub}`` holds both (a tensor either enters or leaves a
    block); the full-duplex overlap needs them apart.

The :class:`~.base.TransferLink` ``comm(d, pass, which)`` is the transfer time of device ``d``'s tensors of a pass
(the producer's pass), ``which`` in ``"in"``, ``"out"``, ``"both"``.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import SpecError
from .base import BlockTemplate, Context, Stage, TransferLink, Warm, register
from .lazy import pyo

if TYPE_CHECKING:
    from ..problem import Problem

FORMS = ("commio", "archer")


@register
class TensorCut(BlockTemplate):
    """Tensor cut: ``CommIn``/``CommOut`` (Tarnawski eq. 15-19) or Archer's ``c_{ub}`` (eq. 9-10).

    On a routed cluster the cut prices each transfer over its route (App. C.3); ``routes=False`` keeps the
    per-device price there, for a model whose transfers go through host memory (the latency IP: the invocation
    model writes and reads every tensor at its device's bandwidth, whatever the links).
    """

    name = "tensor_cut"
    stage = Stage.CUT
    provides = (TransferLink,)

    def __init__(self, form: str = "commio", merged: bool = False, routes: bool = True):
        if form not in FORMS:
            raise SpecError(f"tensor_cut: unknown form {form!r}; choose from {list(FORMS)}")
        if merged and form != "archer":
            raise SpecError("tensor_cut: merged=True needs form='archer' (Archer's single c variable)")
        self.form, self.merged, self.routes = form, merged, routes

    def __repr__(self) -> str:
        return f"TensorCut(form={self.form!r}, merged={self.merged}{'' if self.routes else ', routes=False'})"

    def _routed(self, ctx: Context) -> bool:
        return bool(ctx.cluster.routed and self.routes)

    def check(self, problem: Problem) -> None:
        if problem.cluster.routed and self.routes and self.form != "commio":
            raise SpecError("tensor_cut: a routed cluster needs form='commio' (Archer's DAG-ordered cut prices "
                            "transfers per device, not per route)")

    # ------------------------------------------------------------------ build
    def build(self, blk: pyo.Block, ctx: Context) -> None:
        if self._routed(ctx):  # hierarchical cluster: each transfer over its route (App. C.3)
            from .routes import build_routed

            return build_routed(blk, ctx)  # check() refused the archer form when the steps were listed
        edges = ctx.cross_edges()
        payers = np.flatnonzero(ctx.comm.max(axis=0) > 0) if ctx.n else np.array([], int)
        producers = sorted({u for u, _ in edges if ctx.graph.out_bytes[u] > 0})
        ops, devs = ctx.ops, ctx.devices
        keys = [(ops[u], devs[d]) for u in producers for d in payers]
        blk.tensors = pyo.Set(dimen=2, initialize=keys, doc="(producer, paying device) pairs")
        rows = [(ops[u], ops[v], devs[d]) for u, v in edges if ctx.graph.out_bytes[u] > 0 for d in payers]
        blk.edges = pyo.Set(dimen=3, initialize=rows, doc="(producer, consumer, device) cut rows")
        if self.merged:
            blk.cut = pyo.Var(blk.tensors, domain=pyo.NonNegativeReals,
                              doc="c[u, b] = 1 iff tensor u enters or leaves block b (eq. 9-10)")
            var_in = var_out = blk.cut
        else:
            blk.cut_in = pyo.Var(blk.tensors, domain=pyo.NonNegativeReals,
                                 doc="CommIn[u, d] = 1 iff tensor u is read by device d from outside")
            blk.cut_out = pyo.Var(blk.tensors, domain=pyo.NonNegativeReals,
                                  doc="CommOut[u, d] = 1 iff tensor u is written by device d for another")
            var_in, var_out = blk.cut_in, blk.cut_out
        self._constraints(blk, ctx, var_in, var_out)
        self._link(blk, ctx, var_in, var_out)

    def _constraints(self, blk: pyo.Block, ctx: Context, var_in: Any, var_out: Any) -> None:
        idx, dev, x, y = ctx.graph.index, ctx.cluster.index, ctx.x, ctx.y

        if self.form == "commio":
            def rhs_in(u: int, v: int, d: int) -> Any:
                return x(v, d) - x(u, d)

            def rhs_out(u: int, v: int, d: int) -> Any:
                return x(u, d) - x(v, d)
        else:
            def rhs_in(u: int, v: int, d: int) -> Any:  # vacuous on the first block (y_{u,-1} = 0)
                return y(u, d - 1) + x(v, d) - 1 if d > 0 else 0

            def rhs_out(u: int, v: int, d: int) -> Any:
                return x(u, d) - y(v, d)

        def rule(rhs: Any, var: Any) -> Any:
            def build(b: pyo.Block, u: str, v: str, d: str) -> Any:
                expr = rhs(idx[u], idx[v], dev[d])
                if isinstance(expr, (int, float)) and expr <= 0:
                    return pyo.Constraint.Skip
                return var[u, d] >= expr
            return build

        blk.tensor_in = pyo.Constraint(blk.edges, rule=rule(rhs_in, var_in),
                                       doc="a consumer on d of a tensor made elsewhere makes d read it")
        blk.tensor_out = pyo.Constraint(blk.edges, rule=rule(rhs_out, var_out),
                                        doc="a consumer elsewhere of a tensor made on d makes d write it")

    def _link(self, blk: pyo.Block, ctx: Context, var_in: Any, var_out: Any) -> None:
        producers: dict[str, list[tuple[int, str]]] = {}
        for u, d in blk.tensors:
            producers.setdefault(d, []).append((ctx.graph.index[u], u))
        backward = ctx.graph.backward

        def comm(d: int, p: str, which: str) -> Any:
            if self.merged and which != "both":
                raise SpecError("tensor_cut: merged c cannot split in from out; use merged=False "
                                "for overlap='full'")
            name, want = ctx.devices[d], p == "backward"
            chosen = [(i, u) for i, u in producers.get(name, []) if backward[i] == want]
            sides = {"in": [var_in], "out": [var_out], "both": [var_in] if self.merged else [var_in, var_out]}
            return sum(ctx.comm[i, d] * var[u, name] for var in sides[which] for i, u in chosen)

        ctx.provide(TransferLink(comm), by=repr(self))

    # ------------------------------------------------------------------ warm start
    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        if self._routed(ctx):
            from .routes import routed_values

            yield from routed_values(blk, ctx, warm)
            return
        idx, dev = ctx.graph.index, ctx.cluster.index
        sides = [(blk.cut, warm.cin + warm.cout)] if self.merged else [(blk.cut_in, warm.cin),
                                                                        (blk.cut_out, warm.cout)]
        for var, table in sides:
            for (u, d), data in var.items():
                yield data, float(table[idx[u], dev[d]])
