"""Compiled kernels of the DP over ideals (see :mod:`.ideals` for the algorithm).

Ideals are bitsets: rows of ``uint64`` words over the supernodes of the contracted DAG.
Every kernel is ``numba.njit(cache=True)``: compiling them takes a few seconds, which would
otherwise be paid by every process that runs the DP (each test worker, each benchmark and
CLI call); the on-disk cache makes the second and later processes start at once.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .kernels import clock

INF = np.inf
ONE = np.uint64(1)
FNV_OFFSET = np.uint64(14695981039346656037)
FNV_PRIME = np.uint64(1099511628211)

CLOCK_PAIRS = 1 << 18  # a sweep reads the clock at least every this many pairs (a pair may cost O(n / 64) steps)

# overlap modes (evaluate.Overlap): load = compute + in + out | max(compute, in + out) | max(compute, in, out)
NONE, HALF, FULL = 0, 1, 2


# ---------------------------------------------------------------------------- enumeration
@njit(cache=True)
def _hash(row):
    h = FNV_OFFSET
    for w in row:
        h = (h ^ w) * FNV_PRIME
        h ^= h >> np.uint64(29)
    return h


@njit(cache=True)
def _same(a, b):
    for w in range(a.shape[0]):
        if a[w] != b[w]:
            return False
    return True


@njit(cache=True)
def _insert(table, ideals, count, row):
    """Slot of ``row`` in the open-addressing table: (slot, id or -1 if absent)."""
    mask = np.uint64(table.shape[0] - 1)
    h = _hash(row) & mask
    while True:
        j = table[h]
        if j < 0 or _same(ideals[j], row):
            return h, j
        h = (h + ONE) & mask


@njit(cache=True)
def _rehash(ideals, count, size):
    table = np.full(size, -1, np.int64)
    for i in range(count):
        h, _ = _insert(table, ideals, count, ideals[i])
        table[h] = i
    return table


@njit(cache=True)
def enumerate_ideals(pred_ptr, pred_idx, W, limit, deadline):
    """All ideals of a DAG of ``n`` nodes given each node's predecessors (CSR ``pred_ptr``, ``pred_idx``).

    Breadth-first from the empty set, so ids grow with cardinality (``J ⊊ I`` implies
    ``id(J) < id(I)``). Returns ``(ideals, child, parent, status)``: the ideals (N x W words),
    the immediate-sub-ideal pairs (``ideals[parent] = ideals[child]`` minus one maximal node),
    and ``status`` 0 when complete, 1 when more than ``limit`` ideals exist, 2 when
    ``time.monotonic()`` passed ``deadline`` (read after every 4,096 ideals); the arrays are then partial.
    """
    n = pred_ptr.size - 1
    cap = 1024
    ideals = np.zeros((cap, W), np.uint64)
    table = np.full(4096, -1, np.int64)
    h, _ = _insert(table, ideals, 1, ideals[0])
    table[h] = 0
    count = 1
    ecap = 4096
    child = np.empty(ecap, np.int64)
    parent = np.empty(ecap, np.int64)
    ne = 0
    row = np.empty(W, np.uint64)
    i = 0
    while i < count:
        if (i & 0xFFF) == 0xFFF and deadline < INF and clock() > deadline:
            return ideals[:count], child[:ne], parent[:ne], 2
        for v in range(n):
            wv = v >> 6
            bv = ONE << np.uint64(v & 63)
            if ideals[i, wv] & bv:
                continue
            ok = True
            for e in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred_idx[e]
                if not ideals[i, u >> 6] & (ONE << np.uint64(u & 63)):
                    ok = False
                    break
            if not ok:
                continue
            row[:] = ideals[i]
            row[wv] |= bv
            h, j = _insert(table, ideals, count, row)
            if j < 0:
                if count >= limit:
                    return ideals[:count], child[:ne], parent[:ne], 1
                if count == cap:
                    cap *= 2
                    grown = np.zeros((cap, W), np.uint64)
                    grown[:count] = ideals[:count]
                    ideals = grown
                ideals[count] = row
                table[h] = count
                j = count
                count += 1
                if 2 * count > table.shape[0]:
                    table = _rehash(ideals, count, 2 * table.shape[0])
            if ne == ecap:
                ecap *= 2
                c2 = np.empty(ecap, np.int64)
                p2 = np.empty(ecap, np.int64)
                c2[:ne] = child[:ne]
                p2[:ne] = parent[:ne]
                child, parent = c2, p2
            child[ne] = j
            parent[ne] = i
            ne += 1
        i += 1
    return ideals[:count], child[:ne], parent[:ne], 0


@njit(cache=True)
def widest_level(pred_ptr, pred_idx):
    """Most nodes of one longest-path depth, of a DAG whose nodes are numbered topologically.

    Nodes of equal depth are pairwise incomparable, so any subset of the widest level, with
    every node of smaller depth, is an ideal: the DAG has at least ``2 ** widest_level`` of them.
    """
    n = pred_ptr.size - 1
    depth = np.zeros(n, np.int64)
    for v in range(n):
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            depth[v] = max(depth[v], depth[pred_idx[e]] + 1)
    if n == 0:
        return 0
    return np.bincount(depth).max()


@njit(cache=True)
def log2_ideal_estimate(pred_ptr, pred_idx, walks, seed):
    """log2 of an unbiased estimate of the number of ideals of a DAG whose nodes are numbered topologically.

    Knuth's estimator of a backtracking tree's size, with importance sampling: deciding the nodes in
    order, a node whose predecessors are all in may be taken or left, any other must be left; the
    leaves are the ideals. A walk takes such a node with probability ``(h + 1) / (h + 2)`` (``h``: the
    longest path below it, so along a chain every prefix is equally likely: exact on chains and on
    side-by-side chains) and weighs each choice by one over its probability; the product over a walk
    estimates the count without bias. The mean over ``walks`` walks, ``O(walks * (n + m))`` steps.
    """
    n = pred_ptr.size - 1
    np.random.seed(seed)
    height = np.zeros(n, np.int64)
    for v in range(n - 1, -1, -1):
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            height[pred_idx[e]] = max(height[pred_idx[e]], height[v] + 1)
    inside = np.zeros(n, np.bool_)
    logs = np.empty(walks)
    for w in range(walks):
        weight = 0.0
        for v in range(n):
            ok = True
            for e in range(pred_ptr[v], pred_ptr[v + 1]):
                if not inside[pred_idx[e]]:
                    ok = False
                    break
            inside[v] = False
            if ok:
                take = (height[v] + 1.0) / (height[v] + 2.0)
                inside[v] = np.random.random() < take
                weight -= np.log2(take if inside[v] else 1.0 - take)
        logs[w] = weight
    top = logs.max() if walks else 0.0
    total = 0.0
    for w in range(walks):
        total += 2.0 ** (logs[w] - top)
    return top + np.log2(total / max(walks, 1))


@njit(cache=True)
def ideal_sums(ideals, values):
    """``out[i] = sum of values[v] over nodes v in ideal i`` (values: n x K)."""
    N, W = ideals.shape
    K = values.shape[1]
    out = np.zeros((N, K))
    for i in range(N):
        for w in range(W):
            word = ideals[i, w]
            while word:
                low = word & (~word + ONE)
                v = w * 64 + _bit_index(low)
                for k in range(K):
                    out[i, k] += values[v, k]
                word ^= low
    return out


DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_INDEX = np.zeros(64, np.int64)
for _b in range(64):
    _DEBRUIJN_INDEX[((1 << _b) * 0x03F79D71B4CB0A89 & 0xFFFFFFFFFFFFFFFF) >> 58] = _b


@njit(cache=True)
def _bit_index(low):
    """Index of the single set bit of ``low`` (a de Bruijn multiply instead of a shift loop)."""
    return _DEBRUIJN_INDEX[(low * DEBRUIJN) >> np.uint64(58)]


# ---------------------------------------------------------------------------- tensor boundaries
@njit(cache=True)
def _has(row, v):
    return (row[v >> 6] >> np.uint64(v & 63)) & ONE


@njit(cache=True)
def boundaries(ideals, sub_ptr, sub_idx, tmask, towner, tcost, tlo, thi):
    """Per ideal ``J`` (as a node set): ``in(J)``, ``out(J)`` and the tensors split by ``J``.

    A tensor is a node set ``T`` (its producer's node ``owner`` plus its consumers' nodes)
    with a cost. ``out(J)`` sums tensors made in ``J`` with a consumer outside; ``in(J)``
    those made outside with a consumer inside. Split tensors (``T ∩ J ≠ ∅``, ``T ⊄ J``)
    come back as CSR ``(ptr, idx)``, each ideal's in increasing order.

    Each ideal ``J`` is an immediate sub-ideal ``P`` (``sub_ptr``, ``sub_idx``, breadth-first so
    ``P`` comes first) plus one node ``v``: only the tensors holding ``v`` change side, so the
    work is the output's size plus the tensors at each ``v``, not ideals x tensors.
    """
    N = ideals.shape[0]
    nT = tmask.shape[0]
    n = ideals.shape[1] * 64
    size = np.zeros(nT, np.int64)
    at_ptr = np.zeros(n + 1, np.int64)  # CSR: the tensors holding each node
    for t in range(nT):
        for w in range(tlo[t], thi[t]):
            size[t] += _popcount(tmask[t, w])
            word = tmask[t, w]
            while word:
                low = word & (~word + ONE)
                at_ptr[w * 64 + _bit_index(low) + 1] += 1
                word ^= low
    for v in range(n):
        at_ptr[v + 1] += at_ptr[v]
    at_idx = np.empty(at_ptr[n], np.int64)
    fill = at_ptr[:n].copy()
    for t in range(nT):
        for w in range(tlo[t], thi[t]):
            word = tmask[t, w]
            while word:
                low = word & (~word + ONE)
                v = w * 64 + _bit_index(low)
                at_idx[fill[v]] = t
                fill[v] += 1
                word ^= low
    parent = np.zeros(N, np.int64)
    added = np.zeros(N, np.int64)
    ptr = np.zeros(N + 1, np.int64)
    for i in range(1, N):
        p = sub_idx[sub_ptr[i]]
        parent[i] = p
        for w in range(ideals.shape[1]):
            x = ideals[i, w] ^ ideals[p, w]
            if x:
                added[i] = w * 64 + _bit_index(x)
                break
        v = added[i]
        k = ptr[p + 1]  # the count of P's split tensors (prefix sums are taken after this loop)
        for e in range(at_ptr[v], at_ptr[v + 1]):
            t = at_idx[e]
            c = _meets(tmask[t], tlo[t], thi[t], ideals[p])
            if 0 < c + 1 < size[t]:
                k += 1
            if 0 < c < size[t]:
                k -= 1
        ptr[i + 1] = k
    for i in range(N):
        ptr[i + 1] += ptr[i]
    idx = np.empty(ptr[N], np.int64)
    tin = np.zeros(N)
    tout = np.zeros(N)
    for i in range(1, N):
        p, v, k = parent[i], added[i], ptr[i]
        for e in range(ptr[p], ptr[p + 1]):
            t = idx[e]
            if not _has(tmask[t], v):
                idx[k] = t
                k += 1
        for e in range(at_ptr[v], at_ptr[v + 1]):
            t = at_idx[e]
            if 0 < _meets(tmask[t], tlo[t], thi[t], ideals[i]) < size[t]:
                idx[k] = t
                k += 1
        idx[ptr[i]:k] = np.sort(idx[ptr[i]:k])
        for e in range(ptr[i], k):
            t = idx[e]
            if _has(ideals[i], towner[t]):
                tout[i] += tcost[t]
            else:
                tin[i] += tcost[t]
    return tin, tout, ptr, idx


@njit(cache=True)
def _popcount(x):
    count = 0
    while x:
        x &= x - ONE
        count += 1
    return count


@njit(cache=True)
def _meets(tmask, lo, hi, row):
    """``|T ∩ row|`` for a tensor's node set T."""
    c = 0
    for w in range(lo, hi):
        c += _popcount(tmask[w] & row[w])
    return c


