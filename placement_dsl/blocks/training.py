"""Memory per schedule in the IPs (:class:`~placement_dsl.training_terms.TrainingMemory`).

Per device ``d`` (model units; :mod:`placement_dsl.training` for the accounting)::

    state * param_d + n_d * (act_d + in_d) <= M_d          (recompute: state * param_d + n_d * in_d + act_d + in_d)

with ``act_d = sum over forward ops of (out_bytes + activation_bytes) x_{vd}`` and ``in_d`` the
forward bytes ``d`` reads (the tensor cut's forward in-transfer times the device's bandwidth).
GPipe: ``n_d = m``, linear. 1F1B: ``n_d = sum_{d' >= d} used_{d'}`` (stages from ``d`` to the end,
``k - s``) with ``used_{d'} >= x_{vd'}``; the products ``used_{d'} * (act_d + in_d)`` are
linearized exactly by ``w_{dd'} >= (act_d + in_d) - A_d (1 - used_{d'})``, ``w >= 0`` (``A_d``:
the most ``act_d + in_d`` can be), since memory only wants ``w`` small.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyomo.environ as pyo

from ..errors import SpecError
from ..training import TrainingMemorySpec
from .base import AssignmentLink, BlockTemplate, Context, Stage, TransferLink, Warm, register


def _terms(ctx: Context) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per op, in model bytes: parameters, stashed forward activations, and bytes per unit of in-time."""
    g, c = ctx.graph, ctx.cluster
    param = g.param_bytes / ctx.scale.memory
    act = np.where(g.backward, 0.0, g.out_bytes + g.activation_bytes) / ctx.scale.memory
    per_time = np.where(c.host, 0.0, c.bandwidth) * ctx.scale.time / ctx.scale.memory  # time units -> bytes
    return param, act, per_time


@register
class TrainingMemoryCapacity(BlockTemplate):
    """Memory per schedule: ``state param_d + n_d (act_d + in_d) <= M_d`` (GPipe ``n = m``; 1F1B ``n = k - s``)."""

    name = "training_memory"
    stage = Stage.COST
    needs = (AssignmentLink, TransferLink)

    def __init__(self, spec: TrainingMemorySpec | None = None):
        self.spec = spec or TrainingMemorySpec()
        if self.spec.schedule == "1f1b" and self.spec.microbatches is not None:
            raise SpecError("training_memory: the IP writes 1F1B's k - s micro-batches in flight; a microbatches "
                            "cap on it is not written (drop microbatches, or use method 'pipeline')")

    def __repr__(self) -> str:
        return f"TrainingMemoryCapacity({self.spec!r})"

    def _exprs(self, ctx: Context, d: int) -> tuple[Any, Any, Any]:
        param, act, per_time = _terms(ctx)
        ops = [v for v in range(ctx.n) if ctx.op_allowed(v, d)]
        p = sum(param[v] * ctx.x(v, d) for v in ops if param[v] > 0)
        a = sum(act[v] * ctx.x(v, d) for v in ops if act[v] > 0)
        i = per_time[d] * ctx.comm_expr(d, "forward", "in") if per_time[d] > 0 else 0.0
        return p, a, i

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        if not ctx.training:
            raise SpecError("training_memory: the graph has no backward pass")
        spec, devs = self.spec, [d for d in range(ctx.D) if np.isfinite(ctx.capacity[d])]
        names = [ctx.devices[d] for d in devs]
        if spec.schedule == "gpipe":
            blk.capacity = pyo.Constraint(names, rule=lambda b, name: self._need(ctx, ctx.cluster.index[name],
                                                                                  float(spec.microbatches))
                                          <= float(ctx.capacity[ctx.cluster.index[name]]),
                                          doc="state and m stashed micro-batches fit device d's memory")
            return
        self._one_f_one_b(blk, ctx, devs)

    def _need(self, ctx: Context, d: int, inflight: Any) -> Any:
        p, a, i = self._exprs(ctx, d)
        if self.spec.recompute:
            return self.spec.state_factor * p + inflight * i + a + i
        return self.spec.state_factor * p + inflight * (a + i)

    def _stash_bound(self, ctx: Context, d: int) -> float:
        _, act, per_time = _terms(ctx)
        allowed = [v for v in range(ctx.n) if ctx.op_allowed(v, d)]
        if ctx.cluster.routed:  # a read takes up to its slowest route, not the device's own bandwidth
            from .routes import longest_reads

            comm = longest_reads(ctx)
        else:
            comm = ctx.comm
        reads = per_time[d] * comm[:, d][~ctx.graph.backward].sum()
        return float(act[allowed].sum() + reads)

    def _one_f_one_b(self, blk: pyo.Block, ctx: Context, devs: list[int]) -> None:
        spec, D = self.spec, ctx.D
        blk.used = pyo.Var(ctx.devices, domain=pyo.Binary, doc="used[d] = 1 when device d holds a stage")
        rows = [(ctx.ops[u], ctx.devices[d]) for u in ctx.units for d in range(D) if ctx.unit_allowed[u, d]]
        blk.holds = pyo.Constraint(pyo.Set(dimen=2, initialize=rows), rule=lambda b, u, d: ctx.x(
            ctx.graph.index[u], ctx.cluster.index[d]) <= b.used[d], doc="a device holding ops is used")
        pairs = [(ctx.devices[d], ctx.devices[e]) for d in devs for e in range(d, D)]
        blk.stash = pyo.Var(pyo.Set(dimen=2, initialize=pairs), domain=pyo.NonNegativeReals,
                            doc="stash[d, e] = (act_d + in_d) * used[e]: d's micro-batch stash counted for stage e")
        index = ctx.cluster.index

        def stash_row(b: pyo.Block, dn: str, en: str) -> Any:
            d = index[dn]
            _, a, i = self._exprs(ctx, index[dn])
            one = i if spec.recompute else a + i
            return b.stash[dn, en] >= one - self._stash_bound(ctx, d) * (1 - b.used[en])

        blk.stash_link = pyo.Constraint(blk.stash.index_set(), rule=stash_row,
                                        doc="linearized product of the stash and 'stage e is used'")

        def capacity(b: pyo.Block, dn: str) -> Any:
            d = index[dn]
            p, a, i = self._exprs(ctx, d)
            extra = a + i if spec.recompute else 0.0
            return (spec.state_factor * p + sum(b.stash[dn, ctx.devices[e]] for e in range(d, D)) + extra
                    <= float(ctx.capacity[d]))

        blk.capacity = pyo.Constraint([ctx.devices[d] for d in devs], rule=capacity,
                                      doc="state and k - s stashed micro-batches fit device d's memory")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        if self.spec.schedule == "gpipe":
            return
        used = np.bincount(warm.assign, minlength=ctx.D) > 0
        _, act, per_time = _terms(ctx)
        stash = (act @ warm.X) + per_time * warm.transfer("forward", "in")
        if self.spec.recompute:
            stash = per_time * warm.transfer("forward", "in")
        for name, var in blk.used.items():
            yield var, float(used[ctx.cluster.index[name]])
        for (dn, en), var in blk.stash.items():
            yield var, float(stash[ctx.cluster.index[dn]] * used[ctx.cluster.index[en]])
