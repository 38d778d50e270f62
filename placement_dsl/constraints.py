"""Problem terms: the base class of every term, and the constraint terms.

A *term* says what must hold; it knows neither Pyomo nor any formulation: each formulation
owns the rules turning term types into block templates (:mod:`placement_dsl.formulations`).
A term tells the cost model which checks it requires (:meth:`Term.require`), may fold
itself into the graph the evaluator sees (:meth:`Term.apply`, e.g. colocation and allowed
kinds), and reports violations the evaluator cannot see (:meth:`Term.check`, e.g. pins).

Terms are frozen dataclasses; every subclass registers itself by class name so a
problem saved as JSON can be read back (:func:`term_from_dict`).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .congestion import Congestion as CongestionMode  # the referee's modes; Congestion here is the term
from .errors import SpecError
from .evaluate import CostModel, evaluate
from .graph import PINNED, Graph, Op, union_roots

if TYPE_CHECKING:
    from .cluster import Cluster
    from .placement import Placement

TERMS: dict[str, type[Term]] = {}

class Term:
    """Base of every problem term (objective or constraint).

    Subclasses are frozen dataclasses; they register by class name for :func:`term_from_dict`.
    """

    kind: ClassVar[str] = "constraint"
    restricts: ClassVar[bool] = False
    """Whether the term only narrows the placements of the problem's family to a class (contiguity, DAG order, q
    subgraphs per accelerator): without it the same objective is defined on every placement, so a certificate over
    the class can name what it knows beyond it (:meth:`~placement_dsl.problem.Problem.unrestricted`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        TERMS[cls.__name__] = cls


    def require(self) -> frozenset[str]:
        """Cost-model checks (see :data:`placement_dsl.evaluate.CHECKS`) this term makes mandatory."""
        return frozenset()

    def apply(self, graph: Graph, cluster: Cluster) -> Graph:
        """The graph the evaluator sees with this term folded in (default: unchanged)."""
        return graph

    def validate(self, graph: Graph, cluster: Cluster) -> None:
        """Raise :class:`SpecError` when the term names unknown ops/devices or cannot hold."""

    def check(self, placement: Placement) -> list[str]:
        """Violations the cost model cannot see (messages); empty when the placement satisfies the term."""
        return []

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"term": type(self).__name__}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            out[f.name] = _jsonable(value)
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def _tupled(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tupled(v) for v in value)
    return value


def term_from_dict(data: Mapping[str, Any]) -> Term:
    """Rebuild a term written by :meth:`Term.to_dict`."""
    name = data.get("term")
    if not isinstance(name, str) or name not in TERMS:
        raise SpecError(f"unknown problem term {name!r}; known terms are {sorted(TERMS)} "
                        "(define and import a custom term before loading)")
    fields = {str(k): _tupled(v) for k, v in data.items() if k != "term"}
    try:
        return TERMS[name](**fields)
    except TypeError as err:
        raise SpecError(f"term {name!r}: {err}") from None


def _known_ops(term: str, graph: Graph, names: Iterable[str]) -> None:
    unknown = [n for n in names if n not in graph.index]
    if unknown:
        raise SpecError(f"{term}: unknown op(s) {unknown} in graph {graph.name!r}; "
                        f"check the spelling (ops are e.g. {list(graph.names[:5])})")


# ---------------------------------------------------------------------------- memory
@dataclass(frozen=True)
class Memory(Term):
    """Hard memory capacity: ``sum_{v on d} (param_v + act_v) <= M_d`` for every device (Tarnawski eq. (3))."""

    def require(self) -> frozenset[str]:
        return frozenset({"memory"})


@dataclass(frozen=True)
class Overflow(Term):
    """Soft memory: excess bytes are streamed, ``overflow_d = (param + act - M_d)^+ / B_d`` (Archer eq. (2))."""


# ---------------------------------------------------------------------------- structure
@dataclass(frozen=True)
class Contiguous(Term):
    """Every device's forward ops, and separately its backward ops, form a contiguous set.

    Tarnawski et al. Def. 3.1 and the z-variable formulation of Lemma 4.1 (eq. 11-13);
    training graphs split by pass as in §5.3.
    """

    restricts: ClassVar[bool] = True

    def require(self) -> frozenset[str]:
        return frozenset({"contiguous"})


@dataclass(frozen=True)
class DagOrder(Term):
    """Devices numbered in pipeline order: every edge goes to the same or a later device.

    Archer et al. Fig. 3: "completed-by-block" variables ``y_{vb}`` with eq. (8)
    ``y_{ub} >= y_{vb}``; the quotient graph is then acyclic.
    """

    restricts: ClassVar[bool] = True

    def require(self) -> frozenset[str]:
        return frozenset({"dag_order", "acyclic"})


