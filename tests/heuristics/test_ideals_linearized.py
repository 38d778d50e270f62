"""The linearized DP over ideals (dpl): the options it passes to the search, merged zero-cost leaves, and the
incumbent the DP prunes with.
"""
from __future__ import annotations

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel
from placement_dsl.formulations import Kind, of_kind
from placement_dsl.graph import Graph, Op

FORMULATIONS = of_kind(Kind.EXACT)


# ---------------------------------------------------------------------------- the DP over ideals (linearized)
def test_dpl_passes_its_options_to_the_search():
    from placement_dsl.heuristics.ideals import dpl

    heavy = Graph([Op(name="a", work=12)], [])
    # one op of work 12 on four stages: replicas share it (no parameters, so no all-reduce)
    assert dpl(heavy, Cluster.stages(4)).objective == 12.0
    assert dpl(heavy, Cluster.stages(4), replication=True).objective == 3.0
    assert dpl(heavy, Cluster.stages(4), replication=True, max_replicas=2).objective == 6.0
    # a (work 4, tensor 2) -> b (work 4) on two stages: split, each stage computes 4 and moves 2
    g = Graph([Op(name="a", work=4, out_bytes=2), Op(name="b", work=4)], [("a", "b")])
    r = dpl(g, Cluster.stages(2))
    assert (r.objective, r.bound, r.method, r.placement.source) == (6.0, None, "dpl", "dpl")
    assert dpl(g, Cluster.stages(2), model=CostModel(overlap="half")).objective == 4.0  # max(4, 2)


def test_dpl_merges_zero_cost_leaves_by_default():
    from placement_dsl.heuristics.ideals import dpl

    # z is a zero-work leaf hanging off b: App. B merges it into its neighbour, one supernode fewer
    g = Graph([Op(name="a", work=4, out_bytes=1), Op(name="b", work=4, out_bytes=1), Op(name="z", work=0)],
              [("a", "b"), ("b", "z")])
    merged, kept = dpl(g, Cluster.stages(2)), dpl(g, Cluster.stages(2), merge_zero_cost=False)
    assert merged.objective == kept.objective == 5.0
    assert merged.info["nodes"] < kept.info["nodes"]


# ---------------------------------------------------------------------------- the DP's incumbent
def test_dp_prunes_with_the_dpl_incumbent():
    from placement_dsl.heuristics.ideals import dp, dpl

    # the diamond of dp's docstring: {a, b} | {c, d}, work 5 plus two tensors on each stage
    g = Graph([Op(name=n, work=w, out_bytes=1) for n, w in zip("abcd", (4, 1, 1, 4))],
              [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    pruned, plain = dp(g, Cluster.stages(2)), dp(g, Cluster.stages(2), incumbent=False)
    assert pruned.info["incumbent"] == dpl(g, Cluster.stages(2)).info["dp_value"] == 7.0
    assert plain.info["incumbent"] is None and pruned.objective == plain.objective == 7.0


# ---------------------------------------------------------------------------- DPL as a slicing of its path
def _random_graph(rng):
    n = int(rng.integers(1, 20))
    ops = [Op(name=f"o{i}", work=float(rng.integers(0, 6)), out_bytes=float(rng.choice([0, rng.integers(0, 8), 1e3])),
              param_bytes=float(rng.integers(0, 4))) for i in range(n)]
    return Graph(ops, [(f"o{i}", f"o{j}") for i in range(n) for j in range(i + 1, min(n, i + 5)) if rng.random() < 0.4])


def test_dpl_on_identical_devices_slices_its_path_and_finds_the_lattice_dps_optimum():
    import numpy as np

    from placement_dsl.errors import InfeasibleError
    from placement_dsl.heuristics.ideals import DEFAULT_MAX_IDEALS, dpl, ideal_result, search, setup

    rng = np.random.default_rng(0)
    models = (CostModel.named("throughput"), CostModel(overlap="half"), CostModel.named("bottleneck"))
    for trial in range(60):
        g, k, model = _random_graph(rng), int(rng.integers(1, 5)), models[trial % 3]
        cluster = Cluster.stages(k, memory=float(rng.choice([np.inf, 6.0, 12.0])))
        su = setup(g, cluster, model, False, True)
        try:  # the reference: the sweep over the n + 1 prefixes of the DFS order
            sol, info = search(su, linearize=True, max_ideals=DEFAULT_MAX_IDEALS, upper_bound=None)
            want = ideal_result("dpl", su, sol, info, 0.0, exact=False).objective
        except InfeasibleError:
            want = None
        try:
            got = dpl(g, cluster, model=model)
        except InfeasibleError:
            assert want is None
            continue
        assert got.info["path"] == "slicing" and got.objective == pytest.approx(want, rel=1e-9)


def test_dpl_slices_a_20k_op_chain_in_seconds():
    import numpy as np

    rng = np.random.default_rng(0)
    n = 20_000
    g = Graph([Op(name=f"v{i}", work=float(rng.random()) + 0.1, out_bytes=1.0) for i in range(n)],
              [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])
    from placement_dsl.heuristics.ideals import dpl

    # the sweep over 20,001 prefixes visited ~n^2/2 pairs (past 200 s); its time limit would stop it
    r = dpl(g, Cluster.stages(4), time_limit=60)
    assert "stopped" not in r.info and r.info["ideals"] == n + 1
    assert r.objective <= g.work("accelerator").sum() / 4 * 1.01 + 2
