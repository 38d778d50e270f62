"""Numba kernels of the latency heuristics (:mod:`.latency`).

* :func:`latency` — a compiled copy of the referee (:func:`placement_dsl.invocation.invocations`):
  single-sample latency in Tarnawski et al.'s invocation model (NeurIPS 2020, §4), with every
  accelerator's set cut into contiguous subgraphs run one at a time (§4.1, Fig. 4).
* :func:`descend` — first-improvement descent over block moves, memory-checked incrementally.
"""
from __future__ import annotations

import math

import numpy as np

from .jit import njit

INF = math.inf


# ---------------------------------------------------------------------------- compiled referee
@njit(cache=True)
def _levels(dev, col, topo, pred_ptr, pred_idx, A):
    """Subgraph index of each op on its accelerator (§4.1: most runs of its device on a path into it).

    ``lev[v, a]`` is the most runs of accelerator ``a``'s ops on a path ending in ``v``:
    the predecessors' maximum, plus one on ``v``'s own column when entering from elsewhere.
    """
    n = dev.size
    lev = np.zeros((n, A), dtype=np.int32)
    out = np.zeros(n, dtype=np.int64)
    for v in topo:
        cv = col[dev[v]]
        own = 1
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[e]
            for a in range(A):
                lev[v, a] = max(lev[v, a], lev[u, a])
            if cv >= 0 and col[dev[u]] != cv:
                own = max(own, lev[u, cv] + 1)
        if cv >= 0:
            lev[v, cv] = max(lev[v, cv], own)
            out[v] = lev[v, cv]
    return out


@njit(cache=True)
def _durations(dev, unit, n_units, times, scale, succ_ptr, succ_idx, out_bytes):
    """``in + compute + out`` per invocation, each tensor once per invocation boundary."""
    dur = np.zeros(n_units)
    stamp = np.full(n_units, -1, dtype=np.int64)
    for u in range(dev.size):
        a = unit[u]
        dur[a] += times[dev[u], u]
        sent = False
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            w = succ_idx[e]
            b = unit[w]
            if b != a and stamp[b] != u:
                stamp[b] = u
                dur[b] += out_bytes[u] * scale[dev[w]]
                sent = True
        if sent:
            dur[a] += out_bytes[u] * scale[dev[u]]
    return dur


@njit(cache=True)
def _longest(unit, n_units, dur, owner, succ_ptr, succ_idx):
    """Longest path over the invocations: (latency, sum of finishes), ``inf`` when they wait on each other.

    Edges: data dependencies between invocations, and subgraph ``j -> j + 1`` of one
    accelerator (``owner[j]`` is the device of subgraph ``j``; host ops come after them).
    """
    n, P = unit.size, owner.size
    deg = np.zeros(n_units + 1, dtype=np.int64)
    for u in range(n):
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            if unit[succ_idx[e]] != unit[u]:
                deg[unit[u] + 1] += 1
    for j in range(P - 1):
        if owner[j + 1] == owner[j]:
            deg[j + 1] += 1
    ptr = np.cumsum(deg)
    head = np.empty(ptr[-1], dtype=np.int64)
    fill = ptr[:-1].copy()
    for j in range(P - 1):
        if owner[j + 1] == owner[j]:
            head[fill[j]] = j + 1
            fill[j] += 1
    for u in range(n):
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            b = unit[succ_idx[e]]
            if b != unit[u]:
                head[fill[unit[u]]] = b
                fill[unit[u]] += 1
    return _kahn(n_units, dur, ptr, head)


@njit(cache=True)
def _kahn(n_units, dur, ptr, head):
    """Kahn's algorithm with start = latest predecessor finish: (latency, sum of finishes)."""
    indeg = np.zeros(n_units, dtype=np.int64)
    for k in range(head.size):
        indeg[head[k]] += 1
    start = np.zeros(n_units)
    stack = np.empty(n_units, dtype=np.int64)
    top = 0
    for j in range(n_units):
        if indeg[j] == 0:
            stack[top] = j
            top += 1
    done, worst, total = 0, 0.0, 0.0
    while top > 0:
        top -= 1
        a = stack[top]
        done += 1
        end = start[a] + dur[a]
        worst = max(worst, end)
        total += end
        for k in range(ptr[a], ptr[a + 1]):
            b = head[k]
            start[b] = max(start[b], end)
            indeg[b] -= 1
            if indeg[b] == 0:
                stack[top] = b
                top += 1
    if done < n_units:
        return INF, INF
    return worst, total


