"""A linear Pyomo model as arrays: the hand-off format of the native backends.

``min c @ x + offset`` subject to ``row_lower <= A @ x <= row_upper`` and
``col_lower <= x <= col_upper``, with ``integer[j]`` marking integer columns. ``A`` is kept in
compressed sparse column form (``start``, ``index``, ``value``), the layout HiGHS takes in bulk.
Columns are the model's unfixed variables that appear in the objective or an active constraint,
in order of first appearance; fixed variables are folded into the row bounds and the offset.
Rows keep their constraint objects; a row's name is computed only when asked (:meth:`LinearModel.row_name`):
naming every row cost as much as reading its coefficients.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pyomo.environ as pyo
from pyomo.common.gc_manager import PauseGC
from pyomo.core.base.constraint import ConstraintData
from pyomo.core.base.objective import ObjectiveData
from pyomo.core.base.var import VarData
from pyomo.repn.linear import LinearRepnVisitor

from ..errors import InfeasibleError, SpecError

INF = float("inf")


@dataclass
class LinearModel:
    """Arrays of a mixed-integer linear program (minimization)."""

    columns: list[VarData]
    cost: np.ndarray
    offset: float
    col_lower: np.ndarray
    col_upper: np.ndarray
    integer: np.ndarray
    row_lower: np.ndarray
    row_upper: np.ndarray
    start: np.ndarray
    index: np.ndarray
    value: np.ndarray
    rows: list[ConstraintData]

    @property
    def n_cols(self) -> int:
        return len(self.cost)

    @property
    def n_rows(self) -> int:
        return len(self.row_lower)

    def row_name(self, k: int) -> str:
        """The name of row ``k``'s constraint."""
        return self.rows[k].name

    @property
    def row_names(self) -> list[str]:
        """Every row's name (computed on each call: for errors and debugging)."""
        return [con.name for con in self.rows]

    @property
    def is_mip(self) -> bool:
        return bool(self.integer.any())

    def activity(self, x: np.ndarray) -> np.ndarray:
        """Row activities ``A @ x``."""
        counts = np.diff(self.start)
        contrib = self.value * np.repeat(x, counts)
        return np.bincount(self.index, weights=contrib, minlength=self.n_rows)

    def objective(self, x: np.ndarray) -> float:
        """``c @ x + offset``."""
        return float(self.cost @ x + self.offset)

    def residual(self, x: np.ndarray) -> tuple[float, str]:
        """Largest violation of a row, a column bound or integrality, and what is violated.

        Examples
        --------
        >>> m = pyo.ConcreteModel(); m.x = pyo.Var(bounds=(0, 1))
        >>> m.c = pyo.Constraint(expr=m.x >= 0.5); m.o = pyo.Objective(expr=m.x)
        >>> lm = extract(m); lm.residual(np.array([0.25]))
        (0.25, 'c')
        """
        act = self.activity(x)
        row_viol = np.maximum(self.row_lower - act, act - self.row_upper)
        col_viol = np.maximum(self.col_lower - x, x - self.col_upper)
        int_viol = np.where(self.integer, np.abs(x - np.round(x)), 0.0)
        worst = (0.0, "")
        for viol, name in ((row_viol, self.row_name), (col_viol, self._column_name), (int_viol, self._column_name)):
            if viol.size and viol.max() > worst[0]:
                k = int(viol.argmax())
                worst = (float(viol[k]), name(k))
        return worst

    def vector(self, values: Mapping) -> np.ndarray:
        """Column values from ``{var: value}`` (a ``ComponentMap``) or ``{var name: value}``.

        A column without a value is an error.
        """
        by_name = bool(values) and isinstance(next(iter(values)), str)
        x = np.empty(self.n_cols)
        for j, var in enumerate(self.columns):
            key = var.name if by_name else var
            if key not in values or values[key] is None:
                raise SpecError(f"start gives no value for variable {var.name!r}; give every variable a value")
            x[j] = values[key]
        return x

    def payload(self) -> LinearModel:
        """A copy without the Pyomo objects, cheap to send to a worker process."""
        return replace(self, columns=[], rows=[])

    def _column_name(self, j: int) -> str:
        return self.columns[j].name

    def load(self, x: np.ndarray) -> None:
        """Write column values into the model's variables (integers rounded)."""
        for var, val, is_int in zip(self.columns, x.tolist(), self.integer.tolist()):
            var.set_value(round(val) if is_int else val, skip_validation=True)


