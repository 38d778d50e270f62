"""What every block template shares: the scaled problem data, the template interface, the registry.

A template adds components to one ``pyo.Block`` (:meth:`BlockTemplate.build`) and, given a
placement, gives every variable it created a value (:meth:`BlockTemplate.values`) such that
its constraints hold whenever the placement is feasible — the warm start.

Units. Times are divided by ``scale.time`` (a lower bound on the optimum, so the objective
is near 1) and bytes by ``scale.memory`` (the largest finite capacity), so coefficients stay
well conditioned; ``model objective * scale.time`` is in cost-model units.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyomo.environ as pyo

from ..errors import InfeasibleError, SpecError

if TYPE_CHECKING:
    from ..problem import Problem

# build order of the phases: assignment first, objective last
ASSIGN, STRUCTURE, CUT, COST, LOAD, OBJECTIVE = 0, 10, 20, 30, 40, 50
PASSES = ("forward", "backward")


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
        self.unit_allowed = self._unit_allowed()
        self.pins = {g.index[o]: c.index[d] for o, d in problem.pins.items()}
        self.blocks: dict[str, pyo.Block] = {}
        # links filled by templates
        self.x: Callable[[int, int], Any] = _missing("an assignment template")
        self.y: Callable[[int, int], Any] = _missing("an assignment template")
        self.comm_expr: Callable[[int, str, str], Any] = _missing("a tensor_cut template")
        self.overflow_expr: Callable[[int], Any] = lambda d: 0.0

    def _unit_allowed(self) -> np.ndarray:
        ok = np.ones((self.n, self.D), dtype=bool)
        np.logical_and.at(ok, self.unit, self.allowed)
        for u in self.units:
            if not ok[u].any():
                members = [self.ops[i] for i in np.flatnonzero(self.unit == u)]
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

    def block(self, name: str) -> pyo.Block:
        if name not in self.blocks:
            raise SpecError(f"formulation: block {name!r} is needed but was not built; add its template")
        return self.blocks[name]


def _memory_scale(problem: Problem) -> float:
    cap = problem.cluster.memory
    finite = cap[np.isfinite(cap)]
    if finite.size:
        return float(finite.max())
    total = float((problem.graph.param_bytes + problem.graph.activation_bytes).sum())
    return total if total > 0 else 1.0


def _missing(what: str) -> Callable[..., Any]:
    def fail(*_: Any) -> Any:
        raise SpecError(f"formulation: this template needs {what} built before it")
    return fail


class Warm:
    """A placement's values in model units, computed once and shared by the templates' ``values``."""

    def __init__(self, ctx: Context, assign: np.ndarray):
        self.ctx = ctx
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

    Subclasses set ``name`` (the default block name), ``phase`` (build order) and ``doc``
    and implement :meth:`build` and :meth:`values`.
    """

    name: ClassVar[str] = ""
    phase: ClassVar[int] = STRUCTURE

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


TEMPLATES: dict[str, Callable[..., BlockTemplate]] = {}


def register(cls: type[BlockTemplate]) -> type[BlockTemplate]:
    """Class decorator: make a template available by its ``name`` to terms and formulations."""
    if not cls.name:
        raise SpecError(f"template {cls.__name__} needs a name")
    TEMPLATES[cls.name] = cls
    return cls


def resolve(ref: Any) -> BlockTemplate:
    """A template from a name, a ``(name, options)`` pair or a template object."""
    if isinstance(ref, BlockTemplate):
        return ref
    name, options = (ref, {}) if isinstance(ref, str) else ref
    if name not in TEMPLATES:
        raise SpecError(f"unknown block template {name!r}; known templates are {sorted(TEMPLATES)}")
    return TEMPLATES[name](**options)


def indexed_values(component: Any, values: Any) -> Iterator[tuple[Any, float]]:
    """Pair each index of ``component`` with ``values(index)``."""
    for index in component:
        yield component[index], float(values(index))


@dataclass
class Built:
    """One built block: the template, the term it realizes (None for a formulation's skeleton)."""

    block: pyo.Block
    template: BlockTemplate
    term: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

