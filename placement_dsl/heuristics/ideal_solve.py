"""Running the DP over ideals (:mod:`.ideals`): the exact sweep, a descending search, memory per schedule.

With an incumbent ``hi`` (an achievable max-load) the optimum is found by *feasibility* runs
(is there a split with every stage ``<= T``? :func:`.ideal_kernels.sweep` with floor = ceiling
= ``T``, kept as one bit per state by :func:`.ideal_feasible.feasible`, so the search needs no
float64 table) instead of one run over ``[0, hi]``. A feasibility run prunes far harder: a state is
final as soon as some stage reaches it, and the walk below ``J`` stops once no sub-ideal that
still has a split can leave the stage under ``T`` (on inception_v3 as Archer's MTPP with 8
stages one run visits ~1.6e7 pairs where the exact run over ``[0, hi]`` visits billions). The
search keeps ``lo < optimum <= hi`` with ``hi`` the value of a split found (recomputed in the
sweep's own arithmetic, :func:`.ideal_kernels.split_value`): it first asks whether the
incumbent can be beaten at all (``T`` just below ``hi``), then bisects, and ends when
``hi * (1 - RESOLUTION)`` is infeasible, so ``hi`` is the optimum to a relative ``1e-12``: splits
whose loads differ only by the rounding of their sums in another order are not told apart (on a
wide REGAL graph the search otherwise stepped through splits a few ulps apart, ~35 s a run). The start of the
band, ``lo``, is the cheapest work over the devices' capacity (a slow device counted as a
fraction) or the largest node. Feasibility is monotone in the target, so each run starts from the
bits of the nearest runs on either side (:class:`Sweeps` keeps them): the states feasible at the
last infeasible target are feasible, those infeasible at the last feasible target are not, and
only the states in between are walked for.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ..errors import SpecError
from ..evaluate import REL_TOL, CostModel, MemoryMode, Overlap
from ..pipeline_orders import ORDERS, stage_inflight
from ..progress import report
from ..replication import ALLREDUCE_FACTOR
from . import ideal_feasible as F
from . import ideal_kernels as K
from . import jit
from .base import TimeLimitReached
from .ideal_lattice import DeviceClass, IdealLattice, count_states, node_costs, pack_bitsets, tensor_sets
from .ideal_memory import sweep_suffix
from .ideal_rows import Rows

_MODES = {Overlap.NONE: K.NONE, Overlap.HALF: K.HALF, Overlap.FULL: K.FULL}
BISECT_GAP = 1e-3  # below this relative band, targets step down from hi
RESOLUTION = 1e-12  # relative: a split this much below hi counts as no better (float noise of a stage's sums)
CANDIDATE_BAND = 0.5  # relative to the capacity bound: the farthest a cheap candidate split may be to start the search
PRUNE_WORK = True  # the walk's cut by the most work below J (off: the reference the tests compare with)


class Stopped(Exception):
    """A feasibility run passed its deadline before it could tell."""


@dataclass
class Solution:
    value: float
    stages: list[tuple[np.ndarray, int, int]]  # (supernodes, class, replicas), pipeline order
    visited: int
    seconds: dict[str, float]
    table_bytes: int = 0  # the DP's arrays besides the lattice (sums, boundaries, table, back-links, scratch)
    runs: int = 1  # sweeps run (feasibility runs of the descending search, plus the exact one if any)
    lower: float | None = None  # a search stopped at its deadline: no split has max-load below it (None: exact)


def _capacity(work: np.ndarray, unsup: np.ndarray, classes: list[DeviceClass], replication: bool,
              max_replicas: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Per node its least work over the classes; per class its replicas per stage and ``rho`` (the most
    cheapest work a device does per unit of its own); and the capacity bound on max-load: every device
    does at most ``rho`` of the cheapest work per time unit, and no stage is below its largest node."""
    cheapest = np.where(unsup > 0, np.inf, work).min(axis=0)
    cheapest[~np.isfinite(cheapest)] = 0.0  # runs nowhere: infeasible anyway, 0 keeps the bound valid
    reps = np.array([min(c.count, max_replicas or c.count) if replication and not c.host else 1
                     for c in classes], dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):  # a class's device in units of cheapest work
        ratio = np.where((unsup == 0) & (work > 0), cheapest / work, 0.0)
    rho = np.minimum(1.0, ratio.max(axis=1, initial=0.0)) * (1 + 1e-12)
    devices = np.array([c.count for c in classes], dtype=np.float64)
    lower = max(cheapest.sum() / max(float(devices @ rho), 1e-300), cheapest.max(initial=0.0) / reps.max()) * (1 - 1e-9)
    return cheapest, reps, rho, lower


