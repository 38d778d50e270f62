"""The ``host-share`` level (placement_dsl/levels/host_share.py): the one host runs what an ideal and a filter
within the accelerators' memory leave, a bound on every contiguous placement.

Hand instance: six ops of 10 GB in a chain, two accelerators of 20 GB (0.5 per op) and a CPU between them. The
accelerators hold at most four ops in all, so the CPU runs at least two; its work is 50 for the two end ops and 1
for the four between, so it runs at least 104 - (50 + 1 + 1 + 50) = 2, the optimum (two ops at each end on an
accelerator, 1 each, the middle two on the CPU). Lemma 3.3 gives 1 here.
"""
from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from placement_dsl.brute import optimum
from placement_dsl.certificate import LevelStatus
from placement_dsl.certify import LEVELS, certify
from placement_dsl.cluster import Cluster, Device
from placement_dsl.constraints import Contiguous, DagOrder, Memory
from placement_dsl.graph import Graph, Op
from placement_dsl.levels.base import Family, defaults_of
from placement_dsl.objectives import Bottleneck, Throughput
from placement_dsl.problem import Problem

GB = 1e9


def _cluster(memory: float = 20 * GB, host_between: bool = True) -> Cluster:
    accs = [Device(name=f"acc{i}", kind="accelerator", memory=memory) for i in range(2)]
    cpu = Device(name="cpu0", kind="cpu")
    return Cluster([accs[0], cpu, accs[1]] if host_between else [*accs, cpu])


def _chain(cpu_work: list[float], mem: list[float]) -> Graph:
    ops = [Op(name=f"v{i}", work={"accelerator": 0.5, "cpu": w}, param_bytes=b) for i, (w, b) in
           enumerate(zip(cpu_work, mem))]
    return Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(len(ops) - 1)])


HAND = [50, 1, 1, 1, 1, 50]


def _row(cert, name):
    return {r.level: r for r in cert.levels}[name]


@pytest.mark.parametrize("terms, objective", [([Memory(), Contiguous()], Throughput()),
                                              ([Memory(), DagOrder()], Bottleneck())])
def test_the_hand_instance_is_proved_exactly(terms, objective):
    problem = Problem(_chain(HAND, [10 * GB] * 6), _cluster(), objective, terms)
    upper = ("dp",) if problem.has(Contiguous) else ()  # under DagOrder greedy, slicegraph and BRKGA run anyway
    cert = certify(problem, budget=20.0, gap=0.0, levels=("simple", "host-share", *upper))
    row = _row(cert, "host-share")
    assert row.status is LevelStatus.OPTIMAL and row.bound == pytest.approx(2.0, rel=1e-8) and row.bound <= 2.0
    assert cert.objective == pytest.approx(2.0) and cert.proved_by == "host-share" and cert.gap <= 1e-8
    assert _row(cert, "simple").bound == pytest.approx(1.0) and optimum(problem) == pytest.approx(2.0)


def test_the_level_declines_at_once_where_no_host_work_is_forced():
    roomy = Problem(_chain(HAND, [1 * GB] * 6), _cluster(), Throughput(), [Memory(), Contiguous()])
    anywhere = Problem(_chain(HAND, [10 * GB] * 6), _cluster(), Throughput(), [Memory()])
    hosts_last = Problem(_chain(HAND, [10 * GB] * 6), _cluster(host_between=False), Bottleneck(),
                         [Memory(), DagOrder()])
    assert "cannot hold every op" in LEVELS["host-share"].accepts(roomy)
    assert "contiguous placements" in LEVELS["host-share"].accepts(anywhere)
    assert "ordered-memory" in LEVELS["host-share"].accepts(hosts_last)


def test_the_level_joins_the_contiguous_and_dag_ordered_hierarchies():
    assert "host-share" in defaults_of(Family.THROUGHPUT) and "host-share" in defaults_of(Family.MTPP)
    assert "host-share" not in defaults_of(Family.NONCONTIGUOUS)
    names = list(LEVELS)
    assert names.index("ordered-memory") < names.index("host-share") < names.index("dp")


EDGES = [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (2, 4), (3, 4), (0, 4)]


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(2, 9)), min_size=2, max_size=5),
       st.lists(st.booleans(), min_size=len(EDGES), max_size=len(EDGES)), st.integers(3, 10),
       st.booleans(), st.booleans())
def test_the_level_never_claims_more_than_brute_force(ops, keep, memory, dag, between):
    """Tiny DAGs whose accelerators' memory binds (bytes in GB): the level's bound is at most the brute-force
    optimum over the problem's placements (contiguous, or DAG-ordered), the host between or after the
    accelerators."""
    n = len(ops)
    graph = Graph([Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": float(w)}, param_bytes=b * GB, out_bytes=0.5)
                   for i, (w, b) in enumerate(ops)],
                  [(f"v{u}", f"v{v}") for (u, v), k in zip(EDGES, keep) if k and v < n])
    terms, objective = ([Memory(), DagOrder()], Bottleneck()) if dag else ([Memory(), Contiguous()], Throughput())
    problem = Problem(graph, _cluster(memory * GB, between), objective, terms)
    assume(LEVELS["host-share"].accepts(problem) is None)  # memory binds (about 6 draws in 10)
    cert = certify(problem, budget=20.0, gap=0.0, levels=("host-share",), stop_at_gap=False)
    bound = _row(cert, "host-share").bound
    best = optimum(problem)
    assert bound is None or not math.isfinite(best) or bound <= best * (1 + 1e-9)
