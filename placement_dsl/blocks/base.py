"""What every block template shares: the scaled problem data, the template interface, the registry.

A template adds components to one ``pyo.Block`` (:meth:`BlockTemplate.build`) and, given a
placement, gives every variable it created a value (:meth:`BlockTemplate.values`) such that
its constraints hold whenever the placement is feasible — the warm start.

Units. Times are divided by ``scale.time`` (a lower bound on the optimum, so the objective
is near 1) and bytes by ``scale.memory`` (the largest finite capacity), so coefficients stay
well conditioned; ``model objective * scale.time`` is in cost-model units. A row about one device's
memory is further divided by that device's capacity (:meth:`Context.memory_weight`): with capacities
of 100 bytes beside one of 1e9, the small devices' rows would otherwise hold coefficients of 1e-7,
under the solver's feasibility tolerance, and the solver could overfill them.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from ..errors import InfeasibleError, SpecError
from .lazy import pyo

if TYPE_CHECKING:
    from ..problem import Problem

PASSES = ("forward", "backward")
L = TypeVar("L", bound="Link")
T = TypeVar("T", bound="BlockTemplate")


class Stage(enum.IntEnum):
    """Where a block sits in the model's reading order (variables, structure, costs, objective).

    Only a layout convention, like the rows of a paper's figure: which block is built before
    which is decided by the links templates provide and need (:func:`build_order`); among
    blocks that are ready, the lower stage comes first, then the formulation's own order.
    """

    ASSIGN = 0
    STRUCTURE = 10
    CUT = 20
    COST = 30
    LOAD = 40
    OBJECTIVE = 50


# ---------------------------------------------------------------------------- links
class Link:
    """Base of the typed links between blocks: what one template provides and others need.

    A link is a small frozen dataclass of expressions (or callables returning expressions)
    a template exposes, like a Pyomo ``network`` Port. :meth:`Context.provide` records it
    once — a second provider of the same link is an error, never an overwrite.
    """


@dataclass(frozen=True)
class AssignmentLink(Link):
    """``x(v, d)``: op ``v`` runs on device ``d``; ``y(v, b)``: op ``v`` runs on device ``b`` or an earlier one."""

    x: Callable[[int, int], Any]
    y: Callable[[int, int], Any]


@dataclass(frozen=True)
class TransferLink(Link):
    """``comm(d, pass, which)``: transfer time of device ``d``'s tensors of a pass, ``which`` in/out/both."""

    comm: Callable[[int, str, str], Any]


@dataclass(frozen=True)
class OverflowLink(Link):
    """``overflow(d)``: time to stream device ``d``'s bytes beyond its memory (Archer eq. (2))."""

    overflow: Callable[[int], Any]


@dataclass(frozen=True)
class LoadLink(Link):
    """``device_cost[d, pass, part]`` expressions and the ``parts`` whose maximum is a device's load."""

    device_cost: Any
    parts: tuple[str, ...]


@dataclass(frozen=True)
class ScheduleLink(Link):
    """Start times in model units: ``start(v)`` of op ``v`` and ``transfer_start(u, d)`` of tensor ``u``'s
    transfer to device ``d`` (``None`` where the model has no such variable). The solution's schedule
    is read back through it (:meth:`placement_dsl.compile.VarMap.placement`)."""

    start: Callable[[int], Any]
    transfer_start: Callable[[int, int], Any]


@dataclass(frozen=True)
class BottleneckLink(Link):
    """The epigraph variable that the objective bounds every device's load by (scaled time)."""

    bottleneck: Any


@dataclass(frozen=True)
class Scale:
    """Model units: ``time`` and ``memory`` divide the cost model's times and bytes."""

    time: float = 1.0
    memory: float = 1.0


def _time_scale(times: np.ndarray, comm: np.ndarray, devices: int) -> float:
    fastest = np.where(np.isfinite(times), times, np.inf).min(axis=1)
    fastest = fastest[np.isfinite(fastest)]
    bound = max(float(fastest.max(initial=0.0)), float(fastest.sum()) / devices)
    if bound <= 0:
        bound = float(comm.max(initial=0.0))
    return bound if bound > 0 else 1.0


