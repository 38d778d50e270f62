"""The compiled kernels of SliceGraph's slicing DP (Alg. 1, streamed): prefix sums along an order, the boundaries
groups allow, the DP over slicings with its replicated stages and cut-off, and the balanced slicing that seeds its
bound. :class:`placement_dsl.heuristics.slicegraph.Slicer` drives them; they take arrays and return arrays."""
from __future__ import annotations

import math

import numpy as np

from .jit import njit
from .kernels import clock, device_tallies
from .segments import advance, stage_load

INF = math.inf
SLACK = 1e-9  # relative slack on cutoffs: the DP's and the cost model's sums round differently


@njit(cache=True)
def prefix(order, times, mem_op, tmin):
    """Prefix sums along ``order``: finite work per class, count of ops a class cannot run
    (``inf`` time: kept apart so a segment without them gets a finite difference), memory,
    and the cheapest work."""
    n = order.size
    C = times.shape[0]
    cw = np.zeros((C, n + 1))
    ci = np.zeros((C, n + 1), dtype=np.int64)
    cm = np.zeros(n + 1)
    tm = np.zeros(n + 1)
    for q in range(n):
        v = order[q]
        for c in range(C):
            t = times[c, v]
            finite = t < INF
            cw[c, q + 1] = cw[c, q] + (t if finite else 0.0)
            ci[c, q + 1] = ci[c, q] + (0 if finite else 1)
        cm[q + 1] = cm[q] + mem_op[v]
        tm[q + 1] = tm[q] + tmin[v]
    return cw, ci, cm, tm


@njit(cache=True)
def allowed_boundaries(order, group_id, extra):
    """Boundary ``b`` (between positions ``b-1`` and ``b``) is allowed iff no group straddles it."""
    n = order.size
    lo = np.full(n, n, dtype=np.int64)
    hi = np.full(n, -1, dtype=np.int64)
    for q in range(n):
        g = group_id[order[q]]
        lo[g] = min(lo[g], q)
        hi[g] = max(hi[g], q)
    diff = np.zeros(n + 2, dtype=np.int64)
    for g in range(n):
        if hi[g] > lo[g]:
            diff[lo[g] + 1] += 1
            diff[hi[g] + 1] -= 1
    allowed = np.empty(n + 1, dtype=np.bool_)
    run = 0
    for b in range(n + 1):
        run += diff[b]
        allowed[b] = run == 0 and extra[b]
    return allowed


@njit(cache=True, inline="always")
def _replicated(load, sync, r, overlap):
    """App. C.2: a stage on ``r`` replicas, ``load / r + sync`` (``max`` of the two when overlapped)."""
    if r == 1:
        return load
    return load / r + sync if overlap == 0 else max(load / r, sync)


CLOCK_STEPS = 1 << 20  # the slicing DP reads the clock at least this often (segments visited)
SPARSE = 8  # the DP visits only the prefixes with a split when they are fewer than 1 in SPARSE of its band


@njit(cache=True, inline="always")
def _tree_sum(tree, i):
    """Sum of the first ``i`` entries of the Fenwick tree ``tree`` (positions ``0 .. i-1``)."""
    s = 0.0
    while i > 0:
        s += tree[i]
        i -= i & -i
    return s


@njit(cache=True, inline="always")
def _sync_tree(tree, values, seen, x):
    """Bring position ``x`` of ``tree`` to ``values[x]`` (``seen`` holds what the tree has)."""
    delta = values[x] - seen[x]
    if delta != 0.0:
        seen[x] = values[x]
        i = x + 1
        while i < tree.size:
            tree[i] += delta
            i += i & -i


@njit(cache=True, inline="always")
def _extend(i, j, q_in, q_out, live, cm, cw, ci, cp, dp, arg, reps, first, last, f, base, cap, tscale, ovf, hard,
            cls, overlap, sync_coef, limit, C, R):
    """Relax ``dp[j, .]`` by the stage ``[i, j)`` after every split of ``[0, i)`` (``q_in`` / ``q_out``: the
    dominance sums of the segment, :mod:`.segments`)."""
    tin = live[i] - live[j] + q_in
    mem = cm[j] - cm[i]
    fmin = INF
    for c in range(C):
        f[c] = INF
        base[c] = INF
        if (hard[c] and mem > cap[c] * (1.0 + SLACK)) or ci[c, j] > ci[c, i]:
            continue
        val = stage_load(cw[c, j] - cw[c, i], tin * tscale[c], q_out * tscale[c],
                         max(mem - cap[c], 0.0) * ovf[c], overlap)
        base[c] = val
        if val <= limit:
            f[c] = val
            fmin = min(fmin, val)
    t_hi = min(last[i], last[j] - 1) + 2
    if R > 1:  # a stage on r devices t-r .. t-1 (Tarnawski App. C.2), so t - r <= last[i]
        for t in range(first[i] + 1, min(last[i] + R - 1, last[j] - 1) + 2):
            for r in range(1, min(R, t - first[i]) + 1):
                t0 = t - r
                c = cls[t0]
                if base[c] == INF or (r > 1 and sync_coef[t0, r] < 0.0):
                    continue
                load = _replicated(base[c], (cp[j] - cp[i]) * sync_coef[t0, r], r, overlap)
                val = max(dp[i, t0], load)
                if load <= limit and val < dp[j, t]:
                    dp[j, t] = val
                    arg[j, t] = i
                    reps[j, t] = r
        return
    if fmin == INF:
        return
    if C == 1:
        for t in range(first[i] + 1, t_hi):
            val = max(dp[i, t - 1], fmin)
            if val < dp[j, t]:
                dp[j, t] = val
                arg[j, t] = i
    else:
        for t in range(first[i] + 1, t_hi):
            val = max(dp[i, t - 1], f[cls[t - 1]])
            if val < dp[j, t]:
                dp[j, t] = val
                arg[j, t] = i


