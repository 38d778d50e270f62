"""Structural facts of a graph on a cluster that formulations, bounds and heuristics share.

:class:`ChainData` contracts colocation groups and sums, for every group, the work of its
ancestors and descendants through forward edges (the facts behind the ancestor/descendant
cuts of :mod:`placement_dsl.bounds.combinatorial` and the chain formulation's templates);
:func:`orphan_mirrors` is Tarnawski et al.'s (NeurIPS 2020, App. B) rule for backward
groups without forward ops. Domain layer: numpy and networkx only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from .cluster import Cluster
from .errors import SpecError
from .graph import Graph, unique_pairs


def orphan_mirrors(graph: Graph, label: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Orphaned groups and the mirror images of their backward edges (Tarnawski App. B).

    ``label`` groups ops (colocation classes). A group with backward ops but no forward op is
    *orphaned*; each backward edge ``(u', v')`` between two groups, one of them orphaned, is
    mirrored to the group edge ``(label v', label u')`` — the forward edge ``(v, u)`` between
    the groups' forward images. Returns ``(orphans, mirror_src, mirror_dst)`` as group labels.
    """
    bw = graph.backward
    orphans = np.setdiff1d(np.unique(label[bw]), np.unique(label[~bw]))
    is_orphan = np.zeros(int(label.max()) + 1, bool)
    is_orphan[orphans] = True
    ls, ld = label[graph.src], label[graph.dst]
    sel = bw[graph.src] & bw[graph.dst] & (ls != ld) & (is_orphan[ls] | is_orphan[ld])
    return orphans, ld[sel], ls[sel]


@dataclass(frozen=True)
class ChainData:
    """Contracted-group data of a throughput instance for the DAG-ordered class.

    Attributes
    ----------
    group : (n,) int array
        Group index of every op (colocation groups contracted).
    acc_time, cpu_time, memory, work : (G,) float arrays
        Per-group accelerator time, CPU time (``inf`` without CPUs), bytes, and ``w_g``.
    chain_edges : (E, 2) int array
        Distinct forward edges between different groups (the precedence of the chain).
    ancestors, descendants : (G,) float arrays
        ``A_g`` and ``D_g`` (each includes ``w_g`` itself).
    k, l : int
        Numbers of accelerators and CPUs.
    rho : float
        ``max_g w_g / cpu_time_g`` (0 without CPUs).
    """

    group: np.ndarray
    acc_time: np.ndarray
    cpu_time: np.ndarray
    memory: np.ndarray
    work: np.ndarray
    chain_edges: np.ndarray
    ancestors: np.ndarray
    descendants: np.ndarray
    k: int
    l: int
    rho: float

    @property
    def size(self) -> int:
        """Number of groups ``G``."""
        return len(self.work)

    def tau(self) -> tuple[np.ndarray, np.ndarray]:
        """``(tau, tau_cpu)``: ``(G, k)`` accelerator and ``(G, k+1)`` CPU-gap load floors (module doc)."""
        slack = self.l * self.rho
        acc_pos = np.arange(1, self.k + 1, dtype=float)
        tau = np.maximum(_ratio(self.ancestors, acc_pos + slack), _ratio(self.descendants, self.k - acc_pos + 1 + slack))
        tau = np.maximum(tau, self.acc_time[:, None])
        if self.l == 0:
            return tau, np.full((self.size, self.k + 1), math.inf)
        gap = np.arange(1, self.k + 2, dtype=float)
        tau_cpu = np.maximum(_ratio(self.ancestors, gap - 1 + slack), _ratio(self.descendants, self.k - gap + 1 + slack))
        return tau, np.maximum(tau_cpu, self.cpu_time[:, None])


