"""The DP over ideals as a feasibility test with one bit per state: "is every stage ``<= T``?".

:func:`.ideal_kernels.sweep` with floor = ceiling = ``T`` keeps a float per (ideal, device-count
state) that is either ``T`` or ``inf``, plus back-links and the walk's cut table in float64:
about 40 bytes per state, so 3 million ideals x 63 states (GNMT's latency input on 6
accelerators + 8 CPUs) took 8.6 GB and most of the time went to the cut table's upkeep. Here the
same test keeps, per ideal, the set of feasible states as a bitset (``ceil(S / 64)`` words), the
cut table in float32 rounded up (so the cut stays valid: it can only cut less) with the states
innermost (the upkeep is a contiguous max the compiler vectorizes), and no back-links: the
split is read back afterwards by walking below each stage's ideal once more for a sub-ideal
that explains the bit (:func:`witness`). The walk is the float64 sweep's, with a tighter work
cut (the stage's transfers out of ``I`` count against the target too), and the set of feasible
states of every ideal is the same (``tests/heuristics/test_ideal_feasible.py`` compares them).
"""
from __future__ import annotations

import numpy as np

from .ideal_kernels import (
    INF,
    NONE,
    bit_index,
    least_load,
    push_below,
    replicated_load,
    stage_io,
    stage_load,
)
from .ideal_sweep import class_takes, clock_due, stage_loads, walk_end, walk_scratch, walk_start
from .jit import njit, python_version
from .kernels import clock

ONE = np.uint64(1)
ZERO = np.uint64(0)
ROUND_UP = 1.0 + 2.0 ** -22  # float32(v * ROUND_UP) >= v for v >= 0


def state_masks(counts: np.ndarray, max_rep: np.ndarray) -> np.ndarray:
    """``masks[c, k]``: the bitset of states with at least ``k`` devices of class ``c`` (``k = 0``: all)."""
    S, C = counts.shape
    SW = (S + 63) // 64
    K = int(max(1, max_rep.max(initial=1)))
    masks = np.zeros((C, K + 1, SW), np.uint64)
    for c in range(C):
        for k in range(K + 1):
            bits = np.zeros(SW * 64, bool)
            bits[:S] = counts[:, c] >= k
            masks[c, k] = np.packbits(bits, bitorder="little").view(np.uint64)
    return masks


@njit(cache=True)
def _bit(row, s):
    return (row[s >> 6] >> np.uint64(s & 63)) & ONE


@njit(cache=True)
def _shifted(src, step, mask, need, out):
    """``out = (src << step) & mask & need`` over a multi-word bitset; whether any bit is set."""
    SW = src.shape[0]
    q = step >> 6
    r = np.uint64(step & 63)
    nz = False
    for w in range(SW):
        v = ZERO
        if w - q >= 0:
            v = src[w - q] << r
            if r != ZERO and w - q - 1 >= 0:
                v |= src[w - q - 1] >> (np.uint64(64) - r)
        v &= mask[w] & need[w]
        out[w] = v
        nz = nz or v != ZERO
    return nz


@njit(cache=True)
def _unused(feas_i, need, live, counts, strides):
    """Leave a device unused: a live state ``s`` is feasible once ``s - e_c`` is (increasing order)."""
    S, C = counts.shape
    for s in range(S):
        if not live[s] or _bit(feas_i, s):
            continue
        for c in range(C):
            if counts[s, c] > 0 and _bit(feas_i, s - strides[c]):
                feas_i[s >> 6] |= ONE << np.uint64(s & 63)
                need[s >> 6] &= ~(ONE << np.uint64(s & 63))
                break


@njit(cache=True)
def _most_below(mfw, feas, I, work, mem, sub_ptr, sub_idx, S):
    """``mfw[I, c, s]`` (float32, rounded up): the most work on class ``c`` (memory for ``c = C``) of an
    ideal ``J ⊆ I`` that is feasible in state ``s``."""
    C1 = mfw.shape[1]
    C = work.shape[0]
    for c in range(C1):
        own = np.float32((mem[I] if c == C else work[c, I]) * ROUND_UP)
        for s in range(S):
            mfw[I, c, s] = own if _bit(feas[I], s) else -INF
    for p in range(sub_ptr[I], sub_ptr[I + 1]):
        J = sub_idx[p]
        for c in range(C1):
            for s in range(S):
                mfw[I, c, s] = max(mfw[I, c, s], mfw[J, c, s])


