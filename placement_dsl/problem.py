"""A placement problem as data: graph, cluster, one objective term and constraint terms.

>>> from placement_dsl.graph import Graph, Op
>>> from placement_dsl.objectives import Bottleneck
>>> from placement_dsl.constraints import DagOrder, Overflow
>>> g = Graph([Op(name="a", work=1, out_bytes=2), Op(name="b", work=3)], [("a", "b")])
>>> p = Problem(g, Stages(2), objective=Bottleneck(), constraints=[DagOrder(), Overflow()])
>>> cm = p.cost_model()
>>> cm.memory.value, sorted(cm.require)
('overflow', ['acyclic', 'allowed', 'colocation', 'dag_order'])

The problem layer imports no Pyomo: :func:`placement_dsl.compile.compile` turns a problem
into a model with a formulation, whose rule table maps each term to block templates.
"""
from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .cluster import Cluster
from .constraints import Colocate, Contiguous, DagOrder, Memory, Overflow, Pin, Subgraphs, Term, term_from_dict
from .errors import SpecError
from .evaluate import CostModel, Evaluation, MemoryMode, evaluate, execution
from .files import dumps_strict, write_atomic
from .graph import Graph
from .objectives import ObjectiveTerm, Throughput
from .placement import Placement, PlacementClass
from .replication import replicas_dict
from .structure import longest_run
from .workload import graph_from_dict, graph_to_dict

PROBLEM_FORMAT = "placement_dsl.problem"
VERSION = 1
BASE_REQUIRE = frozenset({"allowed", "colocation"})
ORDER_SHOWN = 6  # devices a class's device order names before it elides the middle ones


def Stages(k: int, memory: float = math.inf, bandwidth: float = 1.0) -> Cluster:
    """Shorthand for ``Cluster.stages(k, ...)``: ``k`` identical pipeline stages (Archer et al.)."""
    return Cluster.stages(k, memory=memory, bandwidth=bandwidth)


def _term(data: Any, where: str) -> Term:
    """A term from its mapping ``{"term": name, ...fields}``, errors naming ``where`` it was in the problem."""
    if not isinstance(data, Mapping):
        raise SpecError(f"problem: {where} must be a term mapping such as {{'term': 'Throughput'}}, got "
                        f"{type(data).__name__} {data!r:.40}")
    try:
        return term_from_dict(data)
    except SpecError as err:
        raise SpecError(f"problem: {where}: {err}") from None


