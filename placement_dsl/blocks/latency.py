"""Tarnawski et al.'s latency IP (NeurIPS 2020, §4, Fig. 3; §4.1, Fig. 4) as block templates.

An accelerator runs its ops as invocation *slots* ``(a, j)``: one per accelerator in Fig. 3,
``q`` per accelerator in Fig. 4, run in order (constraint 14). Slot ``j`` holds the ops of
accelerator ``a`` whose subgraph level is ``j`` (the most runs of ``a``'s ops on a path ending
in the op, §4.1), so the slots are exactly the contiguous subgraphs the cost model invokes.
All CPU cores together are Fig. 3's index 0: a host op runs as soon as its inputs are ready.

=================  ==========================  ====================================================
block              template                    paper
=================  ==========================  ====================================================
``assignment``     :class:`LatencyAssignment`  Fig. 3 (1); identical CPUs merged into one index
``subgraphs``      :class:`SubgraphSlots`      Fig. 3 (2) by Lemma 4.1; Fig. 4 (2) by levels
``invocations``    :class:`InvocationTimes`    Fig. 3 (6)-(10), Fig. 4 (14)
``latency``        :class:`LatencyObjective`   Fig. 3 ``min TotalLatency``, with the cuts' bounds
=================  ==========================  ====================================================

The strengthening blocks (longest-path cuts, run flows, symmetry) are in :mod:`.latency_cuts`;
the data they share in :mod:`.latency_data`. Big-Ms (Lemma 4.1's ``H``) come from the data: the
horizon ``H`` is a known latency (a heuristic's or the warm start's) or else the serial bound
(every invocation one after another), and each op's *head* / *tail* is the longest path of
fastest running times into / out of it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..constraints import Contiguous
from .assignment import Assignment
from .base import AssignmentLink, BlockTemplate, Context, Link, Stage, TransferLink, Warm, register
from .latency_data import Bounds, Slot, accelerators, bounds, merged_hosts, reach, warm_times
from .lazy import pyo


@dataclass(frozen=True)
class SlotLink(Link):
    """Invocation slots: ``member(v, slot)`` is 1 iff op ``v`` runs in the slot; ``transfer(slot)`` its in + out time."""

    slots: tuple[Slot, ...]
    member: Callable[[int, Slot], Any]
    transfer: Callable[[Slot], Any]
    q: int = 1


@dataclass(frozen=True)
class LatencyLink(Link):
    """``ready[v]``: op ``v``'s output is in host memory (Fig. 3 ``Latency_v``); ``finish[slot]``: SubgraphFinish."""

    ready: Any
    finish: Any


@dataclass(frozen=True)
class PathLink(Link):
    """``done[v]``: the end of op ``v``'s own computation; ``spans``: lower bounds on TotalLatency along paths."""

    done: Any
    spans: list[Any]
    enter: Any = None
    leave: Any = None
    edges: dict[tuple[str, str], list[str]] | None = None


@dataclass(frozen=True)
class RunLink(Link):
    """``costs``: per path, the cost of its run flow (a lower bound on TotalLatency); ``bound``: the
    cheapest such cost, by the DP over the runs (:func:`~.latency_data.run_path_bound`, model units)."""

    costs: list[Any]
    bound: float = 0.0


@register
class LatencyAssignment(Assignment):
    """Fig. 3 (1): one-hot ``x_{ud}``; interchangeable unbounded hosts share one index (:func:`merged_hosts`)."""

    def representatives(self, ctx: Context) -> np.ndarray:
        return merged_hosts(ctx)


