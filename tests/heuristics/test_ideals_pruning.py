"""The DP over ideals pruned by an incumbent max-load: the same optimum as the unpruned DP, fewer pairs."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.errors import InfeasibleError
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import ideal_solve
from placement_dsl.heuristics.ideals import ideal_lattice, search, setup

MODELS = [CostModel(), CostModel(overlap="half"), CostModel(overlap="full"), CostModel.named("bottleneck"),
          CostModel(memory="overflow")]


@st.composite
def graphs(draw, max_ops: int = 14) -> Graph:
    """Random DAGs larger than brute force reaches, with CPU-only ops and parameters."""
    n = draw(st.integers(2, max_ops))
    ops = []
    for i in range(n):
        work = {"accelerator": draw(st.sampled_from([0, 1, 2, 3, 5, 8, 13])), "cpu": draw(st.sampled_from([1, 4, 20]))}
        if draw(st.integers(0, 12)) == 0:
            del work["accelerator"]
        ops.append(Op(name=f"v{i}", work=work, out_bytes=draw(st.integers(0, 4)),
                      param_bytes=draw(st.sampled_from([0, 1, 3, 6]))))
    p = draw(st.sampled_from([0.15, 0.3, 0.5]))
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, n)
             if draw(st.integers(0, 99)) < 100 * p]
    return Graph(ops, edges)


@st.composite
def clusters(draw) -> Cluster:
    return Cluster.accelerators(draw(st.integers(1, 5)), memory=draw(st.sampled_from([math.inf, 25.0, 40.0])),
                                cpus=draw(st.integers(0, 2)), cpu_memory=draw(st.sampled_from([math.inf, 30.0])))


def _value(graph, cluster, model, upper_bound, replication=False, descend=False):
    su = setup(graph, cluster, model, replication, True)
    try:
        sol, info = search(su, linearize=False, max_ideals=100_000, upper_bound=upper_bound, descend=descend)
    except InfeasibleError:
        return math.inf, 0
    return sol.value, info["pairs"]


@settings(max_examples=60, deadline=None)
@given(graph=graphs(), cluster=clusters(), model=st.sampled_from(MODELS), replication=st.booleans(),
       slack=st.sampled_from([0.0, 1e-6, 0.1, 1.0]), descend=st.booleans())
def test_pruned_dp_equals_unpruned(graph, cluster, model, replication, slack, descend):
    """An incumbent at the optimum (the tightest prune) or above it leaves the optimum unchanged,
    in one exact sweep and in the descending search by feasibility runs."""
    exact, _ = _value(graph, cluster, model, None, replication)
    if not math.isfinite(exact):
        return
    pruned, _ = _value(graph, cluster, model, exact * (1 + slack), replication, descend)
    assert pruned == pytest.approx(exact, rel=1e-9, abs=1e-12)


def test_incumbent_prunes_states_and_walk():
    """A 16-op chain on 4 devices: dead states and the tightening walk visit far fewer pairs."""
    g = Graph([Op(name=f"v{i}", work=1 + i % 3, out_bytes=0) for i in range(16)],
              [(f"v{i}", f"v{i + 1}") for i in range(15)])
    # a wide graph too: two independent 8-chains (81 ideals)
    h = Graph([Op(name=f"{s}{i}", work=1 + i % 3, out_bytes=0) for s in "ab" for i in range(8)],
              [(f"{s}{i}", f"{s}{i + 1}") for s in "ab" for i in range(7)])
    for graph in (g, h):
        cluster = Cluster.accelerators(4)
        exact, free = _value(graph, cluster, CostModel(), None)
        pruned, pairs = _value(graph, cluster, CostModel(), exact)
        assert pruned == exact
        assert pairs < free / 2, (pairs, free)


def test_dead_states_and_transfers_prune_beyond_the_work_cutoff():
    """Three 6-op chains with tensors on 3 devices: fewer pairs than the walk cut at ``work <= incumbent``.

    That cut alone visits every ``J ⊊ I`` with ``work(I \\ J) <= incumbent``; dead states (outside
    work too large for the devices left) and the stage's outgoing tensors in its bound cut more.
    """
    g = Graph([Op(name=f"{s}{i}", work=1 + i % 3, out_bytes=2) for s in "abc" for i in range(6)],
              [(f"{s}{i}", f"{s}{i + 1}") for s in "abc" for i in range(5)])
    su = setup(g, Cluster.accelerators(3), CostModel(), False, True)
    exact, free = _value(g, Cluster.accelerators(3), CostModel(), None)
    sol, info = search(su, linearize=False, max_ideals=100_000, upper_bound=exact, descend=False)
    assert sol.value == exact == 12.0 and info["pairs"] < free
    lat = ideal_lattice(su.con)
    work = g.work("accelerator")
    sets = [frozenset(lat.nodes(i).tolist()) for i in range(lat.count)]
    load = [sum(work[su.con.image == v].sum() for v in s) for s in sets]
    cutoff = sum(1 for i in range(1, lat.count) for j in range(lat.count)
                 if sets[j] < sets[i] and load[i] - load[j] <= exact * (1 + 1e-9))
    assert info["pairs"] < 0.7 * cutoff, (info["pairs"], cutoff)


def _reference(su):
    """The DP with neither incumbent nor the walk's work cut (``mfw``)."""
    saved, ideal_solve.PRUNE_WORK = ideal_solve.PRUNE_WORK, False
    try:
        return ideal_solve.solve(ideal_lattice(su.con), su.classes, su.model, su.replication, math.inf)
    finally:
        ideal_solve.PRUNE_WORK = saved


