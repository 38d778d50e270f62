"""The cut ops (:func:`placement_dsl.bounds.makespan.comparable_cuts`): the ops comparable with every other, as a
brute force over the reachability finds them, computed once per graph."""
from __future__ import annotations

import gc

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.bounds import makespan
from placement_dsl.graph import Graph, Op


def dag(n: int, edges: list[tuple[int, int]]) -> Graph:
    return Graph([Op(name=f"v{i}", work=1.0) for i in range(n)],
                 sorted({(f"v{min(u, v)}", f"v{max(u, v)}") for u, v in edges if u != v}))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(2, 9).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.tuples(
    st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))))
def test_the_cut_ops_are_the_ops_comparable_with_every_other(case):
    g = dag(*case)
    reach, cuts = makespan.comparable_cuts(g)
    closure = np.zeros((g.n, g.n), dtype=bool)  # brute force: paths by repeated squaring of the edges
    closure[g.src, g.dst] = True
    for _ in range(g.n):
        closure |= (closure.astype(int) @ closure.astype(int)) > 0
    related = closure | closure.T | np.eye(g.n, dtype=bool)
    assert (reach == closure).all()
    assert sorted(cuts.tolist()) == np.flatnonzero(related.all(axis=1)).tolist()
    assert list(np.argsort(g.rank[cuts], kind="stable")) == list(range(len(cuts)))  # in topological order


def test_the_cut_ops_are_computed_once_per_graph_and_read_only(monkeypatch):
    calls = []
    real = makespan._reach
    monkeypatch.setattr(makespan, "_reach", lambda g: calls.append(g.n) or real(g))
    g = dag(5, [(0, 1), (1, 2), (1, 3), (2, 4), (3, 4)])
    first = makespan.comparable_cuts(g)
    again = makespan.comparable_cuts(g)
    assert calls == [5] and again[0] is first[0] and again[1].tolist() == [0, 1, 4]
    assert not first[0].flags.writeable and not first[1].flags.writeable
    other = dag(5, [(0, 1), (1, 2), (1, 3), (2, 4), (3, 4)])  # an equal graph is another object: computed again
    assert makespan.comparable_cuts(other)[1].tolist() == [0, 1, 4] and calls == [5, 5]
    del g, first, again
    gc.collect()
    assert len(makespan._CUTS) <= makespan.KEPT
