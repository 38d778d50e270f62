"""Heads and tails of a makespan that price the transfers a split of an op's ancestors forces (MOIRAI §III).

The longest path with route costs (:func:`~placement_dsl.bounds.makespan.heads_tails`) lets every input of an op
arrive from its best device independently; the work over the devices
(:func:`~placement_dsl.bounds.makespan.energy_bound`) lets every device share the work as if tensors moved for free.
A schedule does neither: an op ``v`` on device ``d`` waits for every ancestor on ``d`` to *run there first*, one at a
time, and for every input made elsewhere to *move* to ``d``. This module prices that choice, as scheduling with
release times does (one machine, ``1|r_j|C_max``, is solved by earliest release first).

**Heads.** ``R[v, d]`` is a lower bound on the start of ``v`` in any schedule that runs ``v`` on ``d``. Take a set
``W`` of ancestors of ``v`` (its cone: the ancestors within :data:`DEPTH` edges, at most :data:`CAP` of them) and
for each ``w`` in it a value ``e_w(d)`` that ``v`` cannot start before when ``w`` runs elsewhere:

* an input ``w`` of ``v``: ``e_w(d) >= min_{d' != d} (R[w, d'] + p_wd' + c_w(d', d))``, its earliest finish off
  ``d`` plus the least transfer of its tensor into ``d`` (route latency plus size over bandwidth, or the sheet's
  matrix: the cost model's one definition, congestion dropped); ``inf`` when ``w`` is colocated with ``v``;
* an ancestor ``w`` with a child ``x`` in the cone: if ``x`` runs on ``d`` its input from ``w`` moves there, so ``v``
  starts after ``max(that arrival, R[x, d]) + p_xd``; if not, after ``e_x(d)``. Each such child gives
  ``min(e_x(d), max(a_w(d), R[x, d]) + p_xd)`` (``a_w`` as above, ``inf`` when ``w`` and ``x`` are colocated) and
  ``e_w(d)`` is the largest of these (and of the term above, for an input).

In a schedule with ``v`` on ``d`` let ``B`` be the ops of ``W`` that run elsewhere and ``A`` those on ``d``:
``v`` starts after ``max_{w in B} e_w(d)`` and after every op of ``A`` ran on ``d`` (serially, each from its own
head ``R[w, d]``, so after ``max_j (R[j, d] + sum_{i in A, R[i, d] >= R[j, d]} p_id)``; on a parallel host, after
``max_j R[j, d] + p_jd``). Both grow with their set, so the least over the splits is found among the ``|W| + 1``
splits that put the ``t`` largest ``e`` on ``d``: sorting, then prefix sums. Every schedule's split is one of the
splits, so ``R[v, d]`` is at least the least of them.

**Tails** are the heads of the mirrored schedule (every edge reversed, each transfer keeping its time), so
``C >= max_v min_d (R[v, d] + p_vd + T[v, d])``; the heads and tails also bound the device-work bound's windows
(:func:`~placement_dsl.bounds.makespan.energy_bound`). Memory and congestion are dropped (they only delay), pins,
allowed kinds and colocation narrow the devices (:func:`~placement_dsl.bounds.makespan.allowed_times`), and a
device that runs one op at a time serializes, a parallel host does not.

Cost: ``O(n K^2 D)`` for ``n`` ops, ``K`` the cone size and ``D`` devices (numpy over the devices, one Python pass
over the ops); a clock stops it between ops, keeping the heads computed so far.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..deadline import Deadline
from ..graph import Graph
from .makespan import allowed_times, energy_bound, transfer_table

DEPTH = 4  # edges of an op's ancestor cone (a MOIRAI sheet's flow op and its producer count one each)
CAP = 48  # ancestors in a cone: the sort and the prefix sums take K^2 D per op
CHECK_EVERY = 64  # ops between two looks at the clock


def cone(preds: Any, v: int, later: np.ndarray, depth: int = DEPTH,
         cap: int = CAP) -> tuple[list[int], list[tuple[int, int, int]]]:
    """The ancestors of ``v`` within ``depth`` edges (breadth first, at most ``cap``) and the edges ``(w, x, height)``
    from one of them to another or to ``v`` that the breadth-first walk met (each edge of an op it expanded), with
    ``height`` the most edges from ``w`` to ``v`` among them: every child of ``w`` has a smaller one. ``later[u]``
    orders the ops as the pass does (a child after its parent)."""
    seen = {v: 0}
    nodes: list[int] = []
    pairs: list[tuple[int, int]] = []
    frontier = [v]
    for layer in range(1, depth + 1):
        nxt = []
        for x in frontier:
            for w in preds(x).tolist():
                if w not in seen and len(nodes) < cap:
                    seen[w] = layer
                    nodes.append(w)
                    nxt.append(w)
                if w in seen:
                    pairs.append((w, x))
        if not nxt:
            break
        frontier = nxt
    children: dict[int, list[int]] = {}
    for w, x in pairs:
        children.setdefault(w, []).append(x)
    height = {v: 0}
    for w in sorted(nodes, key=lambda u: -later[u]):  # children first
        height[w] = 1 + max(height[x] for x in children[w])
    return nodes, [(w, x, height[w]) for w, x in pairs]


def split_heads(graph: Graph, times: np.ndarray, comm: np.ndarray, serial: np.ndarray, reverse: bool = False,
                deadline: Deadline | None = None, depth: int = DEPTH, cap: int = CAP) -> tuple[np.ndarray, bool]:
    """``(R, complete)``: the heads ``R[v, d]`` of the module docstring (``inf`` where ``v`` may not run on ``d`` or
    no split lets it), or with ``reverse`` the tails (heads of the mirrored graph). ``times[v, d]`` are the allowed
    times (``inf``: not allowed), ``comm[u, a, b]`` the least time ``u``'s tensor takes from ``a`` to ``b``
    (:func:`~placement_dsl.bounds.makespan.transfer_table`), ``serial[d]`` whether ``d`` runs one op at a time.
    Stopped by ``deadline``, the ops not reached keep the head 0 and ``complete`` is ``False``."""
    n, D = times.shape
    heads = np.zeros((n, D))
    preds = graph.successors if reverse else graph.predecessors
    order = graph.topo[::-1] if reverse else graph.topo
    later = -graph.rank if reverse else graph.rank
    group = graph.group_id
    off = np.where(np.eye(D, dtype=bool), np.inf, 0.0)  # added to a (d', d) table: d' == d excluded
    busy = np.where(serial, 1.0, 0.0)
    for count, v in enumerate(order.tolist()):
        if deadline is not None and count % CHECK_EVERY == 0 and deadline.expired():
            return heads, False
        nodes, edges = cone(preds, v, later, depth, cap)
        if nodes:
            heads[v] = op_head(v, nodes, edges, heads, times, comm, group, off, busy, reverse)
        heads[v, ~np.isfinite(times[v])] = np.inf
    return heads, True


def op_head(v: int, nodes: list[int], edges: list[tuple[int, int, int]], heads: np.ndarray, times: np.ndarray,
          comm: np.ndarray, group: np.ndarray, off: np.ndarray, busy: np.ndarray, reverse: bool) -> np.ndarray:
    """``R[v, :]`` from the cone ``nodes`` (module docstring): their values ``e`` by height (children first), then the
    least over the splits by the ``e`` order, for every device at once."""
    D = heads.shape[1]
    slot = {w: i for i, w in enumerate(nodes)}
    e = np.zeros((len(nodes), D))
    w_all, x_all, height_all = np.array(edges).T
    cost = comm[x_all].transpose(0, 2, 1) if reverse else comm[w_all]  # (edge, d_w, d_x): the edge's transfer
    finish = heads[w_all] + times[w_all]
    away = (finish[:, :, None] + cost + off[None]).min(axis=1)  # w off d_x, its tensor moved to d_x
    away[group[w_all] == group[x_all]] = np.inf  # colocated: w runs where x runs
    ws = np.array([slot[w] for w in w_all.tolist()])
    xs = np.array([slot.get(x, -1) for x in x_all.tolist()])  # -1: v itself, which runs on d
    for height in np.unique(height_all).tolist():  # children first: their e is final
        at = np.flatnonzero(height_all == height)
        x, into = x_all[at], xs[at]
        on = np.maximum(away[at], heads[x]) + times[x]  # x on d: after w's tensor arrives and x runs
        value = np.where((into < 0)[:, None], away[at], np.minimum(e[into], on))
        np.maximum.at(e, ws[at], value)
    return least_split(e, heads[nodes], times[nodes], busy)


def least_split(e: np.ndarray, release: np.ndarray, proc: np.ndarray, busy: np.ndarray) -> np.ndarray:
    """Per device ``d`` (columns): ``min_t max(e_(t+1), ERD(first t))`` over the ancestors sorted by ``e`` from the
    largest, ``ERD`` the finish of the ones on ``d`` run from their releases (one at a time where ``busy[d]`` is 1,
    else side by side), ``e_(k+1) = 0`` and ``ERD`` of none 0 (module docstring)."""
    k, D = e.shape
    order = np.argsort(-e, axis=0, kind="stable")
    cols = np.arange(D)[None, :]
    eo, ro, po = e[order, cols].T, release[order, cols].T, proc[order, cols].T  # (D, k), by e from the largest
    later = ro[:, None, :] >= ro[:, :, None]  # [d, j, i]: i released no earlier than j
    serial = busy[:, None, None] > 0
    share = np.where(later & serial, po[:, None, :], 0.0)
    own = np.where(serial[:, :, 0], 0.0, po)  # a parallel host: each op its own time after its release
    run = ro[:, :, None] + own[:, :, None] + np.cumsum(share, axis=2)
    tri = np.arange(k)[:, None] <= np.arange(k)[None, :]  # [j, t]: j among the first t + 1
    erd = np.where(tri[None], run, -np.inf).max(axis=1)  # (D, k): the first t + 1 on d
    erd = np.concatenate([np.zeros((D, 1)), erd], axis=1)
    nxt = np.concatenate([eo, np.zeros((D, 1))], axis=1)
    return np.maximum(erd, nxt).min(axis=1)


def split_bound(problem: Any, deadline: Deadline | None = None) -> tuple[float, str, bool]:
    """The makespan bound of the module docstring: ``max_v min_d (R + p + T)`` and the work over the devices between
    those heads and tails, the larger; with a note and whether both passes finished. A pass stopped by ``deadline``
    leaves the heads (tails) of the ops it did not reach at 0, still lower bounds: the bound is then the path through
    what was priced, at once (the work over the devices, a second or more on 50,000 ops, is device-work's)."""
    g, c = problem.graph, problem.cluster
    times = allowed_times(problem)
    comm = transfer_table(g, c)
    serial = ~np.asarray(c.parallel, dtype=bool)
    heads, complete = split_heads(g, times, comm, serial, deadline=deadline)
    tails, unfinished = np.zeros_like(heads), "heads" if not complete else "tails"
    if complete:
        tails, complete = split_heads(g, times, comm, serial, reverse=True, deadline=deadline)
    with np.errstate(invalid="ignore"):
        through = np.nan_to_num(heads + times + tails, nan=np.inf).min(axis=1)
    through = np.where(np.isfinite(through), through, 0.0)  # no device: the problem's checks say so, not a bound
    v = int(np.argmax(through))
    path = float(through[v])
    work = energy_bound(g, times, comm, free=c.parallel, kinds=np.array([d.kind for d in c.devices]),
                        ends=(heads, tails)) if complete else 0.0  # stopped: the device-work level prices it
    if work > path:
        note = f"work of {g.n} ops over {c.size} devices between the split heads and tails"
    else:
        note = f"op {g.names[v]!r}: its ancestors split between its device and transfers"
    stopped = "" if complete else f" (stopped: {unfinished} unfinished)"
    return max(path, work), note + stopped, complete