class Context:
    """The scaled numpy view of a problem that templates read, plus the links between blocks.

    Attributes (``n`` ops, ``D`` devices, ops and devices by index)
    ----------
    work : (n, D)  running time / scale.time, 0 where not allowed
    allowed : (n, D)  the op may run on the device (finite time)
    comm : (n, D)  out_bytes_u / bandwidth_d / scale.time, 0 on host devices
    mem : (n,)  (param + activation bytes) / scale.memory;  capacity : (D,) likewise (inf = none)
    unit : (n,)  representative op of each op's assignment variables (its colocation group
        when variables are shared, else itself)
    backward : (n,)  the op belongs to the backward pass
    """

    def __init__(self, problem: Problem):
        g, c = problem.graph, problem.cluster
        self.problem, self.graph, self.cluster = problem, g, c
        self.n, self.D = g.n, c.size
        self.ops, self.devices = g.names, c.names
        times = c.times(g)
        comm_raw = np.outer(g.out_bytes, c.transfer_scale)
        self.scale = Scale(_time_scale(times, comm_raw, c.size), _memory_scale(problem))
        self.allowed = np.isfinite(times)
        self.work = np.where(self.allowed, times, 0.0) / self.scale.time
        self.comm = comm_raw / self.scale.time
        self.mem = (g.param_bytes + g.activation_bytes) / self.scale.memory
        self.capacity = c.memory / self.scale.memory
        self.overflow_rate = np.where(c.host, 0.0, self.scale.memory / (c.bandwidth * self.scale.time))
        self.backward = g.backward
        self.training = bool(g.backward.any())
        self.overlap = problem.objective.overlap
        self.shared = problem.colocation_shared
        self.unit = np.asarray(g.group_id if self.shared else np.arange(g.n), dtype=np.int64)
        self.units = np.unique(self.unit)
        self.pins = {g.index[o]: c.index[d] for o, d in problem.pins.items()}
        self.unit_allowed = self._unit_allowed()
        self.views: dict[str, Any] = {}  # derived data templates share (e.g. the chain view), built once per model
        self._links: dict[type[Link], tuple[Link, str]] = {}

    # ------------------------------------------------------------------ links
    def provide(self, link: Link, by: str = "") -> None:
        """Record ``link`` (a template calls this from ``build``); a second provider is an error."""
        kind = type(link)
        if kind in self._links:
            raise SpecError(f"formulation: {by or 'a template'} provides {kind.__name__}, which "
                            f"{self._links[kind][1] or 'another template'} already provides; keep one of them")
        self._links[kind] = (link, by)

    def link(self, kind: type[L]) -> L:
        """The link of type ``kind``; :class:`SpecError` when no template of the model provides it."""
        if kind not in self._links:
            raise SpecError(f"formulation: {kind.__name__} is needed but no template provides it; "
                            "add a template that does (see BlockTemplate.provides)")
        return self._links[kind][0]  # type: ignore[return-value]

    def has(self, kind: type[Link]) -> bool:
        return kind in self._links

    def view(self, key: str, factory: Callable[[], Any]) -> Any:
        """Derived data shared by several templates of one model, computed on first use."""
        if key not in self.views:
            self.views[key] = factory()
        return self.views[key]

    # the links most templates read, by their usual names
    def x(self, v: int, d: int) -> Any:
        return self.link(AssignmentLink).x(v, d)

    def y(self, v: int, b: int) -> Any:
        return self.link(AssignmentLink).y(v, b)

    def comm_expr(self, d: int, p: str, which: str) -> Any:
        return self.link(TransferLink).comm(d, p, which)

    def overflow_expr(self, d: int) -> Any:
        """Overflow time of device ``d``: 0 unless an overflow template provides it."""
        return self.link(OverflowLink).overflow(d) if self.has(OverflowLink) else 0.0

    def memory_weight(self, d: int) -> float:
        """The factor a row about device ``d``'s memory is multiplied by: ``1 / capacity`` (model units) when the
        capacity is finite and positive, else 1, so that the row's right-hand side is 1 whatever the
        other devices' capacities."""
        cap = float(self.capacity[d])
        return 1.0 / cap if np.isfinite(cap) and cap > 0 else 1.0

    def _unit_allowed(self) -> np.ndarray:
        ok = np.ones((self.n, self.D), dtype=bool)
        np.logical_and.at(ok, self.unit, self.allowed)
        for u in self.units:
            if not ok[u].any():
                members = [self.ops[i] for i in np.flatnonzero(self.unit == u)]
                pinned = [(v, d) for v, d in self.pins.items() if self.unit[v] == u]  # the pin left no device
                if pinned:
                    v, d = pinned[0]
                    raise InfeasibleError(f"Pin({self.ops[v]!r}, {self.devices[d]!r}): op {self.ops[v]!r} or an op "
                                          "colocated with it cannot run there; pin the group to an allowed device")
                raise InfeasibleError(f"op(s) {members} have no device they may all run on; "
                                      "relax AllowedKinds/colocation or add a device of a suitable kind")
        return ok

    # ------------------------------------------------------------------ derived sets
    @property
    def passes(self) -> tuple[str, ...]:
        return PASSES if self.training else PASSES[:1]

    def pass_ops(self, p: str) -> np.ndarray:
        return np.flatnonzero(self.backward == (p == "backward"))

    def op_allowed(self, v: int, d: int) -> bool:
        return bool(self.unit_allowed[self.unit[v], d])

    def cross_edges(self) -> list[tuple[int, int]]:
        """Edges between different assignment units (edges inside a unit are never cut)."""
        g = self.graph
        keep = self.unit[g.src] != self.unit[g.dst]
        return list(zip(g.src[keep].tolist(), g.dst[keep].tolist()))


