"""The superblock relaxations solved to optimality equal their own definitions, enumerated.

``tests/test_relaxations.py`` checks that every relaxation stays *below* the optimum; a row
dropped from a relaxation only lowers its bound, so those tests cannot see it. Here each MIP
of :mod:`placement_dsl.blocks.superblock` is compared, value for value, with an enumeration
of the relaxation as the papers define it: every assignment of the ops to ``first``,
``middle``, ``last`` (and, in Tarnawski's setting, the CPUs), the rows of Archer et al. §3.2-3.3
or of :class:`~placement_dsl.blocks.superblock.HostSuperblocks`, and each superblock costed
by the cost model as one device with the superblock's memory. A second test shows that
every row changes the enumerated optimum on some instance of the list, so a MIP that drops
or weakens it fails the first test. The rest pins the templates' refusals word for word, their
links and their docs.
"""
from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pyomo.environ as pyo
import pytest

from placement_dsl.blocks.base import Context
from placement_dsl.blocks.superblock import (
    HostSuperblocks,
    NoTransfer,
    SuperblockLoad,
    Superblocks,
    accelerators_of,
    stages_of,
)
from placement_dsl.certificate import model_bound
from placement_dsl.cluster import Cluster, Device
from placement_dsl.compile import compile
from placement_dsl.conformance import check_documented
from placement_dsl.constraints import DagOrder, Memory, Overflow, Pin
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import REL_TOL, MemoryMode, combine_loads, device_costs
from placement_dsl.formulations import GuessedBlock, get
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck, Throughput
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem, Stages
from placement_dsl.testing import SHAPES, host_op, random_graph, structured_graph

ROWS = ("dag_order", "work_floor", "op_floor", "work_cap", "empty", "memory")


def _sizes(problem: Problem, formulation: str, k: int) -> tuple[int | None, int | None]:
    if formulation != "guess":
        return None, None
    j = problem.find(GuessedBlock)[0].j
    return j - 1, k - j


def enumerated(problem: Problem, formulation: str, drop: frozenset[str] = frozenset()) -> float:
    """The relaxation's optimum by enumeration (``inf``: no assignment meets its rows); ``drop``: rows left out."""
    g, c = problem.graph, problem.cluster
    model = problem.cost_model()
    tarnawski = bool(c.host.any()) or not problem.has(DagOrder)
    acc = [d for d in c.devices if not d.host]
    hosts = [d for d in c.devices if d.host]
    k = len(acc)
    a, b = _sizes(problem, formulation, k)
    if tarnawski and k == 1 and (a, b) == (None, None):
        a, b = 0, 0
    m = acc[0].memory
    caps = [math.inf if s is None or (s and math.isinf(m)) else s * m for s in (a, 1, b)]
    names = ("first", "middle", "last")
    merged = Cluster([acc[0].model_copy(update={"name": n, "memory": cap}) for n, cap in zip(names, caps)]
                     + hosts, ())
    weights = (1 / a if a else 0.0, 1.0, 1 / b if b else 0.0) if formulation == "guess" else (0.0, 1.0, 0.0)
    weights += (1.0,) * len(hosts)
    times = merged.times(g)
    w = c.times(g)[:, c.index[acc[0].name]]
    floor = max(w.max(), w.sum() / k)
    hard = problem.has(Memory) and model.memory is not MemoryMode.OVERFLOW
    best = math.inf
    for combo in itertools.product(range(merged.size), repeat=g.n):
        assign = np.asarray(combo, dtype=np.int64)
        if not np.isfinite(times[np.arange(g.n), assign]).all():
            continue
        if not tarnawski and "dag_order" not in drop and (assign[g.src] > assign[g.dst]).any():
            continue
        on = [w[assign == s].sum() for s in range(3)]
        if tarnawski:
            if "work_floor" not in drop and k * on[1] < sum(on) - 1e-9:
                continue
            if "op_floor" not in drop and (assign < 3).any() and on[1] < w[assign < 3].max() - 1e-9:
                continue
            if "work_cap" not in drop and any(s and on[d] > s * on[1] + 1e-9 for d, s in ((0, a), (2, b))):
                continue
        elif "work_floor" not in drop and on[1] < floor - 1e-9:
            continue
        if "empty" not in drop and any(s == 0 and (assign == d).any() for d, s in ((0, a), (2, b))):
            continue
        rows = device_costs(Placement(g, merged, assign), model)
        if hard and "memory" not in drop and any(r.memory_used > r.memory_capacity * (1 + REL_TOL) for r in rows):
            continue
        if formulation == "no-cut-io":
            loads = [float(combine_loads(model.overlap, np.array(r.compute), np.array(0.0), np.array(0.0),
                                    np.array(r.overflow))) for r in rows]
        else:
            loads = [r.load for r in rows]
        best = min(best, max(wt * load for wt, load in zip(weights, loads)))
    return best


