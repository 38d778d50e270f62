"""Makespan instances for the segment bounds' tests: devices that run one op at a time, and chains of forks between
cut ops small enough for brute force."""
from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

from hypothesis import strategies as st

from placement_dsl.brute import brute_force
from placement_dsl.cluster import Cluster, Device
from placement_dsl.constraints import Congestion
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Makespan
from placement_dsl.problem import Problem


def serial(k: int, kinds: tuple[str, ...] = ()) -> Cluster:
    """``k`` devices that run one op at a time, bandwidth 1 between any two (kinds ``acc`` unless given)."""
    kinds = kinds or ("acc",) * k
    return Cluster([Device(name=f"d{i}", kind=kinds[i], invocations=False) for i in range(k)])


def star(k: int, work: float, out: float, mode: str | None) -> Problem:
    """``a -> x0..x{k-1} -> b`` on ``k`` serial devices: ``a`` and ``b`` take 1, each ``x`` ``work``, tensors ``out``."""
    ops = [Op(name="a", work=1.0, out_bytes=out), *[Op(name=f"x{i}", work=work, out_bytes=out) for i in range(k)],
           Op(name="b", work=1.0)]
    edges = [("a", f"x{i}") for i in range(k)] + [(f"x{i}", "b") for i in range(k)]
    return Problem(Graph(ops, edges), serial(k), Makespan(), [Congestion(mode)])


def between_floor_and_optimum(problems: list[Problem], found: list[tuple[float, str, bool]],
                               floor: Callable[[Problem], tuple[float, Any]], tol: float = 1e-6) -> None:
    """Each of ``problems``' priced bounds ``found`` (``(value, note, complete)``) complete, at least ``floor``'s
    and at most the brute-force optimum (every placement list-scheduled)."""
    for p, (value, _, complete) in zip(problems, found):
        assert complete
        assert floor(p)[0] - tol <= value <= brute_force(p)[0] + tol


@st.composite
def fork_chains(draw, times: tuple[int, int] = (1, 5), most_size: int = 3):
    """Chains of forks ``c_i -> branches -> c_{i+1}`` (branches of one or two ops) on two or three devices of two
    kinds, integer times in ``times`` (0 allows ops of no time, as views) and tensor sizes up to ``most_size``, port
    or channel congestion or none; at most 6 ops on two devices and 5 on three (brute force list-schedules every
    placement)."""
    D = draw(st.integers(2, 3))
    room = 6 if D == 2 else 5
    kinds = tuple(draw(st.sampled_from(["p", "q"])) for _ in range(D))
    time = st.integers(*times).map(float)
    size = st.integers(0, most_size).map(float)

    def op(name: str) -> Op:
        return Op(name=name, work={"p": draw(time), "q": draw(time)}, out_bytes=draw(size))

    ops, edges, f = [op("c0")], [], 0
    while f == 0 or (len(ops) + 3 <= room and draw(st.booleans())):
        branches: list[list[str]] = []
        for b in range(draw(st.integers(2, 3))):
            used = len(ops) + 1 + sum(map(len, branches))  # with the closing cut
            left = room - used - (1 if b == 0 else 0)  # the first fork keeps room for its second branch
            if left < 1:
                break
            length = 2 if left >= 2 and draw(st.booleans()) else 1
            branches.append([f"f{f}b{b}o{i}" for i in range(length)])
        for chain in branches:
            ops += [op(x) for x in chain]
            edges += [(f"c{f}", chain[0]), *pairwise(chain), (chain[-1], f"c{f + 1}")]
        ops.append(op(f"c{f + 1}"))
        f += 1
    mode = draw(st.sampled_from(["port", "channel", None]))
    return Problem(Graph(ops, edges), serial(D, kinds), Makespan(), [Congestion(mode)])


@st.composite
def hubs(draw):
    """``a -> v -> q_i -> x_i -> b``: a view ``v`` of ``a``'s tensor whose slices ``q_i`` feed two heads ``x_i`` (as an
    attention layer's q/k/v views), on three devices of one kind with port congestion, so that a device may relay
    what it holds a share of; the view and its slices take no time, the heads' outputs are small."""
    ops = [Op(name="a", work=float(draw(st.integers(0, 1))), out_bytes=float(draw(st.integers(2, 4)))),
           Op(name="v", work=0.0, out_bytes=float(draw(st.integers(2, 4)))),
           Op(name="b", work=float(draw(st.integers(0, 1))))]
    ops += [Op(name=f"q{i}", work=0.0, out_bytes=float(draw(st.integers(1, 2)))) for i in range(2)]
    ops += [Op(name=f"x{i}", work=float(draw(st.integers(1, 2))), out_bytes=float(draw(st.integers(0, 1))))
            for i in range(2)]
    edges = [("a", "v")] + [e for i in range(2) for e in (("v", f"q{i}"), (f"q{i}", f"x{i}"), (f"x{i}", "b"))]
    return Problem(Graph(ops, edges), serial(3), Makespan(), [Congestion("port")])
