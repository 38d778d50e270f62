"""Problem x formulation -> a Pyomo model of named blocks, with a map to and from placements.

>>> from placement_dsl.graph import Graph, Op
>>> from placement_dsl.problem import Problem, Stages
>>> from placement_dsl.objectives import Bottleneck
>>> from placement_dsl.constraints import DagOrder
>>> g = Graph([Op(name="a", work=1, out_bytes=2), Op(name="b", work=3)], [("a", "b")])
>>> c = compile(Problem(g, Stages(2), Bottleneck(), [DagOrder()]))
>>> c.formulation.name, [b.local_name for b in c.model.component_objects(pyo.Block, descend_into=False)]
('exact', ['assignment', 'dag_order', 'tensor_cut', 'device_load', 'max_load'])
>>> p = c.problem.placement([0, 1])
>>> c.varmap.residual(c.varmap.values(p))[0] <= 1e-9
True
"""
from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyomo.environ as pyo
from pyomo.common.collections import ComponentMap
from pyomo.common.gc_manager import PauseGC

from .blocks.base import BlockTemplate, Context, Scale, ScheduleLink, Warm, build_order
from .deadline import Deadline
from .errors import SpecError
from .evaluate import CostModel
from .formulations import Formulation, get
from .placement import Placement
from .problem import Problem
from .schedule import Schedule, transfer_tasks


@dataclass
class VarMap:
    """Placements to variable values (warm start) and back."""

    model: pyo.ConcreteModel
    context: Context
    built: list[tuple[pyo.Block, BlockTemplate]]

    def values(self, placement: Placement) -> ComponentMap:
        """A value for every variable of the model, encoding ``placement``: ``{VarData: float}``.

        A ``ComponentMap`` (Pyomo's dict keyed by component identity; VarData are not hashable).

        All constraints hold when the placement is feasible for the formulation (check
        with :meth:`residual`).
        """
        assign = np.asarray(placement.assign)
        if assign.shape != (self.context.n,):
            raise SpecError(f"placement has {assign.shape[0]} ops, the model {self.context.n}")
        warm = Warm(self.context, assign, placement.schedule, placement.replica_sets)
        out = ComponentMap()
        for blk, template in self.built:
            for var, value in template.values(blk, self.context, warm):
                out[var] = value
        missing = [v.name for v in self.model.component_data_objects(pyo.Var, descend_into=True) if v not in out]
        if missing:
            raise SpecError(f"warm start: no value for {len(missing)} variable(s), e.g. {missing[:3]}; "
                            "the template that created them must yield them from values()")
        return out

    def set_values(self, placement: Placement) -> None:
        """Set every variable of the model to its value for ``placement`` (:meth:`values`), as a solver would."""
        for var, value in self.values(placement).items():
            var.set_value(value, skip_validation=True)

    def block(self, name: str) -> tuple[pyo.Block, BlockTemplate]:
        """The block named ``name`` and the template that built it."""
        found = [(blk, template) for blk, template in self.built if blk.local_name == name]
        if not found:
            raise SpecError(f"no block {name!r}; the model has {[blk.local_name for blk, _ in self.built]}")
        return found[0]

    def residual(self, values: Any, block: pyo.Block | None = None) -> tuple[float, str]:
        """Largest violation (constraints, bounds, integrality) under ``values``, and where it is.

        Variables missing from ``values`` keep their current values. With ``block``, only that
        block's constraints count (a template's own rows: the conformance check).
        """
        saved = ComponentMap((v, v.value) for v in values)
        try:
            for v, x in values.items():
                v.set_value(x, skip_validation=True)
            return builtins.max([(0.0, ""), *self._bound_violations(values),
                                 *self._constraint_violations(block or self.model)], key=lambda t: t[0])
        finally:
            for v, x in saved.items():
                v.set_value(x, skip_validation=True)

    @staticmethod
    def _bound_violations(values: Any) -> list[tuple[float, str]]:
        out = []
        for v, x in values.items():
            lb, ub = v.lb, v.ub
            viol = max(0.0 if lb is None else lb - x, 0.0 if ub is None else x - ub)
            if v.is_integer():
                viol = max(viol, abs(x - round(x)))
            if viol > 0:
                out.append((viol, v.name))
        return out

    @staticmethod
    def _constraint_violations(where: pyo.Block) -> list[tuple[float, str]]:
        out = []
        for c in where.component_data_objects(pyo.Constraint, active=True, descend_into=True):
            body = pyo.value(c.body, exception=False)
            if body is None:
                out.append((float("inf"), c.name))
                continue
            lb, ub = c.lb, c.ub
            viol = max(0.0 if lb is None else lb - body, 0.0 if ub is None else body - ub)
            if viol > 0:
                out.append((viol, c.name))
        return out

    def placement(self, model: pyo.ConcreteModel | None = None) -> Placement:
        """The placement the model's current variable values encode (binaries rounded)."""
        if model is not None and model is not self.model:
            raise SpecError("varmap.placement: pass the compiled model (or nothing)")
        ctx = self.context
        score = np.array([[_value(ctx.x(v, d)) for d in range(ctx.D)] for v in range(ctx.n)])
        if np.isnan(score).all(axis=1).any():
            raise SpecError("varmap.placement: the model holds no values; solve it or load a solution first")
        assign = np.nanargmax(np.nan_to_num(score, nan=-1.0), axis=1)
        placement = ctx.problem.placement(assign, source="mip")
        replicas = self._replicas(assign)
        if replicas:
            placement = placement.with_replicas(replicas)
        if not ctx.has(ScheduleLink):
            return placement
        return Placement(placement.graph, placement.cluster, assign, "mip", schedule=self._schedule(placement),
                         replicas=self._replicas(assign) or None)

    def _replicas(self, assign: np.ndarray) -> dict[str, list[str]]:
        """The solution's replica sets, when a template provides them (Tarnawski App. C.2)."""
        from .blocks.replication import ReplicaLink

        return self.context.link(ReplicaLink).read(assign) if self.context.has(ReplicaLink) else {}

    def _schedule(self, placement: Placement) -> Any:
        """The solution's start times (cost-model units) for every op and every transfer the placement needs."""
        ctx, link = self.context, self.context.link(ScheduleLink)
        start = np.array([_value(link.start(v)) for v in range(ctx.n)]) * ctx.scale.time
        prod, recv, _ = transfer_tasks(placement)
        transfers = {(int(u), int(d)): _value(link.transfer_start(int(u), int(d))) * ctx.scale.time
                     for u, d in zip(prod.tolist(), recv.tolist())}
        return Schedule(np.maximum(start, 0.0), transfers)


