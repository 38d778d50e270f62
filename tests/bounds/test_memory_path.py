"""The segment bound (bounds/memory_path.py): memory cuts a path into runs, each cut paying its transfers; exact on
hand instances, at most the brute-force optimum where memory binds, declined by its size and stopped by its clock.
"""
from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_dsl.bounds import memory_path
from placement_dsl.bounds.latency import route_path_latency
from placement_dsl.bounds.makespan import route_path_makespan
from placement_dsl.bounds.memory_path import segment_bound
from placement_dsl.brute import brute_force
from placement_dsl.certificate import LevelStatus
from placement_dsl.certify import certify
from placement_dsl.cluster import Cluster, Device
from placement_dsl.constraints import AllowedKinds, Contiguous, Memory
from placement_dsl.deadline import BudgetSpent, Deadline
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Latency, Makespan
from placement_dsl.problem import Problem
from placement_dsl.testing import optimum


def serial(k: int, memory: float = math.inf) -> Cluster:
    """``k`` accelerators that run one op at a time (MOIRAI's devices; a cluster without links runs invocations)."""
    return Cluster([Device(name=f"acc{i}", memory=memory, invocations=False) for i in range(k)])

TOL = 1e-6


def chain(n: int, mem: float = 2.0, cpu: float = 10.0) -> Graph:
    ops = [Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": cpu}, param_bytes=mem, out_bytes=1.0) for i in range(n)]
    return Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])


def test_latency_chain_that_memory_cuts_in_two_pays_one_write_and_one_read():
    # four ops of 2 bytes, accelerators of 4: two runs of two ops; the first writes v1's tensor (1), the second
    # reads it (1): 2 + 1 + 1 + 2 = 6, the optimum; without the cut the path says 4, without either transfer 5
    p = Problem(chain(4), Cluster.accelerators(2, memory=4.0, cpus=1), Latency(), [Memory()])
    assert route_path_latency(p)[0] == pytest.approx(4.0)
    assert segment_bound(p)[0] == pytest.approx(6.0) == brute_force(p)[0]


def test_latency_a_host_op_between_two_runs_pays_no_transfer_itself():
    # v1 holds 4 bytes (no room beside another op) and the CPU runs it in 1.5: v0 | v1 on the CPU | v2, the runs
    # paying v0's write and v1's read: 1 + 1 + 1.5 + 1 + 1 = 5.5; a run of v1 alone would cost 1 + 1 + 1 + 1 more
    ops = [Op(name="v0", work={"accelerator": 1.0, "cpu": 10.0}, param_bytes=2.0, out_bytes=1.0),
           Op(name="v1", work={"accelerator": 1.0, "cpu": 1.5}, param_bytes=4.0, out_bytes=1.0),
           Op(name="v2", work={"accelerator": 1.0, "cpu": 10.0}, param_bytes=2.0)]
    p = Problem(Graph(ops, [("v0", "v1"), ("v1", "v2")]), Cluster.accelerators(1, memory=4.0, cpus=1), Latency(),
                [Memory()])
    assert segment_bound(p)[0] == pytest.approx(5.5) == brute_force(p)[0]


def test_latency_skip_edge_is_read_and_written_once_more():
    # v0 also feeds v2: cut after v1, the first run writes v0's tensor beside v1's and the second reads it beside
    # v1's: 6 + 2 = 8, the optimum (the boundary tensors alone say 6)
    g = chain(4)
    p = Problem(Graph(g.ops, [*zip(g.names, g.names[1:]), ("v0", "v2")]), Cluster.accelerators(2, memory=4.0, cpus=1),
                Latency(), [Memory()])
    assert segment_bound(p)[0] == pytest.approx(8.0) == brute_force(p)[0]


def test_a_contiguous_run_holds_every_op_between_its_ends():
    # w lies between v0 and v2: a contiguous device set holding both holds w, 8 bytes > 6, so the path is cut:
    # 1 + 1 + write 1 | read 1 + 1 = 5 (without Contiguous the three fit in one run: 3)
    ops = [Op(name=x, work={"accelerator": 1.0, "cpu": 10.0}, param_bytes=2.0, out_bytes=1.0) for x in
           ("v0", "v1", "v2", "w")]
    g = Graph(ops, [("v0", "v1"), ("v1", "v2"), ("v0", "w"), ("w", "v2")])
    cluster = Cluster.accelerators(2, memory=6.0, cpus=1)
    contiguous = Problem(g, cluster, Latency(), [Memory(), Contiguous()])
    assert segment_bound(contiguous)[0] == pytest.approx(5.0)
    assert brute_force(contiguous)[0] >= 5.0
    assert segment_bound(Problem(g, cluster, Latency(), [Memory()]))[0] == pytest.approx(3.0)


