"""The mirror of a list schedule: the same assignment scheduled in reversed time (backward list scheduling).

Insertion-based list scheduling (:class:`~placement_dsl.schedule.ListScheduler`) books every transfer at the
earliest time its ports are free once its producer ends, in the order the consumers are placed: on a fixed
assignment the order it books ports and devices in is greedy from the start. Scheduling the mirrored problem, every
edge reversed and time running backward from the end, books them greedily from the end instead, and reading that
schedule forward is a valid schedule of the same assignment. This is the backward pass of the forward-backward
improvement (justification) of resource-constrained project scheduling (Li and Willis 1992; Valls, Ballestin and
Quintanilla 2005), here with ports, channels or links as the resources transfers hold.

**The backward pass.** Ops are taken consumers first (by decreasing finish in the forward schedule). In reversed
time an op ``v`` on device ``a`` is ready when every consumer on ``a`` has ended and, for every other device ``d``
that runs consumers of ``v``, the one transfer of ``v``'s output to ``d`` (shared by those consumers, as forward)
has run: it starts once the last of them ended, at the earliest time its ports (channel, links) are free for its
duration; ``v`` then takes the earliest gap of its device (a parallel host: at once). With ``H`` the reversed
makespan, an op ending at ``r`` in reversed time starts at ``H - r`` forward, a transfer likewise: every precedence,
device and port interval is the mirror image of one the reversed schedule kept, so the forward reading is valid and
its makespan is ``H``.

On a MOIRAI-style sheet of 80 tasks (218 ops, three devices, port congestion) the assignment CP-SAT proved optimal
list-schedules forward to 2.552 and backward to 2.314 (CP-SAT's own schedule: 2.310): which of the two a search
sees decides whether it can find that assignment at all.
"""
from __future__ import annotations

import math

import numpy as np

from ..schedule import ListScheduler, Timeline, earliest_free

ROUNDS = 8  # mirrorings at most of one schedule (each is a list schedule of the graph: ~0.1 s on 6,000 ops)
TOL = 1e-9  # relative: a round that ends no sooner than this stops the rounds

__all__ = ["justified", "left_justified", "mirrored"]


def mirrored(forward: ListScheduler, carried: bool = False) -> ListScheduler | None:
    """The schedule of ``forward`` (every op placed) list-scheduled again in reversed time, read forward and left
    justified (module docstring): a scheduler holding it; ``None`` when an op or a transfer cannot run (infinite
    time). Ops and transfers are taken by their forward ends, the latest first, so the makespan is never later; with
    ``carried`` the transfers of an op are booked with it instead (module docstring), a different order that may end
    sooner or later."""
    g, c = forward.graph, forward.cluster
    assign = np.asarray(forward.device, dtype=np.int64)
    rank = g.rank.tolist()
    items = [(forward.finish[v], float(rank[v]), v, -1) for v in range(g.n)] + \
        ([] if carried else [(t + forward.duration(u, int(assign[u]), d), rank[u] + 0.5, u, d)
                             for (u, d), t in forward.transfer_start.items()])
    succ = [g.successors(v).tolist() for v in range(g.n)]
    parallel = c.parallel.tolist()
    devices = [Timeline() for _ in range(c.size)]
    mirror = forward.fresh()  # its timelines hold the reversed transfers
    ends: list[float] = [math.nan] * g.n  # reversed time
    moved: dict[tuple[int, int], float] = {}  # (op, device): the reversed end of its transfer
    for _, _, v, d in sorted(items, reverse=True):  # latest end first: every item after what needs it
        a = int(assign[v])
        if d >= 0:
            dur = forward.duration(v, a, d)
            if not math.isfinite(dur):
                return None
            lines = mirror.lines(a, d)
            t = earliest_free(lines, max((ends[w] for w in succ[v] if assign[w] == d), default=0.0), dur)
            for line in lines:
                line.book(t, dur)
            moved[(v, d)] = t + dur
            continue
        if carried and not _carry(v, a, assign, succ[v], ends, moved, forward, mirror):
            return None
        dur = float(forward.times[v, a])
        if not math.isfinite(dur):
            return None
        ready = max((ends[w] if assign[w] == a else moved[(v, int(assign[w]))] for w in succ[v]), default=0.0)
        t = ready if parallel[a] else devices[a].earliest(ready, dur)
        if not parallel[a]:
            devices[a].book(t, dur)
        ends[v] = t + dur
    horizon = max([*ends, *moved.values()], default=0.0)
    return left_justified(forward.fresh(), assign,
                          {v: horizon - e for v, e in enumerate(ends)}, {key: horizon - e for key, e in moved.items()})


