"""Numba kernels shared by the heuristics.

* :func:`device_tallies` — per-device compute, memory and boundary traffic of an assignment,
  the terms of Archer eq. 3 / Tarnawski eq. (1) that :func:`.segments.stage_load` combines.
* :func:`clock` — ``time.monotonic()`` from inside a kernel, for the time limits: a kernel takes
  an absolute deadline (a float, ``inf`` for none) and reads the clock every few thousand steps.
* :func:`priority_order` — Kahn's algorithm with node priorities (Archer Alg. 3), the one topological heap sort
  of SliceGraph, BRKGA's decoder and the contraction's renumbering.
"""
from __future__ import annotations

import time

import numpy as np

from .jit import njit, objmode


@njit(cache=True)
def clock():
    """``time.monotonic()`` (seconds), read from compiled code."""
    with objmode(now="float64"):
        now = time.monotonic()
    return now


@njit(cache=True)
def device_tallies(dev, cls, times, mem_op, succ_ptr, succ_idx, out_bytes, D):
    """Compute, memory, bytes in and bytes out of each of ``D`` devices under ``dev`` (op -> device).

    ``times[cls[d], u]`` is op ``u``'s time on device ``d`` (``cls`` maps devices to the rows of
    ``times``: device classes, or ``arange(D)`` for one row per device). A tensor counts once
    per boundary: once into every other device that consumes it, and once out of its producer's
    device if any other device consumes it.
    """
    n = dev.size
    comp = np.zeros(D)
    mem = np.zeros(D)
    tin = np.zeros(D)
    tout = np.zeros(D)
    stamp = np.full(D, -1, dtype=np.int64)
    for u in range(n):
        a = dev[u]
        comp[a] += times[cls[a], u]
        mem[a] += mem_op[u]
        sent = False
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            b = dev[succ_idx[e]]
            if b != a and stamp[b] != u:
                stamp[b] = u
                tin[b] += out_bytes[u]
                sent = True
        if sent:
            tout[a] += out_bytes[u]
    return comp, mem, tin, tout


# ---------------------------------------------------------------------------- topological order by priority
@njit(cache=True, inline="always")
def _before(prio, a, b):
    return prio[a] > prio[b] or (prio[a] == prio[b] and a < b)


@njit(cache=True)
def priority_order(prio, succ_ptr, succ_idx, indeg0):
    """KahnWithNodePriorities (Archer Alg. 3): a topological order taking the ready node of the highest ``prio``
    first (ties: the lower index), by a binary max-heap. Fewer than all nodes when the graph has a cycle.

    ``prio = -arange(n)`` takes the smallest ready node first (:func:`.contract.smallest_first_order`).
    """
    n = prio.size
    indeg = indeg0.copy()
    heap = np.empty(n, dtype=np.int64)
    order = np.empty(n, dtype=np.int64)
    size = 0
    count = 0
    for v in range(n):
        if indeg[v] == 0:
            size = _push(heap, size, v, prio)
    while size > 0:
        u = heap[0]
        size -= 1
        heap[0] = heap[size]
        _sift_down(heap, size, prio)
        order[count] = u
        count += 1
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            v = succ_idx[e]
            indeg[v] -= 1
            if indeg[v] == 0:
                size = _push(heap, size, v, prio)
    return order[:count]


@njit(cache=True)
def _push(heap, size, v, prio):
    k = size
    heap[k] = v
    while k > 0:
        parent = (k - 1) // 2
        if not _before(prio, heap[k], heap[parent]):
            break
        heap[k], heap[parent] = heap[parent], heap[k]
        k = parent
    return size + 1


@njit(cache=True)
def _sift_down(heap, size, prio):
    k = 0
    while True:
        left = 2 * k + 1
        if left >= size:
            return
        best = left
        if left + 1 < size and _before(prio, heap[left + 1], heap[left]):
            best = left + 1
        if not _before(prio, heap[best], heap[k]):
            return
        heap[k], heap[best] = heap[best], heap[k]
        k = best
