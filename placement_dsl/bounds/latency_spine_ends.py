"""A spine segment's two ends priced with the work moved into them: the tensors ``X`` writes and ``Y`` reads.

Between the invocations ``X`` (holding the cut op ``c_{j-1}``) and ``Y`` (holding ``c_j``) each disjoint path ``b``
of the segment splits into a prefix ``b[:s]`` in ``X``, a middle ``b[s:e]`` elsewhere and a suffix ``b[e:]`` in
``Y`` (both invocations are convex, :mod:`.latency_spine`). The split fixes which tensors cross the two ends
(Tarnawski et al., NeurIPS 2020, §4: an invocation reads every input from host memory and writes every output used
outside it):

* ``X`` writes ``b[s-1]``'s tensor (the middle's or ``Y``'s first op reads it), or ``c_{j-1}``'s when ``s = 0``;
* ``Y`` reads ``b[e-1]``'s tensor, or ``c_{j-1}``'s when ``e = 0``.

The paths are vertex-disjoint, so their tensors are distinct but for ``c_{j-1}``'s, which each end moves at most
once. The spine's runs charge each end the least crossing of any split (``crossing``: ``min(out(c_{j-1}), sum_b min
out(b))``); a split that moves a path's work into an end often moves a larger tensor there: a branch wholly in ``Y``
makes ``Y`` read ``c_{j-1}``'s tensor, not the branch's least one. :func:`end_prices` prices each interval of the
segment's time elsewhere ``tau`` with the least, over the splits no slower than the interval allows, of the work
moved plus what the ends move beyond ``crossing``, one flag per end for ``c_{j-1}``'s tensor (moved once, so the sum
over paths is exact given the flags).

An end on a host holds nothing of the segment: with ``c_{j-1}`` on a host every path has ``s = 0`` (its ops on that
host run at host time, elsewhere), with ``c_j`` on one ``e = |b|``; a host moves no tensor through host memory.
"""
from __future__ import annotations

import math

import numpy as np

SIDES = (0, 1)  # an end on a host (0) or an accelerator invocation (1)


def path_splits(b: np.ndarray, first_in: float, out: np.ndarray, host: np.ndarray, fast: np.ndarray,
                mem: np.ndarray, scale: float) -> tuple[np.ndarray, ...]:
    """Every split ``(s, e)`` of path ``b`` (``0 <= s <= e <= |b|``) with the least time of its middle elsewhere:
    ``cost, work, memory, s, e, front`` over the splits whose middle can run elsewhere (``work`` and ``memory``: the
    prefix's and suffix's at the fastest times; ``front``: the prefix's memory). ``first_in`` is the size of the
    tensor before ``b[0]`` (``c_{j-1}``'s).

    The middle runs op after op on hosts at host time, or on accelerator invocations that read the tensor before
    their first op and write their last op's (a DP over the two states; an invocation ended and another begun pays a
    write and a read more, never less). An empty middle (``s = e``) takes no time."""
    n = b.size
    h, a = host[b], fast[b]
    send = scale * out[b]
    read = np.concatenate(([scale * first_in], send[:-1]))  # before op i: its predecessor's tensor
    on_host = np.full(n, math.inf)  # per middle start s: its least time with the op at hand on a host ...
    on_acc = np.full(n, math.inf)  # ... or on an accelerator, its tensor not yet written
    starts, ends, costs = [np.arange(n + 1)], [np.arange(n + 1)], [np.zeros(n + 1)]
    for e in range(n):
        hosted = np.minimum(on_host, on_acc + (send[e - 1] if e else 0.0))
        acc = np.minimum(on_acc, on_host + read[e])
        hosted[e], acc[e] = 0.0, read[e]  # a middle starting at e
        on_host, on_acc = hosted + h[e], acc + a[e]
        starts.append(np.arange(e + 1))
        ends.append(np.full(e + 1, e + 1))
        costs.append(np.minimum(on_host[:e + 1], on_acc[:e + 1] + send[e]))
    s, e, cost = np.concatenate(starts), np.concatenate(ends), np.concatenate(costs)
    work = np.concatenate(([0.0], np.cumsum(a)))
    held = np.concatenate(([0.0], np.cumsum(mem[b])))
    keep = np.isfinite(cost)
    s, e = s[keep], e[keep]
    return cost[keep], work[s] + work[n] - work[e], held[s] + held[n] - held[e], s, e, held[s]