@njit(cache=True)
def slice_dp(order, pred_ptr, pred_idx, outdeg, out_bytes, mem_op, times, tmin,
              cap, tscale, ovf, hard, cls, overlap, param_op, sync_coef, allowed, cutoff, deadline=INF, sparse=8, clock_steps=1 << 20):
    """Exact min-max slicing of ``order`` into the devices ``cls`` (Archer Alg. 1), or ``inf`` above ``cutoff``;
    ``nan`` once ``time.monotonic()`` passes ``deadline`` (read every 1,024 positions and every 2^20 segments).

    Only prefixes ``[0, i)`` with a split under the cutoff are extended. Where they are fewer than one in
    ``sparse`` of the positions whose work fits a stage (e.g. slow links: every cut costs more than the
    cutoff), the DP visits just those, reading the segment's transfer sums from Fenwick trees, so a
    graph best left on one device takes ``O(n log n)`` rather than ``O(n^2)``; else it streams the band.

    ``sync_coef[t, r]`` (``r >= 2``) is the all-reduce time per parameter byte of a stage on
    devices ``t .. t+r-1`` (negative: those devices cannot replicate one stage); its width
    ``R + 1`` bounds the replicas. Returns the value, the stage bounds and each device's replicas.
    """
    n = order.size
    R = sync_coef.shape[1] - 1
    C = times.shape[0]
    D = cls.size
    pos = np.empty(n, dtype=np.int64)
    for q in range(n):
        pos[order[q]] = q
    cw, ci, cm, tm = prefix(order, times, mem_op, tmin)
    limit = cutoff * (1.0 + SLACK)
    memlimit = 0.0
    for c in range(C):
        memlimit = max(memlimit, cap[c] * (1.0 + SLACK) if hard[c] else INF)
    dp = np.full((n + 1, D + 1), INF)  # dp[j, t]: best max load of positions [0, j) on the first t devices
    arg = np.zeros((n + 1, D + 1), dtype=np.int32)
    reps = np.ones((n + 1, D + 1), dtype=np.int32)  # devices of the last stage (its replicas)
    cp = np.zeros(n + 1)
    for q in range(n):
        cp[q + 1] = cp[q] + param_op[order[q]]
    base = np.empty(C)
    first = np.full(n + 1, D + 1, dtype=np.int64)  # smallest t with dp[j, t] finite
    dp[0, :] = 0.0  # leading devices may stay empty (e.g. everything on a CPU at the end of the sequence)
    first[0] = 0
    last = last_useful(tm, limit, D)
    r_in = np.zeros(n)
    r_out = np.zeros(n)
    live = np.zeros(n + 1)
    rem = np.zeros(n, dtype=np.int64)
    lastseen = np.zeros(n, dtype=np.int64)
    f = np.empty(C)
    lo = 0
    alive = np.zeros(n + 1, dtype=np.int64)  # positions i whose prefix [0, i) has a split, ascending
    alive[0] = 0
    na = 1 if allowed[0] else 0
    fen_in = np.zeros(n + 1)  # Fenwick trees over r_in / r_out, for sums over sparse alive positions
    fen_out = np.zeros(n + 1)
    seen_in = np.zeros(n)
    seen_out = np.zeros(n)
    prev = np.zeros(n, dtype=np.int64)  # the in-points' previous ends of the op being added
    steps = 0  # segments visited since the clock was last read
    for j in range(1, n + 1):
        if deadline < INF and (steps >= clock_steps or (j & 0x3FF) == 0):  # every 1,024 positions or 2^20 segments
            steps = 0
            if clock() > deadline:
                return np.nan, np.zeros(D + 1, dtype=np.int64), np.ones(D, dtype=np.int64)
        v = order[j - 1]
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            prev[e - pred_ptr[v]] = lastseen[pred_idx[e]]
        advance(j, v, pos, pred_ptr, pred_idx, outdeg, out_bytes, rem, lastseen, r_in, r_out, live)
        _sync_tree(fen_in, r_in, seen_in, j - 1)
        _sync_tree(fen_out, r_out, seen_out, j - 1)
        for e in range(pred_ptr[v], pred_ptr[v + 1]):  # the points advance moved
            _sync_tree(fen_in, r_in, seen_in, prev[e - pred_ptr[v]])
            _sync_tree(fen_out, r_out, seen_out, pos[pred_idx[e]])
        if not allowed[j]:
            continue
        while lo < j and (tm[j] - tm[lo] > limit * R or cm[j] - cm[lo] > memlimit):
            lo += 1
        steps += j - lo
        a0 = np.searchsorted(alive[:na], lo)
        if (na - a0) * sparse < j - lo:  # few prefixes in the band have a split: visit only those
            p_in = _tree_sum(fen_in, j)
            p_out = _tree_sum(fen_out, j)
            for a in range(na - 1, a0 - 1, -1):
                i = alive[a]
                _extend(i, j, p_in - _tree_sum(fen_in, i), p_out - _tree_sum(fen_out, i), live, cm, cw, ci, cp,
                        dp, arg, reps, first, last, f, base, cap, tscale, ovf, hard, cls, overlap, sync_coef,
                        limit, C, R)
        else:
            q_in = 0.0
            q_out = 0.0
            for i in range(j - 1, lo - 1, -1):
                q_in += r_in[i]
                q_out += r_out[i]
                if not allowed[i] or first[i] > D:  # no split of [0, i) stays under the cutoff
                    continue
                _extend(i, j, q_in, q_out, live, cm, cw, ci, cp, dp, arg, reps, first, last, f, base, cap, tscale,
                        ovf, hard, cls, overlap, sync_coef, limit, C, R)
        for t in range(1, D + 1):  # device t stays empty
            if dp[j, t - 1] < dp[j, t]:
                dp[j, t] = dp[j, t - 1]
                arg[j, t] = j
                reps[j, t] = 1
            if dp[j, t] < INF and first[j] > D:
                first[j] = t
        if first[j] <= D:
            alive[na] = j
            na += 1
    bounds = np.zeros(D + 1, dtype=np.int64)
    bounds[D] = n
    replicas = np.ones(D, dtype=np.int64)
    value = dp[n, D]
    if not value <= limit:
        return INF, bounds, replicas
    j, t = n, D
    while t > 0:
        i, r = arg[j, t], reps[j, t]
        for u in range(t - r + 1, t):  # the replicas hold no ops
            bounds[u] = j
        bounds[t - r] = i
        replicas[t - r] = r
        j, t = i, t - r
    return value, bounds, replicas


