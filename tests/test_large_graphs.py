"""Bounds and heuristics on 20,000-op graphs: within their budget, and no recursion that grows with the graph."""
from __future__ import annotations

import inspect
import math
import sys
import time

import numpy as np
import pytest

from placement_dsl.blocks.base import Context
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous, DagOrder
from placement_dsl.deadline import BudgetSpent, Deadline
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import latency as lat
from placement_dsl.heuristics import run
from placement_dsl.objectives import Bottleneck, Latency, Throughput
from placement_dsl.problem import Problem

N = 20_000


def chain(n: int, seed: int = 0, cpu: bool = False) -> Graph:
    rng = np.random.default_rng(seed)
    work = (lambda w: {"accelerator": w, "cpu": 20 * w}) if cpu else float
    return Graph([Op(name=f"v{i}", work=work(float(rng.random()) + 0.1), out_bytes=1.0) for i in range(n)],
                 [(f"v{i}", f"v{i + 1}") for i in range(n - 1)], name=f"chain{n}")


@pytest.fixture(scope="module")
def long_chain() -> Graph:
    return chain(N)


@pytest.fixture
def shallow_stack():
    """Python's recursion limit 300 frames above the caller: code that recurses once per op fails on a long chain."""
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 300)
    yield
    sys.setrecursionlimit(saved)


def test_run_arcs_of_a_long_path_are_declined_at_once_by_their_size():
    # every pair of positions of the path was priced with O(n) arrays: O(n^3), hours at 20,000 ops, cut only
    # by the clock after the level's whole share; the size is now estimated before any arc is built
    from placement_dsl.blocks import latency_data as L

    graph = chain(N, cpu=True)
    ctx = Context(Problem(graph, Cluster.accelerators(4, cpus=1), Latency()))
    path = tuple(int(v) for v in graph.topo)
    t0 = time.perf_counter()
    for contiguous in (False, True):
        with pytest.raises(BudgetSpent, match="declined: the run arcs of a 20000-op path"):
            L.run_arcs(ctx, path, L.accelerators(ctx), contiguous, Deadline(5.0))
    assert time.perf_counter() - t0 < 2.0
    assert L.arc_cells(ctx, path[:50], math.inf) == 50 * 51 / 2 * N  # every run of a path of 50, O(n) each


def test_latency_moves_are_sampled_on_large_graphs_and_exact_on_small_ones():
    # 200,000 ops listed 27 million moves (1 GiB, a minute to shuffle) before the search began
    graph, cluster, model = chain(N), Cluster.accelerators(4, cpus=1), CostModel.named("latency")
    su = lat._setup(graph, cluster, model)
    moves = lat.move_table(su, np.random.default_rng(0))
    assert len(moves) == lat.MAX_MOVES
    groups = su.gptr.size - 1
    place, swap = moves[moves[:, 2] >= 0], moves[moves[:, 2] < 0]
    assert (place[:, 0] < place[:, 1]).all() and (place[:, 1] <= groups).all() and np.isin(place[:, 2], su.targets).all()
    assert (swap[:, 1] <= swap[:, 3]).all() and (swap[:, 4] <= groups).all() and (swap[:, 3] < swap[:, 4]).all()
    small = lat._setup(chain(30), cluster, model)
    full = lat.move_table(small, np.random.default_rng(0))
    assert len(full) == len({tuple(r) for r in full.tolist()}) < lat.MAX_MOVES  # all of them, once each


def test_latency_descent_checks_the_clock_between_few_slow_evaluations(long_chain):
    # one evaluation is O(n) (about 2 ms at 20,000 ops, 20 ms at 200,000): 2,000 of them between two looks at
    # the clock ran 40 s past a limit at 200,000 ops
    cluster, model = Cluster.accelerators(4, cpus=1), CostModel.named("latency")
    su = lat._setup(long_chain, cluster, model)
    moves = lat.move_table(su, np.random.default_rng(0))
    start = np.zeros(long_chain.n, dtype=np.int64)
    lat._compile(su, start, moves)
    t0 = time.perf_counter()
    _, _, evals = lat._descent(su, start, moves, time.perf_counter() + 0.3, 10**9)
    assert evals > 0 and time.perf_counter() - t0 < 1.5