def _memory_scale(problem: Problem) -> float:
    cap = problem.cluster.memory
    finite = cap[np.isfinite(cap)]
    if finite.size:
        return float(finite.max())
    total = float((problem.graph.param_bytes + problem.graph.activation_bytes).sum())
    return total if total > 0 else 1.0


class Warm:
    """A placement's values in model units, computed once and shared by the templates' ``values``.

    ``schedule`` is the placement's :class:`~placement_dsl.schedule.Schedule` (in cost-model
    units; templates with time variables divide by ``ctx.scale.time``), or ``None``.
    ``replica_sets`` are its devices per stage (:attr:`~placement_dsl.placement.Placement.replica_sets`).
    """

    def __init__(self, ctx: Context, assign: np.ndarray, schedule: Any,
                 replica_sets: tuple[tuple[int, ...], ...]):
        self.ctx = ctx
        self.schedule = schedule
        self.replica_sets = replica_sets
        self.assign = np.asarray(assign, dtype=np.int64)
        n, D = ctx.n, ctx.D
        self.X = np.zeros((n, D))
        self.X[np.arange(n), self.assign] = 1.0
        g = ctx.graph
        cross = self.assign[g.src] != self.assign[g.dst]
        self.cin = np.zeros((n, D))
        self.cin[g.src[cross], self.assign[g.dst[cross]]] = 1.0
        self.cout = np.zeros((n, D))
        self.cout[g.src[cross], self.assign[g.src[cross]]] = 1.0

    def compute(self, p: str) -> np.ndarray:
        rows = self.ctx.pass_ops(p)
        return (self.ctx.work[rows] * self.X[rows]).sum(axis=0)

    def transfer(self, p: str, which: str) -> np.ndarray:
        if "routed_transfer" in self.ctx.views:  # a routed tensor cut prices transfers per route
            return self.ctx.views["routed_transfer"](self, p, which)
        rows = self.ctx.pass_ops(p)
        cut = {"in": self.cin, "out": self.cout}[which]
        return (self.ctx.comm[rows] * cut[rows]).sum(axis=0)

    def memory(self) -> np.ndarray:
        return self.ctx.mem @ self.X

    def overflow(self) -> np.ndarray:
        ctx = self.ctx
        excess = np.where(np.isfinite(ctx.capacity), self.memory() - np.where(np.isfinite(ctx.capacity),
                                                                              ctx.capacity, 0.0), 0.0)
        return ctx.overflow_rate * np.maximum(excess, 0.0)


