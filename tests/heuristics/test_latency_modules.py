"""Module re-solves and the spine split of the latency heuristics (Tarnawski's invocation model, contiguous splits).

A module re-solve places one module's branches anew on its cut ops' devices and the devices it leaves free, the rest
of the split fixed (:mod:`placement_dsl.heuristics.latency_modules`); the spine split is a DP over the cut ops whose
steps are a run and the module after it, spread over the next accelerators
(:mod:`placement_dsl.heuristics.latency_spine_split`).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous, Memory
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics.latency import setup, split_score
from placement_dsl.heuristics.latency_chain import chain_split
from placement_dsl.heuristics.latency_modules import Modules, ideals
from placement_dsl.heuristics.latency_spine_split import spine_split
from placement_dsl.heuristics.latency_spread import Spreads
from placement_dsl.objectives import Latency
from placement_dsl.placement import Placement
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
    modules = Modules(su, Spreads(su), split_score)
    j = next(j for j, ops in enumerate(modules.members) if ops.size)  # between c0 and c1 (head, tail: cut ops too)
    found = modules.resolve(dev, key, j, math.inf)
    got = key if found is None else split_score(su, found)
    assert got[0] == best[0] and math.isclose(got[1], best[1], rel_tol=1e-9, abs_tol=1e-9)


def test_ideals_are_the_down_sets_of_a_branch():
    g = Graph([Op(name=x, work=1.0) for x in "abcd"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    found = ideals(g, np.arange(4))
    assert len(found) == 6  # {}, a, ab, ac, abc, abcd
    assert ideals(g, np.arange(4), most=3) is None


def _fork(branches: int) -> tuple[Graph, Cluster]:
    ops = [Op(name=x, work={"accelerator": 1.0, "cpu": 1.0}, out_bytes=1.0) for x in ("a", "d")]
    ops += [Op(name=f"b{i}", work={"accelerator": 10.0, "cpu": 90.0}, out_bytes=1.0) for i in range(branches)]
    edges = [e for i in range(branches) for e in (("a", f"b{i}"), (f"b{i}", "d"))]
    return Graph(ops, edges), Cluster.accelerators(branches + 1, memory=10.0, cpus=1)


def test_the_spine_split_spreads_a_module_the_chain_split_runs_one_branch_after_another():
    """``a`` then three branches of 10 (90 on the CPU) then ``d``: the chain split runs its intervals one after
    another (two branches on an accelerator after ``a``'s: 24 at best), the spine split puts each branch on an
    accelerator of its own after ``a``'s run and ``d`` on the CPU: 2 + 12 + 1 = 15."""
    g, c = _fork(3)
    model = CostModel.named("latency")
    su = setup(g, c, model)
    spine = split_score(su, spine_split(g, c, model))
    chain = split_score(su, chain_split(g, c, model))
    assert spine[0] == 0 and math.isclose(spine[1], 15.0)
    assert chain[1] > spine[1]


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.integers(1, 6), st.integers(0, 3),
       st.floats(0.2, 3.0))
def test_the_spine_split_is_contiguous_and_scored_by_the_referee(count, branches, length, accelerators, cpus, byte):
    """Modules in a row (each ``branches`` chains of ``length`` ops): the spine split's accelerator and host sets are
    contiguous (the referee's latency is finite) wherever it answers; it declines a graph without parallel branches
    (the chain split's case) and a cluster too small for a chain of runs."""
    ops = [Op(name=f"c{m}", work={"accelerator": 1.0, "cpu": 2.0}, out_bytes=3.0 * byte) for m in range(count + 1)]
    edges = []
    for m in range(count):
        for b in range(branches):
            names = [f"m{m}b{b}o{i}" for i in range(length)]
            ops += [Op(name=x, work={"accelerator": 10.0, "cpu": 30.0}, out_bytes=byte) for x in names]
            edges += [(f"c{m}", names[0]), *itertools.pairwise(names), (names[-1], f"c{m + 1}")]
    g = Graph(ops, edges)
    c = Cluster.accelerators(accelerators, memory=1e9, cpus=cpus, bandwidth=1.0)
    p = Problem(g, c, Latency(), [Memory(), Contiguous()])
    try:
        split = spine_split(g, c, p.cost_model())
    except SpecError as err:
        assert ("no module of parallel branches" in str(err)) if branches == 1 else ("no chain of runs" in str(err))
        return
    assert branches > 1
    ev = p.evaluate(Placement(g, c, split))
    assert ev.valid and math.isfinite(ev.objective)
