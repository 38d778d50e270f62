"""The chain split: the cheapest cut of a topological order into invocations run one after another (latency).

Tarnawski et al.'s invocation model (§4): an accelerator's subgraph is invoked once its inputs are in host memory,
reads them, runs its ops and writes the tensors other devices consume; an op on a host runs as soon as its inputs
are ready, hosts never wait for a core. Cut the colocation groups, in topological order, into intervals, each
either one accelerator's only subgraph or ops on a host, and run the intervals one after another: the latency of
that chain is the sum of its intervals' times,

* on accelerator ``d``: ``sum_{u read} s_d b_u + sum_{v in I} t_{v,d} + sum_{v written} s_d b_v`` (each tensor
  from outside the interval read once, each tensor with a consumer past it written once; ``s_d`` the transfer
  scale, ``b`` the output bytes), within ``d``'s memory;
* on a host: the longest path of host times inside the interval (its inputs are ready when it starts).

The DP ``best[j, k, h] = min_i best[i, k, h - 1] + host(i, j), best[i, k - 1, h] + acc_k(i, j)`` (``k`` accelerators
used in the cluster's order, ``h`` hosts) is exact for such chains. The cost model runs the chain's independent intervals side by side,
so its latency is at most the chain's. A layer graph whose memory needs several accelerators and whose tensors
are large (InceptionV3, ResNet50 in Tarnawski's Table 4) is cut where its tensors are small, which the block moves
of the local search (:mod:`.latency`) do not reach from greedy's or the max-load DP's splits: it is one of
latency-best's starts.
"""
from __future__ import annotations

import heapq
import math
import time

import numpy as np

from ..cluster import Cluster
from ..errors import SpecError
from ..evaluate import CostModel, MemoryMode
from ..graph import Graph
from .latency_chain_kernels import ROWS, chain_rows
from .latency_chain_routes import prices_routes, route_split

MAX_GROUPS = 10_000  # groups above which the chain split declines (its intervals grow as the square of them; it
# reads its clock every ROWS starts: a generated DAG of 5,000 ops, 1.0 s of CPU, 5,671.8 where greedy's is 7,171.6)


def chain_split(graph: Graph, cluster: Cluster, model: CostModel, deadline: float | None = None,
                accelerators: np.ndarray | None = None) -> np.ndarray:
    """Op -> device of the cheapest chain of intervals (module docstring), each on its own device (a host too: a
    host's ops interleaved with an accelerator's would form a cycle through the two). :class:`~placement_dsl.errors.SpecError` when the graph has more than
    :data:`MAX_GROUPS` colocation groups, no chain fits the devices, or ``deadline``
    (``time.monotonic()``, as :func:`~.base.deadline_at` gives it) passes first. The intervals on accelerators go to
    them in the order ``accelerators`` (device indices; default: the cluster's accelerators in its order). Where
    devices run one op at a time over routes (:func:`~.latency_chain_routes.prices_routes`) the chain is priced over the
    routes and weighs every order and subset of the devices (:func:`~.latency_chain_routes.route_split`; with
    ``accelerators``, that order, any skipped).

    >>> from placement_dsl.graph import Op
    >>> g = Graph([Op(name="a", work={"accelerator": 1.0, "cpu": 9.0}, param_bytes=1.0, out_bytes=5.0),
    ...            Op(name="b", work={"accelerator": 1.0, "cpu": 1.5}, param_bytes=1.0, out_bytes=1.0)], [("a", "b")])
    >>> c = Cluster.accelerators(2, memory=1.0, cpus=1)
    >>> [c.names[d] for d in chain_split(g, c, CostModel.named("latency"))]
    ['acc0', 'cpu0']
    """
    order, first = _groups(graph)
    G = len(first) - 1
    if G > MAX_GROUPS:
        raise SpecError(f"chain split: {G} colocation groups, more than {MAX_GROUPS}")
    if prices_routes(cluster):
        return route_split(graph, cluster, model, order, first, deadline, accelerators)
    acc, hosts = np.flatnonzero(~cluster.host), np.flatnonzero(cluster.host)
    if accelerators is not None:
        if sorted(np.asarray(accelerators).tolist()) != acc.tolist():
            raise SpecError(f"chain split: accelerators {list(accelerators)} are not an order of the cluster's "
                            f"accelerators {acc.tolist()}")
        acc = np.asarray(accelerators, dtype=np.int64)
    t = _tables(graph, cluster, model, order, acc, hosts)
    shape = (G + 1, acc.size + 1, hosts.size + 1)  # position, accelerators used, hosts used
    best = np.full(shape, math.inf)
    best[0, 0, 0] = 0.0
    back = np.full(shape, -1, dtype=np.int64)  # the last interval's start
    on_acc = np.zeros(shape, dtype=bool)  # whether it ran on an accelerator (else on a host)
    marks = [np.zeros(graph.n, dtype=np.int64) for _ in range(3)]  # inside, read, written: stamped per start
    finish = np.zeros(graph.n)
    for i in range(0, G, ROWS):
        if deadline is not None and time.monotonic() > deadline:
            raise SpecError("chain split: time limit reached before every interval was priced")
        chain_rows(i, min(i + ROWS, G), first, *t, best, back, on_acc, *marks, finish)
    k, h = np.unravel_index(int(np.argmin(best[G])), best[G].shape)
    if not math.isfinite(best[G, k, h]):
        raise SpecError("chain split: no chain of intervals fits the accelerators' memory and the hosts")
    return _assignment(graph, order, first, back, on_acc, (int(k), int(h)), acc, hosts)


