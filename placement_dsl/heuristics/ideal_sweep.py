"""Compiled kernels of the DP over ideals: the sweep over pairs of ideals (its loads, replicas, cuts and
liveness of states) and the read-out of a split's value (see :mod:`.ideals` for the algorithm).
``numba.njit(cache=True)`` throughout.
"""
from __future__ import annotations

import numpy as np

from .ideal_boundaries import has_node, stage_io
from .ideal_enumeration import INF, ONE, bit_index
from .jit import njit
from .kernels import clock

CLOCK_PAIRS = 1 << 18  # a sweep reads the clock at least every this many pairs (a pair may cost O(n / 64) steps)

# overlap modes (evaluate.Overlap): load = compute + in + out | max(compute, in + out) | max(compute, in, out)
NONE, HALF, FULL = 0, 1, 2


# ---------------------------------------------------------------------------- the DP
@njit(cache=True)
def mode_load(mode, compute, t_in, t_out, overflow):
    """A stage's load under the transfer ``mode`` (:data:`NONE`, :data:`HALF`, :data:`FULL`: how its compute
    overlaps its input and output transfers), with its ``overflow`` time added."""
    if mode == NONE:
        return compute + t_in + t_out + overflow
    if mode == HALF:
        return max(compute, t_in + t_out + overflow)
    return max(max(compute, t_in), t_out + overflow)


@njit(cache=True)
def replicated_load(mode, load, sync, k):
    """App. C.2: a stage on ``k`` replicas: ``load / k`` with the all-reduce ``(k-1)/k * sync``."""
    if k == 1:
        return load
    ar = (k - 1) * sync / k
    if mode == NONE:
        return load / k + ar
    return max(load / k, ar)


@njit(cache=True)
def stage_load(mode, comp, s_in, s_out, dm, cap_c, soft, ovf_scale_c, scale_c):
    """A stage's load on one device of a class: compute, transfers (``scale_c`` per byte) and, with
    ``soft`` memory, the bytes ``dm`` beyond ``cap_c`` streamed at ``ovf_scale_c`` per byte."""
    ovf = (dm - cap_c) * ovf_scale_c if soft and dm > cap_c else 0.0
    return mode_load(mode, comp, s_in * scale_c, s_out * scale_c, ovf)


@njit(cache=True)
def class_takes(I, J, c, work, unsup, mem, param, cap, scale, inv_bw, soft, max_rep, mode, counts, out_lb_j):
    """Whether class ``c`` may hold the stage ``I \\ J`` (it runs every op, has devices and, with hard memory, the
    memory), the stage's compute on ``c``, and a lower bound on its load (:func:`least_load`: its compute and the
    ``out_lb_j`` bytes it is known to send, without inputs and overflow)."""
    comp = work[c, I] - work[c, J]
    if unsup[c, I] != unsup[c, J] or counts[counts.shape[0] - 1, c] <= 0 or (not soft and mem[I] - mem[J] > cap[c]):
        return False, comp, INF
    return True, comp, least_load(mode, comp, out_lb_j * scale[c], (param[I] - param[J]) * inv_bw[c], max_rep[c])


@njit(cache=True)
def stage_loads(I, J, row_i, row_j, alive, comp, mem, param, cap, scale, inv_bw, ovf_scale, soft, mode,
                 tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi, base, sync):
    """The stage ``I \\ J``'s load on one device of each class ``c`` still ``alive`` (``base[c]``: compute
    ``comp[c]``, transfers in and out, overflow) and its all-reduce time (``sync[c]``, for replicas): the one
    stage-load step of :func:`sweep` and :func:`.ideal_feasible.feasible`."""
    s_in, s_out = stage_io(I, J, row_i, row_j, tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi)
    dm = mem[I] - mem[J]
    for c in range(alive.shape[0]):
        if alive[c]:
            base[c] = stage_load(mode, comp[c], s_in, s_out, dm, cap[c], soft, ovf_scale[c], scale[c])
            sync[c] = (param[I] - param[J]) * inv_bw[c]