# ---------------------------------------------------------------------------- colocation
@dataclass(frozen=True)
class Colocate(Term):
    """Ops of each group share one device.

    Folded into the graph's colocation groups (so the cost model checks it) and realized
    by shared assignment variables, or, with ``shared=False``, by equalities
    ``x_{vd} = x_{rd}`` in a ``colocation`` block.

    Parameters
    ----------
    groups
        Lists of op names.
    attr
        Alternatively, group ops by this attribute (``Colocate.by("colorClass")``); ops
        without it stay alone. ``"group"`` uses the op's own ``group`` field.
    shared
        Share variables (default) or write equalities.
    """

    groups: tuple[tuple[str, ...], ...] = ()
    attr: str | None = None
    shared: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", tuple(tuple(str(o) for o in g) for g in self.groups))
        if not self.groups and self.attr is None:
            raise SpecError("Colocate: give groups=[[op, ...], ...] or use Colocate.by(attr)")

    @classmethod
    def by(cls, attr: str, shared: bool = True) -> Colocate:
        """Colocate ops sharing the value of attribute ``attr`` (e.g. ``"colorClass"`` or ``"group"``)."""
        return cls(attr=str(attr), shared=shared)

    def resolve(self, graph: Graph) -> list[list[str]]:
        """The groups as op-name lists (attribute groups computed from ``graph``)."""
        if self.attr is None:
            return [list(g) for g in self.groups]
        by_value: dict[Any, list[str]] = {}
        for op in graph.ops:
            value = op.group if self.attr == "group" else op.attrs.get(self.attr)
            if value is not None:
                by_value.setdefault(_hashable(value), []).append(op.name)
        return [g for g in by_value.values() if len(g) > 1]

    def validate(self, graph: Graph, cluster: Cluster) -> None:
        _known_ops("Colocate", graph, [o for g in self.groups for o in g])
        if self.attr is not None and self.attr != "group" and not any(self.attr in op.attrs for op in graph.ops):
            raise SpecError(f"Colocate.by({self.attr!r}): no op of graph {graph.name!r} has attribute "
                            f"{self.attr!r}; attributes present: {sorted({k for op in graph.ops for k in op.attrs})}")


    def require(self) -> frozenset[str]:
        return frozenset({"colocation"})

    def apply(self, graph: Graph, cluster: Cluster) -> Graph:
        return merge_groups(graph, self.resolve(graph))


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def merge_groups(graph: Graph, groups: Sequence[Sequence[str]]) -> Graph:
    """The graph with ``groups`` merged into its colocation groups (union-find over both)."""
    if not groups:
        return graph
    indices = [[graph.index[o] for o in g] for g in groups]
    roots = union_roots(graph.n, [*((i, int(rep)) for i, rep in enumerate(graph.group_id)),
                                  *((i, idx[0]) for idx in indices for i in idx[1:])])
    size = np.bincount(roots, minlength=graph.n)
    ops = [op.model_copy(update={"group": graph.names[r] if size[r] > 1 else None})
           for op, r in zip(graph.ops, roots)]
    return graph.replace(ops=ops)


# ---------------------------------------------------------------------------- pins, kinds
@dataclass(frozen=True)
class Pin(Term):
    """Op ``op`` runs on device ``device`` (a ``pin`` block: ``x_{op,device} = 1``)."""

    op: str
    device: str

    def validate(self, graph: Graph, cluster: Cluster) -> None:
        _known_ops("Pin", graph, [self.op])
        if self.device not in cluster.index:
            raise SpecError(f"Pin({self.op!r}, {self.device!r}): unknown device {self.device!r}; "
                            f"devices are {list(cluster.names)}")
        kind = cluster.device(self.device).kind
        if not math.isfinite(graph.ops[graph.index[self.op]].time_on(kind)):
            raise SpecError(f"Pin({self.op!r}, {self.device!r}): op {self.op!r} cannot run on kind {kind!r}; "
                            "pin it to a device of an allowed kind")


    def apply(self, graph: Graph, cluster: Cluster) -> Graph:
        """The op marked with its device (:data:`~placement_dsl.graph.PINNED`): the cluster's times then allow it
        there only, so a heuristic's candidates for it are its pin device (and its colocation group's, whose
        members move together), and the cost model's ``allowed`` check is the one that refuses it elsewhere, naming
        the pin (no check of the term's own: it gave the same op a second violation)."""
        return Pin.apply_all([self], graph)

    @staticmethod
    def apply_all(pins: Sequence[Pin], graph: Graph) -> Graph:
        """Every pin of ``pins`` applied at once (a later pin of an op wins, as applied one by one): one copy of the
        graph, where one per pin cost a contracted step's coarse problem of 1,729 pins 37 s (GPT-3 330M)."""
        to = {p.op: p.device for p in pins}
        return graph.replace(ops=[op.model_copy(update={"attrs": {**op.attrs, PINNED: to[op.name]}})
                                  if op.name in to else op for op in graph.ops])