@njit(cache=True)
def _stage_io(I, J, row_i, row_j, tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi):
    """(in, out) of the stage ``S = I \\ J`` from ``J``'s boundary and the tensors split by ``I``.

    Tensors inside ``I`` cross ``S``'s boundary exactly where they cross ``J``'s (with in and
    out swapped); tensors outside ``I`` never touch ``S``; only those split by ``I`` need a
    look (typically a handful: the frontier of ``I``).
    """
    s_in = tout[J]
    s_out = tin[J]
    for p in range(sptr[I], sptr[I + 1]):
        t = sidx[p]
        c = tcost[t]
        a = towner[t]
        a_in_j = _has(row_j, a)
        a_in_i = _has(row_i, a)
        meets_j = False
        meets_s = False
        for w in range(tlo[t], thi[t]):
            m = tmask[t, w]
            if m & row_j[w]:
                meets_j = True
            if m & row_i[w] & ~row_j[w]:
                meets_s = True
        if a_in_j:  # counted in out(J): made in J, leaves I
            s_in -= c
        elif meets_j:  # counted in in(J): made outside J, read in J
            s_out -= c
        if a_in_i and not a_in_j:
            s_out += c
        elif meets_s:
            s_in += c
    return max(s_in, 0.0), max(s_out, 0.0)


