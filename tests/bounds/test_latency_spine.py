"""The spine bound of Tarnawski's latency (bounds/latency_spine.py): runs of cut ops with the side branches between
them priced; exact on hand instances, at most the brute-force optimum under contiguity and not, where memory binds.
"""
from __future__ import annotations

import math
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_dsl.bounds.latency import route_path_latency
from placement_dsl.bounds.latency_spine import spine_bound, spine_or_nothing
from placement_dsl.bounds.memory_path import segment_bound
from placement_dsl.brute import brute_force
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous, Memory
from placement_dsl.deadline import BudgetSpent, Deadline
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Latency
from placement_dsl.problem import Problem
from placement_dsl.testing import optimum

TOL = 1e-6


def op(name: str, acc: float = 1.0, cpu: float = 10.0, mem: float = 1.0, out: float = 1.0) -> Op:
    return Op(name=name, work={"accelerator": acc, "cpu": cpu}, param_bytes=mem, out_bytes=out)


def test_side_ops_that_straddle_a_run_boundary_take_its_free_memory_or_run_elsewhere():
    # a -> {b, s} -> d, 2 bytes each, accelerators of 4: b or s cannot join a and d both, so each run holds one of
    # them (the cheapest: both moved into the runs, 1 + 1 of work, the runs full) or one runs elsewhere (its
    # invocation reads and writes 1: 3 on the third accelerator the bound allows; 10 on the CPU). The runs a and d
    # write and read at least 1: 1 + 1 + 2 + 1 + 1 = 6. The path bound leaves s free: a, b | d = 2 + 1 + 1 + 1 = 5.
    # The optimum is 8 (a, b | s, d: 2 + 2 writes | 2 reads + 2).
    ops = [op(x, mem=2.0) for x in ("a", "b", "s", "d")]
    g = Graph(ops, [("a", "b"), ("a", "s"), ("b", "d"), ("s", "d")])
    p = Problem(g, Cluster.accelerators(2, memory=4.0, cpus=1), Latency(), [Memory()])
    assert spine_bound(p)[0] == pytest.approx(6.0)
    assert segment_bound(p)[0] == pytest.approx(5.0)
    assert brute_force(p)[0] == pytest.approx(8.0)
    assert spine_bound(Problem(g, p.cluster, Latency(), [Memory(), Contiguous()]))[0] == pytest.approx(6.0)


def test_on_a_chain_the_spine_is_the_path_cut():
    # every op of a chain is a cut op: the spine bound is the path DP's cheapest cut (memory_path's first test)
    ops = [op(f"v{i}", mem=2.0) for i in range(4)]
    g = Graph(ops, list(pairwise(f"v{i}" for i in range(4))))
    p = Problem(g, Cluster.accelerators(2, memory=4.0, cpus=1), Latency(), [Memory()])
    assert spine_bound(p)[0] == pytest.approx(6.0) == brute_force(p)[0]


def test_declines_without_the_invocation_model_or_cut_ops():
    g = Graph([op("a"), op("b"), op("c")], [("a", "c"), ("b", "c")])
    p = Problem(g, Cluster.accelerators(2, cpus=1), Latency())
    assert spine_bound(p)[0] > 0  # c is comparable with all others
    two = Graph([op("a"), op("b")], [])
    assert spine_bound(Problem(two, Cluster.accelerators(2, cpus=1), Latency())) == \
        (0.0, "no op is comparable with all others")


@st.composite
def forks(draw):
    """Chains of forks ``c_i -> branches -> c_{i+1}`` (branches of one or two ops), at most 5 ops on two or three
    accelerators and a CPU (4 on three), integer times and sizes, memory that binds or not, contiguous splits or
    any."""
    k = draw(st.integers(2, 3))
    room = 5 if k == 2 else 4
    time = st.integers(0, 4).map(float)
    size = st.integers(0, 3).map(float)

    def make(name: str) -> Op:
        acc = draw(time)
        return op(name, acc=acc, cpu=acc * draw(st.sampled_from([1.0, 3.0, 10.0])), mem=draw(size), out=draw(size))

    ops, edges, f = [make("c0")], [], 0
    while f == 0 or (len(ops) + 2 <= room and draw(st.booleans())):
        branches = draw_branches(draw, f, room - len(ops))
        for chain in branches:
            ops += [make(x) for x in chain]
            edges += [(f"c{f}", chain[0]), *pairwise(chain), (chain[-1], f"c{f + 1}")]
        if draw(st.booleans()):
            edges.append((f"c{f}", f"c{f + 1}"))
        ops.append(make(f"c{f + 1}"))
        f += 1
    memory = draw(st.sampled_from([math.inf, 3.0, 4.0, 6.0]))
    terms = [Memory()] + ([Contiguous()] if draw(st.booleans()) else [])
    return Problem(Graph(ops, edges), Cluster.accelerators(k, memory=memory, cpus=1), Latency(), terms)