def _linear(visitor: LinearRepnVisitor, expr, kind: str, owner) -> tuple[float, dict[int, float]]:
    """``expr``'s constant and ``{id(var): coefficient}``, fixed variables folded in (the visitor Pyomo's LP and NL
    writers use; three times as fast as ``generate_standard_repn``). ``kind`` and ``owner`` name it in the error."""
    repn = visitor.walk_expression(expr)
    if repn.nonlinear is not None:
        raise SpecError(f"{kind} {owner.name!r} is nonlinear; the native backends take linear models only "
                        "(linearize it, or pass a Pyomo NLP/MINLP solver name)")
    return float(repn.constant), repn.linear


def _parts(model: pyo.ConcreteModel) -> tuple[ObjectiveData, list[ConstraintData]]:
    """The one active objective (a minimization) and the active constraints, in one walk of the blocks (a walk of a
    transformed schedule model's tens of thousands of blocks cost as much as reading their rows, and it took three).

    :class:`SpecError` when the model holds active disjunctions, whose rows would be read as hard constraints: apply
    ``gdp.bigm`` or ``gdp.hull`` first (``Formulation(transformation=...)``).
    """
    from pyomo.gdp import Disjunct, Disjunction

    objectives, constraints, left = [], [], []
    for comp in model.component_data_objects((pyo.Constraint, pyo.Objective, Disjunction, Disjunct), active=True):
        ctype = comp.ctype
        (constraints if ctype is pyo.Constraint else objectives if ctype is pyo.Objective else left).append(comp)
    if left:
        names = [comp.name for comp in left[:3]]
        raise SpecError(f"model {model.name!r} has {len(left)} untransformed disjunction(s) or disjunct(s), e.g. "
                        f"{names}; apply pyo.TransformationFactory('gdp.bigm') or ('gdp.hull') before solving")
    if len(objectives) != 1:
        raise SpecError(f"model {model.name!r} has {len(objectives)} active objectives; solve needs exactly one")
    if objectives[0].sense != pyo.minimize:
        raise SpecError(f"objective {objectives[0].name!r} maximizes; the solve layer expects a minimization")
    return objectives[0], constraints


def extract(model: pyo.ConcreteModel) -> LinearModel:
    """The arrays of a linear Pyomo model with one active minimize objective (no untransformed disjunctions).

    The interpreter's cyclic collector is paused meanwhile, as Pyomo's writers pause it (a collection walks the whole
    model).
    """
    with PauseGC():
        return _extract(model)


def _extract(model: pyo.ConcreteModel) -> LinearModel:
    obj, constraints = _parts(model)
    visitor = LinearRepnVisitor({})
    var_map = visitor.var_map
    offset, cost = _linear(visitor, obj.expr, "objective", obj)
    column: dict[int, int] = {}
    for vid in cost:
        column.setdefault(vid, len(column))
    counts, ids, coefs, lower, upper, rows = [], [], [], [], [], []
    for con in constraints:
        lo, body, up = con.to_bounded_expression(True)
        const, linear = _linear(visitor, body, "constraint", con)
        lo = -INF if lo is None else float(lo) - const
        up = INF if up is None else float(up) - const
        if not linear:
            if lo > 1e-9 or up < -1e-9:
                raise InfeasibleError(f"constraint {con.name!r} is violated by constants alone ({lo} <= 0 <= {up}): "
                                      "the model has no feasible point")
            continue
        for vid in linear:
            column.setdefault(vid, len(column))
        counts.append(len(linear))
        ids.extend(linear)
        coefs.extend(linear.values())
        lower.append(lo)
        upper.append(up)
        rows.append(con)
    columns = [var_map[vid] for vid in column]
    j = np.fromiter(map(column.__getitem__, ids), dtype=np.int32, count=len(ids))
    cost_vector = np.zeros(len(columns))
    np.add.at(cost_vector, [column[vid] for vid in cost], np.fromiter(cost.values(), dtype=float, count=len(cost)))
    return _assemble(columns, cost_vector, offset, np.repeat(np.arange(len(counts), dtype=np.int32), counts), j,
                     np.asarray(coefs, dtype=float), lower, upper, rows)


def _assemble(columns, cost, offset, i, j, v, lower, upper, rows) -> LinearModel:
    n = len(columns)
    order = np.argsort(j, kind="stable")  # by column, rows ascending within each (i is ascending already)
    start = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(j, minlength=n), out=start[1:])
    col_lower = np.array([-INF if x.lb is None else float(x.lb) for x in columns])
    col_upper = np.array([INF if x.ub is None else float(x.ub) for x in columns])
    integer = np.array([x.is_integer() or x.is_binary() for x in columns], dtype=bool)
    return LinearModel(columns, cost, offset, col_lower, col_upper, integer, np.asarray(lower, dtype=float),
                       np.asarray(upper, dtype=float), start, i[order].astype(np.int32), v[order], rows)