# ---------------------------------------------------------------------------- the DP
@njit(cache=True)
def _load(mode, compute, t_in, t_out, overflow):
    if mode == NONE:
        return compute + t_in + t_out + overflow
    if mode == HALF:
        return max(compute, t_in + t_out + overflow)
    return max(max(compute, t_in), t_out + overflow)


@njit(cache=True)
def _replicated(mode, load, sync, k):
    """App. C.2: a stage on ``k`` replicas: ``load / k`` with the all-reduce ``(k-1)/k * sync``."""
    if k == 1:
        return load
    ar = (k - 1) * sync / k
    if mode == NONE:
        return load / k + ar
    return max(load / k, ar)


@njit(cache=True)
def _stage_load(mode, comp, s_in, s_out, dm, cap_c, soft, ovf_scale_c, scale_c):
    """A stage's load on one device of a class: compute, transfers (``scale_c`` per byte) and, with
    ``soft`` memory, the bytes ``dm`` beyond ``cap_c`` streamed at ``ovf_scale_c`` per byte."""
    ovf = (dm - cap_c) * ovf_scale_c if soft and dm > cap_c else 0.0
    return _load(mode, comp, s_in * scale_c, s_out * scale_c, ovf)


@njit(cache=True)
def _least_load(mode, comp, sent, sync, max_rep_c):
    """A lower bound on a stage's load over 1..``max_rep_c`` replicas: its compute and the transfer
    time ``sent`` it is known to send, without inputs and overflow."""
    base = _load(mode, comp, 0.0, sent, 0.0)
    lb = base
    for k in range(2, max_rep_c + 1):
        lb = min(lb, _replicated(mode, base, sync, k))
    return lb


