"""Strengthening templates of the latency IP: rows every schedule satisfies that raise its LP bound.

The published IP (Tarnawski et al., NeurIPS 2020, Fig. 3) has a root LP bound of 0: its big-M
rows vanish at fractional assignments. These templates add what holds in every schedule:

=================  ====================  =============================================================
block              template              rows
=================  ====================  =============================================================
``path_cuts``      :class:`PathCuts`     longest-path chains of op times and moved tensors; memory runs;
                                         path spans with side inputs
``run_flows``      :class:`RunFlows`     a flow over each longest path's runs (its LP is the DP over runs)
``symmetry``       :class:`DeviceOrder`  interchangeable devices ordered by their first unit
=================  ====================  =============================================================
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import numpy as np

from ..constraints import DagOrder
from .base import AssignmentLink, BlockTemplate, Context, Stage, Warm, register, settle
from .latency import LatencyLink, PathLink, RunLink, SlotLink
from .latency_data import (
    Bounds,
    accelerators,
    bounds,
    capacity_bound,
    critical_paths,
    fresh_memory,
    longest_paths,
    memory_segments,
    merged_hosts,
    run_arcs,
    run_path_bound,
    warm_times,
)
from .lazy import pyo


def op_time(ctx: Context, v: int) -> Any:
    """``t_v(x) = sum_d t_{vd} x_{vd}``: op ``v``'s running time where it runs."""
    return sum(float(ctx.work[v, d]) * ctx.x(v, d) for d in range(ctx.D) if ctx.work[v, d] > 0 and ctx.op_allowed(v, d))


