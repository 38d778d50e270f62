"""The DP over ideals in Python, a row of sub-ideals per numpy step (see :mod:`.ideals` for the algorithm).

Compiled, :func:`.ideal_sweep.sweep` and :func:`.ideal_feasible.feasible` walk below each ideal ``I`` one
sub-ideal ``J`` at a time, which the interpreter pays per pair (BERT-L3's 1,428 ideals: 207,273 pairs, 11 s).
Here the pairs ``(I, J)`` whose stage ``I \\ J`` some class may take under a bound are found once per lattice
(subset tests on the bitsets' words, the loads of every pair in the kernels' own arithmetic, tensor by tensor of
``I``'s frontier), and each ideal's row of states is then one gather over its pairs: ``dp[J, s - k e_c]`` maxed
with the stage's load and minimized (the sweep), or or-ed where the load is within the target (a feasibility
run), then closed under unused devices. Same values and bits as the kernels' walks: their cuts only skip pairs
that cannot improve a state, and min, max and or do not depend on the order. Where the order does matter, the
back-link a tie leaves (which split an exact sweep reads back) or the first witness of a feasible state, the
kernels' walk itself runs, for the few ideals a split passes through (``tests/heuristics/test_ideal_rows.py``
compares both ways on random DAGs).
"""
from __future__ import annotations

import time

import numpy as np

from .ideal_boundaries import boundaries
from .ideal_enumeration import INF, lookup
from .ideal_sweep import HALF, NONE, sweep_ideal, walk_scratch
from .jit import python_version

ROUNDS = (8, 64)  # a feasibility run prices each ideal's nearest sub-ideals in rounds of these sizes, then the rest
PRICE_FIRST = 8  # ... each ideal's this many nearest priced for every ideal at once before the run (BERT-L3: 0.15 s, 0.16 at 64)
PRICE_CHUNK = 1 << 19  # pairs priced at once (their temporaries: about 100 bytes each)
BLOCK = 1 << 22  # candidate (I, J) cells tested at once while finding the pairs
DENSE_CELLS = 1 << 25
"""Most ideals x (tensors + nodes) for :func:`boundaries_numpy`'s whole-array steps (their temporaries take 10-30
bytes a cell, and a numpy step is not stopped by a deadline's timer): beyond, the kernel's own walk runs in Python,
its work the output and the tensors at each added node. cnn-20000 beside a CPU, 21,121 ideals of 19,968 nodes, with
the DP's kernels run in Python on a cache still cold for this one: 15.6 GB and 88 s on a 60 s limit."""


def bits(ideals: np.ndarray) -> np.ndarray:
    """The ideals' bitsets as booleans, ``(N, 64 W)``."""
    return np.unpackbits(np.ascontiguousarray(ideals).view(np.uint8), axis=1, bitorder="little").view(bool)


def tensor_counts(member: np.ndarray, tmask: np.ndarray) -> np.ndarray:
    """``|T ∩ row|`` for every row of ``member`` (booleans over nodes) and tensor ``T`` (bitsets ``tmask``)."""
    if tmask.shape[0] == 0:
        return np.zeros((member.shape[0], 0), np.int32)
    t, v = np.nonzero(bits(tmask))  # the tensors' nodes, tensor by tensor
    starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
    by_node = np.ascontiguousarray(member.T)  # a node's row over the ideals: a tensor sums its nodes' rows
    return np.ascontiguousarray(np.add.reduceat(by_node[v].astype(np.int32), starts, axis=0).T)


@python_version(boundaries)
def boundaries_numpy(ideals, sub_ptr, sub_idx, tmask, towner, tcost, tlo, thi):
    """:func:`.ideal_boundaries.boundaries` in Python: every ideal's split tensors at once; ``in`` and ``out``
    summed in ascending tensor order as the kernel adds them, so the same to the bit. Above :data:`DENSE_CELLS`, the
    kernel's walk itself."""
    N = ideals.shape[0]
    if N * (tmask.shape[0] + ideals.shape[1] * 64) > DENSE_CELLS:
        return boundaries.py_func(ideals, sub_ptr, sub_idx, tmask, towner, tcost, tlo, thi)
    member = bits(ideals)
    counts = tensor_counts(member, tmask)
    size = np.bitwise_count(tmask).sum(axis=1) if tmask.shape[0] else np.zeros(0, np.int64)
    split = (counts > 0) & (counts < size)
    tin, tout = np.zeros(N), np.zeros(N)
    if tmask.shape[0]:
        owned = member[:, towner]
        tout = np.cumsum(np.where(split & owned, tcost, 0.0), axis=1)[:, -1]
        tin = np.cumsum(np.where(split & ~owned, tcost, 0.0), axis=1)[:, -1]
    ptr = np.zeros(N + 1, np.int64)
    np.cumsum(split.sum(axis=1), out=ptr[1:])
    return tin, tout, ptr, np.nonzero(split)[1].astype(np.int64)


