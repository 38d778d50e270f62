"""The DP over ideals (Tarnawski et al., NeurIPS 2020, §5.1.1-5.1.2, §5.3, App. B-C).

A set of ops is contiguous iff it is ``I \\ J`` for ideals ``J ⊆ I`` (Fact 5.2), so the best
contiguous split of the ideal ``I`` onto ``s`` devices is

    dp[I][s] = min over ideals J ⊊ I and device classes c (s_c >= 1) of
               max(dp[J][s - e_c], load_c(I \\ J))

plus "leave a device unused" (``dp[I][s - e_c]``), with ``dp[∅][·] = 0``. The answer is
``dp[V][all devices]``. ``load_c`` is the cost model's device load (:mod:`placement_dsl.evaluate`):
work on the class's kind and speed, plus in/out transfers (each tensor once per boundary;
host devices pay none), combined per :class:`~placement_dsl.evaluate.Overlap` (App. C.1),
``inf`` if the ops exceed the class's memory or cannot run there.

* Devices: the cluster's devices are grouped into classes of identical devices (kind,
  memory, speed, bandwidth, host); the DP counts devices per class. Tarnawski's ``k``
  accelerators + ``l`` CPUs is two classes; any heterogeneous cluster is handled as long as
  ``prod_c (n_c + 1)`` stays small (at most ``MAX_STATES``).
* Training (§5.3, App. B): the DP runs on the forward DAG of :func:`.contract.contract`;
  every forward supernode carries its backward ops along, so a device's load is
  ``FW_i + BW_i`` (PipeDream's objective, ``max_i (FW_i + BW_i)``). As in the paper's code,
  contiguity is enforced on the forward side only.
* Replication (App. C.2, ``replication=True``): a stage may run on ``k`` devices of one
  non-host class, at ``load / k`` plus the ring all-reduce ``2 (k-1) * param / (k * B)``
  (summed, or the max of the two with overlapped communication) — the cost model's term
  (:mod:`placement_dsl.replication`); the placement carries the replicas.
* Memory per schedule (``CostModel.training_memory``): 1F1B's stage ``s`` of ``k`` stashes
  ``k - s`` micro-batches, so the DP runs over the ideals' complements and counts the stages to
  the end (:mod:`.ideal_memory`); exact on identical accelerators without replication.
* Pins (:class:`~placement_dsl.constraints.Pin`): a device some op is pinned to is a class of its own, and a stage
  holding a pinned op goes to its device only (:func:`.ideal_lattice.device_classes`); a pinned op is never merged
  as a zero-cost leaf. So the DP is exact over the splits of its class that keep the pins, and claims its bound on a
  pinned graph (not with replicas or memory per schedule, which keep a class of identical devices whole).
* Not here: hierarchical clusters (transfers over routes), whose stage costs depend on the
  servers of the neighbouring stages; the pipeline planner (:mod:`.pipeline_dp`) handles them
  along the DFS order.
* DPL (§5.1.2): :func:`dpl` adds a DFS path through the forward DAG, leaving ``n + 1``
  ideals (the prefixes); it is exact among splits along that order only.

Speed: ideals are ``uint64`` bitsets, enumerated breadth-first (so ``J ⊊ I`` has the smaller
id); stage costs come from per-ideal prefix sums and the tensors on ``I``'s frontier
(:func:`.ideal_kernels.sweep`); for each ``I`` only sub-ideals ``J`` whose stage ``I \\ J`` fits
some device's memory and stays under an incumbent max-load (the DPL split) are visited.
The incumbent also kills states: ``(I, s)`` lives only if the least work outside ``I`` fits the
devices ``s`` leaves at the incumbent each, and the walk below ``J`` stops once the stage's
work plus the tensors it sends out of ``I`` reaches the current ``dp[I, s]`` of every live state,
or once no sub-ideal below ``J`` that has a split leaves the stage less work than that.
With an incumbent, :mod:`.ideal_solve` searches downward by feasibility runs (is every stage
``<= T``?), which prune far harder than one exact run; the DPL split is often proven optimal by
a single run just below its value (exact; ``tests/heuristics/test_ideals_pruning.py``).
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from itertools import pairwise
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..deprecated import moved
from ..errors import InfeasibleError, SpecError
from ..evaluate import CostModel, MemoryMode, Objective, evaluate
from ..graph import Graph
from ..pipeline_orders import FOLDS
from ..placement import Placement
from ..progress import report
from . import fold_ranks, host_slicing, jit, manifest
from . import ideal_lattice as ideal_lattice_module
from .base import DP_CLASS, HeuristicResult, TimeLimitReached, deadline_at, dp_claim
from .contract import Contraction, contract
from .fallback import fallback
from .ideal_lattice import (
    DEFAULT_MAX_IDEALS,
    DeviceClass,
    device_classes,
    dfs_order,
    ideal_lattice,
    lattice_size_ok,
    node_costs,
)
from .ideal_solve import Solution, capacity_bound, solve
from .orderings import brkga
from .registry import heuristic
from .slicegraph import node_slicing, ordered_node_slicing

MAX_TABLE_BYTES = 16 * 2**30  # the DP's tables (see table_bytes); beyond this it declines the graph

__getattr__ = moved(__name__, dict.fromkeys(("MAX_LATTICE_BYTES", "MAX_STATES", "IdealLattice"),
                                            ideal_lattice_module))


def place(con: Contraction, cluster: Cluster, classes: list[DeviceClass],
           stages: list[tuple[np.ndarray, int, int]]) -> tuple[np.ndarray, dict[str, list[str]]]:
    """Supernode stages -> op assignment (devices of a class in cluster order) and replica sets."""
    node_device = np.full(con.n_nodes, -1, dtype=np.int64)
    used = [0] * len(classes)
    replicas: dict[str, list[str]] = {}
    for nodes, c, k in stages:
        devs = classes[c].devices[used[c]: used[c] + k]
        used[c] += k
        node_device[nodes] = devs[0]
        if k > 1:
            replicas[cluster.names[devs[0]]] = [cluster.names[d] for d in devs]
    return con.lift(node_device), replicas


_place = place  # the former name, kept for one release


# ---------------------------------------------------------------------------- replication check
def replicated_objective(placement: Placement, replicas: dict[str, list[str]], model: CostModel | None = None) -> float:
    """Max-load of a split whose stages on ``replicas`` keys run on all listed devices (App. C.2):
    the cost model's objective of the placement with those replicas."""
    return evaluate(placement.with_replicas(replicas or None), model or CostModel()).max_load