@register
class PathCuts(BlockTemplate):
    """Longest-path cuts: rows every schedule satisfies that carry times, transfers and memory into the LP bound.

    ``done[v]`` is the end of op ``v``'s own computation: its slot's start, reads and the
    slot's ops up to ``v`` in topological order (``ready`` on a host). ``enter[u, v, a]`` /
    ``leave[u, v, a]`` say edge ``(u, v)`` enters / leaves accelerator ``a`` (so ``a`` reads /
    writes ``u``'s tensor), linearized exactly (three rows each). Per edge:
    ``done_v >= done_u + t_v(x) + sum_a c_{ua} (enter + leave)_{uva}`` and ``ready_v >= done_v``.
    Per segment of a longest path ``P`` whose memory needs ``R >= 2`` accelerators
    (:func:`~.latency_data.memory_segments`): ``sum_{e in P} sum_a (enter + leave)_{ea} >= 2 R
    - 2 off - x_{first,acc} - x_{last,acc}``: ``P``'s ops on accelerators form at least ``R``
    runs (fewer only by what its host ops free: ``off`` is the mixed-integer rounding of their
    memory), each entered and left across an edge of ``P`` unless it starts or ends ``P``.
    Per longest path, a *span* (:meth:`_spans`) bounds TotalLatency by the slots it visits.
    """

    name = "path_cuts"
    stage = Stage.COST
    provides = (PathLink,)
    needs = (AssignmentLink, LatencyLink)

    def __init__(self, horizon: float | None = None):
        self.horizon = horizon

    def __repr__(self) -> str:
        return f"PathCuts(horizon={self.horizon!r})"

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        bd, ops, idx = bounds(ctx, self.horizon), ctx.ops, ctx.graph.index
        blk.done = pyo.Var(ops, bounds=lambda b, v: (bd.head[idx[v]], bd.horizon - bd.tail[idx[v]]),
                           doc="end of op v's own computation")
        acc = accelerators(ctx)
        by_edge = self._splits(blk, ctx, acc)
        moved = lambda b, u, v: sum(float(ctx.comm[idx[u], ctx.cluster.index[a]]) * (b.enter[u, v, a] + b.leave[u, v, a])
                                    for a in by_edge.get((u, v), ()))
        g = ctx.graph
        edges = [(ops[u], ops[v]) for u, v in zip(g.src.tolist(), g.dst.tolist())]
        blk.longest_path = pyo.Constraint(pyo.Set(dimen=2, initialize=edges),
                                          rule=lambda b, u, v: b.done[v] >= b.done[u] + op_time(ctx, idx[v]) + moved(b, u, v),
                                          doc="v ends its computation after u's, its own time and u's tensor's moves")
        ready = ctx.link(LatencyLink).ready
        blk.done_first = pyo.Constraint(ops, rule=lambda b, v: ready[v] >= b.done[v],
                                        doc="an op's output is ready after its computation")
        self._memory_paths(blk, ctx, bd, acc, by_edge)
        ctx.provide(PathLink(blk.done, self._spans(blk, ctx, bd, by_edge), blk.enter, blk.leave, by_edge), by=repr(self))

    @staticmethod
    def _splits(blk: pyo.Block, ctx: Context, acc: list[int]) -> dict[tuple[str, str], list[str]]:
        """``enter``/``leave``: the edge's tensor is read into / written out of accelerator ``a``."""
        ops, devs, idx, dev = ctx.ops, ctx.devices, ctx.graph.index, ctx.cluster.index
        keys = [(ops[u], ops[v], devs[a]) for u, v in ctx.cross_edges() for a in acc
                if ctx.op_allowed(u, a) or ctx.op_allowed(v, a)]
        edges = pyo.Set(dimen=3, initialize=keys)
        blk.enter = pyo.Var(edges, bounds=(0, 1), doc="enter[u, v, a] = 1 iff v runs on accelerator a and u does not")
        blk.leave = pyo.Var(edges, bounds=(0, 1), doc="leave[u, v, a] = 1 iff u runs on accelerator a and v does not")
        X = lambda v, a: ctx.x(idx[v], dev[a])
        blk.enter_lo = pyo.Constraint(edges, rule=lambda b, u, v, a: b.enter[u, v, a] >= X(v, a) - X(u, a),
                                      doc="v on a and u not: a reads u's tensor")
        blk.enter_on = pyo.Constraint(edges, rule=lambda b, u, v, a: b.enter[u, v, a] <= X(v, a), doc="enter needs v on a")
        blk.enter_off = pyo.Constraint(edges, rule=lambda b, u, v, a: b.enter[u, v, a] <= 1 - X(u, a),
                                       doc="enter needs u off a")
        blk.leave_lo = pyo.Constraint(edges, rule=lambda b, u, v, a: b.leave[u, v, a] >= X(u, a) - X(v, a),
                                      doc="u on a and v not: a writes u's tensor")
        blk.leave_on = pyo.Constraint(edges, rule=lambda b, u, v, a: b.leave[u, v, a] <= X(u, a), doc="leave needs u on a")
        blk.leave_off = pyo.Constraint(edges, rule=lambda b, u, v, a: b.leave[u, v, a] <= 1 - X(v, a),
                                       doc="leave needs v off a")
        by_edge: dict[tuple[str, str], list[str]] = {}
        for u, v, a in keys:
            by_edge.setdefault((u, v), []).append(a)
        return by_edge

    @staticmethod
    def _spans(blk: pyo.Block, ctx: Context, bd: Bounds, by_edge: dict[tuple[str, str], list[str]]) -> list[Any]:
        """Per longest path ``P``: its ops' times, every tensor read into its ops' slots (once) and its writes.

        The slots ``P`` visits run one after another (each starts after the previous one's
        output along ``P``), so TotalLatency is at least the sum of their durations, which
        include side inputs of ``P``'s ops."""
        ops, idx, dev, g = ctx.ops, ctx.graph.index, ctx.cluster.index, ctx.graph
        c = lambda u, a: float(ctx.comm[idx[u], dev[a]])
        spans = []
        for p in longest_paths(ctx, bd, trim=False):
            pos, first = {v: k for k, v in enumerate(p)}, {}
            for k, v in enumerate(p):  # each tensor once: at P's next op for P's own, else at its first consumer
                for w in g.predecessors(v).tolist():
                    if pos.get(w, k - 1) == k - 1:
                        first.setdefault(w, v)
            reads = [(ops[w], ops[v]) for w, v in first.items()]
            writes = [(ops[u], ops[v]) for u, v in pairwise(p)]
            spans.append(sum(op_time(ctx, v) for v in p)
                         + sum(c(w, a) * blk.enter[w, v, a] for w, v in reads for a in by_edge.get((w, v), ()))
                         + sum(c(u, a) * blk.leave[u, v, a] for u, v in writes for a in by_edge.get((u, v), ())))
        return spans


    @staticmethod
    def _memory_paths(blk: pyo.Block, ctx: Context, bd: Bounds, acc: list[int],
                      by_edge: dict[tuple[str, str], list[str]]) -> None:
        M, ops = capacity_bound(ctx, acc), ctx.ops
        segments = memory_segments(ctx, bd, M) if math.isfinite(M) and M > 0 else []
        # a segment no accelerator may run any op of holds on the hosts: its row has no variable (and always holds)
        segments = [(p, need) for p, need in segments if any(ctx.op_allowed(v, a) for v in p for a in acc)]
        on_acc = lambda v: sum(ctx.x(v, a) for a in acc)

        def runs(b: pyo.Block, k: int) -> Any:
            p, need = segments[k]
            crossed = sum(b.enter[ops[u], ops[v], a] + b.leave[ops[u], ops[v], a] for u, v in pairwise(p)
                          for a in by_edge.get((ops[u], ops[v]), ()))
            fresh = fresh_memory(ctx, p) / M
            frac = float(fresh.sum()) - (need - 1)  # MIR: a host group of memory m saves m / (M frac) runs,
            # and no more than ceil(m / M): the accelerators it would have taken (a group above M takes none);
            # f / frac rounded up by 1e-9, so that where it equals ceil(f) roundoff cannot leave it a hair below
            off = sum(min(math.ceil(f - 1e-9), float(f / frac) + 1e-9) * (1 - on_acc(v)) for v, f in zip(p, fresh)
                      if f > 0)
            return crossed >= 2 * need - 2 * off - on_acc(p[0]) - on_acc(p[-1])
        blk.segments = pyo.Set(initialize=range(len(segments)), doc="segments of longest paths too big for one accelerator")
        blk.memory_runs = pyo.Constraint(blk.segments, rule=runs,
                                         doc="a segment needing R accelerators crosses their boundaries 2R - 2 times")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        t = warm_times(ctx, warm, ctx.link(SlotLink).q)
        idx, dev = ctx.graph.index, ctx.cluster.index
        for v, var in blk.done.items():
            yield var, float(t.done[idx[v]])
        on = lambda w, a: warm.assign[idx[w]] == dev[a]
        for (u, v, a), var in blk.enter.items():
            yield var, float(on(v, a) and not on(u, a))
            yield blk.leave[u, v, a], float(on(u, a) and not on(v, a))