def draw_branches(draw, f: int, room: int) -> list[list[str]]:
    """Module ``f``'s branches: one to three chains of one or two ops, within ``room`` ops less the next cut op."""
    branches: list[list[str]] = []
    for b in range(draw(st.integers(1, 3))):
        left = room - 1 - sum(map(len, branches))
        if left < 1:
            break
        length = 2 if left >= 2 and draw(st.booleans()) else 1
        branches.append([f"f{f}b{b}o{i}" for i in range(length)])
    return branches


def modules_problem(draw, ops: list[Op], edges: list[tuple[str, str]], k: int) -> Problem:
    """The drawn modules on ``k`` accelerators of memory 4 and a CPU, contiguous or not (drawn)."""
    terms = [Memory()] + ([Contiguous()] if draw(st.booleans()) else [])
    return Problem(Graph(ops, edges), Cluster.accelerators(k, memory=4.0, cpus=1), Latency(), terms)


def assert_not_above_the_optimum(problem: Problem) -> float:
    """The spine bound is at most the brute-force optimum, which is returned."""
    best = optimum(problem)
    assert spine_bound(problem)[0] <= best + TOL * max(1.0, best)
    return best


def diamond(ops: list[Op]) -> Problem:
    """``c0 -> b1, b2 -> c1`` (``ops`` in that order) on two accelerators of memory 4 and a CPU."""
    g = Graph(ops, [("c0", "b1"), ("c0", "b2"), ("b1", "c1"), ("b2", "c1")])
    return Problem(g, Cluster.accelerators(2, memory=4.0, cpus=1), Latency(), [Memory()])


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(forks())
def test_never_above_the_brute_force_optimum(problem):
    best = assert_not_above_the_optimum(problem)
    assert route_path_latency(problem)[0] <= best + TOL * max(1.0, best)


def test_a_branch_that_fits_in_neither_run_pays_its_own_reads_and_writes_elsewhere():
    # a -> b1 -> b2 -> d and a -> s -> d, accelerators of 4: a and d hold 3 each, b1 and b2 3 each, so neither b fits
    # beside a or d (1 + 1 free) and the branch runs elsewhere after a and before d. On an accelerator it reads a's
    # tensor (3) and writes b2's (3): 3 + 2 + 3 = 8; a host op of it costs 10. The least tensors of the branch (1 and
    # 1) priced it 4 before. The runs' least crossing (min(3, 1 + 1) = 2 each way) gave 1 + 2 + 8 + 2 + 1 = 14; with the
    # branch wholly elsewhere a's run writes a's tensor (3) and d's run reads b2's (3) and s's (1; s runs elsewhere
    # within the branch's 8, as joining either run moves more): 1 + 3 + 8 + 4 + 1 = 17
    ops = [op("a", mem=3.0, out=3.0), op("b1", mem=3.0, out=1.0), op("b2", mem=3.0, out=3.0), op("s", mem=0.0),
           op("d", mem=3.0)]
    g = Graph(ops, [("a", "b1"), ("b1", "b2"), ("b2", "d"), ("a", "s"), ("s", "d")])
    for k in (2, 3):
        p = Problem(g, Cluster.accelerators(k, memory=4.0, cpus=1), Latency(), [Memory()])
        assert spine_bound(p)[0] == pytest.approx(17.0)
        assert brute_force(p)[0] >= 24.0 - TOL


