"""A pin the placement keeps changes no objective: it restricts placements and costs nothing. Interleaved 1F1B
and ZB-H1 price their virtual stages on copies of the devices, and a pin to the device, which no copy is named
after, made the pinned op's time there ``inf`` and its weight gradient ``0 x inf``: a valid placement scored nan."""
from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Pin
from placement_dsl.evaluate import NAMED, CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Latency
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.zoo.training import with_backward

MODELS = [CostModel.named(name) for name in sorted(NAMED)] + [
    CostModel.named(name, microbatches=4) for name in ("gpipe", "interleaved-1f1b", "zb-h1", "zbv")]


@st.composite
def pinned_training(draw, max_layers: int = 5):
    """A random forward DAG with its backward, a placement of its layers, and the same placement of the graph
    with one op pinned where the placement runs it."""
    n = draw(st.integers(1, max_layers))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    edges = sorted({(f"f{min(u, v)}", f"f{max(u, v)}") for u, v in pairs if u != v})
    ops = [Op(name=f"f{i}", work=float(draw(st.integers(1, 5))), out_bytes=float(draw(st.integers(0, 3))),
              param_bytes=float(draw(st.integers(0, 3)))) for i in range(n)]
    g = Graph(*with_backward(ops, edges))
    c = Cluster.accelerators(draw(st.integers(1, 3)), cpus=draw(st.integers(0, 1)), memory=1e6, bandwidth=1.0)
    layer = draw(st.lists(st.integers(0, c.size - 1), min_size=n, max_size=n))
    assign = [layer[int(name.removesuffix(".grad")[1:])] for name in g.names]
    op = g.names[draw(st.integers(0, g.n - 1))]
    pinned = Problem(g, c, Latency(), [Pin(op, c.names[assign[g.index[op]]])]).graph
    return Placement(g, c, assign), Placement(pinned, c, assign)


@settings(max_examples=30, deadline=None)
@given(pinned_training())
def test_a_kept_pin_changes_no_objective(pair):
    free, pinned = pair
    for model in MODELS:
        a, b = evaluate(free, model), evaluate(pinned, model)
        assert not math.isnan(b.objective), model.name
        assert (b.objective, b.valid) == (a.objective, a.valid), (model.name, model.microbatches)


def test_the_pinned_chain_scores_as_the_unpinned_one():
    ops = [Op(name=f"f{i}", work=1.0 + i, param_bytes=1.0, out_bytes=0.5) for i in range(3)]
    g = Graph(*with_backward(ops, [("f0", "f1"), ("f1", "f2")]))
    c = Cluster.accelerators(2, memory=100.0, bandwidth=1.0)
    pinned = Problem(g, c, Latency(), [Pin("f0", "acc1")]).graph
    for name in ("interleaved-1f1b", "zb-h1"):
        free, kept = evaluate(Placement(g, c, [1] * g.n), name), evaluate(Placement(pinned, c, [1] * g.n), name)
        assert kept.valid and kept.objective == free.objective == 18.0
