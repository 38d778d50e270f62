"""The schedule templates hand ``gdp.bigm`` every disjunct row's big-M (a ``BigM`` suffix on the pair block), derived
from the same variable bounds the transformation would estimate them from: the estimates took a fifth of the
transformation's time on a 343-op sheet (4.8 of its 26.5 s under the profiler; 2.84 CPU s, 2.16 s handed)."""
from __future__ import annotations

import pyomo.environ as pyo
import pytest
from pyomo.gdp import Disjunct

from placement_dsl.compile import compile
from placement_dsl.formulations.schedule import transformed
from placement_dsl.problem import Problem
from tests.formulations.test_schedule_milp import broadcast, flows, fork, join
from tests.solve.sheets import layered_sheet


def _disjunct_rows(model: pyo.ConcreteModel) -> list:
    return [c for d in model.component_data_objects(Disjunct, descend_into=True)
            for c in d.component_data_objects(pyo.Constraint, descend_into=True)]


def _big_ms(problem: Problem, handed: bool) -> dict[str, tuple]:
    """``{row name: (M value, where it came from)}`` after ``gdp.bigm``, with the handed big-Ms or without them."""
    model = compile(problem, transformed("schedule-untransformed", None)).model
    if not handed:
        for blk in list(model.component_objects(pyo.Suffix, descend_into=True)):
            blk.parent_block().del_component(blk)
    bigm = pyo.TransformationFactory("gdp.bigm")
    bigm.apply_to(model)
    out = {}
    for row in _disjunct_rows(model):
        (lo, lo_src, _), (up, up_src, _) = bigm.get_M_value_src(row)
        out[row.name] = (up, up_src) if row.upper is not None else (-lo, lo_src)  # the excess over the bound
    return out


@pytest.mark.parametrize("make", [lambda: fork("port"), lambda: join("channel"), lambda: join("port"), broadcast,
                                  flows, lambda: layered_sheet(12, 3, 2)],
                         ids=["fork", "join-channel", "join-port", "broadcast", "flows", "sheet-12x3"])
def test_every_big_m_is_handed_and_equals_the_estimate(make):
    problem = make()
    handed, estimated = _big_ms(problem, True), _big_ms(problem, False)
    assert handed and handed.keys() == estimated.keys()
    for name, (value, source) in handed.items():
        assert source is not None, f"{name}: estimated by the transformation"
        assert value == pytest.approx(max(estimated[name][0], 0.0), rel=1e-12, abs=1e-12), name
        assert estimated[name][1] is None

