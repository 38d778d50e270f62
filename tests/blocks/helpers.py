"""Helpers of the block templates' tests: the formulations that accept a problem, a compiled model holding a
placement's warm-start values checked row by row, a proof by every formulation, and a training problem whose
passes carry tensors of different sizes.
"""
from __future__ import annotations

import re

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.compile import compile
from placement_dsl.formulations import FORMULATIONS, Kind
from placement_dsl.graph import Graph, Op
from placement_dsl.problem import Problem
from placement_dsl.solve import solve


def accepting(problem):
    """The exact formulations and restrictions that accept ``problem`` (a relaxation has no warm start)."""
    names = [name for name, formulation in sorted(FORMULATIONS.items())
             if formulation.kind is not Kind.RELAXATION and not formulation.accepts(problem)]
    assert names, "no formulation accepts the problem"
    return names


def warm(problem, name, placement):
    """The compiled model of ``name`` holding ``placement``'s warm-start values, checked against every row."""
    c = compile(problem, name)
    values = c.varmap.values(placement)
    worst, where = c.varmap.residual(values)
    assert worst <= 1e-9, (name, where, worst)
    for var, value in values.items():
        var.set_value(value, skip_validation=True)
    return c, values


def proved_by_every_formulation(problem, best):
    """Every formulation that accepts ``problem`` solves it to a valid ``best`` with ``best`` as its bound."""
    for name in accepting(problem):
        r = solve(problem, formulation=name, time_limit=30, warm_start="none")  # each model's own proof
        assert (r.objective, r.bound) == (pytest.approx(best), pytest.approx(best)), name
        assert problem.is_valid(r.placement), name


def by_name(values, suffix):
    """The warm value of the one variable whose name ends with ``suffix``."""
    (value,) = [x for v, x in values.items() if v.name.endswith(suffix)]
    return value


def asymmetric_training_problem(objective) -> Problem:
    """f0 -> f1 -> b1 -> b0 with f0/b0 and f1/b1 colocated; the forward tensor (2 bytes) is larger than the
    backward one (1 byte), so a model that counts one pass's tensors in the other's load is wrong."""
    ops = [Op(name="f0", work=4, out_bytes=2, group="a"), Op(name="f1", work=3, group="b"),
           Op(name="b1", work=2, out_bytes=1, backward=True, group="b"), Op(name="b0", work=7, backward=True, group="a")]
    return Problem(Graph(ops, [("f0", "f1"), ("f1", "b1"), ("b1", "b0")]), Cluster.stages(2), objective)


def whole(message: str) -> str:
    """A pattern matching exactly ``message``."""
    return f"^{re.escape(message)}$"