@python_version(lookup)
def lookup_dict(ideals, rows):
    """:func:`.ideal_enumeration.lookup` in Python: a dictionary of the ideals' bytes (the same ids)."""
    ideals, rows = np.ascontiguousarray(ideals), np.ascontiguousarray(rows)
    ids = {ideals[i].tobytes(): i for i in range(ideals.shape[0])}
    return np.array([ids.get(rows[r].tobytes(), -1) for r in range(rows.shape[0])], dtype=np.int64)


def _load(mode: int, comp, t_in, t_out, overflow):
    """:func:`.ideal_sweep.mode_load` on arrays (the same operations in the same order)."""
    if mode == NONE:
        return comp + t_in + t_out + overflow
    if mode == HALF:
        return np.maximum(comp, t_in + t_out + overflow)
    return np.maximum(np.maximum(comp, t_in), t_out + overflow)


def _replicated(mode: int, load, sync, k: int):
    """:func:`.ideal_sweep.replicated_load` on arrays."""
    if k == 1:
        return load
    ar = (k - 1) * sync / k
    if mode == NONE:
        return load / k + ar
    return np.maximum(load / k, ar)


class Rows:
    """A lattice's pairs ``(I, J)`` whose stage some class may take within ``bound``, their loads per class and
    replica count, and the DP's runs over them. ``head``: :class:`.ideal_solve.Sweeps`' kernel arguments."""

    def __init__(self, head: tuple, bound: float):
        (self.ideals, self.sub_ptr, self.sub_idx, self.work, self.unsup, self.mem, self.param, self.cap, self.scale,
         self.inv_bw, self.ovf_scale, self.soft, self.max_rep, self.mode, self.tin, self.tout, self.sptr, self.sidx,
         self.tmask, self.towner, self.tcost, self.tlo, self.thi, self.counts, self.strides) = head
        self.head = head
        self.bound = bound
        self.member = bits(self.ideals)
        N = self.ideals.shape[0]
        # per ideal and tensor: twice the tensor's nodes in the ideal, plus 1 if its producer is in it
        self.code = tensor_counts(self.member, self.tmask) * 2 + self.member[:, self.towner]
        self.frontier = self.sptr[1:] - self.sptr[:-1]  # per ideal, the tensors it splits; per position f of
        F = int(self.frontier.max(initial=0))  # them, the tensor, its cost and the ideal's code for it
        self.f_tensor = np.zeros((F, N), np.int64)
        for f in range(F):
            has = np.flatnonzero(self.frontier > f)
            self.f_tensor[f, has] = self.sidx[self.sptr[has] + f]
        self.f_cost = self.tcost[self.f_tensor] if self.tcost.size else np.zeros((F, N))
        self.f_code = np.take_along_axis(self.code.T, self.f_tensor, axis=0) if F else np.zeros((0, N), np.int32)
        S, C = self.counts.shape
        self.S, self.C = S, C
        self.ck = [(c, k) for c in range(C) for k in range(1, int(self.max_rep[c]) + 1)]
        src = np.full((len(self.ck), S), S, np.int64)  # s - k e_c, or the column of inf / false
        for i, (c, k) in enumerate(self.ck):
            ok = self.counts[:, c] >= k
            src[i, ok] = np.flatnonzero(ok) - k * self.strides[c]
        self.src = src
        self.radix = tuple(int(r) for r in (self.counts[-1] + 1)[::-1])
        self.I, self.J = self._pairs(bound)
        self.ptr = np.searchsorted(self.I, np.arange(self.ideals.shape[0] + 1))
        size = self.member.sum(axis=1)  # ideals come by size: each size's are a range, none below another
        self.levels = np.flatnonzero(np.r_[True, size[1:] != size[:-1], True])
        self.loads = np.full((self.I.size, len(self.ck)), INF)  # priced as runs need them
        self.nearest = self.ptr[self.I + 1] - 1 - np.arange(self.I.size)  # 0: the largest sub-ideal of its ideal
        # the pairs by level, then round of a feasibility run (the nearest sub-ideals first), then ideal
        keys = (len(self.levels) - 1) * (len(ROUNDS) + 1)
        key = (np.searchsorted(self.levels, self.I, side="right") - 1) * (len(ROUNDS) + 1)
        key += np.searchsorted(np.array(ROUNDS), self.nearest, side="right")
        key = key.astype(np.int16 if keys < 2**15 else np.int64)  # 16 bits: numpy's stable sort is a radix sort
        self.by_round = np.argsort(key, kind="stable")
        self.round_ptr = np.searchsorted(key[self.by_round], np.arange(keys + 1))
        self.priced = np.zeros(self.I.size, bool)

    # ------------------------------------------------------------------ the pairs and their loads
    def _pairs(self, bound: float) -> tuple[np.ndarray, np.ndarray]:
        """Every ``(I, J)``, ``J ⊊ I``, some class may take ``I \\ J`` of (its ops, its memory, its work within
        ``bound`` on its replicas, with a margin: the loads decide), by ``I`` then ``J``."""
        N = self.ideals.shape[0]
        devices = self.counts[-1]
        slack = [bound * int(self.max_rep[c]) * (1 + 1e-6) + 1e-9 for c in range(self.C)]
        block = max(1, BLOCK // max(N, 1))
        inside = self.member.astype(np.float32)
        outside = ~self.member
        out_i, out_j = [], []
        for a in range(1, N, block):
            b = min(N, a + block)
            ok = np.zeros((b - a, b), bool)
            for c in range(self.C):
                if devices[c] <= 0:
                    continue
                okc = np.ones((b - a, b), bool)  # the tests that can fail, each on every cell
                if self.unsup[c, :b].any():
                    okc &= self.unsup[c, a:b, None] == self.unsup[c, None, :b]
                if not self.soft and self.cap[c] < INF:
                    okc &= self.mem[a:b, None] - self.mem[None, :b] <= self.cap[c]
                if slack[c] < INF:
                    okc &= self.work[c, a:b, None] - self.work[c, None, :b] <= slack[c]
                ok |= okc
            ok &= np.arange(b)[None, :] < np.arange(a, b)[:, None]  # ids grow with size: J ⊊ I has the smaller
            ok &= outside[a:b].astype(np.float32) @ inside[:b].T == 0  # no node of J outside I (exact counts)
            rows, cols = np.nonzero(ok)
            out_i.append(rows + a)
            out_j.append(cols)
        if not out_i:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(out_i).astype(np.int64), np.concatenate(out_j).astype(np.int64)

    def stage_io(self, Is: np.ndarray, Js: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:func:`.ideal_boundaries.stage_io` of the stages ``I \\ J`` of the pairs: ``J``'s boundary corrected by
        each tensor of ``I``'s frontier in the kernel's order (one step per frontier position; the pairs by
        frontier size, so a step's are a prefix). A flag times a cost adds that cost or exactly nothing, so the
        sums are the kernel's to the bit."""
        order = np.argsort(-self.frontier[Is], kind="stable")
        i, j = Is[order], Js[order]
        s_in, s_out = self.tout[j], self.tin[j]
        reach = len(i) - np.cumsum(np.bincount(self.frontier[i], minlength=1))  # pairs with more than f tensors
        for f in range(self.f_tensor.shape[0]):
            m = int(reach[f]) if f < reach.size else 0
            if m == 0:
                break
            ii, jj = i[:m], j[:m]
            cost, code_i = self.f_cost[f][ii], self.f_code[f][ii]
            code_j = self.code[jj, self.f_tensor[f][ii]]
            made_j = (code_j & 1).astype(bool)  # made in J: counted in out(J), leaves I
            own = (code_i & 1).astype(bool) & ~made_j  # made in the stage
            s_in[:m] -= cost * made_j
            s_out[:m] -= cost * (~made_j & (code_j > 1))  # made outside J, read in J: counted in in(J)
            s_out[:m] += cost * own
            s_in[:m] += cost * (~own & (code_i >> 1 > code_j >> 1))  # read in the stage
        out_in, out_out = np.empty_like(s_in), np.empty_like(s_out)
        out_in[order], out_out[order] = np.maximum(s_in, 0.0), np.maximum(s_out, 0.0)
        return out_in, out_out

    def class_ok(self, Is: np.ndarray, Js: np.ndarray, c: int) -> np.ndarray:
        """Whether class ``c`` may hold the stages (it has devices, runs every op, holds the memory if hard)."""
        ok = (self.unsup[c, Is] == self.unsup[c, Js]) & (self.counts[-1, c] > 0)
        if not self.soft:
            ok &= ~(self.mem[Is] - self.mem[Js] > self.cap[c])
        return ok

    def pair_loads(self, Is: np.ndarray, Js: np.ndarray) -> np.ndarray:
        """``loads[p, i]``: stage ``Is[p] \\ Js[p]``'s load on ``k`` devices of class ``c`` (``self.ck[i]``), in
        :func:`.ideal_sweep.stage_loads`' and :func:`.ideal_sweep.replicated_load`'s arithmetic; ``inf`` where the
        class may not hold it."""
        loads = np.full((Is.size, len(self.ck)), INF)
        if Is.size == 0:
            return loads
        s_in, s_out = self.stage_io(Is, Js)
        dm = self.mem[Is] - self.mem[Js]
        col = 0
        for c in range(self.C):
            ok = self.class_ok(Is, Js, c)
            comp = self.work[c, Is] - self.work[c, Js]
            with np.errstate(invalid="ignore"):  # inf memory: inf * 0 where the overflow is not taken
                ovf = np.where(dm > self.cap[c], (dm - self.cap[c]) * self.ovf_scale[c], 0.0) if self.soft else 0.0
            base = _load(self.mode, comp, s_in * self.scale[c], s_out * self.scale[c], ovf)
            sync = (self.param[Is] - self.param[Js]) * self.inv_bw[c]
            for k in range(1, int(self.max_rep[c]) + 1):
                loads[:, col] = np.where(ok, _replicated(self.mode, base, sync, k), INF)
                col += 1
        return loads

    def _price(self, sel: np.ndarray) -> np.ndarray:
        """The loads of pairs ``sel``, priced once."""
        todo = sel[~self.priced[sel]]
        if todo.size:
            self.loads[todo] = self.pair_loads(self.I[todo], self.J[todo])
            self.priced[todo] = True
        return self.loads[sel]

    # ------------------------------------------------------------------ the runs
    def _closed(self, rows: np.ndarray, fill) -> np.ndarray:
        """Leaving devices unused: each state's least value (``fill``: or, for bits) over the states with no more
        devices of any class, per row."""
        grid = rows.reshape((rows.shape[0], *self.radix))
        accumulate = np.logical_or.accumulate if fill is False else np.minimum.accumulate
        for axis in range(1, grid.ndim):
            grid = accumulate(grid, axis=axis)
        return grid.reshape(rows.shape)

    def _live(self, rem_work: np.ndarray, remaining: np.ndarray, ub: float) -> np.ndarray:
        """:func:`.ideal_sweep._live_states` for every ideal."""
        if ub == INF:
            return np.ones((rem_work.size, remaining.size), bool)
        return rem_work[:, None] <= remaining[None, :] * ub * (1.0 + 1e-9) + 1e-12

    def _level_rows(self, table: np.ndarray, lo_i: int, hi_i: int, open_: np.ndarray, fill, combine):
        """The states of ideals ``lo_i .. hi_i - 1`` (one size, so their sub-ideals' rows are final) that their
        pairs reach: per pair the sub-ideal's entries at ``s - k e_c`` (``table``), where some state is
        ``open_``, priced and combined with the loads (``combine(entries, loads)``, per pair and state), and
        reduced per ideal (min, or or for bits). Returns the rows and the pairs priced."""
        L, S = hi_i - lo_i, self.S
        out = np.full((L, S), fill)
        a, b = self.ptr[lo_i], self.ptr[hi_i]
        if a == b:
            return out, 0
        at = self.I[a:b] - lo_i
        entries = table[self.J[a:b, None, None], self.src[None]]
        if fill is False:
            useful = (entries & open_[at][:, None, :]).any(axis=(1, 2))
        else:
            useful = ((entries < INF) & open_[at][:, None, :]).any(axis=(1, 2))
        sel = np.flatnonzero(useful)
        if sel.size == 0:
            return out, 0
        values = combine(entries[sel], self._price(sel + a)[:, :, None])
        values = values.any(axis=1) if fill is False else values.min(axis=1)
        at = at[sel]
        starts = np.flatnonzero(np.r_[True, at[1:] != at[:-1]])
        reduce = np.logical_or.reduceat if fill is False else np.minimum.reduceat
        out[at[starts]] = reduce(values, starts, axis=0)
        return out, int(sel.size)

    def exact(self, ub: float, rem_work: np.ndarray, remaining: np.ndarray, lo: float, prune_work: bool,
              rho: np.ndarray, deadline: float = INF) -> tuple:
        """:func:`.ideal_sweep.sweep`'s result: the same table, and the back-links of the states a split read
        from the last ideal passes through (the kernel's walk, re-run for those ideals)."""
        N, S = self.ideals.shape[0], self.S
        for first in range(0, self.I.size, PRICE_CHUNK):  # a sweep prices nearly every pair: in a few steps
            self._price(np.arange(first, min(first + PRICE_CHUNK, self.I.size)))
        dp = np.full((N, S + 1), INF)
        dp[0, :S] = lo
        live = self._live(rem_work, remaining, ub)
        visited = 0
        for lo_i, hi_i in zip(self.levels[1:-1], self.levels[2:]):
            if deadline < INF and time.monotonic() > deadline:
                return dp[:, :S], None, None, None, -1 - visited
            open_ = live[lo_i:hi_i]
            rows, priced = self._level_rows(dp, lo_i, hi_i, open_, INF,
                                            lambda e, loads: np.maximum(e, np.where(loads <= ub, loads, INF)))
            visited += priced
            rows[~open_] = INF
            rows = self._closed(rows, INF)
            rows[~open_] = INF
            dp[lo_i:hi_i, :S] = rows
        dp = np.ascontiguousarray(dp[:, :S])
        back_j = np.full((N, S), -2, np.int32)
        back_c = np.zeros((N, S), np.int8)
        back_k = np.ones((N, S), np.int16)
        if np.isfinite(dp[-1, -1]):
            self._read_back(dp, back_j, back_c, back_k, ub, rem_work, remaining, lo, prune_work, rho)
        return dp, back_j, back_c, back_k, visited

    def _read_back(self, dp, back_j, back_c, back_k, ub, rem_work, remaining, lo, prune_work, rho) -> None:
        """The back-links of the ideals on the split read from ``(N - 1, S - 1)``: the kernel's walk
        (:func:`.ideal_sweep.sweep_ideal`) re-run for each, on the table's final rows below it."""
        N, S, C = self.ideals.shape[0], self.S, self.C
        mfw = np.full((C + 1 if prune_work else 0, N, S), -INF)
        if prune_work:
            own = np.concatenate([self.work, self.mem[None, :]])
            for I in range(N):
                row = np.where(dp[I][None, :] < INF, own[:, I, None], -INF)
                subs = self.sub_idx[self.sub_ptr[I]:self.sub_ptr[I + 1]]
                if subs.size:
                    row = np.maximum(row, mfw[:, subs, :].max(axis=1))
                mfw[:, I, :] = row
        scratch = walk_scratch(N, C, S, self.tmask.shape[1] * 64)
        I, s, done = N - 1, S - 1, set()
        while I != 0:
            if I not in done:
                done.add(I)
                kept = dp[I].copy()
                dp[I] = INF
                sweep_ideal(I, dp, back_j, back_c, back_k, mfw, scratch, *self.head, ub, rem_work, remaining, lo,
                            prune_work, rho)
                if not np.array_equal(dp[I], kept):
                    raise RuntimeError(f"dp over ideals: the rows' values of ideal {I} differ from its walk's")
            j, c = int(back_j[I, s]), int(back_c[I, s])
            if j == -2:
                raise RuntimeError(f"dp over ideals: the walk below ideal {I} left state {s} without a link")
            if j == -1:
                s -= int(self.strides[c])
                continue
            s -= int(back_k[I, s]) * int(self.strides[c])
            I = j

    def feasible(self, T: float, rem_work: np.ndarray, remaining: np.ndarray, masks: np.ndarray, known: np.ndarray,
                 possible: np.ndarray, deadline: float = INF) -> tuple:
        """:func:`.ideal_feasible.feasible`'s result (``feas`` as bitsets, pairs priced, bytes, stopped)."""
        N, S = self.ideals.shape[0], self.S
        SW = masks.shape[2]
        if SW == 1:
            return self._feasible_words(T, rem_work, remaining, masks, known, possible, deadline)
        feas = np.zeros((N, S + 1), bool)
        feas[0, :S] = True
        live = self._live(rem_work, remaining, T)
        known_b = bits(known)[:, :S] if known.shape[0] else None
        possible_b = bits(possible)[:, :S] if possible.shape[0] else None
        visited, stopped = 0, False
        for lo_i, hi_i in zip(self.levels[1:-1], self.levels[2:]):
            if deadline < INF and time.monotonic() > deadline:
                stopped = True
                break
            open_, rows = _seeded(live[lo_i:hi_i], known_b, possible_b, lo_i, hi_i, np.zeros((hi_i - lo_i, S), bool))
            if open_.any():
                hit, priced = self._level_rows(feas, lo_i, hi_i, open_, False, lambda e, loads: e & (loads <= T))
                visited += priced
                rows |= hit & open_
            feas[lo_i:hi_i, :S] = self._closed(rows, False) & live[lo_i:hi_i]
        padded = np.zeros((N, SW * 64), bool)
        padded[:, :S] = feas[:, :S]
        out = np.packbits(padded, axis=1, bitorder="little").view(np.uint64).reshape(N, SW)
        return out, visited, out.nbytes + feas.nbytes + self.loads.nbytes, stopped

    def _feasible_words(self, T: float, rem_work: np.ndarray, remaining: np.ndarray, masks: np.ndarray,
                        known: np.ndarray, possible: np.ndarray, deadline: float = INF) -> tuple:
        """:meth:`feasible` with at most 64 states: each ideal's states are one word, a pair's shifted bits one
        ``uint64`` per class and replica count (the kernel's ``_shifted``), not a row of booleans."""
        N, S = self.ideals.shape[0], self.S
        pack = np.zeros((N, 64), bool)
        pack[:, :S] = self._live(rem_work, remaining, T)
        live = np.packbits(pack, axis=1, bitorder="little").view(np.uint64)[:, 0]
        shifts = np.array([k * int(self.strides[c]) for c, k in self.ck], np.uint64)
        kmask = np.array([masks[c, k, 0] for c, k in self.ck], np.uint64)
        feas = np.zeros(N, np.uint64)
        feas[0] = masks[0, 0, 0]
        zero = np.uint64(0)
        known_w = known[:, 0] if known.shape[0] else None
        possible_w = possible[:, 0] if possible.shape[0] else None
        self._price(np.flatnonzero(self.nearest < PRICE_FIRST))  # in one step: most are needed
        visited, stopped = 0, False
        for lo_i, hi_i in zip(self.levels[1:-1], self.levels[2:]):
            if deadline < INF and time.monotonic() > deadline:
                stopped = True
                break
            open_, rows = _seeded(live[lo_i:hi_i], known_w, possible_w, lo_i, hi_i, np.zeros(hi_i - lo_i, np.uint64))
            a, b = self.ptr[lo_i], self.ptr[hi_i]
            if a < b and open_.any():
                level = int(np.searchsorted(self.levels, lo_i))
                for r in range(len(ROUNDS) + 1):  # the nearest sub-ideals first: the states they find need no more
                    first = level * (len(ROUNDS) + 1) + r
                    part = self.by_round[self.round_ptr[first]:self.round_ptr[first + 1]]
                    if part.size == 0:
                        continue
                    at = self.I[part] - lo_i
                    shifted = (feas[self.J[part], None] << shifts[None, :]) & kmask[None, :]
                    sel = np.flatnonzero(((shifted & open_[at][:, None]) != zero).any(axis=1))
                    if sel.size == 0:
                        continue
                    visited += sel.size
                    reached = np.bitwise_or.reduce(np.where(self._price(part[sel]) <= T, shifted[sel], zero), axis=1)
                    at = at[sel]
                    starts = np.flatnonzero(np.r_[True, at[1:] != at[:-1]])
                    hit = np.zeros(hi_i - lo_i, np.uint64)
                    hit[at[starts]] = np.bitwise_or.reduceat(reached, starts)
                    rows = self._closed_words(rows | (hit & open_), masks) & live[lo_i:hi_i]
                    open_ &= ~rows
                    if not open_.any():
                        break
            feas[lo_i:hi_i] = self._closed_words(rows, masks) & live[lo_i:hi_i]
        return feas.reshape(N, 1), visited, feas.nbytes + self.loads.nbytes, stopped

    def _closed_words(self, rows: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """Leave devices unused, on one word of states per ideal: ``s`` is set once ``s - e_c`` is."""
        for c in range(self.C):
            step, dest = np.uint64(self.strides[c]), masks[c, 1, 0]
            for _ in range(int(self.counts[-1, c])):
                rows = rows | ((rows << step) & dest)
        return rows

    def witness(self, I: int, s: int, feas: np.ndarray, T: float) -> tuple[int, int, int]:
        """:func:`.ideal_feasible.witness`: the same walk below ``I`` (every sub-ideal whose stage some class
        could take, no cuts), each sub-ideal's test done beforehand for all of them at once."""
        counts, strides = self.counts, self.strides
        row = bits(feas[I:I + 1])[0]
        for c in range(self.C):
            if counts[s, c] > 0 and row[s - strides[c]]:
                return -1, c, 0
        N = self.ideals.shape[0]
        Js = np.flatnonzero(~np.any(self.ideals[:I] & ~self.ideals[I], axis=1))
        Is = np.full(Js.size, I, np.int64)
        loads = self.pair_loads(Is, Js)
        feas_b = bits(feas[Js])
        comp_ok = np.zeros(Js.size, bool)
        found = np.full(Js.size, -1, np.int64)  # the first (class, replicas) column that explains s, per J
        col = 0
        for c in range(self.C):
            ok = self.class_ok(Is, Js, c) & (counts[s, c] >= 1)
            comp = self.work[c, I] - self.work[c, Js]
            sync = (self.param[I] - self.param[Js]) * self.inv_bw[c]
            least = base = _load(self.mode, comp, 0.0, 0.0, 0.0)
            for k in range(2, int(self.max_rep[c]) + 1):
                least = np.minimum(least, _replicated(self.mode, base, sync, k))
            ok &= ~(least > T)
            comp_ok |= ok
            for k in range(1, int(self.max_rep[c]) + 1):
                if k <= min(int(self.max_rep[c]), int(counts[s, c])):
                    r = s - k * int(strides[c])
                    hit = ok & (loads[:, col] <= T) & feas_b[:, r] & (found < 0)
                    found[hit] = col
                col += 1
        at = np.full(N, -1, np.int64)
        at[Js] = np.arange(Js.size)
        sub_ptr, sub_idx = self.sub_ptr, self.sub_idx
        seen = set()
        stack = []
        for p in range(sub_ptr[I], sub_ptr[I + 1]):
            stack.append(int(sub_idx[p]))
            seen.add(int(sub_idx[p]))
        while stack:
            J = stack.pop()
            p = at[J]
            if found[p] >= 0:
                c, k = self.ck[found[p]]
                return J, c, k
            if comp_ok[p]:
                for q in range(sub_ptr[J], sub_ptr[J + 1]):
                    K = int(sub_idx[q])
                    if K not in seen:
                        seen.add(K)
                        stack.append(K)
        return -2, 0, 0


def _seeded(live: np.ndarray, known: np.ndarray | None, possible: np.ndarray | None, lo: int, hi: int,
            empty: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A level's ideals ``lo:hi`` before pricing, in either form of the states (rows of booleans, or one word per
    ideal): its open states (``live``, within ``possible`` where given) and the states known reachable (``known``
    within ``live``, else ``empty``)."""
    open_ = live.copy()
    rows = empty if known is None else known[lo:hi] & open_
    if possible is not None:
        open_ &= possible[lo:hi]
    return open_, rows
