"""Minimum cuts of small networks, and the lines under the price of a held set at each amount of work it holds.

A network is a list of arcs ``(u, v, capacity)`` between node ``0`` (the source), node ``1`` (the sink) and
nodes ``2, 3, ...``; an infinite arc is never cut. :func:`min_cut` is Dinic's max flow (:class:`Flow`: shortest
augmenting paths found a level graph at a time, each path by an explicit stack: no recursion), its value a lower
bound on every cut (the flow is feasible; residuals below ``1e-12`` of the total are taken as saturated, which only
lowers it).

Some nodes carry work ``w_v``; a *held set* ``H`` is the source side of a cut (or its sink side), its price
``c(H)`` the capacity of the finite arcs the cut crosses. For a multiplier ``lam``::

    g(lam) = min_H  c(H) - lam w(H)

is one more minimum cut (project selection: ``lam > 0`` charges ``lam w_v`` for each node left out of ``H``,
``lam < 0`` charges ``|lam| w_v`` for each node in ``H``), so every held set lies on or above the line
``c >= g(lam) + lam w``. :func:`cut_envelope` returns such lines at the slopes of the lower convex hull of the
points ``(w(H), c(H))``, found by Eisner and Severance's parametric search: the hull's two ends (the least price
holding no work, and holding all of it: the work's nodes forced out of ``H``, then into it), then the chord's slope
between two hull points found, one minimum cut each, until no held set lies below a chord. Any line it returns is
valid whether or not the search ends (each is a minimum cut's value); stopped early, the lines are fewer, not wrong.

>>> arcs = [(0, 2, 3.0), (2, 3, 1.0), (3, 1, 5.0)]  # a chain: source, a (work 1), b (work 1), sink
>>> min_cut(arcs)[0]
1.0
>>> cut_envelope(arcs, {2: 1.0, 3: 1.0}, held_on_source=True)  # hold nothing: 3; hold a: 1; hold a and b: 5
[(-2.0, 3.0), (4.0, -3.0)]
"""
from __future__ import annotations

import math
from collections import deque

Arc = tuple[int, int, float]
Line = tuple[float, float]  # (slope lam, level g): price >= g + lam * work

MOST_CUTS = 16  # minimum cuts per envelope: the two ends and up to 14 chords (each chord finds a hull point or ends)
TOLERANCE = 1e-9  # of the network's finite capacity: a held set below a chord by less is on it


class Flow:
    """A residual network grown arc by arc, whose :meth:`augment` adds the max flow from ``s`` to ``t`` that its
    residual arcs still allow (Dinic: shortest augmenting paths found a level graph at a time, each path by an
    explicit stack, no recursion). A residual below ``eps`` counts as saturated, which only lowers the flow."""

    def __init__(self, n: int, eps: float = 1e-12) -> None:
        self.n, self.eps = n, eps
        self.head: list[list[int]] = [[] for _ in range(n)]
        self.to: list[int] = []
        self.cap: list[float] = []

    def arc(self, u: int, v: int, cap: float) -> None:
        self.head[u].append(len(self.to))
        self.to.append(v)
        self.cap.append(cap)
        self.head[v].append(len(self.to))
        self.to.append(u)
        self.cap.append(0.0)

    def augment(self, s: int, t: int) -> float:
        """Push flow from ``s`` to ``t`` until no augmenting path is left; the flow added. A path of infinite arcs
        alone ends it (the networks here have a finite arc on every path)."""
        added = 0.0
        while True:
            depth = self.levels(s)
            if depth[t] < 0:
                return added
            pushed, unbounded = self._blocking_flow(s, t, depth)
            added += pushed
            if unbounded:
                return added

    def levels(self, s: int) -> list[int]:
        """Each node's distance from ``s`` in the residual network (``-1``: unreached)."""
        depth = [-1] * self.n
        depth[s] = 0
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self.head[u]:
                if self.cap[e] > self.eps and depth[self.to[e]] < 0:
                    depth[self.to[e]] = depth[u] + 1
                    queue.append(self.to[e])
        return depth

    def _blocking_flow(self, s: int, t: int, depth: list[int]) -> tuple[float, bool]:
        """Augment along shortest paths of the level graph until none is left (dead ends are dropped from it); the
        flow pushed, and whether a path of infinite arcs was met."""
        head, to, cap, eps = self.head, self.to, self.cap, self.eps
        nxt = [0] * self.n
        pushed = 0.0
        while True:
            path: list[int] = []
            u = s
            while u != t:
                while nxt[u] < len(head[u]):
                    e = head[u][nxt[u]]
                    if cap[e] > eps and depth[to[e]] == depth[u] + 1:
                        break
                    nxt[u] += 1
                else:  # a dead end: leave the level graph, step back
                    if u == s:
                        return pushed, False
                    depth[u] = -2
                    u = to[path.pop() ^ 1]
                    nxt[u] += 1
                    continue
                e = head[u][nxt[u]]
                path.append(e)
                u = to[e]
            push = min(cap[e] for e in path)
            if not math.isfinite(push):
                return pushed, True
            for e in path:
                cap[e] -= push
                cap[e ^ 1] += push
            pushed += push


