"""The makespan bounds (bounds/makespan.py): segments around the ordered ops, times below one unit, ops a device
cannot run, the work bound's weights and the path bound's ready times and transfers.
"""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl.bounds.makespan import dual_weights, makespan_bounds, path_bound, work_bound
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.graph import Graph, Op

TWO = Cluster.accelerators(2, cpus=1)


# ---------------------------------------------------------------------------- bounds/makespan.py


def _two_kinds(x_to_y: float = 1.0, y_to_x: float = 1.0) -> Cluster:
    return Cluster([Device(name="x", kind="x"), Device(name="y", kind="y")],
                   [Link(src="x", dst="y", bandwidth=x_to_y), Link(src="y", dst="x", bandwidth=y_to_x)])


def test_makespan_segments_before_between_and_after_the_ops_every_op_is_ordered_with():
    # r1, r2 -> s -> p0..p3 -> m -> (x1 -> x2 | y) -> t, unit works except x1 = x2 = 2 and y = 0.5, x2 listed
    # before x1, on two accelerators. s, m and t are ordered with every op (3); the segments {r1, r2} (path 1,
    # work 1), {p0..p3} (path 1, work 2) and {x1, x2, y} (path 4, work 2.25) add 1 + 2 + 4: 10. The critical
    # path r1 s p0 m x1 x2 t is 9, the work 13.5 / 2
    ops = [Op(name=n, work=1.0) for n in ("r1", "r2", "s", "p0", "p1", "p2", "p3", "m")]
    ops += [Op(name="x2", work=2.0), Op(name="x1", work=2.0), Op(name="y", work=0.5), Op(name="t", work=1.0)]
    edges = [("r1", "s"), ("r2", "s"), *[("s", f"p{i}") for i in range(4)], *[(f"p{i}", "m") for i in range(4)],
             ("m", "x1"), ("x1", "x2"), ("x2", "t"), ("m", "y"), ("y", "t")]
    bounds = makespan_bounds(Graph(ops, edges), Cluster.accelerators(2))
    assert bounds == {"critical_path": 9.0, "path": 9.0, "work": 6.75, "segments": 10.0, "bound": 10.0}


def test_makespan_bounds_below_one_time_unit():
    assert makespan_bounds(Graph([Op(name="a", work=0.5)]), Cluster.accelerators(1)) == {
        "critical_path": 0.5, "path": 0.5, "work": 0.5, "segments": 0.5, "bound": 0.5}


def test_makespan_bounds_with_an_op_one_device_cannot_run():
    # a runs on x only (2), b anywhere (1): every bound is a's 2 (the work bound at weights (1, 0), where a's
    # impossible time on y meets a zero weight)
    graph = Graph([Op(name="a", work={"x": 2.0}), Op(name="b", work={"x": 1.0, "y": 1.0})])
    assert makespan_bounds(graph, _two_kinds()) == {
        "critical_path": 2.0, "path": 2.0, "work": 2.0, "segments": 2.0, "bound": 2.0}


def test_work_bound_weighs_devices_by_the_inverse_of_what_they_can_run():
    # five devices (no grid): a runs on d0 only, b on d0 or d1 (1 each); d0's total is 2, d1's 1, the rest run
    # nothing: weights (1/3, 2/3, 0, 0, 0) give 1/3 + 1/3, above the uniform 0.2 + 0.2
    cluster = Cluster([Device(name=f"d{i}", kind=f"k{i}") for i in range(5)])
    graph = Graph([Op(name="a", work={"k0": 1.0}), Op(name="b", work={"k0": 1.0, "k1": 1.0})])
    assert work_bound(graph, cluster) == pytest.approx(2 / 3)


