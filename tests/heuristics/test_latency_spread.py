"""Spreads of the latency local search: a module's parallel branches, each on a device of its own, at once.

Under contiguity (every device's ops convex, hosts too) a branch can leave a device that holds the cut ops on both of
its sides only when one of those cut ops leaves as well, so the block moves cannot take a module's branches onto free
accelerators one at a time; a spread does it in one step (:mod:`placement_dsl.heuristics.latency_spread`).
"""
from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous, Memory
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.latency import setup
from placement_dsl.heuristics.latency_spread import Spreads
from placement_dsl.objectives import Latency
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem


def modules(count: int, branches: int, length: int, accelerators: int, cpus: int, acc: float = 10.0,
            cpu: float = 30.0) -> Problem:
    """``count`` modules in a row, each ``branches`` chains of ``length`` ops between two concatenations (``c0`` ..
    ``c{count}``): a branch op takes ``acc`` on an accelerator and ``cpu`` on a CPU and writes 1 byte, a
    concatenation takes 1 and writes 3 (bandwidth 1: a byte costs 1)."""
    ops = [Op(name=f"c{m}", work={"accelerator": 1.0, "cpu": 1.0}, out_bytes=3.0) for m in range(count + 1)]
    edges = []
    for m in range(count):
        for b in range(branches):
            names = [f"m{m}b{b}o{i}" for i in range(length)]
            ops += [Op(name=x, work={"accelerator": acc, "cpu": cpu}, out_bytes=1.0) for x in names]
            edges += [(f"c{m}", names[0]), *pairwise(names), (names[-1], f"c{m + 1}")]
    cluster = Cluster.accelerators(accelerators, memory=1e9, cpus=cpus, bandwidth=1.0)
    return Problem(Graph(ops, edges, name="modules"), cluster, Latency(), [Memory(), Contiguous()])


def test_a_spread_puts_each_branch_of_a_module_on_a_free_accelerator():
    p = modules(count=2, branches=3, length=4, accelerators=4, cpus=3)
    model = p.cost_model()
    start = np.zeros(p.graph.n, dtype=np.int64)  # everything on acc0: 2 x 3 x 40 of branches one after another
    assert p.evaluate(Placement(p.graph, p.cluster, start)).objective == pytest.approx(243.0)
    spreads = list(Spreads(setup(p.graph, p.cluster, model))(start))
    values = [p.evaluate(Placement(p.graph, p.cluster, s)) for s in spreads]
    best = min(v.objective for v in values if v.valid)
    # c0 .. c2 each on a host of its own; the first module's three branches at once on acc0..acc2 (read 3 + 40 +
    # write 1), c1 (1), the second module's first branch on acc3 (44) and the other two on c1's host (4 x 30): 1 + 44
    # + 1 + 120 + 1 (spreading one module alone: c0 or c2 on acc0 with the other module, 170)
    assert best == pytest.approx(167.0)


def test_the_local_search_spreads_modules_that_block_moves_cannot():
    """From everything on acc0 (243), with seven accelerators: both modules' branches on six of them and the cut ops
    on hosts is 1 + 44 + 1 + 44 + 1 = 91."""
    p = modules(count=2, branches=3, length=4, accelerators=7, cpus=3)
    start = np.zeros(p.graph.n, dtype=np.int64)
    res = run("latency-local-search", p.graph, p.cluster, model=p.cost_model(), starts=[("acc0", start)],
              restarts=0, time_limit=20.0)
    assert p.violations(res.placement) == []
    assert res.objective <= 100.0


@settings(max_examples=25, deadline=None)
@given(count=st.integers(1, 3), branches=st.integers(2, 4), length=st.integers(1, 4), accelerators=st.integers(1, 6),
       cpus=st.integers(1, 4), cpu=st.floats(5.0, 60.0))
def test_every_spread_keeps_the_ops_allowed_and_the_split_whole(count, branches, length, accelerators, cpus, cpu):
    p = modules(count, branches, length, accelerators, cpus, cpu=cpu)
    start = np.zeros(p.graph.n, dtype=np.int64)
    for s in Spreads(setup(p.graph, p.cluster, p.cost_model()))(start):
        assert s.shape == start.shape and s.min() >= 0 and s.max() < p.cluster.size
        ev = p.evaluate(Placement(p.graph, p.cluster, s))
        assert ev.objective > 0


def test_a_spread_keeps_the_hosts_convex_when_a_branch_forks_after_its_middle():
    """``c0 -> a0 .. a3 -> c1`` with ``a2 -> x -> c1`` and two branches of three ops beside: the disjoint paths leave
    ``x`` out; it follows ``a2``'s accelerator, so it runs on ``c1``'s host, not ``c0``'s (that host would hold ``c0``
    and ``x`` around an accelerator: not convex, and no such spread was valid)."""
    work = {"accelerator": 10.0, "cpu": 15.0}
    ops = [Op(name=x, work={"accelerator": 1.0, "cpu": 1.0}, out_bytes=3.0) for x in ("c0", "c1", "c2")]
    side = [f"s{b}o{i}" for b in range(2) for i in range(3)]
    ops += [Op(name=x, work=work, out_bytes=1.0) for x in ["a0", "a1", "a2", "a3", "x", *side]]
    edges = [("c0", "a0"), *pairwise(["a0", "a1", "a2", "a3"]), ("a3", "c1"), ("a2", "x"), ("x", "c1"), ("c1", "c2")]
    for b in range(2):
        edges += [("c0", f"s{b}o0"), *pairwise([f"s{b}o{i}" for i in range(3)]), (f"s{b}o2", "c1")]
    p = Problem(Graph(ops, edges, name="fork"), Cluster.accelerators(4, memory=1e9, cpus=3, bandwidth=1.0), Latency(),
                [Memory(), Contiguous()])
    start = np.zeros(p.graph.n, dtype=np.int64)
    before = p.evaluate(Placement(p.graph, p.cluster, start)).objective
    found = [p.evaluate(Placement(p.graph, p.cluster, s)) for s in
             Spreads(setup(p.graph, p.cluster, p.cost_model()))(start)]
    assert found and all(ev.valid for ev in found)
    assert min(ev.objective for ev in found) < before
