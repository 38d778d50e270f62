"""limits.amount: the one check of a cost (a time or a byte count) for the readers' cells and the constructors' fields."""
from __future__ import annotations

import math

import pytest

from placement_dsl.errors import SpecError
from placement_dsl.graph import Op
from placement_dsl.io.dnn_partitioning import graph_from_dict
from placement_dsl.limits import CELL, FIELD, MAX_TOTAL, amount

REFUSED = [True, "x", None, -1.0, math.nan, math.inf, 2 * MAX_TOTAL, 10**400]


@pytest.mark.parametrize("value", REFUSED)
def test_a_cell_and_a_field_refuse_the_same_values(value):
    with pytest.raises(SpecError, match=r"^mi: "):
        amount(value, "mi")
    with pytest.raises(ValueError, match=r"^param_bytes must be "):
        amount(value, "param_bytes", wording=FIELD, error=ValueError)


@pytest.mark.parametrize("value, expected", [(0, 0.0), ("2.5", 2.5), (MAX_TOTAL, MAX_TOTAL)])
def test_a_cost_in_range_is_a_float(value, expected):
    assert amount(value, "mi") == expected == amount(value, "mi", wording=FIELD, error=ValueError)


def test_only_an_unlimited_amount_may_be_infinite():
    assert amount(math.inf, "maxSizePerFPGA", unlimited=True) == math.inf
    with pytest.raises(SpecError, match=r"^maxSizePerFPGA: nan must be a finite number >= 0$"):
        amount(math.nan, "maxSizePerFPGA", unlimited=True)


def test_each_wording_names_the_place_and_the_value():
    assert set(CELL) == set(FIELD)
    with pytest.raises(SpecError, match=r"^w: an integer of 401 digits is beyond 1e\+18$"):
        amount(10**400, "w")
    with pytest.raises(SpecError, match=r"^w: 2e\+18 is beyond 1e\+18; give it in a larger unit$"):
        amount(2e18, "w")
    with pytest.raises(ValueError, match=r"^w must be at most 1e\+18, got 2e\+18$"):
        amount(2e18, "w", wording=FIELD, error=ValueError)


def test_the_op_constructor_and_the_reader_use_it():
    """An op's field and a reader's cell are refused by the same check, each in its own wording."""
    with pytest.raises(SpecError, match=r"param_bytes must be a finite number >= 0, got -1"):
        Op(name="a", param_bytes=-1)
    data = {"nodes": [{"id": 1, "cpuLatency": 1, "fpgaLatency": -2, "size": 0}], "edges": []}
    with pytest.raises(SpecError, match=r"node 1: fpgaLatency: -2 must be a finite number >= 0"):
        graph_from_dict(data)


def test_the_old_reader_check_warns_and_forwards():
    from placement_dsl.io import common

    with pytest.warns(DeprecationWarning, match=r"placement_dsl\.limits\.amount"):
        assert common.nonnegative("3", "mi") == 3.0