def chain_orders(graph: Graph, cluster: Cluster, model: CostModel, seed: int, count: int,
                 deadline: float | None = None) -> list[tuple[str, np.ndarray]]:
    """Chain splits (:func:`chain_split`) with the accelerators in up to ``count`` orders other than the cluster's,
    drawn by ``seed`` (distinct, as many as there are), as ``(label, op -> device)`` starts; none starts after
    ``deadline``. On heterogeneous accelerators the order decides which one holds each interval: priced through
    host memory, on a generated DAG of 2,000 ops onto four of them with links and a host, the 24 orders ranged from
    2,241.4 to 2,268.7 (the cluster's 2,266.6). Over routes the chain split weighs every order at once and each
    order here restricts it: the orders are starts of their own, never better by the chain's estimate."""
    acc = np.flatnonzero(~cluster.host)
    rng = np.random.default_rng(seed)
    seen, out = {tuple(acc.tolist())}, []
    for _ in range(min(count, math.factorial(acc.size) - 1) * 4):  # draws, until count distinct orders
        if len(out) == count or (deadline is not None and time.monotonic() >= deadline):
            break
        order = tuple(rng.permutation(acc).tolist())
        if order in seen:
            continue
        seen.add(order)
        try:
            out.append((f"chain{list(order)}", chain_split(graph, cluster, model, deadline, np.array(order))))
        except SpecError:  # no chain fits this order, or the clock ran out
            continue
    return out


ORDERS = 8  # accelerator orders a later round of a contiguous makespan's latency search starts from, at most ...
ORDER_SHARE = 0.6  # ... in this share of the round (the search from the best of them and the best split, the rest)


def round_orders(graph: Graph, cluster: Cluster, model: CostModel, seed: int,
                 seconds: float) -> list[tuple[str, np.ndarray]]:
    """The starts of a later round of the latency search on a contiguous makespan (:func:`placement_dsl.starts.improve`):
    the chain split with the accelerators in other orders drawn by ``seed`` (:func:`chain_orders`), for
    :data:`ORDER_SHARE` of the round's ``seconds``. There the search continues by critical-chain moves, which
    contiguity refuses (none accepted in 21 s from the chain split of a generated DAG of 2,000 ops), and the kicks of
    a local optimum are refused too: a split of another order is the round's one way off its start."""
    return chain_orders(graph, cluster, model, seed, ORDERS, time.monotonic() + ORDER_SHARE * seconds)


def group_positions(graph: Graph) -> np.ndarray:
    """Each op's colocation group as its position in a topological order of the groups (:func:`group_order`)."""
    _, raw = np.unique(graph.group_id, return_inverse=True)
    order = group_order(graph, raw)
    pos = np.empty_like(order)
    pos[order] = np.arange(order.size)
    return pos[raw]


def group_order(graph: Graph, raw: np.ndarray) -> np.ndarray:
    """The groups (``raw[v]``: op ``v``'s group) in a topological order of the graph they form, each as late as its
    ops allow: ready groups go in the rank of their first op that has a predecessor, and a group of sources alone
    just before its first consumer. Tarnawski's operator graphs have their weights as source ops: by first rank a
    layer's weight came before every op, with the ops colocated with it (BERT-3's 235 ops: the chain split's
    intervals then held the weights of later layers, 1,099.9; now 415.2; a BERT-6 of 397 ops: 1,724.8, now 447.5).
    Intervals of a topological order of the groups are contiguous. Where colocation makes the groups' graph cyclic,
    the groups by their first op's rank."""
    groups = int(raw.max()) + 1 if raw.size else 0
    lead = np.full(groups, graph.n, dtype=np.int64)
    np.minimum.at(lead, raw, graph.rank)
    src, dst = raw[graph.src], raw[graph.dst]
    cross = src != dst
    src, dst = src[cross], dst[cross]
    inner = np.full(groups, np.inf)  # the first rank among a group's ops with a predecessor
    has_pred = np.diff(graph.pred_ptr) > 0
    np.minimum.at(inner, raw[has_pred], graph.rank[has_pred].astype(float))
    first_use = np.full(groups, np.inf)  # ... else just before its first consumer
    np.minimum.at(first_use, src, graph.rank[graph.dst[cross]].astype(float))
    key = np.where(np.isfinite(inner), inner, first_use - 0.5)
    key = np.where(np.isfinite(key), key, lead.astype(float))
    indegree = np.bincount(dst, minlength=groups)
    out_ptr = np.concatenate(([0], np.cumsum(np.bincount(src, minlength=groups))))
    out = dst[np.argsort(src, kind="stable")]
    ready = [(key[g], int(lead[g]), g) for g in np.flatnonzero(indegree == 0).tolist()]
    heapq.heapify(ready)
    order = []
    while ready:
        g = heapq.heappop(ready)[2]
        order.append(g)
        for h in out[out_ptr[g]:out_ptr[g + 1]].tolist():
            indegree[h] -= 1
            if indegree[h] == 0:
                heapq.heappush(ready, (key[h], int(lead[h]), h))
    if len(order) < groups:  # a cycle through colocated groups
        return np.argsort(lead, kind="stable")
    return np.array(order, dtype=np.int64)


