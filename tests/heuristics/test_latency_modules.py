"""Module re-solves of the latency local search (Tarnawski's invocation model, contiguous splits).

A module re-solve places one module's branches anew on its cut ops' devices and the devices it leaves free, the rest
of the split fixed (:mod:`placement_dsl.heuristics.latency_modules`).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous, Memory
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics.latency import setup, split_score
from placement_dsl.heuristics.latency_modules import Modules, ideals
from placement_dsl.heuristics.latency_spread import Spreads
from placement_dsl.objectives import Latency
from placement_dsl.problem import Problem


def _module(acc: list[float], cpu: list[float], out: list[float], cap: float) -> Problem:
    """``head -> c0 -> {b0 .. b(k-1)} -> c1 -> tail``: single-op branches between two cut ops, on three accelerators
    (memory ``cap``, each op 1 byte) and a CPU."""
    ops = [Op(name=x, work={"accelerator": 1.0, "cpu": 5.0}, param_bytes=1.0, out_bytes=2.0)
           for x in ("head", "c0", "c1", "tail")]
    ops += [Op(name=f"b{i}", work={"accelerator": a, "cpu": c}, param_bytes=1.0, out_bytes=o)
            for i, (a, c, o) in enumerate(zip(acc, cpu, out))]
    edges = [("head", "c0"), ("c1", "tail")]
    edges += [e for i in range(len(acc)) for e in (("c0", f"b{i}"), (f"b{i}", "c1"))]
    cluster = Cluster.accelerators(3, memory=cap, cpus=1, bandwidth=1.0)
    return Problem(Graph(ops, edges, name="module"), cluster, Latency(), [Memory(), Contiguous()])


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 4).flatmap(lambda k: st.tuples(
    st.lists(st.floats(0.5, 20.0), min_size=k, max_size=k), st.lists(st.floats(1.0, 80.0), min_size=k, max_size=k),
    st.lists(st.floats(0.1, 6.0), min_size=k, max_size=k), st.sampled_from([4.0, 5.0, 100.0]))))
def test_a_module_re_solve_is_the_brute_force_optimum_of_its_module(case):
    """``c0`` on acc0 with the head, ``c1`` on acc1 with the tail: each branch op may run on acc0, acc1 or the free
    acc2 and cpu0 (contiguity rules out nothing else here), and the re-solve prices every combination: its split
    scores as the best of all 4^k by the referee (memory excess first, then latency)."""
    p = _module(*case)
    model = p.cost_model()
    su = setup(p.graph, p.cluster, model)
    g, names = p.graph, p.cluster.names
    dev = np.zeros(g.n, dtype=np.int64)
    dev[[g.index["c1"], g.index["tail"]]] = names.index("acc1")
    key = split_score(su, dev)
    branches = [g.index[f"b{i}"] for i in range(len(case[0]))]
    best = key
    for combo in itertools.product(range(p.cluster.size), repeat=len(branches)):
        trial = dev.copy()
        trial[branches] = combo
        score = split_score(su, trial)
        if (score[0], score[1]) < (best[0], best[1]):
            best = score
    modules = Modules(su, Spreads(su))
    j = next(j for j, ops in enumerate(modules.members) if ops.size)  # between c0 and c1 (head, tail: cut ops too)
    found = modules.resolve(dev, key, j, math.inf)
    got = key if found is None else split_score(su, found)
    assert got[0] == best[0] and math.isclose(got[1], best[1], rel_tol=1e-9, abs_tol=1e-9)


def test_ideals_are_the_down_sets_of_a_branch():
    g = Graph([Op(name=x, work=1.0) for x in "abcd"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    found = ideals(g, np.arange(4))
    assert len(found) == 6  # {}, a, ab, ac, abc, abcd
    assert ideals(g, np.arange(4), most=3) is None