def capacity_bound(lat_or_con, classes: list[DeviceClass], replication: bool, max_replicas: int | None = None
                   ) -> float:
    """:func:`_capacity`'s bound for a contraction, without its lattice (a split stopped before the DP's)."""
    work, unsup, _, _ = node_costs(lat_or_con, classes)
    return _capacity(work, unsup, classes, replication, max_replicas)[3]


class Sweeps:
    """The DP's arrays for one lattice, cluster and cost model, and the runs over them.

    :meth:`exact` is one float64 sweep (:func:`.ideal_kernels.sweep`, with back-links);
    :meth:`feasible` a feasibility run with a bitset per ideal (:mod:`.ideal_feasible`);
    :meth:`value` a split's max-load in the sweep's own arithmetic. ``visited``, ``runs`` and
    ``table_bytes`` add up over the runs.
    """

    def __init__(self, lat: IdealLattice, classes: list[DeviceClass], model: CostModel, replication: bool,
                 max_replicas: int | None = None):
        con = lat.contraction
        work, unsup, mem, param = node_costs(con, classes)
        cheapest, self.reps, self.rho, self.lower = _capacity(work, unsup, classes, replication, max_replicas)
        sums = K.ideal_sums(lat.ideals, np.column_stack([work.T, unsup.T, mem, param, cheapest]))
        C = len(classes)
        i_work, i_unsup = np.ascontiguousarray(sums[:, :C].T), np.ascontiguousarray(np.rint(sums[:, C:2 * C].T))
        i_mem, i_param = sums[:, 2 * C].copy(), sums[:, 2 * C + 1].copy()
        cw = sums[:, 2 * C + 2].copy()
        self.rem_work = cw[-1] - cw  # least work outside each ideal
        tensors = tensor_sets(con)
        self.io = (*K.boundaries(lat.ideals, lat.sub_ptr, lat.sub_idx, *tensors), *tensors)
        self.counts, self.strides = count_states(classes)
        counts = self.counts
        cap = np.array([c.memory * (1 + REL_TOL) for c in classes])
        inv_bw = 1.0 / np.array([c.bandwidth for c in classes])
        scale = np.where([c.host for c in classes], 0.0, inv_bw)  # host devices pay no transfers and no overflow
        self.mode = _MODES[model.overlap]
        self.costs = (i_work, i_mem, i_param, cap, scale, ALLREDUCE_FACTOR * inv_bw, scale,
                      model.memory is MemoryMode.OVERFLOW)
        self.unsup = i_unsup.astype(np.int64)  # per class and ideal, the ops the class cannot run
        self.head = (lat.ideals, lat.sub_ptr, lat.sub_idx, i_work, self.unsup, i_mem, i_param,
                     *self.costs[3:], self.reps, self.mode, *self.io, counts, self.strides)
        self.remaining = ((counts[-1] - counts) @ self.rho).astype(np.float64)
        self.prune = PRUNE_WORK
        self.masks = F.state_masks(counts, self.reps)
        self.lat, self.C = lat, C
        self.visited = self.runs = self.table_bytes = 0
        self.rows: Rows | None = None  # with kernels in Python: the pairs and their loads, for every run
        # the bits of the whole runs nearest a target, infeasible below it and feasible above (see F.feasible)
        self._below: tuple[float, np.ndarray] | None = None
        self._above: tuple[float, np.ndarray] | None = None
        self.fixed_bytes = sum(a.nbytes for a in (sums, *self.io[:4])) + 2 * 8 * lat.count  # + the walk's stamp, stack

    def python_rows(self, bound: float) -> Rows | None:
        """With kernels in Python, the lattice's pairs within ``bound`` (:class:`.ideal_rows.Rows`, built once for
        every run at or below it): each run is then a numpy step per ideal, not an interpreted one per pair."""
        if not jit.python_kernels():
            return None
        if self.rows is None or bound > self.rows.bound:
            self.rows = Rows(self.head, bound)
        return self.rows

    def exact(self, lo: float, hi: float, deadline: float = math.inf):
        """One float64 sweep with floor ``lo`` and ceiling ``hi`` (see :func:`.ideal_kernels.sweep`);
        :class:`Stopped` when ``time.monotonic()`` passes ``deadline`` during the sweep."""
        rows = self.python_rows(float(hi))
        if rows is not None:
            out = rows.exact(float(hi), self.rem_work, self.remaining, float(lo), self.prune, self.rho,
                             float(deadline))
        else:
            out = K.sweep(*self.head, float(hi), self.rem_work, self.remaining, float(lo), self.prune, self.rho,
                          float(deadline))
        self.visited += int(out[-1]) if out[-1] >= 0 else -1 - int(out[-1])
        self.runs += 1
        if out[-1] < 0:
            raise Stopped(hi)
        nbytes = sum(a.nbytes for a in out[:4]) + out[0].nbytes * (self.C + 1)  # + most work, memory below
        self.table_bytes = max(self.table_bytes, nbytes)
        return out

    def feasible_bits(self, T: float, deadline: float = math.inf) -> np.ndarray:
        """Per ideal, the bitset of states with a split whose every stage is ``<= T``; :class:`Stopped` when
        ``time.monotonic()`` passes ``deadline`` during the run."""
        none = np.zeros((0, self.masks.shape[2]), np.uint64)
        known = self._below[1] if self._below is not None and self._below[0] <= T else none
        possible = self._above[1] if self._above is not None and self._above[0] >= T else none
        rows = self.python_rows(float(T))
        if rows is not None:
            feas, visited, nbytes, stopped = rows.feasible(float(T), self.rem_work, self.remaining, self.masks, known,
                                                           possible, float(deadline))
        else:
            feas, visited, nbytes, stopped = F.feasible(*self.head, float(T), self.rem_work, self.remaining,
                                                        self.prune, self.rho, self.masks, known, possible,
                                                        float(deadline))
        self.visited += int(visited)
        self.runs += 1
        self.table_bytes = max(self.table_bytes, int(nbytes) + known.nbytes + possible.nbytes)
        if stopped:
            report("dp", phase="feasibility", target=float(T), stopped=True, runs=self.runs, pairs=self.visited)
            raise Stopped(T)
        if _has_split(feas, self.counts.shape[0] - 1):  # kept for the targets below T, or above it
            if self._above is None or T < self._above[0]:
                self._above = (float(T), feas)
        elif self._below is None or T > self._below[0]:
            self._below = (float(T), feas)
        return feas

    def feasible(self, T: float, deadline: float = math.inf) -> list[tuple[int, int, int, int]] | None:
        """A split with every stage ``<= T`` as ``(I, J, class, replicas)`` steps in pipeline order, or None;
        :class:`Stopped` at ``deadline``."""
        t0 = time.perf_counter()
        feas = self.feasible_bits(T, deadline)
        steps = read_split(feas, self.head, self.counts, self.strides, float(T),
                            None if self.rows is None or not jit.python_kernels() else self.rows.witness)
        report("dp", phase="feasibility", target=float(T), feasible=steps is not None, runs=self.runs,
               pairs=self.visited, seconds=time.perf_counter() - t0)
        return steps

    def value(self, steps: list[tuple[int, int, int, int]]) -> float:
        return K.split_value(np.array(steps, dtype=np.int64).reshape(-1, 4), self.lat.ideals, self.unsup,
                             self.counts[-1], *self.costs, self.mode, *self.io)