@st.composite
def modules(draw):
    """One Inception-like module: ``c0`` -> three parallel branches of one to three ops (at most five) -> ``c1``, on
    three accelerators of 4 and a CPU (two when the branches hold five ops). The cut ops hold 3 each and a branch op 2
    or 3, so no branch op joins both runs and a branch mostly runs elsewhere: the bound meets the optimum often (an
    over-price of one per branch op on an accelerator fails here). Tensors of 0 to 4 that differ along a branch,
    contiguous splits or any."""
    time = st.integers(0, 4).map(float)

    def make(name: str, mem: float) -> Op:
        acc = draw(time)
        return op(name, acc=acc, cpu=acc * draw(st.sampled_from([1.0, 3.0, 10.0])), mem=mem,
                  out=draw(st.integers(0, 4)))

    lengths = [draw(st.integers(1, 3)) for _ in range(3)]
    while sum(lengths) > 5:
        lengths[lengths.index(max(lengths))] -= 1
    ops, edges = [make("c0", 3.0)], []
    for b, length in enumerate(lengths):
        chain = [f"b{b}o{i}" for i in range(length)]
        ops += [make(x, draw(st.sampled_from([2.0, 3.0]))) for x in chain]
        edges += [("c0", chain[0]), *pairwise(chain), (chain[-1], "c1")]
    ops.append(make("c1", 3.0))
    terms = [Memory()] + ([Contiguous()] if draw(st.booleans()) else [])
    k = 3 if sum(lengths) <= 4 else 2
    return Problem(Graph(ops, edges), Cluster.accelerators(k, memory=4.0, cpus=1), Latency(), terms)


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_never_above_the_brute_force_optimum_on_modules_of_three_branches(problem):
    assert_not_above_the_optimum(problem)


def test_branches_moved_into_the_run_after_a_host_cut_read_the_cut_ops_tensor():
    # c0 holds 5 > 4: a host runs it (2). b1 and b2 join c1's run (the CPU takes 10 each): the run reads c0's tensor
    # (5), not the branches' least ones (1 + 1), which only a split between two runs could move: 2 + 5 + 3 = 10, the
    # optimum. Charging each end the least crossing of any split gave 2 + 2 + 3 = 7.
    ops = [op("c0", cpu=2.0, mem=5.0, out=5.0), op("b1"), op("b2"), op("c1")]
    p = diamond(ops)
    assert spine_bound(p)[0] == pytest.approx(10.0) == brute_force(p)[0]


@st.composite
def host_cuts(draw):
    """Modules ``c_i -> branches -> c_{i+1}`` (at most six ops, branches of one or two) on two or three accelerators
    of 4 and a CPU whose cut ops may hold 5 (a host runs them), tensors of 0 to 5 that differ along a branch: where a
    split moves a branch into a run, the run moves the tensors of the split, often a cut op's larger one. Charging
    the cut op's tensor once per path, the least crossing twice, or a host end's tensors fails here."""
    room, k = 6, draw(st.integers(2, 3))

    def make(name: str, cut: bool) -> Op:
        acc = float(draw(st.integers(0, 3)))
        mem = draw(st.sampled_from([2.0, 3.0, 5.0]) if cut else st.integers(0, 3).map(float))
        return op(name, acc=acc, cpu=acc * draw(st.sampled_from([1.0, 3.0, 10.0])), mem=mem,
                  out=float(draw(st.integers(0, 5))))

    ops, edges, f = [make("c0", True)], [], 0
    while f == 0 or (len(ops) + 2 <= room and draw(st.booleans())):
        branches = draw_branches(draw, f, room - len(ops))
        for chain in branches:
            ops += [make(x, False) for x in chain]
            edges += [(f"c{f}", chain[0]), *pairwise(chain), (chain[-1], f"c{f + 1}")]
        ops.append(make(f"c{f + 1}", True))
        f += 1
    return modules_problem(draw, ops, edges, k)


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(host_cuts())
def test_never_above_the_brute_force_optimum_where_the_runs_move_a_cut_ops_tensor(problem):
    assert_not_above_the_optimum(problem)


