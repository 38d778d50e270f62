"""The hand-off arrays are read without naming rows and in one walk of the model's blocks: naming every row cost as
much as reading its coefficients, and three walks of a transformed schedule model's tens of thousands of blocks as
much again (a 596-op sheet's extraction took 7.0 CPU s, 2.6 s without them); and the interpreter's cyclic
collector is paused meanwhile, as Pyomo's writers pause it."""
from __future__ import annotations

import gc

import numpy as np
import pyomo.environ as pyo
import pytest
from pyomo.core.base.block import BlockData
from pyomo.core.base.component import ComponentData
from pyomo.gdp import Disjunct

from placement_dsl.errors import SpecError
from placement_dsl.solvers.matrix import extract


def _model() -> pyo.ConcreteModel:
    m = pyo.ConcreteModel()
    m.b = pyo.Block()
    m.b.x = pyo.Var([0, 1, 2], bounds=(0, 4))
    m.b.fixed = pyo.Var(initialize=2.0)
    m.b.fixed.fix()
    m.b.cap = pyo.Constraint(expr=m.b.x[0] + 2 * m.b.x[1] <= 3 + m.b.fixed)
    m.b.pair = pyo.Constraint([0, 1], rule=lambda b, i: b.x[i] - b.x[i + 1] >= -1)
    m.o = pyo.Objective(expr=m.b.x[2] - m.b.x[0] + 1)
    return m


def test_rows_are_named_only_when_asked(monkeypatch):
    m = _model()
    named = []
    name = ComponentData.name
    monkeypatch.setattr(ComponentData, "name", property(lambda self: named.append(self) or name.fget(self)))
    lm = extract(m)
    assert named == []
    assert lm.rows == [m.b.cap, m.b.pair[0], m.b.pair[1]]
    assert lm.row_names == ["b.cap", "b.pair[0]", "b.pair[1]"] and lm.row_name(2) == "b.pair[1]"
    assert lm.payload().rows == []


def test_the_blocks_are_walked_once(monkeypatch):
    m = _model()
    walks = []
    walk = BlockData.component_data_objects
    monkeypatch.setattr(BlockData, "component_data_objects", lambda self, *a, **k: walks.append(a) or walk(self, *a, **k))
    lm = extract(m)
    assert len(walks) == 1
    # columns in order of first appearance (objective first), the fixed variable folded into the bound
    assert lm.columns == [m.b.x[2], m.b.x[0], m.b.x[1]]
    assert lm.cost.tolist() == [1.0, -1.0, 0.0] and lm.offset == 1.0
    assert lm.row_upper.tolist() == [5.0, np.inf, np.inf] and lm.row_lower.tolist() == [-np.inf, -1.0, -1.0]
    dense = np.zeros((lm.n_rows, lm.n_cols))
    for j in range(lm.n_cols):
        dense[lm.index[lm.start[j]:lm.start[j + 1]], j] = lm.value[lm.start[j]:lm.start[j + 1]]
    assert dense.tolist() == [[0.0, 1.0, 2.0], [0.0, 1.0, -1.0], [-1.0, 0.0, 1.0]]


def test_an_untransformed_disjunct_is_refused_in_the_same_walk():
    m = _model()
    m.d = Disjunct()
    m.d.c = pyo.Constraint(expr=m.b.x[0] >= 1)
    with pytest.raises(SpecError, match=r"1 untransformed disjunction\(s\) or disjunct\(s\), e.g. \['d'\]"):
        extract(m)


def test_the_cyclic_collector_is_paused_while_the_arrays_are_read(monkeypatch):
    from placement_dsl.solvers import matrix

    seen = []
    parts = matrix._parts
    monkeypatch.setattr(matrix, "_parts", lambda model: seen.append(gc.isenabled()) or parts(model))
    assert gc.isenabled()
    extract(_model())
    assert seen == [False] and gc.isenabled()
