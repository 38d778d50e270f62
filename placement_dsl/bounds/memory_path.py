"""The segment bound: memory cuts a long path into runs, and every cut pays a transfer (single-sample family).

Along any path ``p_0 -> ... -> p_{m-1}`` of the graph, a placement splits the ops into maximal *runs* on one serial
device (an accelerator; in a makespan schedule, any device) and, in Tarnawski's invocation model (§4), ops on
hosts. Under a hard :class:`~placement_dsl.constraints.Memory` term a run on device ``d`` holds at most ``M_d``
bytes of the path's own ops, so a path heavier than every device is cut, and each run pays what its boundary costs:

* latency (invocation model): a run on accelerator ``d`` from ``i`` to ``j`` reads ``p_{i-1}``'s tensor and writes
  ``p_{j-1}``'s through host memory (``out_bytes / bandwidth_d`` each, ``i > 0`` / ``j < m``); an op on a host
  takes its host time and pays nothing itself;
* makespan: the run's first op waits for ``p_{i-1}``'s tensor to arrive from another device (the cheapest transfer
  into ``d`` from any ``d' != d``).

The ops of a path run one after another, so every placement's objective is at least its path's cost, and at least
the cheapest way to cut the path: the DP ``dist[j] = min(dist[j-1] + host(p_{j-1}), min_{d, i: mem(i, j) <= M_d}
dist[i] + in_d(i) + work_d(i, j) + out_d(j))``, ``O(m * L)`` per device class (``L`` the longest run that fits).
It holds for any number of subgraphs per accelerator, contiguous or not (the DP drops the runs' other ops and their
shared memory), and it is at least the critical path where memory does not bind. The paths are the longest ones
under a few weightings of the ops (fastest time, host time, memory, time plus tensor), each priced in turn while
the clock allows.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..constraints import Contiguous, Memory
from ..deadline import BudgetSpent, Deadline
from ..evaluate import execution
from ..graph import Graph
from .makespan import allowed_times, transfer_table

MAX_CELLS = 5e8  # DP cells (positions x run lengths x device classes over every path) priced before declining


def segment_data(problem: Any) -> dict[str, Any]:
    """The DP's inputs for ``problem`` (a latency or makespan problem, cost-model units): per op and serial device
    class its time, the cost of a run starting after it (``read``) and ending with it (``write``), its host time,
    its memory, and each class's capacity."""
    g, c = problem.graph, problem.cluster
    times = allowed_times(problem)
    latency = execution(c) == "invocations"  # Tarnawski's restriction, else one op at a time (MOIRAI)
    serial = np.flatnonzero(~c.parallel)  # parallel hosts: an op there pays only its own time
    sent = np.where(np.diff(g.succ_ptr) > 0, g.out_bytes, 0.0)
    if latency:
        read = write = sent[:, None] * c.transfer_scale[serial][None]
    else:
        comm = transfer_table(g, c)
        comm[:, np.arange(c.size), np.arange(c.size)] = np.inf  # a run's input comes from another device
        read = comm.min(axis=1) if c.size > 1 else np.zeros((g.n, 1))
        read = np.where(np.isfinite(read), read, 0.0)[:, serial]
        write = np.zeros_like(read)
    hosts = np.flatnonzero(c.parallel)
    host = times[:, hosts].min(axis=1, initial=np.inf)
    cap = c.memory[serial] if problem.has(Memory) else np.full(serial.size, np.inf)
    # identical serial devices are one class: the same times, capacity and transfers
    key = np.vstack([times[:, serial], read, write, cap[None]]).T
    _, first = np.unique(np.nan_to_num(key, posinf=-1.0), axis=0, return_index=True)
    keep = np.sort(first)
    return {"times": times[:, serial[keep]], "read": read[:, keep], "write": write[:, keep], "host": host,
            "scale": c.transfer_scale[serial[keep]] if latency else None, "sent": sent,
            "mem": np.asarray(g.param_bytes + g.activation_bytes, dtype=float), "cap": cap[keep],
            "fastest": np.minimum(np.where(np.isfinite(times), times, np.inf).min(axis=1), host),
            "contiguous": problem.has(Contiguous)}