def solve(lat: IdealLattice, classes: list[DeviceClass], model: CostModel, replication: bool,
          ub: float, max_replicas: int | None = None, descend: bool = True,
          incumbents: list[list[tuple[np.ndarray, int, int]]] = (), deadline: float | None = None,
          candidates: list[list[tuple[np.ndarray, int, int]]] = ()) -> Solution:
    """The best split of ``lat`` with max-load ``<= ub`` (no stages if there is none).

    ``descend``: with a finite ``ub`` or ``incumbents`` (splits with stages as in :class:`Solution`,
    e.g. DPL's; the best in the sweep's arithmetic is kept, those not made of ideals of ``lat`` or
    not the DP's to take, :meth:`Sweeps.value` ``inf``, are ignored), search by feasibility runs
    (exact, see the module docstring); otherwise one exact sweep pruned by ``ub``. An incumbent
    proven optimal is returned as it is.
    ``deadline`` (``time.monotonic()``): a run that passes it stops (and none starts after it); once
    the search holds a split it returns that split with ``lower`` the bound its infeasible runs
    proved, before that it raises :class:`~.base.TimeLimitReached`.
    ``candidates``: cheap splits (:func:`.ideals.balanced_prefix_splits`), taken as incumbents only when the best is
    within :data:`CANDIDATE_BAND` of the capacity bound: from a poor start the descending runs visit more pairs
    than one unpruned sweep (BERT-L3's DPL: three times as many from a split 2.9 times the bound).
    """
    if model.training_memory is not None:
        return _solve_memory(lat, classes, model, ub)
    t0 = time.perf_counter()
    sw = Sweeps(lat, classes, model, replication, max_replicas)
    t1 = time.perf_counter()
    start = None
    for steps in (_incumbent_steps(lat, stages) for stages in incumbents):
        value = math.inf if steps is None else sw.value(steps)  # inf: not a split the DP may take
        if math.isfinite(value) and value <= ub:
            start, ub = steps, value
    for steps in (_incumbent_steps(lat, stages) for stages in candidates):
        value = math.inf if steps is None else sw.value(steps)
        if value <= min(ub, sw.lower * (1 + CANDIDATE_BAND)):
            start, ub = steps, value
    if descend and math.isfinite(ub):
        steps, best, lower = descending_search(sw.feasible, sw.value, sw.lower, ub, start, deadline)
    else:
        try:
            out = sw.exact(0.0, ub, math.inf if deadline is None else deadline)
        except Stopped:
            raise TimeLimitReached(f"dp: the time limit passed during the sweep over {lat.count} ideals, before "
                                   "any split was found") from None
        steps, best = split_steps(out, sw.strides), float(out[0][-1, -1])
        lower = best
    t2 = time.perf_counter()
    stages = [(np.setdiff1d(lat.nodes(i), lat.nodes(j)), c, k) for i, j, c, k in steps]
    return Solution(best, stages, sw.visited, {"prepare": t1 - t0, "sweep": t2 - t1},
                    sw.fixed_bytes + sw.table_bytes, sw.runs, lower if lower < best else None)