def least_moves(splits: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The splits' least times elsewhere (sorted, the first 0: nothing elsewhere; only those that lower a least move)
    and the least work and memory moved among the splits that take at most as long."""
    cost, work, held = splits[0], splits[1], splits[2]
    order = np.argsort(cost, kind="stable")
    cost = cost[order]
    work = np.minimum.accumulate(work[order])
    held = np.minimum.accumulate(held[order])
    drop = np.ones(cost.size, dtype=bool)  # the splits that lower the least work or memory
    drop[1:] = (work[1:] < work[:-1]) | (held[1:] < held[:-1])
    return cost[drop], work[drop], held[drop]


class EndPrices:
    """Per path and grid point, the least work plus end tensors of the splits that fit a side's kind and room (module
    docstring): :meth:`at` for one pair of sides and every pair of rooms at once."""

    def __init__(self, paths: list[np.ndarray], splits: list[tuple[np.ndarray, ...] | None], head: float,
                 out: np.ndarray, scale: float, direct: bool) -> None:
        self.paths, self.splits, self.head, self.out, self.scale = paths, splits, head, out, scale
        self.direct = direct  # an edge c_{j-1} -> c_j: both ends move c_{j-1}'s tensor whatever the split
        self.sorted = [None if x is None else _by_cost(b, x, out) for b, x in zip(paths, splits)]

    def at(self, x_side: int, y_side: int, taus: np.ndarray, need: np.ndarray, memneed: np.ndarray,
           x_rooms: np.ndarray, y_rooms: np.ndarray) -> tuple[np.ndarray, ...]:
        """For each pair of rooms and each high end ``t1`` of the grid's intervals and then ``tau = inf``: the least,
        over the flags (``X`` / ``Y`` moves ``c_{j-1}``'s tensor), of the paths' moves ``max(need, least split)`` plus
        the flagged tensors (scaled), the paths' least memory moved, and their least memory in ``X`` and in ``Y``, each
        ``(x_rooms.size, y_rooms.size, taus.size)``; ``need`` / ``memneed`` are the paths' rows of the knapsack bounds
        on the grid (``taus.size`` points; past the grid, nothing moves). ``x_rooms`` / ``y_rooms``: the free memory
        of ``X`` and ``Y`` to price, which every split's prefix and suffix fit."""
        tops = np.append(taus[1:], math.inf)
        flags = [(fx, fy) for fx in ((0, 1) if x_side else (0,)) for fy in ((0, 1) if y_side else (0,))
                 if not self.direct or ((fx or not x_side) and (fy or not y_side))]
        shape = (x_rooms.size, y_rooms.size, tops.size)
        total = {f: np.zeros(shape) for f in flags}
        held, front, back = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        past = np.zeros((need.shape[0], 1))  # past the grid nothing need move
        need_at, mem_at = np.concatenate((need[:, 1:], past), axis=1), np.concatenate((memneed[:, 1:], past), axis=1)
        for i, (b, ready) in enumerate(zip(self.paths, self.sorted)):
            if ready is None:  # a long path: its least tensor at each end it does not share with c_{j-1}
                least = self.scale * float(self.out[b].min())
                for fx, fy in flags:
                    total[fx, fy] += need_at[i] + least * (x_side * (1 - fx) + y_side * (1 - fy))
                held += mem_at[i]
                continue
            cost, work, mem, s, e, first, x_out, y_out = ready  # sorted by the middle's time
            ok_x = first[None] <= x_rooms[:, None] if x_side else (s == 0)[None]
            ok_y = (mem - first)[None] <= y_rooms[:, None] if y_side else (e == b.size)[None]
            ok = ok_x[:, None, :] & ok_y[None, :, :]  # (x room, y room, split)
            at = np.searchsorted(cost, tops, side="left") - 1  # splits faster than t1 (all at inf)
            at[-1] = cost.size - 1
            for sums, part, floor in ((held, mem, mem_at[i]), (front, first, 0.0), (back, mem - first, 0.0)):
                sums += np.maximum(floor, _least_at(np.where(ok, part, math.inf), at))
            moved = work + self.scale * (x_side * x_out + y_side * y_out)
            for fx, fy in flags:
                allowed = ok & (((s > 0) | bool(fx) | (not x_side)) & ((e > 0) | bool(fy) | (not y_side)))
                total[fx, fy] += np.maximum(need_at[i], _least_at(np.where(allowed, moved, math.inf), at))
        shared = self.scale * self.head
        least = np.min([t + shared * (x_side * fx + y_side * fy) for (fx, fy), t in total.items()], axis=0)
        return least, held, front, back


def _by_cost(b: np.ndarray, splits: tuple[np.ndarray, ...], out: np.ndarray) -> tuple[np.ndarray, ...]:
    """A path's splits sorted by their middles' times, with the tensors ``X`` writes and ``Y`` reads under each: the
    part of :meth:`EndPrices.at` no room or side changes."""
    cost, work, mem, s, e, first = splits
    order = np.argsort(cost, kind="stable")
    x_out = np.where(s > 0, out[b[np.maximum(s - 1, 0)]], 0.0)
    y_out = np.where(e > 0, out[b[np.maximum(e - 1, 0)]], 0.0)
    return tuple(a[order] for a in (cost, work, mem, s, e, first, x_out, y_out))


def _least_at(values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The least of ``values`` (last axis) up to each index ``at`` (``inf`` where it is negative)."""
    least = np.minimum.accumulate(values, axis=-1)
    return np.where(at >= 0, least[..., np.maximum(at, 0)], math.inf)


def _prefix_min(x: np.ndarray) -> np.ndarray:
    return np.minimum.accumulate(x) if x.size else x