class BlockTemplate:
    """A reusable recipe adding documented components to a block.

    Subclasses set ``name`` (the block's name), ``stage`` (reading order), the links they
    ``provides`` / ``needs`` / ``uses`` (optional: built after its provider when one is
    present) and implement :meth:`build` and :meth:`values`.
    """

    name: ClassVar[str] = ""
    stage: ClassVar[Stage] = Stage.STRUCTURE
    provides: ClassVar[tuple[type[Link], ...]] = ()
    needs: ClassVar[tuple[type[Link], ...]] = (AssignmentLink,)
    uses: ClassVar[tuple[type[Link], ...]] = ()

    def check(self, problem: Problem) -> None:
        """Raise :class:`~placement_dsl.errors.SpecError` for a problem the template cannot write.

        Called when a formulation lists its steps, so ``accepts`` refuses with the reason (and
        ``formulation="auto"`` moves on) before anything is built.
        """

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        raise NotImplementedError

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        """``(variable data, value)`` for every variable the template created."""
        raise NotImplementedError

    @property
    def doc(self) -> str:
        return (type(self).__doc__ or self.name).strip().splitlines()[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


TEMPLATES: dict[type[BlockTemplate], str] = {}


def register(cls: type[T]) -> type[T]:
    """Class decorator: list a template in the library (:data:`TEMPLATES`, keyed by class).

    Registered templates are covered by the conformance checks of
    :mod:`placement_dsl.testing` without a test of their own.
    """
    if not cls.name:
        raise SpecError(f"template {cls.__name__} needs a block name")
    TEMPLATES[cls] = cls.name
    return cls


def build_order(templates: list[BlockTemplate]) -> list[BlockTemplate]:
    """Templates ordered so that every link is provided before it is needed or used.

    Kahn's algorithm over the provides/needs/uses links; among ready templates the lower
    :class:`Stage` comes first, then the given order. A needed link that no template
    provides, or a cycle, is a :class:`SpecError` naming the templates.
    """
    providers = {}
    for i, t in enumerate(templates):
        for kind in t.provides:
            providers.setdefault(kind, i)
    for t in templates:
        missing = [k.__name__ for k in t.needs if k not in providers]
        if missing:
            raise SpecError(f"formulation: template {t!r} needs {missing}, which no template of the formulation "
                            "provides; add the template that provides it")
    deps = [{providers[k] for k in (*t.needs, *t.uses) if k in providers} - {i} for i, t in enumerate(templates)]
    done: list[int] = []
    ready = [i for i, d in enumerate(deps) if not d]
    while ready:
        i = min(ready, key=lambda j: (templates[j].stage, j))
        ready.remove(i)
        done.append(i)
        ready.extend(j for j, d in enumerate(deps) if j not in done and j not in ready and d <= set(done))
    if len(done) < len(templates):
        stuck = [repr(templates[i]) for i in range(len(templates)) if i not in done]
        raise SpecError(f"formulation: templates {stuck} need links from one another in a cycle")
    return [templates[i] for i in done]


def settle(expr: Any) -> Any:
    """A constraint rule's result as Pyomo takes it: a comparison that constants alone decide is skipped
    when it holds and :attr:`pyo.Constraint.Infeasible` when it fails (the model then has no feasible
    point, which the solve layer reports as infeasible); Pyomo refuses a bare ``True`` or ``False``.

    Rows over sums that may be empty (no arc, no variable left by pins or colocation) end here.
    """
    if isinstance(expr, (bool, np.bool_)):
        return pyo.Constraint.Skip if expr else pyo.Constraint.Infeasible
    return expr


def indexed_values(component: Any, values: Any) -> Iterator[tuple[Any, float]]:
    """Pair each index of ``component`` with ``values(index)``."""
    for index in component:
        yield component[index], float(values(index))