def _ratio(total: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """``total[:, None] / capacity[None, :]`` with ``x / 0 = inf`` for ``x > 0`` and ``0 / 0 = 0``."""
    num = np.broadcast_to(total[:, None], (len(total), len(capacity)))
    den = np.broadcast_to(capacity[None, :], num.shape)
    out = np.where(num > 0, math.inf, 0.0)
    np.divide(num, den, out=out, where=den > 0)
    return out


def device_split(cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
    """Accelerator and CPU indices; :class:`SpecError` unless the devices of each are identical."""
    acc, cpu = np.flatnonzero(~cluster.host), np.flatnonzero(cluster.host)
    for name, idx in (("accelerators", acc), ("CPUs", cpu)):
        if len({(cluster.devices[i].kind, cluster.speed[i], cluster.memory[i], cluster.bandwidth[i]) for i in idx}) > 1:
            raise SpecError(f"chain bounds need identical {name}; got devices "
                            f"{[cluster.names[i] for i in idx]} with different kind, speed, memory or bandwidth")
    return acc, cpu


def _reach_sums(n_groups: int, edges: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weights of ancestors/descendants (inclusive) of every node; cycles collapse to one node."""
    import networkx as nx  # here, not at import: the DP's contraction imports this module and never needs it

    dag = nx.DiGraph()
    dag.add_nodes_from(range(n_groups))
    dag.add_edges_from(map(tuple, edges.tolist()))
    cond = nx.condensation(dag)
    comp = np.array([cond.graph["mapping"][v] for v in range(n_groups)], dtype=np.int64)
    comp_w = np.bincount(comp, weights=weight, minlength=len(cond))
    order = list(nx.topological_sort(cond))
    out = []
    for nodes, neighbours in ((order, cond.predecessors), (order[::-1], cond.successors)):
        sets: dict[int, int] = {}
        for c in nodes:
            bits = 1 << c
            for p in neighbours(c):
                bits |= sets[p]
            sets[c] = bits
        total = np.array([_bit_sum(sets[c], comp_w) for c in range(len(cond))])
        out.append(total[comp])
    return out[0], out[1]


def _bit_sum(bits: int, weight: np.ndarray) -> float:
    raw = np.frombuffer(bits.to_bytes((len(weight) + 7) // 8, "little"), dtype=np.uint8)
    mask = np.unpackbits(raw, bitorder="little")[: len(weight)].astype(bool)
    return float(weight[mask].sum())


def _class_time(times: np.ndarray, members: np.ndarray) -> np.ndarray:
    """Each op's time on a class of devices: on its first member, else (a pinned op) on the member it may run on."""
    first = times[:, members[0]]
    return np.where(np.isfinite(first), first, times[:, members].min(axis=1))


def chain_data(graph: Graph, cluster: Cluster) -> ChainData:
    """Contract colocation groups and compute ``A_g``, ``D_g``, ``rho`` (see the module doc)."""
    acc, cpu = device_split(cluster)
    if len(acc) == 0:
        raise SpecError("chain bounds need at least one accelerator (non-host device)")
    group = np.unique(graph.group_id, return_inverse=True)[1].astype(np.int64)
    n_groups = int(group.max()) + 1
    times = cluster.times(graph)
    acc_time = np.bincount(group, weights=_class_time(times, acc), minlength=n_groups)
    cpu_time = (np.bincount(group, weights=_class_time(times, cpu), minlength=n_groups) if len(cpu)
                else np.full(n_groups, math.inf))
    memory = np.bincount(group, weights=graph.param_bytes + graph.activation_bytes, minlength=n_groups)
    work = np.minimum(acc_time, cpu_time)
    if not np.isfinite(work).all():
        bad = graph.names[int(np.flatnonzero(~np.isfinite(work[group]))[0])]
        raise SpecError(f"op {bad!r} can run on no device of the cluster; allow a device kind for it")
    rho = 0.0
    if len(cpu):
        positive = cpu_time > 0
        rho = float(np.max(work[positive] / cpu_time[positive], initial=0.0))
        if (~positive & (work > 0)).any():
            rho = 1.0
    fw = ~graph.backward
    keep = fw[graph.src] & fw[graph.dst] & (group[graph.src] != group[graph.dst])
    edges = unique_pairs(group[graph.src[keep]], group[graph.dst[keep]])
    anc, desc = _reach_sums(n_groups, edges, work)
    return ChainData(group, acc_time, cpu_time, memory, work, _with_orphan_mirrors(graph, group, edges),
                     anc, desc, len(acc), len(cpu), rho)


def _with_orphan_mirrors(graph: Graph, group: np.ndarray, forward: np.ndarray) -> np.ndarray:
    """Forward group edges plus the mirror images of backward edges that touch an orphan group.

    A group with no forward op (an *orphaned* backward node, Tarnawski App. B) is placed by
    the DP through an artificial forward image wired as the mirror of its backward edges:
    backward edge ``(u', v')`` becomes forward edge ``(v, u)``. Ordering those mirrored
    edges keeps the chain in the DP's class (and orphans' backward parts contiguous). The
    ancestor/descendant sums use forward edges only, so they stay valid lower bounds.
    """
    _, mirror_src, mirror_dst = orphan_mirrors(graph, group)
    if not mirror_src.size:
        return forward
    both = np.concatenate([forward, np.stack([mirror_src, mirror_dst], axis=1).astype(np.int64)])
    return unique_pairs(both[:, 0], both[:, 1])


def few_ideals(graph: Graph, limit: int, max_ops: float = math.inf) -> bool:
    """Whether ``graph`` has at most ``limit`` ideals (down-closed op sets), counted by :func:`ideal_masks`, which
    stops at ``limit + 1``: ``O(limit * (n + m))`` steps, and ``False`` at once beyond ``max_ops`` ops. The DP over
    ideals runs on a contraction of the graph, whose ideals are fewer.

    >>> from placement_dsl.graph import Graph, Op
    >>> chain = Graph([Op(name=f"v{i}", work=1) for i in range(4)], [(f"v{i}", f"v{i + 1}") for i in range(3)])
    >>> few_ideals(chain, 5), few_ideals(chain, 4)
    (True, False)
    """
    if graph.n > max_ops:
        return False
    succ = [graph.successors(v).tolist() for v in range(graph.n)]
    pred = [graph.predecessors(v).tolist() for v in range(graph.n)]
    return ideal_masks(succ, pred, limit) is not None


def ideal_masks(succ: list[list[int]], pred: list[list[int]], cap: int) -> list[int] | None:
    """Every ideal (a node set closed under predecessors) of the DAG given by its successor and predecessor lists, as
    a bit mask, smallest first, the empty one included, if there are at most ``cap``; else ``None`` (found once the
    count passes ``cap``). Each ideal grows by the nodes all of whose predecessors it holds (kept per ideal, so a
    step costs its ready nodes and their successors, not a pass over the DAG).

    >>> chain = ([[1], [2], []], [[], [0], [1]])
    >>> ideal_masks(*chain, cap=4), ideal_masks(*chain, cap=3)
    ([0, 1, 3, 7], None)
    """
    start = frozenset(x for x in range(len(pred)) if not pred[x])
    seen, frontier = {0}, [(0, start)]
    while frontier:
        grown = []
        for ideal, ready in frontier:
            for x in ready:
                bigger = ideal | 1 << x
                if bigger in seen:
                    continue
                seen.add(bigger)
                if len(seen) > cap:
                    return None
                new = [y for y in succ[x] if all(bigger >> z & 1 for z in pred[y])]
                grown.append((bigger, (ready - {x}) | frozenset(new)))
        frontier = grown
    return sorted(seen, key=lambda i: (i.bit_count(), i))



def count_ideals(pred: list[list[int]], cap: float = math.inf, work: float = math.inf) -> tuple[int, bool]:
    """The number of ideals (node sets closed under predecessors, the empty one included) of the DAG given by its
    predecessor lists, and whether it is exact: ``(count, True)``, or ``(at_least, False)`` once the count passes
    ``cap`` or the patterns visited pass ``work``.

    Nothing is enumerated: the nodes are decided in a topological order, and the ideals of the nodes decided so far
    are counted by their pattern on the frontier (the decided nodes with a successor still to decide), the only part
    a later node's choice reads. Each pattern is an ideal of the whole DAG (a down-closed set of decided nodes), so
    the patterns of a step are never more than the ideals, and the count so far is a lower bound. ``O(s * (n + m))``
    steps for at most ``s`` patterns a step (``s <= 2 ** w`` on a frontier of ``w`` nodes: a transformer layer's
    few branches, not its nodes), bounded by ``work`` patterns in all.

    >>> chain, diamond = [[], [0], [1]], [[], [0], [0], [1, 2]]
    >>> count_ideals(chain), count_ideals(chain, cap=3), count_ideals(diamond)
    ((4, True), (4, False), (6, True))
    """
    n = len(pred)
    succ: list[list[int]] = [[] for _ in range(n)]
    for v, us in enumerate(pred):
        for u in us:
            succ[u].append(v)
    missing = [len(us) for us in pred]
    order = [v for v in range(n) if not missing[v]]
    for v in order:  # Kahn's order; it grows while it is read
        for x in succ[v]:
            missing[x] -= 1
            if not missing[x]:
                order.append(x)
    if len(order) != n:
        raise ValueError("count_ideals: the graph has a cycle")
    position = [0] * n
    for i, v in enumerate(order):
        position[v] = i
    leaving = [0] * n  # by position: the frontier nodes whose last successor is decided there
    for v in range(n):
        if succ[v]:
            leaving[max(position[x] for x in succ[v])] |= 1 << v
    patterns, total, visited = {0: 1}, 1, 0
    for i, v in enumerate(order):
        if total > cap or visited > work:
            return total, False
        need = sum(1 << u for u in set(pred[v]))
        keep, bit = ~leaving[i], (1 << v if succ[v] else 0)
        grown: dict[int, int] = {}
        for key, count in patterns.items():
            out = key & keep
            grown[out] = grown.get(out, 0) + count
            if key & need == need:
                taken = (key | bit) & keep
                grown[taken] = grown.get(taken, 0) + count
                total += count
        visited += len(patterns)
        patterns = grown
    return total, total <= cap


def cut_ops(graph: Graph) -> np.ndarray:
    """The ops comparable with all others (every op precedes or follows them), in topological order: ``O(n + m)``
    along ``graph.topo`` (an op at position ``i`` is comparable with all when no edge jumps over ``i``)."""
    n = graph.n
    pos = np.empty(n, dtype=np.int64)
    pos[graph.topo] = np.arange(n)
    first_succ = np.full(n, n, dtype=np.int64)
    np.minimum.at(first_succ, graph.src, pos[graph.dst])
    last_pred = np.full(n, -1, dtype=np.int64)
    np.maximum.at(last_pred, graph.dst, pos[graph.src])
    before = np.maximum.accumulate(np.concatenate([[-1], first_succ[graph.topo][:-1]]))
    after = np.minimum.accumulate(np.concatenate([last_pred[graph.topo][1:], [n]])[::-1])[::-1]
    at = np.arange(n)
    return graph.topo[(before <= at) & (after >= at)]


def cut_segments(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """The cut ops (:func:`cut_ops`) and, per op, its segment: how many cut ops precede it (a cut op's own index
    among them); an op comparable with every cut op follows exactly those before it in the topological order."""
    cuts = cut_ops(graph)
    pos = np.empty(graph.n, dtype=np.int64)
    pos[graph.topo] = np.arange(graph.n)
    return cuts, np.searchsorted(pos[cuts], pos, side="left")


def disjoint_paths(graph: Graph, a: int, b: int, inside: np.ndarray) -> list[np.ndarray]:
    """Vertex-disjoint paths from ``a`` to ``b`` through the ops where ``inside`` holds, their interiors in order
    (greedy: one depth-first search per successor of ``a`` over the ops no earlier path used); an edge ``a -> b`` is
    an empty interior."""
    used = np.zeros(graph.n, dtype=bool)
    found: list[np.ndarray] = []
    for s in graph.successors(a).tolist():
        if s == b:
            found.append(np.empty(0, dtype=np.int64))
            continue
        if not inside[s] or used[s]:
            continue
        path = _path_to(graph, s, b, inside, used)
        if path is not None:
            used[path] = True
            found.append(np.asarray(path, dtype=np.int64))
    return found


def _path_to(graph: Graph, s: int, b: int, inside: np.ndarray, used: np.ndarray) -> list[int] | None:
    """A path from ``s`` to ``b`` over unused inside ops (the ops it leads through, ``b`` left out); ops found to
    lead nowhere are marked used, as no later search can do better through them."""
    stack, back = [s], {s: -1}
    while stack:
        v = stack.pop()
        for w in graph.successors(v).tolist():
            if w == b:
                path = [v]
                while back[path[-1]] >= 0:
                    path.append(back[path[-1]])
                return path[::-1]
            if inside[w] and not used[w] and w not in back:
                back[w] = v
                stack.append(w)
    used[list(back)] = True
    return None


def one_order(graph: Any) -> bool:
    """Whether an inference graph has one topological order (each op's successor in it is one of its consumers, a
    chain with skips): then a contiguous set is an interval of that order and every contiguous split a chain of
    ideals, so the contiguous class is the DP class."""
    if graph.is_training or graph.n < 2:
        return not graph.is_training
    topo = graph.topo
    edges = set(zip(graph.src.tolist(), graph.dst.tolist()))
    return all(pair in edges for pair in pairwise(topo.tolist()))


def longest_run(graph: Graph) -> int:
    """Ops on the longest path: an accelerator never needs more than ``ceil(run / 2)`` subgraphs."""
    depth = np.ones(graph.n, dtype=np.int64)
    for v in graph.topo.tolist():
        preds = graph.predecessors(v)
        if preds.size:
            depth[v] += depth[preds].max()
    return int(depth.max(initial=0))