# ---------------------------------------------------------------------------- entry points
@dataclass(frozen=True)
class _Setup:
    graph: Graph
    cluster: Cluster
    model: CostModel
    classes: list[DeviceClass]
    con: Contraction
    replication: bool
    max_replicas: int | None = None  # cap on a stage's replicas (a Replicate term's max_per_stage)


def setup(graph: Graph, cluster: Cluster, model: CostModel | None, replication: bool,
           merge_zero_cost: bool, max_replicas: int | None = None) -> _Setup:
    model = CostModel() if model is None else model
    if not isinstance(model, CostModel):
        raise SpecError(f"dp: model must be a CostModel, got {type(model).__name__}; e.g. CostModel.named('throughput')")
    if cluster.routed:
        raise SpecError("dp over ideals: the cost model routes transfers between servers, which is not a sum over "
                        "ideals; use method 'pipeline' (the pipeline planner, exact along the DFS order)")
    pins = graph.pinned if not replication and model.training_memory is None else None  # a replicated stage spans
    # devices of a class, memory per schedule needs one class: there an answer off a pin claims nothing (base._off_pin)
    classes = device_classes(cluster, pins)
    if model.training_memory is not None:
        _memory_per_schedule_ok(classes, model, replication)
        merge_zero_cost = False  # a merged leaf's activations would be stashed on its neighbour's stage
    if replication and merge_zero_cost:  # a zero-work leaf's parameters join its neighbour's all-reduce
        idle = np.all([graph.work(c.kind) == 0.0 for c in classes], axis=0)
        merge_zero_cost = not (idle & (graph.param_bytes > 0)).any()
    con = contract(graph, kinds={c.kind for c in classes}, memory=min(c.memory for c in classes),
                   merge_zero_cost=merge_zero_cost, pinned=list(pins or ()))
    if max_replicas is not None and (isinstance(max_replicas, bool) or not isinstance(max_replicas, int)
                                     or max_replicas < 1):
        raise SpecError(f"dp: max_replicas must be a whole number >= 1 or None, got {max_replicas!r}")
    return _Setup(graph, cluster, model, classes, con, replication, max_replicas)


_setup = setup  # the former name, kept for one release


def _memory_per_schedule_ok(classes: list[DeviceClass], model: CostModel, replication: bool) -> None:
    """The suffix DP's class: identical accelerators, hard memory, no replicas."""
    why = ("replicated stages" if replication else "several device classes or host devices"
           if len(classes) != 1 or classes[0].host else "soft memory" if model.memory is not MemoryMode.HARD else "")
    if why:
        raise SpecError(f"dp over ideals with memory per schedule: {why} are not modelled (it counts the stages to "
                        "the end on identical accelerators with hard memory); use method 'pipeline'")