def _value(expr: Any) -> float:
    if isinstance(expr, (int, float)):
        return float(expr)
    value = pyo.value(expr, exception=False)
    return float("nan") if value is None else float(value)


@dataclass
class Compiled:
    """A compiled problem: the model, its variable map and units.

    ``model objective * objective_scale`` is in cost-model units; re-evaluate results
    with ``cost_model`` (e.g. ``problem.evaluate(placement)``).
    """

    model: pyo.ConcreteModel
    varmap: VarMap
    problem: Problem
    formulation: Formulation
    cost_model: CostModel
    scale: Scale
    terms: dict[str, str] = field(default_factory=dict)

    @property
    def objective_scale(self) -> float:
        return self.scale.time

    @property
    def objective(self) -> pyo.Objective:
        return next(self.model.component_data_objects(pyo.Objective, active=True, descend_into=True))

    def size(self) -> dict[str, dict[str, int]]:
        """Variables and constraints per block (structure tests, reports)."""
        out = {}
        for blk in self.model.component_objects(pyo.Block, descend_into=False):
            out[blk.local_name] = {
                "variables": sum(1 for _ in blk.component_data_objects(pyo.Var, descend_into=True)),
                "constraints": sum(1 for _ in blk.component_data_objects(pyo.Constraint, active=True,
                                                                         descend_into=True)),
            }
        return out


def compile(problem: Problem, formulation: str | Formulation = "auto", deadline: Deadline | None = None) -> Compiled:
    """Build the Pyomo model of ``problem`` with ``formulation`` (a registered name, an object, or ``"auto"``).

    The formulation's skeleton and its rules for the problem's terms give the templates;
    they are built in the order their links require (:func:`~placement_dsl.blocks.base.build_order`),
    each into a block of its name; then the formulation's Pyomo transformation, if any
    (e.g. ``gdp.bigm`` for disjunctions), is applied. With a ``deadline``, the build stops between
    blocks once it is spent (:class:`~placement_dsl.deadline.BudgetSpent`, naming the next block).

    The interpreter's cyclic collector is paused meanwhile, as Pyomo's writers pause it: every collection walks the
    growing model, a fifth of a large build's time.
    """
    with PauseGC():
        return _compile(problem, formulation, deadline)


def _compile(problem: Problem, formulation: str | Formulation, deadline: Deadline | None) -> Compiled:
    form = get(formulation, problem)
    steps = form.steps(problem)
    by_template = {id(s.template): s for s in steps}
    ordered = [by_template[id(t)] for t in build_order([s.template for s in steps])]
    ctx = Context(problem)
    model = pyo.ConcreteModel(name=f"{problem.graph.name}:{form.name}")
    built, terms = [], {}
    for step in ordered:
        blk = pyo.Block(doc=step.template.doc)
        block_name = step.template.name
        if deadline is not None:
            deadline.check(f"block {block_name!r} of the {form.name!r} model")
        if model.component(block_name) is not None:
            raise SpecError(f"formulation {form.name!r}: templates {terms[block_name][0]} and {step.template!r} "
                            f"both build block {block_name!r}; give one of them another name")
        model.add_component(block_name, blk)
        step.template.build(blk, ctx)
        built.append((blk, step.template))
        terms[block_name] = (repr(step.template), "formulation" if step.term is None else repr(step.term))
    goals = list(model.component_data_objects(pyo.Objective, active=True, descend_into=True))
    if len(goals) != 1:
        raise SpecError(f"formulation {form.name!r} built {len(goals)} objectives; exactly one objective term "
                        "template must add a minimize Objective")
    if form.transformation:
        if deadline is not None:
            deadline.check(f"the {form.transformation!r} transformation of the {form.name!r} model")
        pyo.TransformationFactory(form.transformation).apply_to(model)
    return Compiled(model, VarMap(model, ctx, built), problem, form, problem.cost_model(), ctx.scale,
                    {name: term for name, (_, term) in terms.items()})
