"""Restarts: a single-sample search that has stalled from its best start goes on from other starts until its deadline.

A solve whose model is too large continues its start by the objective's improving method, the window search and
fresh seeds (:func:`placement_dsl.stopped.heuristics_instead`); each of them ends at a local optimum of its own
neighbourhood, and on MOIRAI's GoogLeNet a 300 s solve ended at 157 s, the rest of the time unused. Here the time
left goes to restarts (multi-start local search, with an iterated kick as in iterated local search): each restart
runs the improving method (:data:`placement_dsl.starts.IMPROVING`) from

1. the race's next best distinct starts first (:attr:`placement_dsl.starts.Start.others`: HEFT's or GETF's schedule
   where CPOP's won), since their local optima lie elsewhere;
2. then the best schedule so far *kicked*: the colocation units of a window of its start order moved each to
   another device that may run it and has room (:func:`kicked`), list-scheduled.

A restart whose local optimum comes within :data:`PROMISING` of the best goes on to the window search (the
objective's LNS, :data:`placement_dsl.stopped.SEARCHES`, without its coarse solve, until ``patience`` windows in a
row find nothing). The neighbourhoods grow while restarts find nothing: the kick's window doubles from
:data:`FIRST_KICK` of the ops up to :data:`MOST_KICK` (and starts small again past it), the LNS's first window from
its default up to the graph; a better schedule sets both back. The best schedule is only ever replaced by a better one, by the cost model, so the
answer is never worse than the stalled search's.
"""
from __future__ import annotations

import math
import random
from typing import Any

import numpy as np

from .deadline import Deadline
from .errors import SpecError
from .placement import Placement
from .schedule import list_schedule
from .starts import Start, alternatives, improve, resolve

__all__ = ["FIRST_KICK", "MOST_KICK", "PROMISING", "kicked", "pooled", "restart"]

FIRST_KICK = 0.05  # of the ops, the window a first kick moves (at least 2 ops)
MOST_KICK = 0.5  # of the ops, the largest window a kick moves
PROMISING = 0.02  # relative: a restart's local optimum at most this much worse than the best goes on to the windows
WINDOW = 24  # ops the window search frees at first in a restart (doubled while restarts find nothing)
DRAWS = 4  # kicks drawn per restart before the window grows (a kick may leave a device without room)
SHARE = 0.25  # of the time left, the most one restart's local search takes (at least ``least`` seconds): the
# improving method given all of it anneals its segments for as long, and one restart took the whole time


def kicked(problem: Any, start: Start, ops: int, rng: random.Random) -> Start | None:
    """``start`` with the colocation units of ``ops`` consecutive ops of its start order (its schedule's, else the
    topological one), from a random position, each moved to a random other device that may run all its ops and
    has room for it (in memory, given the units not moved), list-scheduled under the problem's congestion; ``None``
    when no unit could move or the problem's validity check refuses the result."""
    g, c = problem.graph, problem.cluster
    placement = start.placement
    order = np.asarray(g.topo) if placement.schedule is None else \
        np.lexsort((np.asarray(g.rank), np.asarray(placement.schedule.start)))
    _, unit = np.unique(g.group_id, return_inverse=True)
    units = int(unit.max()) + 1
    size = np.bincount(unit, weights=np.asarray(g.param_bytes + g.activation_bytes, dtype=float), minlength=units)
    allowed = np.ones((units, c.size), dtype=bool)
    np.logical_and.at(allowed, unit, np.isfinite(c.times(g)))
    device = np.zeros(units, dtype=np.int64)
    device[unit] = placement.assign
    free = np.asarray(c.memory, dtype=float) - np.bincount(device, weights=size, minlength=c.size)
    width = max(2, min(ops, g.n))
    first = rng.randrange(max(g.n - width + 1, 1))
    chosen = list(dict.fromkeys(unit[order[first:first + width]].tolist()))
    rng.shuffle(chosen)
    moved = 0
    for u in chosen:
        here = int(device[u])
        choices = [d for d in range(c.size) if d != here and allowed[u, d] and size[u] <= free[d] * (1 + 1e-9)]
        if not choices:
            continue
        d = rng.choice(choices)
        free[here], free[d], device[u], moved = free[here] + size[u], free[d] - size[u], d, moved + 1
    if not moved:
        return None
    found = Placement(g, c, device[unit], "kick")
    try:
        found = Placement(g, c, found.assign, "kick", schedule=list_schedule(found, problem.cost_model().congestion))
    except SpecError:  # a kick the list scheduler refuses (an op where it cannot run) is no start; the next is drawn
        return None
    kick = resolve(problem, found)
    kick.method = "kick"
    return kick if kick.usable else None


def restart(problem: Any, best: Start, pool: list[Start], clock: Deadline, *, reserve: float, least: float,
            search: str | None, patience: int, seed: int) -> Start:
    """``best`` improved by restarts (see the module docstring) from the starts of ``pool`` (in order), then from
    kicks of the best, until ``clock`` has ``reserve`` + ``least`` seconds left: each restart runs the improving
    method from its start for at most :data:`SHARE` of the time left, and ``search`` (a registered window search, ``None``: none) after it when its local
    optimum is promising. Each restart has its own seed, from ``seed`` on. ``info["restarts"]`` counts them,
    ``info["restarts_better"]`` those that found a better schedule."""
    if not best.usable:
        return best
    rng, n = random.Random(seed), problem.graph.n
    first = max(2, math.ceil(FIRST_KICK * n))
    most = max(first, math.ceil(MOST_KICK * n))
    kick, window, count, better, pool = first, WINDOW, 0, 0, list(pool)
    while clock.left() - reserve >= least:
        start = pool.pop(0) if pool else next(filter(None, (kicked(problem, best, kick, rng) for _ in range(DRAWS))),
                                              None)
        if start is None:  # no kick of this width was valid: a wider one, or none left to try
            if kick >= most:
                break
            kick = min(2 * kick, most)
            continue
        count += 1
        left = clock.left() - reserve
        found = improve(problem, start, min(left, max(least, SHARE * left)), seed=seed + count)
        if search is not None and found.usable and found.objective <= best.objective * (1 + PROMISING) and \
                clock.left() - reserve >= least:
            found = improve(problem, found, clock.left() - reserve, seed=seed + count, method=search,
                            patience=patience, window=window, coarse=False)
        if found.usable and found.objective < best.objective * (1 - 1e-12):
            best, kick, window, better = found, first, WINDOW, better + 1
        else:  # the neighbourhoods grow; past the widest the kicks start small again (variable neighbourhoods)
            kick, window = (first if kick >= most else min(2 * kick, most)), min(2 * window, max(n, 1))
    best.info = {**best.info, "restarts": count, "restarts_better": better}
    return best


def pooled(problem: Any, pool: list[Any]) -> list[Start]:
    """A pool of starts as :class:`~placement_dsl.starts.Start` s, best first: those it holds as such, and the race's
    kept starts (:attr:`Start.others <placement_dsl.starts.Start.others>`) rebuilt and checked."""
    return sorted([s for s in pool if isinstance(s, Start)] +
                  alternatives(problem, tuple(s for s in pool if not isinstance(s, Start))), key=lambda s: s.objective)
