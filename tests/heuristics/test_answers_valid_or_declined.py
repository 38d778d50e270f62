"""Under the training schedules with tight memory a heuristic's answer may be a split the cost model rejects with a
finite objective (a device overfilled by the ranks' stashes, say, after ZBV's fold): such an answer is no answer.
Every answer is valid, or the method says it found none (an error, or ``valid`` false with ``info["declined"]``
naming why), and local search never loses its valid start."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.errors import PlacementError
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.zoo.training import with_backward

MODELS = [CostModel.named("zbv"), CostModel.named("interleaved-1f1b"), CostModel.named("zb-h1")]
METHODS = ["local-search", "greedy", "slicegraph", "dp"]


@st.composite
def tight_training_problems(draw):
    """A random forward DAG with its backward on 2-6 accelerators, each holding just over its share of the memory."""
    n = draw(st.integers(4, 10))
    ops = [Op(name=f"f{i}", work=float(draw(st.integers(1, 9))), out_bytes=float(draw(st.integers(0, 4))),
              param_bytes=float(draw(st.integers(0, 5))), activation_bytes=float(draw(st.integers(0, 3))))
           for i in range(n)]
    edges = sorted({(f"f{u}", f"f{v}") for v in range(1, n)
                    for u in draw(st.lists(st.integers(0, v - 1), min_size=1, max_size=2))})
    g = Graph(*with_backward(ops, edges))
    k = draw(st.integers(2, 6))
    share = float((g.param_bytes + g.activation_bytes).sum()) / k
    return g, Cluster.accelerators(k, memory=max(1.0, share * draw(st.sampled_from([1.02, 1.2, 1.5, 2.5]))))


def _answer(method, g, c, model):
    try:
        return run(method, g, c, model=model, seed=0, restarts=3) if method == "local-search" else \
            run(method, g, c, model=model)
    except PlacementError:  # the method says it found none
        return None


@settings(max_examples=25, deadline=None)
@given(tight_training_problems(), st.sampled_from(MODELS), st.sampled_from(METHODS))
def test_an_answer_is_valid_or_declined(problem, model, method):
    g, c = problem
    found = _answer(method, g, c, model)
    if found is None:
        return
    ev = evaluate(found.placement, model)
    assert found.valid is ev.valid
    assert ev.valid or "declined" in found.info


def test_a_zbv_answer_over_the_memory_says_it_found_none():
    ops = [Op(name=f"f{i}", work=1.0, out_bytes=1.0, param_bytes=4.0, activation_bytes=2.0) for i in range(6)]
    g = Graph(*with_backward(ops, [(f"f{i}", f"f{i + 1}") for i in range(5)]))
    model = CostModel.named("zbv")
    found = run("local-search", g, Cluster.accelerators(4, memory=1.0), model=model, seed=0, restarts=3)
    assert not evaluate(found.placement, model).valid
    assert found.valid is False and "found no valid split" in found.info["declined"]


@settings(max_examples=15, deadline=None)
@given(tight_training_problems(), st.sampled_from(MODELS))
def test_local_search_under_tight_memory_keeps_its_valid_start(problem, model):
    g, c = problem
    starts = [r for r in (_answer(m, g, c, model) for m in ("greedy", "slicegraph")) if r is not None]
    start = min((r.objective for r in starts if evaluate(r.placement, model).valid), default=None)
    found = run("local-search", g, c, model=model, seed=0, restarts=3)
    if start is not None:
        assert evaluate(found.placement, model).valid and found.objective <= start + 1e-9