@njit(cache=True)
def _push_below(I, J, ideals, sub_ptr, sub_idx, stamp, stack, top, out_lb, leaving):
    """Push ``J``'s immediate sub-ideals not yet seen in ``I``'s walk, each with the tensors its stage
    sends out of ``I`` (``out_lb``: ``J``'s plus the removed node's); the new stack top."""
    for p in range(sub_ptr[J], sub_ptr[J + 1]):
        K = sub_idx[p]
        if stamp[K] != I:
            stamp[K] = I
            stack[top] = K
            out_lb[K] = out_lb[J] + leaving[_removed(ideals[J], ideals[K])]
            top += 1
    return top


@njit(cache=True)
def _may_improve(dp, I, J, alive, lbs, counts, strides, live):
    """Whether stage ``I \\ J`` with load at least ``lbs[c]`` could lower some live ``dp[I, s]``."""
    for c in range(lbs.shape[0]):
        if not alive[c]:
            continue
        for s in range(counts.shape[0]):
            if live[s] and counts[s, c] >= 1 and max(dp[J, s - strides[c]], lbs[c]) < dp[I, s]:
                return True
    return False


@njit(cache=True)
def _removed(big, small):
    """The one node in ``big`` but not in ``small`` (an immediate sub-ideal step)."""
    for w in range(big.shape[0]):
        x = big[w] & ~small[w]
        if x:
            return w * 64 + _bit_index(x & (~x + ONE))
    return -1


