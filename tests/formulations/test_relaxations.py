"""Archer et al.'s relaxations: every one bounds the brute-force optimum, in the order the paper proves."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.bounds import simple_lower_bound
from placement_dsl.certify import guess_bound, model_bound
from placement_dsl.cluster import Cluster, Device
from placement_dsl.compile import compile
from placement_dsl.constraints import Contiguous, DagOrder, Memory, Overflow
from placement_dsl.errors import InfeasibleError, SpecError
from placement_dsl.formulations import RELAXATIONS, GuessedBlock, Kind, of_kind
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck, PipeDream, Throughput
from placement_dsl.problem import Problem, Stages
from placement_dsl.testing import brute_force, chain_graph, random_graph

SLACK = 1e-6


@st.composite
def problems(draw: st.DrawFn) -> Problem:
    """DAG-ordered MTPPs on 2-5 ops and 1-4 stages, any overlap, with or without overflow."""
    seed = draw(st.integers(0, 10_000))
    n, k = draw(st.integers(2, 5)), draw(st.integers(1, 4))
    graph = random_graph(np.random.default_rng(seed), n, density=draw(st.sampled_from([0.3, 0.6])))
    overflow = draw(st.booleans())
    cluster = Stages(k, memory=4.0 if overflow else float("inf"), bandwidth=draw(st.sampled_from([0.5, 1.0, 2.0])))
    terms = [DagOrder(), Overflow()] if overflow else [DagOrder()]
    return Problem(graph, cluster, Bottleneck(overlap=draw(st.sampled_from(["none", "half", "full"]))), terms)


def _bound(problem: Problem, formulation: str) -> float:
    bound, _ = model_bound(problem, formulation, "highs", 20.0)
    assert bound is not None
    return bound


@settings(max_examples=20)
@given(problems())
def test_every_relaxation_is_below_the_optimum_and_ordered(problem: Problem) -> None:
    optimum = brute_force(problem)[0]
    simple = simple_lower_bound(problem.graph, problem.cluster)
    sb = _bound(problem, "superblock")
    guess = guess_bound(problem, "highs", 60.0)[0]
    assert guess is not None
    for name in ("no-dag", "no-cut-io"):  # relax the superblock MIP (MLSys draft, Table 2)
        assert simple - SLACK <= _bound(problem, name) <= sb + SLACK * sb
    assert simple - SLACK <= sb <= guess * (1 + SLACK) + SLACK   # LB_j >= superblock for every j
    assert guess <= optimum * (1 + SLACK) + SLACK                # min_j LB_j <= OPT (§3.3)
    if problem.cluster.size <= 2:                                # "the MIPs are equivalent for k = 2" (§5)
        assert guess == pytest.approx(optimum, rel=1e-6, abs=1e-9)


def test_superblock_size_does_not_grow_with_k() -> None:
    graph = chain_graph([1, 2, 3, 4, 5, 6])
    sizes = [compile(Problem(graph, Stages(k), Bottleneck(), [DagOrder()]), "superblock").size() for k in (3, 8, 32)]
    assert sizes[0] == sizes[1] == sizes[2]
    assert sizes[0]["superblocks"]["variables"] == 3 * graph.n  # Corollary 3.4: O(n) variables
    exact = [compile(Problem(graph, Stages(k), Bottleneck(), [DagOrder()]), "exact").size() for k in (3, 8)]
    assert exact[1]["assignment"]["variables"] > exact[0]["assignment"]["variables"]


def test_superblock_on_a_chain_sees_the_cut() -> None:
    """Four ops of work 2, unit tensors, 2 stages: L = 4; a middle block of work >= 4 cut on one side costs 5."""
    problem = Problem(chain_graph([2, 2, 2, 2]), Stages(2), Bottleneck(), [DagOrder()])
    assert _bound(problem, "superblock") == pytest.approx(5.0)
    assert _bound(problem, "no-cut-io") == pytest.approx(4.0)


def test_registered() -> None:
    assert set(RELAXATIONS) == {"superblock", "guess", "no-dag", "no-cut-io"}
    assert set(RELAXATIONS) == set(of_kind(Kind.RELAXATION))  # their optima are bounds, not the problem's optima


def test_mixed_stages_are_refused() -> None:
    cluster = Cluster([Device(name="a"), Device(name="b", speed=2.0), Device(name="c")])
    problem = Problem(chain_graph([1, 2, 3]), cluster, Bottleneck(), [DagOrder()])
    with pytest.raises(SpecError, match="identical pipeline stages"):
        compile(problem, "superblock")


def test_guess_needs_its_guess_and_dag_order() -> None:
    problem = Problem(chain_graph([1, 2, 3]), Stages(3), Bottleneck(), [DagOrder()])
    with pytest.raises(SpecError, match="GuessedBlock"):
        compile(problem, "guess")
    with pytest.raises(SpecError, match="j must lie"):
        compile(Problem(chain_graph([1, 2, 3]), Cluster.accelerators(2, cpus=1), Throughput(),
                        [GuessedBlock(3)]), "guess")


def test_mixed_accelerators_are_refused() -> None:
    cluster = Cluster([Device(name="a"), Device(name="b", speed=2.0), Device(name="c", kind="cpu")])
    with pytest.raises(SpecError, match="identical accelerators"):
        compile(Problem(chain_graph([1, 2, 3]), cluster, Throughput()), "superblock")


# ---------------------------------------------------------------- Tarnawski's setting: accelerators + CPUs
def _tarnawski_graph(seed: int, n: int, training: bool) -> Graph:
    """A random graph whose ops run ``cpu_factor`` times slower on a CPU (some not at all)."""
    rng = np.random.default_rng(seed)
    base = random_graph(rng, n, density=0.5, training=training)
    ops = []
    for op in base.ops:
        w = float(op.work["*"])
        cpu = float(rng.choice([1.0, 2.0, 4.0, np.inf]))
        work = {"accelerator": w, "cpu": w * cpu} if np.isfinite(cpu) else {"accelerator": w}  # no kind: not there
        ops.append(op.model_copy(update={"work": work}))
    return Graph(ops, [(base.names[u], base.names[v]) for u, v in zip(base.src, base.dst)], name="tarnawski")


@st.composite
def tarnawski_problems(draw: st.DrawFn) -> Problem:
    """2 accelerators + 0/1 CPU, inference (Throughput) or training (PipeDream), hard memory, any structure."""
    training = draw(st.booleans())
    n = draw(st.integers(3, 6 if training else 5))
    graph = _tarnawski_graph(draw(st.integers(0, 10_000)), n, training)
    cluster = Cluster.accelerators(2, memory=draw(st.sampled_from([6.0, float("inf")])), cpus=draw(st.integers(0, 1)),
                                   bandwidth=draw(st.sampled_from([0.5, 1.0])))
    structure = draw(st.sampled_from([[], [Contiguous()], [DagOrder()]]))
    objective = PipeDream() if training else Throughput(overlap=draw(st.sampled_from(["none", "half", "full"])))
    return Problem(graph, cluster, objective, [Memory(), *structure])


@settings(max_examples=20, deadline=None, derandomize=True)
@given(tarnawski_problems())
def test_tarnawski_relaxations_are_below_the_optimum(problem: Problem) -> None:
    """On accelerators + CPUs the superblock bounds hold over all placements, so below any class's optimum."""
    if not problem.cluster.host.any() and problem.has(DagOrder):
        return  # Archer's setting, covered above
    try:
        optimum = brute_force(problem)[0]
    except InfeasibleError:  # no valid placement (memory)
        return
    sb = _bound(problem, "superblock")
    guess = guess_bound(problem, "highs", 20.0)
    assert guess[0] is not None
    assert _bound(problem, "no-cut-io") <= sb * (1 + SLACK) + SLACK
    assert _bound(problem, "no-dag") == pytest.approx(sb, rel=1e-6, abs=1e-9)
    assert sb <= optimum * (1 + SLACK) + SLACK
    for lb in guess[2].values():  # every LB_j, not only their minimum, bounds every placement here
        assert lb is not None and lb <= optimum * (1 + SLACK) + SLACK


