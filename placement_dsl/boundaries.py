"""Stage boundaries only between modules, in program order: stages a runtime can cut.

A pipeline runtime splits a model's program between modules (``torch.distributed.pipelining``
split points, Megatron's layers; see :mod:`placement_dsl.export`): a stage is a run of whole
modules *in the order the program calls them*. :class:`Boundaries` writes that as a term of two
parts:

* **units**: the ops of each module at ``depth`` dotted parts of their path (``op.attrs["module"]``,
  set by the ONNX and ``torch.export`` importers) share a device (a :class:`~.constraints.Colocate`);
  ops of no module and a container's own glue ops (a reshape between its children, whose path is
  shorter than ``depth`` and encloses other modules) are units of one op;
* **spans**: where a container's own op (a residual add) reads a tensor made earlier inside it, no
  boundary falls between the two (:meth:`Boundaries.spans`): a runtime cannot cut a module's forward
  there;
* **a chain of units**: consecutive forward ops of different units in program order (the graph's
  op order, the exporter's execution order, where it is topological) get an edge
  (:meth:`Boundaries.order`), so every ideal of the graph is a prefix of the program. Two parallel
  branches (the towers of a two-tower model) can then no longer be split so that the branch the
  program calls second runs on an earlier stage, which no runtime can cut.

Every formulation and heuristic sees both in the graph the term folds in (:meth:`Boundaries.apply`:
colocation groups and edges), so the DP over ideals, SliceGraph and the IPs (with memory) return
only plans the module-based exports accept. An order edge ``u -> v`` prices ``u``'s tensor on
``v``'s device as a data edge does: that is what the runtime does at a split point, where every
tensor live across it is sent to the next stage (and, consumed further on, through it); an edge that
is already there adds nothing.

>>> from placement_dsl.graph import Graph, Op
>>> ops = [Op(name=n, work=1, attrs={"module": m}) for n, m in [("a", "h.0.x"), ("b", "h.0.y"), ("c", "h.1.x")]]
>>> Boundaries.modules(depth=2).resolve(Graph(ops, [("a", "b"), ("b", "c")]))
[['a', 'b']]
>>> ops = [Op(name=n, work=1, attrs={"module": m}) for n, m in [("x", "stem"), ("a", "left"), ("b", "right")]]
>>> Boundaries.modules().order(Graph(ops, [("x", "a"), ("x", "b")]))  # the right tower runs after the left
[('a', 'b')]
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

from .constraints import Colocate, merge_groups
from .errors import SpecError
from .graph import Graph

if TYPE_CHECKING:
    from .cluster import Cluster


def _prefix(path: str, depth: int | None) -> str:
    return path if depth is None else ".".join(path.split(".")[:depth])


@dataclass(frozen=True)
class Boundaries(Colocate):
    """Stage boundaries only between modules at ``depth`` (``None``: top-level modules, depth 1).

    Parameters
    ----------
    depth
        Dotted parts of the module path naming a module (1: top-level modules).
    shared
        Share variables (default) or write equalities, as :class:`~.constraints.Colocate`.
    """

    depth: int | None = None

    def __post_init__(self) -> None:
        if self.depth is not None and (not isinstance(self.depth, int) or self.depth < 1):
            raise SpecError(f"Boundaries.modules: depth must be an integer >= 1, got {self.depth!r}")

    @classmethod
    def modules(cls, depth: int | None = None, shared: bool = True) -> Boundaries:
        """Boundaries only between the modules at ``depth`` (default: the top-level ones)."""
        return cls(depth=depth, shared=shared)

    def units(self, graph: Graph) -> list[str]:
        """Each op's unit: its module at ``depth``, or ``""`` for an op of no module or a container's own glue op."""
        depth = self.depth or 1
        paths = [str(op.attrs.get("module") or "") for op in graph.ops]
        containers = {_prefix(p, k) for p in paths if p for k in range(1, p.count(".") + 1)}
        return ["" if not path or (path.count(".") + 1 < depth and path in containers) else _prefix(path, depth)
                for path in paths]

    def resolve(self, graph: Graph) -> list[list[str]]:
        """The ops of each module at ``depth``, in op order; groups of one op are left out."""
        groups: dict[str, list[str]] = {}
        for op, unit in zip(graph.ops, self.units(graph)):
            if unit:
                groups.setdefault(unit, []).append(op.name)
        return [g for g in groups.values() if len(g) > 1]

    def order(self, graph: Graph) -> list[tuple[str, str]]:
        """The edges that chain the units in program order: ``(u, v)`` for consecutive forward ops ``u``, ``v`` of
        different units (an op of no module is a unit of its own) that no edge joins yet. Program order is
        :attr:`~placement_dsl.graph.Graph.program_order` (the graph's op order, or where that is not topological
        the topological order nearest to it), so the edges never close a cycle; backward ops follow their forward
        ops' groups."""
        units = self.units(graph)
        joined = set(zip(graph.src.tolist(), graph.dst.tolist()))
        forward = [v for v in graph.program_order.tolist() if not graph.backward[v]]
        names = graph.names
        return [(names[u], names[v]) for u, v in pairwise(forward)
                if (not units[u] or units[u] != units[v]) and (u, v) not in joined]

    def spans(self, graph: Graph) -> list[list[str]]:
        """Runs of program order that no stage boundary may cut: where a container's own op (a residual add, whose
        path is a container's shorter than ``depth``) reads a tensor made earlier, the ops from that tensor's maker
        (or the container's first op, if the maker lies before it) to the reader. A split inside the container
        between the two would leave the reader on a later stage than its input inside the container's forward,
        which no runtime cuts (:func:`~placement_dsl.export.plan.split_places`). ``O(n + m)``, by a count of the
        spans covering each point between two ops.

        >>> from placement_dsl.graph import Graph, Op
        >>> rows = [("x", "b"), ("f", "b.f"), ("g", "b.g"), ("add", "b")]  # add = x + g(f(x)) in block b
        >>> g = Graph([Op(name=n, work=1, attrs={"module": m}) for n, m in rows],
        ...           [("x", "f"), ("f", "g"), ("g", "add"), ("x", "add")])
        >>> Boundaries.modules(depth=2).spans(g)
        [['x', 'f', 'g', 'add']]
        """
        units, order = self.units(graph), graph.program_order.tolist()
        position = {v: k for k, v in enumerate(order)}
        paths = [str(op.attrs.get("module") or "") for op in graph.ops]
        start: dict[str, int] = {}
        for k, v in enumerate(order):
            if paths[v]:
                for j in range(1, paths[v].count(".") + 2):
                    start.setdefault(_prefix(paths[v], j), k)
        cover = [0] * (graph.n + 1)  # cover[k] > 0: no boundary between the ops at positions k - 1 and k
        for v in range(graph.n):
            if units[v] or not paths[v]:
                continue  # a module's own op (its unit holds it) or an op of no module (the root is never cut)
            for u in graph.predecessors(v).tolist():
                lo, hi = max(position[u], start[paths[v]]), position[v]
                if lo < hi:
                    cover[lo + 1] += 1
                    cover[hi + 1] -= 1
        runs, depth = [], 0
        for k in range(1, graph.n):
            depth += cover[k]
            if depth > 0:
                if not runs or runs[-1][-1] != k - 1:
                    runs.append([k - 1])
                runs[-1].append(k)
        return [[graph.names[order[k]] for k in run] for run in runs]

    def apply(self, graph: Graph, cluster: Cluster) -> Graph:
        """``graph`` with the modules' colocation groups, the spans no boundary may cut (:meth:`spans`) and the
        chain of units in program order."""
        merged = merge_groups(graph, [*self.resolve(graph), *self.spans(graph)])
        extra = self.order(graph)
        return merged.replace(edges=[*merged.edges, *extra]) if extra else merged

    def validate(self, graph: Graph, cluster: Cluster) -> None:
        if not any(op.attrs.get("module") for op in graph.ops):
            raise SpecError(f"Boundaries.modules: graph {graph.name!r} has no module paths (op.attrs['module']); "
                            f"import the model with 'placement-dsl import' (ONNX or torch.export)")