DPL_SWEEP_NODES = 2_000
"""Up to this many supernodes, the DP's DPL run (the chain of prefixes, its incumbent) is one exact sweep pruned by
the slicing's or the equal-work split's value rather than descending feasibility runs below it: fewer pairs and one
pass (in Python, ResNet-50 inference 0.45 -> 0.23 s of CPU, 7 runs and 2,160 pairs -> 1 and 1,830; training 0.63 ->
0.23 s, 9 runs -> 1). Beyond it, the descent's early stops pay."""
DP_SWEEP_IDEALS = 300
"""Up to this many ideals, the DP's own run below DPL's split is one exact sweep pruned by it rather than descending
feasibility runs: in Python ResNet-50 training took 8 runs and 0.26 s of CPU (now 1 and 0.10 s), inference the same
0.09 s. Beyond it the descent pays (compiled, BERT-L3 inference's 1,428 ideals: 0.06 s against 0.16 s for the sweep;
GNMT's 17,914: 0.24 s against 2.8 s). One rule for both paths (whichever :func:`.jit.by_work` picks), so Python and
compiled kernels keep the same splits."""
BRKGA_INCUMBENT_IDEALS = 100_000  # from this many ideals on, BRKGA's split is a second candidate incumbent
SUFFIX_PYTHON_IDEALS, SUFFIX_PYTHON_WORK = 300, 4_000
"""Memory per schedule runs the suffix DP (:mod:`.ideal_memory`), which has no numpy version a level at a time: its
kernels stay in Python only up to these ideals and ideals x states (the limits measured for the kernels' loops in the
interpreter), not :mod:`.jit`'s."""


def note_work(su: _Setup, ideals: float, nodes: int) -> bool:
    """:func:`.jit.note_work` for the DP on ``ideals`` ideals of ``nodes`` nodes (the former limits under memory per
    schedule, :data:`SUFFIX_PYTHON_IDEALS`)."""
    units = ideals * math.prod(c.count + 1 for c in su.classes)
    if su.model.training_memory is not None and (ideals > SUFFIX_PYTHON_IDEALS or units > SUFFIX_PYTHON_WORK):
        return jit.note_work(math.inf)
    return jit.note_work(units, ideals, nodes)


def search(su: _Setup, *, linearize: bool, max_ideals: int, upper_bound: float | None,
            incumbent: list | None = None, descend: bool = True, deadline: float | None = None,
            candidates: Iterable[list] = (), sweep_below: int = 0) -> tuple[Solution, dict]:
    """Enumerate the ideals (of the DFS-linearized DAG for DPL) and run the DP; ``incumbent`` and ``candidates``
    (splits as :class:`.ideal_solve.Solution`'s stages): the best of them that the DP may take starts the search.
    A lattice of at most ``sweep_below`` ideals is settled by one exact sweep pruned by the start, not descending
    feasibility runs (:data:`DP_SWEEP_IDEALS`), where the sweep's float64 tables fit (:data:`MAX_TABLE_BYTES`)."""
    t0 = time.perf_counter()
    con = su.con
    if linearize:
        order = dfs_order(con)
        con = con.with_edges(order[:-1], order[1:])
    lat = ideal_lattice(con, max_ideals, deadline, chain=order if linearize else None)
    note_work(su, lat.count, con.n_nodes)  # compiled kernels pay beyond
    descend = descend and (lat.count > sweep_below or table_bytes(lat.count, su.classes, exact=True) > MAX_TABLE_BYTES)
    need = table_bytes(lat.count, su.classes, exact=upper_bound is None or not descend)
    if need > MAX_TABLE_BYTES:
        states = math.prod(c.count + 1 for c in su.classes)
        raise SpecError(f"dp: {lat.count} ideals x {states} device-count states need about {need / 2**30:.1f} GiB of "
                        f"tables, above the limit of {MAX_TABLE_BYTES / 2**30:.1f} GiB; use method 'dpl' or fewer "
                        "device classes")
    info: dict[str, Any] = {"nodes": con.n_nodes, "contraction": dict(con.stats), "ideals": lat.count,
                            "seconds": {"ideals": time.perf_counter() - t0}}
    ub = math.inf if upper_bound is None else upper_bound * (1 + 1e-9) + 1e-12
    report("dp", phase="dpl" if linearize else "dp", ideals=lat.count, incumbent=ub)
    starts = [incumbent] if incumbent else []
    if incumbent and descend and lat.count >= BRKGA_INCUMBENT_IDEALS:  # runs are costly: a second incumbent
        other, info["brkga"] = _brkga_split(su, deadline)
        if other is not None:
            starts.append(other)
    sol = solve(lat, su.classes, su.model, su.replication, ub, su.max_replicas, descend, starts, deadline,
                [c for c in candidates if c])
    if not sol.stages and math.isfinite(ub):  # the bound was below the optimum: solve without it
        sol = solve(lat, su.classes, su.model, su.replication, math.inf, su.max_replicas, deadline=deadline)
    info["seconds"].update(sol.seconds)
    info["pairs"] = sol.visited
    info["runs"] = sol.runs
    lattice = lat.ideals.nbytes + lat.sub_ptr.nbytes + lat.sub_idx.nbytes
    info["memory"] = {"lattice_bytes": lattice, "table_bytes": sol.table_bytes, "peak_rss_bytes": peak_rss()}
    report("dp", phase="dpl" if linearize else "dp", ideals=lat.count, pairs=sol.visited, best=sol.value)
    if not sol.stages:
        raise InfeasibleError(_infeasible_message(su, linearize))
    return sol, info