def test_a_run_may_start_after_an_op_its_device_may_not_run():
    # v1 runs on the CPU only; v2's run after it is as good as v0's before it: 1 + 1 | 10 | 1 + 1 = 14, the optimum
    p = Problem(chain(3), Cluster.accelerators(1, memory=4.0, cpus=1), Latency(),
                [Memory(), AllowedKinds(("v1",), ("cpu",))])
    assert segment_bound(p)[0] == pytest.approx(14.0) == brute_force(p)[0]


def test_makespan_chain_pays_the_cheapest_transfer_at_each_cut():
    # three ops of 2 bytes on devices of 4: one cut, one transfer of 1 (bandwidth 1): 3 + 1 = 4, the optimum
    p = Problem(chain(3), serial(2, memory=4.0), Makespan(), [Memory()])
    assert route_path_makespan(p)[0] == pytest.approx(3.0)
    assert segment_bound(p)[0] == pytest.approx(4.0) == brute_force(p)[0]


def test_without_a_memory_term_the_cut_is_the_fastest_path():
    p = Problem(chain(4), Cluster.accelerators(2, memory=4.0, cpus=1), Latency())
    value, note, complete = segment_bound(p)
    assert value == pytest.approx(4.0) and "no memory term" in note and complete


def test_identical_accelerators_are_one_class():
    data = memory_path.segment_data(Problem(chain(3), Cluster.accelerators(3, memory=4.0, cpus=1), Latency(),
                                            [Memory()]))
    assert data["times"].shape == (3, 1) and data["cap"].tolist() == [4.0]


def test_declined_by_its_size_and_stopped_by_its_clock(monkeypatch):
    p = Problem(chain(6), serial(2, memory=4.0), Makespan(), [Memory()])
    with pytest.raises(BudgetSpent, match="budget spent before a path was cut"):
        segment_bound(p, Deadline(0.0))
    monkeypatch.setattr(memory_path, "MAX_CELLS", 1.0)
    with pytest.raises(BudgetSpent, match="declined: cutting"):
        segment_bound(p)
    row = {r.level: r for r in certify(p, budget=10, levels=("segment-path",)).levels}["segment-path"]
    assert row.status is LevelStatus.SKIPPED and "declined" in row.message


def test_the_level_proves_the_chain():
    p = Problem(chain(3), serial(2, memory=4.0), Makespan(), [Memory()])
    cert = certify(p, budget=10, levels=("segment-path",))
    assert cert.bound == pytest.approx(4.0) and cert.proved_by == "segment-path"


@st.composite
def chains_that_memory_cuts(draw):
    """4-5 ops in a chain with skip edges, at times a side op between two of them, on devices whose memory holds a
    few of them: latency (one or two accelerators and a CPU) or makespan (two devices), at times contiguous."""
    n = draw(st.integers(4, 5))
    names = [f"v{i}" for i in range(n)]
    edges = [(names[i], names[i + 1]) for i in range(n - 1)]
    edges += [(names[i], names[j]) for i in range(n) for j in range(i + 2, n) if draw(st.integers(0, 3)) == 0]
    if draw(st.booleans()):
        a, b = sorted(draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True)))
        names.append("w")
        edges += [(f"v{a}", "w"), ("w", f"v{b}")]
    ops = [Op(name=x, work={"accelerator": draw(st.integers(1, 4)), "cpu": draw(st.integers(1, 12))},
              param_bytes=draw(st.integers(0, 4)), out_bytes=draw(st.integers(0, 3))) for x in names]
    latency = draw(st.booleans())
    cluster = Cluster.accelerators(draw(st.integers(1, 2)), memory=float(draw(st.integers(4, 8))),
                                   cpus=1 if latency else 0, bandwidth=float(draw(st.sampled_from([0.5, 1.0, 2.0]))))
    if not latency and cluster.size == 1:
        cluster = Cluster.accelerators(2, memory=cluster.memory[0], bandwidth=cluster.bandwidth[0])
    terms = [Memory()] + ([Contiguous()] if draw(st.booleans()) else [])
    return Problem(Graph(ops, edges), cluster, Latency() if latency else Makespan(), terms)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(chains_that_memory_cuts())
def test_the_segment_bound_never_exceeds_the_brute_force_optimum(p):
    best = optimum(p)
    assert segment_bound(p)[0] <= best + TOL