def instance(seed: int) -> tuple[Problem, str]:
    """Archer's setting (identical stages, DAG order) or Tarnawski's (accelerators + a CPU), any overlap,
    hard memory, overflow or none, and one of the relaxations that build the superblock templates."""
    rng = np.random.default_rng(1000 + seed)
    tarnawski = seed % 2 == 1
    n = int(rng.integers(3, 6))
    k = int(rng.integers(2, 5)) if not tarnawski else int(rng.integers(1, 4))
    memory = float(rng.choice([math.inf, 4.0, 6.0, 9.0]))
    bandwidth = float(rng.choice([0.5, 1.0, 2.0]))
    overlap = str(rng.choice(["none", "half", "full"]))
    formulation = str(rng.choice(["superblock", "guess", "no-cut-io"]))
    # Tarnawski's setting: skewed work with CPU times (so the middle's floor by its heaviest op binds)
    graph = (structured_graph(random.Random(seed), SHAPES[seed % len(SHAPES)], max(n, 4), cpu=True) if tarnawski
             else random_graph(np.random.default_rng(seed), n, density=0.5))
    if tarnawski:
        cluster = Cluster.accelerators(k, memory=memory, cpus=1, bandwidth=bandwidth)
        terms = ([Overflow()] if rng.random() < 0.3 else [Memory()]) if math.isfinite(memory) else []
        objective = Throughput(overlap=overlap)
    else:
        cluster = Stages(k, memory=memory, bandwidth=bandwidth)
        memory_term = [Overflow()] if rng.random() < 0.5 else [Memory()]
        terms = [DagOrder(), *memory_term] if math.isfinite(memory) else [DagOrder()]
        objective = Bottleneck(overlap=overlap)
    if formulation == "guess":
        terms.append(GuessedBlock(int(rng.integers(1, k + 1))))
    return Problem(graph, cluster, objective, terms), formulation


# where the random draws above rarely bind a row
HAND: dict[str, tuple[Problem, str]] = {
    # LB_2 on 4 accelerators + a CPU, memory 4, half a byte per time unit: first (one accelerator) may hold at most the middle's work
    "work_cap": (Problem(Graph([host_op("v0", 2, 4, 1, 0), host_op("v1", 3, 6, 2, 1), host_op("v2", 2, 4, 2, 2),
                                host_op("v3", 3, 12, 0, 3)], [("v0", "v2"), ("v1", "v2")]),
                          Cluster.accelerators(4, memory=4.0, cpus=1, bandwidth=0.5), Throughput(), [Memory(), GuessedBlock(2)]),
                 "guess"),
    # LB_1 on 2 accelerators + a CPU, half a byte per time unit: first has no accelerator and holds no op
    "empty": (Problem(Graph([host_op("v0", 2, 4, 0, 4), host_op("v1", 2, 8, 2, 4), host_op("v2", 1, 2, 1, 0)],
                            [("v0", "v1"), ("v0", "v2"), ("v1", "v2")]),
                      Cluster.accelerators(2, cpus=1, bandwidth=0.5), Throughput(overlap="full"), [GuessedBlock(1)]), "guess"),
    # one accelerator: first and last hold none, so z (no work there, 5 bytes) cannot hide in them; it takes the CPU
    "one_accelerator": (Problem(Graph([host_op("z", 0, 3, 0, 5), host_op("a", 2, 8, 0, 1)]),
                                Cluster.accelerators(1, memory=4.0, cpus=1), Throughput(), [Memory()]), "superblock"),
    # LB_2 on two accelerators of 4 bytes beside a CPU of 16, which sets the memory scale (a stage is a quarter of a
    # model unit): the middle takes h (its op floor), first holds one of a, b (3 bytes each), the other runs on the
    # CPU: 10. First with more room would hold both: 8
    "cpu_memory_scale": (Problem(Graph([host_op("h", 8, 16, 0, 3), host_op("a", 1, 10, 0, 3), host_op("b", 1, 10, 0, 3)]),
                                 Cluster.accelerators(2, memory=4.0, cpus=1, cpu_memory=16.0), Throughput(),
                                 [Memory(), GuessedBlock(2)]), "guess"),
    # LB_2 of two stages of 3 bytes: first is one stage (3 bytes), last none
    "first_size": (Problem(Graph([Op(name="v0", work=5), Op(name="v1", work=1, param_bytes=2),
                                  Op(name="v2", work=2, out_bytes=1, param_bytes=1),
                                  Op(name="v3", work=5, out_bytes=2, param_bytes=3)],
                                 [("v0", "v3"), ("v1", "v3"), ("v2", "v3")]),
                           Stages(2, memory=3.0), Bottleneck(overlap="half"), [DagOrder(), Memory(), GuessedBlock(2)]),
                   "guess"),
}
SEEDS = range(48)
CASES = {**{f"seed{s}": instance(s) for s in SEEDS}, **HAND}