@njit(cache=True)
def least_load(mode, comp, sent, sync, max_rep_c):
    """A lower bound on a stage's load over 1..``max_rep_c`` replicas: its compute and the transfer
    time ``sent`` it is known to send, without inputs and overflow."""
    base = mode_load(mode, comp, 0.0, sent, 0.0)
    lb = base
    for k in range(2, max_rep_c + 1):
        lb = min(lb, replicated_load(mode, base, sync, k))
    return lb


@njit(cache=True)
def push_below(I, J, ideals, sub_ptr, sub_idx, stamp, stack, top, out_lb, leaving):
    """Push ``J``'s immediate sub-ideals not yet seen in ``I``'s walk, each with the tensors its stage
    sends out of ``I`` (``out_lb``: ``J``'s plus the removed node's); the new stack top."""
    for p in range(sub_ptr[J], sub_ptr[J + 1]):
        K = sub_idx[p]
        if stamp[K] != I:
            stamp[K] = I
            stack[top] = K
            out_lb[K] = out_lb[J] + leaving[removed_node(ideals[J], ideals[K])]
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
def removed_node(big, small):
    """The one node in ``big`` but not in ``small`` (an immediate sub-ideal step)."""
    for w in range(big.shape[0]):
        x = big[w] & ~small[w]
        if x:
            return w * 64 + bit_index(x & (~x + ONE))
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
    scratch = walk_scratch(N, C, S, tmask.shape[1] * 64)
    visited = 0
    checked = 0
    for I in range(1, N):
        if clock_due(I, visited, checked, deadline):
            checked = visited
            if clock() > deadline:
                return dp, back_j, back_c, back_k, -1 - visited
        visited += sweep_ideal(I, dp, back_j, back_c, back_k, mfw, scratch, ideals, sub_ptr, sub_idx, work, unsup,
                               mem, param, cap, scale, inv_bw, ovf_scale, soft, max_rep, mode, tin, tout, sptr, sidx,
                               tmask, towner, tcost, tlo, thi, counts, strides, ub, rem_work, remaining, lo,
                               prune_work, rho)
    return dp, back_j, back_c, back_k, visited


@njit(cache=True)
def clock_due(I, visited, checked, deadline):
    """Whether a sweep at ideal ``I``, ``visited`` pairs in (``checked`` at its last reading), reads the clock now:
    with a ``deadline``, every 16,384 ideals or :data:`CLOCK_PAIRS` pairs (:func:`sweep`,
    :func:`.ideal_feasible.feasible`)."""
    return deadline < INF and ((I & 0x3FFF) == 0 or visited - checked > CLOCK_PAIRS)


@njit(cache=True)
def walk_scratch(N, C, S, n):
    """The scratch arrays of a walk below an ideal (:func:`sweep_ideal`, :func:`.ideal_feasible.feasible`): the
    walk's stamps and stack, per class flags and loads, per state flags, per node its tensors read outside ``I``
    and per ideal the tensors a stage sends out of ``I``."""
    return (np.full(N, -1, np.int64), np.empty(N, np.int64), np.zeros(C, np.bool_), np.zeros(C), np.zeros(C),
            np.zeros(C), np.zeros(C), np.zeros(S, np.bool_), np.zeros(n), np.zeros(N))


