"""The chain split where devices run one op at a time and tensors move over routes (MOIRAI §III).

On a cluster with links (:func:`~placement_dsl.evaluate.execution` ``"ops"``) a tensor crossing devices is one
transfer over the route between them, ``route_latency + bytes / route_bandwidth``
(:func:`~placement_dsl.schedule.transfer_durations`), not a write and a read through host memory at each device's
bandwidth, and the cheapest chain need not visit the devices in the cluster's order nor use each one: on a
transformer of 38 ops onto accelerators of speeds 2, 1 and 0.5 (memories 1.2, 1 and 2 times 40 % of the graph's)
linked in a line ``g0 - g1 - g2`` and a host linked to ``g0``, the optimum runs the first 20 ops on ``g0`` and the
rest on ``g2`` (0.703), past ``g1`` over the 2-hop route; the chain of Tarnawski's invocations, which prices the
transfers through host memory and keeps the cluster's order, is the whole graph on the host (1.557).

So the chain's DP is over the devices used (a bit mask) and the last one: ``best[j, S, e] = min_{i, d} best[i, S -
{e}, d] + moves_{d -> e}(i, j) + run_e(i, j)``, the interval's reads each moved from the previous interval's device
(exact where a cut tensor comes from the interval just before, as in a chain of layers; an estimate otherwise, which
the cost model re-scores), its ops one after another on ``e`` (their longest path on a host), within ``e``'s memory.
Where the estimate errs the referee chooses: the cheapest chains of the :data:`CHOICES` cheapest sets of devices are
scored by the cost model, the best answered.
It covers every order and subset of the devices at once; its states grow as ``2^D``, so it runs where the cluster
has at most :data:`ROUTE_DEVICES` devices (the invocation chain, priced through host memory, beyond).
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..cluster import Cluster
from ..errors import SpecError
from ..evaluate import CostModel, MemoryMode, evaluate, execution
from ..graph import Graph
from ..placement import Placement
from ..schedule import transfer_durations
from .latency_chain_kernels import ROWS, route_rows

ROUTE_DEVICES = 6  # devices the route chain's masks cover at most (64 masks x 7 last devices per position)
CHOICES = 4  # sets of devices whose cheapest chains the cost model scores (the chain's estimate assumes each read
# comes from the interval before: on a 24-op ResNet onto three linked accelerators and a CPU its best chain ran one op
# on the CPU, 2.136 and a local optimum of schedule-ls, where its best on the accelerators alone is 2.099, from which
# schedule-ls reaches 1.676)
UNREACHABLE = 1e30  # a move over no route: finite, so that the kernel's running sums can take it out again


def prices_routes(cluster: Cluster) -> bool:
    """Whether the chain split prices its transfers over routes: devices run one op at a time (a cluster with links)
    and there are at most :data:`ROUTE_DEVICES` of them."""
    return cluster.size <= ROUTE_DEVICES and execution(cluster) == "ops"


def route_split(graph: Graph, cluster: Cluster, model: CostModel, order: np.ndarray, first: np.ndarray,
                deadline: float | None = None, accelerators: np.ndarray | None = None) -> np.ndarray:
    """Op -> device of the cheapest chain (module docstring) of the colocation groups ``order[first[g]:first[g +
    1]]`` in order, each interval on a device of its own. With ``accelerators`` (an order of the cluster's
    accelerators) they are used in that order, any of them skipped; hosts anywhere. :class:`SpecError` where no
    chain fits or ``deadline`` (``time.monotonic()``) passes first."""
    acc = np.flatnonzero(~cluster.host)
    later = np.zeros(cluster.size, dtype=np.int64)
    if accelerators is not None:
        if sorted(np.asarray(accelerators).tolist()) != acc.tolist():
            raise SpecError(f"chain split: accelerators {list(accelerators)} are not an order of the cluster's "
                            f"accelerators {acc.tolist()}")
        for k, a in enumerate(np.asarray(accelerators).tolist()):
            later[a] = sum(1 << int(b) for b in np.asarray(accelerators)[k + 1:].tolist())
    t = _tables(graph, cluster, model, order)
    G, D = len(first) - 1, cluster.size
    shape = (G + 1, 1 << D, D + 1)  # position, devices used, the last one (D: none yet)
    best = np.full(shape, math.inf)
    best[0, 0, D] = 0.0
    back, prev = np.full(shape, -1, dtype=np.int64), np.full(shape, D, dtype=np.int64)
    inside, read_mark = np.zeros(graph.n, dtype=np.int64), np.zeros(graph.n, dtype=np.int64)
    finish, moving = np.zeros((graph.n, D)), np.zeros((D, D))
    for i in range(0, G, ROWS):
        if deadline is not None and time.monotonic() > deadline:
            raise SpecError("chain split: time limit reached before every interval was priced")
        route_rows(i, min(i + ROWS, G), first, *t, later, best, back, prev, inside, read_mark, finish, moving)
    ends = _ends(best[G])
    if not ends:
        raise SpecError("chain split: no chain of intervals fits the devices' memory over the cluster's routes")
    return _refereed(graph, cluster, model, [_assignment(graph, order, first, back, prev, u, e) for u, e in ends],
                     deadline)


def _ends(last_row: np.ndarray) -> list[tuple[int, int]]:
    """The chains' ends ``(devices used, last device)`` the referee chooses among: per set of devices the cheapest by
    the chain's estimate, the :data:`CHOICES` cheapest sets, best first."""
    per_set = np.min(last_row, axis=1)
    sets = [int(u) for u in np.argsort(per_set, kind="stable")[:CHOICES] if per_set[u] < UNREACHABLE / 10]
    return [(u, int(np.argmin(last_row[u]))) for u in sets]