def _pure_work(works, k, branches, replication):
    """Ops of pure work (no tensors) in ``branches`` chains on ``k`` accelerators: the DP's setup, the reference
    optimum and the ideal lattice."""
    ops = [Op(name=f"v{i}", work=w) for i, w in enumerate(works)]
    half = len(works) // branches
    edges = [(f"v{i}", f"v{i + 1}") for i in range(len(works) - 1) if branches == 1 or (i + 1) % half]
    su = setup(Graph(ops, edges), Cluster.accelerators(k), CostModel(), replication, True)
    return su, _reference(su).value, ideal_lattice(su.con)


@settings(max_examples=60, deadline=None)
@given(graph=graphs(), cluster=clusters(), model=st.sampled_from(MODELS), replication=st.booleans())
def test_work_cut_and_descent_equal_the_reference(graph, cluster, model, replication):
    """The work cut alone, and the descending search from the reference's value and from far above it."""
    su = setup(graph, cluster, model, replication, True)
    ref = _reference(su).value
    lat = ideal_lattice(su.con)
    plain = ideal_solve.solve(lat, su.classes, su.model, su.replication, math.inf)
    assert plain.value == pytest.approx(ref, rel=1e-9, abs=1e-12) if math.isfinite(ref) else plain.value == ref
    if math.isfinite(ref):
        for ub in (ref, 2 * ref + 1):
            sol = ideal_solve.solve(lat, su.classes, su.model, su.replication, ub, descend=True)
            assert sol.value == pytest.approx(ref, rel=1e-9, abs=1e-12) and sol.stages


@settings(max_examples=80, deadline=None)
@given(works=st.lists(st.floats(0.1, 10.0, allow_nan=False), min_size=4, max_size=12), k=st.integers(2, 4),
       branches=st.integers(1, 2))
def test_target_at_the_optimum_is_feasible(works, k, branches):
    """Stages of pure work (no tensors): the optimal bottleneck stage's work *is* the optimum, so the
    work cut is tight there (``cw(J') = cw(I) - T`` up to rounding). The feasibility run at exactly
    the optimum must find it, the one just below must not; a cut tightened by an epsilon (or without
    its rounding slack) loses the optimal stage and fails here."""
    su, ref, lat = _pure_work(works, k, branches, replication=False)
    for descend in (True, False):  # the feasibility runs at and below ref; one exact sweep pruned at ref
        sol = ideal_solve.solve(lat, su.classes, su.model, False, ref, descend=descend)
        assert sol.value == ref and sol.stages, (descend, sol.value, ref)