@register
class SubgraphSlots(BlockTemplate):
    """Fig. 3 (2) / Fig. 4 (2): slot ``(a, j)`` holds accelerator ``a``'s ops of subgraph level ``j <= q``.

    ``q = 1``: each accelerator's set is contiguous, by Lemma 4.1's ``z`` (11)-(13) over the
    accelerators (skipped when a :class:`Contiguous` term's block covers every device), and the
    tensor cut's ``CommIn``/``CommOut`` price the transfers. ``q > 1``: ``lam[v, a, j] = 1`` iff
    op ``v``'s level for ``a`` is at least ``j`` — ``lam_j(v) = OR_u (lam_j(u) OR enter_j(u, v))``
    with ``enter_j(u, v) = x_{va} AND NOT x_{ua} AND lam_{j-1}(u)`` — fixed by ``x`` (so
    continuous); no edge may enter level ``q + 1``; ``s[v, a, j]`` is slot membership and
    ``tin``/``tout`` the slots' own ``CommIn``/``CommOut`` (4)-(5).
    """

    name = "subgraphs"
    provides = (SlotLink,)

    def __init__(self, q: int = 1):
        self.q = int(q)
        self.needs = (AssignmentLink, TransferLink) if self.q == 1 else (AssignmentLink,)

    def __repr__(self) -> str:
        return f"SubgraphSlots(q={self.q})"

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        acc = accelerators(ctx)
        slots = tuple((a, j) for a in acc for j in range(1, self.q + 1))
        if self.q == 1:
            if not ctx.problem.has(Contiguous):
                self._contiguity(blk, ctx, acc)
            link = SlotLink(slots, lambda v, s: ctx.x(v, s[0]), lambda s: sum(
                ctx.comm_expr(s[0], p, "in") + ctx.comm_expr(s[0], p, "out") for p in ctx.passes), self.q)
        else:
            link = self._levels(blk, ctx, acc, slots)
        ctx.provide(link, by=repr(self))

    @staticmethod
    def _edges(ctx: Context) -> list[tuple[int, int]]:
        return list(zip(ctx.graph.src.tolist(), ctx.graph.dst.tolist()))

    def _contiguity(self, blk: pyo.Block, ctx: Context, acc: list[int]) -> None:
        ops, devs, x = ctx.ops, ctx.devices, ctx.x
        idx, dev = ctx.graph.index, ctx.cluster.index
        blk.z = pyo.Var(ops, [devs[a] for a in acc], bounds=(0, 1),
                        doc="z[v, a] = 1 if some op of accelerator a is reachable from v (Lemma 4.1)")
        cover = [(ops[v], devs[a]) for a in acc for v in range(ctx.n) if ctx.op_allowed(v, a)]
        blk.z_cover = pyo.Constraint(pyo.Set(dimen=2, initialize=cover),
                                     rule=lambda b, v, a: b.z[v, a] >= x(idx[v], dev[a]), doc="z lies above x (11)")
        mono = [(ops[u], ops[v], devs[a]) for a in acc for u, v in self._edges(ctx)]
        blk.z_monotone = pyo.Constraint(pyo.Set(dimen=3, initialize=mono), rule=lambda b, u, v, a: b.z[v, a] <= b.z[u, a],
                                        doc="z is non-increasing along every edge (12)")
        leave = [(ops[u], ops[v], devs[a]) for a in acc for u, v in ctx.cross_edges() if ctx.op_allowed(u, a)]
        blk.z_leave = pyo.Constraint(
            pyo.Set(dimen=3, initialize=leave),
            rule=lambda b, u, v, a: b.z[v, a] <= x(idx[v], dev[a]) - x(idx[u], dev[a]) + 1,
            doc="an edge leaving accelerator a drops z to 0 (13)")

    def _levels(self, blk: pyo.Block, ctx: Context, acc: list[int], slots: tuple[Slot, ...]) -> SlotLink:
        q, ops, devs, x = self.q, ctx.ops, ctx.devices, ctx.x
        idx, dev = ctx.graph.index, ctx.cluster.index
        A, J = [devs[a] for a in acc], list(range(1, q + 1))
        blk.lam = pyo.Var(ops, A, J, bounds=(0, 1), doc="lam[v, a, j] = 1 iff op v's subgraph level for a is >= j")
        enter = [(ops[u], ops[v], devs[a], j) for a in acc for u, v in ctx.cross_edges() if ctx.op_allowed(v, a)
                 for j in J[1:]]
        blk.enter = pyo.Var(pyo.Set(dimen=4, initialize=enter), bounds=(0, 1),
                            doc="enter[u, v, a, j] = 1 iff edge (u, v) enters a (v on a, u not) from level j-1")
        X = lambda v, a: x(idx[v], dev[a])
        blk.enter_lo = pyo.Constraint(blk.enter.index_set(), rule=lambda b, u, v, a, j: b.enter[u, v, a, j]
                                      >= X(v, a) - X(u, a) + b.lam[u, a, j - 1] - 1, doc="all three hold: enter")
        blk.enter_v = pyo.Constraint(blk.enter.index_set(), rule=lambda b, u, v, a, j: b.enter[u, v, a, j] <= X(v, a),
                                     doc="enter only onto a")
        blk.enter_u = pyo.Constraint(blk.enter.index_set(),
                                     rule=lambda b, u, v, a, j: b.enter[u, v, a, j] <= 1 - X(u, a), doc="enter from off a")
        blk.enter_lam = pyo.Constraint(blk.enter.index_set(), rule=lambda b, u, v, a, j: b.enter[u, v, a, j]
                                       <= b.lam[u, a, j - 1], doc="enter only past level j-1")
        self._lam_rows(blk, ctx, acc, X)
        return self._slot_cut(blk, ctx, acc, slots, X)

    def _lam_rows(self, blk: pyo.Block, ctx: Context, acc: list[int], X: Callable[[str, str], Any]) -> None:
        q, ops, devs = self.q, ctx.ops, ctx.devices
        edges = [(ops[u], ops[v]) for u, v in self._edges(ctx)]
        preds: dict[str, list[str]] = {}
        for u, v in edges:
            preds.setdefault(v, []).append(u)
        A, J, entering = [devs[a] for a in acc], range(1, q + 1), set(blk.enter.index_set())
        base = [(ops[v], devs[a]) for a in acc for v in range(ctx.n) if ctx.op_allowed(v, a)]
        blk.lam_base = pyo.Constraint(pyo.Set(dimen=2, initialize=base), rule=lambda b, v, a: b.lam[v, a, 1] >= X(v, a),
                                      doc="an op of a has level >= 1 for a")
        carry = [(u, v, a, j) for a in A for u, v in edges for j in J]
        blk.lam_carry = pyo.Constraint(pyo.Set(dimen=4, initialize=carry),
                                       rule=lambda b, u, v, a, j: b.lam[v, a, j] >= b.lam[u, a, j],
                                       doc="levels never drop along an edge")
        blk.lam_enter = pyo.Constraint(blk.enter.index_set(), rule=lambda b, u, v, a, j: b.lam[v, a, j]
                                       >= b.enter[u, v, a, j], doc="re-entering a raises the level")

        def cap(b: pyo.Block, v: str, a: str, j: int) -> Any:
            own = X(v, a) if j == 1 else 0
            return b.lam[v, a, j] <= own + sum(b.lam[u, a, j] + (b.enter[u, v, a, j] if (u, v, a, j) in entering else 0)
                                               for u in preds.get(v, ()))
        blk.lam_cap = pyo.Constraint(ops, A, list(J), rule=cap, doc="a level needs its op on a or a reason upstream")
        blk.lam_nested = pyo.Constraint(ops, A, list(J)[1:], rule=lambda b, v, a, j: b.lam[v, a, j] <= b.lam[v, a, j - 1],
                                        doc="level >= j implies level >= j-1")
        most = [(u, v, a) for u, v, a, j in blk.enter.index_set() if j == 2] if q > 1 else []
        blk.at_most_q = pyo.Constraint(pyo.Set(dimen=3, initialize=most),
                                       rule=lambda b, u, v, a: X(v, a) - X(u, a) + b.lam[u, a, q] <= 1,
                                       doc="no edge enters a past level q (Fig. 4: q subgraphs per accelerator)")

    def _slot_cut(self, blk: pyo.Block, ctx: Context, acc: list[int], slots: tuple[Slot, ...],
                  X: Callable[[str, str], Any]) -> SlotLink:
        q, ops, devs, dev = self.q, ctx.ops, ctx.devices, ctx.cluster.index
        J = list(range(1, q + 1))
        keys = [(ops[v], devs[a], j) for a in acc for v in range(ctx.n) if ctx.op_allowed(v, a) for j in J]
        blk.s = pyo.Var(pyo.Set(dimen=3, initialize=keys), bounds=(0, 1), doc="s[v, a, j] = 1 iff op v runs in slot (a, j)")
        lam = lambda b, v, a, j: b.lam[v, a, j] - (b.lam[v, a, j + 1] if j < q else 0)
        blk.s_lo = pyo.Constraint(blk.s.index_set(), rule=lambda b, v, a, j: b.s[v, a, j] >= X(v, a) + lam(b, v, a, j) - 1,
                                  doc="on a at level exactly j: in slot (a, j)")
        blk.s_x = pyo.Constraint(blk.s.index_set(), rule=lambda b, v, a, j: b.s[v, a, j] <= X(v, a), doc="slots of a hold a's ops")
        blk.s_lam = pyo.Constraint(blk.s.index_set(), rule=lambda b, v, a, j: b.s[v, a, j] <= lam(b, v, a, j),
                                   doc="slot (a, j) holds level-j ops only")
        blk.s_once = pyo.Constraint([(ops[v], devs[a]) for a in acc for v in range(ctx.n) if ctx.op_allowed(v, a)],
                                    rule=lambda b, v, a: sum(b.s[v, a, j] for j in J) == X(v, a),
                                    doc="an op of a lies in exactly one of its slots")
        member = lambda v, s: blk.s[ops[v], devs[s[0]], s[1]] if ctx.op_allowed(v, s[0]) else 0
        rows = [(ops[u], ops[v], devs[a], j) for a in acc for u, v in self._edges(ctx) if ctx.comm[u, a] > 0 for j in J]
        tensors = sorted({(u, a, j) for u, _, a, j in rows})
        blk.tin = pyo.Var(pyo.Set(dimen=3, initialize=tensors), domain=pyo.NonNegativeReals,
                          doc="tin[u, a, j] = 1 iff slot (a, j) reads tensor u from host memory (CommIn, (4))")
        blk.tout = pyo.Var(blk.tin.index_set(), domain=pyo.NonNegativeReals,
                           doc="tout[u, a, j] = 1 iff slot (a, j) writes tensor u to host memory (CommOut, (5))")
        ix = ctx.graph.index
        at = lambda w, a, j: member(ix[w], (dev[a], j))
        blk.tin_rows = pyo.Constraint(pyo.Set(dimen=4, initialize=rows), rule=lambda b, u, v, a, j: b.tin[u, a, j]
                                      >= at(v, a, j) - at(u, a, j), doc="a consumer in the slot, the producer outside")
        blk.tout_rows = pyo.Constraint(pyo.Set(dimen=4, initialize=rows), rule=lambda b, u, v, a, j: b.tout[u, a, j]
                                       >= at(u, a, j) - at(v, a, j), doc="the producer in the slot, a consumer outside")
        by_slot: dict[tuple[str, int], list[str]] = {}
        for u, a, j in tensors:
            by_slot.setdefault((a, j), []).append(u)

        def transfer(s: Slot) -> Any:
            a = devs[s[0]]
            return sum(ctx.comm[ix[u], s[0]] * (blk.tin[u, a, s[1]] + blk.tout[u, a, s[1]]) for u in by_slot.get((a, s[1]), ()))
        return SlotLink(slots, member, transfer, q)

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        acc = accelerators(ctx)
        idx, dev = ctx.graph.index, ctx.cluster.index
        if self.q == 1:
            seen = reach(ctx, warm.assign) if hasattr(blk, "z") else None
            for (v, a), var in (blk.z.items() if seen is not None else ()):
                yield var, float(seen[idx[v], dev[a]])
            return
        col = {ctx.devices[a]: i for i, a in enumerate(acc)}
        lev, on = warm_times(ctx, warm, self.q).level, warm.assign
        for (v, a, j), var in blk.lam.items():
            yield var, float(lev[idx[v], col[a]] >= j)
        for (u, v, a, j), var in blk.enter.items():
            yield var, float(on[idx[v]] == dev[a] and on[idx[u]] != dev[a] and lev[idx[u], col[a]] >= j - 1)
        s = lambda w, a, j: float(on[w] == dev[a] and lev[w, col[a]] == j)
        for (v, a, j), var in blk.s.items():
            yield var, s(idx[v], a, j)
        for side, var in ((1, blk.tin), (-1, blk.tout)):
            for (u, a, j), data in var.items():
                gain = [side * (s(w, a, j) - s(idx[u], a, j)) for w in ctx.graph.successors(idx[u]).tolist()]
                yield data, max([0.0, *gain])


