"""Stage boundaries only between modules, in program order: stages a runtime can cut.

A pipeline runtime splits a model's program between modules (``torch.distributed.pipelining``
split points, Megatron's layers; see :mod:`placement_dsl.export`): a stage is a run of whole
modules *in the order the program calls them*. :class:`Boundaries` writes that as a term of two
parts:

* **units**: a stage begins only where the exporter cuts (:meth:`Boundaries.cut_points`, by the
  exporters' own :func:`beginning_point` and :func:`reused_modules`): at the beginning of a module at
  ``depth`` dotted parts of its path (``op.attrs["module"]``, set by the ONNX and ``torch.export``
  importers), or a shallower one, that the model calls once. The runs of program order between those
  points, joined with the modules at ``depth``, share a device (a :class:`~.constraints.Colocate`):
  an op of no module (the root's functional call between two children) or a container's glue op after
  its first child stays with the module call before it, as torch's split treats it;
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

import re
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from .constraints import Colocate, merge_groups
from .errors import SpecError
from .graph import Graph, union_roots

if TYPE_CHECKING:
    from .cluster import Cluster


def _prefix(path: str, depth: int | None) -> str:
    return path if depth is None else ".".join(path.split(".")[:depth])


_CALL_SUFFIX = re.compile(r"^(.*)_(\d+)$")


def scopes(path: str) -> list[str]:
    """The modules an op of module ``path`` runs in, outermost first: ``["h", "h.3", "h.3.attn"]`` for ``h.3.attn``."""
    return [_prefix(path, k) for k in range(1, path.count(".") + 2)] if path else []


def called_modules(graph: Graph) -> set[str] | None:
    """The modules the model calls, from the importers' module stacks (``op.attrs["nn_module_stack"]``), ``None``
    where no op has one; a container that is only iterated (a ``ModuleList`` of blocks) is never called."""
    stacks = [op.attrs["nn_module_stack"] for op in graph.ops if op.attrs.get("nn_module_stack")]
    return {str(p) for stack in stacks for p in stack} if stacks else None


def _common(paths: list[str]) -> str:
    """The innermost module that every path of ``paths`` runs in (``""``: the root)."""
    parts = [p.split(".") for p in paths]
    k = 0
    while all(len(x) > k for x in parts) and len({x[k] for x in parts}) == 1:
        k += 1
    return ".".join(parts[0][:k])


def enclosing_paths(graph: Graph) -> list[str]:
    """Each op's module path; for an op of no module the innermost module enclosing the ops it reads and the ops of
    a module that read it (``""``: the root's own call between child calls, as ``h = h + block(h)``). An exporter
    leaves some ops inside a module's call without a path (the dynamo ONNX exporter's ``Split`` in attention): those
    read and feed that module's ops, so they stay inside it."""
    out = [str(op.attrs.get("module") or "") for op in graph.ops]
    for v in graph.program_order.tolist():
        if not out[v]:
            around = [out[u] for u in graph.predecessors(v).tolist()]
            around += [p for w in graph.successors(v).tolist() if (p := str(graph.ops[w].attrs.get("module") or ""))]
            out[v] = _common(around) if around else ""
    return out


def shared_modules(graph: Graph) -> dict[str, dict[str, Any]]:
    """The importers' record of the modules that are one ``nn.Module`` object under several names or that the model
    calls more than once (``op.attrs["shared_modules"]``, :mod:`placement_dsl.io.module_calls`): each name to
    ``{"fqns": [the object's names], "calls": its calls under all of them}``."""
    out: dict[str, dict[str, Any]] = {}
    for op in graph.ops:
        out.update(op.attrs.get("shared_modules") or {})
    return out


def reused_modules(graph: Graph) -> set[str]:
    """Module paths that are no single module call: called several times, one object under several names called
    more than once in all (a tied encoder and decoder: torch cuts at each call of the object), or an exporter's
    ``name_N`` call copy.

    Where the importer recorded the module calls (ops carry ``nn_module_stack``, :func:`called_modules`), its
    record says (:func:`shared_modules`). Otherwise a module called more than once has its forward ops in several
    separate runs of the graph's own op order (the exporter's execution order) with other ops between them:
    another module's, or the root's own (:func:`enclosing_paths`: ``h = h + block(h)`` in a loop); the ONNX
    exporter names the later calls ``relu_1``, ``relu_2``, which name no module of the model.
    """
    known = {p for op in graph.ops if (p := str(op.attrs.get("module") or ""))}
    reused = {p for p in known if (m := _CALL_SUFFIX.match(p)) and m.group(1) in known}
    reused |= {m.group(1) for p in reused if (m := _CALL_SUFFIX.match(p))}
    if called_modules(graph) is not None:
        return reused | {fqn for obj in shared_modules(graph).values() if obj["calls"] > 1 for fqn in obj["fqns"]}
    closed: set[str] = set()
    current: set[str] = set()
    for path, backward in zip(enclosing_paths(graph), graph.backward.tolist()):
        if backward:
            continue
        inside = set(scopes(path))
        closed |= current - inside
        reused |= inside & closed
        current = inside
    return reused


