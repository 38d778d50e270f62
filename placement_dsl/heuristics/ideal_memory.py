"""The DP over ideals with memory per schedule (:class:`~placement_dsl.training.TrainingMemorySpec`).

Under 1F1B, stage ``s`` of ``k`` stashes ``k - s`` micro-batches: a stage's memory depends on how
many stages follow it, which the prefix DP of :mod:`.ideals` (``dp[I][s]``: the ideal ``I`` on at
most ``s`` devices, the stage ``I \\ J`` being the last of ``I``) does not know. This DP runs the
other way, over the ideals' complements: ``f[J][h]`` is the least max-load of ``V \\ J`` on exactly
``h`` stages, and the stage ``I \\ J`` is the *first* of ``V \\ J``, so ``h`` is its ``k - s``::

    f[V][0] = 0,   f[J][h + 1] = min over ideals I ⊋ J of max(f[I][h], load(I \\ J))
                                  subject to  mem(I \\ J, h + 1) <= M

with ``mem(S, h) = state * param(S) + n(h) * (act(S) + in_fw(S))`` (or ``n(h) * in_fw + act + in_fw``
with recomputation), ``n(h) = min(h, m)`` for 1F1B and ``m`` for GPipe (which needs no ``h``:
the same DP, exact too). The answer is ``min_{h <= k} f[∅][h]``. Under torch's interleaved 1F1B and
ZB-H1 orders with ``microbatches`` (the cost model's count, :func:`placement_dsl.pipeline_orders.stage_inflight`)
the stage ``s`` of ``p`` holds ``min(2 (p - s) - 1, m)`` or ``min(p, m)``, which depends on ``p`` itself: one
sweep per ``p`` with ``n(h)`` of that ``p``, each answering ``f[∅][p]``, and the least of them. Every ideal ``I`` is processed
after all its super-ideals (descending breadth-first id) and pushes to its sub-ideals ``J``,
walked downward while the stage's compute stays under the incumbent and its memory lower bound
``state * param + n_min * act`` under ``M`` (both only grow as ``J`` shrinks).

Class: the DP class (forward-contiguous, DAG-ordered splits, Tarnawski Fact 5.2) on identical
non-host devices with hard memory, no replication, a flat cluster; exact there, as the cost model
counts ``k - s`` over the used devices in pipeline order.
"""
from __future__ import annotations

import numpy as np

from .ideal_kernels import INF, mode_load, stage_io
from .jit import njit


@njit(cache=True)
def _stash(state, param, act, inputs, n, recompute):
    """One replica's bytes: weights and optimizer state plus ``n`` stashed micro-batches."""
    if recompute:
        return state * param + n * inputs + act + inputs
    return state * param + n * (act + inputs)


@njit(cache=True)
def sweep_suffix(ideals, sub_ptr, sub_idx, work, unsup, param, act, cap, scale, mode,
                 tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi,
                 fin, fout, fsptr, fsidx, fmask, fowner, fcost, flo, fhi,
                 state, inflight, recompute, ub):
    """Fill ``f[J, h]`` (``h = 0..k``, ``k = inflight.size - 1``) from the full ideal down.

    ``work``, ``unsup``, ``param``, ``act`` are per-ideal sums; ``t*`` describe every tensor and
    ``f*`` the forward-produced ones (a stage's stashed inputs). ``inflight[h]`` is the number of
    micro-batches a stage with ``h`` stages to the end stashes. Back-links: ``back[J, h]`` is the
    ``I`` whose stage ``I \\ J`` opens ``V \\ J`` on ``h`` stages.
    """
    N = ideals.shape[0]
    k = inflight.shape[0] - 1
    f = np.full((N, k + 1), INF)
    back = np.full((N, k + 1), -1, np.int64)
    f[N - 1, 0] = 0.0
    stamp = np.full(N, -1, np.int64)
    stack = np.empty(N, np.int64)
    n_min = inflight[1:].min() if k > 0 else 0.0
    visited = 0
    for I in range(N - 1, 0, -1):
        h_lo = k + 1
        for h in range(k):
            if f[I, h] < INF:
                h_lo = h
                break
        if h_lo > k - 1:
            continue
        row_i = ideals[I]
        top = 0
        for p in range(sub_ptr[I], sub_ptr[I + 1]):
            J = sub_idx[p]
            stamp[J] = I
            stack[top] = J
            top += 1
        while top > 0:
            top -= 1
            J = stack[top]
            comp = work[I] - work[J]
            dp_ = param[I] - param[J]
            da = act[I] - act[J]
            if unsup[I] != unsup[J] or comp > ub or _stash(state, dp_, da, 0.0, n_min, recompute) > cap:
                continue
            for p in range(sub_ptr[J], sub_ptr[J + 1]):
                K = sub_idx[p]
                if stamp[K] != I:
                    stamp[K] = I
                    stack[top] = K
                    top += 1
            visited += 1
            row_j = ideals[J]
            s_in, s_out = stage_io(I, J, row_i, row_j, tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi)
            load = mode_load(mode, comp, s_in * scale, s_out * scale, 0.0)
            if load > ub:
                continue
            fw_in, _ = stage_io(I, J, row_i, row_j, fin, fout, fsptr, fsidx, fmask, fowner, fcost, flo, fhi)
            for h in range(h_lo, k):
                if f[I, h] == INF or _stash(state, dp_, da, fw_in, inflight[h + 1], recompute) > cap:
                    continue
                cand = max(f[I, h], load)
                if cand < f[J, h + 1]:
                    f[J, h + 1] = cand
                    back[J, h + 1] = I
    return f, back, visited