@njit(cache=True)
def last_useful(tm, limit, D):
    """Most devices a prefix ``[0, j)`` may use: each later stage holds at most ``limit`` of work."""
    n = tm.size - 1
    last = np.full(n + 1, D, dtype=np.int64)
    if limit < INF and limit > 0.0:
        for j in range(n + 1):
            need = np.ceil((tm[n] - tm[j]) / limit - 1e-9)
            last[j] = max(0, D - int(max(need, 0.0)))
    return last


@njit(cache=True)
def slicing_value(order, bounds, succ_ptr, succ_idx, out_bytes, mem_op, times, cap, tscale, ovf, hard, cls, overlap):
    """Max stage load of a given slicing, by one pass over the edges (each tensor once per stage)."""
    n = order.size
    D = cls.size
    seg = np.empty(n, dtype=np.int64)
    for t in range(D):
        for q in range(bounds[t], bounds[t + 1]):
            seg[order[q]] = t
    comp, mem, tin, tout = device_tallies(seg, cls, times, mem_op, succ_ptr, succ_idx, out_bytes, D)
    worst = 0.0
    for t in range(D):
        c = cls[t]
        if hard[c] and mem[t] > cap[c] * (1.0 + SLACK):
            return INF
        load = stage_load(comp[t], tin[t] * tscale[c], tout[t] * tscale[c], max(mem[t] - cap[c], 0.0) * ovf[c], overlap)
        if bounds[t + 1] > bounds[t]:
            worst = max(worst, load)
    return worst


@njit(cache=True)
def balanced_bounds(tm, allowed, D):
    """Cut where cumulative (fastest) work crosses multiples of total / D, at allowed boundaries."""
    n = tm.size - 1
    bounds = np.zeros(D + 1, dtype=np.int64)
    bounds[D] = n
    q = 0
    for t in range(1, D):
        target = tm[n] * t / D
        while q < n and (tm[q] < target or not allowed[q]):
            q += 1
        bounds[t] = q
    return bounds