def beginning_points(path: str, entered: set[str], called: set[str] | None) -> list[str]:
    """The modules whose beginning a stage starting at an op of module ``path`` may split at, shallowest first: the
    modules of ``path`` that no earlier op ``entered`` and the model calls. The shallowest is the default point (a
    container beginning at the same op is the same point of the program and cuts no residual connection inside
    it); a deeper one is the same point under another name, where the shallower is called several times. Empty
    inside a module already entered."""
    return [s for s in scopes(path) if s not in entered and (called is None or s in called)]


def beginning_point(path: str, entered: set[str], called: set[str] | None) -> str | None:
    """The default of :func:`beginning_points`, ``None`` inside a module already entered."""
    return next(iter(beginning_points(path, entered, called)), None)


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

    def module_units(self, graph: Graph) -> list[str]:
        """Each op's module at ``depth``, or ``""`` for an op of no module or a container's own glue op."""
        depth = self.depth or 1
        paths = [str(op.attrs.get("module") or "") for op in graph.ops]
        containers = {_prefix(p, k) for p in paths if p for k in range(1, p.count(".") + 1)}
        return ["" if not path or (path.count(".") + 1 < depth and path in containers) else _prefix(path, depth)
                for path in paths]

    def cut_points(self, graph: Graph) -> list[bool]:
        """Whether a stage may begin at each op: a forward op where a module at ``depth`` (or a shallower one)
        begins in program order and the split there has a name the model calls once, as the exporters choose it:
        the beginning of a module beginning there (:func:`beginning_points`), or else the end of a module the op
        before ends (a tied ``dec`` called twice begins no stage, but the end of the ``enc`` before it may). An
        op of no module or a container's glue op after its first child never begins a stage: it runs in its
        parent's forward between child calls, and a runtime splits only at a child's call.

        >>> from placement_dsl.graph import Graph, Op
        >>> rows = [("e", "embed"), ("b0", "blocks.0"), ("b1", "blocks.1"), ("mean", ""), ("h", "head")]
        >>> g = Graph([Op(name=n, work=1, attrs={"module": m}) for n, m in rows], [("e", "b0"), ("b0", "b1"),
        ...           ("b1", "mean"), ("mean", "h")])
        >>> Boundaries.modules().cut_points(g)  # the root's mean runs with the blocks, before the head's call
        [True, True, False, False, True]
        """
        depth = self.depth or 1
        called, reused = called_modules(graph), reused_modules(graph)
        forward = [v for v in graph.program_order.tolist() if not graph.backward[v]]
        paths = [str(graph.ops[v].attrs.get("module") or "") for v in forward]
        last = {s: k for k, path in enumerate(paths) for s in scopes(path)}
        entered: set[str] = set()
        out = [False] * graph.n
        for k, (v, path) in enumerate(zip(forward, paths)):
            if not path:
                continue
            begins = [p for p in beginning_points(path, entered, called) if p not in reused]
            ends = [p for p in scopes(paths[k - 1]) if last[p] == k - 1 and (called is None or p in called)
                    and p not in reused] if k else []
            out[v] = _prefix(path, depth) not in entered and bool(begins or ends) and bool(
                beginning_points(path, entered, called))
            entered.update(scopes(path))
        return out

    def units(self, graph: Graph) -> list[str]:
        """Each op's unit: a forward op's run of program order from a cut point (:meth:`cut_points`) to the next,
        named by the run's first op, so an op of no module joins the module call before it; a backward op its
        module at ``depth`` (:meth:`module_units`)."""
        cuts, names, unit = self.cut_points(graph), graph.names, ""
        out = [f"module {m}" if m else "" for m in self.module_units(graph)]
        for v in graph.program_order.tolist():
            if not graph.backward[v]:
                unit = f"run {names[v]}" if cuts[v] or not unit else unit
                out[v] = unit
        return out

    def resolve(self, graph: Graph) -> list[list[str]]:
        """The ops that share a device: each unit (:meth:`units`) joined with each module at ``depth`` (a module
        whose calls other ops interleave stays whole), in op order; groups of one op are left out."""
        first: dict[str, int] = {}
        pairs = [(v, first.setdefault(key, v)) for keys in (self.units(graph), self.module_units(graph))
                 for v, key in enumerate(keys) if key]
        groups: dict[int, list[str]] = {}
        for op, r in zip(graph.ops, union_roots(graph.n, pairs)):
            groups.setdefault(r, []).append(op.name)
        return [g for g in groups.values() if len(g) > 1]

    def order(self, graph: Graph) -> list[tuple[str, str]]:
        """The edges that chain the units in program order: ``(u, v)`` for consecutive forward ops ``u``, ``v`` of
        different units (:meth:`units`) that no edge joins yet. Program order is
        :attr:`~placement_dsl.graph.Graph.program_order` (the graph's op order, or where that is not topological
        the topological order nearest to it), so the edges never close a cycle; backward ops follow their forward
        ops' groups."""
        units = self.units(graph)
        joined = set(zip(graph.src.tolist(), graph.dst.tolist()))
        forward = [v for v in graph.program_order.tolist() if not graph.backward[v]]
        names = graph.names
        return [(names[u], names[v]) for u, v in pairwise(forward)
                if units[u] != units[v] and (u, v) not in joined]

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
        units, order = self.module_units(graph), graph.program_order.tolist()
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
