"""The slicing DP where few prefixes can be split under its cutoff: the one-device slicing as the cutoff, and the
sparse visit of the prefixes that have a split (Fenwick sums of the transfers) agreeing with the streamed band."""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import slice_kernels
from placement_dsl.heuristics import slicegraph as sg

THROUGHPUT = CostModel.named("throughput")


def _random_graph(rng: np.random.Generator) -> Graph:
    n = int(rng.integers(2, 30))
    ops = [Op(name=f"o{i}", work=float(rng.uniform(0, 5)),
              out_bytes=float(rng.choice([0.0, rng.uniform(0, 20), 1e3])),
              param_bytes=float(rng.uniform(0, 3))) for i in range(n)]
    edges = [(f"o{i}", f"o{j}") for i in range(n) for j in range(i + 1, min(n, i + 4)) if rng.random() < 0.5]
    return Graph(ops, edges)


def test_a_graph_whose_every_cut_costs_more_than_its_work_is_cut_off_at_one_device():
    # slow links: any cut moves 1e6 bytes at 1 byte per time unit, the whole chain computes 300
    g = Graph([Op(name=f"v{i}", work=1.0, out_bytes=1e6) for i in range(300)],
              [(f"v{i}", f"v{i + 1}") for i in range(299)])
    slicer = sg.Slicer(g, Cluster.stages(4), THROUGHPUT)
    assert slicer.single_value(g.topo) == pytest.approx(300.0)
    assert slicer.balanced_value(g.topo, slicer.allowed(g.topo)) > 1e6  # the work-balanced cut pays the links
    r = sg.slicegraph(g, Cluster.stages(4), model=THROUGHPUT)
    assert r.objective == pytest.approx(300.0) and len(np.unique(r.placement.assign)) == 1


@pytest.mark.parametrize("seed", range(3))
def test_the_sparse_visit_finds_the_streamed_bands_optimum(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    for _ in range(25):
        g, k = _random_graph(rng), int(rng.integers(1, 5))
        found = []
        for sparse in (10**9, 0):  # never sparse, always sparse
            monkeypatch.setattr(slice_kernels, "SPARSE", sparse)
            r = sg.slicegraph(g, Cluster.stages(k), model=THROUGHPUT)
            found.append((r.objective, r.info["dp_value"]))
        assert found[1] == pytest.approx(found[0], rel=1e-9)


def test_the_dp_reads_the_clock_by_segments_visited_not_only_by_positions(monkeypatch):
    import time

    # 600 positions (never a multiple of 1,024) with every prefix alive: only the count of segments reads the clock
    g = Graph([Op(name=f"v{i}", work=1.0, out_bytes=0.0) for i in range(600)],
              [(f"v{i}", f"v{i + 1}") for i in range(599)])
    slicer = sg.Slicer(g, Cluster.stages(4), THROUGHPUT)
    monkeypatch.setattr(slice_kernels, "CLOCK_STEPS", 1)
    value, _ = slicer.solve(g.topo, deadline=time.monotonic() - 1.0)
    assert np.isnan(value)
