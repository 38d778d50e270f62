"""At most ``q`` contiguous subgraphs per accelerator, as rows on any one-hot assignment (Tarnawski §4.1, Fig. 4 (2)).

The latency IP writes Fig. 4's limit through its invocation slots (:class:`~.latency.SubgraphSlots`), which also
price each slot's reads and writes. A formulation that times ops on its own (MOIRAI's schedule MILP, where a
cluster with links routes the latency) needs the limit alone: :class:`SubgraphLimit` keeps Fig. 4's levels
``lam[v, a, j] = 1`` iff op ``v``'s subgraph level for accelerator ``a`` is at least ``j`` — the most runs of
``a``'s ops on a path ending in ``v``, as the cost model counts them (:func:`~placement_dsl.invocation.subgraph_levels`)
— and forbids an edge to enter ``a`` past level ``q``. Only lower bounds tie ``lam`` to ``x``: the least ``lam``
a placement allows is its levels, and the rows cut off exactly the placements whose levels exceed ``q``.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .base import BlockTemplate, Context, Stage, Warm, register
from .latency_data import accelerators
from .lazy import pyo


@register
class SubgraphLimit(BlockTemplate):
    """Fig. 4 (2) without slots: no accelerator runs more than ``q`` contiguous subgraphs of its ops."""

    name = "subgraph_limit"
    stage = Stage.STRUCTURE

    def __init__(self, q: int = 1):
        self.q = int(q)

    def __repr__(self) -> str:
        return f"SubgraphLimit(q={self.q})"

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        ops, devs, idx, dev = ctx.ops, ctx.devices, ctx.graph.index, ctx.cluster.index
        acc, q = accelerators(ctx), self.q
        X = lambda v, a: ctx.x(idx[v], dev[a])
        A, J = [devs[a] for a in acc], list(range(1, q + 1))
        edges = [(ops[u], ops[v]) for u, v in zip(ctx.graph.src.tolist(), ctx.graph.dst.tolist())]
        cross = [(ops[u], ops[v], devs[a]) for a in acc for u, v in ctx.cross_edges() if ctx.op_allowed(v, a)]
        blk.lam = pyo.Var(ops, A, J, bounds=(0, 1), doc="lam[v, a, j] = 1 iff op v's subgraph level for a is >= j")
        blk.enter = pyo.Var(pyo.Set(dimen=4, initialize=[(u, v, a, j) for u, v, a in cross for j in J[1:]]),
                            bounds=(0, 1), doc="enter[u, v, a, j] = 1 iff edge (u, v) enters a (v on a, u not) from "
                                               "level j-1")
        blk.enter_lo = pyo.Constraint(blk.enter.index_set(), rule=lambda b, u, v, a, j: b.enter[u, v, a, j]
                                      >= X(v, a) - X(u, a) + b.lam[u, a, j - 1] - 1, doc="all three hold: enter")
        base = [(ops[v], devs[a]) for a in acc for v in range(ctx.n) if ctx.op_allowed(v, a)]
        blk.lam_base = pyo.Constraint(pyo.Set(dimen=2, initialize=base), rule=lambda b, v, a: b.lam[v, a, 1] >= X(v, a),
                                      doc="an op of a has level >= 1 for a")
        blk.lam_carry = pyo.Constraint(pyo.Set(dimen=4, initialize=[(u, v, a, j) for a in A for u, v in edges
                                                                    for j in J]),
                                       rule=lambda b, u, v, a, j: b.lam[v, a, j] >= b.lam[u, a, j],
                                       doc="levels never drop along an edge")
        blk.lam_enter = pyo.Constraint(blk.enter.index_set(), rule=lambda b, u, v, a, j: b.lam[v, a, j]
                                       >= b.enter[u, v, a, j], doc="re-entering a raises the level")
        blk.at_most_q = pyo.Constraint(pyo.Set(dimen=3, initialize=cross),
                                       rule=lambda b, u, v, a: X(v, a) - X(u, a) + b.lam[u, a, q] <= 1,
                                       doc="no edge enters a past level q (Fig. 4: q subgraphs per accelerator)")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        acc = accelerators(ctx)
        idx, dev = ctx.graph.index, ctx.cluster.index
        col = {ctx.devices[a]: i for i, a in enumerate(acc)}
        rows = levels(ctx, warm.assign.tolist(), acc)
        on = warm.assign
        for (v, a, j), var in blk.lam.items():
            yield var, float(rows[idx[v]][col[a]] >= j)
        for (u, v, a, j), var in blk.enter.items():
            d = dev[a]
            yield var, float(on[idx[v]] == d and on[idx[u]] != d and rows[idx[u]][col[a]] >= j - 1)


def levels(ctx: Context, assign: list[int], acc: list[int]) -> list[list[int]]:
    """Per op, its subgraph level for each accelerator of ``acc`` (Tarnawski §4.1: on ``a``,
    ``max(1, max_u level_a(u) + [u not on a])``; elsewhere the most of its predecessors'), in topological order."""
    g = ctx.graph
    col = {a: i for i, a in enumerate(acc)}
    ptr, preds = g.pred_ptr.tolist(), g.pred_idx.tolist()
    rows: list[list[int]] = [[0] * len(acc) for _ in range(g.n)]
    for v in g.topo.tolist():
        row = [0] * len(acc)
        for u in preds[ptr[v]:ptr[v + 1]]:
            row = list(map(max, row, rows[u]))
        k = col.get(assign[v])
        if k is not None:
            row[k] = max(1, row[k], *(rows[u][k] + 1 for u in preds[ptr[v]:ptr[v + 1]] if assign[u] != assign[v]))
        rows[v] = row
    return rows