@njit(cache=True)
def _schedule(dev, lev, host, times, scale, out_bytes, succ_ptr, succ_idx):
    """(latency, sum of finishes) with op ``v`` in subgraph ``lev[v]`` of its accelerator."""
    n, D = dev.size, host.size
    pieces = np.zeros(D, dtype=np.int64)
    for v in range(n):
        pieces[dev[v]] = max(pieces[dev[v]], lev[v])
    first = np.zeros(D + 1, dtype=np.int64)
    for d in range(D):
        first[d + 1] = first[d] + pieces[d]
    owner = np.empty(first[D], dtype=np.int64)
    for d in range(D):
        owner[first[d]:first[d + 1]] = d
    unit = np.empty(n, dtype=np.int64)
    k = first[D]
    for v in range(n):
        if host[dev[v]]:
            unit[v] = k
            k += 1
        else:
            unit[v] = first[dev[v]] + lev[v] - 1
    dur = _durations(dev, unit, k, times, scale, succ_ptr, succ_idx, out_bytes)
    return _longest(unit, k, dur, owner, succ_ptr, succ_idx)


@njit(cache=True)
def contiguous(dev, backward, topo, pred_ptr, pred_idx, labels):
    """Whether every device's forward ops, and separately its backward ops, form a contiguous set (Tarnawski
    Def. 3.1, as :func:`placement_dsl.validity.contiguity_witness` checks it): no op is reached from ops of its
    own label (``2 * device + backward``, ``labels`` of them) through an op of another label."""
    n = dev.size
    reach = np.zeros((n, labels), dtype=np.bool_)  # reach[v, l]: an op of label l is on a path ending in v
    for v in topo:
        lv = 2 * dev[v] + backward[v]
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[e]
            if reach[u, lv] and 2 * dev[u] + backward[u] != lv:
                return False
            for a in range(labels):
                reach[v, a] = reach[v, a] or reach[u, a]
        reach[v, lv] = True
    return True


@njit(cache=True)
def latency(dev, col, host, times, scale, out_bytes, topo, pred_ptr, pred_idx, succ_ptr, succ_idx, A, q,
            backward, labels):
    """(latency, sum of invocation finishes) of ``dev`` in the invocation model (§4, §4.1).

    ``inf`` when an accelerator needs more than ``q`` subgraphs (Fig. 4's slots; ``q = 0``:
    no limit), when ``labels > 0`` and a device's forward or backward ops are not contiguous
    (:func:`contiguous`: the model requires it), and when invocations wait on each other. The referee first tries one
    invocation per accelerator; here the cut is always made (a contiguous set is one
    subgraph anyway): most candidate moves of the local search leave some set
    non-contiguous, so trying the whole sets first costs more than it saves.
    """
    lev = _levels(dev, col, topo, pred_ptr, pred_idx, A)
    if q > 0 and lev.max() > q:
        return INF, INF
    if labels > 0 and not contiguous(dev, backward, topo, pred_ptr, pred_idx, labels):
        return INF, INF
    return _schedule(dev, lev, host, times, scale, out_bytes, succ_ptr, succ_idx)


# ---------------------------------------------------------------------------- search
@njit(cache=True)
def better(a0, a1, a2, b0, b1, b2):
    """Lexicographic (memory excess, latency, sum of finishes), with a relative tolerance."""
    if a0 < b0 * (1.0 - 1e-12) - 1e-9:
        return True
    if a0 > b0 * (1.0 + 1e-12) + 1e-9:
        return False
    if a1 < b1 * (1.0 - 1e-12):
        return True
    return a1 <= b1 and a2 < b2 * (1.0 - 1e-12)


@njit(cache=True)
def paint(i, j, b, dev, gdev, gptr, gops, gmem, mem, moved, was):
    """Put groups ``i .. j - 1`` on device ``b``; the moved groups and their old devices go to ``moved``/``was``."""
    m = 0
    for g in range(i, j):
        if gdev[g] != b:
            moved[m] = g
            was[m] = gdev[g]
            m += 1
            mem[gdev[g]] -= gmem[g]
            mem[b] += gmem[g]
            gdev[g] = b
            for q in range(gptr[g], gptr[g + 1]):
                dev[gops[q]] = b
    return m


@njit(cache=True)
def undo(m, b, dev, gdev, gptr, gops, gmem, mem, moved, was):
    for k in range(m):
        g = moved[k]
        mem[b] -= gmem[g]
        mem[was[k]] += gmem[g]
        gdev[g] = was[k]
        for q in range(gptr[g], gptr[g + 1]):
            dev[gops[q]] = was[k]