_search = search  # the former name, kept for one release


def _brkga_split(su: _Setup, deadline: float | None = None
                 ) -> tuple[list[tuple[np.ndarray, int, int]] | None, float | None]:
    """BRKGA's split (Archer Alg. 2, :func:`.orderings.brkga`) as supernode stages in DAG order, and its
    objective; ``(None, objective or None)`` when it is not a split of the lattice's nodes (a supernode split
    across devices, stages in a cycle) or BRKGA does not model the case (replicas, memory per schedule).
    Whether the DP may take it (memory, the ops a class runs, devices per class) the search asks of every
    incumbent alike (:meth:`.ideal_solve.Sweeps.value`). BRKGA starts no generation after ``deadline``."""
    if su.replication or su.model.training_memory is not None:
        return None, None
    try:
        r = brkga(su.graph, su.cluster, model=su.model, seed=0,
                  time_limit=None if deadline is None else max(0.0, deadline - time.monotonic()))
    except (SpecError, InfeasibleError):
        return None, None
    con, dev = su.con, r.placement.assign
    node_dev = np.full(con.n_nodes, -1, dtype=np.int64)
    node_dev[con.image] = dev
    if (node_dev[con.image] != dev).any():
        return None, r.objective
    stages = TopologicalSorter({int(d): set() for d in np.unique(node_dev)})
    for a, b in zip(node_dev[con.src].tolist(), node_dev[con.dst].tolist()):
        if a != b:
            stages.add(b, a)
    try:
        order = list(stages.static_order())
    except CycleError:  # not contiguous
        return None, r.objective
    cls = {d: c for c, dc in enumerate(su.classes) for d in dc.devices}
    return [(np.flatnonzero(node_dev == d), cls[d], 1) for d in order], r.objective


