"""Preprocessing for the DP over ideals (Tarnawski et al., NeurIPS 2020, App. B).

The DP walks ideals of a *forward* DAG whose nodes ("supernodes") carry everything that
must share a device. :func:`contract` builds it from a :class:`~placement_dsl.graph.Graph`:

1. **Colour classes per direction.** The forward ops of a colocation group become one
   supernode, its backward ops another (``C_FW`` and ``C_BW`` of App. B).
2. **Orphaned backward nodes.** A group with backward ops but no forward op gets an
   artificial forward image; for every backward edge ``(u', v')`` touching an orphan, the
   mirrored forward edge ``(v, u)`` between the images is added, so the images sit where the
   mirror of the backward pass puts them (no isolated nodes: those would multiply the ideal
   count by 2 each, footnote 7).
3. **Strongly connected components.** Contraction can close cycles (``u -> v -> w`` with
   ``u, w`` colocated); every colocation-respecting contiguous split keeps a strongly
   connected component together, so each is merged into one group.
4. **Zero-cost leaves.** A forward supernode with zero work, exactly one forward neighbour
   ``m`` (edge in either direction) and no backward neighbour is merged into ``m``'s group,
   repeatedly (the reference code's "trivial node optimization"). Moving such a leaf next to
   its only neighbour never raises a load: its work is zero and every tensor it touches stops
   crossing. We merge only when that argument is airtight, so the optimum is preserved:
   the leaf may run on every device kind, its backward part (if any) has zero work and
   touches only ``m`` and ``m``'s backward part, and if the leaf holds memory, the whole
   graph fits into the smallest device memory (so memory can never bind).

After contraction every op maps to a forward supernode (backward ops to the image of their
group): a contiguous set ``S`` of supernodes stands for the ops ``image^{-1}(S)``, forward
and backward together (§5.3). On the paper's workloads this reproduces the ideal counts of
Table 1 exactly (``tests/heuristics/test_ideals.py``).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ..graph import Graph, unique_pairs
from ..structure import orphan_mirrors
from .jit import njit
from .kernels import priority_order


class _UnionFind:
    """Union-find over group labels ``0..n-1`` (path halving)."""

    def __init__(self, n: int):
        self.parent = np.arange(n, dtype=np.int64)

    def find(self, a: int) -> int:
        p = self.parent
        while p[a] != a:
            p[a] = p[p[a]]
            a = int(p[a])
        return a

    def union(self, a: int, b: int) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.parent[ra] = rb
        return True

    def roots(self, labels: np.ndarray) -> np.ndarray:
        return np.fromiter((self.find(int(x)) for x in labels), dtype=np.int64, count=len(labels))


@dataclass(frozen=True)
class Contraction:
    """The forward DAG the DP runs on, and the map back to the original ops.

    Attributes
    ----------
    graph
        The original graph.
    image
        ``(n_ops,)`` supernode of every op; backward ops map to the forward supernode of
        their group (the supernode that carries them along in the DP).
    n_nodes
        Number of supernodes, numbered topologically (every edge has ``src < dst``).
    src, dst
        The DAG's edges (true and artificial, deduplicated).
    artificial
        ``(n_nodes,)`` True for supernodes that hold no forward op (images of orphans).
    rep
        ``(n_nodes,)`` a representative op of each supernode: the root of its merged group
        (a zero-cost leaf takes its neighbour's), used to break ties reproducibly.
    stats
        Counts of what each step did (groups, orphans, SCC merges, zero-cost merges).
    """

    graph: Graph
    image: np.ndarray
    n_nodes: int
    src: np.ndarray
    dst: np.ndarray
    artificial: np.ndarray
    rep: np.ndarray
    stats: dict[str, int] = field(default_factory=dict)

    def members(self, node: int) -> np.ndarray:
        """Op indices carried by supernode ``node`` (forward and backward)."""
        return np.flatnonzero(self.image == node)

    def lift(self, node_device: np.ndarray) -> np.ndarray:
        """Op -> device from supernode -> device."""
        return np.asarray(node_device, dtype=np.int64)[self.image]

    def with_edges(self, src: Iterable[int], dst: Iterable[int]) -> Contraction:
        """The same contraction with extra DAG edges (e.g. DPL's linearization path)."""
        s = np.concatenate([self.src, np.fromiter(src, np.int64)])
        d = np.concatenate([self.dst, np.fromiter(dst, np.int64)])
        pairs = unique_pairs(s, d)
        return Contraction(self.graph, self.image, self.n_nodes, pairs[:, 0].copy(), pairs[:, 1].copy(),
                           self.artificial, self.rep, dict(self.stats))


# ---------------------------------------------------------------------------- steps
def _orphan_images(graph: Graph, label: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Step 2: one artificial forward op per orphaned group, and the mirrored edges.

    Returns the augmented ``(label, backward)`` arrays (real ops first, then one virtual op
    per orphaned group) and the artificial edges ``(src, dst)`` between forward ops.
    """
    bw = graph.backward
    orphans, mirror_src, mirror_dst = orphan_mirrors(graph, label)
    n = graph.n
    aug_label = np.concatenate([label, orphans])
    aug_bw = np.concatenate([bw, np.zeros(len(orphans), bool)])
    rep = np.full(n, -1, dtype=np.int64)  # group label -> a forward op (real or virtual) of it
    fw_ops = np.flatnonzero(~aug_bw)
    rep[aug_label[fw_ops[::-1]]] = fw_ops[::-1]
    return aug_label, aug_bw, rep[mirror_src], rep[mirror_dst]


def _keys(uf: _UnionFind, label: np.ndarray, backward: np.ndarray) -> np.ndarray:
    """Supernode key of every (augmented) op: ``2 * group root + backward``."""
    return 2 * uf.roots(label) + backward.astype(np.int64)


def _merge_sccs(uf: _UnionFind, label: np.ndarray, backward: np.ndarray, src: np.ndarray, dst: np.ndarray) -> int:
    """Step 3: merge the groups of every strongly connected component of the forward graph."""
    key = _keys(uf, label, backward)
    fw = ~backward[src] & ~backward[dst] & (key[src] != key[dst])
    a, b = key[src[fw]], key[dst[fw]]
    nodes = np.unique(np.concatenate([a, b]))
    ia, ib = np.searchsorted(nodes, a), np.searchsorted(nodes, b)
    core = _cyclic_core(len(nodes), ia, ib)  # only these nodes can lie on a cycle
    keep = core[ia] & core[ib]
    if not keep.any():  # no cycle (the usual case): nothing to merge
        return 0
    import networkx as nx  # loaded only where groups make a cycle

    g = nx.DiGraph(zip(a[keep].tolist(), b[keep].tolist()))
    merged = 0
    for comp in nx.strongly_connected_components(g):
        comp = sorted(comp)
        for other in comp[1:]:
            merged += uf.union(other // 2, comp[0] // 2)
    return merged


def _zero_work(graph: Graph, kinds: Iterable[str]) -> np.ndarray:
    """Ops that take zero time on every kind in ``kinds`` (and may run on all of them)."""
    zero = np.ones(graph.n, bool)
    for kind in kinds:
        zero &= graph.work(kind) == 0.0
    return zero


def _merge_zero_leaves(uf: _UnionFind, label: np.ndarray, backward: np.ndarray, src: np.ndarray, dst: np.ndarray,
                       zero: np.ndarray, memory: np.ndarray, memory_never_binds: bool) -> int:
    """Step 4: merge zero-cost forward leaves into their only neighbour, to a fixpoint.

    All candidates of one round are merged at once; this reaches the same fixpoint as the
    one-at-a-time loop of the reference code (a candidate's only neighbour cannot itself
    lose its candidate status by another candidate's merge except in an isolated pair,
    where either direction gives the same union).
    """
    merged = 0
    while True:
        key = _keys(uf, label, backward)
        cut = key[src] != key[dst]
        pairs = unique_pairs(key[src[cut]], key[dst[cut]])
        nonzero = set(key[~zero].tolist())
        heavy = set(key[memory > 0].tolist())
        nbrs: dict[int, set[int]] = {}
        for a, b in pairs.tolist():
            nbrs.setdefault(a, set()).add(b)
            nbrs.setdefault(b, set()).add(a)
        fw_keys = np.unique(key[~backward])
        todo = []
        for x in fw_keys.tolist():
            m = _leaf_target(x, nbrs, nonzero, heavy, memory_never_binds)
            if m is not None:
                todo.append((x, m))
        changed = sum(uf.union(x // 2, m // 2) for x, m in todo)
        if not changed:
            return merged
        merged += changed


def _leaf_target(x: int, nbrs: dict[int, set[int]], nonzero: set[int], heavy: set[int],
                 memory_never_binds: bool) -> int | None:
    """The neighbour a zero-cost forward leaf ``x`` merges into, or None (see step 4)."""
    bx = x + 1  # x's backward part (key of the same group, backward flag set)
    if x in nonzero or bx in nonzero:
        return None
    near = nbrs.get(x, set())
    if len(near) != 1 or any(k % 2 for k in near):
        return None
    (m,) = near
    if not nbrs.get(bx, set()) <= {m, m + 1}:
        return None
    if (x in heavy or bx in heavy) and not memory_never_binds:
        return None
    return m


def successor_csr(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Successor lists of ``n`` nodes in CSR form."""
    by_src = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr, np.ascontiguousarray(dst[by_src], dtype=np.int64)


@njit(cache=True)
def _peel(n, ptr, idx, indeg, gone):
    """Remove the nodes of in-degree 0 (given as ``indeg``) repeatedly, marking them in ``gone``."""
    stack = np.empty(n, np.int64)
    top = 0
    for v in range(n):
        if indeg[v] == 0 and not gone[v]:
            stack[top] = v
            top += 1
    while top:
        top -= 1
        v = stack[top]
        gone[v] = True
        for e in range(ptr[v], ptr[v + 1]):
            w = idx[e]
            indeg[w] -= 1
            if indeg[w] == 0 and not gone[w]:
                stack[top] = w
                top += 1


def _cyclic_core(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Nodes left after peeling sources and sinks repeatedly (in ``O(n + m)``): every node on a cycle."""
    gone = np.zeros(n, dtype=np.bool_)
    _peel(n, *successor_csr(n, src, dst), np.bincount(dst, minlength=n).astype(np.int64), gone)
    _peel(n, *successor_csr(n, dst, src), np.bincount(src, minlength=n).astype(np.int64), gone)
    return ~gone


def smallest_first_order(n: int, ptr: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Kahn's algorithm taking the smallest ready node first; fewer than ``n`` nodes when there is a cycle."""
    indeg = np.bincount(idx, minlength=n).astype(np.int64)
    return priority_order(-np.arange(n, dtype=np.float64), ptr, idx, indeg)


def _topological_numbering(n_keys: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Position of every supernode in a topological order (smallest index first)."""
    order = smallest_first_order(n_keys, *successor_csr(n_keys, np.asarray(src, np.int64), np.asarray(dst, np.int64)))
    if len(order) != n_keys:
        import networkx as nx

        raise nx.NetworkXUnfeasible("graph contains a cycle")
    pos = np.empty(n_keys, dtype=np.int64)
    pos[order] = np.arange(n_keys)
    return pos


# ---------------------------------------------------------------------------- entry point
def contract(graph: Graph, *, kinds: Iterable[str] = (), memory: float = math.inf,
             merge_zero_cost: bool = True, pinned: Iterable[int] = ()) -> Contraction:
    """App. B preprocessing: the forward supernode DAG the DP over ideals runs on.

    Parameters
    ----------
    graph
        The computation graph (colocation groups in ``Op.group``, passes in ``Op.backward``).
    kinds
        Device kinds of the cluster; a zero-cost leaf is merged only if it takes zero time on
        (and so may run on) every one of them. Empty: no zero-cost merging.
    memory
        The smallest device memory; leaves that hold memory are merged only when the whole
        graph fits into it.
    merge_zero_cost
        Step 4 on/off.
    pinned
        Ops that may run on one device only (a pin): never merged as a zero-cost leaf, which may run anywhere.

    Examples
    --------
    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name="x", work=0), Op(name="a", work=1), Op(name="b", work=2),
    ...            Op(name="c", work=1, group="g"), Op(name="d", work=1, group="g")],
    ...           [("x", "a"), ("a", "b"), ("c", "b"), ("b", "d")])
    >>> con = contract(g, kinds=["*"])
    >>> con.n_nodes, [int(con.image[i]) for i in range(5)]  # x joins a; {c, b, d} is a cycle once c~d
    (2, [0, 0, 1, 1, 1])
    """
    kinds = list(kinds)
    label = graph.group_id.astype(np.int64).copy()
    aug_label, aug_bw, art_src, art_dst = _orphan_images(graph, label)
    src = np.concatenate([graph.src, art_src])
    dst = np.concatenate([graph.dst, art_dst])
    uf = _UnionFind(graph.n)
    stats = {"ops": graph.n, "groups": len(np.unique(label)), "orphaned_groups": len(aug_label) - graph.n,
             "artificial_edges": len(art_src)}
    stats["scc_merges"] = _merge_sccs(uf, aug_label, aug_bw, src, dst)
    stats["zero_cost_merges"] = 0
    if merge_zero_cost and kinds:
        virtual = len(aug_label) - graph.n
        zero = np.concatenate([_zero_work(graph, kinds), np.ones(virtual, bool)])
        zero[list(pinned)] = False  # its neighbour would follow it to its pin
        mem = np.concatenate([graph.param_bytes + graph.activation_bytes, np.zeros(virtual)])
        never_binds = float(mem.sum()) <= memory
        stats["zero_cost_merges"] = _merge_zero_leaves(uf, aug_label, aug_bw, src, dst, zero, mem, never_binds)
    return _finish(graph, uf, aug_label, aug_bw, src, dst, stats)


def _finish(graph: Graph, uf: _UnionFind, label: np.ndarray, backward: np.ndarray, src: np.ndarray,
            dst: np.ndarray, stats: dict[str, int]) -> Contraction:
    root = uf.roots(label)
    fw_roots = np.unique(root[~backward])
    node_of_root = dict(zip(fw_roots.tolist(), range(len(fw_roots))))
    node = np.fromiter((node_of_root[r] for r in root.tolist()), np.int64, count=len(root))
    fw_edge = ~backward[src] & ~backward[dst] & (node[src] != node[dst])
    s, d = node[src[fw_edge]], node[dst[fw_edge]]
    pos = _topological_numbering(len(fw_roots), s, d)
    node = pos[node]
    pairs = unique_pairs(pos[s], pos[d])
    real_fw = np.zeros(len(fw_roots), bool)
    real_fw[node[: graph.n][~graph.backward]] = True
    rep = np.empty(len(fw_roots), dtype=np.int64)
    rep[pos[np.arange(len(fw_roots))]] = fw_roots
    stats["nodes"] = len(fw_roots)
    stats["edges"] = len(pairs)
    return Contraction(graph, node[: graph.n].copy(), len(fw_roots), pairs[:, 0].copy(), pairs[:, 1].copy(),
                       ~real_fw, rep, stats)
