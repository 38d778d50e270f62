"""Memory per schedule in the IPs (:class:`~placement_dsl.training_terms.TrainingMemory`).

Per device ``d`` (in units of ``M_d``, :meth:`~.base.Context.memory_weight`, so the right-hand side is 1
whatever the other devices' capacities; :mod:`placement_dsl.training` for the accounting)::

    state * param_d + n_d * (act_d + in_d) <= M_d          (recompute: state * param_d + n_d * in_d + act_d + in_d)

with ``act_d = sum over forward ops of (out_bytes + activation_bytes) x_{vd}`` and ``in_d`` the
bytes of forward tensors ``d`` reads, once per tensor as the cost model counts them (hosts and
routed clusters alike): ``in_d = sum_u reads_{ud}`` with ``reads_{ud} >= bytes_u (x_{vd} - x_{ud})``
for every consumer ``v`` of a forward producer ``u`` (memory only wants ``reads`` small).
GPipe: ``n_d = m``, linear. 1F1B: ``n_d = sum_{d' >= d} used_{d'}`` (stages from ``d`` to the end,
``k - s``) with ``used_{d'} >= x_{vd'}``; the products ``used_{d'} * (act_d + in_d)`` are
linearized exactly by ``w_{dd'} >= (act_d + in_d) - A_d (1 - used_{d'})``, ``w >= 0`` (``A_d``:
the most ``act_d + in_d`` can be), since memory only wants ``w`` small.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import SpecError
from ..training import TrainingMemorySpec
from .base import AssignmentLink, BlockTemplate, Context, Stage, Warm, register, settle
from .lazy import pyo


def _terms(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """Per op, in model bytes: parameters and stashed forward activations."""
    g, scale = ctx.graph, ctx.scale.memory
    return g.param_bytes / scale, np.where(g.backward, 0.0, g.out_bytes + g.activation_bytes) / scale


def _fits(ctx: Context, d: int, need: Any) -> Any:
    """``need`` (units of ``M_d``) fits device ``d``'s memory."""
    return settle(need <= float(ctx.capacity[d] * ctx.memory_weight(d)))


def _read_edges(ctx: Context) -> list[tuple[int, int]]:
    """Edges ``(u, v)`` between assignment units whose producer ``u`` is a forward op with a tensor."""
    g = ctx.graph
    return [(u, v) for u, v in ctx.cross_edges() if not g.backward[u] and g.out_bytes[u] > 0]


