"""The chain split's DP (:mod:`.latency_chain`) compiled: the intervals that start at a run of positions, each
extended one group at a time, relaxing the DP's cells at every end.

Positions are those of the ops in the chain's order. Per start ``i`` an op is *inside* when its stamp is
``i + 1`` (no array is cleared between starts); an interval reads each tensor from outside once, writes each of its
tensors whose last consumer lies past its end once, and on a host takes the longest path of host times inside it.
"""
from __future__ import annotations

import math

import numpy as np

from .jit import njit

ROWS = 16  # starts a chain kernel prices between two looks at the clock (its caller reads it)


@njit(cache=True)
def chain_rows(i0: int, i1: int, first: np.ndarray, pred_ptr: np.ndarray, pred_idx: np.ndarray, out: np.ndarray,
               host: np.ndarray, last_use: np.ndarray, end_ptr: np.ndarray, end_idx: np.ndarray, work: np.ndarray,
               banned: np.ndarray, mem: np.ndarray, cap: np.ndarray, scale: np.ndarray, best: np.ndarray,
               back: np.ndarray, on_acc: np.ndarray, inside: np.ndarray, read_mark: np.ndarray,
               written_mark: np.ndarray, finish: np.ndarray) -> None:
    """Relax ``best[j, k, h]`` (accelerators ``k`` and hosts ``h`` used) from every start ``i0 <= i < i1``."""
    G = first.size - 1
    A, H = best.shape[1] - 1, best.shape[2] - 1
    accel = np.empty(A)
    for i in range(i0, i1):
        if not np.isfinite(best[i]).any():
            continue
        stamp = i + 1
        start = first[i]
        read = 0.0
        written = 0.0
        longest = 0.0
        for j in range(i + 1, G + 1):
            lo, hi = first[j - 1], first[j]
            for v in range(lo, hi):
                inside[v] = stamp
                if read_mark[v] == stamp:  # consumed inside before it joined (a group out of topological order)
                    read_mark[v] = 0
                    read -= out[v]
                ready = 0.0
                for p in range(pred_ptr[v], pred_ptr[v + 1]):
                    u = pred_idx[p]
                    if inside[u] == stamp:
                        ready = max(ready, finish[u])
                    elif read_mark[u] != stamp:
                        read_mark[u] = stamp
                        read += out[u]
                finish[v] = ready + host[v]
                longest = max(longest, finish[v])
                if last_use[v] >= hi:
                    written_mark[v] = stamp
                    written += out[v]
            for e in range(lo, hi):
                for p in range(end_ptr[e], end_ptr[e + 1]):
                    v = end_idx[p]
                    if written_mark[v] == stamp:
                        written_mark[v] = 0
                        written -= out[v]
            held = mem[hi] - mem[start]
            fits = False
            for a in range(A):
                if held <= cap[a] and banned[hi, a] == banned[start, a]:
                    accel[a] = scale[a] * (read + max(written, 0.0)) + work[hi, a] - work[start, a]
                    fits = True
                else:
                    accel[a] = math.inf
            for k in range(A + 1):
                for h in range(H + 1):
                    r = best[i, k, h]
                    if not math.isfinite(r):
                        continue
                    if h < H and r + longest < best[j, k, h + 1]:
                        best[j, k, h + 1] = r + longest
                        back[j, k, h + 1] = i
                        on_acc[j, k, h + 1] = False
                    if k < A and r + accel[k] < best[j, k + 1, h]:
                        best[j, k + 1, h] = r + accel[k]
                        back[j, k + 1, h] = i
                        on_acc[j, k + 1, h] = True
            if not fits and not math.isfinite(longest):
                break


@njit(cache=True)
def route_rows(i0: int, i1: int, first: np.ndarray, pred_ptr: np.ndarray, pred_idx: np.ndarray, moves: np.ndarray,
               times: np.ndarray, parallel: np.ndarray, work: np.ndarray, banned: np.ndarray, mem: np.ndarray,
               cap: np.ndarray, later: np.ndarray, best: np.ndarray, back: np.ndarray, prev: np.ndarray,
               inside: np.ndarray, read_mark: np.ndarray, finish: np.ndarray, moving: np.ndarray) -> None:
    """Relax ``best[j, used, e]`` (the devices ``used`` as a bit mask, the last interval on ``e``; ``e == D``: none
    yet) from every start ``i0 <= i < i1``: the interval's reads each cost their move from the previous interval's
    device (``moves[v, d, e]``, a tensor's transfer over the route ``d -> e``), its ops the device's running time
    (one after another, or the longest path where the device is ``parallel``). A device is used once, and not
    after a device of ``later[e]`` (a mask; zero where the order is free)."""
    G = first.size - 1
    D = best.shape[2] - 1
    cost = np.empty(D)
    longest = np.empty(D)
    for i in range(i0, i1):
        live = np.flatnonzero(np.isfinite(best[i].ravel()))  # the states a chain reaches position i in
        if live.size == 0:
            continue
        stamp = i + 1
        start = first[i]
        moving[:, :] = 0.0
        longest[:] = 0.0
        for j in range(i + 1, G + 1):
            lo, hi = first[j - 1], first[j]
            for v in range(lo, hi):
                inside[v] = stamp
                if read_mark[v] == stamp:  # consumed inside before it joined (a group out of topological order)
                    read_mark[v] = 0
                    moving -= moves[v]
                for e in range(D):
                    finish[v, e] = 0.0
                for p in range(pred_ptr[v], pred_ptr[v + 1]):
                    u = pred_idx[p]
                    if inside[u] == stamp:
                        for e in range(D):
                            finish[v, e] = max(finish[v, e], finish[u, e])
                    elif read_mark[u] != stamp:
                        read_mark[u] = stamp
                        moving += moves[u]
                for e in range(D):
                    finish[v, e] += times[v, e]
                    longest[e] = max(longest[e], finish[v, e])
            held = mem[hi] - mem[start]
            fits = False
            for e in range(D):
                if held > cap[e] or banned[hi, e] != banned[start, e]:
                    cost[e] = math.inf
                elif parallel[e]:
                    cost[e] = longest[e]
                else:
                    cost[e] = work[hi, e] - work[start, e]
                fits = fits or math.isfinite(cost[e])
            if not fits:
                break
            for state in live:
                used, d = state // (D + 1), state % (D + 1)
                r = best[i, used, d]
                for e in range(D):
                    if (used >> e) & 1 or used & later[e] or not math.isfinite(cost[e]):
                        continue
                    t = r + cost[e] + (moving[d, e] if d < D else 0.0)
                    if t < best[j, used | (1 << e), e]:
                        best[j, used | (1 << e), e] = t
                        back[j, used | (1 << e), e] = i
                        prev[j, used | (1 << e), e] = d
