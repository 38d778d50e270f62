"""Replicated stages in the throughput IP (Tarnawski et al. App. C.2, written as an IP).

For every non-host device ``d`` and replica count ``r = 1..R`` a binary ``rho_{dr}`` says that the
stage on ``d`` runs on ``r`` devices (``sum_r rho_{dr} <= 1``, and ``>= x_{vd}`` for every unit
``v``, so a device holding ops picks a count). Replicas are devices of the same kind holding no
ops: per kind, ``sum_d sum_r r rho_{dr} <= devices of that kind``. With the ring all-reduce
``sync_d(r) = 2 (r-1)/r * param_d / B_d`` (:mod:`placement_dsl.replication`) the load bound is
linear once ``r`` is fixed, so each ``(d, r)`` gets a big-M row active when ``rho_{dr} = 1``::

    no overlap:   load_d + 2 (r-1) param_d / B_d <= r * bottleneck + M (1 - rho_{dr})
    overlapped:   part_d <= r * bottleneck + M (1 - rho_{dr})  for every part,
                  2 (r-1)/r param_d / B_d <= bottleneck + M (1 - rho_{dr})

Host devices keep the plain rows ``part_d <= bottleneck``. The solution's replica sets are read
back through :class:`ReplicaLink` (free devices of the stage's kind, in pipeline order).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..evaluate import Overlap
from ..replication import ALLREDUCE_FACTOR
from .base import AssignmentLink, BlockTemplate, BottleneckLink, Context, Link, LoadLink, Stage, Warm, register
from .lazy import pyo
from .load import warm_parts


@dataclass(frozen=True)
class ReplicaLink(Link):
    """``read(assign) -> {stage device: [replica devices]}`` from the solution's replica counts."""

    read: Callable[[np.ndarray], dict[str, list[str]]]


def _sync_rate(ctx: Context) -> np.ndarray:
    """``(n, D)`` all-reduce time per replica-pair factor: ``ALLREDUCE * param_v / B_d`` (scaled time)."""
    c = ctx.cluster
    return ALLREDUCE_FACTOR * np.outer(ctx.graph.param_bytes, np.where(c.host, 0.0, 1.0 / c.bandwidth)) / ctx.scale.time