@pytest.mark.parametrize("case", CASES)
def test_the_relaxation_solved_equals_its_enumeration(case: str) -> None:
    problem, formulation = CASES[case]
    expected = enumerated(problem, formulation)
    bound, status = model_bound(problem, formulation, "highs", 20.0)
    if math.isinf(expected):  # no assignment meets the rows: the solver proves nothing either
        assert bound is None and status.value == "no_bound"
        return
    assert status.value == "optimal"
    assert bound == pytest.approx(expected, rel=1e-5, abs=1e-7)




def test_every_row_changes_the_enumerated_optimum_on_some_instance() -> None:
    """A row that never binds on the instances above cannot be judged by them: each one must, somewhere."""
    binding: dict[str, list[str]] = {row: [] for row in ROWS}
    for case, (problem, formulation) in CASES.items():
        full = enumerated(problem, formulation)
        for row in ROWS:
            if enumerated(problem, formulation, frozenset({row})) != full:
                binding[row].append(case)
    assert all(binding.values()), binding


# ---------------------------------------------------------------------------- what the templates refuse, by name
def _two_ops() -> Graph:
    return Graph([Op(name="a", work=1, out_bytes=1), Op(name="b", work=2)], [("a", "b")])


def test_pins_are_refused_with_the_pinned_ops_in_both_settings():
    stages = Problem(_two_ops(), Stages(2), Bottleneck(), [DagOrder(), Pin("b", "stage1"), Pin("a", "stage0")])
    assert get("superblock").accepts(stages) == (  # every refusal names the formulation, as no-cut-io's below
        "formulation 'superblock': superblock relaxations cannot keep Pin terms (pins name stages that are merged; pinned: 'a', 'b'); drop the "
        "pins or use the exact formulation")
    cpus = Problem(_two_ops(), Cluster.accelerators(2, cpus=1), Throughput(), [Pin("a", "cpu0")])
    assert get("no-cut-io").accepts(cpus) == (
        "formulation 'no-cut-io': superblock relaxations cannot keep Pin terms (pins name accelerators that are merged; pinned: 'a'); drop "
        "the pins or use the exact formulation")


@pytest.mark.parametrize(("check", "cluster", "message"), [
    (stages_of, Cluster.accelerators(2, cpus=1), ("superblock relaxations need identical pipeline stages; "
                                                  "Cluster(2xaccelerator, 1xcpu) has host devices (drop them, or use "
                                                  "the exact formulation)")),
    (stages_of, Cluster([Device(name="a"), Device(name="b", bandwidth=2.0, memory=4.0)]),
     ("superblock relaxations need identical pipeline stages; Cluster(2xaccelerator) mixes {'memory': ['4.0', 'inf'], "
      "'bandwidth': ['1.0', '2.0']} (use Cluster.stages(k, ...), or the exact formulation)")),
    (accelerators_of, Cluster([Device(name="c", kind="cpu")]),
     "superblock relaxations merge accelerators; Cluster(1xcpu) has none"),
    (accelerators_of, Cluster([Device(name="a", speed=2.0), Device(name="b"), Device(name="c", kind="cpu", speed=5.0)]),
     ("superblock relaxations need identical accelerators; Cluster(2xaccelerator, 1xcpu) mixes {'speed': ['1.0', "
      "'2.0']} (use Cluster.accelerators(k, cpus=l), or the exact formulation)")),
])
def test_the_shape_checks_name_what_is_not_identical(check, cluster, message):
    with pytest.raises(SpecError) as err:
        check(cluster)
    assert str(err.value) == message


@pytest.mark.parametrize(("template", "cluster", "message"), [
    (Superblocks((2, None)), Stages(2), ("Superblocks(blocks=(2, None)): at most k - 1 = 1 stages fit beside the "
                                        "middle block")),
    (HostSuperblocks((2, None)), Cluster.accelerators(2, cpus=1), ("HostSuperblocks(blocks=(2, None)): first and "
                                                                  "last hold k - 1 = 1 accelerators")),
    (HostSuperblocks((1, 1)), Cluster.accelerators(2, cpus=1), ("HostSuperblocks(blocks=(1, 1)): first and last "
                                                               "hold k - 1 = 1 accelerators")),
])
def test_superblock_sizes_beyond_the_stages_are_refused(template, cluster, message):
    with pytest.raises(SpecError) as err:
        template.build(pyo.Block(concrete=True), Context(Problem(_two_ops(), cluster, Throughput())))
    assert str(err.value) == message


