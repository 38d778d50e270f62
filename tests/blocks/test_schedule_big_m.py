"""The schedule templates write every pair's choices as big-M rows (``body - M (1 - y) <= bound``, as ``gdp.bigm``
would write them), each big-M the most the row's body exceeds its bound within the variables' bounds: the tightest
that keeps the row out of the way where its choice is 0, derived from the data, never a constant."""
from __future__ import annotations

import pyomo.environ as pyo
import pytest
from pyomo.contrib.fbbt.fbbt import compute_bounds_on_expr

from placement_dsl.compile import compile
from placement_dsl.problem import Problem
from tests.formulations.test_schedule_milp import broadcast, flows, fork, join
from tests.solve.sheets import layered_sheet

CHOICES = {"apart_row": "apart", "first_row": "first", "second_row": "second"}


def _big_ms(problem: Problem) -> list[tuple[str, float, float]]:
    """``(row, its big-M, the body's excess over the bound where its choice is 1)`` for every relaxed row."""
    model = compile(problem, "schedule").model
    out = []
    for rows, choice in CHOICES.items():
        for con in model.component_data_objects(pyo.Constraint, descend_into=True):
            if con.parent_component().local_name != rows:
                continue
            y = con.parent_block().component(choice)[con.index()[:2]]
            (_, body, upper) = con.to_bounded_expression(True)
            big_m = next((c for v, c in _terms(body) if v is y), 0.0)
            y.fix(1)
            excess = compute_bounds_on_expr(body)[1] - upper
            y.unfix()
            out.append((con.name, big_m, excess))
    return out


def _terms(body) -> list[tuple[object, float]]:
    from pyomo.repn import generate_standard_repn

    repn = generate_standard_repn(body, compute_values=True)
    return list(zip(repn.linear_vars, repn.linear_coefs))


@pytest.mark.parametrize("make", [lambda: fork("port"), lambda: join("channel"), lambda: join("port"), broadcast,
                                  flows, lambda: layered_sheet(12, 3, 2)],
                         ids=["fork", "join-channel", "join-port", "broadcast", "flows", "sheet-12x3"])
def test_every_big_m_is_the_rows_excess_within_the_variables_bounds(make):
    found = _big_ms(make())
    assert found and any(m > 0 for _, m, _ in found)
    for name, big_m, excess in found:
        assert big_m == pytest.approx(max(excess, 0.0), rel=1e-9, abs=1e-12), name