@njit(cache=True)
def _below_some(dp, I, J, lb, c, counts, strides, live, rem_j, remaining, ub, max_rep, lo, work, mfw, prune_work,
                mem, cap_c, soft, rho_c):
    """Whether some ``J' ⊆ J`` could still improve a live ``dp[I, s]`` with a stage on class ``c``.

    The tests only get stricter as ``J`` shrinks: the stage's load bound ``lb`` grows, and so
    does the work outside ``J`` (``rem_j``), which must fit the devices left once the stage
    takes its replicas (at most ``max_rep``) from ``s``. A state at the floor ``lo`` is final.
    With ``prune_work``, some ``J' ⊆ J`` with a finite ``dp[J', s - k e_c]`` (``k`` replicas) must also
    leave the stage less work on ``c`` than ``k`` times ``dp[I, s]`` and ``ub`` (a replica's load is at
    least its share of the compute; ``mfw[c, J]``: the most such work below ``J``) and, with hard
    memory, at most ``cap_c`` bytes (``mfw[C, J]``: the most memory of such a ``J'``).
    """
    for s in range(counts.shape[0]):
        d = dp[I, s]
        if live[s] and counts[s, c] >= 1 and lb < d and lo < d:
            if prune_work:  # a useful J' leaves the stage less work than dp[I, s] and at most ub per replica
                most = min(d, ub)
                cut = True
                for k in range(1, min(counts[s, c], max_rep) + 1):
                    r = s - k * strides[c]
                    if mfw[c, J, r] >= work[c, I] - k * most - (1e-9 * (work[c, I] + k * most) + 1e-12) and (
                            soft or mfw[work.shape[0], J, r] >= mem[I] - cap_c - (1e-9 * mem[I] + 1e-12)):
                        cut = False
                        break
                if cut:
                    continue
            left = remaining[s] + min(counts[s, c], max_rep) * rho_c
            if ub == INF or rem_j <= left * ub * (1.0 + 1e-9) + 1e-12:
                return True
    return False


@njit(cache=True)
def _most_work_below(mfw, dp, I, work, mem, sub_ptr, sub_idx):
    """``mfw[c, I, s]``: the largest work on class ``c`` (memory for ``c = C``) of an ideal ``J ⊆ I``
    with a finite ``dp[J, s]``."""
    for c in range(mfw.shape[0]):  # no rows without the cut
        for s in range(dp.shape[1]):
            own = mem[I] if c == work.shape[0] else work[c, I]
            best = own if dp[I, s] < INF else -INF
            for p in range(sub_ptr[I], sub_ptr[I + 1]):
                best = max(best, mfw[c, sub_idx[p], s])
            mfw[c, I, s] = best


@njit(cache=True)
def _unused(dp, back_j, back_c, I, counts, strides, live):
    """Leave a device unused: ``dp[I, s] <= dp[I, s - e_c]`` (states in increasing index order)."""
    for s in range(counts.shape[0]):
        for c in range(strides.shape[0]):
            if live[s] and counts[s, c] > 0 and dp[I, s - strides[c]] < dp[I, s]:
                dp[I, s] = dp[I, s - strides[c]]
                back_j[I, s] = -1
                back_c[I, s] = c


@njit(cache=True)
def _live_states(rem, remaining, ub, live):
    """``live[s]``: the ops outside ``I`` (work at least ``rem``) fit ``remaining[s]`` devices under ``ub``."""
    any_live = False
    for s in range(remaining.shape[0]):
        if ub == INF:
            live[s] = True
        else:
            live[s] = rem <= remaining[s] * ub * (1.0 + 1e-9) + 1e-12
        any_live = any_live or live[s]
    return any_live


