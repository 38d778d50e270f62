"""The DP beside a host CPU: DPL by probes along its order (heuristics.host_slicing) and the feasibility runs that
price a host's stage without walking its band (ideal_feasible's quick classes)."""
from __future__ import annotations

import math
import random

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import host_slicing
from placement_dsl.heuristics.ideal_solve import capacity_bound
from placement_dsl.heuristics.ideals import DEFAULT_MAX_IDEALS, dp, dpl, search, setup
from placement_dsl.placement import Placement
from placement_dsl.testing import SHAPES, structured_graph


def _case(seed: int) -> tuple[Graph, Cluster, CostModel]:
    rng = random.Random(seed)
    g = structured_graph(rng, rng.choice(SHAPES), rng.randint(4, 14), cpu=True)
    cluster = Cluster.accelerators(rng.randint(1, 4), memory=rng.choice([math.inf, 4.0, 6.0, 10.0]),
                                   cpus=rng.randint(1, 2), bandwidth=rng.choice([0.5, 1.0, 4.0]),
                                   cpu_memory=rng.choice([math.inf, math.inf, 8.0]))
    return g, cluster, CostModel.named(rng.choice(["throughput", "bottleneck"]))


def _exact(su, linearize: bool) -> float:
    try:
        return search(su, linearize=linearize, max_ideals=DEFAULT_MAX_IDEALS, upper_bound=None, descend=False)[0].value
    except Exception:  # noqa: BLE001 - no split fits
        return math.inf


@pytest.mark.parametrize("seed", range(60))
def test_the_probes_find_dpls_optimum_with_the_hosts_anywhere(seed):
    """Against DPL's sweep over its prefixes (two device classes, every count of each): the same optimum, a valid
    split the cost model prices at that value, and a lower bound never above it."""
    g, cluster, model = _case(seed)
    su = setup(g, cluster, model, False, True)
    assert host_slicing.applies(g, cluster, model)
    want = _exact(su, linearize=True)
    slicer = host_slicing.along_dfs(g, cluster, model, su.con)
    split, bound = host_slicing.best_split(slicer, capacity_bound(su.con, su.classes, False))
    if not math.isfinite(want):
        assert split is None or not evaluate(Placement(g, cluster, split.assignment(slicer.accelerators, slicer.hosts,
                                                                                   g.n)), model).valid
        return
    assert split.value == pytest.approx(want, rel=1e-9)
    ev = evaluate(Placement(g, cluster, split.assignment(slicer.accelerators, slicer.hosts, g.n)), model)
    assert ev.valid and ev.max_load == pytest.approx(split.value, rel=1e-9)
    assert bound <= split.value * (1 + 1e-12)


@pytest.mark.parametrize("seed", range(60))
def test_the_feasibility_runs_price_a_hosts_stage_exactly(seed):
    """The descending search, whose runs set a host's bits from the most work below each ideal instead of walking
    the host's band, ends at the optimum of the float64 sweep, from tight and loose incumbents alike."""
    g, cluster, model = _case(seed)
    su = setup(g, cluster, model, False, True)
    want = _exact(su, linearize=False)
    if not math.isfinite(want):
        return
    for ub in (want, 1.5 * want, 3 * want):
        sol, _ = search(su, linearize=False, max_ideals=DEFAULT_MAX_IDEALS, upper_bound=ub, descend=True)
        assert sol.value == pytest.approx(want, rel=1e-9)


def _blocks_beside_a_cpu(blocks: int) -> tuple[Graph, Cluster]:
    """Residual blocks (a -> b -> c, a -> c) in a chain, each op 10 bytes; accelerators hold 60 bytes each, so a CPU
    eight times slower must take most of the graph: its stage's band is most of the lattice."""
    ops, edges = [], []
    for b in range(blocks):
        names = [f"b{b}.{x}" for x in "abc"]
        ops += [Op(name=x, work={"accelerator": 1.0, "cpu": 8.0}, out_bytes=1.0, param_bytes=10.0) for x in names]
        edges += [(names[0], names[1]), (names[1], names[2]), (names[0], names[2])]
        if b:
            edges.append((f"b{b - 1}.c", names[0]))
    return Graph(ops, edges, name="blocks"), Cluster.accelerators(4, memory=60.0, cpus=1)


def test_beside_a_cpu_that_holds_most_of_the_graph_the_dp_walks_only_the_accelerators_band():
    """cnn-20000 onto 16 accelerators and a CPU found no split in 60 s: the slicings that gave DPL its incumbent
    took 15 s, DPL's sweep over 19,969 prefixes with the CPU's band 42 s, and the DP's runs as many pairs again.
    Here the CPU holds ~1,900 of 2,100 ops: DPL is probed along its order and the DP's runs price the CPU's stage
    from the most work below each ideal, so the pairs they visit are the accelerators' (a stage of at most 6 ops),
    not the CPU's band (~2,000 sub-ideals for each of ~2,800 ideals)."""
    g, cluster = _blocks_beside_a_cpu(700)
    model = CostModel.named("throughput")
    res = dp(g, cluster, model=model)
    assert res.bound == res.objective and res.exact_among is not None
    assert res.info["pairs"] < 40 * res.info["ideals"]
    line = dpl(g, cluster, model=model)
    assert line.info["path"] == "host slicing" and line.info["probes"] < 60
    assert res.objective <= line.objective * (1 + 1e-9)
    hosted = [s for s in res.info["stages"] if s["device_class"] == "cpu"]
    assert len(hosted) == 1 and hosted[0]["nodes"] > 1_500


def test_a_probe_past_the_deadline_where_the_bound_meets_the_split_returns_no_split():
    """With the lower bound at the split known, one probe fetches the split; past its deadline that probe stops, and
    the search answers no split and the bound, as every other stopped probe does (it raised out of the DP)."""
    import time

    (g, cluster), model = _blocks_beside_a_cpu(400), CostModel.named("throughput")  # the clock read at 1,024 ops
    su = setup(g, cluster, model, False, True)
    slicer = host_slicing.along_dfs(g, cluster, model, su.con)
    split, _ = host_slicing.best_split(slicer, 0.0)
    late = host_slicing.best_split(slicer, split.value, split.value, deadline=time.monotonic() - 1.0)
    assert late == (None, split.value)