def _groups(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """Ops ordered by colocation group, the groups by their first op's rank; ``first[g]``: the group's first slot."""
    gid = group_positions(graph)
    order = np.lexsort((graph.rank, gid))
    groups = int(gid.max()) + 1 if gid.size else 0
    return order, np.concatenate(([0], np.cumsum(np.bincount(gid, minlength=groups)))).astype(np.int64)


def _tables(graph: Graph, cluster: Cluster, model: CostModel, order: np.ndarray, acc: np.ndarray,
            hosts: np.ndarray) -> tuple[np.ndarray, ...]:
    """The kernel's inputs, by position in ``order``: predecessors (CSR), output bytes, host times, each op's last
    consumer and the ops whose last consumer each position is (CSR), prefix sums of the accelerators' work, of the
    ops each may not run and of memory, the capacities (with a relative tolerance) and transfer scales."""
    pos = np.empty(graph.n, dtype=np.int64)
    pos[order] = np.arange(graph.n)
    preds = [np.sort(pos[graph.predecessors(int(v))]) for v in order]
    pred_ptr = np.concatenate(([0], np.cumsum([p.size for p in preds]))).astype(np.int64)
    pred_idx = np.concatenate([np.zeros(0, dtype=np.int64), *preds]).astype(np.int64)
    times = cluster.times(graph)[order]  # (n, devices) in the order, inf where not allowed
    host = times[:, hosts].min(axis=1) if hosts.size else np.full(graph.n, math.inf)
    last_use = _last_use(graph, order)[order]
    ends = np.argsort(last_use, kind="stable")
    ends = ends[last_use[ends] >= 0]
    end_ptr = np.concatenate(([0], np.cumsum(np.bincount(last_use[ends], minlength=graph.n)))).astype(np.int64)
    t = times[:, acc]
    work = np.vstack([np.zeros(acc.size), np.cumsum(np.where(np.isfinite(t), t, 0.0), axis=0)])
    banned = np.vstack([np.zeros(acc.size), np.cumsum(~np.isfinite(t), axis=0)]).astype(np.int64)
    mem = np.concatenate(([0.0], np.cumsum((graph.param_bytes + graph.activation_bytes)[order])))
    cap = cluster.memory[acc] if model.memory is MemoryMode.HARD else np.full(acc.size, math.inf)
    return (pred_ptr, pred_idx, graph.out_bytes.astype(float)[order], host.astype(float), last_use,
            end_ptr, ends.astype(np.int64), work, banned, mem, cap * (1 + 1e-9),
            cluster.transfer_scale[acc].astype(float))


def _last_use(graph: Graph, order: np.ndarray) -> np.ndarray:
    """Per op, the position in ``order`` of its last consumer (``-1``: none)."""
    pos = np.empty(graph.n, dtype=np.int64)
    pos[order] = np.arange(graph.n)
    out = np.full(graph.n, -1, dtype=np.int64)
    np.maximum.at(out, graph.src, pos[graph.dst])
    return out


def _assignment(graph: Graph, order: np.ndarray, first: np.ndarray, back: np.ndarray, on_acc: np.ndarray,
                used: tuple[int, int], acc: np.ndarray, hosts: np.ndarray) -> np.ndarray:
    """The chain ending at position ``len(first) - 1`` with ``used`` (accelerators, hosts) as op -> device: the
    ``k``-th accelerator interval on ``acc[k]``, the ``h``-th host interval on ``hosts[h]``."""
    chain, j, (k, h) = [], len(first) - 1, used
    while j > 0:
        i, accel = int(back[j, k, h]), bool(on_acc[j, k, h])
        chain.append((i, j, accel))
        j, k, h = i, k - accel, h - (not accel)
    assign = np.zeros(graph.n, dtype=np.int64)
    k = h = 0
    for i, j, accel in reversed(chain):
        ops = order[first[i]:first[j]]
        if accel:
            assign[ops], k = acc[k], k + 1
        else:
            assign[ops], h = hosts[h], h + 1
    return assign