@njit(cache=True)
def walk_start(I, row_i, ideals, sub_ptr, sub_idx, sptr, sidx, towner, tcost, stamp, stack, out_lb, leaving):
    """Begin the walk below ``I`` (:func:`sweep_ideal`, :func:`.ideal_feasible.feasible`): per node of ``I``, the
    tensors it sends out of ``I`` (``leaving``, cleared by :func:`walk_end`), and ``I``'s immediate sub-ideals
    stamped and on the stack, each with the tensors its stage sends out of ``I`` (``out_lb``); the stack's top.
    :func:`push_below` continues the walk."""
    for p in range(sptr[I], sptr[I + 1]):
        t = sidx[p]
        if has_node(row_i, towner[t]):
            leaving[towner[t]] += tcost[t]
    top = 0
    for p in range(sub_ptr[I], sub_ptr[I + 1]):
        J = sub_idx[p]
        stamp[J] = I
        stack[top] = J
        out_lb[J] = leaving[removed_node(row_i, ideals[J])]
        top += 1
    return top


@njit(cache=True)
def walk_end(I, sptr, sidx, towner, leaving):
    """End the walk below ``I``: clear what :func:`walk_start` put in ``leaving``."""
    for p in range(sptr[I], sptr[I + 1]):
        leaving[towner[sidx[p]]] = 0.0


@njit(cache=True)
def sweep_ideal(I, dp, back_j, back_c, back_k, mfw, scratch, ideals, sub_ptr, sub_idx, work, unsup, mem, param,
                cap, scale, inv_bw, ovf_scale, soft, max_rep, mode, tin, tout, sptr, sidx, tmask, towner, tcost, tlo,
                thi, counts, strides, ub, rem_work, remaining, lo, prune_work, rho):
    """:func:`sweep`'s step for one ideal ``I`` (the rows of its sub-ideals final): fill ``dp[I]`` and its
    back-links by the walk below ``I``, then ``mfw[:, I]``; the pairs visited. ``scratch``: :func:`walk_scratch`."""
    stamp, stack, alive, comp, base, sync, lbs, live, leaving, out_lb = scratch
    C = work.shape[0]
    S = counts.shape[0]
    visited = 0
    if not _live_states(rem_work[I], remaining, ub, live):
        _most_work_below(mfw, dp, I, work, mem, sub_ptr, sub_idx)
        return 0
    row_i = ideals[I]
    top = walk_start(I, row_i, ideals, sub_ptr, sub_idx, sptr, sidx, towner, tcost, stamp, stack, out_lb, leaving)
    while top > 0:
        top -= 1
        J = stack[top]
        any_alive = False
        for c in range(C):
            ok, cc, lb = class_takes(I, J, c, work, unsup, mem, param, cap, scale, inv_bw, soft, max_rep,
                                      mode, counts, out_lb[J])
            comp[c] = cc
            if ok:
                ok = lb <= ub and _below_some(dp, I, J, lb, c, counts, strides, live, rem_work[J], remaining, ub,
                                              max_rep[c], lo, work, mfw, prune_work, mem, cap[c], soft, rho[c])
                lbs[c] = lb
            alive[c] = ok
            any_alive = any_alive or ok
        if not any_alive:
            continue
        top = push_below(I, J, ideals, sub_ptr, sub_idx, stamp, stack, top, out_lb, leaving)
        visited += 1
        if not _may_improve(dp, I, J, alive, lbs, counts, strides, live):
            continue
        stage_loads(I, J, row_i, ideals[J], alive, comp, mem, param, cap, scale, inv_bw, ovf_scale, soft, mode,
                     tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi, base, sync)
        improved = False
        for c in range(C):
            if not alive[c]:
                continue
            for k in range(1, max_rep[c] + 1):
                load = replicated_load(mode, base[c], sync[c], k)
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
    walk_end(I, sptr, sidx, towner, leaving)
    _unused(dp, back_j, back_c, I, counts, strides, live)
    _most_work_below(mfw, dp, I, work, mem, sub_ptr, sub_idx)
    return visited


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
        s_in, s_out = stage_io(I, J, ideals[I], ideals[J], tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi)
        base = stage_load(mode, work[c, I] - work[c, J], s_in, s_out, dm, cap[c], soft, ovf_scale[c], scale[c])
        value = max(value, replicated_load(mode, base, (param[I] - param[J]) * inv_bw[c], k))
    return value


