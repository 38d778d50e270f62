"""The side inputs a run of a longest path pays in the latency IP's run arcs (``latency_data._side_price``).

With one subgraph per accelerator a run's slot is a convex set: an op that reaches the path op before the run (or
is reached from the one after it) cannot share the slot, and a side op that joins the slot brings its own inputs
with it. The run-paths floor (:func:`run_path_bound`) is checked against brute force on small graphs whose memory
splits the path, and on a hand instance where it gives exactly the known value.
"""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_dsl.blocks.base import Context
from placement_dsl.blocks.latency_data import run_path_bound
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous, Memory, Subgraphs
from placement_dsl.graph import Graph
from placement_dsl.objectives import Latency
from placement_dsl.problem import Problem
from placement_dsl.testing import host_op as op
from placement_dsl.testing import optimum

TOL = 1e-6


def side_chain() -> Problem:
    """``e -> a -> b -> c`` with a side op ``w`` (``e -> w -> c``); ``c`` fills most of an accelerator of 6, so
    ``a, b`` and ``c`` take two, and ``w`` fits beside ``c``. Reading ``w``'s tensor or joining ``w`` to ``c``'s
    slot and reading ``e``'s (``e`` reaches ``b``, off ``c``'s accelerator) costs 4 either way."""
    g = Graph([op("e", 0, 0, out=4), op("a", 1, 50, mem=2), op("b", 1, 50, mem=2), op("w", 1, 50, out=4, mem=1),
               op("c", 1, 50, out=0, mem=5)], [("e", "a"), ("a", "b"), ("b", "c"), ("e", "w"), ("w", "c")])
    return Problem(g, Cluster.accelerators(2, memory=6.0, cpus=1), Latency(), [Memory(), Subgraphs(1)])


def floor(p: Problem) -> float:
    ctx = Context(p)
    return run_path_bound(ctx, None, True) * ctx.scale.time


def test_a_side_op_joining_the_slot_brings_the_read_of_its_input():
    """The cheapest runs of ``e, a, b, c``: ``e, a, b`` on one accelerator (2, ``b``'s write 1; ``w`` may join it
    and read ``e`` there) and ``c`` on the other (``b``'s read 1, its time 1, and 4 for ``w``: its tensor, or
    ``e``'s if ``w`` joins): 9. Letting ``w`` join ``c``'s slot for free gave 7; the optimum is 14."""
    p = side_chain()
    assert optimum(p) == 14.0
    assert floor(p) == pytest.approx(9.0)


@st.composite
def contiguous_with_side_chains(draw):
    """5-6 ops in a random DAG (side ops off its longest paths, fed by earlier ops and feeding later ones), on one or
    two accelerators of memory 6 and a CPU, one subgraph per accelerator; ops up to 5 bytes, so memory splits."""
    n = draw(st.integers(5, 6))
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, n) if draw(st.booleans())]
    fast = [draw(st.sampled_from([None, 0, 1, 2, 3])) for _ in range(n)]  # None: CPU-only
    ops = [op(f"v{i}", fast[i], draw(st.integers(1, 12)), out=draw(st.integers(0, 4)), mem=draw(st.integers(0, 5)))
           for i in range(n)]
    term = draw(st.sampled_from([Subgraphs(1), Contiguous()]))
    acc = draw(st.integers(1, 2))
    return Problem(Graph(ops, edges, name="side"), Cluster.accelerators(acc, memory=6.0, cpus=1), Latency(),
                   [Memory(), term])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(contiguous_with_side_chains())
def test_the_run_paths_floor_never_exceeds_the_brute_force_optimum(p):
    assert floor(p) <= optimum(p) * (1 + TOL) + TOL