def test_tarnawski_cpu_load_counts() -> None:
    """Two accelerators and a CPU; the embedding must go to the CPU (Tarnawski §5): the bound sees its load."""
    ops = [Op(name="emb", work={"accelerator": 1, "cpu": 5}, param_bytes=12, out_bytes=1),
           Op(name="a", work={"accelerator": 2, "cpu": 8}, out_bytes=1),
           Op(name="b", work={"accelerator": 2, "cpu": 8})]
    g = Graph(ops, [("emb", "a"), ("a", "b")], name="acc_cpu")
    problem = Problem(g, Cluster.accelerators(2, memory=10.0, cpus=1), Throughput(), [Memory(), Contiguous()])
    assert brute_force(problem)[0] == pytest.approx(5.0)
    assert _bound(problem, "superblock") == pytest.approx(5.0)  # the CPU's load, no transfers on the CPU
    # (first, middle, last, cpu0) x 3 ops, and the middle's work
    assert compile(problem, "superblock").size()["assignment"]["variables"] == 4 * 3 + 1


def test_certify_runs_the_superblock_levels_on_tarnawski_problems() -> None:
    """Without DagOrder the superblock levels bound all placements; guess reports its best LB_j."""
    from placement_dsl.certify import certify
    from placement_dsl.placement import PlacementClass
    from placement_dsl.testing import accelerators_cpu

    problem, optimum = accelerators_cpu()
    cert = certify(problem, budget=20, levels=("no-cut-io", "superblock", "guess"), gap=0.0, stop_at_gap=False)
    rows = {r.level: r for r in cert.levels}
    assert all(r.scope is PlacementClass.ALL and r.bound is not None for r in rows.values())
    assert all(r.bound <= optimum * (1 + SLACK) for r in rows.values())
    assert rows["guess"].bound == pytest.approx(optimum)


@pytest.mark.parametrize("cpus", [0, 1])
def test_superblock_relaxation_of_a_graph_without_work_bounds_zero(cpus):
    # no op has work: Lemma 3.3's L is 0 and the work rows are void (they once read `0 >= 0`, a Boolean
    # Pyomo refuses, so the relaxation failed to compile); the tensor still costs a transfer when split
    g = Graph([Op(name="a", work=0, out_bytes=1), Op(name="b", work=0)], [("a", "b")])
    problem = Problem(g, Cluster.accelerators(3, cpus=cpus), Bottleneck(), [])
    bound, status = model_bound(problem, "superblock", "highs", 10.0)
    assert bound == pytest.approx(0.0) and status.value == "optimal"