@register
class RunFlows(BlockTemplate):
    """Run flows: along a longest path ``P``, a unit flow over positions ``0..m`` chooses its runs.

    An arc ``(i, j)`` puts ``P[i..j-1]`` on one accelerator (memory at most ``M``) at the cost of
    its running times, the boundary reads and writes and the least price of its side inputs
    (:func:`run_arcs`); a host arc runs one op on a host. The flow covers each op once, its
    accelerator arcs are ``x_{v,acc}``, and a run starts (ends) exactly where ``P``'s edge
    enters (leaves) an accelerator — ``enter``/``leave`` of the path cuts. In an integral
    solution the flow is ``P``'s runs and its cost is at most the latency (the slots ``P``
    visits run in turn); the LP of the flow alone is the DP over ``P``'s runs.
    """

    name = "run_flows"
    stage = Stage.COST
    provides = (RunLink,)
    needs = (AssignmentLink, PathLink, SlotLink)

    def __init__(self, horizon: float | None = None, paths: int = 3):
        self.horizon, self.paths = horizon, paths

    def __repr__(self) -> str:
        return f"RunFlows(horizon={self.horizon!r}, paths={self.paths})"

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        bd, acc, link = bounds(ctx, self.horizon), accelerators(ctx), ctx.link(PathLink)
        chosen = critical_paths(ctx, bd, self.paths) if acc else []
        whole = ctx.link(SlotLink).q == 1  # one subgraph per accelerator: a run's slot holds what lies between its ops
        arcs = [(k, i, j, cost) for k, p in enumerate(chosen) for (i, j), cost in run_arcs(ctx, p, acc, whole).items()]
        blk.arcs = pyo.Set(dimen=3, initialize=[(k, i, j) for k, i, j, _ in arcs], doc="(path, first, end) of each arc")
        blk.flow = pyo.Var(blk.arcs, bounds=(0, 1), doc="flow[k, i, j] = 1 iff path k's ops i..j-1 form one run "
                           "(j = i + 1 with a negative i: a host op)")
        cost = {(k, i, j): c for k, i, j, c in arcs}
        out: dict[tuple[int, int], list] = {}
        into: dict[tuple[int, int], list] = {}
        for k, i, j in blk.arcs:
            out.setdefault((k, i if i >= 0 else -i - 1), []).append((k, i, j))
            into.setdefault((k, j), []).append((k, i, j))
        nodes = [(k, t) for k, p in enumerate(chosen) for t in range(len(p) + 1)]
        ends = {k: len(p) for k, p in enumerate(chosen)}
        blk.balance = pyo.Constraint(pyo.Set(dimen=2, initialize=nodes), rule=lambda b, k, t: settle(sum(
            b.flow[a] for a in out.get((k, t), ())) - sum(b.flow[a] for a in into.get((k, t), ()))
            == (1 if t == 0 else -1 if t == ends[k] else 0)), doc="one unit of flow from P's start to its end")
        self._link(blk, ctx, chosen, acc, link)
        ctx.provide(RunLink([sum(c * blk.flow[k, i, j] for (k2, i, j), c in cost.items() if k2 == k)
                             for k in range(len(chosen))], run_path_bound(ctx, self.horizon, whole)),
                    by=repr(self))

    @staticmethod
    def _link(blk: pyo.Block, ctx: Context, chosen: list[tuple[int, ...]], acc: list[int], link: PathLink) -> None:
        ops, devs = ctx.ops, ctx.devices
        runs = [(k, i, j) for k, i, j in blk.arcs if i >= 0]
        cover = [(k, t) for k, p in enumerate(chosen) for t in range(len(p))]

        def covered(b: pyo.Block, k: int, t: int) -> Any:  # an op no accelerator may run is covered by no run
            flow = sum(b.flow[a] for a in runs if a[0] == k and a[1] <= t < a[2])
            on = sum(ctx.x(chosen[k][t], a) for a in acc)
            return settle(flow == on)
        blk.on_acc = pyo.Constraint(pyo.Set(dimen=2, initialize=cover), rule=covered,
                                    doc="the runs covering an op put it on an accelerator")
        edges = link.edges or {}

        def cross(k: int, t: int, var: Any, at: int) -> Any:
            u, v = ops[chosen[k][t - 1]], ops[chosen[k][t]]
            side = sum(var[u, v, a] for a in edges.get((u, v), ()))
            arcs = sum(blk.flow[a] for a in runs if a[0] == k and a[at] == t)
            return settle(arcs == side)
        inner = [(k, t) for k, p in enumerate(chosen) for t in range(1, len(p))]
        blk.starts = pyo.Constraint(pyo.Set(dimen=2, initialize=inner), rule=lambda b, k, t: cross(k, t, link.enter, 1),
                                    doc="a run starts where P's edge enters an accelerator")
        blk.ends = pyo.Constraint(pyo.Set(dimen=2, initialize=inner), rule=lambda b, k, t: cross(k, t, link.leave, 2),
                                  doc="a run ends where P's edge leaves an accelerator")
        del devs

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        bd, acc = bounds(ctx, self.horizon), set(accelerators(ctx))
        chosen = critical_paths(ctx, bd, self.paths) if acc else []
        taken = set()
        for k, p in enumerate(chosen):
            dev = [int(warm.assign[v]) for v in p]
            t = 0
            while t < len(p):
                if dev[t] not in acc:
                    taken.add((k, -t - 1, t + 1))
                    t += 1
                    continue
                j = t + 1
                while j < len(p) and dev[j] == dev[t]:
                    j += 1
                taken.add((k, t, j))
                t = j
        for key, var in blk.flow.items():
            yield var, float(key in taken)