@register
class InvocationTimes(BlockTemplate):
    """Fig. 3 (6)-(10) and Fig. 4 (14) with the big-Ms of :class:`Bounds`.

    ``start``/``finish`` are SubgraphStart/SubgraphFinish of each slot and ``ready[v]`` is
    ``Latency_v``, the time op ``v``'s output is in host memory. (6) and (10) are Lemma 4.1's
    linearization with ``H`` replaced per row by the data's tighter bound.
    """

    name = "invocations"
    stage = Stage.COST
    provides = (LatencyLink,)
    needs = (AssignmentLink, SlotLink)

    def __init__(self, horizon: float | None = None):
        self.horizon = horizon

    def __repr__(self) -> str:
        return f"InvocationTimes(horizon={self.horizon!r})"

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        bd, link, ops, devs = bounds(ctx, self.horizon), ctx.link(SlotLink), ctx.ops, ctx.devices
        H, slots = bd.horizon, [(devs[a], j) for a, j in link.slots]
        blk.slots = pyo.Set(dimen=2, initialize=slots, doc="invocation slots (accelerator, subgraph number)")
        blk.start = pyo.Var(blk.slots, bounds=(0, H), doc="SubgraphStart: every input of the slot is in host memory")
        blk.finish = pyo.Var(blk.slots, bounds=(0, H), doc="SubgraphFinish: the slot's outputs are in host memory")
        idx = ctx.graph.index
        blk.ready = pyo.Var(ops, bounds=lambda b, v: (bd.head[idx[v]], H),
                            doc="Latency_v: op v's output is in host memory")
        self._slots(blk, ctx, bd, link)
        self._hosts(blk, ctx)
        ctx.provide(LatencyLink(blk.ready, blk.finish), by=repr(self))

    def _slots(self, blk: pyo.Block, ctx: Context, bd: Bounds, link: SlotLink) -> None:
        dev, idx, ops, H = ctx.cluster.index, ctx.graph.index, ctx.ops, bd.horizon
        member = lambda v, a, j: link.member(idx[v], (dev[a], j))
        blk.span = pyo.Constraint(blk.slots, rule=lambda b, a, j: b.finish[a, j] == b.start[a, j] + link.transfer(
            (dev[a], j)) + sum(float(ctx.work[v, dev[a]]) * link.member(v, (dev[a], j)) for v in range(ctx.n)
                               if ctx.work[v, dev[a]] > 0 and ctx.op_allowed(v, dev[a])),
            doc="finish = start + reads + computation + writes (7)")
        rows = [(ops[u], ops[v], a, j) for u, v in ctx.cross_edges() for a, j in blk.slots if ctx.op_allowed(v, dev[a])]
        blk.inputs = pyo.Constraint(
            pyo.Set(dimen=4, initialize=rows), rule=lambda b, u, v, a, j: b.start[a, j] >= b.ready[u]
            - H * (1 - member(v, a, j) + member(u, a, j)),
            doc="a slot starts once each input from outside it is ready (6), big-M = H")
        outs = [(ops[v], a, j) for a, j in blk.slots for v in range(ctx.n) if ctx.op_allowed(v, dev[a])]
        blk.outputs = pyo.Constraint(
            pyo.Set(dimen=3, initialize=outs), rule=lambda b, v, a, j: b.ready[v] >= b.finish[a, j]
            - float(H - bd.head[idx[v]]) * (1 - member(v, a, j)),
            doc="an op's output is ready when its slot finishes (10), big-M = H - head of v")
        chain = [(a, j) for a, j in blk.slots if j > 1]
        blk.in_turn = pyo.Constraint(pyo.Set(dimen=2, initialize=chain),
                                     rule=lambda b, a, j: b.start[a, j] >= b.finish[a, j - 1],
                                     doc="an accelerator runs its subgraphs one at a time, in order (14)")

    @staticmethod
    def _hosts(blk: pyo.Block, ctx: Context) -> None:
        hosts = np.flatnonzero(ctx.cluster.host)
        idx, g = ctx.graph.index, ctx.graph

        def host_time(v: int) -> Any:
            return sum(float(ctx.work[v, h]) * ctx.x(v, h) for h in hosts if ctx.work[v, h] > 0 and ctx.op_allowed(v, h))
        sources = [ctx.ops[v] for v in range(ctx.n) if g.predecessors(v).size == 0]
        blk.host_first = pyo.Constraint(sources, rule=lambda b, v: b.ready[v] >= host_time(idx[v]),
                                        doc="a host op without inputs ends after its own time (8)")
        edges = [(ctx.ops[u], ctx.ops[v]) for u, v in zip(g.src.tolist(), g.dst.tolist())]
        blk.host_after = pyo.Constraint(pyo.Set(dimen=2, initialize=edges),
                                        rule=lambda b, u, v: b.ready[v] >= b.ready[u] + host_time(idx[v]),
                                        doc="a host op starts once its inputs are ready (9)")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        t = warm_times(ctx, warm, ctx.link(SlotLink).q)
        idx, dev = ctx.graph.index, ctx.cluster.index
        for (a, j), var in blk.start.items():
            yield var, t.start[dev[a], j]
            yield blk.finish[a, j], t.finish[dev[a], j]
        for v, var in blk.ready.items():
            yield var, float(t.ready[idx[v]])


