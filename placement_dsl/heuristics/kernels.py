"""Numba kernels shared by the heuristics.

* :func:`device_tallies` — per-device compute, memory and boundary traffic of an assignment,
  the terms of Archer eq. 3 / Tarnawski eq. (1) that :func:`.segments.stage_load` combines.
* :func:`clock` — ``time.monotonic()`` from inside a kernel, for the time limits: a kernel takes
  an absolute deadline (a float, ``inf`` for none) and reads the clock every few thousand steps.
"""
from __future__ import annotations

import time

import numba
import numpy as np


@numba.njit(cache=True)
def clock():
    """``time.monotonic()`` (seconds), read from compiled code."""
    with numba.objmode(now="float64"):
        now = time.monotonic()
    return now


@numba.njit(cache=True)
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