@njit(cache=True)
def sweep(ideals, sub_ptr, sub_idx, work, unsup, mem, param,
          cap, scale, inv_bw, ovf_scale, soft, max_rep, mode,
          tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi,
          counts, strides, ub, rem_work, remaining, lo, prune_work, rho, deadline=INF):
    """Fill ``dp[I, s]``: the least max-load of ideal ``I`` on at most ``counts[s]`` devices per class.

    For each ``I`` the sub-ideals ``J`` are walked downward from ``I`` (immediate sub-ideal
    steps, each visited once) while some device class can still take ``I \\ J``: its work,
    memory and unsupported-op count only grow as ``J`` shrinks, so the walk stops at the
    first ``J`` where every class exceeds ``ub`` or its memory (only ideals close to ``I``
    are visited, never all ``I^2`` pairs). Candidates above ``ub`` are dropped; with ``ub`` a
    known achievable max-load the DP still finds the optimum. A pair's transfers are only
    computed when its compute-only lower bound could still improve ``dp[I, ·]``.

    Pruning by the incumbent ``ub`` (exact for every answer ``<= ub``): a state ``(I, s)`` is
    live only if the work outside ``I`` (``rem_work[I]``, each op at its cheapest class) fits
    the ``remaining[s]`` unused devices at ``ub`` each (a device of class ``c`` counted as ``rho[c]``:
    the most cheapest work per unit of its own work, so a slow CPU counts as a fraction); dead states stay ``inf`` and ``I``
    with no live state is skipped. The walk below ``J`` stops as soon as ``I \\ J``'s lower
    bound reaches the current ``dp[I, s]`` of every live ``s`` (a smaller ``J`` only adds
    load), so the walk tightens as ``dp[I, ·]`` improves. That bound is the stage's work plus
    the tensors it makes that are read outside ``I`` (each has one owner, so the sum over the
    stage's nodes grows along the walk), combined as the overlap mode combines transfers.

    Memory is a hard cap per class, or with ``soft`` the excess is streamed at
    ``ovf_scale`` per byte (Archer eq. 2; 0 on host devices). Transfers cost ``scale`` per
    byte (0 on host devices); the all-reduce of a replicated stage ``inv_bw`` per byte.

    Floor ``lo`` (a lower bound on the answer, or a target): ``dp[∅, ·] = lo``, so every value is
    ``max(lo, ·)`` of the unfloored one (max distributes over min) and the answer is
    ``max(lo, optimum)``; a state that reaches ``lo`` is final and its walk stops. With ``lo = ub``
    this is a feasibility test (``ub`` or ``inf``). With ``prune_work`` the walk
    below ``J`` also stops once no ``J' ⊆ J`` with a finite ``dp[J', s - k e_c]`` leaves the stage
    ``I \\ J'`` less work on its class than ``k min(dp[I, s], ub)`` (on ``k`` replicas) and, with hard memory, within
    the class's memory (``mfw``, filled bottom-up), which cuts the many cheap stages over
    ideals whose every split is already too costly.

    ``deadline`` (``time.monotonic()``, read every 16,384 ideals or :data:`CLOCK_PAIRS` pairs): once passed, the sweep stops and
    ``visited`` is returned negative (``-1 - visited``): the table is then incomplete.

    Back-links: ``back_j[I, s]`` is ``J`` (a stage ``I \\ J`` on ``back_k`` replicas of class
    ``back_c``) or ``-1`` (one device of class ``back_c`` left unused).
    """
    N = ideals.shape[0]
    C = work.shape[0]
    S = counts.shape[0]
    dp = np.full((N, S), INF)
    back_j = np.full((N, S), -2, np.int32)
    back_c = np.zeros((N, S), np.int8)
    back_k = np.ones((N, S), np.int16)
    dp[0, :] = lo
    mfw = np.full((C + 1 if prune_work else 0, N, S), -INF)  # (c, J, s): most work on c (memory) of J' ⊆ J
    _most_work_below(mfw, dp, 0, work, mem, sub_ptr, sub_idx)
    stamp = np.full(N, -1, np.int64)
    stack = np.empty(N, np.int64)
    alive = np.zeros(C, np.bool_)
    comp = np.zeros(C)
    lbs = np.zeros(C)
    live = np.zeros(S, np.bool_)
    n = tmask.shape[1] * 64
    leaving = np.zeros(n)  # per node of I: its tensors read outside I
    out_lb = np.zeros(N)  # per J on the walk: the stage's tensors read outside I
    visited = 0
    checked = 0
    for I in range(1, N):
        if deadline < INF and ((I & 0x3FFF) == 0 or visited - checked > CLOCK_PAIRS):
            checked = visited
            if clock() > deadline:
                return dp, back_j, back_c, back_k, -1 - visited
        if not _live_states(rem_work[I], remaining, ub, live):
            _most_work_below(mfw, dp, I, work, mem, sub_ptr, sub_idx)
            continue
        row_i = ideals[I]
        top = 0
        for p in range(sptr[I], sptr[I + 1]):
            t = sidx[p]
            if _has(row_i, towner[t]):
                leaving[towner[t]] += tcost[t]
        for p in range(sub_ptr[I], sub_ptr[I + 1]):
            J = sub_idx[p]
            stamp[J] = I
            stack[top] = J
            out_lb[J] = leaving[_removed(row_i, ideals[J])]
            top += 1
        while top > 0:
            top -= 1
            J = stack[top]
            any_alive = False
            for c in range(C):
                comp[c] = work[c, I] - work[c, J]
                ok = unsup[c, I] == unsup[c, J] and counts[S - 1, c] > 0
                if ok and not soft:
                    ok = mem[I] - mem[J] <= cap[c]
                if ok:
                    lb = _least_load(mode, comp[c], out_lb[J] * scale[c], (param[I] - param[J]) * inv_bw[c], max_rep[c])
                    ok = lb <= ub and _below_some(dp, I, J, lb, c, counts, strides, live, rem_work[J], remaining, ub,
                                                  max_rep[c], lo, work, mfw, prune_work, mem, cap[c], soft, rho[c])
                    lbs[c] = lb
                alive[c] = ok
                any_alive = any_alive or ok
            if not any_alive:
                continue
            top = _push_below(I, J, ideals, sub_ptr, sub_idx, stamp, stack, top, out_lb, leaving)
            visited += 1
            if not _may_improve(dp, I, J, alive, lbs, counts, strides, live):
                continue
            s_in, s_out = _stage_io(I, J, row_i, ideals[J], tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi)
            dm = mem[I] - mem[J]
            improved = False
            for c in range(C):
                if not alive[c]:
                    continue
                base = _stage_load(mode, comp[c], s_in, s_out, dm, cap[c], soft, ovf_scale[c], scale[c])
                sync = (param[I] - param[J]) * inv_bw[c]
                for k in range(1, max_rep[c] + 1):
                    load = _replicated(mode, base, sync, k)
                    if load > ub:
                        continue
                    step = k * strides[c]
                    for s in range(S):
                        if counts[s, c] < k or not live[s]:
                            continue
                        cand = max(dp[J, s - step], load)
                        if cand < dp[I, s]:
                            dp[I, s] = cand
                            back_j[I, s] = J
                            back_c[I, s] = c
                            back_k[I, s] = k
                            improved = True
            if improved:  # a state at the floor finishes the states with more devices at once
                _unused(dp, back_j, back_c, I, counts, strides, live)
        for p in range(sptr[I], sptr[I + 1]):
            leaving[towner[sidx[p]]] = 0.0
        _unused(dp, back_j, back_c, I, counts, strides, live)
        _most_work_below(mfw, dp, I, work, mem, sub_ptr, sub_idx)
    return dp, back_j, back_c, back_k, visited