@python_version(_most_below)
def _most_below_numpy(mfw, feas, I, work, mem, sub_ptr, sub_idx, S):
    """:func:`_most_below` in Python: every class and state at once (maxima, so the same values)."""
    own = np.empty(mfw.shape[1], np.float32)
    own[:work.shape[0]] = work[:, I] * ROUND_UP
    if own.size > work.shape[0]:
        own[-1] = mem[I] * ROUND_UP
    s = np.arange(S)
    inside = ((feas[I][s >> 6] >> (s & 63).astype(np.uint64)) & ONE).astype(bool)
    row = np.where(inside[None, :], own[:, None], np.float32(-np.inf))
    subs = sub_idx[sub_ptr[I]:sub_ptr[I + 1]]
    if subs.size:
        row = np.maximum(row, mfw[subs, :, :S].max(axis=0))
    mfw[I, :, :S] = row


@njit(cache=True)
def _useful(I, J, lb, c, need, counts, strides, rem_j, remaining, T, max_rep, work, mfw, prune_work, mem, cap_c,
            soft, rho_c, sent):
    """Whether some ``J' ⊆ J`` could still make a state of ``need`` feasible with a stage on class ``c``
    (the float64 sweep's ``_below_some`` with ``dp[I, s] = inf`` on ``need`` and ``T`` elsewhere).

    ``sent``: transfer time that every stage ``I \\ J'`` adds to its compute (the tensors ``I \\ J``
    sends out of ``I``, which only grow as ``J'`` shrinks; 0 unless transfers add to compute), so
    ``J'`` must leave the stage at most ``T - sent`` of work: tighter than the sweep's cut, same bits.
    On ``k`` replicas (its state ``s - k e_c``) the stage may hold ``k T - sent``: a replica's load is at
    least its share of the compute and of the tensors sent.
    """
    C = work.shape[0]
    S = counts.shape[0]
    for w in range(need.shape[0]):
        word = need[w]
        while word:
            low = word & (~word + ONE)
            word ^= low
            s = w * 64 + bit_index(low)
            if s >= S or counts[s, c] < 1 or not lb <= T:
                continue
            if prune_work:  # on k replicas the stage may hold k times the work (each replica sends its share)
                cut = True
                for k in range(1, min(counts[s, c], max_rep) + 1):
                    r = s - k * strides[c]
                    if mfw[J, c, r] >= work[c, I] - (k * T - sent) - (1e-9 * (work[c, I] + k * T) + 1e-12) and (
                            soft or mfw[J, C, r] >= mem[I] - cap_c - (1e-9 * mem[I] + 1e-12)):
                        cut = False
                        break
                if cut:
                    continue
            left = remaining[s] + min(counts[s, c], max_rep) * rho_c
            if rem_j <= left * T * (1.0 + 1e-9) + 1e-12:
                return True
    return False


@njit(cache=True)
def quick_classes(unsup, mem, cap, scale, ovf_scale, soft, max_rep, counts):
    """Per class, its index among the classes whose stages are priced in ``O(1)`` (-1: not one; :func:`_host_stages`):
    host devices that pay no
    transfers and no overflow, never replicate, run every op and hold the whole graph (hard memory) or overflow
    for free, so that a stage's load is its compute alone."""
    N = mem.shape[0]
    C = unsup.shape[0]
    quick = np.full(C, -1, np.int64)
    q = 0
    for c in range(C):
        if (scale[c] == 0.0 and ovf_scale[c] == 0.0 and max_rep[c] == 1 and unsup[c, N - 1] == 0
                and counts[counts.shape[0] - 1, c] > 0 and (soft or mem[N - 1] <= cap[c])):
            quick[c] = q
            q += 1
    return quick


@njit(cache=True)
def _host_stages(I, feas, need, most, quick, work, sub_ptr, sub_idx, counts, strides, T):
    """Set the states of ``need`` that a last stage on a quick class (:func:`quick_classes`) makes feasible: a stage
    ``I \\ J`` there costs ``work[c, I] - work[c, J]``, least for the sub-ideal ``J ⊊ I`` of most work on ``c``
    feasible in ``s - e_c``, which ``most[J', quick[c], s - e_c]`` holds for every immediate sub-ideal ``J'`` (the ideal
    index of that ``J``, or -1): no walk below ``I``, whose band on a slow host is most of the lattice."""
    S = counts.shape[0]
    for c in range(quick.shape[0]):
        q = quick[c]
        if q < 0:
            continue
        for s in range(S):
            if counts[s, c] < 1 or not _bit(need, s):
                continue
            r = s - strides[c]
            top = -INF
            for p in range(sub_ptr[I], sub_ptr[I + 1]):
                J = most[sub_idx[p], q, r]
                if J >= 0:
                    top = max(top, work[c, J])
            if work[c, I] - top <= T:
                feas[I, s >> 6] |= ONE << np.uint64(s & 63)
                need[s >> 6] &= ~(ONE << np.uint64(s & 63))