def test_path_bound_reads_each_devices_ready_time_and_each_producers_transfers():
    # a (x 1, y 5) writes 10 bytes to b (x 1, y 5): b on x is ready at 1 (2), on y at 5 (10): 2, not 5 + 1
    graph = Graph([Op(name="a", work={"x": 1.0, "y": 5.0}, out_bytes=10.0), Op(name="b", work={"x": 1.0, "y": 5.0})],
                  [("a", "b")])
    assert path_bound(graph, _two_kinds()) == 2.0
    # a (x 3, y 1) writes 10 bytes to b (x 1, y 3), c (1, 1) writes nothing to b: b on x waits for a on x (3) or
    # a on y plus 10 bytes (11): 4; on y it is ready at 1: 4. a's tensor from y is not c's (free)
    graph = Graph([Op(name="a", work={"x": 3.0, "y": 1.0}, out_bytes=10.0), Op(name="c", work={"x": 1.0, "y": 1.0}),
                   Op(name="b", work={"x": 1.0, "y": 3.0})], [("a", "b"), ("c", "b")])
    assert path_bound(graph, _two_kinds()) == 4.0


def test_work_weights_uniform_inverse_and_the_simplex_grid():
    rows = dual_weights(2, np.array([2.0, 6.0]))  # inverse (1/2, 1/6), normalized (3/4, 1/4); the grid i/20
    assert len(rows) == 2 + 21 and rows[:3].tolist() == [[0.5, 0.5], [0.75, 0.25], [0.0, 1.0]]
    assert rows[-1].tolist() == [1.0, 0.0]
    assert dual_weights(2, np.array([0.0, 4.0]))[1].tolist() == [0.0, 1.0]  # a device with nothing to run: weight 0
    assert dual_weights(2, np.array([0.5, np.inf]))[1].tolist() == [1.0, 0.0]  # ... or an impossible op
    assert len(dual_weights(2, np.array([0.0, np.inf]))) == 1 + 21  # no inverse weights at all
    assert len(dual_weights(4, np.ones(4))) == 2 + 1771 and len(dual_weights(5, np.ones(5))) == 2  # the grid up to D = 4


def test_work_bound_with_the_uniform_weights_alone():
    # five devices (no grid) and no work: no inverse weights either, one candidate row: 0
    assert work_bound(Graph([Op(name="a", work=0.0)]), Cluster.accelerators(5)) == 0.0



def test_the_energy_bound_prices_at_most_its_cells_of_weights_times_ops_and_stays_a_bound(monkeypatch):
    """Four serial devices give 1,773 dual weights; on a long graph the grid is thinned to ENERGY_CELLS weights x ops
    (a 20,000-op chain took 9 s and 1 GB in one call, its certify level overrunning a 3 s budget by 10 s). Any
    weights give a bound: the thinned one lies between the uniform weights' and the whole grid's."""
    from placement_dsl.bounds import makespan

    rng = np.random.default_rng(0)
    n = 3000
    graph = Graph([Op(name=f"v{i}", work={"x": float(a), "y": float(b)}) for i, (a, b) in
                   enumerate(rng.uniform(0.5, 2.0, (n, 2)))], [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])
    times = np.column_stack([graph.work("x"), graph.work("x"), graph.work("y"), graph.work("y")])
    comm = np.zeros((n, 4, 4))
    priced = []
    costs = makespan.weighted_costs
    monkeypatch.setattr(makespan, "weighted_costs", lambda t, w: priced.append(w.shape[0]) or costs(t, w))
    monkeypatch.setattr(makespan, "ENERGY_CELLS", 300_000)
    thinned = makespan.energy_bound(graph, times, comm)
    assert priced[-1] * n <= 300_000
    monkeypatch.setattr(makespan, "ENERGY_CELLS", 10 ** 9)
    whole = makespan.energy_bound(graph, times, comm)
    assert priced[-1] == dual_weights(4, times.sum(axis=0)).shape[0] > priced[0]
    uniform = times.min(axis=1).sum() / 4
    assert uniform <= thinned * (1 + 1e-12) and thinned <= whole * (1 + 1e-12)