@register
class TrainingMemoryCapacity(BlockTemplate):
    """Memory per schedule: ``state param_d + n_d (act_d + in_d) <= M_d`` (GPipe ``n = m``; 1F1B ``n = k - s``)."""

    name = "training_memory"
    stage = Stage.COST
    needs = (AssignmentLink,)

    def __init__(self, spec: TrainingMemorySpec | None = None):
        self.spec = spec or TrainingMemorySpec()
        if self.spec.schedule == "1f1b" and self.spec.microbatches is not None:
            raise SpecError("training_memory: the IP writes 1F1B's k - s micro-batches in flight; a microbatches "
                            "cap on it is not written (drop microbatches, or use method 'pipeline')")

    def __repr__(self) -> str:
        return f"TrainingMemoryCapacity({self.spec!r})"

    @staticmethod
    def _parts(ctx: Context, d: int, reads: dict[str, list[Any]]) -> tuple[Any, Any, Any]:
        """Device ``d``'s parameters, stashed activations and reads (``param_d, act_d, in_d``; units of ``M_d``)."""
        param, act = _terms(ctx)
        w = ctx.memory_weight(d)
        ops = [v for v in range(ctx.n) if ctx.op_allowed(v, d)]
        p = sum(float(w * param[v]) * ctx.x(v, d) for v in ops if param[v] > 0)
        a = sum(float(w * act[v]) * ctx.x(v, d) for v in ops if act[v] > 0)
        return p, a, sum(reads.get(ctx.devices[d], ()))

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        if not ctx.training:
            raise SpecError("training_memory: the graph has no backward pass")
        spec, devs = self.spec, [d for d in range(ctx.D) if np.isfinite(ctx.capacity[d])]
        reads, total = self._reads(blk, ctx, devs)
        parts = {d: self._parts(ctx, d, reads) for d in devs}  # each device's terms, built once for all its rows
        if spec.schedule == "gpipe":
            index = ctx.cluster.index
            blk.capacity = pyo.Constraint([ctx.devices[d] for d in devs], rule=lambda b, name: _fits(
                ctx, index[name], self._need(parts[index[name]], float(spec.microbatches))),
                doc="state and m stashed micro-batches fit device d's memory (in units of it)")
            return
        self._one_f_one_b(blk, ctx, devs, parts, total)

    @staticmethod
    def _reads(blk: pyo.Block, ctx: Context, devs: list[int]) -> tuple[dict[str, list[Any]], float]:
        """``reads[u, d]`` and its rows; returns the variables by device and every forward tensor's bytes."""
        g, ops = ctx.graph, ctx.ops
        read_edges = _read_edges(ctx)
        edges = [(u, v, d) for u, v in read_edges for d in devs if ctx.op_allowed(v, d)]
        keys = sorted({(ops[u], ctx.devices[d]) for u, _, d in edges}, key=lambda k: (g.index[k[0]], k[1]))
        blk.reads = pyo.Var(pyo.Set(dimen=2, initialize=keys), domain=pyo.NonNegativeReals,
                            doc="reads[u, d]: bytes of forward tensor u that device d reads and stashes (units of "
                            "d's memory)")
        rows = {(ops[u], ops[v], ctx.devices[d]): (u, v, d) for u, v, d in edges}
        scale = ctx.scale.memory

        def read(b: pyo.Block, un: str, vn: str, dn: str) -> Any:
            u, v, d = rows[un, vn, dn]
            own = ctx.x(u, d) if ctx.op_allowed(u, d) else 0.0
            return b.reads[un, dn] >= float(ctx.memory_weight(d) * g.out_bytes[u] / scale) * (ctx.x(v, d) - own)

        blk.read = pyo.Constraint(pyo.Set(dimen=3, initialize=list(rows)), rule=read,
                                  doc="a consumer on d of a forward tensor made elsewhere makes d read it")
        by_device: dict[str, list[Any]] = {}
        for (_, dn), var in blk.reads.items():
            by_device.setdefault(dn, []).append(var)
        return by_device, float(sum(g.out_bytes[u] for u in {u for u, _ in read_edges}) / scale)

    def _need(self, parts: tuple[Any, Any, Any], inflight: Any) -> Any:
        p, a, i = parts
        if self.spec.recompute:
            return self.spec.state_factor * p + inflight * i + a + i
        return self.spec.state_factor * p + inflight * (a + i)

    @staticmethod
    def _stash_bound(ctx: Context, d: int, read_total: float) -> float:
        """The most ``act_d + in_d`` can be (units of ``M_d``): every allowed forward op's activations and every
        forward tensor (``read_total``, in model units)."""
        _, act = _terms(ctx)
        allowed = [v for v in range(ctx.n) if ctx.op_allowed(v, d)]
        return float(ctx.memory_weight(d) * (act[allowed].sum() + read_total))

    def _one_f_one_b(self, blk: pyo.Block, ctx: Context, devs: list[int], parts: dict[int, tuple[Any, Any, Any]],
                     read_total: float) -> None:
        spec, D = self.spec, ctx.D
        blk.used = pyo.Var(ctx.devices, domain=pyo.Binary, doc="used[d] = 1 when device d holds a stage")
        rows = [(ctx.ops[u], ctx.devices[d]) for u in ctx.units for d in range(D) if ctx.unit_allowed[u, d]]
        blk.holds = pyo.Constraint(pyo.Set(dimen=2, initialize=rows), rule=lambda b, u, d: ctx.x(
            ctx.graph.index[u], ctx.cluster.index[d]) <= b.used[d], doc="a device holding ops is used")
        pairs = [(ctx.devices[d], ctx.devices[e]) for d in devs for e in range(d, D)]
        blk.stash = pyo.Var(pyo.Set(dimen=2, initialize=pairs), domain=pyo.NonNegativeReals,
                            doc="stash[d, e] = (act_d + in_d) * used[e]: d's micro-batch stash counted for stage e "
                            "(units of d's memory)")
        index = ctx.cluster.index
        bound = {d: self._stash_bound(ctx, d, read_total) for d in devs}

        def stash_row(b: pyo.Block, dn: str, en: str) -> Any:
            d = index[dn]
            _, a, i = parts[d]
            one = i if spec.recompute else a + i
            return b.stash[dn, en] >= one - bound[d] * (1 - b.used[en])

        blk.stash_link = pyo.Constraint(blk.stash.index_set(), rule=stash_row,
                                        doc="linearized product of the stash and 'stage e is used'")

        def capacity(b: pyo.Block, dn: str) -> Any:
            d = index[dn]
            p, a, i = parts[d]
            extra = a + i if spec.recompute else 0.0
            return _fits(ctx, d, spec.state_factor * p + sum(b.stash[dn, ctx.devices[e]] for e in range(d, D)) + extra)

        blk.capacity = pyo.Constraint([ctx.devices[d] for d in devs], rule=capacity,
                                      doc="state and k - s stashed micro-batches fit device d's memory")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        g, assign = ctx.graph, warm.assign
        read = np.zeros((ctx.n, ctx.D))
        for u, v in _read_edges(ctx):
            if assign[u] != assign[v]:
                read[u, assign[v]] = g.out_bytes[u] / ctx.scale.memory * ctx.memory_weight(int(assign[v]))
        for (un, dn), var in blk.reads.items():
            yield var, float(read[g.index[un], ctx.cluster.index[dn]])
        if self.spec.schedule == "gpipe":
            return
        used = np.bincount(assign, minlength=ctx.D) > 0
        _, act = _terms(ctx)
        weight = np.array([ctx.memory_weight(d) for d in range(ctx.D)])
        stash = (act @ warm.X) * weight + read.sum(axis=0)
        if self.spec.recompute:
            stash = read.sum(axis=0)
        for name, var in blk.used.items():
            yield var, float(used[ctx.cluster.index[name]])
        for (dn, en), var in blk.stash.items():
            yield var, float(stash[ctx.cluster.index[dn]] * used[ctx.cluster.index[en]])
