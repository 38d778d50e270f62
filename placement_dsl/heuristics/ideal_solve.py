"""Running the DP over ideals (:mod:`.ideals`): the exact sweep, a descending search, memory per schedule.

With an incumbent ``hi`` (an achievable max-load) the optimum is found by *feasibility* runs of
:func:`.ideal_kernels.sweep` with floor = ceiling = ``T`` (is there a split with every stage
``<= T``?) instead of one run over ``[0, hi]``. A feasibility run prunes far harder: a state is
final as soon as some stage reaches it, and the walk below ``J`` stops once no sub-ideal that
still has a split can leave the stage under ``T`` (on inception_v3 as Archer's MTPP with 8
stages one run visits ~1.6e7 pairs where the exact run over ``[0, hi]`` visits billions). The
search keeps ``lo < optimum <= hi`` with ``hi`` the value of a split found (recomputed in the
sweep's own arithmetic, :func:`.ideal_kernels.split_value`): it first asks whether the
incumbent can be beaten at all (``T`` = the float just below ``hi``), then bisects, and ends
when the float below ``hi`` is infeasible, so ``hi`` is the optimum, exactly.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from ..evaluate import REL_TOL, CostModel, MemoryMode, Overlap
from ..replication import ALLREDUCE_FACTOR
from . import ideal_kernels as K
from .ideals import DeviceClass, IdealLattice, _bitsets, _node_costs, _states, _tensors

_MODES = {Overlap.NONE: K.NONE, Overlap.HALF: K.HALF, Overlap.FULL: K.FULL}
MAX_RUNS = 40  # feasibility runs before one exact run over what is left of [lo, hi]
BISECT_GAP = 1e-3  # below this relative band, targets step down from hi (the float below it)
PRUNE_WORK = True  # the walk's cut by the most work below J (off: the reference the tests compare with)


@dataclass
class Solution:
    value: float
    stages: list[tuple[np.ndarray, int, int]]  # (supernodes, class, replicas), pipeline order
    visited: int
    seconds: dict[str, float]
    table_bytes: int = 0  # the DP's arrays besides the lattice (sums, boundaries, table, back-links, scratch)
    runs: int = 1  # sweeps run (feasibility runs of the descending search, plus the exact one if any)


def solve(lat: IdealLattice, classes: list[DeviceClass], model: CostModel, replication: bool,
          ub: float, max_replicas: int | None = None, descend: bool = True,
          incumbent: list[tuple[np.ndarray, int, int]] | None = None) -> Solution:
    """The best split of ``lat`` with max-load ``<= ub`` (no stages if there is none).

    ``descend``: with a finite ``ub`` or an ``incumbent`` split (stages as in :class:`Solution`,
    e.g. DPL's), search by feasibility runs (exact, see the module docstring); otherwise one
    exact sweep pruned by ``ub``. An incumbent proven optimal is returned as it is.
    """
    if model.training_memory is not None:
        return _solve_memory(lat, classes, model, ub)
    con = lat.contraction
    t0 = time.perf_counter()
    work, unsup, mem, param = _node_costs(con, classes)
    cheapest = np.where(unsup > 0, np.inf, work).min(axis=0)  # each node's least work over the classes
    cheapest[~np.isfinite(cheapest)] = 0.0  # runs nowhere: infeasible anyway, 0 keeps the bound valid
    sums = K.ideal_sums(lat.ideals, np.column_stack([work.T, unsup.T, mem, param, cheapest]))
    C = len(classes)
    i_work, i_unsup = np.ascontiguousarray(sums[:, :C].T), np.ascontiguousarray(np.rint(sums[:, C:2 * C].T))
    i_mem, i_param = sums[:, 2 * C].copy(), sums[:, 2 * C + 1].copy()
    cw = sums[:, 2 * C + 2].copy()
    rem_work = cw[-1] - cw  # least work outside each ideal
    tensors = _tensors(con)
    io = (*K.boundaries(lat.ideals, *tensors), *tensors)
    counts, strides = _states(classes)
    cap = np.array([c.memory * (1 + REL_TOL) for c in classes])
    inv_bw = 1.0 / np.array([c.bandwidth for c in classes])
    scale = np.where([c.host for c in classes], 0.0, inv_bw)  # host devices pay no transfers and no overflow
    reps = np.array([min(c.count, max_replicas or c.count) if replication and not c.host else 1 for c in classes],
                    dtype=np.int64)
    costs = (i_work, i_mem, i_param, cap, scale, ALLREDUCE_FACTOR * inv_bw, scale,
             model.memory is MemoryMode.OVERFLOW)
    head = (lat.ideals, lat.sub_ptr, lat.sub_idx, i_work, i_unsup.astype(np.int64), i_mem, i_param, *costs[3:],
            reps, _MODES[model.overlap], *io, counts, strides)
    with np.errstate(divide="ignore", invalid="ignore"):  # a class's device in units of cheapest work
        ratio = np.where((unsup == 0) & (work > 0), cheapest / work, 0.0)
    rho = np.minimum(1.0, ratio.max(axis=1, initial=0.0)) * (1 + 1e-12)
    remaining = ((counts[-1] - counts) @ rho).astype(np.float64)
    state = {"visited": 0, "runs": 0, "bytes": 0}

    def run(lo: float, hi: float):
        out = K.sweep(*head, float(hi), rem_work, remaining, float(lo), PRUNE_WORK and bool((reps == 1).all()), rho)
        state["visited"] += out[-1]
        state["runs"] += 1
        state["bytes"] = sum(a.nbytes for a in out[:4]) + out[0].nbytes * (C + 1)  # + most work, memory below
        return out

    def value(steps: list[tuple[int, int, int, int]]) -> float:
        return K.split_value(np.array(steps, dtype=np.int64).reshape(-1, 4), lat.ideals, *costs,
                             _MODES[model.overlap], *io)

    t1 = time.perf_counter()
    start = _incumbent_steps(lat, incumbent)
    if start is not None and value(start) <= ub:
        ub = value(start)
    else:
        start = None
    if descend and math.isfinite(ub):
        lo = max(cw[-1] / max(1, counts[-1].sum()), cheapest.max() / reps.max()) * (1 - 1e-9)  # lower bound
        steps, best = _descend(run, value, lo, ub, start, strides)
    else:
        out = run(0.0, ub)
        steps, best = _steps(out, strides), float(out[0][-1, -1])
    t2 = time.perf_counter()
    stages = [(np.setdiff1d(lat.nodes(i), lat.nodes(j)), c, k) for i, j, c, k in steps]
    used = sum(a.nbytes for a in (sums, *io[:4])) + state["bytes"] + 2 * 8 * lat.count  # + the walk's stamp, stack
    return Solution(best, stages, int(state["visited"]), {"prepare": t1 - t0, "sweep": t2 - t1}, used, state["runs"])


def _incumbent_steps(lat: IdealLattice, stages) -> list[tuple[int, int, int, int]] | None:
    """A split given as stages of supernodes as ``(I, J, class, replicas)`` steps of ``lat`` (None if not one)."""
    if not stages:
        return None
    n = lat.contraction.n_nodes
    member = np.zeros((len(stages) + 1, n), dtype=bool)
    for t, (nodes, _, _) in enumerate(stages):
        member[t + 1] = member[t]
        member[t + 1, nodes] = True
    ids = K.lookup(lat.ideals, _bitsets(member, n))
    if (ids < 0).any() or ids[-1] != lat.count - 1:
        return None
    return [(int(ids[t + 1]), int(ids[t]), c, k) for t, (_, c, k) in enumerate(stages)]


def _descend(run, value, lo: float, hi: float, start, strides):
    """Feasibility runs keeping ``lo < optimum <= hi``: the optimal split's steps and its value.

    ``hi`` starts as the incumbent (``start``'s value, or a given bound maybe rounded up) and
    is lowered to the value of every split found; ``lo`` starts as a lower bound and rises past
    every infeasible target. The first target is just below ``hi`` (heuristic incumbents are
    often optimal, and then one run proves it); then the band is bisected down to
    ``BISECT_GAP``, and targets step down from ``hi``. At most ``MAX_RUNS`` runs; then one
    exact run over ``[lo, hi]``.
    """
    found = start
    T = float(np.nextafter(hi, -math.inf))
    for _ in range(MAX_RUNS):
        out = run(T, T)
        if np.isfinite(out[0][-1, -1]):
            found = _steps(out, strides)
            hi = min(value(found), T)
        else:
            lo = T
        del out
        below = float(np.nextafter(hi, -math.inf))
        if lo >= below:  # nothing lies strictly between lo and hi: the optimum is hi
            break
        T = below if hi - lo <= BISECT_GAP * hi else (lo + hi) / 2
    else:
        out = run(lo, hi)
        return _steps(out, strides), float(out[0][-1, -1])
    if found is None:  # the bound given is achieved but no split was: one run at it for the split
        out = run(hi, hi)
        found = _steps(out, strides)
        if not found:
            return [], math.inf
    return found, hi


def _steps(out, strides) -> list[tuple[int, int, int, int]]:
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
    from .ideal_memory import sweep_suffix

    con, spec, cls = lat.contraction, model.training_memory, classes[0]
    t0 = time.perf_counter()
    work, unsup, _, param = _node_costs(con, classes)
    g = con.graph
    act = np.bincount(con.image, weights=np.where(g.backward, 0.0, g.out_bytes + g.activation_bytes),
                      minlength=con.n_nodes)
    sums = K.ideal_sums(lat.ideals, np.column_stack([work[0], unsup[0], param, act]))
    every, forward = _tensors(con), _tensors(con, forward_only=True)  # all tensors; the stashed inputs
    io = [x for t in (every, forward) for x in (*K.boundaries(lat.ideals, *t), *t)]
    inflight = np.concatenate([[0.0], spec.inflight(np.arange(1, cls.count + 1), 1)])
    t1 = time.perf_counter()
    f, back, visited = sweep_suffix(
        lat.ideals, lat.sub_ptr, lat.sub_idx, sums[:, 0].copy(), np.rint(sums[:, 1]).astype(np.int64),
        sums[:, 2].copy(), sums[:, 3].copy(), cls.memory * (1 + REL_TOL), 1.0 / cls.bandwidth,
        _MODES[model.overlap], *io, spec.state_factor, inflight, spec.recompute, float(ub))
    t2 = time.perf_counter()
    stages: list[tuple[np.ndarray, int, int]] = []
    J, h = 0, int(np.argmin(f[0]))
    while np.isfinite(f[0].min()) and J != lat.count - 1:  # first stage first: pipeline order
        I = int(back[J, h])
        stages.append((np.setdiff1d(lat.nodes(I), lat.nodes(J)), 0, 1))
        J, h = I, h - 1
    used = sum(a.nbytes for a in (sums, f, back, *io)) + 2 * 8 * lat.count
    return Solution(float(f[0].min()), stages, int(visited), {"prepare": t1 - t0, "sweep": t2 - t1}, used)
