"""Computation graphs: ops with costs, and producer -> consumer data-flow edges.

A :class:`Graph` is validated on construction and immutable afterwards. It exposes numpy
arrays (topological order, CSR successors/predecessors, cost vectors) for the fast
algorithms and a networkx view for graph algorithms.

Cost conventions (Archer et al. eq. 1; Tarnawski et al. §3):

* ``work[kind]`` is the op's running time on a device of that kind (at speed 1). A kind
  missing from ``work`` means the op cannot run there; the key ``"*"`` gives a default
  for every kind.
* ``out_bytes`` is the size of the op's single output tensor. The tensor is paid for once
  per device boundary it crosses, however many consumers it has there. Dividing by a
  device's bandwidth gives a time; formats that state transfer *times* (Tarnawski's
  ``cost``) store them here with unit bandwidth.
* ``param_bytes`` and ``activation_bytes`` count toward a device's memory.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from numbers import Integral
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import SpecError
from .limits import FIELD, MAX_TOTAL, REQUIRED, Validated, amount, construct, field, mapping, total_ok
from .limits import name as name_text

if TYPE_CHECKING:
    import networkx as nx

DEFAULT_KIND = "*"


def _work(value: Any) -> dict[str, float]:
    if isinstance(value, (int, float)):
        value = {DEFAULT_KIND: value}
    if not isinstance(value, Mapping) or not value:
        raise ValueError("work must be a number or a non-empty mapping kind -> time")
    return {str(k): v if type(v) is float and 0 <= v <= MAX_TOTAL else  # a time read from JSON, as amount() takes it
            amount(v, f"work[{k!r}]", wording=FIELD, error=ValueError) for k, v in value.items()}


def _nonneg(what: str) -> Any:
    return lambda value: (value if type(value) is float and 0 <= value <= MAX_TOTAL else  # as amount() takes it
                          amount(value, what, wording=FIELD, error=ValueError))


def _flag(value: Any) -> bool:
    if not isinstance(value, bool) and value not in (0, 1):
        raise ValueError(f"backward must be true or false (or 0/1), got {value!r:.40}")
    return bool(value)


def _group(value: Any) -> str | None:
    return None if value is None else str(value)


PINNED = "pinned_to"  # an op attribute: the one device the op may run on (a folded Pin term)

class Op(Validated):
    """One operator (or layer) of a computation graph."""

    name: str = field(REQUIRED, name_text, description="unique op name")
    work: dict[str, float] = field(check=_work, factory=lambda: {DEFAULT_KIND: 0.0},
                                   description="running time per device kind; a missing kind means not allowed there")
    param_bytes: float = field(0.0, _nonneg("param_bytes"), description="parameter (weight) memory")
    out_bytes: float = field(0.0, _nonneg("out_bytes"),
                             description="size of the output tensor (paid once per boundary)")
    activation_bytes: float = field(0.0, _nonneg("activation_bytes"),
                                    description="activation memory held while the op's stage runs")
    backward: bool = field(False, _flag, description="part of the backward pass of a training graph")
    group: str | None = field(None, _group, description="colocation group: ops sharing it share a device")
    attrs: dict[str, Any] = field(check=mapping, factory=dict, description="free-form attributes")

    def time_on(self, kind: str) -> float:
        """Running time on a device of ``kind`` at speed 1 (``inf`` if not allowed)."""
        if kind in self.work:
            return self.work[kind]
        return self.work.get(DEFAULT_KIND, math.inf)


def _as_op(item: Op | Mapping[str, Any], position: int) -> Op:
    return construct(Op, item, "op", position)


def _end(value: Any, position: int) -> str:
    """An edge's end: an op name (a string, or an integer id written as one)."""
    if isinstance(value, bool) or not isinstance(value, (str, Integral)):
        raise SpecError(f"edge #{position}: an end must be an op name, got {type(value).__name__} {value!r:.40}")
    return str(value)


