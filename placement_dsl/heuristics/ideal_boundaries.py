"""Compiled kernels of the DP over ideals: the tensors that cross an ideal's boundary and a stage's
input and output (see :mod:`.ideals` for the algorithm). ``numba.njit(cache=True)`` throughout.
"""
from __future__ import annotations

import numpy as np

from .ideal_enumeration import ONE, bit_index
from .jit import njit, restartable


# ---------------------------------------------------------------------------- tensor boundaries
@njit(cache=True)
def has_node(row, v):
    """Whether node ``v`` is in the bitset ``row`` (1 or 0, as ``uint64``)."""
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
                at_ptr[w * 64 + bit_index(low) + 1] += 1
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
                v = w * 64 + bit_index(low)
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
                added[i] = w * 64 + bit_index(x)
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
            if not has_node(tmask[t], v):
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
            if has_node(ideals[i], towner[t]):
                tout[i] += tcost[t]
            else:
                tin[i] += tcost[t]
    return tin, tout, ptr, idx


restartable(boundaries)  # it writes none of its arguments


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
def stage_io(I, J, row_i, row_j, tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi):
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
        a_in_j = has_node(row_j, a)
        a_in_i = has_node(row_i, a)
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


