"""The ideals of a DAG counted without enumerating them (structure.count_ideals), and the DP's choice of Python or
compiled kernels going by that count rather than by a sample: the sampled estimate said 405 of BERT-L3 training's
2,774 ideals, so the DP enumerated in Python up to jit.PYTHON_IDEALS (then 2,200) and started again compiled."""
from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from placement_dsl import zoo
from placement_dsl.cluster import Cluster
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import ideal_lattice as L
from placement_dsl.heuristics import jit
from placement_dsl.heuristics.ideals import setup
from placement_dsl.structure import count_ideals, ideal_masks
from placement_dsl.testing import random_graph

ROOT = Path(__file__).resolve().parents[2]


def _random_dag(seed: int) -> tuple[list[list[int]], list[list[int]]]:
    rnd = random.Random(seed)
    n, p = rnd.randint(0, 14), rnd.random() * 0.5
    perm = list(range(n))
    rnd.shuffle(perm)  # numbered out of topological order
    pred: list[list[int]] = [[] for _ in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            if rnd.random() < p:
                pred[perm[b]].append(perm[a])
    succ: list[list[int]] = [[] for _ in range(n)]
    for v, us in enumerate(pred):
        for u in us:
            succ[u].append(v)
    return succ, pred


@pytest.mark.parametrize("seed", range(60))
def test_the_count_is_the_number_of_ideals_and_a_lower_bound_where_it_stops(seed):
    succ, pred = _random_dag(seed)
    ideals = len(ideal_masks(succ, pred, 10**6))
    assert count_ideals(pred) == (ideals, True)
    assert count_ideals(pred, cap=ideals) == (ideals, True)
    counted, exact = count_ideals(pred, cap=ideals - 1)
    assert not exact and ideals - 1 < counted <= ideals
    counted, exact = count_ideals(pred, work=len(pred) // 2)
    assert counted == ideals if exact else counted <= ideals


def test_a_cycle_is_refused():
    with pytest.raises(ValueError, match="cycle"):
        count_ideals([[1], [0]])


def layered(blocks: int, branches: int, length: int) -> Graph:
    """Blocks in a chain, each ``branches`` chains of ``length`` ops side by side between a fork and a join (an
    attention layer's heads)."""
    ops, edges, prev = [Op(name="in", work=1.0, out_bytes=1.0)], [], "in"
    for b in range(blocks):
        for c in range(branches):
            last = prev
            for i in range(length):
                ops.append(Op(name=f"b{b}c{c}_{i}", work=1.0 + (b + c + i) % 3, out_bytes=1.0))
                edges.append((last, f"b{b}c{c}_{i}"))
                last = f"b{b}c{c}_{i}"
            edges.append((last, f"j{b}"))
        ops.append(Op(name=f"j{b}", work=1.0, out_bytes=1.0))
        prev = f"j{b}"
    return Graph(ops, edges)


@pytest.mark.parametrize("graph", [layered(2, 4, 5), layered(20, 3, 3), layered(3, 3, 5),
                                   random_graph(np.random.default_rng(3), 40, density=0.2), zoo.inception().graph],
                         ids=["2x4x5", "20x3x3", "3x3x5", "random40", "inception"])
def test_the_lattice_is_sized_by_its_exact_count(graph):
    """layered(2, 4, 5) has 2,594 ideals, sampled as 1,993; layered(20, 3, 3) 1,282, sampled as 6,393."""
    with jit.interpreted():
        su = setup(graph, Cluster.stages(4), None, False, True)
        found = L.lattice_size_ok(su.con, L.DEFAULT_MAX_IDEALS)
        assert found == pytest.approx(math.log2(L.ideal_lattice(su.con).count), abs=1e-12)


def test_past_its_work_the_count_leaves_the_size_to_the_sample(monkeypatch):
    graph = layered(2, 4, 5)
    with jit.interpreted():
        su = setup(graph, Cluster.stages(4), None, False, True)
        monkeypatch.setattr(L, "COUNT_WORK", 10)
        found = L.lattice_size_ok(su.con, L.DEFAULT_MAX_IDEALS)
    assert found != pytest.approx(math.log2(2594))  # the sampled estimate (1,993), at least what was counted
    assert found >= math.log2(su.con.n_nodes + 1)


def test_a_count_past_max_ideals_declines_before_enumerating(monkeypatch):
    def boom(*args):
        raise AssertionError("enumerated")

    monkeypatch.setattr(L.K, "enumerate_ideals", boom)
    with jit.interpreted():
        su = setup(layered(2, 4, 5), Cluster.stages(4), None, False, True)
        with pytest.raises(Exception, match=r"has more than 2000 ideals \(43 supernodes\)"):
            L.lattice_size_ok(su.con, 2000)


SPY = """
import numpy as np
from placement_dsl.cluster import Cluster
from placement_dsl.heuristics import ideal_kernels as K, jit, run
from placement_dsl.testing import random_graph
from tests.heuristics.test_ideal_count import layered
seen, real = [], K.enumerate_ideals
def spy(pred_ptr, pred_idx, W, limit, deadline):
    seen.append((int(limit), jit.python_kernels()))
    return real(pred_ptr, pred_idx, W, limit, deadline)
K.enumerate_ideals = spy
r = run('dp', {graph}, Cluster.stages(4))
print(r.info['ideals'], seen)
"""


@pytest.mark.parametrize(("graph", "shown"), [
    ("layered(4, 4, 5)", "5186 [(2000000, False)]"), ("layered(20, 3, 3)", "1282 [(1991, True)]"),
    ("random_graph(np.random.default_rng(0), 90, density=0.2)", "9123 [(2000000, False)]")])
def test_the_dp_enumerates_once_in_the_kernels_its_count_picks(graph, shown):
    """5,186 ideals (above jit.PYTHON_IDEALS), sampled as 1,519, are enumerated once, compiled, not first in Python
    up to 4,001 and again compiled; 1,282 ideals of 201 supernodes stay in Python (capped at jit.python_ideals(201)
    + 1), where a sample of 6,393 sent them to the compiled kernels. The random DAG's frontier holds most of its
    nodes: counted past COUNT_WORK (2,900 so far) up to jit.PYTHON_IDEALS (sampled: 2,253)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", SPY.format(graph=graph)], check=False, cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == shown
