"""Local search descends on max-load, which knows nothing of the schedule a cost model runs: under interleaved
1F1B, ZB-H1 or GPipe's fill and drain a max-load optimum is often a split whose stages form a cycle through a
device, which no schedule runs. The cost model now judges each descent's end against the valid start, so the
search never answers worse than the split it started from (it answered inf, 'no valid placement').

GPipe's fill and drain with micro-batches (and interleaved 1F1B, ZB-H1, ZBV) runs the stages in a chain: local
search's restarts descended on max-load alone from random splits and ended on cycles (0 of 100 ends valid on ten
generated training graphs); they now start from a random chain of the groups and refuse a move that closes a cycle,
so each restart's end runs."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.zoo.training import with_backward

MODELS = [CostModel.named("interleaved-1f1b"), CostModel.named("zb-h1"), CostModel.named("gpipe", microbatches=4)]


def forward_and_backward(draw, fewest: int, most: int) -> Graph:
    """A random forward DAG of ``fewest``-``most`` ops (each after one or two earlier ones) with its backward."""
    n = draw(st.integers(fewest, most))
    ops = [Op(name=f"f{i}", work=float(draw(st.integers(1, 9))), out_bytes=float(draw(st.integers(0, 4))),
              param_bytes=float(draw(st.integers(0, 5)))) for i in range(n)]
    edges = sorted({(f"f{u}", f"f{v}") for v in range(1, n)
                    for u in draw(st.lists(st.integers(0, v - 1), min_size=1, max_size=2))})
    return Graph(*with_backward(ops, edges))


@st.composite
def training_problems(draw):
    """A training graph on 3-4 accelerators that together hold its parameters and a host CPU."""
    g = forward_and_backward(draw, 4, 10)
    c = Cluster.accelerators(draw(st.integers(3, 4)), memory=max(1.0, float(g.param_bytes.sum())), cpus=1,
                             bandwidth=2.0)
    return g, c


@st.composite
def chain_problems(draw):
    """A training graph on 2-5 accelerators (memory never binds: a cycle is the only way to be invalid)."""
    g = forward_and_backward(draw, 6, 14)
    return g, Cluster.accelerators(draw(st.integers(2, 5)), bandwidth=2.0)


@settings(max_examples=15, deadline=None)
@given(training_problems(), st.sampled_from(MODELS))
def test_local_search_is_valid_and_no_worse_than_its_valid_start(problem, model):
    g, c = problem
    starts = [run(m, g, c, model=model) for m in ("greedy", "slicegraph")]
    start = min((r.objective for r in starts if evaluate(r.placement, model).valid), default=None)
    found = run("local-search", g, c, model=model, seed=0, restarts=3)
    ev = evaluate(found.placement, model)
    if start is not None:
        assert ev.valid and found.objective == ev.objective <= start + 1e-9


@settings(max_examples=20, deadline=None)
@given(chain_problems())
def test_unseeded_restarts_end_on_splits_gpipe_runs(problem):
    g, c = problem
    model = CostModel.named("gpipe", microbatches=4)
    found = run("local-search", g, c, model=model, seed=0, restarts=3, seeded=False)
    assert evaluate(found.placement, model).valid
    assert found.info["valid_ends"] == found.evaluations
