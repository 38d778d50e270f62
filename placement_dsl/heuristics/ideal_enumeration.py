"""Compiled kernels of the DP over ideals: enumerating the ideals (see :mod:`.ideals` for the algorithm).

Ideals are bitsets: rows of ``uint64`` words over the supernodes of the contracted DAG. Here: the
breadth-first enumeration with its hash table, the lattice's width and sampled size, sums of
per-node values over ideals, and finding given rows among the ideals. Every kernel is
``numba.njit(cache=True)``, compiled once and cached on disk (:mod:`.ideal_kernels`).
"""
from __future__ import annotations

import random

import numpy as np

from .jit import njit, python_version, restartable
from .kernels import clock

INF = np.inf
ONE = np.uint64(1)
FNV_OFFSET = np.uint64(14695981039346656037)
FNV_PRIME = np.uint64(1099511628211)


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


@python_version(enumerate_ideals)
def _enumerate_ideals_python(pred_ptr, pred_idx, W, limit, deadline):
    """:func:`enumerate_ideals` in Python, the same arrays in the same order: the ideals as Python integers (bit
    ``v`` for node ``v``), a dict in place of the hash table, and the words written once at the end. The kernel's
    scalar steps on numpy words cost 0.15-0.2 s of CPU on ResNet-50's 242 ideals in the interpreter."""
    n = pred_ptr.size - 1
    ptr, idx = pred_ptr.tolist(), pred_idx.tolist()
    needs = [sum(1 << u for u in set(idx[ptr[v]:ptr[v + 1]])) for v in range(n)]
    bits = [1 << v for v in range(n)]
    found: list[int] = [0]
    ids = {0: 0}
    child: list[int] = []
    parent: list[int] = []
    status, i = 0, 0
    while i < len(found) and status == 0:
        if (i & 0xFFF) == 0xFFF and deadline < INF and clock() > deadline:
            status = 2
            break
        ideal = found[i]
        for v in range(n):
            if ideal & bits[v] or ideal & needs[v] != needs[v]:
                continue
            row = ideal | bits[v]
            j = ids.get(row, -1)
            if j < 0:
                if len(found) >= limit:
                    status = 1
                    break
                j = ids[row] = len(found)
                found.append(row)
            child.append(j)
            parent.append(i)
        i += 1
    words = np.zeros((len(found), W), np.uint64)
    low = (1 << 64) - 1
    for w in range(W):
        words[:, w] = [(x >> (64 * w)) & low for x in found]
    return words, np.array(child, np.int64), np.array(parent, np.int64), status


restartable(enumerate_ideals)  # it writes none of its arguments: run in Python, it gives way to its compiled code


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
def log2_mean(logs, walks):
    """log2 of the mean of ``2 ** logs[:walks]``, summed from the largest term down so that no term overflows."""
    top = logs.max() if walks else 0.0
    total = 0.0
    for w in range(walks):
        total += 2.0 ** (logs[w] - top)
    return top + np.log2(total / max(walks, 1))


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
    return log2_mean(logs, walks)


def legacy_stream(seed: int) -> random.Random:
    """A generator whose ``random()`` gives the doubles of ``np.random.seed(seed); np.random.random()``: the same
    Mersenne Twister (numpy's legacy seeding of an integer: Matsumoto and Nishimura's ``init_genrand``) and the
    same 53-bit doubles as Python's own."""
    mt = [int(seed) & 0xFFFFFFFF]
    for i in range(1, 624):
        mt.append((1812433253 * (mt[-1] ^ (mt[-1] >> 30)) + i) & 0xFFFFFFFF)
    out = random.Random()
    out.setstate((3, (*mt, 624), None))
    return out


@python_version(log2_ideal_estimate)
def _log2_ideal_estimate_python(pred_ptr, pred_idx, walks, seed):
    """:func:`log2_ideal_estimate` in Python, the same to the bit: the predecessors and heights as lists, each
    node's two log-weights computed once, and the uniform draws the stream the kernel's ``np.random.random()``
    calls read (:func:`legacy_stream`, without loading ``numpy.random``). The kernel's scalar steps cost 0.1 s of
    CPU on ResNet-50's 177 supernodes in the interpreter."""
    n = pred_ptr.size - 1
    draw = legacy_stream(seed).random
    ptr, idx = pred_ptr.tolist(), pred_idx.tolist()
    height = [0] * n
    for v in range(n - 1, -1, -1):
        for e in range(ptr[v], ptr[v + 1]):
            height[idx[e]] = max(height[idx[e]], height[v] + 1)
    take = [(h + 1.0) / (h + 2.0) for h in height]
    log_in = np.log2(np.array(take, dtype=np.float64)).tolist() if n else []
    log_out = np.log2(1.0 - np.array(take, dtype=np.float64)).tolist() if n else []
    preds = [idx[ptr[v]:ptr[v + 1]] for v in range(n)]
    logs = np.empty(walks)
    for w in range(walks):
        inside = [False] * n
        weight = 0.0
        for v in range(n):
            if all(inside[u] for u in preds[v]):
                inside[v] = draw() < take[v]
                weight -= log_in[v] if inside[v] else log_out[v]
        logs[w] = weight
    return log2_mean(logs, walks)


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
                v = w * 64 + bit_index(low)
                for k in range(K):
                    out[i, k] += values[v, k]
                word ^= low
    return out


@python_version(ideal_sums)
def _ideal_sums_numpy(ideals, values):
    """:func:`ideal_sums` in Python: node by node over all the ideals at once, adding in the kernel's order
    (ascending nodes), so each sum is the same to the bit."""
    N = ideals.shape[0]
    out = np.zeros((N, values.shape[1]))
    for v in range(values.shape[0]):
        inside = ((ideals[:, v >> 6] >> np.uint64(v & 63)) & ONE).astype(bool)
        if inside.any():
            out[inside] += values[v]
    return out


restartable(ideal_sums)  # it writes none of its arguments


DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_INDEX = np.zeros(64, np.int64)
for _b in range(64):
    _DEBRUIJN_INDEX[((1 << _b) * 0x03F79D71B4CB0A89 & 0xFFFFFFFFFFFFFFFF) >> 58] = _b


@njit(cache=True)
def bit_index(low):
    """Index of the single set bit of ``low`` (a de Bruijn multiply instead of a shift loop)."""
    return _DEBRUIJN_INDEX[(low * DEBRUIJN) >> np.uint64(58)]



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
