"""Certificates for the single-sample family: the route-path and device-work levels for latency and makespan, the
schedule model's LP and MIP levels for makespan, an incumbent from the schedule heuristics, and a user's formulation.

Every level's bound is at most the brute-force optimum on tiny problems whose constraints bind (memory, pins,
colocation, allowed kinds) on identical, accelerator+CPU, heterogeneous-with-links and hierarchical clusters.
Brute force list-schedules each placement for a makespan: its value is at least the optimum, which the bounds
must not exceed either, so they are held to it.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_dsl.bounds.latency import critical_path_bound, energy_latency, route_path_latency
from placement_dsl.bounds.makespan import energy_makespan, route_path_makespan
from placement_dsl.bounds.memory_path import segment_bound
from placement_dsl.bounds.segments import transfer_segment_bound
from placement_dsl.certify import LEVELS, certify, default_levels
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.constraints import AllowedKinds, Colocate, Memory, Pin
from placement_dsl.errors import SpecError
from placement_dsl.formulations import get, register
from placement_dsl.formulations.base import FORMULATIONS
from placement_dsl.formulations.schedule import ScheduleHint
from placement_dsl.graph import Graph, Op
from placement_dsl.levels.base import Family, defaults_of
from placement_dsl.objectives import Bottleneck, Latency, Makespan
from placement_dsl.problem import Problem
from placement_dsl.testing import optimum

TOL = 1e-6


def clusters(kind: str) -> Cluster:
    """The four cluster kinds of the composition matrix, two or three devices each."""
    if kind == "identical":
        return Cluster.accelerators(2, memory=8.0)
    if kind == "with-cpu":
        return Cluster.accelerators(2, memory=8.0, cpus=1)
    if kind == "links":  # a fast and a slow accelerator of another kind, a CPU, and links with latency
        devices = [Device(name="acc0", memory=8.0, bandwidth=2.0), Device(name="gpu1", kind="gpu", memory=8.0,
                   speed=2.0, bandwidth=1.0), Device(name="cpu0", kind="cpu")]
        links = [Link(src=a, dst=b, bandwidth=bw, latency=lat) for a, b, bw, lat in
                 (("acc0", "gpu1", 1.0, 0.5), ("gpu1", "acc0", 0.5, 1.0), ("acc0", "cpu0", 2.0, 0.0),
                  ("cpu0", "acc0", 2.0, 0.0), ("gpu1", "cpu0", 1.0, 0.25), ("cpu0", "gpu1", 1.0, 0.25))]
        return Cluster(devices, links)
    return Cluster.hierarchical(2, 2, intra=4.0, inter=1.0, memory=8.0)


KINDS = ("identical", "with-cpu", "links", "hierarchical")


def op(name: str, work: float, cpu: float, out: float, mem: float) -> Op:
    return Op(name=name, work={"accelerator": work, "gpu": work, "cpu": cpu}, out_bytes=out, param_bytes=mem)


@st.composite
def tiny(draw, objective):
    """3-4 ops in a random DAG on one of the four cluster kinds, memory that binds, and at times a pin, a
    colocated pair or an op allowed on accelerators only."""
    n = draw(st.integers(3, 4))
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, n) if draw(st.booleans())]
    ops = [op(f"v{i}", draw(st.integers(1, 6)), draw(st.integers(1, 12)), draw(st.integers(0, 4)),
              draw(st.integers(0, 6))) for i in range(n)]
    cluster = clusters(draw(st.sampled_from(KINDS)))
    terms = [Memory()]
    extra = draw(st.sampled_from(["none", "pin", "colocate", "allowed-kinds"]))
    u, v = draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True))
    if extra == "pin":
        terms.append(Pin(f"v{u}", draw(st.sampled_from(cluster.names))))
    elif extra == "colocate":
        terms.append(Colocate([[f"v{u}", f"v{v}"]]))
    elif extra == "allowed-kinds":
        terms.append(AllowedKinds((f"v{u}",), ("accelerator",)))
    return Problem(Graph(ops, edges, name="tiny"), cluster, objective, terms)


@settings(max_examples=50, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(tiny(Latency()))
def test_latency_closed_forms_never_exceed_the_brute_force_optimum(p):
    best = optimum(p)
    cut = [] if p.cluster.links else [segment_bound(p)[0]]  # the invocation model's routes: only the path
    for bound in (route_path_latency(p)[0], energy_latency(p)[0], *cut):
        assert bound <= best + TOL
    assert route_path_latency(p)[0] >= critical_path_bound(p)[0] - TOL  # transfers only add to the path


@settings(max_examples=50, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(tiny(Makespan()))
def test_makespan_closed_forms_never_exceed_the_brute_force_optimum(p):
    best = optimum(p)
    for bound in (route_path_makespan(p)[0], energy_makespan(p)[0], segment_bound(p)[0], transfer_segment_bound(p)[0]):
        assert bound <= best + TOL


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([Latency(), Makespan()]).flatmap(tiny))
def test_every_level_of_the_certificate_is_at_most_the_brute_force_optimum(p):
    best = optimum(p)
    cert = certify(p, budget=20, gap=0.0, stop_at_gap=False)
    assert {r.level for r in cert.levels} == set(default_levels(p))
    if math.isfinite(best):
        assert cert.placement is not None and p.is_valid(cert.placement)
        assert cert.objective == pytest.approx(p.evaluate(cert.placement).objective)
    for r in cert.levels:
        if r.bound is not None and p.placement_class() in r.scope:
            assert r.bound <= best * (1 + TOL) + TOL, (r.level, r.bound, best)


def chain_and_one() -> Problem:
    """``a -> b`` and ``c``, 2 each, on three accelerators: the optimum is 4 (the chain); max load says 4 / 3."""
    g = Graph([Op(name="a", work=2.0, out_bytes=1.0), Op(name="b", work=2.0), Op(name="c", work=2.0)], [("a", "b")])
    return Problem(g, ops_devices(3), Makespan())


def ops_devices(k: int) -> Cluster:
    """``k`` accelerators that run one op at a time with transfer tasks (MOIRAI's model, the makespan levels')."""
    return Cluster([Device(name=f"acc{i}", invocations=False) for i in range(k)])


def test_a_makespan_certificate_proves_the_chain_with_an_incumbent():
    cert = certify(chain_and_one(), budget=20)
    assert default_levels(chain_and_one()) == defaults_of(Family.MAKESPAN) == (
        "route-path", "device-work", "segment-path", "cut-segments", "split-heads", "segment-lp", "segment-schedules",
        "window-schedules", "lifted-heads", "schedule-lp", "schedule")
    assert cert.placement is not None and cert.objective == pytest.approx(4.0)
    assert cert.bound == pytest.approx(4.0) and cert.proved_by == "route-path"


def test_device_work_sees_ops_that_must_share_a_device():
    # four independent ops of 3 on two devices, released at 1 by a common input: 1 + 6 at least
    ops = [Op(name="s", work=1.0, out_bytes=0.0)] + [Op(name=f"w{i}", work=3.0) for i in range(4)]
    p = Problem(Graph(ops, [("s", f"w{i}") for i in range(4)]), ops_devices(2), Makespan())
    assert energy_makespan(p)[0] == pytest.approx(7.0) == optimum(p)
    assert route_path_makespan(p)[0] == pytest.approx(4.0)


def test_latency_device_work_leaves_what_a_host_may_run_to_the_hosts():
    # hosts run any number of ops at once: ops a CPU may run add nothing to the accelerators' work
    ops = [Op(name=f"w{i}", work={"accelerator": 3.0, "cpu": 3.0}) for i in range(4)]
    with_cpu = Problem(Graph(ops, []), Cluster.accelerators(1, cpus=1), Latency())
    assert energy_latency(with_cpu)[0] == 0.0 and optimum(with_cpu) == pytest.approx(3.0)
    only = Problem(Graph(ops, []), Cluster.accelerators(2), Latency())
    assert energy_latency(only)[0] == pytest.approx(6.0) == optimum(only)


def test_the_schedule_levels_are_the_models():
    cert = certify(chain_and_one(), budget=30, gap=0.0, stop_at_gap=False)
    got = {r.level: r.bound for r in cert.levels}
    assert got["schedule"] == pytest.approx(4.0) and got["schedule-lp"] <= 4.0 + TOL
    # one objective: the schedule levels take it under either name where devices run one op at a time, and leave it
    # to the latency levels where accelerators run invocations
    assert LEVELS["schedule"].accepts(Problem(chain_and_one().graph, ops_devices(3), Latency())) is None
    assert LEVELS["schedule"].accepts(Problem(chain_and_one().graph, Cluster.accelerators(3), Makespan()))


@pytest.fixture
def derived():
    """A formulation a user derived from ``schedule`` and registered, recording each problem it writes."""
    from placement_dsl.formulations.schedule import ScheduleFormulation

    makespan_rule = get("schedule").table()[Makespan]

    seen: list[Problem] = []

    def recorded(term, problem):
        seen.append(problem)
        return makespan_rule(term, problem)

    form = register(get("schedule").derive("schedule-recorded", cls=ScheduleFormulation, rules={Makespan: recorded}))
    yield form, seen
    FORMULATIONS.pop(form.name)


def test_certify_solves_a_user_derived_formulation(derived):
    form, seen = derived
    cert = certify(chain_and_one(), budget=30, gap=0.0, stop_at_gap=False, levels=("schedule-lp", "schedule"),
                   formulation="schedule-recorded")
    assert any(p.has(ScheduleHint) for p in seen)  # the levels' models (the horizon set) were written by it
    assert cert.bound == pytest.approx(4.0) and cert.objective == pytest.approx(4.0)
    seen.clear()
    by_object = certify(chain_and_one(), budget=30, levels=("schedule",), formulation=form)
    assert any(p.has(ScheduleHint) for p in seen) and by_object.bound == pytest.approx(4.0)


def test_certify_refuses_a_formulation_it_cannot_use(derived):
    with pytest.raises(SpecError, match="unknown formulation 'nope'"):
        certify(chain_and_one(), budget=5, formulation="nope")
    with pytest.raises(SpecError, match="single-sample model levels"):
        certify(Problem(chain_and_one().graph, Cluster.accelerators(3), Bottleneck()), budget=5,
                formulation="schedule-recorded")
    with pytest.raises(SpecError, match="cannot write the problem") as err:
        certify(Problem(chain_and_one().graph, Cluster.accelerators(3), Latency()), budget=5,
                formulation="schedule-recorded")
    assert "\n" not in str(err.value)


def test_the_route_path_pays_the_cheapest_transfer():
    # a -> b with a pinned to acc0 and b to acc1: the path pays a's transfer over the link (size 4 / 2 + 0.5)
    ops = [Op(name="a", work=1.0, out_bytes=4.0), Op(name="b", work=1.0)]
    c = Cluster([Device(name="acc0"), Device(name="acc1")], [Link(src="acc0", dst="acc1", bandwidth=2.0, latency=0.5),
                                                           Link(src="acc1", dst="acc0", bandwidth=2.0, latency=0.5)])
    p = Problem(Graph(ops, [("a", "b")]), c, Makespan(), [Pin("a", "acc0"), Pin("b", "acc1")])
    assert route_path_makespan(p)[0] == pytest.approx(4.5) == optimum(p)
    free = Problem(Graph(ops, [("a", "b")]), c, Makespan())
    assert route_path_makespan(free)[0] == pytest.approx(2.0)  # both may share a device: no transfer
    assert np.isfinite(energy_makespan(free)[0])