@dataclass(frozen=True)
class AllowedKinds(Term):
    """Ops ``ops`` may only run on devices of the given ``kinds`` (folded into the ops' work tables)."""

    ops: tuple[str, ...]
    kinds: tuple[str, ...]

    def __post_init__(self) -> None:
        ops = (self.ops,) if isinstance(self.ops, str) else tuple(self.ops)
        kinds = (self.kinds,) if isinstance(self.kinds, str) else tuple(self.kinds)
        object.__setattr__(self, "ops", ops)
        object.__setattr__(self, "kinds", kinds)
        if not kinds:
            raise SpecError("AllowedKinds: give at least one device kind")

    def validate(self, graph: Graph, cluster: Cluster) -> None:
        _known_ops("AllowedKinds", graph, self.ops)
        present = {d.kind for d in cluster.devices}
        if not set(self.kinds) & present:
            raise SpecError(f"AllowedKinds: kinds {list(self.kinds)} match no device; the cluster has kinds "
                            f"{sorted(present)}")

    def require(self) -> frozenset[str]:
        return frozenset({"allowed"})

    def apply(self, graph: Graph, cluster: Cluster) -> Graph:
        kinds = {d.kind for d in cluster.devices} | set(self.kinds)
        chosen = set(self.ops)

        def restricted(op: Op) -> Op:
            work = {k: op.time_on(k) for k in sorted(kinds) if k in self.kinds and math.isfinite(op.time_on(k))}
            if not work:
                raise SpecError(f"AllowedKinds: op {op.name!r} has no running time on kinds {list(self.kinds)}")
            return op.model_copy(update={"work": work})

        return graph.replace(ops=[restricted(op) if op.name in chosen else op for op in graph.ops])


# ---------------------------------------------------------------------------- subgraphs
@dataclass(frozen=True)
class Subgraphs(Term):
    """At most ``q`` contiguous subgraphs per accelerator (Tarnawski et al. §4.1, Fig. 4).

    An accelerator's ops are cut into contiguous subgraphs as the latency cost model does
    (an op's subgraph is one more than the number of times a path into it leaves the
    accelerator and comes back); ``q = 1`` is Fig. 3's contiguous accelerators. Host devices
    are not limited.
    """

    restricts: ClassVar[bool] = True

    q: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.q, bool) or not isinstance(self.q, (int, np.integer)) or self.q < 1:
            raise SpecError(f"Subgraphs(q={self.q!r}): q must be a whole number of subgraphs >= 1")
        object.__setattr__(self, "q", int(self.q))

    def check(self, placement: Placement) -> list[str]:
        counts = subgraph_counts(placement)
        return [f"accelerator {name!r} runs {k} contiguous subgraphs, more than Subgraphs(q={self.q})"
                for name, k in counts.items() if k > self.q]


def subgraph_counts(placement: Placement) -> dict[str, int]:
    """Contiguous subgraphs per accelerator: the latency cost model's count, else the most runs of the
    accelerator's ops on one path (the same cut, Tarnawski §4.1)."""
    counts = getattr(evaluate(placement, CostModel.named("latency")), "subgraphs", None)
    if counts:
        return dict(counts)
    g, c, assign = placement.graph, placement.cluster, placement.assign
    runs = np.zeros((g.n, c.size), dtype=np.int64)
    for v in g.topo.tolist():
        preds = g.predecessors(v)
        if preds.size:
            runs[v] = runs[preds].max(axis=0)
        d = assign[v]
        back = [runs[u, d] + 1 for u in preds.tolist() if assign[u] != d]
        runs[v, d] = max([1, int(runs[v, d]), *back])
    return {c.names[d]: int(runs[assign == d, d].max(initial=0)) for d in np.flatnonzero(~c.host)}


# ---------------------------------------------------------------------------- congestion
@dataclass(frozen=True)
class Congestion(Term):
    """Which data transfers exclude each other in time (MOIRAI eq. 8).

    ``mode`` is ``"port"`` (default: one transfer at a time leaving a device and one entering
    it), ``"channel"`` (one at a time per ordered device pair, MOIRAI §III-D), ``"link"`` (one at
    a time per physical link: transfers whose routes share a link, :meth:`Cluster.route
    <placement_dsl.cluster.Cluster.route>`, are serialized) or ``None`` / ``"none"`` (transfers
    never contend). The problem's cost model checks schedules with the same mode
    (:meth:`cost_model_fields`), so a formulation and the referee agree. Single-sample objectives
    (makespan, latency) schedule with it; throughput objectives already count every link's load
    as a resource of the pipeline, so the term changes nothing there.
    """

    mode: str | None = "port"

    def __post_init__(self) -> None:
        try:
            mode = CongestionMode("none" if self.mode is None else getattr(self.mode, "value", self.mode))
        except ValueError:
            raise SpecError(f"Congestion(mode={self.mode!r}): choose 'port', 'channel', 'link' or None") from None
        object.__setattr__(self, "mode", mode.value)

    def cost_model_fields(self) -> dict[str, Any]:
        """What this term sets in the problem's :class:`~placement_dsl.evaluate.CostModel`."""
        return {"congestion": self.mode}


def congestion_of(terms: Iterable[Term]) -> str:
    """The congestion mode the terms ask for (``"port"`` without a :class:`Congestion` term)."""
    modes = {t.mode for t in terms if isinstance(t, Congestion)}
    if len(modes) > 1:
        raise SpecError(f"conflicting Congestion terms: modes {sorted(m or 'none' for m in modes)}; keep one")
    return modes.pop() if modes else "port"