@register
class LatencyObjective(BlockTemplate):
    """Fig. 3: ``minimize TotalLatency >= Latency_v`` over the sinks, and ``>= SubgraphFinish`` of every slot.

    With the cuts of :mod:`.latency_cuts`: ``TotalLatency >= done_v + tail_v`` per op, and at least each
    longest path's span and run-flow cost. Its bounds: the longest path of fastest times, a ``floor`` the
    combinatorial bounds proved (cost-model units), and ``H``.
    """

    name = "latency"
    stage = Stage.OBJECTIVE
    needs = (LatencyLink, SlotLink)
    uses = (PathLink, RunLink)

    def __init__(self, horizon: float | None = None, floor: float = 0.0):
        self.horizon, self.floor = horizon, floor

    def __repr__(self) -> str:
        return f"LatencyObjective(horizon={self.horizon!r}, floor={self.floor!r})"

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        bd, link, g = bounds(ctx, self.horizon), ctx.link(LatencyLink), ctx.graph
        floor = float(bd.head.max(initial=0.0))
        if ctx.has(RunLink):
            floor = max(floor, min(ctx.link(RunLink).bound, bd.horizon))
        given = self.floor / ctx.scale.time * (1 - 1e-9)  # a known bound, a hair lower: the optimum stays inside
        floor = max(floor, min(given, bd.horizon))
        blk.total = pyo.Var(bounds=(floor, bd.horizon), doc="TotalLatency (scaled time); at least the longest path "
                            "of fastest times, the cheapest runs of a longest path and the given floor, at most H")
        sinks = [ctx.ops[v] for v in range(ctx.n) if g.successors(v).size == 0]
        blk.last = pyo.Constraint(sinks, rule=lambda b, v: b.total >= link.ready[v], doc="TotalLatency >= Latency_v")
        if ctx.has(PathLink):
            done, idx = ctx.link(PathLink).done, ctx.graph.index
            blk.tails = pyo.Constraint(ctx.ops, rule=lambda b, v: b.total >= done[v] + float(bd.tail[idx[v]]),
                                       doc="after v's computation its longest path of fastest times still runs")
            spans = ctx.link(PathLink).spans
            blk.spans = pyo.Constraint(range(len(spans)), rule=lambda b, k: b.total >= spans[k],
                                       doc="the slots a longest path visits run one after another")
        if ctx.has(RunLink):
            costs = ctx.link(RunLink).costs
            blk.runs = pyo.Constraint(range(len(costs)), rule=lambda b, k: b.total >= costs[k],
                                      doc="a longest path's runs, their transfers and side inputs run one after another")
        blk.slots_end = pyo.Constraint(link.finish.index_set(), rule=lambda b, a, j: b.total >= link.finish[a, j],
                                       doc="every invocation ends by TotalLatency (each accelerator's load bounds it)")
        blk.goal = pyo.Objective(expr=blk.total, sense=pyo.minimize, doc="minimize single-sample latency")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        yield blk.total, float(warm_times(ctx, warm, ctx.link(SlotLink).q).ready.max(initial=0.0))