def _incumbent_steps(lat: IdealLattice, stages) -> list[tuple[int, int, int, int]] | None:
    """A split given as stages of supernodes as ``(I, J, class, replicas)`` steps of ``lat`` (None if not one)."""
    if not stages:
        return None
    n = lat.contraction.n_nodes
    member = np.zeros((len(stages) + 1, n), dtype=bool)
    for t, (nodes, _, _) in enumerate(stages):
        member[t + 1] = member[t]
        member[t + 1, nodes] = True
    ids = K.lookup(lat.ideals, pack_bitsets(member, n))
    if (ids < 0).any() or ids[-1] != lat.count - 1:
        return None
    return [(int(ids[t + 1]), int(ids[t]), c, k) for t, (_, c, k) in enumerate(stages)]


def descending_search(feasible, value, lo: float, hi: float, start, deadline: float | None = None):
    """Feasibility runs keeping ``lo < optimum <= hi``: the optimal split's steps, its value and a lower bound
    (the value itself, or ``lo`` when ``deadline`` passed with a split in hand and the band still open).

    ``hi`` starts as the incumbent (``start``'s value, or a given bound maybe rounded up) and
    is lowered to the value of every split found; ``lo`` starts as a lower bound and rises past
    every infeasible target. The first target is just below ``hi`` (heuristic incumbents are
    often optimal, and then one run proves it); then the band is bisected down to
    ``BISECT_GAP``, and targets step down from ``hi`` (to ``hi * (1 - RESOLUTION)``), bisecting again
    after every step down that succeeds, so the runs stay logarithmic in the band.
    """
    found = start
    T = hi * (1 - RESOLUTION)
    stepped = False
    while True:
        try:
            steps = feasible(T, math.inf if deadline is None else deadline)
        except Stopped:
            if found is None:
                raise TimeLimitReached(f"dp: the time limit passed during a feasibility run at max-load {T:.6g}, "
                                       "before any split was found") from None
            break
        if steps:
            found = steps
            stepped = T == hi * (1 - RESOLUTION)
            hi = min(value(found), T)
        else:
            lo, stepped = T, False
        below = hi * (1 - RESOLUTION)
        if lo >= below:  # nothing better than hi by more than the resolution: hi is the optimum
            break
        if deadline is not None and found is not None and time.monotonic() >= deadline:
            break
        T = below if hi - lo <= BISECT_GAP * hi and not stepped else lo + (hi - lo) / 2
    if lo < hi * (1 - RESOLUTION):  # left by the deadline with the band still open
        report("dp", phase="stopped", reason="time limit", lower=lo, best=hi)
        return found, hi, lo
    if found is None:  # the bound given is achieved but no split was: one run at it for the split
        try:
            found = feasible(hi, math.inf if deadline is None else deadline)
        except Stopped:
            raise TimeLimitReached(f"dp: the time limit passed during a feasibility run at max-load {hi:.6g}, "
                                   "before any split was found") from None
        if not found:
            return [], math.inf, math.inf
    return found, hi, hi


