"""The DP over ideals a row of sub-ideals per numpy step (:mod:`placement_dsl.heuristics.ideal_rows`) against the
kernels' walks, pair by pair: the same tables, bits, boundaries and splits, to the bit."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.errors import InfeasibleError
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import ideal_feasible as F
from placement_dsl.heuristics import ideal_kernels as K
from placement_dsl.heuristics.ideal_rows import Rows, boundaries_numpy
from placement_dsl.heuristics.ideal_solve import Sweeps, read_split, split_steps
from placement_dsl.heuristics.ideals import ideal_lattice, search, setup
from placement_dsl.io import load_workload
from tests.heuristics.test_ideals_pruning import MODELS, graphs


@st.composite
def clusters(draw) -> Cluster:
    """Accelerators and CPUs at a bandwidth that makes transfers fractional (sums that round), up to 80 states
    (more than one word of bits per ideal)."""
    acc, cpus = draw(st.sampled_from([(1, 0), (2, 1), (3, 0), (4, 2), (7, 9)]))
    return Cluster.accelerators(acc, memory=draw(st.sampled_from([math.inf, 25.0, 40.0])), cpus=cpus,
                                bandwidth=draw(st.sampled_from([1.0, 0.3, 3.7])),
                                cpu_memory=draw(st.sampled_from([math.inf, 30.0])))


def fractional(graph: Graph, on: bool) -> Graph:
    """``graph`` with tensors, work and parameters off the integers (``on``): sums that round differently in
    another order."""
    if not on:
        return graph
    ops = [Op(name=op.name, work={k: v * 1.1 + 0.01 * i for k, v in op.work.items()},
              out_bytes=op.out_bytes * 0.7 + 0.013 * i if op.out_bytes else 0.0,
              param_bytes=op.param_bytes * 0.9 + 0.03 * i if op.param_bytes else 0.0)
           for i, op in enumerate(graph.ops)]
    return Graph(ops, [(graph.names[u], graph.names[v]) for u, v in zip(graph.src.tolist(), graph.dst.tolist())])


def _problem(graph, cluster, model, replication):
    su = setup(graph, cluster, model, replication, True)
    lat = ideal_lattice(su.con, 100_000)
    try:
        opt = search(su, linearize=False, max_ideals=100_000, upper_bound=None, descend=False)[0].value
    except InfeasibleError:
        opt = math.inf
    return Sweeps(lat, su.classes, model, replication), opt


@settings(max_examples=60, deadline=None)
@given(graph=graphs(), cluster=clusters(), model=st.sampled_from(MODELS), replication=st.booleans(),
       shift=st.sampled_from([None, -0.2, 0.0, 1e-9, 0.3]), floor=st.sampled_from([0.0, 0.5]), frac=st.booleans())
def test_the_rows_sweep_is_the_kernel_s_table_and_split(graph, cluster, model, replication, shift, floor, frac):
    """The exact sweep's whole table (bounded or not, with a floor), and the split its back-links give (ties
    broken as the kernel's walk breaks them)."""
    sw, opt = _problem(fractional(graph, frac), cluster, model, replication)
    hi = math.inf if shift is None or not math.isfinite(opt) else opt * (1 + shift)
    lo = floor * opt if math.isfinite(opt) else 0.0
    out = K.sweep(*sw.head, hi, sw.rem_work, sw.remaining, lo, sw.prune, sw.rho, math.inf)
    ours = Rows(sw.head, hi).exact(hi, sw.rem_work, sw.remaining, lo, sw.prune, sw.rho)
    np.testing.assert_array_equal(ours[0], out[0])
    assert split_steps(ours, sw.strides) == split_steps(out, sw.strides)


@settings(max_examples=60, deadline=None)
@given(graph=graphs(), cluster=clusters(), model=st.sampled_from(MODELS), replication=st.booleans(),
       shifts=st.lists(st.sampled_from([-0.3, -1e-9, 0.0, 0.05, 1.0]), min_size=1, max_size=4), frac=st.booleans())
def test_the_rows_feasibility_runs_are_the_kernel_s_bits_and_splits(graph, cluster, model, replication, shifts, frac):
    """Feasibility runs at targets around the optimum, each from the bits of the runs before it as the search
    keeps them: every ideal's bits, the pairs' loads priced once for every run, and the split read back."""
    sw, opt = _problem(fractional(graph, frac), cluster, model, replication)
    if not math.isfinite(opt) or opt <= 0:
        return
    targets = [opt * (1 + s) for s in shifts]
    rows = Rows(sw.head, max(targets))
    none = np.zeros((0, sw.masks.shape[2]), np.uint64)
    below = above = None
    for T in targets:
        known = below[1] if below is not None and below[0] <= T else none
        possible = above[1] if above is not None and above[0] >= T else none
        args = (T, sw.rem_work, sw.remaining)
        theirs = F.feasible(*sw.head, *args, sw.prune, sw.rho, sw.masks, known, possible, math.inf)[0]
        ours = rows.feasible(*args, sw.masks, known, possible)[0]
        np.testing.assert_array_equal(ours, theirs)
        assert (read_split(ours, sw.head, sw.counts, sw.strides, T, rows.witness)
                == read_split(theirs, sw.head, sw.counts, sw.strides, T))
        if (int(theirs[-1, (sw.counts.shape[0] - 1) >> 6]) >> ((sw.counts.shape[0] - 1) & 63)) & 1:
            above = (T, theirs) if above is None or T < above[0] else above
        else:
            below = (T, theirs) if below is None or T > below[0] else below