def justified(forward: ListScheduler, rounds: int = ROUNDS) -> ListScheduler:
    """``forward`` mirrored again and again while its makespan falls (at most ``rounds`` times): the
    forward-backward improvement of the module docstring; ``forward`` itself when no round ends sooner."""
    best, end = forward, max(forward.finish, default=0.0)
    for _ in range(rounds):
        found = [f for f in (mirrored(best), mirrored(best, carried=True)) if f is not None]
        found = min(found, key=lambda f: max(f.finish, default=0.0), default=None)
        if found is None or max(found.finish, default=0.0) >= end * (1 - TOL):
            break
        best, end = found, max(found.finish, default=0.0)
    return best


def _carry(v: int, a: int, assign: np.ndarray, succ: list[int], ends: list[float], moved: dict[tuple[int, int], float],
           forward: ListScheduler, mirror: ListScheduler) -> bool:
    """Book ``v``'s transfers in reversed time, each once the last of its readers on its device ended, the earliest
    ready first (``mirrored(carried=True)``); ``False`` when one cannot run."""
    last: dict[int, float] = {}
    for w in succ:
        d = int(assign[w])
        if d != a:
            last[d] = max(last.get(d, 0.0), ends[w])
    for d, after in sorted(last.items(), key=lambda item: (item[1], item[0])):
        dur = forward.duration(v, a, d)
        if not math.isfinite(dur):
            return False
        lines = mirror.lines(a, d)
        t = earliest_free(lines, after, dur)
        for line in lines:
            line.book(t, dur)
        moved[(v, d)] = t + dur
    return True


def left_justified(out: ListScheduler, assign: np.ndarray, starts: dict[int, float],
                   transfers: dict[tuple[int, int], float]) -> ListScheduler:
    """The schedule of ``starts`` (ops) and ``transfers`` (``(op, device)``) with every device's, port's (channel's,
    link's) sequence kept and each op and transfer moved as early as those sequences and its inputs let it, booked
    into ``out`` (empty): never later than given, so never a longer makespan, and every op starts when an input
    arrives or its device frees (the critical chain of :mod:`.schedule_moves` follows such starts)."""
    rank = out.graph.rank.tolist()
    preds = [out.graph.predecessors(v).tolist() for v in range(out.graph.n)]
    items = [(t, float(rank[v]), v, -1) for v, t in starts.items()] + \
        [(t, rank[u] + 0.5, u, d) for (u, d), t in transfers.items()]  # a transfer after its op, before its reader
    free: dict[int, float] = {}  # id of a device's or a line's timeline: when its last booking ends
    busy = [Timeline() for _ in range(out.cluster.size)]  # stand-ins naming the devices in ``free``
    parallel = out.cluster.parallel.tolist()
    for _, _, v, d in sorted(items):
        if d >= 0:  # a transfer of no time holds no line (as the list scheduler books it)
            lines, dur = out.lines(out.device[v], d), out.duration(v, out.device[v], d)
            t = max([out.finish[v], *(free.get(id(line), 0.0) for line in lines if dur > 0)])
            out.book_transfer(v, d, t)
            for line in lines if dur > 0 else ():
                free[id(line)] = t + dur
            continue
        a = int(assign[v])
        ready = max((out.finish[u] if out.device[u] == a else
                     out.transfer_start[(u, a)] + out.duration(u, out.device[u], a) for u in preds[v]), default=0.0)
        holds = not parallel[a] and out.times[v, a] > 0  # an op of no time holds no device
        t = max(ready, free.get(id(busy[a]), 0.0)) if holds else ready
        out.book(v, a, t)
        if holds:
            free[id(busy[a])] = out.finish[v]
    return out