@njit(cache=True)
def _most_work(most, feas, I, quick, work, sub_ptr, sub_idx, S):
    """``most[I, quick[c], s]`` for the quick classes ``c``: the ideal ``J ⊆ I`` of most work on ``c`` feasible in
    ``s`` (-1: none), exact (an index, not a rounded sum)."""
    for c in range(quick.shape[0]):
        q = quick[c]
        if q < 0:
            continue
        for s in range(S):
            best = I if _bit(feas[I], s) else -1
            for p in range(sub_ptr[I], sub_ptr[I + 1]):
                J = most[sub_idx[p], q, s]
                if J >= 0 and (best < 0 or work[c, J] > work[c, best]):
                    best = J
            most[I, q, s] = best


@njit(cache=True)
def feasible(ideals, sub_ptr, sub_idx, work, unsup, mem, param,
             cap, scale, inv_bw, ovf_scale, soft, max_rep, mode,
             tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi,
             counts, strides, T, rem_work, remaining, prune_work, rho, masks, known, possible, deadline=INF):
    """``feas[I]``: the states ``s`` in which ideal ``I`` has a split with every stage ``<= T``.

    The float64 sweep's feasibility run (floor = ceiling = ``T``) state for state, see
    :func:`.ideal_kernels.sweep` for the walk, the liveness of states and the cuts (the work cut
    here also counts the tensors the stage sends out of ``I``, see :func:`_useful`). Returns
    ``(feas, pairs visited, bytes of the arrays, stopped)``: ``stopped`` when ``time.monotonic()``
    passed ``deadline`` (read every 16,384 ideals or :data:`~.ideal_kernels.CLOCK_PAIRS` pairs), and then
    ``feas`` is incomplete.

    Bits of earlier runs (N x SW, or 0 rows when there are none): ``known``, a whole run's at a
    target ``<= T``, whose states are feasible here too; ``possible``, a whole run's at a target
    ``>= T``, outside which no live state is (a state live here is live there, and its bit there
    says whether it is feasible at the larger target). Only the states between the two are
    walked for, so the runs of a search get cheaper as its band narrows; ``feas`` is the same.
    """
    N = ideals.shape[0]
    C = work.shape[0]
    S = counts.shape[0]
    SW = masks.shape[2]
    feas = np.zeros((N, SW), np.uint64)
    feas[0] = masks[0, 0]
    mfw = np.full((N if prune_work else 1, C + 1, S), -INF, np.float32)
    if prune_work:
        _most_below(mfw, feas, 0, work, mem, sub_ptr, sub_idx, S)
    quick = quick_classes(unsup, mem, cap, scale, ovf_scale, soft, max_rep, counts)
    hosts = quick.max() >= 0
    most = np.full((N if hosts else 1, max(quick.max() + 1, 1), S), -1, np.int32)  # see _most_work
    if hosts:
        _most_work(most, feas, 0, quick, work, sub_ptr, sub_idx, S)
    stamp, stack, alive, comp, base, sync, _, live, leaving, out_lb = walk_scratch(N, C, S, tmask.shape[1] * 64)
    need = np.zeros(SW, np.uint64)
    add = np.zeros(SW, np.uint64)
    visited = 0
    stopped = False
    checked = 0
    for I in range(1, N):
        if clock_due(I, visited, checked, deadline):
            checked = visited
            if clock() > deadline:
                stopped = True
                break
        need[:] = ZERO
        for s in range(S):
            live[s] = rem_work[I] <= remaining[s] * T * (1.0 + 1e-9) + 1e-12
            if live[s]:
                need[s >> 6] |= ONE << np.uint64(s & 63)
        for w in range(SW):
            if known.shape[0]:
                feas[I, w] = known[I, w] & need[w]
                need[w] &= ~known[I, w]
            if possible.shape[0]:
                need[w] &= possible[I, w]
        if known.shape[0]:  # a state live here but not there may be feasible by leaving a device unused
            _unused(feas[I], need, live, counts, strides)
        if hosts:  # stages on quick classes (hosts) in O(1) each; the walk below is for the others
            _host_stages(I, feas, need, most, quick, work, sub_ptr, sub_idx, counts, strides, T)
            _unused(feas[I], need, live, counts, strides)
        any_live = False
        for w in range(SW):
            any_live = any_live or need[w] != ZERO
        if any_live:
            row_i = ideals[I]
            top = walk_start(I, row_i, ideals, sub_ptr, sub_idx, sptr, sidx, towner, tcost, stamp, stack, out_lb,
                             leaving)
            open_ = True
            while top > 0 and open_:
                top -= 1
                J = stack[top]
                any_alive = False
                for c in range(C):
                    ok, cc, lb = class_takes(I, J, c, work, unsup, mem, param, cap, scale, inv_bw, soft, max_rep,
                                              mode, counts, out_lb[J])
                    comp[c] = cc
                    if ok and quick[c] >= 0:  # priced before the walk
                        ok = False
                    if ok:
                        sent = out_lb[J] * scale[c] if mode == NONE else 0.0
                        ok = lb <= T and _useful(I, J, lb, c, need, counts, strides, rem_work[J], remaining, T,
                                                 max_rep[c], work, mfw, prune_work, mem, cap[c], soft, rho[c], sent)
                    alive[c] = ok
                    any_alive = any_alive or ok
                if not any_alive:
                    continue
                top = push_below(I, J, ideals, sub_ptr, sub_idx, stamp, stack, top, out_lb, leaving)
                visited += 1
                # every k: ``need`` cut to an earlier run's bits need not hold s - e_c (infeasible there) when it
                # holds s, reached from J's bit at s - k e_c on k replicas (J's s - e_c may be dead, 0)
                may = False
                for c in range(C):
                    for k in range(1, max_rep[c] + 1):
                        if alive[c] and _shifted(feas[J], k * strides[c], masks[c, k], need, add):
                            may = True
                            break
                    if may:
                        break
                if not may:
                    continue
                stage_loads(I, J, row_i, ideals[J], alive, comp, mem, param, cap, scale, inv_bw, ovf_scale, soft,
                             mode, tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi, base, sync)
                improved = False
                for c in range(C):
                    if not alive[c]:
                        continue
                    for k in range(1, max_rep[c] + 1):
                        if replicated_load(mode, base[c], sync[c], k) > T:
                            continue
                        if _shifted(feas[J], k * strides[c], masks[c, k], need, add):
                            for w in range(SW):
                                feas[I, w] |= add[w]
                                need[w] &= ~add[w]
                            improved = True
                if improved:  # (closing under unused devices after each improvement: bits only come from here)
                    _unused(feas[I], need, live, counts, strides)
                    open_ = False
                    for w in range(SW):
                        open_ = open_ or need[w] != ZERO
            walk_end(I, sptr, sidx, towner, leaving)
        if prune_work:
            _most_below(mfw, feas, I, work, mem, sub_ptr, sub_idx, S)
        if hosts:
            _most_work(most, feas, I, quick, work, sub_ptr, sub_idx, S)
    nbytes = feas.nbytes + mfw.nbytes + most.nbytes + stamp.nbytes + stack.nbytes + out_lb.nbytes
    return feas, visited, nbytes, stopped


