"""The cut-stages chain: never above the best DAG-ordered placement, by brute force, on chains of cut ops with blocks
of parallel heads (attention's) and residual skips, where the devices sharing a block bind; GPT-3's inner devices pay
for splitting an attention block."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings

from placement_dsl.bounds.cut_stages import cut_stages_bound
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous, DagOrder
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from tests.bounds.headed import headed_chains


def _best_ordered(problem: Problem) -> float:
    """The best DAG-ordered placement on identical stages: every edge runs to the same or a later stage (any
    acyclic quotient, its stages renumbered in a topological order, is one of those, at the same cost)."""
    g, k = problem.graph, problem.cluster.size
    best = np.inf
    for assign in itertools.product(range(k), repeat=g.n):
        a = np.array(assign)
        if (a[g.src] <= a[g.dst]).all():
            best = min(best, problem.evaluate(Placement(g, problem.cluster, a)).objective)
    return best


@settings(max_examples=60, deadline=None, derandomize=True)
@given(headed_chains())
def test_the_chain_never_exceeds_the_best_dag_ordered_placement(problem):
    best = _best_ordered(problem)
    bound, note = cut_stages_bound(problem, best)
    assert bound is not None, note  # declining at a reachable max load would say no placement reaches it
    assert bound <= best * (1 + 1e-9), note


def test_a_gpt3_split_of_an_attention_block_pays_its_heads_slices():
    """Three GPT-3 layers onto 5 stages (the shape of 10 onto 16: a stage holds about half a layer): each device
    on its own, counting the attention blocks beside it as its own at their least cut, gave 0.93 of the best split
    found; the chain proves that split optimal among DAG-ordered ones."""
    from placement_dsl import zoo
    from placement_dsl.heuristics import run
    from placement_dsl.presets import resize

    w = zoo.gpt3(layers=3, hidden=1024, heads=16, vocab=8192)
    cluster = resize(w.cluster, 5)
    problem = Problem(w.graph, cluster, Bottleneck(), [DagOrder()])
    found = run("slicegraph", w.graph, cluster, model=problem.cost_model()).objective  # run to its end
    bound, note = cut_stages_bound(problem, found)
    assert bound is not None and bound >= found * (1 - 1e-5), note


def test_the_bisection_stops_at_its_clock_with_the_max_load_ruled_out_so_far():
    from placement_dsl import zoo
    from placement_dsl.bounds.cut_stages import cut_stages_search
    from placement_dsl.presets import resize

    w = zoo.gpt3(layers=4, hidden=256, heads=4, vocab=1024)
    problem = Problem(w.graph, resize(w.cluster, 4), Bottleneck(), [DagOrder()])
    upper = float(problem.cluster.times(w.graph)[:, 0].sum())  # one device: a reachable max load
    full, stopped = cut_stages_search(problem, upper), cut_stages_search(problem, upper, seconds=0.0)
    assert full.finished and not stopped.finished
    assert upper / 4 * (1 - 1e-6) <= stopped.bound < full.bound, stopped.note


def test_a_loose_best_max_load_builds_the_tables_for_the_runs_under_the_max_loads_tried():
    """From one device's load (greedy's answer at scale), the runs under 1.5 W / k first: a few thousand of them,
    where all the runs of cut ops (every one under that load) number about r^2 / 2."""
    from placement_dsl import zoo
    from placement_dsl.bounds.cut_stages import cut_stages_search
    from placement_dsl.presets import resize
    from placement_dsl.structure import cut_ops

    w = zoo.gpt3(layers=8, hidden=256, heads=4, vocab=1024)
    problem = Problem(w.graph, resize(w.cluster, 8), Bottleneck(), [DagOrder()])
    upper = float(problem.cluster.times(w.graph)[:, 0].sum())
    r = len(cut_ops(w.graph))
    found = cut_stages_search(problem, upper, most_pairs=r * r // 4)
    assert found.bound is not None and found.bound > 1.05 * upper / 8, found.note


@pytest.mark.parametrize("k, hosts", [(4, 0), (16, 0), (4, 1)])
def test_twenty_thousand_cut_ops_are_bounded_from_the_runs_near_the_devices_ends(k, hosts):
    """A chain of 20,000 ops (each one a cut op; up to 5,000 of them the tables were built for every run under the
    max load, ~r^2 / k): the runs some chain may hold end near a multiple of the max load in work, a few hundred of
    them near the least max load that passes. The bound lies above W / k (the tensors across) and below a
    work-balanced split."""
    from placement_dsl.bounds.cut_stages import cut_stages_search

    rng = np.random.default_rng(7)
    n = 20_000
    work, size = rng.uniform(0.5, 1.5, n), rng.uniform(0.0, 2.0, n)
    ops = [Op(name=f"v{i}", work={"accelerator": float(work[i]), "cpu": 9.0 * float(work[i])},
              out_bytes=float(size[i])) for i in range(n)]
    g = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])
    cluster = Cluster.accelerators(k, cpus=hosts, bandwidth=1.0) if hosts else Cluster.stages(k)
    problem = Problem(g, cluster, Bottleneck(), [Contiguous()])
    share = np.concatenate([[0.0], np.cumsum(work)])[:-1] / work.sum()
    assign = np.minimum((share * k).astype(np.int64), k - 1)  # the accelerators first, the hosts left empty
    upper = problem.evaluate(Placement(g, cluster, assign)).objective
    found = cut_stages_search(problem, upper)
    assert found.bound is not None and found.finished, found.note
    assert work.sum() / (k + hosts / 9.0) < found.bound <= upper, found.note