@njit(cache=True)
def split_value(steps, ideals, unsup, devices, work, mem, param, cap, scale, inv_bw, ovf_scale, soft, mode,
                tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi):
    """The max-load of a split given as ``(I, J, class, replicas)`` rows, in :func:`sweep`'s arithmetic.

    The unfloored DP's value of that split, bit for bit: a descending search compares it with
    the next target. ``inf`` when the split is not one the DP may take: a stage with an op its
    class cannot run (``unsup``), beyond a class's hard memory, or more devices of a class than
    it has (``devices``).
    """
    value = 0.0
    used = np.zeros(devices.shape[0], np.int64)
    for r in range(steps.shape[0]):
        I, J, c, k = steps[r, 0], steps[r, 1], steps[r, 2], steps[r, 3]
        dm = mem[I] - mem[J]
        used[c] += k
        if unsup[c, I] != unsup[c, J] or (not soft and dm > cap[c]) or used[c] > devices[c]:
            return np.inf
        s_in, s_out = _stage_io(I, J, ideals[I], ideals[J], tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi)
        base = _stage_load(mode, work[c, I] - work[c, J], s_in, s_out, dm, cap[c], soft, ovf_scale[c], scale[c])
        value = max(value, _replicated(mode, base, (param[I] - param[J]) * inv_bw[c], k))
    return value


@njit(cache=True)
def lookup(ideals, rows):
    """The ids of ``rows`` (bitsets) among ``ideals``, -1 where absent (one hash table over the ideals)."""
    size = 1
    while size < 2 * ideals.shape[0]:
        size *= 2
    table = _rehash(ideals, ideals.shape[0], size)
    out = np.empty(rows.shape[0], np.int64)
    for r in range(rows.shape[0]):
        _, out[r] = _insert(table, ideals, ideals.shape[0], rows[r])
    return out
