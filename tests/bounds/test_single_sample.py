"""The best closed form of a single-sample problem (bounds/single_sample.py), and the solve that answers it when its
search proves less: the segment bound where memory cuts the path, the critical path on a cluster with links.
"""
from __future__ import annotations

import math

import pytest

from placement_dsl.bounds.single_sample import single_sample_bound
from placement_dsl.brute import brute_force
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.constraints import Memory
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck, Latency, Makespan
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.solvers import SolverOutcome, Status


def serial(k: int, memory: float = math.inf) -> Cluster:
    """``k`` accelerators that run one op at a time (MOIRAI's devices; a cluster without links runs invocations)."""
    return Cluster([Device(name=f"acc{i}", memory=memory, invocations=False) for i in range(k)])


def chain(n: int) -> Graph:
    ops = [Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 10.0}, param_bytes=2.0, out_bytes=1.0)
           for i in range(n)]
    return Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])


def test_the_best_closed_form_of_each_objective():
    latency = Problem(chain(4), Cluster.accelerators(2, memory=4.0, cpus=1), Latency(), [Memory()])
    assert single_sample_bound(latency) == (pytest.approx(6.0), "segment-path")
    makespan = Problem(chain(3), serial(2, memory=4.0), Makespan(), [Memory()])
    assert single_sample_bound(makespan) == (pytest.approx(4.0), "segment-path")
    spread = Problem(Graph([Op(name=x, work=2.0) for x in "abcd"]), serial(2), Makespan())
    assert single_sample_bound(spread)[0] == pytest.approx(4.0)  # work over two devices
    with pytest.raises(TypeError, match="Bottleneck"):
        single_sample_bound(Problem(chain(2), Cluster.accelerators(2), Bottleneck()))


def test_the_device_work_bound_is_left_out_when_it_is_large(monkeypatch):
    from placement_dsl.bounds import single_sample

    # four independent ops of 2 on two devices: 4 ops x (2 + 1 kind + the 21-step simplex of two devices) x 2
    p = Problem(Graph([Op(name=x, work=2.0) for x in "abcd"]), serial(2), Makespan())
    assert single_sample.energy_cells(p) == 4 * (2 + 1 + 21) * 2
    assert single_sample_bound(p)[0] == pytest.approx(4.0)

    def spent(problem):
        raise AssertionError("the device-work bound ran")
    monkeypatch.setattr(single_sample, "energy_makespan", spent)
    monkeypatch.setattr(single_sample, "MAX_ENERGY_CELLS", 4 * 24 * 2 - 1)
    assert single_sample_bound(p)[0] == pytest.approx(4.0)  # Lemma 3.3 and the cut segments say it too


def test_without_accelerators_or_with_one_device():
    # CPUs only: every op on a host, the path's 3 x 3; one device: the chain's 3
    only_cpus = Problem(chain(3), Cluster.accelerators(0, cpus=1), Latency(), [Memory()])
    assert single_sample_bound(only_cpus)[0] == pytest.approx(30.0)
    one = Problem(chain(3), serial(1, memory=10.0), Makespan(), [Memory()])
    assert single_sample_bound(one)[0] == pytest.approx(3.0)


def test_latency_over_links_keeps_to_the_critical_path():
    devices = [Device(name="acc0", memory=4.0, invocations=True), Device(name="acc1", memory=4.0, invocations=True),
               Device(name="cpu0", kind="cpu")]
    links = [Link(src=a, dst=b, bandwidth=1.0) for a in ("acc0", "acc1", "cpu0") for b in ("acc0", "acc1", "cpu0")
             if a != b]
    p = Problem(chain(4), Cluster(devices, links), Latency(), [Memory()])
    assert single_sample_bound(p) == (pytest.approx(4.0), "critical-path")


@pytest.mark.parametrize("objective, cluster, optimum", [
    (Latency(), Cluster.accelerators(2, memory=4.0, cpus=1), 6.0), (Makespan(), serial(2, memory=4.0), 5.0)])
def test_a_stopped_search_reports_the_segment_bound(monkeypatch, objective, cluster, optimum):
    # the search proves almost nothing; the answer's bound is the closed form's, here the optimum (the critical
    # path said 4, the work over the devices 2)
    import placement_dsl.solve as solve_module

    problem = Problem(chain(4), cluster, objective, [Memory()])
    value, start = brute_force(problem)
    assert value == pytest.approx(optimum)

    def weak(model, solver, options, start=None):
        return SolverOutcome(Status.TIME_LIMIT_NO_SOLUTION, None, 1e-3, False, solver)
    monkeypatch.setattr(solve_module, "solve_model", weak)
    result = solve(problem, warm_start=start, time_limit=30)
    assert result.bound == pytest.approx(optimum) and "by a closed form" in result.message


def test_each_clocked_closed_form_of_a_makespan_gets_an_equal_share_of_the_clock(monkeypatch):
    # split-heads proves the most of these forms on layered sheets (a 120-task sheet: 3.27 where the others prove
    # 2.87) but came last with half of what the segment bounds left, a 1/18 of the clock when they spend their shares
    from types import SimpleNamespace

    from placement_dsl import deadline as clock
    from placement_dsl.bounds import single_sample

    now = [0.0]
    monkeypatch.setattr(clock, "time", SimpleNamespace(monotonic=lambda: now[0]))
    shares: dict[str, float] = {}

    def spending(name):
        def bound(problem, deadline):
            shares[name] = deadline.left()
            now[0] = deadline.at  # spends its whole share
            return 0.0, "spent"
        return bound

    for attr, name in [("transfer_segment_bound", "cut-segments"), ("split_bound", "split-heads"),
                       ("segment_lp_bound", "segment-lp"), ("segment_bound", "segment-path")]:
        monkeypatch.setattr(single_sample, attr, spending(name))
    p = Problem(chain(3), serial(2), Makespan())
    assert single_sample_bound(p, clock.Deadline(12.0)) == (pytest.approx(3.0), "route-path")
    assert shares == pytest.approx({"cut-segments": 3.0, "split-heads": 3.0, "segment-lp": 3.0, "segment-path": 3.0})


def test_the_spine_of_a_latency_has_the_clock_its_quicker_bounds_leave(monkeypatch):
    # the cut-op spine is the slowest of the latency's closed forms and often the strongest (Inception-v3: 1175.5
    # against the segment path's 874.8): run first on a third of the clock, it was stopped in a 20 s solve at load 7
    # where the critical path, the segment path and the accelerators' work left it nine tenths
    from placement_dsl.bounds import single_sample
    from placement_dsl.deadline import Deadline
    given = []

    def spine(problem, clock):
        given.append(clock.left())
        return 0.0
    monkeypatch.setattr(single_sample, "spine_or_nothing", spine)
    latency = Problem(chain(4), Cluster.accelerators(2, memory=4.0, cpus=1), Latency(), [Memory()])
    assert single_sample_bound(latency, Deadline(60.0)) == (pytest.approx(6.0), "segment-path")
    assert len(given) == 1 and given[0] > 50.0