def _replicated_case():
    """Two 8-work ops and a 5 on 5 accelerators beside CPU-only ops: the optimum 13/3 replicates
    ``{v1, v2}`` 3 times and ``v3`` twice around a CPU stage (v3 on 2 replicas after it)."""
    ops = [Op(name="v0", work={"cpu": 1}), Op(name="v1", work={"accelerator": 5, "cpu": 1}),
           Op(name="v2", work={"accelerator": 8, "cpu": 4}), Op(name="v3", work={"accelerator": 8, "cpu": 4})]
    ops += [Op(name=f"v{i}", work={"cpu": 1}) for i in (4, 5, 6)]
    edges = [("v0", "v3"), ("v0", "v4"), ("v0", "v5"), ("v0", "v6"), ("v1", "v2"), ("v1", "v3"), ("v1", "v4"),
             ("v1", "v5"), ("v1", "v6"), ("v2", "v3"), ("v2", "v4"), ("v2", "v5"), ("v2", "v6"), ("v4", "v5"),
             ("v4", "v6"), ("v5", "v6")]
    cluster = Cluster.accelerators(5, memory=math.inf, cpus=1, cpu_memory=math.inf)
    return setup(Graph(ops, edges), cluster, CostModel(), True, True)


def test_descent_with_replicas_reaches_the_optimum():
    """From far above the optimum the search's runs reuse the bits of a run at a larger target, which
    leave out the states one device short of the whole cluster; the last stage (``v3`` on 2 replicas of
    a sub-ideal in a state two accelerators short) must still be found, not 5.0."""
    su = _replicated_case()
    ref = _reference(su).value
    assert ref == pytest.approx(13 / 3)
    lat = ideal_lattice(su.con)
    for ub in (ref, 2 * ref + 1, 100.0):
        sol = ideal_solve.solve(lat, su.classes, su.model, True, ub, descend=True)
        assert sol.value == pytest.approx(ref) and sol.stages, (ub, sol.value)
    sol, _ = search(su, linearize=False, max_ideals=100_000, upper_bound=2 * ref + 1, descend=True)
    assert sol.value == pytest.approx(ref)


def test_feasibility_run_from_earlier_bits_equals_a_fresh_run():
    """A run given the bits of runs at larger targets finds the same feasible states as a run alone."""
    su = _replicated_case()
    lat = ideal_lattice(su.con)
    chained = ideal_solve.Sweeps(lat, su.classes, su.model, True)
    for T in (9.5, 6.25, 4.75, 4.5, 4.4):
        fresh = ideal_solve.Sweeps(lat, su.classes, su.model, True).feasible_bits(T)
        assert (chained.feasible_bits(T) == fresh).all(), T
        assert ideal_solve._has_split(fresh, chained.counts.shape[0] - 1), T


def test_work_cut_prunes_replicated_stages():
    """With replication the work cut holds per replica (a stage on ``k`` replicas holds at most ``k`` times
    the target): the chains of the tests above visit far fewer pairs than unpruned, same optimum."""
    g = Graph([Op(name=f"v{i}", work=1 + i % 3, out_bytes=0) for i in range(16)],
              [(f"v{i}", f"v{i + 1}") for i in range(15)])
    h = Graph([Op(name=f"{s}{i}", work=1 + i % 3, out_bytes=2) for s in "abc" for i in range(6)],
              [(f"{s}{i}", f"{s}{i + 1}") for s in "abc" for i in range(5)])
    for graph, devices in ((g, 4), (h, 3)):
        cluster = Cluster.accelerators(devices)
        exact, free = _value(graph, cluster, CostModel(), None, replication=True)
        for descend in (False, True):
            pruned, pairs = _value(graph, cluster, CostModel(), exact, replication=True, descend=descend)
            assert pruned == exact
            assert pairs < free / 2, (descend, pairs, free)


@settings(max_examples=60, deadline=None)
@given(works=st.lists(st.floats(0.1, 10.0, allow_nan=False), min_size=4, max_size=10), k=st.integers(2, 4),
       branches=st.integers(1, 2))
def test_target_at_the_optimum_is_feasible_with_replicas(works, k, branches):
    """Pure work on replicas (no parameters, so no all-reduce): a stage on ``r`` replicas holds exactly
    ``r`` times its load, so the replicated work cut is tight at the optimum; the runs at and just
    below it, and the sweep pruned at it, must still find it."""
    su, ref, lat = _pure_work(works, k, branches, replication=True)
    for descend in (True, False):
        sol = ideal_solve.solve(lat, su.classes, su.model, True, ref, descend=descend)
        assert sol.value == pytest.approx(ref, rel=1e-12) and sol.stages, (descend, sol.value, ref)
