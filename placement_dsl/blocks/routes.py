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

On any cluster with links each physical link is a resource of the pipeline too
(:class:`LinkLoads`, the cost model's :func:`~placement_dsl.evaluate.link_loads`): with
``w_{uad} >= x_{ua} + x_{vd} - 1`` for every consumer ``v`` of ``u`` (the tensor moves from ``a``
to ``d``), ``bottleneck >= sum_{(u, a, d): l on route(a, d)} bytes_u / bw_l * w_{uad}`` per link ``l``.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .base import AssignmentLink, BlockTemplate, BottleneckLink, Context, Stage, TransferLink, Warm, register
from .lazy import pyo


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


def link_rows_needed(cluster: Any) -> bool:
    """Whether a link's load can exceed every device's: not on a cluster without links, nor on one whose
    devices all pay their transfers over routes (:attr:`~placement_dsl.cluster.Cluster.routed`, no host)
    with every route a single link, where a link's load is part of its receiver's in-time."""
    if not cluster.links:
        return False
    direct = all(hops is None or len(hops) <= 1 for row in cluster.route_links for hops in row)
    return not (cluster.routed and not cluster.host.any() and direct)


def _moves(ctx: Context) -> dict[tuple[int, int, int], list[int]]:
    """``(u, a, d) -> consumers``: tensor ``u`` may move from ``a`` to ``d`` over a route of links."""
    g, routes, out = ctx.graph, ctx.cluster.route_links, {}
    for u, v in ctx.cross_edges():
        if g.out_bytes[u] <= 0:
            continue
        for a in range(ctx.D):
            for d in range(ctx.D):
                if a != d and routes[a][d] and ctx.op_allowed(u, a) and ctx.op_allowed(v, d):
                    out.setdefault((u, a, d), []).append(v)
    return out


def warm_link_loads(ctx: Context, assign: np.ndarray) -> np.ndarray:
    """Per link, its load (model units) under a placement: the rows of :class:`LinkLoads` at the start."""
    c, g = ctx.cluster, ctx.graph
    load = np.zeros(len(c.links))
    moved = {(u, int(assign[u]), int(assign[v])) for u, v in zip(g.src.tolist(), g.dst.tolist())
             if assign[u] != assign[v] and g.out_bytes[u] > 0}
    for u, a, d in moved:
        for k in c.route_links[a][d] or ():
            load[k] += g.out_bytes[u] / c.links[k].bandwidth
    return load / ctx.scale.time


@register
class LinkLoads(BlockTemplate):
    """Each link's load bounds the bottleneck: the tensors whose route crosses it, ``bytes / bandwidth`` each."""

    name = "link_loads"
    stage = Stage.OBJECTIVE
    needs = (AssignmentLink, BottleneckLink)

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        c, g, ops, devs = ctx.cluster, ctx.graph, ctx.ops, ctx.devices
        moves = _moves(ctx)
        keys = [(ops[u], devs[a], devs[d]) for u, a, d in moves]
        blk.w = pyo.Var(pyo.Set(dimen=3, initialize=keys), bounds=(0, 1),
                        doc="w[u, a, d] = 1 if tensor u moves from device a to device d")
        rows = [(ops[u], devs[a], devs[d], ops[v]) for (u, a, d), vs in moves.items() for v in vs]
        idx, dev = g.index, c.index
        blk.moves = pyo.Constraint(pyo.Set(dimen=4, initialize=rows), rule=lambda b, u, a, d, v: b.w[u, a, d]
                                   >= ctx.x(idx[u], dev[a]) + ctx.x(idx[v], dev[d]) - 1,
                                   doc="u on a and a consumer on d: the tensor moves a -> d")
        by_link: dict[int, list[tuple[int, int, int]]] = {}
        for u, a, d in moves:
            for k in c.route_links[a][d]:
                by_link.setdefault(k, []).append((u, a, d))
        T = ctx.link(BottleneckLink).bottleneck
        scale = ctx.scale.time
        blk.link_load = pyo.Constraint(sorted(by_link), rule=lambda b, k: T >= sum(
            float(g.out_bytes[u] / (c.links[k].bandwidth * scale)) * b.w[ops[u], devs[a], devs[d]]
            for u, a, d in by_link[k]), doc="a link moves the tensors of its routes one after another")
        blocked = [(ops[u], devs[a], devs[d], ops[v]) for u, v in ctx.cross_edges() if g.out_bytes[u] > 0
                   for a in range(ctx.D) for d in range(ctx.D) if a != d and c.route_links[a][d] is None
                   and ctx.op_allowed(u, a) and ctx.op_allowed(v, d)]
        blk.no_route = pyo.Constraint(pyo.Set(dimen=4, initialize=blocked), rule=lambda b, u, a, d, v: ctx.x(
            idx[u], dev[a]) + ctx.x(idx[v], dev[d]) <= 1, doc="no chain of links joins a to d: u's tensor cannot "
                                                               "reach a consumer there")
        ctx.views["link_loads"] = lambda warm: warm_link_loads(ctx, warm.assign)

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        g, a = ctx.graph, warm.assign
        for (un, an, dn), var in blk.w.items():
            u, src, dst = g.index[un], ctx.cluster.index[an], ctx.cluster.index[dn]
            yield var, float(a[u] == src and any(a[v] == dst for v in g.successors(u).tolist()))