def _refereed(graph: Graph, cluster: Cluster, model: CostModel, splits: list[np.ndarray],
              deadline: float | None) -> np.ndarray:
    """The split the cost model scores best (valid first), the chain's own best always scored, the others while
    ``deadline`` has not passed."""
    found = None
    for assign in splits:
        if found is not None and deadline is not None and time.monotonic() > deadline:
            break
        ev = evaluate(Placement(graph, cluster, assign), model)
        key = (not ev.valid, ev.objective)
        if found is None or key < found[0]:
            found = key, assign
    assert found is not None
    return found[1]


def _tables(graph: Graph, cluster: Cluster, model: CostModel, order: np.ndarray) -> tuple[np.ndarray, ...]:
    """The kernel's inputs by position in ``order``: predecessors (CSR), each tensor's move between every pair of
    devices, running times, which devices are parallel, prefix sums of work, of the ops a device may not run and of
    memory, and the capacities (with a relative tolerance)."""
    pos = np.empty(graph.n, dtype=np.int64)
    pos[order] = np.arange(graph.n)
    preds = [np.sort(pos[graph.predecessors(int(v))]) for v in order]
    pred_ptr = np.concatenate(([0], np.cumsum([p.size for p in preds]))).astype(np.int64)
    pred_idx = np.concatenate([np.zeros(0, dtype=np.int64), *preds]).astype(np.int64)
    D = cluster.size
    src, dst = np.divmod(np.arange(D * D), D)
    moves = transfer_durations(graph, cluster, np.repeat(order, D * D), np.tile(src, graph.n), np.tile(dst, graph.n))
    moves = np.minimum(moves, UNREACHABLE).reshape(graph.n, D, D)
    times = cluster.times(graph)[order]
    work = np.vstack([np.zeros(D), np.cumsum(np.where(np.isfinite(times), times, 0.0), axis=0)])
    banned = np.vstack([np.zeros(D), np.cumsum(~np.isfinite(times), axis=0)]).astype(np.int64)
    mem = np.concatenate(([0.0], np.cumsum((graph.param_bytes + graph.activation_bytes)[order])))
    cap = cluster.memory.astype(float) if model.memory is MemoryMode.HARD else np.full(D, math.inf)
    return (pred_ptr, pred_idx, moves, np.where(np.isfinite(times), times, 0.0), cluster.parallel.copy(), work,
            banned, mem, cap * (1 + 1e-9))


def _assignment(graph: Graph, order: np.ndarray, first: np.ndarray, back: np.ndarray, prev: np.ndarray,
                used: int, last: int) -> np.ndarray:
    """The chain ending at the last position with devices ``used``, the last interval on ``last``, as op -> device."""
    assign = np.zeros(graph.n, dtype=np.int64)
    j, D = len(first) - 1, prev.shape[2] - 1
    while j > 0:
        i, before = int(back[j, used, last]), int(prev[j, used, last])
        assign[order[first[i]:first[j]]] = last
        j, used, last = i, used & ~(1 << last), before
    assert last == D and used == 0, "the chain's read-back ends where it began"
    return assign
