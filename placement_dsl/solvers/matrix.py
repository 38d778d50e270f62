"""A linear Pyomo model as arrays: the hand-off format of the native backends.

``min c @ x + offset`` subject to ``row_lower <= A @ x <= row_upper`` and
``col_lower <= x <= col_upper``, with ``integer[j]`` marking integer columns. ``A`` is kept in
compressed sparse column form (``start``, ``index``, ``value``), the layout HiGHS takes in bulk.
Columns are the model's unfixed variables that appear in the objective or an active constraint,
in order of first appearance; fixed variables are folded into the row bounds and the offset.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pyomo.environ as pyo
from pyomo.core.base.var import VarData
from pyomo.repn import generate_standard_repn

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
    row_names: list[str]

    @property
    def n_cols(self) -> int:
        return len(self.cost)

    @property
    def n_rows(self) -> int:
        return len(self.row_lower)

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
        for viol, names in ((row_viol, self.row_names), (col_viol, None), (int_viol, None)):
            if viol.size and viol.max() > worst[0]:
                k = int(viol.argmax())
                name = names[k] if names is not None else self.columns[k].name
                worst = (float(viol[k]), name)
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
        return replace(self, columns=[], row_names=[])

    def load(self, x: np.ndarray) -> None:
        """Write column values into the model's variables (integers rounded)."""
        for var, val, is_int in zip(self.columns, x.tolist(), self.integer.tolist()):
            var.set_value(round(val) if is_int else val, skip_validation=True)


def active_objective(model: pyo.ConcreteModel) -> pyo.Objective:
    """The single active objective, turned into a minimization check."""
    objs = list(model.component_data_objects(pyo.Objective, active=True))
    if len(objs) != 1:
        raise SpecError(f"model {model.name!r} has {len(objs)} active objectives; solve needs exactly one")
    if objs[0].sense != pyo.minimize:
        raise SpecError(f"objective {objs[0].name!r} maximizes; the solve layer expects a minimization")
    return objs[0]


class _Columns:
    """Assigns column numbers to variables in order of first appearance."""

    def __init__(self) -> None:
        self.ids: dict[int, int] = {}
        self.vars: list[VarData] = []

    def __call__(self, var: VarData) -> int:
        j = self.ids.get(id(var))
        if j is None:
            j = self.ids[id(var)] = len(self.vars)
            self.vars.append(var)
        return j


def _linear(expr, what: str):
    repn = generate_standard_repn(expr, quadratic=False, compute_values=True)
    if not repn.is_linear():
        raise SpecError(f"{what} is nonlinear; the native backends take linear models only "
                        "(linearize it, or pass a Pyomo NLP/MINLP solver name)")
    return repn


def refuse_disjunctions(model: pyo.ConcreteModel) -> None:
    """:class:`SpecError` when ``model`` holds active disjunctions: their rows would be read as hard
    constraints. Apply ``gdp.bigm`` or ``gdp.hull`` first (``Formulation(transformation=...)``)."""
    from pyomo.gdp import Disjunct, Disjunction

    left = [d.name for d in model.component_data_objects((Disjunction, Disjunct), active=True, descend_into=True)]
    if left:
        raise SpecError(f"model {model.name!r} has {len(left)} untransformed disjunction(s) or disjunct(s), e.g. "
                        f"{left[:3]}; apply pyo.TransformationFactory('gdp.bigm') or ('gdp.hull') before solving")


def extract(model: pyo.ConcreteModel) -> LinearModel:
    """The arrays of a linear Pyomo model with one active minimize objective (no untransformed disjunctions)."""
    refuse_disjunctions(model)
    cols = _Columns()
    obj = active_objective(model)
    orepn = _linear(obj.expr, f"objective {obj.name!r}")
    cost_terms = [(cols(v), float(c)) for v, c in zip(orepn.linear_vars, orepn.linear_coefs)]
    rows_i, rows_j, rows_v, lower, upper, names = [], [], [], [], [], []
    for con in model.component_data_objects(pyo.Constraint, active=True):
        repn = _linear(con.body, f"constraint {con.name!r}")
        k = len(lower)
        const = float(repn.constant)
        lo = -INF if con.lower is None else float(pyo.value(con.lower)) - const
        up = INF if con.upper is None else float(pyo.value(con.upper)) - const
        if not repn.linear_vars:
            if lo > 1e-9 or up < -1e-9:
                raise InfeasibleError(f"constraint {con.name!r} is violated by constants alone ({lo} <= 0 <= {up}): "
                                      "the model has no feasible point")
            continue
        for v, c in zip(repn.linear_vars, repn.linear_coefs):
            rows_i.append(k)
            rows_j.append(cols(v))
            rows_v.append(float(c))
        lower.append(lo)
        upper.append(up)
        names.append(con.name)
    return _assemble(cols.vars, cost_terms, float(orepn.constant), rows_i, rows_j, rows_v, lower, upper, names)


def _assemble(columns, cost_terms, offset, rows_i, rows_j, rows_v, lower, upper, names) -> LinearModel:
    n = len(columns)
    cost = np.zeros(n)
    for j, c in cost_terms:
        cost[j] += c
    i = np.asarray(rows_i, dtype=np.int32)
    j = np.asarray(rows_j, dtype=np.int32)
    v = np.asarray(rows_v, dtype=float)
    order = np.lexsort((i, j))
    start = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(j, minlength=n), out=start[1:])
    col_lower = np.array([-INF if x.lb is None else float(x.lb) for x in columns])
    col_upper = np.array([INF if x.ub is None else float(x.ub) for x in columns])
    integer = np.array([x.is_integer() or x.is_binary() for x in columns], dtype=bool)
    return LinearModel(columns, cost, offset, col_lower, col_upper, integer, np.asarray(lower, dtype=float),
                       np.asarray(upper, dtype=float), start, i[order], v[order], names)
