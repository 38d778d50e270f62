"""The side inputs a run of a longest path pays in the latency IP's run arcs (``latency_data._side_price``).

With one subgraph per accelerator a run's slot is a convex set: an op that reaches the path op before the run (or
is reached from the one after it) cannot share the slot, and a side op that joins the slot brings its own inputs
with it. The run-paths floor (:func:`run_path_bound`) is checked against brute force on small graphs whose memory
splits the path, and on a hand instance where it gives exactly the known value.
"""
from __future__ import annotations

from itertools import pairwise

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
    """The cheapest runs of ``e, a, b, c``: ``e, a, b`` on one accelerator (2, ``b``'s write 1, and 4 for ``w``:
    ``e``'s write, or ``w``'s own if ``w`` joins, since ``c`` reads it from elsewhere) and ``c`` on the other
    (``b``'s read 1, its time 1, and 4 for ``w``: its tensor, or ``e``'s if ``w`` joins): 13. Letting ``w`` join
    ``c``'s slot for free gave 7, and joining ``e``'s without writing its tensor for ``c`` 9; the optimum is 14."""
    p = side_chain()
    assert optimum(p) == 14.0
    assert floor(p) == pytest.approx(13.0)


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


def projection_block() -> Problem:
    """A residual block whose skip branch has its own op: ``x -> c1 -> c2 -> y`` and ``x -> s -> y``. ``c2`` fills an
    accelerator of 6 beside at most one more op, so the path ``x, c1, c2, y`` splits inside the block and the skip
    branch crosses the split: ``x``'s tensor (3) or ``s``'s (2) leaves the first slot and enters the second."""
    g = Graph([op("x", 1, 50, out=3, mem=1), op("c1", 1, 50, out=1, mem=1), op("c2", 1, 50, out=1, mem=4),
               op("s", 1, 50, out=2, mem=1), op("y", 1, 50, out=0, mem=1)],
              [("x", "c1"), ("c1", "c2"), ("c2", "y"), ("x", "s"), ("s", "y")])
    return Problem(g, Cluster.accelerators(2, memory=6.0, cpus=1), Latency(), [Memory(), Contiguous()])


def test_a_skip_branch_crossing_a_run_boundary_is_written_and_read():
    """``x, c1`` | ``c2, y``: work 4 and ``c1``'s write and read 2. The skip branch leaves the first slot and enters
    the second whichever slot ``s`` joins: in the first it writes its own tensor (2), in the second ``x``'s is
    written (3); in the second it reads ``x``'s (3), in the first its own is read (2). So at least 2 + 2: 10, the
    optimum 11 (``s``'s own time in a slot). The first run's arc let ``s`` join its slot without writing its tensor
    for ``y``: 8."""
    p = projection_block()
    assert optimum(p) == 11.0
    assert floor(p) == pytest.approx(10.0)


def skip_chain_block() -> Problem:
    """:func:`projection_block` with the skip branch a chain ``x -> s1 -> s2 -> y`` of free ops (no time, no memory)
    with tensors 3, 1, 3."""
    g = Graph([op("x", 1, 50, out=3, mem=1), op("c1", 1, 50, out=1, mem=1), op("c2", 1, 50, out=1, mem=4),
               op("s1", 0, 50, out=1, mem=0), op("s2", 0, 50, out=3, mem=0), op("y", 1, 50, out=0, mem=1)],
              [("x", "c1"), ("c1", "c2"), ("c2", "y"), ("x", "s1"), ("s1", "s2"), ("s2", "y")])
    return Problem(g, Cluster.accelerators(2, memory=6.0, cpus=1), Latency(), [Memory(), Contiguous()])


def test_a_skip_chain_crossing_a_run_boundary_pays_its_least_tensor_twice():
    """The cheapest crossing cuts the chain after ``s1`` (written 1, read 1), so 8 is the optimum and the floor;
    either side alone let the chain join its slot for free (6), and pricing a chain by its largest tensor would
    claim 10."""
    p = skip_chain_block()
    assert optimum(p) == 8.0
    assert floor(p) == pytest.approx(8.0)


@st.composite
def residual_blocks(draw):
    """One or two residual blocks in a row (``x -> main chain -> y``, ``x -> skip chain -> y``, the skip chain of
    zero to two ops), at most 7 ops, on one or two accelerators of memory 6 and a CPU, one subgraph per accelerator;
    ops up to 4 bytes of memory, so memory splits a block, and tensors up to 4 bytes, so the skip tensors weigh."""
    ops, edges, x = [], [], "x0"

    def add(name: str) -> None:
        fast = draw(st.sampled_from([None, 0, 1, 2, 3]))
        ops.append(op(name, fast, draw(st.integers(1, 12)), out=draw(st.integers(0, 4)), mem=draw(st.integers(0, 4))))

    add(x)
    for b in range(draw(st.integers(1, 2))):
        room = 7 - len(ops) - 1  # the block's join
        if room < 2:
            break
        main = [f"b{b}m{i}" for i in range(draw(st.integers(1, min(3, room))))]
        skip = [f"b{b}s{i}" for i in range(draw(st.integers(0, min(2, room - len(main)))))]
        for name in main + skip:
            add(name)
        y = f"b{b}y"
        add(y)
        for chain in (main, skip):
            path = [x, *chain, y]
            edges += list(pairwise(path))
        x = y
    term = draw(st.sampled_from([Subgraphs(1), Contiguous()]))
    acc = draw(st.integers(1, 2))
    return Problem(Graph(ops, edges, name="residual"), Cluster.accelerators(acc, memory=6.0, cpus=1), Latency(),
                   [Memory(), term])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(residual_blocks())
def test_the_run_paths_floor_never_exceeds_the_optimum_of_residual_blocks(p):
    assert floor(p) <= optimum(p) * (1 + TOL) + TOL
