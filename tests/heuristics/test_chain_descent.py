"""Single-op descent over DAG-ordered placements on identical stages, against the cost model and brute force."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.brute import placements
from placement_dsl.constraints import DagOrder, Overflow
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics.chain_descent import StageLoads, chain_descent
from placement_dsl.objectives import Bottleneck
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem, Stages


@st.composite
def problems(draw: st.DrawFn) -> Problem:
    """Tiny DAGs on 2-3 identical stages, memory soft (overflow streamed) or unlimited."""
    n = draw(st.integers(2, 6))
    ops = [Op(name=f"v{i}", work=float(draw(st.integers(0, 6))), out_bytes=float(draw(st.integers(0, 5))),
              param_bytes=float(draw(st.integers(0, 3)))) for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i, j in itertools.combinations(range(n), 2) if draw(st.booleans())]
    memory = draw(st.sampled_from([math.inf, 3.0]))
    return Problem(Graph(ops, edges), Stages(draw(st.integers(2, 3)), memory=memory), Bottleneck(),
                   [DagOrder(), Overflow()])


@settings(max_examples=25, deadline=None, derandomize=True)
@given(problems(), st.integers(0, 10**6))
def test_loads_are_the_cost_models_and_descent_never_worsens(problem: Problem, pick: int) -> None:
    """The search's stage loads equal the cost model's on every valid placement; from any of them the descent
    returns a valid DAG-ordered placement no worse than its start and no better than the optimum."""
    valid, evaluations = [], []  # problem.is_valid without evaluating each placement a second time
    for p in placements(problem):
        ev = problem.evaluate(p)
        if ev.valid and not any(term.check(p) for term in problem.constraints):
            valid.append(p)
            evaluations.append(ev)
    loads = StageLoads(problem)
    for p, ev in zip(valid, evaluations, strict=True):
        assert loads(np.asarray(p.assign)) == pytest.approx([d.load for d in ev.devices], abs=1e-9)
    start = valid[pick % len(valid)]
    found = chain_descent(problem, start, 0.05)
    best = min(ev.objective for ev in evaluations)  # brute force over the placements enumerated above
    assert problem.is_valid(found) and not problem.violations(found)
    assert best - 1e-9 <= problem.evaluate(found).objective <= problem.evaluate(start).objective + 1e-9


def test_descent_moves_an_op_off_the_busiest_stage() -> None:
    """a -> b -> c (work 5, 1, 1, free tensors) split {a, b} | {c} loads 6; moving b to the second stage gives 5."""
    g = Graph([Op(name="a", work=5), Op(name="b", work=1), Op(name="c", work=1)], [("a", "b"), ("b", "c")])
    problem = Problem(g, Stages(2), Bottleneck(), [DagOrder()])
    start = Placement(g, problem.cluster, np.array([0, 0, 1]))
    found = chain_descent(problem, start, 0.5)
    assert problem.evaluate(start).objective == pytest.approx(6.0)
    assert problem.evaluate(found).objective == pytest.approx(5.0) and list(found.assign) == [0, 1, 1]