def _as_edge(item: Any, position: int) -> tuple[str, str]:
    if type(item) is list and len(item) == 2 and type(item[0]) is str and type(item[1]) is str:  # JSON's pair
        return item[0], item[1]
    if isinstance(item, Mapping):
        try:
            return _end(item["src"], position), _end(item["dst"], position)
        except KeyError:
            raise SpecError(f"edge #{position}: mapping needs 'src' and 'dst', got {dict(item)!r:.80}") from None
    if isinstance(item, (str, bytes)) or not isinstance(item, Iterable):  # a string 'ab' is not the pair a -> b
        raise SpecError(f"edge #{position}: expected a (src, dst) pair, got {item!r:.80}")
    pair = list(item)
    if len(pair) != 2:
        raise SpecError(f"edge #{position}: expected a (src, dst) pair, got {item!r:.80}")
    return _end(pair[0], position), _end(pair[1], position)


def _items(value: Any, what: str, graph: str) -> list[Any]:
    """``value`` as a list of items; a string, a mapping, a number or ``None`` is refused."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise SpecError(f"graph {graph!r}: {what} must be a list, got {type(value).__name__} {value!r:.40}")
    return list(value)


def _readonly(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


def unique_pairs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The distinct pairs ``(a[i], b[i])`` of two integer arrays, sorted by ``a`` then ``b``, as ``(k, 2)`` int64 rows:
    ``np.unique(np.stack([a, b], axis=1), axis=0)`` through one integer key per pair, as ``np.unique``'s row mode (a
    structured view per call) cost the cost model a third of its time on small graphs.

    >>> unique_pairs(np.array([2, 0, 2, 0]), np.array([1, 3, 1, -1])).tolist()
    [[0, -1], [0, 3], [2, 1]]
    """
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if not a.size:
        return np.empty((0, 2), dtype=np.int64)
    a0, b0 = int(a.min()), int(b.min())
    m = int(b.max()) - b0 + 1
    key = np.unique((a - a0) * m + (b - b0))
    return np.stack([key // m + a0, key % m + b0], axis=1)


def _csr(keys: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return _readonly(ptr), _readonly(values[order].astype(np.int64))


class Graph:
    """An immutable, validated computation graph.

    Parameters
    ----------
    ops
        :class:`Op` objects or mappings with the same fields.
    edges
        ``(producer, consumer)`` name pairs, or mappings with ``src``/``dst``.
        Duplicate edges are merged.
    name
        A label used in messages and files.

    Examples
    --------
    >>> g = Graph([Op(name="a", work=1.0, out_bytes=4), Op(name="b", work=2.0)], [("a", "b")])
    >>> g.n, g.m, [g.names[i] for i in g.topo]
    (2, 1, ['a', 'b'])
    """

    def __init__(self, ops: Iterable[Op | Mapping[str, Any]], edges: Iterable[Any] = (), name: str = "graph"):
        self.name = str(name)
        self.ops: tuple[Op, ...] = tuple(_as_op(o, i) for i, o in enumerate(_items(ops, "ops", self.name)))
        if not self.ops:
            raise SpecError(f"graph {self.name!r} has no ops; add at least one op")
        self.index: dict[str, int] = {}
        for i, op in enumerate(self.ops):
            if op.name in self.index:
                raise SpecError(f"graph {self.name!r}: duplicate op name {op.name!r}; op names must be unique")
            self.index[op.name] = i
        self.names: tuple[str, ...] = tuple(op.name for op in self.ops)
        pairs = [_as_edge(e, i) for i, e in enumerate(_items(edges, "edges", self.name))]
        self.src, self.dst = self._edge_arrays(pairs)
        self.succ_ptr, self.succ_idx = _csr(self.src, self.dst, self.n)
        self.pred_ptr, self.pred_idx = _csr(self.dst, self.src, self.n)
        self.topo = self._topological_order()
        rank = np.empty(self.n, dtype=np.int64)
        rank[self.topo] = np.arange(self.n)
        self.rank = _readonly(rank)
        self.param_bytes = self._vector("param_bytes")
        self.out_bytes = self._vector("out_bytes")
        self.activation_bytes = self._vector("activation_bytes")
        self.backward = _readonly(np.array([op.backward for op in self.ops], dtype=bool))
        self.group_id = self._group_ids()
        self._check_totals()

    # ------------------------------------------------------------------ construction
    def _edge_arrays(self, pairs: list[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
        index = self.index
        try:
            idx = np.array([(index[u], index[v]) for u, v in pairs], dtype=np.int64).reshape(len(pairs), 2)
        except KeyError:
            u, v = next((u, v) for u, v in pairs if u not in index or v not in index)
            raise SpecError(f"graph {self.name!r}: edge {u!r} -> {v!r} names unknown op "
                            f"{u if u not in index else v!r} (dangling edge)") from None
        loop = np.flatnonzero(idx[:, 0] == idx[:, 1])
        if loop.size:
            raise SpecError(f"graph {self.name!r}: self-loop on op {pairs[loop[0]][0]!r}; a computation graph must "
                            "be acyclic")
        idx = np.unique(idx, axis=0) if len(idx) else idx
        return _readonly(idx[:, 0].copy()), _readonly(idx[:, 1].copy())

    def _topological_order(self) -> np.ndarray:
        indeg = np.bincount(self.dst, minlength=self.n).tolist()  # lists: a numpy scalar a step costs 4x
        ptr, succ = self.succ_ptr.tolist(), self.succ_idx.tolist()
        order: list[int] = []
        stack = [v for v in range(self.n - 1, -1, -1) if indeg[v] == 0]
        while stack:
            u = stack.pop()
            order.append(u)
            for v in succ[ptr[u]:ptr[u + 1]]:
                indeg[v] -= 1
                if indeg[v] == 0:
                    stack.append(v)
        count = len(order)
        if count < self.n:
            indeg = np.array(indeg)
            rest = [int(i) for i in np.flatnonzero(indeg > 0)]
            import networkx as nx  # only to name a cycle: a valid graph's reading never loads it

            sub = nx.DiGraph((int(u), int(v)) for u, v in zip(self.src, self.dst) if indeg[u] > 0 and indeg[v] > 0)
            sub.add_nodes_from(rest)
            cycle = [self.names[u] for u, _ in nx.find_cycle(sub)]
            raise SpecError(f"graph {self.name!r} has a cycle{_cycle_text(cycle)}; computation graphs must be DAGs")
        return _readonly(np.array(order, dtype=np.int64))

    def _check_totals(self) -> None:
        """Refuse costs whose totals over the graph leave the sane range (:mod:`placement_dsl.limits`),
        naming the largest op: sums, loads and big-M constants of such a graph would overflow."""
        columns = {"param_bytes + activation_bytes": self.param_bytes + self.activation_bytes,
                   "out_bytes": self.out_bytes}
        totals: dict[str, float] = {}  # one pass over the ops' work (a column per kind only to name the largest)
        for op in self.ops:
            for kind, value in op.work.items():
                totals[kind] = totals.get(kind, 0.0) + value
        for kind in sorted(k for k, total in totals.items() if not total_ok(total)):
            columns[f"work[{kind!r}]"] = np.array([op.work.get(kind, 0.0) for op in self.ops])
        for what, values in columns.items():
            total = float(np.sum(values))
            if not total_ok(total):
                big = int(np.argmax(values))
                raise SpecError(f"graph {self.name!r}: the ops' {what} add up to {total:.3g}, beyond {MAX_TOTAL:g}; "
                                f"the largest is op {self.names[big]!r} with {values[big]:.3g}; give costs in a "
                                "larger unit")

    def _vector(self, field: str) -> np.ndarray:
        return _readonly(np.array([getattr(op, field) for op in self.ops], dtype=float))

    def _group_ids(self) -> np.ndarray:
        ids: dict[str, int] = {}
        out = np.arange(self.n, dtype=np.int64)
        for i, op in enumerate(self.ops):
            if op.group is not None:
                out[i] = ids.setdefault(op.group, i)
        return _readonly(out)

    # ------------------------------------------------------------------ views
    @property
    def n(self) -> int:
        """Number of ops."""
        return len(self.ops)

    @property
    def m(self) -> int:
        """Number of (deduplicated) edges."""
        return len(self.src)

    @cached_property
    def kinds(self) -> frozenset[str]:
        """Device kinds named explicitly in some op's ``work``."""
        return frozenset(k for op in self.ops for k in op.work if k != DEFAULT_KIND)

    @cached_property
    def pinned(self) -> dict[int, str]:
        """``{op index: device name}``: ops that may run on one device only (``attrs[PINNED]``, where a
        :class:`~placement_dsl.constraints.Pin` term folds itself in); :meth:`Cluster.times
        <placement_dsl.cluster.Cluster.times>` forbids them every other device."""
        return {i: str(op.attrs[PINNED]) for i, op in enumerate(self.ops) if PINNED in op.attrs}

    def work(self, kind: str) -> np.ndarray:
        """Running times on a device of ``kind`` (``inf`` where an op may not run there)."""
        return self._work_cache(kind)

    def _work_cache(self, kind: str) -> np.ndarray:
        cache = self.__dict__.setdefault("_works", {})
        if kind not in cache:
            cache[kind] = _readonly(np.array([op.time_on(kind) for op in self.ops], dtype=float))
        return cache[kind]

    def successors(self, i: int) -> np.ndarray:
        return self.succ_idx[self.succ_ptr[i] : self.succ_ptr[i + 1]]

    def predecessors(self, i: int) -> np.ndarray:
        return self.pred_idx[self.pred_ptr[i] : self.pred_ptr[i + 1]]

    @cached_property
    def predecessor_lists(self) -> tuple[list[int], ...]:
        """Each op's predecessors as a list of Python ints (read-only by convention): the tables of the Python
        loops over the graph (list scheduling, the contiguity check), built once per graph instead of once per
        schedule (64,000 slices of the CSR took 0.1-0.3 s of CPU per schedule of a 20,000-task sheet)."""
        idx, ptr = self.pred_idx.tolist(), self.pred_ptr.tolist()
        return tuple(idx[ptr[v]:ptr[v + 1]] for v in range(self.n))

    def longest(self, weight: np.ndarray, ops: np.ndarray | None = None) -> float:
        """The length of the longest path under op weights ``weight`` (every op as soon as its inputs end), over the
        whole graph or the subgraph ``ops`` induces (given in topological order)."""
        finish = np.zeros(self.n)  # an op outside ``ops`` is never reached: it adds 0 to a path
        for v in (self.topo if ops is None else ops).tolist():
            preds = self.predecessors(v)
            finish[v] = finish[preds].max(initial=0.0) + weight[v]
        return float(finish.max(initial=0.0))

    @cached_property
    def groups(self) -> tuple[np.ndarray, ...]:
        """Colocation groups with two or more ops, as arrays of op indices."""
        _, inverse, counts = np.unique(self.group_id, return_inverse=True, return_counts=True)
        order = np.argsort(inverse, kind="stable")
        bounds = np.cumsum(counts)[:-1]
        return tuple(_readonly(g) for g in np.split(order, bounds) if len(g) > 1)

    @cached_property
    def is_training(self) -> bool:
        """True when the graph has backward ops."""
        return bool(self.backward.any())

    def to_networkx(self) -> nx.DiGraph:
        """A networkx view with op names as nodes and the :class:`Op` under key ``op``."""
        import networkx as nx

        g = nx.DiGraph(name=self.name)
        g.add_nodes_from((op.name, {"op": op}) for op in self.ops)
        g.add_edges_from((self.names[u], self.names[v]) for u, v in zip(self.src, self.dst))
        return g

    @cached_property
    def program_order(self) -> np.ndarray:
        """The ops in program order: the op order (an importer's execution order) where it is topological, else the
        topological order nearest to it (Kahn's algorithm taking the ready op of least index first).

        >>> Graph([Op(name="b", work=1.0), Op(name="a", work=1.0)], [("a", "b")]).program_order.tolist()
        [1, 0]
        """
        return _readonly(np.array(least_first_order(self.n, zip(self.src.tolist(), self.dst.tolist())),
                                  dtype=np.int64))

    @cached_property
    def edges(self) -> tuple[tuple[str, str], ...]:
        """Edges as name pairs."""
        return tuple((self.names[u], self.names[v]) for u, v in zip(self.src, self.dst))

    def without_edges(self, drop: np.ndarray) -> Graph:
        """A copy without the edges where ``drop`` (one bool per edge) is true, in O(n + m): the ops, their
        topological order and groups stay (an order of a DAG is one of every subgraph).

        >>> g = Graph([Op(name="a", work=1.0), Op(name="b", work=1.0)], [("a", "b")])
        >>> g.without_edges(np.array([True])).m
        0
        """
        keep = ~np.asarray(drop, dtype=bool)
        out = object.__new__(Graph)
        made_of_edges = ("edges", "program_order", "predecessor_lists")
        out.__dict__.update({k: v for k, v in self.__dict__.items() if k not in made_of_edges})
        out.src, out.dst = _readonly(self.src[keep]), _readonly(self.dst[keep])
        out.succ_ptr, out.succ_idx = _csr(out.src, out.dst, self.n)
        out.pred_ptr, out.pred_idx = _csr(out.dst, out.src, self.n)
        return out

    def replace(self, **changes: Any) -> Graph:
        """A copy with ops and/or edges replaced (``ops=``, ``edges=``, ``name=``)."""
        return Graph(changes.get("ops", self.ops), changes.get("edges", self.edges), changes.get("name", self.name))

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, n={self.n}, m={self.m}{', training' if self.is_training else ''})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Graph) and self.ops == other.ops and set(self.edges) == set(other.edges)

    def __hash__(self) -> int:
        return hash((self.name, self.n, self.m))


def _cycle_text(cycle: Sequence[str], shown: int = 6) -> str:
    """A cycle of op names for a one-line message: all of it when short, else its first ``shown`` ops and the count.

    >>> _cycle_text(["a", "b"])
    ': a -> b -> a'
    >>> _cycle_text([str(i) for i in range(100)])
    ' of 100 ops: 0 -> 1 -> 2 -> 3 -> 4 -> 5 -> ... -> 0'
    """
    if len(cycle) <= shown + 2:
        return ": " + " -> ".join([*cycle, cycle[0]])
    return f" of {len(cycle)} ops: {' -> '.join(cycle[:shown])} -> ... -> {cycle[0]}"


def least_first_order(n: int, edges: Iterable[tuple[int, int]], key: Sequence[Any] | None = None) -> list[int]:
    """Kahn's algorithm over nodes ``0..n-1`` and ``edges``, always taking the ready node of least ``key[node]``
    (default: its index); nodes on a cycle of ``edges`` are left out.

    >>> least_first_order(4, [(2, 0), (3, 1)], key=[0, 0, 1, 0])
    [3, 1, 2, 0]
    """
    keys = list(range(n)) if key is None else list(key)
    indeg = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, w in edges:
        succ[u].append(w)
        indeg[w] += 1
    ready = [(keys[v], v) for v in range(n) if indeg[v] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        v = heapq.heappop(ready)[1]
        out.append(v)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(ready, (keys[w], w))
    return out


def last_first_order(succ: Sequence[Sequence[int]], indeg: Any, ready: list[int]) -> list[int]:
    """Kahn's algorithm taking the ready node found last first (depth first): from ``ready`` (the nodes without
    predecessors, the last one taken first), each node's successors ``succ[node]`` made ready in their order once
    their last predecessor is taken. ``indeg`` (a list or array of in-degrees) is counted down in place: the nodes
    it leaves above 0 lie on or behind a cycle and are left out of the order.

    >>> last_first_order([[2], [2], []], [0, 0, 2], [0, 1])
    [1, 0, 2]
    """
    out = []
    while ready:
        v = ready.pop()
        out.append(v)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    return out


def union_roots(n: int, pairs: Iterable[tuple[int, int]]) -> list[int]:
    """Union-find over ``0 .. n - 1``: each element's root after joining every pair ``(a, b)`` in order (``a``'s
    root put under ``b``'s, paths halved)."""
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in pairs:
        parent[root(a)] = root(b)
    return [root(i) for i in range(n)]