@pytest.mark.parametrize("method", ["greedy", "one-device", "slicegraph", "dpl", "pipedream", "list",
                                    "latency-local-search"])
def test_fast_heuristics_on_a_long_chain_end_in_budget_without_deep_recursion(method, long_chain, shallow_stack):
    model = {"list": "makespan", "latency-local-search": "latency"}.get(method, "throughput")
    t0 = time.perf_counter()
    result = run(method, long_chain, Cluster.stages(4), model=CostModel.named(model), time_limit=2.0)
    assert time.perf_counter() - t0 < 2.0 + 10  # a generous slack on a loaded machine: the limit held
    assert evaluate(result.placement, CostModel.named(model)).valid


@pytest.mark.parametrize("kind", ["contiguous", "noncontiguous", "mtpp", "latency"])
def test_every_default_bounds_level_on_a_long_chain_recurses_no_deeper_than_a_constant(kind, shallow_stack):
    from placement_dsl.certify import certify, default_levels

    graph = chain(N, cpu=kind == "latency")
    problem = {"contiguous": lambda: Problem(graph, Cluster.stages(4), Throughput(), [Contiguous()]),
               "noncontiguous": lambda: Problem(graph, Cluster.stages(4), Throughput()),
               "mtpp": lambda: Problem(graph, Cluster.stages(4), Bottleneck(), [DagOrder()]),
               "latency": lambda: Problem(graph, Cluster.accelerators(4, cpus=1), Latency())}[kind]()
    t0 = time.perf_counter()
    cert = certify(problem, budget=3.0, stop_at_gap=False)
    assert time.perf_counter() - t0 < 3.0 + 15
    assert [r.level for r in cert.levels] == list(default_levels(problem))
    assert cert.bound <= cert.objective * (1 + 1e-9)


def _condensation_order(graph: Graph) -> list[list[int]]:
    """The units by networkx's condensation (colocation groups contracted, cycles merged), ordered by first rank."""
    import networkx as nx

    q = nx.DiGraph()
    q.add_nodes_from(np.unique(graph.group_id).tolist())
    q.add_edges_from((int(graph.group_id[a]), int(graph.group_id[b])) for a, b in zip(graph.src, graph.dst)
                     if graph.group_id[a] != graph.group_id[b])
    cond = nx.condensation(q)
    comp = np.array([cond.graph["mapping"][int(g)] for g in graph.group_id])
    first = {c: int(graph.rank[comp == c].min()) for c in range(cond.number_of_nodes())}
    return [np.flatnonzero(comp == c).tolist() for c in nx.lexicographical_topological_sort(cond, key=first.get)]


@pytest.mark.parametrize("seed", range(6))
def test_greedy_units_are_the_condensation_in_first_rank_order(seed):
    # the units now come from scipy's strong components and a heap (networkx's condensation took about a minute
    # at 200,000 ops, before greedy's one pass): the same units in the same order
    from placement_dsl.heuristics.baselines import contract

    rng = np.random.default_rng(seed)
    n = 60
    ops = [Op(name=f"v{i}", work=1.0, out_bytes=1.0, group=f"g{rng.integers(8)}" if rng.random() < 0.3 * (seed % 2) else None)
           for i in range(n)]
    edges = {(f"v{a}", f"v{b}") for a, b in rng.integers(n, size=(90, 2)) if a < b}
    graph = Graph(ops, sorted(edges))
    assert [u.tolist() for u in contract(graph)] == _condensation_order(graph)


def test_packing_bound_keeps_to_its_seconds_and_stays_above_the_pigeonhole_bound():
    # a node's bin fill is O(n): the node budget alone let the simple level run 17 s on a 20,000-op GPT-3 graph
    from placement_dsl.bounds.packing import packing_bound
    from placement_dsl.bounds.pigeonhole import pigeonhole_bound
    from placement_dsl.zoo import gpt3

    w = gpt3(layers=10, hidden=1024, heads=16, vocab=8192)
    t0 = time.perf_counter()
    bound = packing_bound(w.graph, w.cluster, seconds=0.2)
    assert time.perf_counter() - t0 < 0.2 + 1.5
    assert bound >= pigeonhole_bound(w.graph, w.cluster) - 1e-9
