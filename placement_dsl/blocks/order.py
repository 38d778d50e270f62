"""Structure templates: DAG order of the devices and contiguity of each device's ops."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .base import BlockTemplate, Context, Warm, register
from .lazy import pyo


@register
class DagOrderBlock(BlockTemplate):
    """Archer et al. eq. (8): ``y_{ub} >= y_{vb}`` for every edge ``(u, v)`` and device ``b``.

    If ``v`` is completed by device ``b`` so is ``u``: every edge goes to the same or a later
    device, hence the quotient graph is acyclic with devices in pipeline order. Uses
    ``ctx.y`` (a variable for :class:`~.assignment.OrderedAssignment`, a prefix sum of
    ``x`` otherwise). The last device is skipped (``y = 1`` there).
    """

    name = "dag_order"

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        pairs = sorted({(int(ctx.unit[u]), int(ctx.unit[v])) for u, v in ctx.cross_edges()})
        rows = [(ctx.ops[u], ctx.ops[v], ctx.devices[b]) for u, v in pairs for b in range(ctx.D - 1)]
        idx, dev = ctx.graph.index, ctx.cluster.index
        blk.edge_order = pyo.Constraint(
            pyo.Set(dimen=3, initialize=rows),
            rule=lambda b, u, v, d: ctx.y(idx[u], dev[d]) >= ctx.y(idx[v], dev[d]),
            doc="edge (u, v): v completed by device d implies u completed by d (eq. 8)")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        return iter(())


def reach_labels(ctx: Context, assign: np.ndarray) -> np.ndarray:
    """``(n, labels)`` booleans: some op of label ``(d, pass)`` is reachable from ``v`` (``v`` included).

    The label of op ``w`` is ``2 * device(w) + backward(w)``; this is the witness ``z`` of
    Tarnawski Lemma 4.1 ("only if" direction).
    """
    g = ctx.graph
    label = 2 * np.asarray(assign) + g.backward.astype(np.int64)
    reach = np.zeros((g.n, 2 * ctx.D), dtype=bool)
    reach[np.arange(g.n), label] = True
    for v in g.topo[::-1]:
        for w in g.successors(v):
            reach[v] |= reach[w]
    return reach


@register
class Contiguity(BlockTemplate):
    """Tarnawski et al. Lemma 4.1: each device's ops of each pass form a contiguous set.

    For every device ``d`` and pass ``p`` with ``x'_v = x_{vd}`` if ``v`` is in pass ``p``
    (else 0), continuous ``z_{vdp} in [0, 1]`` with

    * (11) ``z_{vdp} >= x'_v``
    * (12) ``z_{vdp} <= z_{udp}``            for every edge ``(u, v)``
    * (13) ``z_{vdp} <= x'_v - x'_u + 1``    for every edge ``(u, v)``

    ``z`` is non-increasing along paths and lies above ``x'``; leaving the set and coming
    back is impossible. Forward and backward parts are separate sets (§5.3).
    """

    name = "contiguity"

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        labels = [(d, p) for d in range(ctx.D) for p in ctx.passes
                  if any(ctx.op_allowed(v, d) for v in ctx.pass_ops(p))]
        g, ops, devs = ctx.graph, ctx.ops, ctx.devices
        blk.labels = pyo.Set(dimen=2, initialize=[(devs[d], p) for d, p in labels], doc="(device, pass) sets")
        blk.z = pyo.Var(pyo.Set(initialize=ops), blk.labels, bounds=(0, 1),
                        doc="z[v, d, p] = 1 if some op of device d and pass p is reachable from v")
        idx, dev = g.index, ctx.cluster.index

        def xp(v: int, d: int, p: str) -> Any:
            return ctx.x(v, d) if (g.backward[v] == (p == "backward")) else 0

        cover = [(ops[v], devs[d], p) for d, p in labels for v in ctx.pass_ops(p) if ctx.op_allowed(v, d)]
        blk.z_cover = pyo.Constraint(pyo.Set(dimen=3, initialize=cover),
                                     rule=lambda b, v, d, p: b.z[v, d, p] >= xp(idx[v], dev[d], p),
                                     doc="z lies above the device's pass indicator (eq. 11)")
        edges = list(zip(g.src.tolist(), g.dst.tolist()))
        mono = [(ops[u], ops[v], devs[d], p) for d, p in labels for u, v in edges]
        blk.z_monotone = pyo.Constraint(pyo.Set(dimen=4, initialize=mono),
                                        rule=lambda b, u, v, d, p: b.z[v, d, p] <= b.z[u, d, p],
                                        doc="z is non-increasing along every edge (eq. 12)")
        leave = [(ops[u], ops[v], devs[d], p) for d, p in labels for u, v in edges
                 if g.backward[u] == (p == "backward") and ctx.op_allowed(u, d)
                 and not (ctx.unit[u] == ctx.unit[v] and g.backward[u] == g.backward[v])]
        blk.z_leave = pyo.Constraint(
            pyo.Set(dimen=4, initialize=leave),
            rule=lambda b, u, v, d, p: b.z[v, d, p] <= xp(idx[v], dev[d], p) - xp(idx[u], dev[d], p) + 1,
            doc="an edge leaving the set drops z to 0 (eq. 13)")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        reach = reach_labels(ctx, warm.assign)
        idx, dev = ctx.graph.index, ctx.cluster.index
        for (v, d, p), var in blk.z.items():
            yield var, float(reach[idx[v], 2 * dev[d] + (p == "backward")])
