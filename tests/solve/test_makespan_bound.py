"""A makespan solve stopped before its proof reports the segments' CP-SAT bound computed beside it (solve.py)."""
from __future__ import annotations

import pytest

from placement_dsl.bounds.single_sample import single_sample_bound
from placement_dsl.cluster import Cluster, Device
from placement_dsl.constraints import Congestion
from placement_dsl.cpsat import available
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Makespan
from placement_dsl.problem import Problem
from placement_dsl.solve import solve

pytestmark = pytest.mark.skipif(not available(), reason="the segments are priced by CP-SAT (OR-Tools)")


def stars(n: int, k: int = 4) -> Problem:
    """``n`` forks in a row, each of ``k`` branches of 4 or 5 between cut ops of 1, tensors of 1, ``k`` devices that
    run one op at a time, bandwidth 1, port congestion: each fork takes 8 or more past its cut (its three moves out
    leave one port one at a time, the returns enter one): 1 + 9 n in all, where the closed forms prove 1 + 7 n."""
    ops, edges = [Op(name="c0", work=1.0, out_bytes=1.0)], []
    for s in range(n):
        for i in range(k):
            ops.append(Op(name=f"s{s}x{i}", work=4.0 + i % 2, out_bytes=1.0))
            edges += [(f"c{s}", f"s{s}x{i}"), (f"s{s}x{i}", f"c{s + 1}")]
        ops.append(Op(name=f"c{s + 1}", work=1.0, out_bytes=1.0))
    return Problem(Graph(ops, edges), Cluster([Device(name=f"d{i}", invocations=False) for i in range(k)]),
                   Makespan(), [Congestion("port")])


def test_a_stopped_solve_reports_the_segments_bound():
    p = stars(9)  # 46 ops: a graph this small would be proved by its model, and starts no child (MIN_OPS)
    assert single_sample_bound(p)[0] == pytest.approx(64.0)
    r = solve(p, time_limit=20)
    assert r.bound == pytest.approx(82.0) and r.objective >= 82.0 - 1e-6  # 82 is reached: the bound is the optimum
    assert r.timings.total <= 20 + 5