@register
class DeviceOrder(BlockTemplate):
    """Symmetry: among interchangeable devices, each one's first unit (in index order) follows the previous one's.

    Devices are taken in ``order`` (a warm start's :func:`first_use_order`, so the start keeps
    satisfying the rows), then by index. ``used[u, d]`` is 1 when device ``d`` holds unit ``u``
    or an earlier one; ``x_{u, next(d)} <= used[prev(u), d]``. Every placement has a relabeling
    that satisfies the rows, so the optimum is kept. Skipped under DAG order (the order of
    devices means something there) and for pinned devices.
    """

    name = "symmetry"

    def __init__(self, order: tuple[str, ...] = ()):
        self.order = tuple(order)

    def __repr__(self) -> str:
        return f"DeviceOrder(order={self.order!r})"

    def pairs(self, ctx: Context) -> list[tuple[int, int]]:
        """Consecutive devices ``(d, e)`` of each class of interchangeable devices with variables."""
        if ctx.problem.has(DagOrder):
            return []
        rep, pinned = merged_hosts(ctx), set(ctx.pins.values())
        rank = {ctx.cluster.index[n]: i for i, n in enumerate(self.order) if n in ctx.cluster.index}
        out = []
        for group in ctx.cluster.homogeneous_groups():
            free = sorted((d for d in group if rep[d] == d and d not in pinned), key=lambda d: (rank.get(d, ctx.D), d))
            out += list(pairwise(free))
        return out

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        pairs, units, ops, devs = self.pairs(ctx), ctx.units.tolist(), ctx.ops, ctx.devices
        firsts = sorted({d for d, _ in pairs})
        blk.used = pyo.Var([ops[u] for u in units], [devs[d] for d in firsts], bounds=(0, 1),
                           doc="used[u, d] = 1 iff device d holds unit u or an earlier unit")
        prev = {ops[u]: ops[p] for p, u in pairwise(units)}
        idx, dev = ctx.graph.index, ctx.cluster.index
        blk.count = pyo.Constraint(
            blk.used.index_set(), rule=lambda b, u, d: b.used[u, d] <= (b.used[prev[u], d] if u in prev else 0)
            + ctx.x(idx[u], dev[d]), doc="a device is used by u only if it holds u or was used before")
        rows = [(ops[u], devs[d], devs[e]) for d, e in pairs for u in units if ctx.unit_allowed[u, e]]
        blk.after = pyo.Constraint(
            pyo.Set(dimen=3, initialize=rows),
            rule=lambda b, u, d, e: ctx.x(idx[u], dev[e]) <= (b.used[prev[u], d] if u in prev else 0),
            doc="device e's first unit comes after device d's (interchangeable d before e)")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        seen = np.zeros(ctx.D, dtype=bool)
        firsts = {ctx.cluster.index[d] for _, d in blk.used.index_set()}
        for u in ctx.units.tolist():
            seen[warm.assign[u]] = True
            for d in firsts:
                yield blk.used[ctx.ops[u], ctx.devices[d]], float(seen[d])