@njit(cache=True)
def fits(i, j, b, gdev, gmem, mem, cap, bad):
    """Whether painting groups ``i .. j - 1`` onto ``b`` changes something, is allowed and fits in memory."""
    if bad[b, j] - bad[b, i] > 0:
        return False
    add, changed = 0.0, False
    for g in range(i, j):
        if gdev[g] != b:
            add += gmem[g]
            changed = True
    return changed and mem[b] + add <= cap[b] * (1.0 + 1e-9)


@njit(cache=True)
def _swap(i, j, k, l, dev, gdev, gptr, gops, gmem, mem, cap, bad, moved, was):
    """Exchange blocks ``i .. j - 1`` (device of group ``i``) and ``k .. l - 1`` (device of group ``k``).

    Returns the moved counts, or ``-1`` when not allowed or a device that grew overflows.
    """
    a, b = gdev[i], gdev[k]
    if a == b or bad[b, j] - bad[b, i] > 0 or bad[a, l] - bad[a, k] > 0:
        return -1, 0
    mem_a, mem_b = mem[a], mem[b]
    m1 = paint(i, j, b, dev, gdev, gptr, gops, gmem, mem, moved[0], was[0])
    m2 = paint(k, l, a, dev, gdev, gptr, gops, gmem, mem, moved[1], was[1])
    if (mem[a] > mem_a and mem[a] > cap[a] * (1.0 + 1e-9)) or (mem[b] > mem_b and mem[b] > cap[b] * (1.0 + 1e-9)):
        undo(m2, a, dev, gdev, gptr, gops, gmem, mem, moved[1], was[1])
        undo(m1, b, dev, gdev, gptr, gops, gmem, mem, moved[0], was[0])
        return -1, 0
    return m1, m2


@njit(cache=True)
def apply(row, dev, gdev, gptr, gops, gmem, mem, cap, bad, moved, was):
    """Apply move ``row``: ``(i, j, b, -1, -1)`` paints a block onto ``b``, ``(i, j, -1, k, l)`` swaps two blocks.

    Returns ``(moved in the first block, its new device, moved in the second, its new device)``;
    the first count is ``-1`` when the move does not apply.
    """
    i, j, b, k, l = row[0], row[1], row[2], row[3], row[4]
    if k < 0:
        if not fits(i, j, b, gdev, gmem, mem, cap, bad):
            return -1, 0, 0, 0
        return paint(i, j, b, dev, gdev, gptr, gops, gmem, mem, moved[0], was[0]), b, 0, 0
    a, b = gdev[i], gdev[k]
    m1, m2 = _swap(i, j, k, l, dev, gdev, gptr, gops, gmem, mem, cap, bad, moved, was)
    return m1, b, m2, a


@njit(cache=True)
def descend(dev, gdev, gptr, gops, gmem, mem, cap, bad, moves, pos, since, budget, key,
            col, host, times, scale, out_bytes, topo, pred_ptr, pred_idx, succ_ptr, succ_idx, A, q, backward, labels):
    """First-improvement descent over ``moves`` (rows as in :func:`apply`), cyclically from ``pos``.

    Stops when a full cycle brings no improvement (``since == len(moves)``) or after
    ``budget`` evaluations. ``key`` (excess, latency, sum of finishes) is updated in place.
    """
    G = gdev.size
    moved = np.empty((2, G), dtype=np.int64)
    was = np.empty((2, G), dtype=np.int64)
    evals = 0
    while since < moves.shape[0] and evals < budget:
        m1, b1, m2, b2 = apply(moves[pos], dev, gdev, gptr, gops, gmem, mem, cap, bad, moved, was)
        pos = (pos + 1) % moves.shape[0]
        since += 1
        if m1 < 0:
            continue
        excess = np.maximum(mem - cap, 0.0).sum()
        lat, tot = latency(dev, col, host, times, scale, out_bytes, topo, pred_ptr, pred_idx, succ_ptr, succ_idx, A, q,
                           backward, labels)
        evals += 1
        if better(excess, lat, tot, key[0], key[1], key[2]):
            key[0], key[1], key[2] = excess, lat, tot
            since = 0
        else:
            undo(m2, b2, dev, gdev, gptr, gops, gmem, mem, moved[1], was[1])
            undo(m1, b1, dev, gdev, gptr, gops, gmem, mem, moved[0], was[0])
    return pos, since, evals