def cut_path(path: np.ndarray, data: dict[str, Any], deadline: Deadline | None = None,
             graph: Graph | None = None) -> float:
    """The cheapest cut of ``path`` (op indices, first to last) into runs and host ops (module docstring);
    :class:`~placement_dsl.deadline.BudgetSpent` when ``deadline`` passes first.

    With ``data["contiguous"]`` (and the ``graph``) a run's *body* is every op on a path between its first and last
    op: a contiguous device set holds them all, so their memory counts against the run's device and their time
    lies between the run's first start and last end on that serial device (:func:`between`)."""
    m = len(path)
    dist = np.full(m + 1, np.inf)
    dist[0] = 0.0
    host = data["host"][path]
    pmem = np.concatenate(([0.0], np.cumsum(data["mem"][path])))
    body = between(graph, path) if data.get("contiguous") and graph is not None else None
    skips = skip_bytes(graph, path, data["sent"]) if data.get("scale") is not None and graph is not None else None
    classes = []
    for k in range(data["times"].shape[1]):
        t = data["times"][:, k]
        work = np.concatenate(([0.0], np.cumsum(np.where(np.isfinite(t[path]), t[path], 0.0))))
        banned = np.concatenate(([0], np.cumsum(~np.isfinite(t[path]))))  # ops the class may not run, so far
        read = np.concatenate(([0.0], data["read"][path[:-1], k]))  # read[i]: a run starting at i reads p_{i-1}
        write = np.concatenate((data["write"][path[:-1], k], [0.0]))  # write[j-1]: a run ending at j < m writes
        first = np.searchsorted(pmem, pmem - data["cap"][k] * (1 + 1e-9), side="left") \
            if math.isfinite(data["cap"][k]) else np.zeros(m + 1, dtype=np.int64)
        scale = 0.0 if skips is None else float(data["scale"][k])
        classes.append((t, work, banned, read, write, first, np.zeros((3, m)), scale))  # the body's memory, time, bans
    for j in range(1, m + 1):
        if deadline is not None and j % 256 == 0:
            deadline.check(f"the cut of a {m}-op path at position {j}")
        best = dist[j - 1] + host[j - 1]
        for t, work, banned, read, write, first, side, scale in classes:
            lo = int(first[j])
            if body is not None:  # the ops that join the bodies of runs ending at j, by their last path ancestor
                ops, at = body[j - 1]
                np.add.at(side, (slice(None), at), np.vstack([data["mem"][ops], np.where(np.isfinite(t[ops]), t[ops], 0.0),
                                                              (~np.isfinite(t[ops])).astype(float)]))
            if lo >= j:
                continue
            span = slice(lo, j)
            cost = dist[span] + read[span] + (work[j] - work[span]) + write[j - 1]
            ok = banned[j] - banned[span] == 0
            if scale:
                cost = cost + scale * skips[span, j]
            if body is not None:
                extra = np.cumsum(side[:, span][:, ::-1], axis=1)[:, ::-1]  # sums over the ops joining at >= i
                cost = cost + extra[1]
                ok &= (pmem[j] - pmem[span] + extra[0] <= data["cap"][k] * (1 + 1e-9)) & (extra[2] == 0)
            cost = cost[ok & np.isfinite(cost)]
            if cost.size:
                best = min(best, float(cost.min()))
        dist[j] = best
    return float(dist[m]) if math.isfinite(dist[m]) else 0.0


MAX_SKIP_POSITIONS = 2000  # a path longer than this prices no skip edges (their table holds m^2 floats)


def skip_bytes(graph: Graph, path: np.ndarray, sent: np.ndarray) -> np.ndarray | None:
    """``extra[i, j]``: bytes a run of ``p_i .. p_{j-1}`` must read and write through host memory besides its two
    boundary tensors, from the path's own skip edges (latency's invocation model; ``None`` beyond
    :data:`MAX_SKIP_POSITIONS`).

    A path op ``p_s`` with ``s <= i - 2`` feeding a run op is on another device or in an earlier invocation (its
    consumer ``p_{s+1}`` lies outside the run and feeds it), so the run reads its tensor, once whatever the number of
    consumers; a run op ``p_t``, ``t <= j - 2``, feeding a path op past the run writes its tensor."""
    m = len(path)
    if m > MAX_SKIP_POSITIONS:
        return None
    extra = np.zeros((m + 1, m + 1))
    pos = np.full(graph.n, -1)
    pos[path] = np.arange(m)
    for s, u in enumerate(path.tolist()):
        later = np.sort(pos[graph.successors(u)])
        later = later[later >= s + 2]
        if not later.size or not sent[u]:
            continue
        prev = s + 1
        for t in later.tolist():  # runs starting in (prev, t] meet their first consumer of u at t
            extra[prev + 1:t + 1, t + 1:] += sent[u]
            prev = t
        extra[:s + 1, s + 2:int(later[-1]) + 1] += sent[u]  # runs holding p_s, ending before its last consumer
    return extra


