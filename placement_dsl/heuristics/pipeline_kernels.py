"""Compiled kernels of the pipeline planner (:mod:`.pipeline_dp`).

Positions ``0..n-1`` are the supernodes of the contracted forward DAG in one topological
order; a stage is a position range ``[x, y)`` inside a server segment ``[a, b)``. A tensor is
its producer's position and its consumers' positions (other than the producer's).
"""
from __future__ import annotations

import numpy as np

from .jit import njit
from .kernels import clock

INF = np.inf
NONE, HALF, FULL = 0, 1, 2  # overlap modes, as in .ideal_kernels
NO_SPEC, ONE_F_ONE_B, GPIPE = 0, 1, 2  # memory accounting


@njit(cache=True)
def _contrib(t, prod_in, cons_in, ncons, tbytes, tfw, bw_in, bw_out):
    """(in time, out time, forward bytes in) of tensor ``t`` for a stage in the given state."""
    if not prod_in and cons_in > 0:
        return tbytes[t] / bw_in[t], 0.0, tbytes[t] if tfw[t] else 0.0
    if prod_in and cons_in < ncons[t]:
        return 0.0, tbytes[t] / bw_out[t], 0.0
    return 0.0, 0.0, 0.0


@njit(cache=True)
def segment_tables(a, b, towner, tbytes, tfw, tminc, tmaxc, ncons, prod_ptr, prod_idx, cons_ptr, cons_idx,
                   intra, inter, comp, ub, spread, deadline=np.inf):
    """In time, out time and forward bytes in of every stage ``[x, y)`` with ``a <= x < y <= b``.

    Inside the segment (one server's pipeline) transfers run at ``intra``; a tensor from or to
    outside the segment at ``inter`` (the receiver pays per tensor, the sender once per tensor
    at its slowest route); the last two tables are the forward pass's in and out times (the pass of
    a tensor is its producer's). Tables are indexed ``[x - a, y - a]``; stages computing longer than
    ``ub * spread`` (``spread``: the most replicas a stage may have) are left out. Past ``deadline`` (``clock()``,
    read once per first position) the last value is ``False`` and the tables are incomplete.
    """
    L = b - a
    T = tbytes.shape[0]
    bw_in = np.empty(T)
    bw_out = np.empty(T)
    for t in range(T):
        bw_in[t] = intra if a <= towner[t] < b else inter
        bw_out[t] = intra if tminc[t] >= a and tmaxc[t] < b else inter
    tin = np.zeros((L + 1, L + 1))
    tout = np.zeros((L + 1, L + 1))
    fin = np.zeros((L + 1, L + 1))
    tin_fw = np.zeros((L + 1, L + 1))
    tout_fw = np.zeros((L + 1, L + 1))
    stamp = np.full(T, -1, np.int64)
    prod = np.zeros(T, np.bool_)
    cons = np.zeros(T, np.int64)
    for x in range(a, b):
        if deadline < np.inf and clock() > deadline:
            return tin, tout, fin, tin_fw, tout_fw, False
        s_in, s_out, s_fin, f_in, f_out = 0.0, 0.0, 0.0, 0.0, 0.0
        for y in range(x + 1, b + 1):
            if comp[y] - comp[x] > ub * spread:
                break
            v = y - 1
            for side in range(2):
                ptr, idx = (prod_ptr, prod_idx) if side == 0 else (cons_ptr, cons_idx)
                for e in range(ptr[v], ptr[v + 1]):
                    t = idx[e]
                    if stamp[t] != x:
                        stamp[t] = x
                        prod[t] = False
                        cons[t] = 0
                    i0, o0, f0 = _contrib(t, prod[t], cons[t], ncons, tbytes, tfw, bw_in, bw_out)
                    if side == 0:
                        prod[t] = True
                    else:
                        cons[t] += 1
                    i1, o1, f1 = _contrib(t, prod[t], cons[t], ncons, tbytes, tfw, bw_in, bw_out)
                    s_in += i1 - i0
                    s_out += o1 - o0
                    s_fin += f1 - f0
                    if tfw[t]:
                        f_in += i1 - i0
                        f_out += o1 - o0
            tin[x - a, y - a] = max(s_in, 0.0)
            tout[x - a, y - a] = max(s_out, 0.0)
            fin[x - a, y - a] = max(s_fin, 0.0)
            tin_fw[x - a, y - a] = max(f_in, 0.0)
            tout_fw[x - a, y - a] = max(f_out, 0.0)
    return tin, tout, fin, tin_fw, tout_fw, True