class Problem:
    """A declarative placement problem.

    Parameters
    ----------
    graph, cluster
        What to place, and where.
    objective
        An :class:`~placement_dsl.objectives.ObjectiveTerm` (default ``Throughput()``).
    constraints
        Constraint terms (:mod:`placement_dsl.constraints`), possibly user-defined.

    Attributes
    ----------
    graph
        The graph the cost model sees: the input graph with colocation and allowed-kind
        terms folded in. ``source_graph`` is the graph as given.
    """

    def __init__(self, graph: Graph, cluster: Cluster, objective: ObjectiveTerm | None = None,
                 constraints: Iterable[Term] = ()):
        self.source_graph = graph
        self.cluster = cluster
        self.objective = Throughput() if objective is None else objective
        self.constraints: tuple[Term, ...] = _terms(constraints)
        self._check_terms()
        self.objective.validate(graph, cluster)
        g, pins = graph, []
        for term in self.constraints:
            term.validate(g, cluster)
            if type(term) is Pin:  # a run of pins is folded in one copy of the graph (a pin marks its op only)
                pins.append(term)
                continue
            g = Pin.apply_all(pins, g) if pins else g
            g, pins = term.apply(g, cluster), []
        self.graph = Pin.apply_all(pins, g) if pins else g
        self._check_pins()

    # ------------------------------------------------------------------ validation
    def _check_terms(self) -> None:
        if not isinstance(self.objective, ObjectiveTerm):
            raise SpecError(f"Problem: objective must be an objective term such as Throughput() or Bottleneck(), "
                            f"got {self.objective!r}")
        for t in self.constraints:
            if not isinstance(t, Term) or isinstance(t, ObjectiveTerm):
                raise SpecError(f"Problem: constraint {t!r} is not a constraint term; pass objectives as objective=")
        if self.has(Memory) and self.has(Overflow):
            raise SpecError("Problem: Memory() (hard capacity) and Overflow() (streamed excess) conflict; keep one")

    def _check_pins(self) -> None:
        pins: dict[str, str] = {}
        for pin in self.find(Pin):
            if pins.get(pin.op, pin.device) != pin.device:
                raise SpecError(f"conflicting pins: op {pin.op!r} pinned to {pins[pin.op]!r} and {pin.device!r}")
            pins[pin.op] = pin.device
        by_group: dict[int, tuple[str, str]] = {}
        for op, dev in pins.items():
            rep = int(self.graph.group_id[self.graph.index[op]])
            other = by_group.setdefault(rep, (op, dev))
            if other[1] != dev:
                raise SpecError(f"conflicting pins: colocated ops {other[0]!r} and {op!r} are pinned to "
                                f"{other[1]!r} and {dev!r}; pin the group to one device")

    # ------------------------------------------------------------------ queries
    def has(self, cls: type[Term]) -> bool:
        return any(isinstance(t, cls) for t in self.constraints)

    def find(self, cls: type[Term]) -> list[Any]:
        return [t for t in self.constraints if isinstance(t, cls)]

    @property
    def widens(self) -> bool:
        """Whether a term widens the placements beyond one device per op (``widens = True``, e.g. ``Replicate``)."""
        return any(getattr(t, "widens", False) for t in self.constraints)

    @property
    def terms(self) -> tuple[Term, ...]:
        return (self.objective, *self.constraints)

    @property
    def pins(self) -> dict[str, str]:
        """``{op: device}`` from the :class:`Pin` terms."""
        return {p.op: p.device for p in self.find(Pin)}

    @property
    def colocation_shared(self) -> bool:
        """True unless some :class:`Colocate` term asks for equalities."""
        return all(c.shared for c in self.find(Colocate))

    def placement_class(self) -> PlacementClass:
        """The class of placements the problem optimizes over (its structure terms)."""
        contiguous, ordered = self.has(Contiguous), self.has(DagOrder)
        if contiguous and ordered:
            return PlacementClass.DP
        return PlacementClass.CONTIGUOUS if contiguous else PlacementClass.DAG_ORDERED if ordered else PlacementClass.ALL

    @property
    def numbered(self) -> bool:
        """Whether the problem's DAG order depends on how the devices are numbered: devices that differ (speeds,
        kinds, hosts), where the listed order's optimum may exceed another order's."""
        return self.has(DagOrder) and len(self.cluster.homogeneous_groups()) > 1

    def class_label(self, scope: PlacementClass | None = None) -> str:
        """``scope`` (default: the problem's class) by name, saying what its flag alone does not where it is the
        problem's class: the device order a DAG order follows where the numbering matters (:attr:`numbered`), and
        the subgraphs per accelerator a :class:`~placement_dsl.constraints.Subgraphs` term allows.

        >>> from placement_dsl.cluster import Cluster, Device
        >>> from placement_dsl.graph import Graph, Op
        >>> from placement_dsl.objectives import Latency
        >>> c = Cluster([Device(name="acc0", kind="accelerator"), Device(name="cpu0", kind="cpu", host=True)])
        >>> Problem(Graph([Op(name="a", work=1)], []), c, Latency(), [DagOrder()]).class_label()
        'dag-ordered placements in the device order acc0, cpu0'
        """
        own = self.placement_class()
        if scope is not None and scope != own:
            return str(scope)
        label = str(own)
        if self.numbered:
            names = list(self.cluster.names)
            shown = names if len(names) <= ORDER_SHOWN else [*names[:ORDER_SHOWN - 2], "...", names[-1]]
            label += f" in the device order {', '.join(shown)}"
        q = min((t.q for t in self.find(Subgraphs)), default=None)
        if q is not None and not self.has(Contiguous):  # every placement but those with more subgraphs
            label = label.removeprefix("all ")
            label += f" with at most {q} contiguous subgraph{'s' if q > 1 else ''} per accelerator"
        return label

    def unrestricted(self) -> Problem | None:
        """The problem's family: the same objective and terms without those that only restrict the placements to a
        class (``restricts``: ``Contiguous``, ``DagOrder``, ``Subgraphs``), over which every placement the problem
        accepts is valid too; ``None`` when no term restricts (the problem is its family)."""
        kept = [t for t in self.constraints if not t.restricts]
        if len(kept) == len(self.constraints):
            return None
        return Problem(self.source_graph, self.cluster, self.objective, kept)

    def class_of(self, placement: Placement) -> PlacementClass:
        """The part of :class:`PlacementClass` the placement lies in, by the cost model's structure checks: its
        stages contiguous or not, its quotient graph acyclic or not (whatever the devices' numbering)."""
        model = self.cost_model()
        model = dataclasses.replace(model, require=model.require | {"contiguous", "acyclic"})
        broken = {v.check for v in evaluate(self._rebased(placement), model).violations}
        if "contiguous" in broken:
            return PlacementClass.OTHER if "acyclic" in broken else PlacementClass.ORDERED_SPLIT
        return PlacementClass.CYCLIC_CONTIGUOUS if "acyclic" in broken else PlacementClass.DP

    # ------------------------------------------------------------------ cost model
    def cost_model(self) -> CostModel:
        """The evaluator's view: objective, overlap, memory mode and the required checks."""
        require = set(BASE_REQUIRE)
        for term in self.terms:
            require |= term.require()
        memory = MemoryMode.OVERFLOW if self.has(Overflow) else MemoryMode.HARD
        fields = {k: v for term in self.terms for k, v in getattr(term, "cost_model_fields", dict)().items()}
        return CostModel(objective=self.objective.cost_objective, overlap=self.objective.overlap,
                         memory=memory, require=frozenset(require), name=self.objective.names[0], **fields)

    def evaluate(self, placement: Placement) -> Evaluation:
        """Score a placement with this problem's cost model."""
        return evaluate(self._rebased(placement), self.cost_model())

    def violations(self, placement: Placement) -> list[str]:
        """Every reason the placement is invalid for this problem (cost-model checks and term checks)."""
        return self.scored(placement)[0]

    def scored(self, placement: Placement) -> tuple[list[str], Evaluation]:
        """:meth:`violations` and :meth:`evaluate` of ``placement`` from one evaluation by the cost model: on a
        large schedule each is a list schedule of every op (5-7.5 s on 47,584 ops at load 8)."""
        placement = self._rebased(placement)
        ev = evaluate(placement, self.cost_model())
        out = [f"[{v.check}] {v.message}" for v in ev.binding]
        if placement.replicated and not self.widens:
            out.append("[replicas] stages run on several devices, which the problem does not allow (add Replicate)")
        for term in self.constraints:
            out.extend(f"[{type(term).__name__}] {m}" for m in term.check(placement))
        return out, ev

    def is_valid(self, placement: Placement) -> bool:
        return not self.violations(placement)

    def placement(self, assign: Any, source: str = "") -> Placement:
        """A :class:`Placement` of this problem's graph on its cluster."""
        return Placement(self.graph, self.cluster, assign, source)

    def _rebased(self, placement: Placement) -> Placement:
        if placement.graph is self.graph:
            return placement
        if placement.graph.names != self.graph.names:
            raise SpecError(f"placement is for graph {placement.graph.name!r} with other ops than the problem's")
        return Placement(self.graph, self.cluster, placement.assign, placement.source, schedule=placement.schedule,
                         replicas=replicas_dict(placement.cluster, placement.replica_sets) or None)

    # ------------------------------------------------------------------ serialization
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PROBLEM_FORMAT, "version": VERSION,
            "graph": graph_to_dict(self.source_graph), "cluster": self.cluster.to_dict(),
            "objective": self.objective.to_dict(), "constraints": [t.to_dict() for t in self.constraints],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Problem:
        if not isinstance(data, Mapping):
            raise SpecError(f"a problem is a mapping with 'graph', 'cluster' and 'objective', got {type(data).__name__}")
        if data.get("format", PROBLEM_FORMAT) != PROBLEM_FORMAT:
            raise SpecError(f"not a problem file: format {data.get('format')!r}, expected {PROBLEM_FORMAT!r}")
        if data.get("version", VERSION) != VERSION:
            raise SpecError(f"{PROBLEM_FORMAT}: unsupported version {data.get('version')!r}; this package reads "
                            f"version {VERSION}")
        missing = [k for k in ("graph", "cluster", "objective") if k not in data]
        if missing:
            raise SpecError(f"problem mapping lacks {missing}")
        objective = _term(data["objective"], "objective")
        constraints = data.get("constraints", [])
        if not isinstance(constraints, list):
            raise SpecError(f"problem: 'constraints' must be a list of terms such as {{'term': 'Memory'}}, got "
                            f"{type(constraints).__name__} {constraints!r:.40}")
        return cls(graph_from_dict(data["graph"]), Cluster.from_dict(data["cluster"]), objective,  # type: ignore[arg-type]
                   [_term(t, f"constraints[{i}]") for i, t in enumerate(constraints)])

    def save(self, path: str | Path) -> None:
        """Write the problem as standard JSON (an unlimited memory is ``null``), whole or not at all."""
        write_atomic(path, dumps_strict(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Problem:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8-sig"))
        except (OSError, ValueError, RecursionError) as err:
            raise SpecError(f"cannot read problem {str(path)!r}: {' '.join(str(err).split())[:120]}") from None
        try:
            return cls.from_dict(data)
        except SpecError as err:
            raise SpecError(f"problem {str(path)!r}: {err}") from None

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Problem) and self.source_graph == other.source_graph
                and self.cluster == other.cluster and self.terms == other.terms)

    def __hash__(self) -> int:
        return hash((self.source_graph, self.cluster, self.terms))

    def __repr__(self) -> str:
        terms = ", ".join(repr(t) for t in self.constraints)
        return f"Problem({self.graph!r}, {self.cluster!r}, objective={self.objective!r}, constraints=[{terms}])"


