"""Every objective with every constraint term on both kinds of cluster, on tiny graphs.

``solve(problem)`` (the formulation ``auto`` picks) either answers: the brute-force optimum when it
proves optimality, else a valid placement with ``bound <= brute-force optimum <= objective``; or it
refuses with a one-line :class:`SpecError` naming what it cannot write. Never another exception.

Makespan is scored on the placement's own schedule, while brute force list-schedules every
placement: there the brute-force value is an upper bound on the optimum, so an answer may lie below it.
"""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl.brute import brute_force
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.constraints import (
    AllowedKinds,
    Colocate,
    Congestion,
    Contiguous,
    DagOrder,
    Memory,
    Overflow,
    Pin,
    Subgraphs,
)
from placement_dsl.errors import InfeasibleError, SpecError
from placement_dsl.evaluate import execution
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import (
    Bottleneck,
    GPipe,
    Interleaved1F1B,
    Latency,
    Makespan,
    PipeDream,
    Throughput,
    ZeroBubbleH1,
    ZeroBubbleV,
)
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.solvers import Status
from placement_dsl.training_terms import Replicate, TrainingMemory

OBJECTIVES = {"throughput": Throughput(), "bottleneck": Bottleneck(), "pipedream": PipeDream(), "gpipe": GPipe(),
              "gpipe-fill-drain": GPipe(microbatches=2), "latency": Latency(), "makespan": Makespan(),
              "interleaved-1f1b": Interleaved1F1B(microbatches=2), "zb-h1": ZeroBubbleH1(microbatches=2),
              "zbv": ZeroBubbleV(microbatches=2)}
TRAINING = ("pipedream", "gpipe", "gpipe-fill-drain")  # objectives of training graphs (a backward pass)
TERMS = {
    "none": lambda cpu: [],
    "memory": lambda cpu: [Memory()],
    "overflow": lambda cpu: [Overflow()],
    "contiguous": lambda cpu: [Contiguous()],
    "dag-order": lambda cpu: [DagOrder()],
    "dp-class": lambda cpu: [Contiguous(), DagOrder()],
    "colocate": lambda cpu: [Colocate([["v0", "v1"]])],
    "pin": lambda cpu: [Pin("v1", "cpu0" if cpu else "acc1")],
    "allowed-kinds": lambda cpu: [AllowedKinds(("v2",), ("cpu",) if cpu else ("accelerator",))],
    "subgraphs": lambda cpu: [Subgraphs(1)],
    "congestion": lambda cpu: [Congestion("channel")],
    "training-memory": lambda cpu: [TrainingMemory("1f1b")],
    "replicate": lambda cpu: [Replicate(2)],
}
SEEDS = 2  # graphs per combination
TIME_LIMIT = 5.0


def linked(memory: float) -> Cluster:
    """Heterogeneous with links: ``acc0`` and a twice as fast ``acc1`` of another bandwidth, a CPU, and directed
    links of their own bandwidth and latency between every pair."""
    devices = [Device(name="acc0", memory=memory, bandwidth=2.0), Device(name="acc1", memory=memory, speed=2.0),
               Device(name="cpu0", kind="cpu")]
    links = [Link(src=a, dst=b, bandwidth=bw, latency=lat) for a, b, bw, lat in
             (("acc0", "acc1", 1.0, 0.5), ("acc1", "acc0", 0.5, 1.0), ("acc0", "cpu0", 2.0, 0.0),
              ("cpu0", "acc0", 2.0, 0.25), ("acc1", "cpu0", 1.0, 0.25), ("cpu0", "acc1", 1.0, 0.0))]
    return Cluster(devices, links)


def hierarchical(memory: float) -> Cluster:
    """Two servers of two accelerators (``acc0``, ``acc1`` on ``s0``), fast links inside a server, slow between."""
    devices = [Device(name=f"acc{i}", memory=memory, bandwidth=4.0, server=f"s{i // 2}") for i in range(4)]
    links = [Link(src=a.name, dst=b.name, bandwidth=4.0 if a.server == b.server else 1.0, latency=0.5)
             for a in devices for b in devices if a is not b]
    return Cluster(devices, links)


CLUSTERS = {"linked": (linked, True), "hierarchical": (hierarchical, False)}  # name: (maker, has a CPU)
SINGLE_SAMPLE = ("latency", "makespan")