@settings(max_examples=40, deadline=None)
@given(graph=graphs(), cluster=clusters())
def test_the_boundaries_in_python_are_the_kernel_s(graph, cluster):
    sw, _ = _problem(fractional(graph, True), cluster, CostModel(), False)
    lat = sw.lat
    theirs = K.boundaries(lat.ideals, lat.sub_ptr, lat.sub_idx, *sw.io[4:])
    ours = boundaries_numpy(lat.ideals, lat.sub_ptr, lat.sub_idx, *sw.io[4:])
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["OperatorGraphs/bert_l-3_inference", "LayerGraphs/resnet50_training"])
def test_the_rows_give_the_kernel_s_answer_on_the_paper_s_workloads(dnn_partitioning, name):
    """Tarnawski et al.'s inputs (float costs): the feasibility run just below the optimum and at it, and the
    DPL sweep, as the DP runs them."""
    w = load_workload(dnn_partitioning / "throughput-inputs" / f"{name}.json")
    su = setup(w.graph, w.cluster, CostModel(), False, True)
    sw = Sweeps(ideal_lattice(su.con, 100_000), su.classes, su.model, False)
    best = {"OperatorGraphs/bert_l-3_inference": 27.9185676799125, "LayerGraphs/resnet50_training": 78.6318125}[name]
    rows = Rows(sw.head, best * 1.01)
    none = np.zeros((0, sw.masks.shape[2]), np.uint64)
    for T in (best * (1 - 1e-12), best * (1 + 1e-12)):
        theirs = F.feasible(*sw.head, T, sw.rem_work, sw.remaining, sw.prune, sw.rho, sw.masks, none, none,
                            math.inf)[0]
        ours = rows.feasible(T, sw.rem_work, sw.remaining, sw.masks, none, none)[0]
        np.testing.assert_array_equal(ours, theirs)
        assert (read_split(ours, sw.head, sw.counts, sw.strides, T, rows.witness)
                == read_split(theirs, sw.head, sw.counts, sw.strides, T))
    out = K.sweep(*sw.head, best * 1.01, sw.rem_work, sw.remaining, 0.0, sw.prune, sw.rho, math.inf)
    ours = rows.exact(best * 1.01, sw.rem_work, sw.remaining, 0.0, sw.prune, sw.rho)
    np.testing.assert_array_equal(ours[0], out[0])
    assert split_steps(ours, sw.strides) == split_steps(out, sw.strides)
    assert ours[0][-1, -1] == pytest.approx(best, rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(graph=graphs(), picks=st.lists(st.integers(0, 10**6), max_size=8))
def test_the_lookup_in_python_is_the_kernel_s(graph, picks):
    """Rows found among the ideals by a dictionary in Python: the kernel's ids, -1 for a row that is no ideal."""
    from placement_dsl.heuristics.ideal_rows import lookup_dict

    sw, _ = _problem(graph, Cluster.accelerators(2), CostModel(), False)
    ideals = sw.lat.ideals
    rows = np.array([ideals[p % len(ideals)] for p in picks] + [~ideals[0]],
                    dtype=np.uint64).reshape(-1, ideals.shape[1])
    np.testing.assert_array_equal(lookup_dict(ideals, rows), K.lookup(ideals, rows))


def test_the_boundaries_in_python_of_a_wide_lattice_walk_it_rather_than_fill_dense_tables():
    """21,121 ideals of 19,968 nodes (cnn-20000 beside a CPU) took 15.6 GB and 88 s of a 60 s limit in the whole-array
    version, its numpy steps out of reach of the deadline's timer: past ideal_rows.DENSE_CELLS cells the kernel's own
    walk runs, its memory the output's. A 6,000-op chain: the dense tables would take hundreds of MB."""
    import tracemalloc

    n = 6_000
    g = Graph([Op(name=f"v{i}", work=1.0, out_bytes=1.0) for i in range(n)],
              [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])
    su = setup(g, Cluster.stages(2), CostModel(), False, True)
    sw = Sweeps(ideal_lattice(su.con, 100_000), su.classes, CostModel(), False)
    lat = sw.lat
    tracemalloc.start()
    try:
        ours = boundaries_numpy(lat.ideals, lat.sub_ptr, lat.sub_idx, *sw.io[4:])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MB"
    theirs = K.boundaries(lat.ideals, lat.sub_ptr, lat.sub_idx, *sw.io[4:])
    for a, b in zip(ours, theirs, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
