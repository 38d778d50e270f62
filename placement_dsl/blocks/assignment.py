"""Assignment templates: which device runs each op, plus pins and colocation equalities.

Two encodings expose the same links ``ctx.x(v, d)`` (op ``v`` on device ``d``) and
``ctx.y(v, b)`` (op ``v`` on device ``b`` or earlier):

* :class:`Assignment` — one-hot ``x_{ud}`` (Tarnawski et al. Fig. 6 eq. (14)), ``y`` as
  the prefix sum ``y_{vb} = sum_{d <= b} x_{vd}``;
* :class:`OrderedAssignment` — Archer et al.'s "completed-by-block" ``y_{ub}`` binaries
  with ``x`` eliminated by eq. (11): ``x_{vb} = y_{vb} - y_{v(b-1)}``.

Variables are indexed by *unit*: the representative op of a colocation group when the
group shares variables, else the op itself; pairs where the unit may not run (allowed
kinds) get no variable.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import InfeasibleError
from .base import AssignmentLink, BlockTemplate, Context, Stage, Warm, register, settle
from .lazy import pyo


def _pairs(ctx: Context, rep: np.ndarray | None = None) -> list[tuple[str, str]]:
    """(unit, device) pairs the unit may run on; with ``rep``, only devices that stand for themselves."""
    return [(ctx.ops[u], ctx.devices[d]) for u in ctx.units for d in np.flatnonzero(ctx.unit_allowed[u])
            if rep is None or rep[d] == d]


@register
class Assignment(BlockTemplate):
    """One-hot assignment: ``x_{ud} in {0,1}``, ``sum_d x_{ud} = 1`` for every unit ``u``.

    :meth:`representatives` may let one device's variables stand for interchangeable others
    (default: none); ``x(v, d)`` of a represented device is then 0 and a warm start's device
    is read as its representative.
    """

    name = "assignment"
    stage = Stage.ASSIGN
    provides = (AssignmentLink,)
    needs = ()

    def representatives(self, ctx: Context) -> np.ndarray | None:
        """``rep[d]``: the device whose variables stand for ``d`` (``None``: every device for itself)."""
        return None

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        pairs = _pairs(ctx, self.representatives(ctx))
        blk.units = pyo.Set(initialize=[ctx.ops[u] for u in ctx.units], doc="assignment units (ops or groups)")
        blk.allowed = pyo.Set(dimen=2, initialize=pairs, doc="(unit, device) pairs the unit may run on")
        blk.x = pyo.Var(blk.allowed, domain=pyo.Binary, doc="x[u, d] = 1 iff unit u runs on device d")
        by_unit: dict[str, list[str]] = {}
        for u, d in pairs:
            by_unit.setdefault(u, []).append(d)
        blk.assign_once = pyo.Constraint(blk.units, rule=lambda b, u: sum(b.x[u, d] for d in by_unit[u]) == 1,
                                         doc="every unit runs on exactly one device")
        ops, devs, keys = ctx.ops, ctx.devices, set(pairs)

        def x(v: int, d: int) -> Any:
            key = (ops[ctx.unit[v]], devs[d])
            return blk.x[key] if key in keys else 0

        ctx.provide(AssignmentLink(x=x, y=lambda v, b: sum(x(v, d) for d in range(b + 1))), by=repr(self))

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        rep = self.representatives(ctx)
        rep = np.arange(ctx.D) if rep is None else rep
        idx, dev = ctx.graph.index, ctx.cluster.index
        for (u, d), var in blk.x.items():
            yield var, float(rep[warm.assign[idx[u]]] == dev[d])


@register
class OrderedAssignment(BlockTemplate):
    """Archer et al. Fig. 3: ``y_{ub} in {0,1}`` nondecreasing in ``b``, ``y_{u,last} = 1``; ``x`` by eq. (11)."""

    name = "assignment"
    stage = Stage.ASSIGN
    provides = (AssignmentLink,)
    needs = ()

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        D, last = ctx.D, ctx.devices[-1]
        blk.units = pyo.Set(initialize=[ctx.ops[u] for u in ctx.units], doc="assignment units (ops or groups)")
        blk.devices = pyo.Set(initialize=ctx.devices, ordered=True, doc="devices in pipeline order")
        blk.y = pyo.Var(blk.units, blk.devices, domain=pyo.Binary,
                        bounds=lambda b, u, d: (1, 1) if d == last else (0, 1),
                        doc="y[u, b] = 1 iff unit u is completed by device b (on b or earlier)")
        nxt = {ctx.devices[b]: ctx.devices[b + 1] for b in range(D - 1)}
        blk.y_monotone = pyo.Constraint(
            blk.units, list(nxt), rule=lambda b, u, d: b.y[u, d] <= b.y[u, nxt[d]],
            doc="completed by b implies completed by b+1")
        ops, devs = ctx.ops, ctx.devices

        def x(v: int, b: int) -> Any:  # eq. (11)
            u = ops[ctx.unit[v]]
            return blk.y[u, devs[b]] - (blk.y[u, devs[b - 1]] if b > 0 else 0)

        forbidden = [(ops[u], devs[d]) for u in ctx.units for d in np.flatnonzero(~ctx.unit_allowed[u])]
        blk.forbidden = pyo.Constraint(
            pyo.Set(dimen=2, initialize=forbidden), rule=lambda b, u, d: x(ctx.graph.index[u], ctx.cluster.index[d]) == 0,
            doc="x[u, b] = 0 where unit u may not run on device b (allowed kinds)")
        ctx.provide(AssignmentLink(x=lambda v, b: x(v, b) if ctx.unit_allowed[ctx.unit[v], b] else 0,
                                   y=lambda v, b: blk.y[ops[ctx.unit[v]], devs[b]]), by=repr(self))

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        for (u, d), var in blk.y.items():
            yield var, float(warm.assign[ctx.graph.index[u]] <= ctx.cluster.index[d])


@register
class PinOps(BlockTemplate):
    """Pins: ``x_{v, d(v)} = 1`` for every pinned op ``v``."""

    name = "pin"

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        for v, d in ctx.pins.items():
            if not ctx.unit_allowed[ctx.unit[v], d]:
                raise InfeasibleError(f"Pin({ctx.ops[v]!r}, {ctx.devices[d]!r}): op {ctx.ops[v]!r} or an op "
                                      "colocated with it cannot run there; pin the group to an allowed device")
        pins = {ctx.ops[v]: d for v, d in ctx.pins.items()}
        blk.pinned = pyo.Constraint(list(pins), rule=lambda b, v: ctx.x(ctx.graph.index[v], pins[v]) == 1,
                                    doc="op v runs on the device it is pinned to")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        return iter(())


@register
class Colocation(BlockTemplate):
    """Colocation by equalities: ``x_{vd} = x_{rd}`` for each op ``v`` of a group with representative ``r``."""

    name = "colocation"

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        g = ctx.graph
        rows = [(ctx.ops[v], ctx.devices[d]) for grp in g.groups for v in grp[1:] for d in range(ctx.D)
                if ctx.op_allowed(v, d) or ctx.op_allowed(int(grp[0]), d)]
        rep = {ctx.ops[v]: int(grp[0]) for grp in g.groups for v in grp[1:]}

        def same(b: pyo.Block, v: str, d: str) -> Any:  # a represented device has no variables: 0 == 0
            mine, theirs = ctx.x(g.index[v], ctx.cluster.index[d]), ctx.x(rep[v], ctx.cluster.index[d])
            return settle(mine == theirs)
        blk.same_device = pyo.Constraint(pyo.Set(dimen=2, initialize=rows), rule=same,
                                         doc="op v runs on device d iff its group's representative does")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        return iter(())