def test_a_full_run_holds_no_branch_prefix_so_the_next_run_reads_the_cut_ops_tensor():
    # c0 fills its accelerator: b1 and b2 join c1's run, which reads c0's tensor (5) after c0's run wrote it (5):
    # 1 + 5 + 5 + 3 = 14, the optimum (the CPU takes 10 an op). With the two runs' free memory summed, the branches'
    # prefixes sat in c0's run and its tensors of 1 crossed: 1 + 2 + 2 + 3 = 8.
    ops = [op("c0", mem=4.0, out=5.0), op("b1"), op("b2"), op("c1")]
    p = diamond(ops)
    assert spine_bound(p)[0] == pytest.approx(14.0) == brute_force(p)[0]


@st.composite
def full_runs(draw):
    """One module whose cut ops' tensors (3 to 5) are larger than its branches' (0 to 2) and whose cut ops hold 1 to
    4 of an accelerator's 4: a branch split between the two runs moves small tensors, a branch wholly in one run a
    cut op's, and each run's own free memory decides which splits exist. Pricing a run as if it had no room, or
    charging the least crossing twice, fails here."""
    def make(name: str, cut: bool) -> Op:
        acc = float(draw(st.integers(1, 2)))
        return op(name, acc=acc, cpu=10.0 * acc, mem=float(draw(st.integers(1, 4) if cut else st.integers(1, 2))),
                  out=float(draw(st.integers(3, 5) if cut else st.integers(0, 2))))

    ops, edges = [make("c0", True)], []
    for b in range(draw(st.integers(1, 2))):
        chain = [f"b{b}o{i}" for i in range(draw(st.integers(1, 2)))]
        ops += [make(x, False) for x in chain]
        edges += [("c0", chain[0]), *pairwise(chain), (chain[-1], "c1")]
    ops.append(make("c1", True))
    terms = [Memory()] + ([Contiguous()] if draw(st.booleans()) else [])
    return Problem(Graph(ops, edges), Cluster.accelerators(draw(st.integers(2, 3)), memory=4.0, cpus=1), Latency(),
                   terms)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(full_runs())
def test_never_above_the_brute_force_optimum_where_each_run_has_its_own_room(problem):
    assert_not_above_the_optimum(problem)


def test_a_module_between_two_host_cut_ops_costs_its_branches_time_elsewhere():
    # c0 holds 5 > 4 (a host runs it), c1 takes 100 on an accelerator and 1 on the CPU: c0, the branches and c1 on
    # the CPU, 1 + 1 + 1 = 3, the optimum. The branches wholly elsewhere (0.1 + a read of 0.7 and a write of 0.2 on
    # an accelerator) need no memory; a rounding residue of their least work moved (0.1 + 0.9 - 0.9) once priced
    # memory there, no free memory between two hosts held it, and the bound put c1 on an accelerator: 101.9.
    ops = [op("c0", cpu=1.0, mem=5.0, out=0.7), op("b1", acc=0.1, cpu=1.0, out=0.2),
           op("b2", acc=0.1, cpu=1.0, out=0.2), op("c1", acc=100.0, cpu=1.0)]
    p = diamond(ops)
    assert spine_bound(p)[0] == pytest.approx(3.0) == brute_force(p)[0]


def test_a_segment_of_ops_without_time_costs_nothing_between_the_runs():
    # e and f are views after d (no time, no tensor, memory of their own): the runs a | d, the cut forced by memory,
    # pay a's tensor twice: 1 + 1 + 1 + 1 = 4 (a segment that takes no time has a grid of one point); the optimum
    # also writes d's tensor for the view that does not fit beside it: 5
    ops = [op("a", mem=3.0), op("d", mem=3.0), op("e", acc=0.0, cpu=0.0, mem=1.0, out=0.0),
           op("f", acc=0.0, cpu=0.0, mem=1.0, out=0.0)]
    g = Graph(ops, [("a", "d"), ("d", "e"), ("d", "f")])
    p = Problem(g, Cluster.accelerators(2, memory=4.0, cpus=1), Latency(), [Memory()])
    assert spine_bound(p)[0] == pytest.approx(4.0)
    assert brute_force(p)[0] == pytest.approx(5.0)


