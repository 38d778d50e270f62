"""Split heads lifted window by window: a window's proven least makespan raises the heads of the ops after it, which
then raise the next window's releases (MOIRAI §III's schedule, its heads carried forward).

The split heads (:mod:`.split_heads`) price each op's start from its ancestor cone alone, every other op running
beside it at no cost; the windows (:mod:`.windows`) make a few dozen ops share the devices, the ports and the
transfers, but only around the most critical ops, each from the split heads. Here the two are chained along the
topological order.

**The lift.** Let ``v`` be an op (an *anchor*) and ``W`` a set of its ancestors. In any schedule, every op of ``W``
ends before ``v`` starts, and the schedule restricted to ``W`` is a schedule of the graph induced by ``W`` whose ops
start no earlier than their heads (the windows' argument). So ``v`` starts no earlier than ``L(W)``, the least
``max_{w in W} end_w`` over such schedules, whatever device ``v`` runs on; so does every op ``x`` whose ancestors
include all of ``W``. ``R[x, d] = max(R[x, d], L(W))`` keeps the heads lower bounds, and the split heads' recursion
from lower bounds gives lower bounds: the ops after ``v`` are priced from the lifted heads (a *floor* on each op's
row), and the next anchor's window has them as releases.

**The pass.** One pass over the topological order prices each op's split head from its cone, floored by the lifts
set so far; every :data:`STRIDE` positions it stops at an anchor (of the next :data:`STRIDE` ops, the one with the
most ancestors among the :data:`LOOK_BACK` positions before it), whose window is its :data:`ANCHOR_OPS` nearest
ancestors (by topological position, whose heads are final), priced by the caller (CP-SAT's proven bound in
:mod:`placement_dsl.cpsat_lift`). The lift floors the anchor and the ops within :data:`LOOK_AHEAD` positions after
it whose ancestors hold all of ``W`` (ancestor sets as bit sets over the positions).

**The bound** is the split heads' path with the lifted heads, ``max_v min_d (R[v, d] + p_vd + T[v, d])`` (``T``: the
split tails, unlifted), over the ops the pass reached (an op not reached keeps the head 0: its path is its tail), and
once the pass is done the devices' work between those heads and tails (as :func:`.split_heads.split_bound`'s). It
holds under every congestion mode the windows are priced with (the problem's own), with memory dropped.

Cost: the split heads' ``O(n K^2 D)`` once, the ancestor bit sets (``n^2 / 8`` bytes, hence :data:`MAX_OPS`), and one
window per anchor, at the caller's price.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..deadline import Deadline
from .makespan import allowed_times, energy_bound, transfer_table
from .split_heads import cone, op_head, split_heads
from .windows import Window, window_of

ANCHOR_OPS = 32  # a window's ops: CP-SAT proves 32-op windows of 300-task sheets in well under a second, 96-op ones
# mostly not in 2 s (the lift of a 120-task sheet: 3.178 with 32, 2.995, none, with 96)
STRIDE = 12  # positions between two anchors: windows of 32 ops overlap by about two thirds
LOOK_BACK = 96  # positions before an anchor candidate whose ancestors count for its choice
LOOK_AHEAD = 128  # positions after an anchor whose ops may share its lift directly (the later ones get it through it)
MAX_OPS = 20_000  # ancestor bit sets of n bits per op: 50 MB at this size


@dataclass
class Anchor:
    """An anchor op (its index and topological position), its window and the window's positions as a bit set."""

    op: int
    position: int
    mask: int
    window: Window