def table_bytes(ideals: int, classes: list[DeviceClass], exact: bool) -> int:
    """Bytes of the DP's per-state tables: the float64 sweep's values, back-links and cut table (``exact``),
    or the feasibility runs' bitsets and float32 cut table (:mod:`.ideal_feasible`)."""
    S, C = math.prod(c.count + 1 for c in classes), len(classes)
    if exact:
        return ideals * S * (8 + 4 + 1 + 2 + 8 * (C + 1))
    return ideals * (8 * -(-S // 64) + 4 * S * (C + 1))


def peak_rss() -> int:
    """The process's peak resident memory so far in bytes (0 where the platform does not say)."""
    try:
        import resource
    except ImportError:  # Windows
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # macOS reports bytes, Linux KiB


def _infeasible_message(su: _Setup, linearize: bool) -> str:
    g = su.graph
    caps = ", ".join(f"{c.count} x {c.kind!r} of memory {c.memory:.6g}" for c in su.classes)
    total = float((g.param_bytes + g.activation_bytes).sum())
    nowhere = [g.names[i] for i in np.flatnonzero(~np.isfinite(su.cluster.times(g)).any(axis=1))[:5]]
    why = f"; ops {nowhere} can run on no device kind of the cluster" if nowhere else ""
    what = "split along the DFS order" if linearize else "contiguous split"
    return (f"dp: no {what} of graph {g.name!r} (total memory {total:.6g}) fits on the cluster ({caps}) "
            f"respecting colocation{' and pins' if any(c.banned for c in su.classes) else ''}{why}; add devices or "
            "memory, or let memory overflow "
            "(CostModel(memory='overflow'))")


def _folded(su: _Setup, sol: Solution, deadline: float | None) -> Solution:
    """Under a schedule that folds stages onto ranks (ZBV), ``sol``'s stages re-balanced by the ranks' loads
    (:mod:`.fold_ranks`: the DP balances stages); one class of devices, no replicas; otherwise ``sol``."""
    if su.model.name not in FOLDS or len(su.classes) != 1 or any(k != 1 for _, _, k in sol.stages):
        return sol
    score = fold_ranks.scorer(su.graph, su.cluster, su.model,
                              lambda st: _place(su.con, su.cluster, su.classes, [(x, 0, 1) for x in st])[0])
    budget = min(fold_ranks.MAX_EVALUATIONS, max(20, fold_ranks.MAX_WORK // max(1, su.graph.n)))
    stages = fold_ranks.rebalance(su.con, [np.sort(x) for x, _, _ in sol.stages], score, su.classes[0].count,
                                  deadline, budget)
    return dataclasses.replace(sol, stages=[(x, 0, 1) for x in stages])


def ideal_result(method: str, su: _Setup, sol: Solution, info: dict[str, Any], start: float,
                 exact: bool, deadline: float | None = None) -> HeuristicResult:
    sol = _folded(su, sol, deadline)
    assign, replicas = _place(su.con, su.cluster, su.classes, sol.stages)
    placement = Placement(su.graph, su.cluster, assign, source=method, replicas=replicas or None)
    ev = evaluate(placement, su.model)
    info["dp_value"] = sol.value
    info["stages"] = [{"device_class": su.classes[c].kind, "replicas": k, "nodes": len(nodes)}
                      for nodes, c, k in sol.stages]
    info["contiguous"] = not any(v.check == "contiguous" for v in ev.violations)
    bound = None
    if su.replication:
        info["replicas"] = replicas
    stopped = exact and sol.lower is not None  # the search ended at its time limit with the band open
    if stopped:
        info["stopped"] = "time limit"
    # where a backward op feeds a forward op, a split of the forward quotient may not be contiguous by Def. 3.1:
    # such a split certifies nothing; nor does a split re-balanced by ranks (ZBV: the DP's value is a stage's)
    unseen = dp_claim(sol.value, ev.objective) if exact and su.model.objective is Objective.MAX_LOAD else None
    if unseen:
        info["no_bound"] = unseen
    elif exact and su.model.objective is Objective.MAX_LOAD and info["contiguous"] and su.model.name not in FOLDS:
        bound = min(sol.lower * (1 - 1e-9), ev.objective) if stopped else ev.objective
    if su.model.objective is not Objective.MAX_LOAD:
        info["optimized"] = "max_load"
    return HeuristicResult(method=method, placement=placement, objective=ev.objective,
                           seconds=time.perf_counter() - start, bound=bound,
                           exact_among=DP_CLASS if bound is not None and not stopped else None,
                           evaluations=info["pairs"], info=info)


SLICING_SHARE = 0.25  # of the time left, the most the slicings that give DPL its incumbent may take
SLICING_NODES = 500  # from this many supernodes on (below, DPL's unpruned sweep is quicker than loading the slicer)


def slicing_incumbent(su: _Setup, deadline: float | None = None) -> float | None:
    """The value of :func:`slicing_split` (``None`` where it has none)."""
    return slicing_split(su, deadline)[0]


def slicing_split(su: _Setup, deadline: float | None = None) -> tuple[float | None, HeuristicResult | None]:
    """An upper bound on DPL's optimum to prune its sweep, which without one walks every pair of prefixes
    (``n^2 / 2``; seconds at 2,000 ops on accelerators and a CPU): the best slicing of DPL's DFS order onto the
    devices in the cluster's order and with the hosts first (:func:`.slicegraph.ordered_node_slicing`, each
    a split of DPL's prefixes), and the best of those slicings as a result (what the DP returns if its time
    runs out before DPL's sweep ends). A slicing stopped by :data:`SLICING_SHARE` of the time left (a loaded machine:
    seconds at 10,000 ops) gives its work-balanced slicing's value, still a split of the prefixes, far better
    than no incumbent. ``None`` where no slicing applies (replicas, memory per schedule, a backward pass), the
    graph is small (:data:`SLICING_NODES`) or none fits."""
    if su.replication or su.model.training_memory is not None or su.con.n_nodes < SLICING_NODES:
        return None, None
    at = None if deadline is None else time.monotonic() + max(0.0, deadline - time.monotonic()) * SLICING_SHARE
    devices = np.arange(su.cluster.size)
    host = su.cluster.host.astype(bool)
    orders = [devices] + ([np.concatenate([devices[host], devices[~host]])] if host.any() and not host.all() else [])
    order = dfs_order(su.con)
    best, split = math.inf, None
    if host.any() and not host.all():  # first the balanced slicing onto the accelerators alone (O(n + m)): the
        found = ordered_node_slicing(su.graph, su.cluster, su.model, su.con.image, order, devices[~host],
                                     time.monotonic(), best)  # cutoff of the slicings below, which a slow host's
        if found is not None:  # share of the work would leave at thousands
            best, split = _better(found, best, split)
    for chosen in orders:
        found = ordered_node_slicing(su.graph, su.cluster, su.model, su.con.image, order, chosen, at, best)
        if found is None:
            return None, None
        best, split = _better(found, best, split)
    return (best, split) if math.isfinite(best) else (None, None)


def balanced_prefix_splits(su: _Setup) -> list[list[tuple[np.ndarray, int, int]]]:
    """DPL's candidate incumbents where no slicing gives one (a backward pass, small graphs): DPL's DFS order cut
    into ``1 .. k`` stages of about equal work on the ``k`` devices of the class of accelerators that runs every
    op (the one with the most devices), each as supernode stages in pipeline order; none where no class runs
    every op. Splits of DPL's prefixes, so the search prices each in its own arithmetic
    (:meth:`.ideal_solve.Sweeps.value`, ``inf`` where one does not fit) and starts its descending feasibility
    runs from the best, which visit a fraction of the unpruned sweep's pairs (ResNet-50 training in Python:
    3,544 pairs in 9 runs instead of 15,753, 0.6-0.8 s instead of 1.6-2.1 s); with fewer stages than devices a split sends fewer tensors, which where transfers
    dominate (BERT-L3) is the better start."""
    if su.replication or su.model.training_memory is not None:
        return []
    work, unsup, _, _ = node_costs(su.con, su.classes)
    able = [c for c, dc in enumerate(su.classes) if not dc.host and not unsup[c].any()]
    if not able:
        return []
    c = max(able, key=lambda c: su.classes[c].count)
    order = dfs_order(su.con)
    acc = np.cumsum(work[c][order])
    out = []
    for k in range(1, su.classes[c].count + 1):
        cuts = np.unique(np.concatenate([[0], np.searchsorted(acc, acc[-1] * np.arange(1, k) / k, side="right"),
                                         [order.size]]))
        out.append([(order[a:b], c, 1) for a, b in pairwise(cuts.tolist()) if b > a])
    return out


def _better(found: tuple, best: float, split: tuple | None) -> tuple[float, tuple | None]:
    """The better of ``(best, split)`` and the slicing ``found`` (value ``nan``: stopped, its balanced slicing)."""
    value, slicer, sliced, bounds = found
    value = slicer.value(sliced, bounds) if math.isnan(value) else value
    return (value, (slicer, sliced, bounds)) if value < best else (best, split)


@heuristic("dp", optimizes="max_load", options=manifest.Dp)
def dp(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
       replication: bool = False, max_replicas: int | None = None, max_ideals: int = DEFAULT_MAX_IDEALS,
       incumbent: bool = True, merge_zero_cost: bool = True, time_limit: float | None = None) -> HeuristicResult:
    """The exact DP over ideals: the best contiguous split (Tarnawski et al. §5.1.1).

    Minimizes the max device load over splits that respect colocation and pins, fit in memory and
    whose forward parts are contiguous (each device holds ``I \\ J`` of the colocation
    quotient's forward DAG, App. B; with singleton groups, or forward/backward pairs, that is
    Def. 3.1 on the forward ops) with an acyclic quotient; ``bound == objective`` and ``exact_among ==``
    :data:`~.base.DP_CLASS` (a contiguous split whose quotient has a cycle may be better). Where the cost model
    prices the split above the DP's own value (a link's load; a pin under replicas), no bound (``info["no_bound"]``
    says so).
    Where a backward op feeds a forward op the split found may not be contiguous by Def. 3.1
    (``info["contiguous"]`` is False); the result then has no bound.
    Under a non-max-load model (GPipe, latency) the max-load-optimal split is returned with
    no bound (the paper's §7 baseline).

    Parameters
    ----------
    replication
        Let a stage run on several identical non-host devices (App. C.2). The placement carries
        the replicas (a replicated stage's ops on its first device; ``info["replicas"]`` maps
        that device to all of them); ``objective`` is the cost model's value of the replicated
        placement, equal to the DP's, and ``bound == objective`` among contiguous splits with
        replicated stages.
    max_replicas
        With ``replication``, at most this many devices per stage (a ``Replicate`` term's
        ``max_per_stage``); ``None``: up to the whole device class.
    max_ideals
        Give up (``SpecError``) beyond this many ideals.
    incumbent
        Start from the DPL split (beside hosts, :mod:`.host_slicing`'s probes): feasibility runs below its max-load
        (same optimum, far fewer pairs; one run when the DPL split is optimal). From ``BRKGA_INCUMBENT_IDEALS`` ideals
        on, BRKGA's split (seed 0) is a second candidate when one of the DP's splits, the better starting (``info["brkga"]``).
    merge_zero_cost
        App. B's merging of zero-cost leaves (off: more ideals, same optimum).
    time_limit
        Seconds of wall clock: every phase (the lattice's enumeration, DPL's run, the feasibility
        runs, each reading the clock every few thousand ideals) stops when it passes, and the
        result carries ``info["stopped"] == "time limit"``. Stopped in the descending search with
        the band still open, the result is its best split, ``bound`` the value its infeasible
        runs proved no contiguous split reaches (or the capacity bound), and ``exact_among``
        ``None``: a gap, not a certificate of optimality. Stopped before it, the DPL split if
        there is one, else :func:`.fallback.fallback`'s (greedy or one device), without a bound.

    ``info``: ``ideals``, ``nodes`` (supernodes), ``pairs`` (ideal pairs visited), ``runs`` (sweeps),
    ``seconds`` per phase, ``contraction`` statistics, ``stages``, ``incumbent``, ``memory``
    (bytes of the lattice and of the DP's arrays, and the process's peak resident memory).

    Examples
    --------
    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name=n, work=w, out_bytes=1) for n, w in zip("abcd", (4, 1, 1, 4))],
    ...           [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    >>> r = dp(g, Cluster.stages(2))
    >>> r.objective, r.bound, r.info["ideals"]  # {a, b} | {c, d}: work 5 + two tensors each
    (7.0, 7.0, 6)
    """
    del seed  # deterministic
    with jit.by_work(graph.n):  # kernels in Python while the lattice is small (numba costs more to load)
        start = time.perf_counter()
        at = deadline_at("dp", time_limit)
        su = _setup(graph, cluster, model, replication, merge_zero_cost, max_replicas)
        ub, split, first, slicing = None, None, None, None
        try:
            guess = 2.0 ** lattice_size_ok(su.con, max_ideals)  # declines a graph with too many ideals before DPL
            # a lattice that will run compiled loads the kernels before DPL's run too (BERT-L3: its 129 prefixes
            # swept in Python took 0.7-1 s, compiled milliseconds; numba's load is paid either way)
            note_work(su, guess, su.con.n_nodes)
            if incumbent:
                try:
                    if _beside_hosts(su):  # DPL by probes along its order, the hosts' stages anywhere
                        first, first_info = host_slicing.dpl_solution(su.graph, su.cluster, su.model, su.con,
                                                                      su.classes, at, host_slicing.DPL_SHARE)
                    else:
                        sliced, slicing = slicing_split(su, at)
                        first, first_info = _search(su, linearize=True, max_ideals=max_ideals, upper_bound=sliced,
                                                    candidates=() if sliced is not None else balanced_prefix_splits(su),
                                                    descend=su.con.n_nodes > DPL_SWEEP_NODES, deadline=at)
                    ub, split = first.value, first.stages
                except InfeasibleError:  # no split along the DFS order fits (memory per schedule): no incumbent
                    ub = None
            sol, info = _search(su, linearize=False, max_ideals=max_ideals, upper_bound=ub, incumbent=split,
                                deadline=at, sweep_below=DP_SWEEP_IDEALS)
        except TimeLimitReached as err:
            if first is not None:  # DPL's split in hand, with the capacity bound (the DP's search did not end)
                lower = capacity_bound(su.con, su.classes, su.replication, su.max_replicas)
                first_info.update(incumbent=ub, stopped_in=str(err))
                chosen = dataclasses.replace(first, lower=lower if lower < first.value else None)
                return ideal_result("dp", su, chosen, first_info, start, exact=True, deadline=at)
            return _stopped_early(su, slicing, str(err), start)
        info["incumbent"] = ub
        return ideal_result("dp", su, sol, info, start, exact=True, deadline=at)


def _stopped_early(su: _Setup, slicing: tuple | None, phase: str, start: float) -> HeuristicResult:
    """The DP stopped before DPL's sweep ended: the better of :func:`.fallback.fallback`'s split and the slicing
    that was DPL's incumbent (``slicing``: slicer, order, bounds), without a bound."""
    found = fallback("dp", su.graph, su.cluster, su.model, phase, start)
    if slicing is None:
        return found
    sliced = slicing[0].result("dp", slicing[1], slicing[2], start, 1)
    if not evaluate(sliced.placement, su.model).valid or sliced.objective >= found.objective:
        return found
    return dataclasses.replace(sliced, info={**found.info, "fallback": "slicing"})


@heuristic("dpl", optimizes="max_load", options=manifest.Dpl)
def dpl(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
        replication: bool = False, max_replicas: int | None = None, merge_zero_cost: bool = True,
        time_limit: float | None = None) -> HeuristicResult:
    """DP with the linearization heuristic (Tarnawski et al. §5.1.2): exact along one DFS order.

    A DFS path through the contracted forward DAG leaves ``n + 1`` ideals (the prefixes), so
    the DP takes ``O(n^2)`` pairs. No bound (the path may exclude the optimum). Past ``time_limit``
    seconds it returns :func:`.fallback.fallback`'s split (``info["stopped"]``).

    On one class of identical devices (no replication, no memory per schedule, no backward pass) the
    prefixes' DP is the slicing of the DFS order into at most ``k`` stages, cut only between supernodes
    (:func:`.slicegraph.node_slicing`, ``info["path"] == "slicing"``): ``O(n)`` memory, and only the segments
    whose work fits under an incumbent (the better of the work-balanced and the one-device slicings) are
    priced, from split prefixes alone, so 20,000 ops take seconds. Beside one class of hosts the same slicing with
    the hosts' stages anywhere is found by feasibility probes (:mod:`.host_slicing`, ``info["path"] == "host
    slicing"``). Elsewhere the sweep over the prefixes runs.
    """
    del seed
    start = time.perf_counter()
    at = deadline_at("dpl", time_limit)
    su = _setup(graph, cluster, model, replication, merge_zero_cost, max_replicas)
    if not replication and su.model.training_memory is None:
        found = _dpl_slicing(su, start, at)
        if found is not None:
            return found
    try:
        if _beside_hosts(su):
            sol, info = host_slicing.dpl_solution(graph, cluster, su.model, su.con, su.classes, at)
            return ideal_result("dpl", su, sol, info, start, exact=False, deadline=at)
        sol, info = _search(su, linearize=True, max_ideals=DEFAULT_MAX_IDEALS, upper_bound=None, deadline=at)
    except TimeLimitReached as err:
        return fallback("dpl", graph, cluster, su.model, str(err), start)
    return ideal_result("dpl", su, sol, info, start, exact=False, deadline=at)


def _beside_hosts(su: _Setup) -> bool:
    """Accelerators beside hosts, no replicas, past :data:`DPL_SWEEP_NODES` supernodes: DPL by :mod:`.host_slicing`'s
    probes (below, the cheap sweep backtracks Tarnawski et al.'s own split among tied optima: Table 4's bert3 415.90)."""
    return not su.replication and su.con.n_nodes > DPL_SWEEP_NODES and host_slicing.applies(su.graph, su.cluster, su.model)


def _dpl_slicing(su: _Setup, start: float, at: float | None) -> HeuristicResult | None:
    """DPL on one class of identical devices: the prefixes of the DFS order are its only ideals, so the DP is a
    slicing of that order into at most ``k`` stages (:func:`.slicegraph.node_slicing`, ``O(n)`` memory, the
    segments cut off by an incumbent) rather than a sweep over ``n^2 / 2`` ideal pairs; ``None`` elsewhere."""
    con = su.con
    found = node_slicing(su.graph, su.cluster, su.model, con.image, dfs_order(con), at)
    if found is None:
        return None
    value, slicer, order, bounds = found
    if math.isnan(value):
        return fallback("dpl", su.graph, su.cluster, su.model, "the slicing of the DFS order", start)
    if value == math.inf:
        raise InfeasibleError(_infeasible_message(su, True))
    res = slicer.result("dpl", order, bounds, start, evaluations=1)
    sizes = np.diff(bounds)
    info = {"nodes": con.n_nodes, "contraction": dict(con.stats), "ideals": con.n_nodes + 1, "dp_value": value,
            "path": "slicing", "pairs": None,
            "stages": [{"device_class": su.classes[0].kind, "replicas": 1,
                        "nodes": int(np.unique(con.image[order[a:b]]).size)}
                       for a, b, size in zip(bounds[:-1], bounds[1:], sizes) if size],
            "contiguous": True, "memory": {"peak_rss_bytes": peak_rss()}}
    if su.model.objective is not Objective.MAX_LOAD:
        info["optimized"] = "max_load"
    return dataclasses.replace(res, info=info, evaluations=0)