def test_stops_by_its_deadline():
    ops = [op(f"v{i}", mem=2.0) for i in range(6)]
    g = Graph(ops, list(pairwise(f"v{i}" for i in range(6))))
    p = Problem(g, Cluster.accelerators(2, memory=4.0, cpus=1), Latency(), [Memory()])
    with pytest.raises(BudgetSpent):
        spine_bound(p, Deadline(0.0))
    assert spine_or_nothing(p, Deadline(0.0)) == 0.0


def test_a_wide_segment_stops_by_its_deadline_between_the_rooms_of_its_ends(monkeypatch):
    # a fan a -> {f0 .. f7} -> z: one segment whose ends are priced per kind and room of each (every path each
    # time: 1,500 of them on a wide fan ran 3 minutes past a 10 s limit); a deadline passing in the first pricing
    # stops it there, not after every room
    from placement_dsl.bounds import latency_spine_ends
    ops = [op("a", mem=2.0)] + [op(f"f{i}", mem=2.0) for i in range(8)] + [op("z", mem=2.0)]
    g = Graph(ops, [("a", f"f{i}") for i in range(8)] + [(f"f{i}", "z") for i in range(8)])
    p = Problem(g, Cluster.accelerators(2, memory=8.0, cpus=1), Latency(), [Memory()])
    clock, priced, at = Deadline(60.0), [], latency_spine_ends.EndPrices.at

    def expiring(self, *args, **kwargs):  # the clock runs out while the first end is priced
        priced.append(args[:2])
        clock.at = 0.0
        return at(self, *args, **kwargs)
    monkeypatch.setattr(latency_spine_ends.EndPrices, "at", expiring)
    with pytest.raises(BudgetSpent, match="ends' rooms"):
        spine_bound(p, clock)
    assert len(priced) == 1


def test_prices_that_do_not_fit_the_time_left_are_not_begun(monkeypatch):
    # a segment's prices are whole-array passes over its chains and grid points (1,500 x 3,586 on a wide fan): sized
    # first, and refused where the estimate exceeds what is left rather than begun and run past the deadline
    from placement_dsl.bounds import latency_spine
    ops = [op("a", mem=2.0)] + [op(f"f{i}", mem=2.0) for i in range(8)] + [op("z", mem=2.0)]
    g = Graph(ops, [("a", f"f{i}") for i in range(8)] + [(f"f{i}", "z") for i in range(8)])
    p = Problem(g, Cluster.accelerators(2, memory=8.0, cpus=1), Latency(), [Memory()])
    assert spine_bound(p, Deadline(60.0))[0] > 0
    monkeypatch.setattr(latency_spine, "PRICE_CELL", 1.0)  # a second per chain and point: more than 60 s
    with pytest.raises(BudgetSpent, match="prices of 8 chains"):
        spine_bound(p, Deadline(60.0))
    assert spine_bound(p)[0] > 0  # without a deadline the prices are not sized


def test_a_segments_ends_are_priced_once_per_kind_of_end_every_room_at_once(monkeypatch):
    # the ends of a segment between two cut ops are priced per kind of each end (host or accelerator) and per room
    # of each (up to eight levels): a pass per pair of rooms was 1 + 2 x 8 + 64 passes over every path of the
    # segment, 2.5 s of Inception-v3's 326 ops, more than a 20 s solve's bound phase gave the spine. One pass per
    # pair of kinds prices every room at once, to the same bound.
    from placement_dsl.bounds import latency_spine_ends
    ops = [op("a", mem=2.0)] + [op(f"f{i}", mem=2.0) for i in range(8)] + [op("z", mem=2.0)]
    g = Graph(ops, [("a", f"f{i}") for i in range(8)] + [(f"f{i}", "z") for i in range(8)])
    p = Problem(g, Cluster.accelerators(2, memory=8.0, cpus=1), Latency(), [Memory()])
    priced, at = [], latency_spine_ends.EndPrices.at

    def counted(self, *args, **kwargs):
        priced.append(args[:2])
        return at(self, *args, **kwargs)
    monkeypatch.setattr(latency_spine_ends.EndPrices, "at", counted)
    assert spine_bound(p)[0] == pytest.approx(14.0)
    assert sorted(priced) == [(0, 0), (0, 1), (1, 0), (1, 1)]
