"""The tensor cut over routes, for hierarchical clusters (Tarnawski App. C.3; :mod:`placement_dsl.replication`).

On a routed cluster a tensor ``u`` made on device ``a`` and read on ``d`` costs ``bytes_u / bw(a, d)``
(the route's bandwidth, intra- or inter-server): the reader pays it once per tensor, the writer
once per tensor at its slowest route. With ``x`` one-hot, the products become rows per edge
``(u, v)`` of the cut (scaled time ``r_{ad} = bytes_u / (bw(a, d) * scale)``)::

    recv_{ud} >= r_{ad} (x_{ua} + x_{vd} - 1)     for every a != d
    send_{ua} >= r_{ab} (x_{ua} + x_{vb} - 1)     for every b != a

Only non-host devices pay. A pair with no route (bandwidth 0) would make the tensor's time
infinite for a device that pays, so the pair is forbidden instead: ``x_{ua} + x_{vd} <= 1``.
:class:`~placement_dsl.blocks.transfer.TensorCut` (``commio`` form) builds these on a routed
cluster and provides the same :class:`TransferLink`.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyomo.environ as pyo

from .base import Context, TransferLink, Warm


def _rate(ctx: Context) -> np.ndarray:
    """``(D, D)`` scaled time per byte over each route (0 on the diagonal, inf where there is no route)."""
    bw = ctx.cluster.route_bandwidth
    with np.errstate(divide="ignore"):
        return np.where(np.eye(ctx.D, dtype=bool), 0.0, 1.0 / bw) / ctx.scale.time


def build_routed(blk: pyo.Block, ctx: Context) -> None:
    """The routed cut's variables, rows and :class:`TransferLink` on ``blk`` (``commio`` form)."""
    g, rate, pay = ctx.graph, _rate(ctx), ~ctx.cluster.host
    edges = [(u, v) for u, v in ctx.cross_edges() if g.out_bytes[u] > 0]
    producers = sorted({u for u, _ in edges})
    ops, devs = ctx.ops, ctx.devices
    payers = [d for d in range(ctx.D) if pay[d]]
    blk.recv = pyo.Var([(ops[u], devs[d]) for u in producers for d in payers], domain=pyo.NonNegativeReals,
                       doc="recv[u, d]: time device d spends reading tensor u over its route")
    blk.send = pyo.Var([(ops[u], devs[d]) for u in producers for d in payers], domain=pyo.NonNegativeReals,
                       doc="send[u, a]: time device a spends writing tensor u at its slowest route")
    rows = [(u, v, a, d) for u, v in edges for a in range(ctx.D) for d in range(ctx.D)
            if a != d and ctx.op_allowed(u, a) and ctx.op_allowed(v, d)]
    named = {(ops[u], ops[v], devs[a], devs[d]): (u, v, a, d) for u, v, a, d in rows if pay[a] or pay[d]}
    idx = {key: r for key, r in named.items() if np.isfinite(rate[r[2], r[3]])}
    blocked = {key: r for key, r in named.items() if key not in idx}

    def no_route(b: pyo.Block, un: str, vn: str, an: str, dn: str) -> Any:
        u, v, a, d = blocked[un, vn, an, dn]
        return ctx.x(u, a) + ctx.x(v, d) <= 1

    blk.no_route = pyo.Constraint(pyo.Set(dimen=4, initialize=list(blocked)), rule=no_route,
                                  doc="no tensor between devices with no route: its time would be infinite")

    def row(side: str) -> Any:
        def rule(b: pyo.Block, un: str, vn: str, an: str, dn: str) -> Any:
            u, v, a, d = idx[un, vn, an, dn]
            who = d if side == "recv" else a
            if not pay[who]:
                return pyo.Constraint.Skip
            var = (b.recv if side == "recv" else b.send)[un, devs[who]]
            return var >= float(g.out_bytes[u] * rate[a, d]) * (ctx.x(u, a) + ctx.x(v, d) - 1)
        return rule

    keys = pyo.Set(dimen=4, initialize=list(idx))
    blk.route_in = pyo.Constraint(keys, rule=row("recv"), doc="a reader pays the tensor's route once")
    blk.route_out = pyo.Constraint(keys, rule=row("send"), doc="a writer pays the tensor's slowest route once")
    by_device: dict[int, list[int]] = {d: [u for u in producers] for d in payers}
    backward = g.backward

    def comm(d: int, p: str, which: str) -> Any:
        if d not in by_device:
            return 0.0
        chosen = [u for u in by_device[d] if backward[u] == (p == "backward")]
        sides = {"in": [blk.recv], "out": [blk.send], "both": [blk.recv, blk.send]}[which]
        return sum(var[ops[u], devs[d]] for var in sides for u in chosen)

    ctx.provide(TransferLink(comm), by="TensorCut(routed)")
    ctx.views["routed_transfer"] = lambda warm, p, which: routed_times(ctx, warm.assign, p, which)


def routed_times(ctx: Context, assign: np.ndarray, p: str, which: str) -> np.ndarray:
    """Per device, the routed transfer time (model units) of one pass's tensors, ``in`` or ``out``."""
    recv, send = _warm_tables(ctx, assign)
    rows = ctx.pass_ops(p)
    table = recv if which == "in" else send
    return table[rows].sum(axis=0)


def _warm_tables(ctx: Context, assign: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    g, rate, pay = ctx.graph, _rate(ctx), ~ctx.cluster.host
    recv = np.zeros((ctx.n, ctx.D))
    send = np.zeros((ctx.n, ctx.D))
    a, b = assign[g.src], assign[g.dst]
    cross = a != b
    u, a, b = g.src[cross], a[cross], b[cross]
    t = np.where(np.isfinite(rate[a, b]), g.out_bytes[u] * rate[a, b], 0.0)  # no route: the start breaks no_route
    np.maximum.at(recv, (u, b), t)
    np.maximum.at(send, (u, a), t)
    return recv * pay, send * pay


def routed_values(blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
    recv, send = _warm_tables(ctx, warm.assign)
    for var, table in ((blk.recv, recv), (blk.send, send)):
        for (un, dn), data in var.items():
            yield data, float(table[ctx.graph.index[un], ctx.cluster.index[dn]])