def subgraphs_per_accelerator(problem: Problem) -> int:
    """``q`` (Tarnawski Fig. 4): 1 under Contiguous, the least ``Subgraphs(q)``, else enough for every placement.
    Here, not beside the latency formulation, so that a heuristic's run under ``q`` loads no Pyomo (its import took
    3 s of a certificate's 2 s upper-bound share at load 14, and no heuristic ran)."""
    most = max(1, math.ceil(longest_run(problem.graph) / 2))
    if problem.has(Contiguous):
        return 1
    asked = [t.q for t in problem.find(Subgraphs)]
    return min([most, *asked])


def q_model(problem: Problem, model: CostModel | None = None) -> CostModel:
    """``model`` (else the problem's cost model) with the problem's ``q`` where its devices run invocations: what a
    heuristic's split is built and chosen under, so that one past ``Subgraphs(q)`` reads invalid there. Chosen by the
    problem's cost model alone, a fallback of 6 ops held greedy's split (26.0, two subgraphs on the accelerator),
    which ``Subgraphs(1)`` refused, over every op on the CPU (58.0, valid)."""
    model = problem.cost_model() if model is None else model
    if execution(problem.cluster) != "invocations":
        return model
    return dataclasses.replace(model, max_subgraphs=subgraphs_per_accelerator(problem))


def _terms(constraints: Any) -> tuple[Term, ...]:
    """The constraint terms as a tuple: a single term reads as a list of one (``Problem(g, c, Throughput(), Memory())``);
    anything else that is not an iterable of terms is refused naming what was given."""
    if isinstance(constraints, Term):
        return (constraints,)
    if isinstance(constraints, (str, bytes)) or not hasattr(constraints, "__iter__"):
        raise SpecError(f"Problem: constraints must be a term or a list of terms such as [Memory(), Contiguous()], "
                        f"got {constraints!r}")
    return tuple(constraints)