def _has_split(feas: np.ndarray, s: int) -> bool:
    """Whether a feasibility run's bits hold a split of the whole graph (the last ideal) in state ``s``."""
    return bool((int(feas[-1, s >> 6]) >> (s & 63)) & 1)


def read_split(feas: np.ndarray, head: tuple, counts: np.ndarray, strides: np.ndarray,
                T: float, witness=None) -> list[tuple[int, int, int, int]] | None:
    """The split a feasibility run found, as ``(I, J, class, replicas)`` steps in pipeline order (None if none);
    ``head``: the kernels' arguments, ``counts``/``strides``: the device-count states; ``witness``: the
    ``(I, s, feas, T)`` form of :func:`.ideal_feasible.witness` to use (:meth:`.ideal_rows.Rows.witness`)."""
    I, s = feas.shape[0] - 1, counts.shape[0] - 1
    if not _has_split(feas, s):
        return None
    steps = []
    while I != 0:
        J, c, k = F.witness(I, s, feas, *head, T) if witness is None else witness(I, s, feas, T)
        if J == -2:
            raise RuntimeError(f"dp over ideals: no sub-ideal explains state {s} of ideal {I} at {T!r}")
        if J >= 0:
            steps.append((I, int(J), int(c), int(k)))
            I = int(J)
        s -= max(1, int(k)) * int(strides[c])
    return steps[::-1]