@njit(cache=True)
def boundary_bytes(a, b, towner, tbytes, tcptr, tcidx):
    """Bytes of every stage ``[x, y)`` of segment ``[a, b)`` that cross the segment's boundary.

    ``(in, out)`` tables indexed ``[x - a, y - a]``: tensors made outside and read in the stage,
    and tensors made in the stage with a consumer outside the segment (so their slowest route
    leaves the server). ``tcidx[tcptr[t]:tcptr[t+1]]`` are tensor ``t``'s consumer positions, sorted.
    """
    L = b - a
    din = np.zeros((L + 1, L + 2))
    dout = np.zeros((L + 1, L + 2))
    for t in range(towner.shape[0]):
        o, lo, hi = towner[t], tcptr[t], tcptr[t + 1]
        outside = tcidx[lo] < a or tcidx[hi - 1] >= b
        if a <= o < b:
            if outside:
                for x in range(a, o + 1):
                    dout[x - a, o + 1 - a] += tbytes[t]
            continue
        k = lo
        for x in range(a, b):
            while k < hi and tcidx[k] < x:
                k += 1
            if k == hi or tcidx[k] >= b:
                break
            din[x - a, tcidx[k] + 1 - a] += tbytes[t]
    tin = np.zeros((L + 1, L + 1))
    tout = np.zeros((L + 1, L + 1))
    for x in range(L + 1):
        ci, co = 0.0, 0.0
        for y in range(L + 1):
            ci += din[x, y]
            co += dout[x, y]
            tin[x, y] = ci
            tout[x, y] = co
    return tin, tout


@njit(cache=True)
def _load(mode, compute, t_in, t_out, R, sync):
    """Per-sample load on each of ``R`` replicas (Tarnawski App. C.1-C.2)."""
    if mode == NONE:
        base = compute + t_in + t_out
        return base / R + sync
    if mode == HALF:
        base = max(compute, t_in + t_out)
    else:
        base = max(max(compute, t_in), t_out)
    return max(base / R, sync)


@njit(cache=True)
def _fits(spec, q, R, param, memnode, act, fin, cap, state, micro, recompute):
    """Whether one replica of a stage fits in ``cap`` (``q`` stages from it to the end, itself included)."""
    if spec == NO_SPEC:
        return memnode <= cap
    n = micro if spec == GPIPE else q
    if spec == ONE_F_ONE_B and micro > 0:
        n = min(n, micro)
    inflight = -(-n // R)
    if recompute:
        need = state * param + inflight * fin + act + fin
    else:
        need = state * param + inflight * (act + fin)
    return need <= cap


@njit(cache=True)
def inner_dp(a, b, m, P, K, comp, param, memnode, act, tin, tout, fin, mode, inv_ring, cap,
             spec, state, micro, recompute, max_rep, ub, init, deadline=np.inf):
    """Best split of segment ``[a, b)`` onto at most ``P`` devices of each of ``m`` servers.

    ``H[x, p, q]``: least max-load of stages covering ``[x, b)`` on at most ``p`` devices per
    server whose first stage has ``q`` stages from it to the end of the segment, itself
    included (``K = 0``: not tracked, index 0 only). A stage ``[x, y)`` on ``r`` devices per
    server runs on ``R = r * m`` replicas, all-reducing ``2 (R-1)/R`` of its parameter bytes at
    ``1 / inv_ring`` per byte. ``comp``, ``param``, ``memnode``, ``act`` are prefix sums over
    positions; ``tin``, ``tout``, ``fin`` the segment's tables (:func:`segment_tables`).
    Stages above ``ub`` (a max-load some placement of the class achieves) are dropped: the
    optimum keeps every stage under it. ``init[q]`` is the value of what follows the segment with
    ``q`` stages (0 for a last segment): the DP carries it, so ``q`` counts to the pipeline's end.
    Past ``deadline`` (``clock()``, read once per first position) the last value is ``False``.
    """
    L = b - a
    Q = K + 1
    H = np.full((L + 1, P + 1, Q), INF)
    back_y = np.full((L + 1, P + 1, Q), -1, np.int64)
    back_r = np.zeros((L + 1, P + 1, Q), np.int64)
    for p in range(P + 1):
        H[L, p, :] = init
    q_lo = 1 if K > 0 else 0
    for x in range(L - 1, -1, -1):
        if deadline < np.inf and clock() > deadline:
            return H, back_y, back_r, False
        for y in range(x + 1, L + 1):
            c = comp[a + y] - comp[a + x]
            if c / (P * m) > ub:
                break  # every later stage from x computes longer still
            pr = param[a + y] - param[a + x]
            mn = memnode[a + y] - memnode[a + x]
            ac = act[a + y] - act[a + x]
            for r in range(1, min(P, max_rep) + 1):
                R = r * m
                sync = 2.0 * (R - 1) / R * pr * inv_ring
                load = _load(mode, c, tin[x, y], tout[x, y], R, sync)
                if load > ub:
                    continue
                for q in range(q_lo, Q):
                    if not _fits(spec, max(q, 1), R, pr, mn, ac, fin[x, y], cap, state, micro, recompute):
                        continue
                    qn = q - 1 if K > 0 else 0
                    for p in range(r, P + 1):
                        cand = max(H[y, p - r, qn], load)
                        if cand < H[x, p, q]:
                            H[x, p, q] = cand
                            back_y[x, p, q] = y
                            back_r[x, p, q] = r
    return H, back_y, back_r, True
