"""GPipe's fill and drain with micro-batches (and interleaved 1F1B, ZB-H1, ZBV) runs the stages in a chain: a split
whose devices' forward edges form a cycle has no schedule. Local search's restarts descended on max-load alone from
random splits and ended on such cycles (0 of 100 ends valid on ten generated training graphs); they now start from
a random chain of the groups and refuse a move that closes a cycle, so each restart's end runs."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.zoo.training import with_backward


@st.composite
def training_problems(draw):
    """A random forward DAG (each op after one or two earlier ones) with its backward, on 2-5 accelerators (memory
    never binds: a cycle is the only way to be invalid)."""
    n = draw(st.integers(6, 14))
    ops = [Op(name=f"f{i}", work=float(draw(st.integers(1, 9))), out_bytes=float(draw(st.integers(0, 4))),
              param_bytes=float(draw(st.integers(0, 5)))) for i in range(n)]
    edges = sorted({(f"f{u}", f"f{v}") for v in range(1, n)
                    for u in draw(st.lists(st.integers(0, v - 1), min_size=1, max_size=2))})
    g = Graph(*with_backward(ops, edges))
    k = draw(st.integers(2, 5))
    return g, Cluster.accelerators(k, bandwidth=2.0)


@settings(max_examples=20, deadline=None)
@given(training_problems())
def test_unseeded_restarts_end_on_splits_gpipe_runs(problem):
    g, c = problem
    model = CostModel.named("gpipe", microbatches=4)
    found = run("local-search", g, c, model=model, seed=0, restarts=3, seeded=False)
    assert evaluate(found.placement, model).valid
    assert found.info["valid_ends"] == found.evaluations