def tiny(objective: str, term: str, cpu: bool, seed: int, cluster: str | None = None) -> Problem:
    """Four ops with random work (a CPU 1-3 times slower), tensors, parameters and edges (``v0 -> v1`` always:
    the colocated pair is adjacent); two accelerators of small memory, and a CPU with ``cpu`` (or one of
    :data:`CLUSTERS` by name, whose devices are named alike)."""
    rng = np.random.default_rng(seed)
    training = objective in TRAINING or term == "training-memory"
    ops = []
    for i in range(4):
        w = float(rng.integers(1, 6))
        ops.append(Op(name=f"v{i}", work={"accelerator": w, "cpu": w * float(rng.integers(1, 4))},
                      out_bytes=float(rng.integers(0, 4)), param_bytes=float(rng.integers(0, 5)),
                      backward=training and i >= 2))
    edges = [(f"v{i}", f"v{j}") for i in range(4) for j in range(i + 1, 4) if (i, j) == (0, 1) or rng.random() < 0.5]
    memory = float(rng.integers(5, 12))
    devices = CLUSTERS[cluster][0](memory) if cluster else Cluster.accelerators(2, memory=memory, cpus=1 if cpu else 0)
    return Problem(Graph(ops, edges, name=f"tiny{seed}"), devices, OBJECTIVES[objective], TERMS[term](cpu))


def check(problem: Problem, formulation: str = "auto") -> str:
    """What ``solve`` did with ``problem`` ('refused', 'infeasible', 'optimal', 'bounded'), asserting it is right."""
    try:
        result = solve(problem, formulation=formulation, time_limit=TIME_LIMIT, gap=0.0)
    except SpecError as err:
        assert str(err) and "\n" not in str(err), repr(err)
        return "refused"
    try:  # after the solve: a refusal needs no reference (replicated placements are the costliest to enumerate)
        best: float | None = brute_force(problem)[0]
    except InfeasibleError:
        best = None
    if best is None:
        assert result.placement is None, f"brute force finds no valid placement, solve answered {result.objective}"
        return "infeasible"
    # devices that run one op at a time: brute force list-schedules each placement, an upper bound on the optimum
    listed = isinstance(problem.objective, Latency) and execution(problem.cluster) == "ops"
    tol = 1e-6 * max(1.0, abs(best))
    assert result.placement is not None, f"{result.status.value} without a placement; brute force finds {best}"
    assert problem.is_valid(result.placement), problem.violations(result.placement)
    assert result.objective == pytest.approx(problem.evaluate(result.placement).objective, rel=1e-6)
    if result.bound is not None:
        assert result.bound <= min(best, result.objective) + tol
    if listed:
        assert result.objective <= best + tol
    else:
        assert result.objective >= best - tol
    if result.status is Status.OPTIMAL and not listed:
        assert result.objective == pytest.approx(best, rel=1e-6, abs=1e-9), result.formulation
        return "optimal"
    return "bounded"


@pytest.mark.parametrize("cpu", [False, True], ids=["accelerators", "with-cpu"])
@pytest.mark.parametrize("term", TERMS)
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_solve_answers_the_brute_force_optimum_or_refuses(objective, term, cpu):
    for seed in range(SEEDS):
        check(tiny(objective, term, cpu, seed))


@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("term", TERMS)
@pytest.mark.parametrize("objective", SINGLE_SAMPLE)
def test_single_sample_objectives_answer_or_refuse_on_linked_and_hierarchical_clusters(objective, term, cluster):
    # the single-sample family on heterogeneous devices with links and on servers (routed transfers)
    for seed in range(SEEDS):
        check(tiny(objective, term, CLUSTERS[cluster][1], seed, cluster))


@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("term", TERMS)
@pytest.mark.parametrize("objective", ["interleaved-1f1b", "zb-h1", "zbv"])
def test_rank_order_objectives_answer_or_refuse_on_linked_and_hierarchical_clusters(objective, term, cluster):
    # torch's rank orders, whose messages hold the links of their routes: the brute-force optimum or a refusal
    for seed in range(SEEDS):
        check(tiny(objective, term, CLUSTERS[cluster][1], seed, cluster))


@pytest.mark.parametrize("cpu", [False, True], ids=["accelerators", "with-cpu"])
@pytest.mark.parametrize("objective", ["throughput", "bottleneck", "pipedream"])
def test_the_chain_restriction_answers_the_optimum_of_its_class(objective, cpu):
    # Contiguous and DagOrder: the problem's class is the chain's (CPUs where the cluster lists them)
    for seed in range(SEEDS):
        check(tiny(objective, "dp-class", cpu, seed), formulation="chain")


def test_the_combinations_cover_every_term_and_objective():
    # a new constraint term or objective joins the combinations above
    from placement_dsl import constraints, objectives, training_terms
    from placement_dsl.constraints import Term
    from placement_dsl.objectives import ObjectiveTerm

    def public(module, base):
        return {c for c in vars(module).values()
                if isinstance(c, type) and issubclass(c, base) and c is not base and c.__module__ == module.__name__}

    covered = {type(t) for make in TERMS.values() for cpu in (False, True) for t in make(cpu)}
    assert public(constraints, Term) | public(training_terms, Term) <= covered
    assert public(objectives, ObjectiveTerm) <= {type(o) for o in OBJECTIVES.values()}