def test_a_second_transfer_or_bottleneck_provider_is_named():
    problem = Problem(_two_ops(), Stages(2), Bottleneck(), [DagOrder()])
    base = get("no-cut-io")
    cut, load = NoTransfer(), SuperblockLoad((1.0, 1.0, 1.0))
    cut.name, load.name = "second_cut", "second_objective"  # blocks of their own: only the links collide
    twice = base.derive("twice", skeleton=lambda p: [*base.skeleton(p), cut])
    with pytest.raises(SpecError, match=r"^formulation: NoTransfer\(\) provides TransferLink, which NoTransfer\(\) "
                                        r"already provides; keep one of them$"):
        compile(problem, twice)
    again = base.derive("again", skeleton=lambda p: [*base.skeleton(p), load])
    with pytest.raises(SpecError, match=r"^formulation: SuperblockLoad\(weights=\(.*\)\) provides BottleneckLink, "
                                        r"which SuperblockLoad\(weights=\(.*\)\) already provides; keep one of them$"):
        compile(problem, again)


@pytest.mark.parametrize("formulation", ["superblock", "guess", "no-dag", "no-cut-io"])
@pytest.mark.parametrize("cpus", [0, 1])
def test_every_component_of_every_relaxation_is_documented(formulation, cpus):
    cluster = Cluster.accelerators(3, memory=8.0, cpus=cpus)
    terms = [DagOrder(), Overflow()] if cpus == 0 else [Memory()]
    problem = Problem(_two_ops(), cluster, Throughput(), [*terms, GuessedBlock(2)] if formulation == "guess" else terms)
    assert check_documented(compile(problem, formulation).model) == []


def test_the_dag_ordered_relaxation_of_a_graph_without_work_bounds_zero():
    # Lemma 3.3's L is 0 and eq. (14) is void (written out, `0 >= 0` is a Boolean Pyomo refuses); the tensor still
    # costs a transfer when split, so the middle takes both ops
    g = Graph([Op(name="a", work=0, out_bytes=1), Op(name="b", work=0)], [("a", "b")])
    bound, status = model_bound(Problem(g, Stages(3), Bottleneck(), [DagOrder()]), "superblock", "highs", 10.0)
    assert bound == pytest.approx(0.0) and status.value == "optimal"


def test_a_relaxation_refuses_a_placement_as_its_values_by_name():
    # solve() refuses relaxations before any start is mapped; the templates refuse too when asked directly
    from placement_dsl.blocks.base import Warm

    stages = Problem(_two_ops(), Stages(2), Bottleneck(), [DagOrder()])
    with pytest.raises(SpecError, match=r"^superblock models are relaxations: a placement of the k stages does not "
                                        r"determine their variables; solve them without a warm start$"):
        compile(stages, "superblock").varmap.values(Placement(stages.graph, stages.cluster, [0, 1]))
    cpus = Problem(_two_ops(), Cluster.accelerators(2, cpus=1), Throughput())
    with pytest.raises(SpecError, match=r"^superblock models are relaxations: a placement does not determine their "
                                        r"variables; solve them without a warm start$"):
        compile(cpus, "superblock").varmap.values(Placement(cpus.graph, cpus.cluster, [0, 2]))
    ctx = Context(stages)
    warm = Warm(ctx, np.array([0, 1]), None, ((0,), (1,)))
    assert list(NoTransfer().values(pyo.Block(concrete=True), ctx, warm)) == []
    with pytest.raises(SpecError, match=r"^superblock models are relaxations; solve them without a warm start$"):
        list(SuperblockLoad().values(pyo.Block(concrete=True), ctx, warm))


def test_the_op_floors_read_the_middles_work_once():
    # each op's floor summed the middle's work over every op: n rows of n terms (44 s to build and hand off at
    # 600 ops, a bounds run on a profile of thousands of layers never ended); one variable carries it now
    from placement_dsl.constraints import Contiguous
    from placement_dsl.problem import Problem
    from placement_dsl.solvers.matrix import extract

    n = 200
    ops = [Op(name=f"v{i}", work={"accelerator": 1 + i % 5, "cpu": 9}, out_bytes=1) for i in range(n)]
    g = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(n - 1)], name="long")
    problem = Problem(g, Cluster.accelerators(4, cpus=1), Throughput(), [Contiguous()])
    compiled = compile(problem, "superblock")
    floors = compiled.model.assignment.op_floor
    assert len(floors) == n
    lm = extract(compiled.model)
    rows = [i for i, name in enumerate(lm.row_names) if name.startswith("assignment.op_floor")]
    per_row = np.bincount(lm.index, minlength=lm.n_rows)[rows]  # nonzeros of each row
    assert len(rows) == n and per_row.max() == 4  # the middle's work and the op's three superblocks