def min_cut(arcs: list[Arc]) -> tuple[float, list[bool]]:
    """The max flow from node 0 to node 1 (the minimum cut's capacity, infinite arcs uncut) and the cut's source
    side (the nodes the residual network reaches from node 0), by :class:`Flow`."""
    nodes = 2 + max((max(u, v) for u, v, _ in arcs), default=0)
    finite = sum(c for _, _, c in arcs if math.isfinite(c))
    big = 2.0 * finite + 1.0  # an infinite arc: more than any cut of finite arcs, never saturated
    net = Flow(nodes, 1e-12 * big)
    for u, v, c in arcs:
        net.arc(u, v, min(c, big))
    flow = net.augment(0, 1)
    return min(flow, finite), [d >= 0 for d in net.levels(0)]


def cut_envelope(arcs: list[Arc], works: dict[int, float], held_on_source: bool, most: int = MOST_CUTS
                 ) -> list[Line]:
    """Lines ``(lam, g)`` with ``c(H) >= g + lam w(H)`` for every held set ``H`` (module docstring): the source
    sides of the network's cuts (``held_on_source``) or their sink sides, ``works`` the nodes' work."""
    loaded = {v: w for v, w in works.items() if w > 0}
    if not loaded:
        return [(0.0, min_cut(arcs)[0])]
    total = sum(loaded.values())
    finite = sum(c for _, _, c in arcs if math.isfinite(c))
    tol = TOLERANCE * (finite + 1.0)

    def held(side: list[bool]) -> float:
        return sum(w for v, w in loaded.items() if side[v] == held_on_source)

    def forced(inside: bool) -> tuple[float, float]:
        """The least price holding all the work (``inside``) or none of it: (work, price)."""
        pin = [(0, v, math.inf) if inside == held_on_source else (v, 1, math.inf) for v in loaded]
        value, side = min_cut(arcs + pin)
        return held(side), value

    def solve(lam: float) -> tuple[float, float, float]:
        """``g(lam)``, and the work and price of a held set reaching it."""
        charge = [(0, v, abs(lam) * w) if (lam > 0) == held_on_source else (v, 1, abs(lam) * w)
                  for v, w in loaded.items()]
        value, side = min_cut(arcs + charge)
        g = value - lam * total if lam > 0 else value
        w = held(side)
        return g, w, g + lam * w

    ends = [forced(False), forced(True)]
    lines: list[Line] = []
    chords = [(ends[0], ends[1])]
    while chords and len(lines) + 2 < most:
        (w1, c1), (w2, c2) = chords.pop()
        if w2 - w1 <= 1e-12 * total:
            continue
        lam = (c2 - c1) / (w2 - w1)
        g, w, c = solve(lam)
        lines.append((lam, g))
        if g < c1 - lam * w1 - tol and w1 < w < w2:  # a held set below the chord: a hull point between
            chords += [((w, c), (w2, c2)), ((w1, c1), (w, c))]
    return upper_envelope(lines, 0.0, total)


def upper_envelope(lines: list[Line], lo: float, hi: float) -> list[Line]:
    """The lines that are the highest somewhere on ``[lo, hi]``, by slope (the others lie under them there).

    >>> upper_envelope([(-2.0, 3.0), (1.0, 0.0), (4.0, -3.0)], 0.0, 2.0)
    [(-2.0, 3.0), (4.0, -3.0)]
    """
    kept: list[Line] = []
    for lam, g in sorted(set(lines)):
        if kept and kept[-1][0] == lam:  # the same slope, a higher level
            kept.pop()
        while len(kept) >= 2 and _meet(kept[-2], (lam, g)) <= _meet(kept[-2], kept[-1]):
            kept.pop()  # the middle line is under the other two everywhere
        kept.append((lam, g))
    # keep the lines whose stretch of the envelope meets [lo, hi]
    return [line for i, line in enumerate(kept)
            if (i == 0 or _meet(kept[i - 1], line) < hi) and (i == len(kept) - 1 or _meet(line, kept[i + 1]) > lo)]


def _meet(a: Line, b: Line) -> float:
    """Where line ``b`` (the steeper) rises above line ``a``."""
    return (a[1] - b[1]) / (b[0] - a[0])