def between(graph: Graph, path: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per path position ``j``: the off-path ops ``w`` whose first path descendant is ``p_j`` (``b(w) = j``), with
    their last path ancestor ``a(w) < j``: ``w`` lies between ``p_i`` and ``p_{j'}`` iff ``i <= a(w)`` and
    ``b(w) <= j'`` (``p_i`` reaches every later path op), so it joins the body of every run from ``i <= a(w)`` to
    ``j' >= b(w)``. ``O(n + m)``."""
    n, m = graph.n, len(path)
    a, b = np.full(n, -1), np.full(n, m)
    a[path], b[path] = np.arange(m), np.arange(m)
    on = np.zeros(n, dtype=bool)
    on[path] = True
    for v in graph.topo.tolist():
        preds = graph.predecessors(v)
        if not on[v] and preds.size:
            a[v] = a[preds].max()
    for v in graph.topo[::-1].tolist():
        succ = graph.successors(v)
        if not on[v] and succ.size:
            b[v] = b[succ].min()
    joined = np.flatnonzero(~on & (a >= 0) & (b < m))
    order = joined[np.argsort(b[joined], kind="stable")]
    cuts = np.searchsorted(b[order], np.arange(m + 1))
    return [(order[cuts[j]:cuts[j + 1]], a[order[cuts[j]:cuts[j + 1]]]) for j in range(m)]


def longest_path(graph: Graph, weight: np.ndarray) -> np.ndarray:
    """The ops of a heaviest path under ``weight`` (ties to the first predecessor), first to last."""
    head, back = np.where(np.isfinite(weight), weight, 0.0).astype(float), np.full(graph.n, -1)
    for v in graph.topo.tolist():
        preds = graph.predecessors(v)
        if preds.size:
            back[v] = int(preds[np.argmax(head[preds])])
            head[v] += head[back[v]]
    path = [int(np.argmax(head))]
    while back[path[-1]] >= 0:
        path.append(int(back[path[-1]]))
    return np.array(path[::-1], dtype=np.int64)


def candidate_paths(graph: Graph, data: dict[str, Any]) -> list[np.ndarray]:
    """Distinct heaviest paths by fastest time, host time, memory, and time plus tensor bytes' read and write."""
    fastest = np.where(np.isfinite(data["fastest"]), data["fastest"], 0.0)
    cheapest = np.where(np.isfinite(data["read"]), data["read"], 0.0).min(axis=1, initial=0.0)
    mem = data["mem"] / max(float(data["mem"].max(initial=0.0)), 1e-300) * max(float(fastest.max(initial=0.0)), 1.0)
    out: dict[tuple[int, ...], np.ndarray] = {}
    for weight in (fastest, data["host"], fastest + mem, fastest + 2 * cheapest):
        if graph.n:
            p = longest_path(graph, weight)
            out.setdefault(tuple(p.tolist()), p)
    return list(out.values())


def cells(paths: list[np.ndarray], data: dict[str, Any]) -> float:
    """DP cells :func:`cut_path` touches on ``paths``: per position the runs that fit, per device class."""
    total = 0.0
    for p in paths:
        pmem = np.concatenate(([0.0], np.cumsum(data["mem"][p])))
        for cap in data["cap"]:
            lo = np.searchsorted(pmem, pmem - cap, side="left") if math.isfinite(cap) else np.zeros(len(pmem))
            total += float((np.arange(len(pmem)) - lo).sum())
    return total


def segment_bound(problem: Any, deadline: Deadline | None = None) -> tuple[float, str, bool]:
    """The largest cheapest cut over the candidate paths (module docstring), in cost-model units, a note, and
    whether every path was priced.

    Declined (:class:`~placement_dsl.deadline.BudgetSpent`) when the DP's cells exceed :data:`MAX_CELLS`; with a
    ``deadline``, the paths not priced by it are left out (``BudgetSpent`` if none was).

    >>> from placement_dsl.graph import Graph, Op
    >>> from placement_dsl.cluster import Cluster
    >>> from placement_dsl.objectives import Makespan
    >>> from placement_dsl.problem import Problem
    >>> g = Graph([Op(name=x, work=1.0, param_bytes=2.0, out_bytes=1.0) for x in "abc"], [("a", "b"), ("b", "c")])
    >>> segment_bound(Problem(g, Cluster.accelerators(2, memory=4.0, bandwidth=1.0), Makespan(), [Memory()]))[0]
    5.0
    """
    g = problem.graph
    if g.n == 0:
        return 0.0, "empty graph", True
    data = segment_data(problem)
    paths = candidate_paths(g, data)
    need = cells(paths, data)
    if need > MAX_CELLS:
        raise BudgetSpent(f"declined: cutting {len(paths)} paths of up to {max(map(len, paths))} ops would price "
                          f"about {need:.2g} runs (at most {MAX_CELLS:.0e})")
    best, which, done = 0.0, None, 0
    for p in paths:
        if deadline is not None and deadline.expired():
            break
        try:
            value = cut_path(p, data, deadline, g)
        except BudgetSpent:
            break
        done += 1
        if value > best or which is None:
            best, which = value, p
    if done == 0:
        raise BudgetSpent("budget spent before a path was cut")
    runs = "runs within capacity" if problem.has(Memory) else "no memory term"
    return best, f"cheapest cut of a {len(which)}-op path ({runs}; {done} of {len(paths)} paths priced)", \
        done == len(paths)