@register
class ReplicatedMaxLoad(BlockTemplate):
    """App. C.2 as an IP: ``minimize bottleneck`` over per-replica loads, replica counts ``rho_{dr}`` (module doc)."""

    name = "replicated_max_load"
    stage = Stage.OBJECTIVE
    provides = (BottleneckLink, ReplicaLink)
    needs = (AssignmentLink, LoadLink)

    def __init__(self, max_per_stage: int = 2):
        self.R = int(max_per_stage)

    def __repr__(self) -> str:
        return f"ReplicatedMaxLoad(max_per_stage={self.R})"

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        load = ctx.link(LoadLink)
        acc = [d for d in range(ctx.D) if not ctx.cluster.host[d]]
        names = [ctx.devices[d] for d in acc]
        blk.counts = pyo.Set(initialize=range(1, self.R + 1), doc="replica counts r")
        blk.rho = pyo.Var(names, blk.counts, domain=pyo.Binary, doc="rho[d, r] = 1 iff d's stage runs on r devices")
        blk.bottleneck = pyo.Var(domain=pyo.NonNegativeReals, doc="the largest per-replica load (scaled time)")
        blk.one_count = pyo.Constraint(names, rule=lambda b, d: sum(b.rho[d, r] for r in b.counts) <= 1,
                                       doc="a stage has one replica count")
        rows = [(ctx.ops[u], ctx.devices[d]) for u in ctx.units for d in acc if ctx.unit_allowed[u, d]]
        blk.used = pyo.Constraint(pyo.Set(dimen=2, initialize=rows), rule=lambda b, u, d: ctx.x(
            ctx.graph.index[u], ctx.cluster.index[d]) <= sum(b.rho[d, r] for r in b.counts),
            doc="a device holding ops picks a replica count")
        self._budget(blk, ctx, acc)
        self._bounds(blk, ctx, load, acc)
        blk.goal = pyo.Objective(expr=blk.bottleneck, sense=pyo.minimize, doc="minimize the bottleneck load")
        ctx.provide(BottleneckLink(blk.bottleneck), by=repr(self))
        ctx.provide(ReplicaLink(lambda assign: self._read(blk, ctx, assign)), by=repr(self))

    def _budget(self, blk: pyo.Block, ctx: Context, acc: list[int]) -> None:
        kinds: dict[str, list[int]] = {}
        for d in acc:
            kinds.setdefault(ctx.cluster.devices[d].kind, []).append(d)
        blk.budget = pyo.Constraint(list(kinds), rule=lambda b, k: sum(
            r * b.rho[ctx.devices[d], r] for d in kinds[k] for r in b.counts) <= len(kinds[k]),
            doc="stages and their replicas use at most the devices of each kind")

    def _bounds(self, blk: pyo.Block, ctx: Context, load: LoadLink, acc: list[int]) -> None:
        costs, parts, rate = load.device_cost, load.parts, _sync_rate(ctx)
        big = (self.R + 1) * (ctx.work.max(axis=1, initial=0).sum() + 2 * ctx.comm.max(axis=1, initial=0).sum()
                              + self.R * rate.max(axis=1, initial=0).sum()) + 1.0

        def sync(d: int, r: int) -> Any:
            return (r - 1) * sum(rate[v, d] * ctx.x(v, d) for v in range(ctx.n) if rate[v, d] > 0 and ctx.op_allowed(v, d))

        none = ctx.overlap is Overlap.NONE
        names = {ctx.devices[d]: d for d in acc}
        rows = [(name, part, r) for name in names for part in parts for r in range(1, self.R + 1)]

        def row(b: pyo.Block, name: str, part: str, r: int) -> Any:
            d = names[name]
            lhs = costs[name, "total", part] + (sync(d, r) if none else 0)
            return lhs <= r * b.bottleneck + big * (1 - b.rho[name, r])

        blk.replica_load = pyo.Constraint(pyo.Set(dimen=3, initialize=rows), rule=row,
                                          doc="load (+ all-reduce) of a stage on r replicas is at most r x bottleneck")
        if not none:
            blk.replica_sync = pyo.Constraint(
                list(names), range(2, self.R + 1),
                rule=lambda b, name, r: sync(names[name], r) / r <= b.bottleneck + big * (1 - b.rho[name, r]),
                doc="the all-reduce of a stage on r replicas is at most the bottleneck (overlapped)")
        hosts = [(ctx.devices[d], part) for d in range(ctx.D) if ctx.cluster.host[d] for part in parts]
        blk.host_load = pyo.Constraint(pyo.Set(dimen=2, initialize=hosts),
                                       rule=lambda b, name, part: costs[name, "total", part] <= b.bottleneck,
                                       doc="host devices are not replicated")

    def _read(self, blk: pyo.Block, ctx: Context, assign: np.ndarray) -> dict[str, list[str]]:
        counts: dict[str, int] = {}
        for (name, r), var in blk.rho.items():
            if (pyo.value(var, exception=False) or 0.0) > 0.5:
                counts[name] = max(counts.get(name, 1), int(r))
        return replica_choice(ctx, assign, counts)

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        sets = warm.replica_sets
        used = np.bincount(warm.assign, minlength=ctx.D) > 0
        for (name, r), var in blk.rho.items():
            d = ctx.cluster.index[name]
            yield var, float(used[d] and len(sets[d]) == r)
        r = np.array([len(m) for m in sets], dtype=float)
        parts = warm_parts(ctx, warm, "total")
        sync = (r - 1) * (_sync_rate(ctx) * warm.X).sum(axis=0)
        if parts.shape[1] == 1:
            per = (parts[:, 0] + sync) / r
        else:
            per = np.maximum(parts.max(axis=1) / r, sync / r)
        yield blk.bottleneck, float(per[used].max(initial=0.0))


def replica_choice(ctx: Context, assign: np.ndarray, counts: dict[str, int]) -> dict[str, list[str]]:
    """Replica sets for the counts: each stage takes free devices of its kind, nearest after it first."""
    c = ctx.cluster
    free = set(np.flatnonzero(np.bincount(assign, minlength=ctx.D) == 0).tolist())
    out: dict[str, list[str]] = {}
    for name, r in sorted(counts.items(), key=lambda kv: c.index[kv[0]]):
        d = c.index[name]
        if r <= 1 or d in free:
            continue
        kind = c.devices[d].kind
        pool = sorted((e for e in free if c.devices[e].kind == kind), key=lambda e: ((e - d) % ctx.D, e))[:r - 1]
        free -= set(pool)
        out[name] = [name, *(c.names[e] for e in pool)]
    return out