class HeadLift:
    """The pass of the module docstring over ``problem``'s ops: :meth:`start` prices the tails (``False`` when
    ``deadline`` stopped them), :meth:`next_window` advances to the next anchor and returns its window, :meth:`lift`
    floors the heads with a window's proven bound, :meth:`bound` is the path through the heads priced so far."""

    def __init__(self, problem: Any, anchor_ops: int = ANCHOR_OPS, stride: int = STRIDE):
        g, c = problem.graph, problem.cluster
        self.problem, self.graph, self.cluster, self.mode = problem, g, c, problem.cost_model().congestion
        self.best = 0.0  # the most a window priced with the lifted heads and the tails proved (absolute)
        self.windows = -1  # critical windows priced after the pass (-1: not yet chosen)
        self.worked = False  # whether :meth:`work` ran
        self.times = allowed_times(problem)
        self.comm = transfer_table(g, c)
        self.serial = ~np.asarray(c.parallel, dtype=bool)
        n, D = self.times.shape
        self.heads, self.floor, self.tails = np.zeros((n, D)), np.zeros((n, D)), np.zeros((n, D))
        self.order = g.topo.tolist()
        self.at = np.empty(n, dtype=np.int64)
        self.at[g.topo] = np.arange(n)
        self.done = 0  # ops priced: the first ``done`` of :attr:`order`
        self.cursor = 2  # the next anchor is among the ``stride`` positions from here (an op of 2 ancestors at least)
        self.anchor_ops, self.stride = anchor_ops, max(1, stride)
        self.anchors = self.lifted = 0
        self.bits: list[int] = []
        self.off = np.where(np.eye(D, dtype=bool), np.inf, 0.0)
        self.busy = np.where(self.serial, 1.0, 0.0)

    def start(self, deadline: Deadline | None = None) -> bool:
        """The split tails and the ancestor bit sets; ``False`` when ``deadline`` stopped the tails."""
        self.tails, complete = split_heads(self.graph, self.times, self.comm, self.serial, reverse=True,
                                           deadline=deadline)
        bits = [0] * len(self.order)
        for p, v in enumerate(self.order):  # ancestors as positions: bit q set when order[q] precedes order[p]
            b = 0
            for u in self.graph.predecessors(v).tolist():
                q = int(self.at[u])
                b |= bits[q] | (1 << q)
            bits[p] = b
        self.bits = bits
        return complete

    def advance(self, upto: int, deadline: Deadline | None = None, every: int = 64) -> bool:
        """Price the split heads of the ops at positions ``done`` to ``upto`` (floored by the lifts); ``False`` when
        ``deadline`` stopped it first (the ops priced so far kept)."""
        g, times = self.graph, self.times
        while self.done < min(upto, len(self.order)):
            if deadline is not None and self.done % every == 0 and deadline.expired():
                return False
            v = self.order[self.done]
            nodes, edges = cone(g.predecessors, v, g.rank)
            row = op_head(v, nodes, edges, self.heads, times, self.comm, g.group_id, self.off, self.busy,
                          False) if nodes else np.zeros(times.shape[1])
            self.heads[v] = np.maximum(row, self.floor[v])
            self.heads[v, ~np.isfinite(times[v])] = np.inf
            self.done += 1
        return True

    def next_anchor(self, deadline: Deadline | None = None) -> Anchor | None:
        """Advance to the next anchor (module docstring) and return it with its window of nearest ancestors;
        ``None`` when the pass reached the last op (or ``deadline`` stopped it)."""
        n = len(self.order)
        first = max(self.cursor, self.done)
        if first >= n:
            self.advance(n, deadline)
            return None
        candidates = range(first, min(first + self.stride, n))
        p = max(candidates, key=lambda q: (self.bits[q] >> max(q - LOOK_BACK, 0)).bit_count())
        self.cursor = max(first + self.stride, p + 1)
        if not self.advance(p, deadline):
            return None
        near, b = [], self.bits[p]
        while b and len(near) < self.anchor_ops:  # the highest positions first: the nearest ancestors
            q = b.bit_length() - 1
            near.append(q)
            b ^= 1 << q
        self.anchors += 1
        ops = np.sort(np.array([self.order[q] for q in near], dtype=np.int64))
        v = self.order[p]
        window = window_of(self.graph, self.cluster, self.mode, ops, self.graph.names[v], self.heads,
                           np.zeros_like(self.heads), self.times)
        return Anchor(v, p, sum(1 << q for q in near), window)

    def lift(self, anchor: Anchor, value: float) -> int:
        """Floor the heads of the anchor and of the ops within :data:`LOOK_AHEAD` positions after it whose ancestors
        hold its whole window at ``value`` (the window's proven least makespan, absolute); how many ops it raised."""
        p, mask = anchor.position, anchor.mask
        raised = 0
        for q in range(p, min(p + LOOK_AHEAD, len(self.order))):
            if (q == p or self.bits[q] & mask == mask) and self.floor[self.order[q]].max(initial=0.0) < value:
                self.floor[self.order[q]] = np.maximum(self.floor[self.order[q]], value)
                raised += 1
        self.lifted += raised > 0
        return raised

    def work(self) -> float:
        """The serial devices' work between the lifted heads and the tails
        (:func:`~placement_dsl.bounds.makespan.energy_bound`), kept in :attr:`best` when larger; once the pass is done
        (before, the heads not reached are 0, which only weakens it)."""
        c = self.cluster
        value = energy_bound(self.graph, self.times, self.comm, free=c.parallel,
                             kinds=np.array([d.kind for d in c.devices]), ends=(self.heads, self.tails))
        self.best, self.worked = max(self.best, value), True
        return value

    def bound(self) -> tuple[float, str | None]:
        """``max_v min_d (R + p + T)`` over every op (heads not priced: 0) and the op attaining it; or, when larger,
        :attr:`best` (a window priced from the lifted heads) and ``None``."""
        with np.errstate(invalid="ignore"):
            through = np.nan_to_num(self.heads + self.times + self.tails, nan=np.inf).min(axis=1)
        through = np.where(np.isfinite(through), through, 0.0)
        if not through.size:
            return 0.0, None
        v = int(np.argmax(through))
        if self.best > through[v]:
            return self.best, None
        return float(through[v]), self.graph.names[v]
