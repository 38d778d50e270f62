"""BRKGA's and random-T's decodes on large graphs cut their orders on a grid of positions; the best order is sliced
once more with every cut allowed."""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import orderings
from placement_dsl.heuristics.orderings import GRID_CUTS, GRID_OPS, brkga, cut_grid, order_grid, random_orders
from placement_dsl.heuristics.slicegraph import Slicer

MODEL = CostModel.named("throughput")


def _skips(n: int, seed: int = 0) -> Graph:
    """A chain of ``n`` ops with short skip edges, work 1-9, tensors 0-3 bytes."""
    rng = np.random.default_rng(seed)
    ops = [Op(name=f"v{i}", work=float(rng.integers(1, 10)), out_bytes=float(rng.integers(0, 4))) for i in range(n)]
    edges = [(f"v{i}", f"v{i + 1}") for i in range(n - 1)]
    edges += [(f"v{i}", f"v{i + d}") for d in (2, 3) for i in range(0, n - d, 5)]
    return Graph(ops, edges)


def test_the_grid_holds_about_grid_cuts_positions_where_the_fewest_bytes_cross():
    """One cut per run of ``step`` positions, at the least bytes crossing: on a chain whose every fifth op sends
    100 bytes to the op after next, the cuts avoid the boundaries those tensors cross."""
    assert cut_grid(GRID_OPS - 1) is None
    step = cut_grid(20_000)
    assert step > orderings.SPARSE and 20_000 / step <= GRID_CUTS
    n = 3_000
    ops = [Op(name=f"v{i}", work=1.0, out_bytes=100.0 if i % 5 == 0 else 1.0) for i in range(n)]
    edges = [(f"v{i}", f"v{i + 1}") for i in range(n - 1)] + [(f"v{i}", f"v{i + 2}") for i in range(0, n - 2, 5)]
    g = Graph(ops, edges)
    grid = order_grid(g, g.topo, cut_grid(n))
    assert grid[0] and grid[-1] and grid.sum() <= n / cut_grid(n) + 2
    cuts = np.flatnonzero(grid)[1:-1]
    assert ((cuts - 1) % 5 != 0).all() and ((cuts - 2) % 5 != 0).all()  # never right after a 100-byte sender


@pytest.mark.parametrize("method", [brkga, random_orders])
def test_decodes_cut_on_the_grid_and_the_best_order_is_sliced_in_full(monkeypatch, method):
    """At 20,000 ops a decode (the exact slicing of an order, O(n * band)) took seconds, 40 s beside a slow host, so
    BRKGA and random-T decoded 2-9 orders in 10-60 s and answered the first. On a grid the slicing DP extends only
    the prefixes on it; the answer is the best order's full slicing, no worse than its grid slicing."""
    g, cluster = _skips(GRID_OPS + 400), Cluster.stages(4)
    seen = []
    solve = Slicer.solve

    def recording(self, order, cutoff=np.inf, boundaries=None, deadline=None):
        seen.append(None if boundaries is None else int(boundaries.sum()))
        return solve(self, order, cutoff, boundaries, deadline)
    monkeypatch.setattr(Slicer, "solve", recording)
    res = method(g, cluster, model=MODEL, seed=3, evaluations=40)
    assert res.info["grid"] and len(seen) == 41  # 40 decodes on the grid, then the full slicing of the best order
    assert all(s is not None and s <= GRID_CUTS + 2 for s in seen[:-1]) and seen[-1] is None
    full, _ = solve(Slicer(g, cluster, MODEL), res.info["order"])
    assert res.info["dp_value"] == pytest.approx(full, rel=1e-9)
    assert evaluate(res.placement, MODEL).objective == pytest.approx(res.objective)
