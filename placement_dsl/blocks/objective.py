"""Objective templates: epigraph variables over the device loads, and the one minimize objective."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .base import BlockTemplate, BottleneckLink, Context, LoadLink, Stage, Warm, register
from .lazy import pyo
from .load import warm_parts


def _bound_all(blk: pyo.Block, ctx: Context, var: Any, p: str, name: str, doc: str) -> None:
    load = ctx.link(LoadLink)
    costs = load.device_cost
    rows = [(d, part) for d in ctx.devices for part in load.parts]
    blk.add_component(name, pyo.Constraint(pyo.Set(dimen=2, initialize=rows),
                                           rule=lambda b, d, part: var >= costs[d, p, part], doc=doc))


@register
class MaxLoad(BlockTemplate):
    """``minimize bottleneck`` with ``bottleneck >= device_cost[d, total, part]`` (Archer eq. (5)-(6); Tarnawski Fig. 6)."""

    name = "max_load"
    stage = Stage.OBJECTIVE
    provides = (BottleneckLink,)
    needs = (LoadLink,)

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        blk.bottleneck = pyo.Var(domain=pyo.NonNegativeReals, doc="the largest device load (scaled time)")
        _bound_all(blk, ctx, blk.bottleneck, "total", "bottleneck_bound",
                   "bottleneck is at least every part of every device's load")
        blk.goal = pyo.Objective(expr=blk.bottleneck, sense=pyo.minimize, doc="minimize the bottleneck load")
        ctx.provide(BottleneckLink(blk.bottleneck), by=repr(self))

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        links = ctx.views.get("link_loads")  # a cluster's links are resources too (blocks/routes.py LinkLoads)
        busiest = float(links(warm).max(initial=0.0)) if links is not None else 0.0
        yield blk.bottleneck, max(float(warm_parts(ctx, warm, "total").max(initial=0.0)), busiest)


@register
class GPipeObjective(BlockTemplate):
    """GPipe (Tarnawski §5.3, App. A): ``minimize fw_bottleneck + bw_bottleneck``, each bounding its pass's loads."""

    name = "gpipe"
    stage = Stage.OBJECTIVE
    needs = (LoadLink,)

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        blk.fw_bottleneck = pyo.Var(domain=pyo.NonNegativeReals, doc="max_d FW_d (scaled time)")
        blk.bw_bottleneck = pyo.Var(domain=pyo.NonNegativeReals, doc="max_d BW_d (scaled time)")
        fw = "forward" if ctx.training else "total"
        _bound_all(blk, ctx, blk.fw_bottleneck, fw, "fw_bound", "fw_bottleneck bounds every forward load part")
        if ctx.training:
            _bound_all(blk, ctx, blk.bw_bottleneck, "backward", "bw_bound",
                       "bw_bottleneck bounds every backward load part")
        blk.goal = pyo.Objective(expr=blk.fw_bottleneck + blk.bw_bottleneck, sense=pyo.minimize,
                                 doc="minimize max_d FW_d + max_d BW_d")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        fw = warm_parts(ctx, warm, "forward" if ctx.training else "total")
        yield blk.fw_bottleneck, float(fw.max(initial=0.0))
        bw = warm_parts(ctx, warm, "backward").max(initial=0.0) if ctx.training else 0.0
        yield blk.bw_bottleneck, float(bw)