@njit(cache=True)
def witness(I, s, feas, ideals, sub_ptr, sub_idx, work, unsup, mem, param,
            cap, scale, inv_bw, ovf_scale, soft, max_rep, mode,
            tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi, counts, strides, T):
    """A last stage of a split of ``I`` in state ``s`` with every stage ``<= T``: ``(J, c, k)``, or
    ``(-1, c, 0)`` when a device of class ``c`` is left unused (``s - e_c`` is feasible already).

    Walks below ``I`` (every sub-ideal whose stage some class could still take, no cuts) for a
    ``J`` whose stage has load ``<= T`` on ``k`` devices of class ``c`` and whose own state
    ``s - k e_c`` is feasible, as the sweep found it.
    """
    C = work.shape[0]
    for c in range(C):
        if counts[s, c] > 0 and _bit(feas[I], s - strides[c]):
            return -1, c, 0
    N = ideals.shape[0]
    stamp = np.zeros(N, np.bool_)
    stack = np.empty(N, np.int64)
    top = 0
    for p in range(sub_ptr[I], sub_ptr[I + 1]):
        stack[top] = sub_idx[p]
        stamp[sub_idx[p]] = True
        top += 1
    row_i = ideals[I]
    while top > 0:
        top -= 1
        J = stack[top]
        dm = mem[I] - mem[J]
        any_ok = False
        for c in range(C):
            if unsup[c, I] != unsup[c, J] or counts[s, c] < 1 or (not soft and dm > cap[c]):
                continue
            comp = work[c, I] - work[c, J]
            sync = (param[I] - param[J]) * inv_bw[c]
            if least_load(mode, comp, 0.0, sync, max_rep[c]) > T:
                continue
            any_ok = True
            s_in, s_out = stage_io(I, J, row_i, ideals[J], tin, tout, sptr, sidx, tmask, towner, tcost, tlo, thi)
            base = stage_load(mode, comp, s_in, s_out, dm, cap[c], soft, ovf_scale[c], scale[c])
            for k in range(1, min(max_rep[c], counts[s, c]) + 1):
                if replicated_load(mode, base, sync, k) <= T and _bit(feas[J], s - k * strides[c]):
                    return J, c, k
        if any_ok:
            for p in range(sub_ptr[J], sub_ptr[J + 1]):
                K = sub_idx[p]
                if not stamp[K]:
                    stamp[K] = True
                    stack[top] = K
                    top += 1
    return -2, 0, 0