def split_steps(out, strides) -> list[tuple[int, int, int, int]]:
    """The split of a sweep's back-links as ``(I, J, class, replicas)`` stages, in pipeline order."""
    dp, back_j, back_c, back_k = out[:4]
    if not np.isfinite(dp[-1, -1]):
        return []
    steps = []
    i, s = dp.shape[0] - 1, dp.shape[1] - 1
    while i != 0:
        j, c, k = int(back_j[i, s]), int(back_c[i, s]), int(back_k[i, s])
        if j == -1:
            s -= int(strides[c])
            continue
        steps.append((i, j, c, k))
        s -= k * int(strides[c])
        i = j
    return steps[::-1]


def _solve_memory(lat: IdealLattice, classes: list[DeviceClass], model: CostModel, ub: float) -> Solution:
    """The suffix DP of :mod:`.ideal_memory` (one class of accelerators, memory per schedule)."""
    con, spec, cls = lat.contraction, model.training_memory, classes[0]
    t0 = time.perf_counter()
    work, unsup, _, param = node_costs(con, classes)
    g = con.graph
    act = np.bincount(con.image, weights=np.where(g.backward, 0.0, g.out_bytes + g.activation_bytes),
                      minlength=con.n_nodes)
    sums = K.ideal_sums(lat.ideals, np.column_stack([work[0], unsup[0], param, act]))
    every, forward = tensor_sets(con), tensor_sets(con, forward_only=True)  # all tensors; the stashed inputs
    io = [x for t in (every, forward) for x in (*K.boundaries(lat.ideals, lat.sub_ptr, lat.sub_idx, *t), *t)]
    t1 = time.perf_counter()

    def sweep(inflight: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        return sweep_suffix(
            lat.ideals, lat.sub_ptr, lat.sub_idx, sums[:, 0].copy(), np.rint(sums[:, 1]).astype(np.int64),
            sums[:, 2].copy(), sums[:, 3].copy(), cls.memory * (1 + REL_TOL), 1.0 / cls.bandwidth,
            _MODES[model.overlap], *io, spec.state_factor, inflight, spec.recompute, float(ub))

    if model.name in ORDERS and model.microbatches is not None:
        # torch's orders: stage s of p holds stage_inflight(...)[s] micro-batches, which depends on p as a whole
        # (ZB-H1 holds p on every stage), so one sweep per p, each on exactly p stages (h = p - s)
        f, back, visited, h = np.full((1, 1), np.inf), np.full((1, 1), -1), 0, 0
        for ranks in range(1, cls.count + 1):
            try:
                held = stage_inflight(str(model.name), ranks, int(model.microbatches)).astype(float)
            except SpecError:  # the order refuses m on these ranks: the cost model finds no schedule either
                continue
            fp, bp, vp = sweep(np.concatenate([[0.0], held[::-1]]))
            visited += int(vp)
            if fp[0, ranks] < f[0].min():
                f, back, h = fp, bp, ranks
        value = float(f[0, h]) if h else math.inf
    else:
        f, back, visited = sweep(np.concatenate([[0.0], spec.inflight(np.arange(1, cls.count + 1), 1)]))
        h = int(np.argmin(f[0]))
        value = float(f[0].min())
    t2 = time.perf_counter()
    stages: list[tuple[np.ndarray, int, int]] = []
    J = 0
    while math.isfinite(value) and J != lat.count - 1:  # first stage first: pipeline order
        I = int(back[J, h])
        stages.append((np.setdiff1d(lat.nodes(I), lat.nodes(J)), 0, 1))
        J, h = I, h - 1
    used = sum(a.nbytes for a in (sums, f, back, *io)) + 2 * 8 * lat.count
    return Solution(value, stages, int(visited), {"prepare": t1 - t0, "sweep": t2 - t1}, used)
