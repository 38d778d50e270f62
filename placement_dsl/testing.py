"""Tiny placement problems with known optima, a brute-force reference solver, and random
problems on which the structural constraints bind.

Every formulation and every solver must reproduce these optima; :func:`brute_force` and
:func:`binding` (:mod:`placement_dsl.brute`, re-exported here) are the reference;
:func:`structured_problem` draws problems where contiguity and DAG order usually do, and
:func:`structured_problems` wraps it as a hypothesis strategy.

>>> problem, optimum = chain()
>>> brute_force(problem)[0] == optimum
True
"""
from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

import numpy as np

from .brute import (
    MAX_BRUTE_FORCE,
    binding,
    binds,
    brute_force,
    forward_ordered_optimum,
    optimum,
    placements,
    record_binding,
    scheduled_optimum,
    without,
)
from .cluster import Cluster, Device, Link
from .constraints import (
    AllowedKinds,
    Colocate,
    Congestion,
    Contiguous,
    DagOrder,
    Memory,
    Overflow,
    Pin,
    Subgraphs,
    Term,
)
from .errors import SpecError
from .graph import Graph, Op
from .heuristics import run
from .io import moirai
from .objectives import Bottleneck, GPipe, Latency, Makespan, PipeDream, Throughput
from .problem import Problem, Stages

__all__ = ["INSTANCES", "MAX_BRUTE_FORCE", "binding", "binds", "brute_force", "forward_ordered_optimum", "host_op",
           "invocation_workload", "optimum", "placements", "record_binding", "run_cli", "scheduled_optimum", "structured_problem", "structured_problems", "without"]
from .training_terms import Replicate, TrainingMemory


# ---------------------------------------------------------------------------- graphs
def host_op(name: str, acc: float | None, cpu: float, out: float = 1.0, mem: float = 0.0) -> Op:
    """An op taking ``acc`` on an accelerator (``None``: it runs on CPUs only) and ``cpu`` on a CPU."""
    work = {"cpu": cpu} if acc is None else {"accelerator": acc, "cpu": cpu}
    return Op(name=name, work=work, out_bytes=out, param_bytes=mem)


def chain_graph(works: list[float], out_bytes: float = 1.0) -> Graph:
    ops = [Op(name=f"op{i}", work=w, out_bytes=out_bytes) for i, w in enumerate(works)]
    return Graph(ops, [(f"op{i}", f"op{i + 1}") for i in range(len(works) - 1)], name="chain")


def diamond_graph() -> Graph:
    """``a -> b, a -> c, b -> d, c -> d``; a's tensor (2 bytes) has two consumers."""
    ops = [Op(name="a", work=1, out_bytes=2), Op(name="b", work=4, out_bytes=1),
           Op(name="c", work=4, out_bytes=1), Op(name="d", work=1)]
    return Graph(ops, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")], name="diamond")


def random_graph(rng: np.random.Generator, n: int, density: float = 0.4, training: bool = False,
                 name: str = "random") -> Graph:
    """A random DAG on ``n`` ops (edges ``i -> j``, ``i < j``, with probability ``density``).

    Integer work in 1..5, tensors in 0..3, parameters in 0..4; with ``training`` the second
    half of the ops is the backward pass.
    """
    ops = [Op(name=f"v{i}", work=float(rng.integers(1, 6)), out_bytes=float(rng.integers(0, 4)),
              param_bytes=float(rng.integers(0, 5)), backward=training and i >= n // 2) for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, n) if rng.random() < density]
    return Graph(ops, edges, name=name)


# ---------------------------------------------------------------------------- structured random problems
SHAPES = ("chain", "skip", "diamond", "fork_join", "random")
"""Graph shapes of :func:`structured_graph`: where a balanced split of the work is rarely contiguous."""
STRUCTURES: dict[str, type[Term]] = {"contiguous": Contiguous, "dag_order": DagOrder}
"""Structural constraints :func:`structured_problem` draws, by name."""
WORKS = (1, 1, 2, 3, 4, 6, 8)  # skewed: a few heavy ops that a balanced split must separate
LIGHT, HEAVY = (1, 1, 2, 3), (5, 6, 8)  # a planted heavy edge: its ends want different devices
TENSORS = (0.0, 0.0, 0.25, 0.5, 1.0)  # transfers cheap next to the work: splitting pays
CPU_FACTORS = (2, 3, 4)  # a CPU runs an op this many times slower, but pays no transfers


def _shape_edges(rng: random.Random, shape: str, n: int) -> list[tuple[int, int]]:
    if shape == "chain":
        return [(i, i + 1) for i in range(n - 1)]
    if shape == "skip":  # a chain with residual connections over one or two ops
        skips = [(i, i + d) for d in (2, 3) for i in range(n - d) if rng.random() < 0.5]
        return [(i, i + 1) for i in range(n - 1)] + (skips or [(0, 2)])
    if shape == "diamond":  # source, two branches (chains), sink
        cut = rng.randint(1, n - 3)
        left, right = list(range(1, 1 + cut)), list(range(1 + cut, n - 1))
        edges = []
        for branch in (left, right):
            edges += [(0, branch[0]), (branch[-1], n - 1), *itertools.pairwise(branch)]
        return edges
    if shape == "fork_join":  # source, n - 2 parallel ops, sink
        return [(0, i) for i in range(1, n - 1)] + [(i, n - 1) for i in range(1, n - 1)]
    if shape == "random":  # a chain backbone with random forward edges
        extra = [(i, j) for i in range(n) for j in range(i + 2, n) if rng.random() < 0.35]
        return [(i, i + 1) for i in range(n - 1) if rng.random() < 0.7] + extra
    raise SpecError(f"unknown shape {shape!r}; choose from {list(SHAPES)}")


def structured_graph(rng: random.Random, shape: str, n: int, cpu: bool = False) -> Graph:
    """A DAG of ``n`` ops in ``shape`` (:data:`SHAPES`) with skewed integer work and cheap tensors.

    Half of the draws plant a heavy edge: both ends heavy, every other op light, so the
    balanced split separates the two heavy ops and hangs light ops on either side — which a
    contiguous, DAG-ordered split often cannot do. With ``cpu`` every op also gets a CPU
    time (2-4 times its accelerator time).
    """
    if n < 4:
        raise SpecError(f"structured_graph: need n >= 4 ops for shape {shape!r}, got {n}")
    edges = sorted(set(_shape_edges(rng, shape, n)))
    if rng.random() < 0.5:
        heavy = set(rng.choice(edges))
        works = [float(rng.choice(HEAVY if i in heavy else LIGHT)) for i in range(n)]
    else:
        works = [float(rng.choice(WORKS)) for _ in range(n)]
    ops = [Op(name=f"v{i}", work={"accelerator": w, "cpu": w * rng.choice(CPU_FACTORS)} if cpu else w,
              out_bytes=rng.choice(TENSORS), param_bytes=float(rng.randint(0, 3))) for i, w in enumerate(works)]
    return Graph(ops, [(f"v{i}", f"v{j}") for i, j in edges], name=f"{shape}{n}")


def structured_problem(seed: int | random.Random, structure: str | None = None, max_ops: int = 6) -> Problem:
    """A small random problem on which ``structure`` (``"contiguous"``/``"dag_order"``) tends to bind.

    At least two devices (2, or 3 in a quarter of the draws; one of them a CPU in a quarter), a shape from
    :data:`SHAPES` with 4 to ``max_ops`` ops (5 at most on 3 devices, for brute force),
    skewed work with cheap transfers so that the balanced split is usually not contiguous,
    and a max-load objective (throughput or bottleneck, any overlap). Deterministic in ``seed``;
    :func:`structured_problems` is the hypothesis strategy over the seeds.
    """
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    structure = structure or rng.choice(sorted(STRUCTURES))
    if structure not in STRUCTURES:
        raise SpecError(f"unknown structure {structure!r}; choose from {sorted(STRUCTURES)}")
    devices = rng.choice((2, 2, 2, 3))
    cpus = int(rng.random() < 0.25)
    shape = rng.choice(SHAPES)
    n = rng.randint(4, max(4, min(max_ops, 5 if devices == 3 else max_ops)))
    graph = structured_graph(rng, shape, n, cpu=bool(cpus))
    cluster = Cluster.accelerators(devices - cpus, cpus=cpus)
    objective = rng.choice((Throughput, Bottleneck))(overlap=rng.choice(("none", "none", "half", "full")))
    return Problem(graph, cluster, objective, [STRUCTURES[structure]()])


def structured_problems(structure: str | None = None, max_ops: int = 6):
    """Hypothesis strategy of :func:`structured_problem` (``None``: either structure): a seed drawn and the problem
    built from it, so ``structured_problem(seed, structure)`` reproduces a failing example."""
    from hypothesis import strategies as st

    return st.builds(structured_problem, st.integers(0, 2**32 - 1), st.just(structure), st.just(max_ops))


# ---------------------------------------------------------------------------- instances
def chain() -> tuple[Problem, float]:
    """Four ops of work 2 in a chain, unit tensors, 2 stages: ``{op0, op1} | {op2, op3}`` costs 4 + 1 = 5."""
    return Problem(chain_graph([2, 2, 2, 2]), Stages(2), Bottleneck(), [DagOrder()]), 5.0


def diamond() -> tuple[Problem, float]:
    """Diamond on 2 stages: ``{a, b} | {c, d}`` costs 5 + 2 + 1 = 8 on both (a's tensor paid once)."""
    return Problem(diamond_graph(), Stages(2), Bottleneck(), [DagOrder()]), 8.0


def diamond_noncontiguous() -> tuple[Problem, float]:
    """Diamond, 2 accelerators, throughput without order: the same split (8) is best."""
    return Problem(diamond_graph(), Cluster.accelerators(2), Throughput(), []), 8.0


def fork_join() -> tuple[Problem, float]:
    """``s -> b0, b1, b2 -> t`` (work 1, 3, 3, 3, 1; unit tensors) on 3 stages; optimum 7.

    ``{s, b0} | {b1} | {b2, t}``: stage 0 works 4 and writes s and b0 (6); stage 1 reads s,
    works 3, writes b1 (5); stage 2 reads s, b0, b1, works 4 (7). Brute force confirms 7.
    """
    ops = [Op(name="s", work=1, out_bytes=1)] + [Op(name=f"b{i}", work=3, out_bytes=1) for i in range(3)]
    ops.append(Op(name="t", work=1))
    edges = [("s", f"b{i}") for i in range(3)] + [(f"b{i}", "t") for i in range(3)]
    return Problem(Graph(ops, edges, name="fork_join"), Stages(3), Bottleneck(), [DagOrder()]), 7.0


def lemma_b2(k: int = 3, eps: float = 0.25) -> tuple[Problem, float]:
    """Archer et al. Lemma B.2: heavy ops ``1-eps``, light ops ``eps``, one edge of size ``10k``; OPT = 1.

    Pairing heavy ``i`` with light ``k+i`` gives every block cost 1 with no cut.
    """
    ops = [Op(name=f"h{i}", work=1 - eps, out_bytes=10 * k if i == 0 else 0) for i in range(k)]
    ops += [Op(name=f"l{i}", work=eps) for i in range(k)]
    g = Graph(ops, [("h0", "l0")], name=f"lemma_b2_k{k}")
    return Problem(g, Stages(k), Bottleneck(), [DagOrder()]), 1.0


def fig2() -> tuple[Problem, float]:
    """A graph in the spirit of Archer et al. Fig. 2 (k = 3): ``u``'s tensor feeds ``v`` and ``w``.

    ``u(1) -> v(3), w(3) -> x(1)`` with unit tensors: ``u``'s tensor crosses into ``{w, x}``
    once although ``v`` and ``w`` both consume it. ``{u, v} | {w, x}`` costs 4 + 1 + 1 = 6 and
    1 + 1 + 4 = 6; one block alone costs 8 and a third block cannot help (brute force: 6).
    The cyclic partition ``{u, x} | {v} | {w}`` of Fig. 2 (middle) violates the DAG order.
    """
    ops = [Op(name="u", work=1, out_bytes=1), Op(name="v", work=3, out_bytes=1),
           Op(name="w", work=3, out_bytes=1), Op(name="x", work=1)]
    g = Graph(ops, [("u", "v"), ("u", "w"), ("v", "x"), ("w", "x")], name="fig2")
    return Problem(g, Stages(3), Bottleneck(), [DagOrder()]), 6.0


def overflow_chain() -> tuple[Problem, float]:
    """Two ops of 4 param bytes on stages of memory 5 (bandwidth 1): together they stream 3.

    Together: work 2 + overflow (8 - 5) = 5; apart: 1 + 1 (tensor) = 2 each. Optimum 2.
    """
    ops = [Op(name="p", work=1, param_bytes=4, out_bytes=1), Op(name="q", work=1, param_bytes=4)]
    g = Graph(ops, [("p", "q")], name="overflow_chain")
    return Problem(g, Stages(2, memory=5.0), Bottleneck(), [DagOrder(), Overflow()]), 2.0


def overflow_unlimited() -> tuple[Problem, float]:
    """Soft memory beside unlimited devices: ``acc0`` holds 5 bytes, ``acc1`` and the CPU are unlimited: 4.

    ``p`` and ``q`` (work 2, 4 parameter bytes, unit tensors) together on ``acc0`` stream 3;
    ``r`` (work 1, 2 bytes) runs as fast on the CPU. Best: ``p`` on ``acc0`` (2 + 1 = 3), ``q``
    and ``r`` on ``acc1`` (3 + 1 = 4), the unlimited accelerator carrying the max load.
    """
    ops = [Op(name="p", work={"accelerator": 2, "cpu": 20}, param_bytes=4, out_bytes=1),
           Op(name="q", work={"accelerator": 2, "cpu": 20}, param_bytes=4, out_bytes=1),
           Op(name="r", work={"accelerator": 1, "cpu": 1}, param_bytes=2)]
    g = Graph(ops, [("p", "q"), ("q", "r")], name="overflow_unlimited")
    cluster = Cluster([Device(name="acc0", memory=5.0), Device(name="acc1"), Device(name="cpu0", kind="cpu")])
    return Problem(g, cluster, Throughput(), [Overflow()]), 4.0


def accelerators_cpu() -> tuple[Problem, float]:
    """Two accelerators (memory 10) and one CPU (Tarnawski §5): an embedding that must go to the CPU.

    ``emb`` needs 12 bytes (> 10) and runs 2 on the CPU; ``a``/``b`` run 2 on an accelerator
    and 8 on the CPU. Best: emb on cpu0 (2), a on acc0 (in 1 + 2 + out 1 = 4), b on acc1 (1 + 2 = 3): 4.
    """
    ops = [Op(name="emb", work={"accelerator": 1, "cpu": 2}, param_bytes=12, out_bytes=1),
           Op(name="a", work={"accelerator": 2, "cpu": 8}, out_bytes=1),
           Op(name="b", work={"accelerator": 2, "cpu": 8})]
    g = Graph(ops, [("emb", "a"), ("a", "b")], name="acc_cpu")
    cluster = Cluster.accelerators(2, memory=10.0, cpus=1)
    return Problem(g, cluster, Throughput(), [Memory(), Contiguous()]), 4.0


def training_graph(gradient_bytes: float = 1.0, name: str = "training") -> Graph:
    """Forward ``f0 -> f1 -> f2``, backward ``g2 -> g1 -> g0``, with stashes ``f_i -> g_i``.

    Activations are 1 byte, the backward ops' tensors ``gradient_bytes``."""
    fw = [Op(name=f"f{i}", work=w, out_bytes=1) for i, w in enumerate((2, 3, 1))]
    bw = [Op(name=f"g{i}", work=w, out_bytes=gradient_bytes, backward=True) for i, w in enumerate((4, 6, 2))]
    edges = [("f0", "f1"), ("f1", "f2"), ("f2", "g2"), ("g2", "g1"), ("g1", "g0")]
    edges += [(f"f{i}", f"g{i}") for i in range(2)]
    return Graph(fw + bw, edges, name=name)


def training_pipedream() -> tuple[Problem, float]:
    """The training graph on 2 accelerators, PipeDream ``max_d FW_d + BW_d`` (optimum by brute force: 11)."""
    return Problem(training_graph(), Cluster.accelerators(2), PipeDream(), [Contiguous()]), 11.0


def training_gradients() -> tuple[Problem, float]:
    """The training graph with gradients three times its activations (3 bytes against 1), PipeDream: 13.

    ``{f0, f1, g0} | {f2, g1, g2}`` (brute force): each accelerator computes 9, moves 1 byte
    forward and 3 backward: 13. A backward pass priced like the forward one would read 11.
    """
    graph = training_graph(gradient_bytes=3.0, name="training_gradients")
    return Problem(graph, Cluster.accelerators(2), PipeDream(), [Contiguous()]), 13.0


def training_gpipe() -> tuple[Problem, float]:
    """The training graph on 2 accelerators, GPipe ``max FW + max BW``: 14.

    ``{f0, g0} | {f1, f2, g1, g2}``: FW 3 and 5, BW 5 and 9, so 5 + 9 = 14 (brute force agrees),
    while the PipeDream optimum's split scores 6 + 9 = 15 here.
    """
    return Problem(training_graph(), Cluster.accelerators(2), GPipe(), [Contiguous()]), 14.0


def replicated_chain() -> tuple[Problem, float]:
    """``a`` (work 10, 2 parameter bytes) then ``b`` (work 1) on 3 accelerators with ``Replicate(3)``: 7.5.

    ``a`` on two replicas: ``(10 + 1) / 2 + 2 (2-1)/2 * 2 = 7.5`` (Tarnawski App. C.2 with a ring
    all-reduce); ``b`` alone: ``1 + 1``. Both on three replicas give ``11/3 + 4``; no replicas, 11.
    """
    g = Graph([Op(name="a", work=10, param_bytes=2, out_bytes=1), Op(name="b", work=1, param_bytes=1)], [("a", "b")])
    return Problem(g, Cluster.accelerators(3), Throughput(), [Contiguous(), Replicate(3)]), 7.5


def training_memory_1f1b() -> tuple[Problem, float]:
    """A 4-layer training chain on 3 devices of 12 bytes with 1F1B memory (``TrainingMemory``): 13.

    Layers ``f0..f3`` (work 1, 1, 2, 2; backward twice that; 1 byte per tensor; ``f0``, ``f1`` hold
    1 parameter byte, 8 bytes of Adam state each). Unconstrained the optimum is 10, with ``f0`` and
    ``f1`` on the last device (one micro-batch in flight: 16 + 2 = 18 bytes); at 12 bytes no stage
    may hold both, and brute force gives 13.
    """
    ops = [Op(name=f"f{i}", work=w, out_bytes=1.0, param_bytes=p, group=f"f{i}")
           for i, (w, p) in enumerate(zip((1, 1, 2, 2), (1, 1, 0, 0)))]
    ops += [Op(name=f"b{i}", work=2 * w, out_bytes=1.0, backward=True, group=f"f{i}") for i, w in enumerate((1, 1, 2, 2))]
    edges = [("f0", "f1"), ("f1", "f2"), ("f2", "f3"), ("f3", "b3"), ("b3", "b2"), ("b2", "b1"), ("b1", "b0")]
    return Problem(Graph(ops, edges), Cluster.stages(3, memory=12.0), PipeDream(),
                   [Contiguous(), TrainingMemory("1f1b")]), 13.0


def colocated_pinned() -> tuple[Problem, float]:
    """A chain with ``op0`` and ``op3`` colocated, ``op1`` pinned to ``acc1`` and ``op2`` CPU-only: 6.

    Work 2 everywhere, unit tensors, 2 accelerators and a CPU. ``{op0, op3}`` on one
    accelerator pays 4 + out op0 + in op2 = 6 (the CPU pays no transfers).
    """
    g = chain_graph([2, 2, 2, 2])
    terms = [Colocate([["op0", "op3"]]), Pin("op1", "acc1"), AllowedKinds(["op2"], ["cpu"])]
    return Problem(g, Cluster.accelerators(2, cpus=1), Throughput(), terms), 6.0


# ---------------------------------------------------------------------------- instances where a constraint binds
def contiguity_binds() -> tuple[Problem, float]:
    """Chain of work 5, 5, 1, 1 (tensors 0.25) on 2 accelerators, contiguous: 7.25 (6.5 without).

    Contiguous: ``{op0} | {op1, op2, op3}`` loads 5.25 and 7.25. Dropping contiguity,
    ``{op0, op3} | {op1, op2}`` balances the work at 6 + 0.5 each: 6.5.
    """
    g = chain_graph([5, 5, 1, 1], out_bytes=0.25)
    return Problem(g, Cluster.accelerators(2), Throughput(), [Contiguous()]), 7.25


def crossing_graph() -> Graph:
    """Two producers ``a`` (work 4) and ``c`` (3) both feeding ``b`` (1) and ``d`` (2); tensors 0.5."""
    ops = [Op(name="a", work=4, out_bytes=0.5), Op(name="c", work=3, out_bytes=0.5),
           Op(name="b", work=1), Op(name="d", work=2)]
    return Graph(ops, [("a", "b"), ("a", "d"), ("c", "b"), ("c", "d")], name="crossing")


def dag_order_binds() -> tuple[Problem, float]:
    """The crossing graph on 2 stages, contiguous and DAG-ordered: 6.5 (6 with contiguity alone).

    ``{a, b} | {c, d}`` is contiguous and balanced (5 + in 0.5 + out 0.5 = 6 each), but its
    quotient is a cycle (a -> d, c -> b): DAG order forbids it. Best ordered split:
    ``{a} | {c, b, d}`` at 4.5 and 6.5.
    """
    return Problem(crossing_graph(), Stages(2), Bottleneck(), [Contiguous(), DagOrder()]), 6.5


def memory_leaves_the_cpu() -> tuple[Problem, float]:
    """A 6-op chain (3 bytes each; 1 s on an accelerator, ``i + 1`` s on the CPU) on two accelerators of 6 bytes and
    a CPU last, DAG-ordered under hard memory: 11. The accelerators hold at most the first four ops; the CPU runs
    ``v4, v5`` (5 + 6 s) in every placement."""
    ops = [Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": float(i + 1)}, activation_bytes=3.0) for i in range(6)]
    g = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(5)])
    acc = [Device(name=f"acc{i}", kind="accelerator", memory=6.0, bandwidth=4.0) for i in range(2)]
    cluster = Cluster([*acc, Device(name="cpu0", kind="cpu", bandwidth=4.0, host=True)])
    return Problem(g, cluster, Bottleneck(), [Memory(), DagOrder()]), 11.0


def colocation_binds() -> tuple[Problem, float]:
    """Chain of work 2 (unit tensors) on 2 accelerators with ``op0``, ``op3`` colocated by equalities: 6 (5 without).

    ``{op0, op3} | {op1, op2}`` costs 4 + 2 transfers on both; the contiguous halves, 4 + 1 = 5,
    split the group.
    """
    g = chain_graph([2, 2, 2, 2])
    return Problem(g, Cluster.accelerators(2), Throughput(), [Colocate([["op0", "op3"]], shared=False)]), 6.0


def pin_binds() -> tuple[Problem, float]:
    """Chain of work 2 (unit tensors) on 2 accelerators, ``op0`` pinned to acc0 and ``op1`` to acc1: 6 (5 without).

    The pins cut the first edge; the best completion is ``{op0, op3} | {op1, op2}`` at 4 + 2.
    """
    g = chain_graph([2, 2, 2, 2])
    return Problem(g, Cluster.accelerators(2), Throughput(), [Pin("op0", "acc0"), Pin("op1", "acc1")]), 6.0


def allowed_kinds_binds() -> tuple[Problem, float]:
    """Three ops (work 2 on an accelerator, 6 on the CPU; unit tensors), ``op1`` CPU-only: 6 (5 without).

    Without the restriction ``{op0, op1} | {op2}`` costs 4 + 1; with it ``op1`` runs 6 on ``cpu0``.
    """
    ops = [Op(name=f"op{i}", work={"accelerator": 2, "cpu": 6}, out_bytes=1) for i in range(3)]
    g = Graph(ops, [("op0", "op1"), ("op1", "op2")], name="kinds")
    return Problem(g, Cluster.accelerators(2, cpus=1), Throughput(), [AllowedKinds(["op1"], ["cpu"])]), 6.0


def memory_binds() -> tuple[Problem, float]:
    """``a -> b -> c`` (work 1, 1, 4; a and b hold 4 bytes each) on 2 accelerators of memory 5: 6 (5 without).

    Unlimited, ``{a, b} | {c}`` costs 2 + 1 and 4 + 1; with memory 5, ``a`` and ``b`` must part
    and ``{a} | {b, c}`` costs 5 + in 1 = 6.
    """
    ops = [Op(name="a", work=1, param_bytes=4, out_bytes=1), Op(name="b", work=1, param_bytes=4, out_bytes=1),
           Op(name="c", work=4)]
    g = Graph(ops, [("a", "b"), ("b", "c")], name="memory")
    return Problem(g, Cluster.accelerators(2, memory=5.0), Throughput(), [Memory()]), 6.0


def subgraphs_on_links() -> tuple[Problem, float]:
    """``a -> b -> c`` on two linked devices, ``b`` fast on g1: 4 with ``b`` alone there (two subgraphs on g0);
    at most one subgraph per accelerator (Tarnawski Fig. 4's limit on a cluster with links): 6, all on g0."""
    fast, slow = {"a": 1, "b": 4}, {"a": 4, "b": 1}
    ops = [Op(name="a", work=fast, out_bytes=0.5), Op(name="b", work=slow, out_bytes=0.5), Op(name="c", work=fast)]
    devices = [Device(name="g0", kind="a", invocations=False), Device(name="g1", kind="b", invocations=False)]
    links = [Link(src="g0", dst="g1", bandwidth=1.0), Link(src="g1", dst="g0", bandwidth=1.0)]
    return Problem(Graph(ops, [("a", "b"), ("b", "c")], name="subgraphs-links"), Cluster(devices, links), Latency(),
                   [Subgraphs(1)]), 6.0


BINDING: dict[str, tuple[Callable[[], tuple[Problem, float]], type[Term], float]] = {
    "contiguity_binds": (contiguity_binds, Contiguous, 6.5),
    "dag_order_binds": (dag_order_binds, DagOrder, 6.0),
    "colocation_binds": (colocation_binds, Colocate, 5.0),
    "pin_binds": (pin_binds, Pin, 5.0),
    "allowed_kinds_binds": (allowed_kinds_binds, AllowedKinds, 5.0),
    "memory_binds": (memory_binds, Memory, 5.0),
    "training_memory_1f1b": (training_memory_1f1b, TrainingMemory, 10.0),
    "subgraphs_on_links": (subgraphs_on_links, Subgraphs, 4.0),
}
"""Instances whose constraint changes the optimum: ``name -> (instance, constraint class, optimum without it)``."""


# ---------------------------------------------------------------------------- schedules (MOIRAI)
def _mesh(k: int) -> Cluster:
    """``k`` devices of their own kinds ``d0..``, every ordered pair linked at bandwidth 1."""
    devices = [Device(name=f"d{i}", kind=f"d{i}") for i in range(k)]
    return Cluster(devices, [Link(src=f"d{a}", dst=f"d{b}", bandwidth=1.0) for a in range(k) for b in range(k)
                             if a != b])


def link_binds() -> tuple[Problem, float]:
    """Throughput on a line of links ``a0 - a1 - a2`` (1 byte per ms each way, no ``a0 - a2`` link), ``x`` pinned
    to ``a0``: 3.0 (2.516 with fast links).

    ``x`` (2, 1.5 bytes) feeds ``y`` and ``z`` (2 each), which feed ``w`` (0.5). Apart, ``y`` on ``a1`` and ``z``
    on ``a2`` put both copies of ``x``'s tensor on the link ``a0 -> a1`` (the route to ``a2`` crosses it): 3.0,
    the link the bottleneck; with fast links the devices' 2 + transfers decide (2.516).
    """
    devices = [Device(name=f"a{i}", kind="accelerator", bandwidth=100.0) for i in range(3)]
    links = [Link(src=s, dst=d, bandwidth=1.0) for s, d in (("a0", "a1"), ("a1", "a0"), ("a1", "a2"), ("a2", "a1"))]
    ops = [Op(name="x", work=2, out_bytes=1.5), Op(name="y", work=2, out_bytes=0.1), Op(name="z", work=2, out_bytes=0.1),
           Op(name="w", work=0.5)]
    g = Graph(ops, [("x", "y"), ("x", "z"), ("y", "w"), ("z", "w")], name="line")
    return Problem(g, Cluster(devices, links), Throughput(), [Pin("x", "a0")]), 3.0


def makespan_fork() -> tuple[Problem, float]:
    """``a -> b, a -> c`` on two heterogeneous devices, port congestion: makespan 5.

    ``a`` (2 on d0) then ``c`` (3) on d0 while ``a``'s tensor (1) moves to d1 for ``b`` (2): 2 + 3
    and 2 + 1 + 2 both end at 5; one device alone needs 9 (d0) or 8 (d1).
    """
    ops = [Op(name="a", work={"d0": 2, "d1": 3}, out_bytes=1), Op(name="b", work={"d0": 4, "d1": 2}),
           Op(name="c", work={"d0": 3, "d1": 3})]
    g = Graph(ops, [("a", "b"), ("a", "c")], name="fork")
    return Problem(g, _mesh(2), Makespan(), [Congestion("port")]), 5.0


def makespan_join() -> tuple[Problem, float]:
    """Two producers feeding one consumer on three devices, port congestion: makespan 6.

    ``p0`` on d0 and ``p1`` on d1 (1 each) send 2 bytes each into d2, whose in-port takes them one
    after the other (1..3, 3..5), then ``q`` runs 1: 6.
    """
    ops = [Op(name="p0", work={"d0": 1, "d1": 3, "d2": 10}, out_bytes=2),
           Op(name="p1", work={"d0": 3, "d1": 1, "d2": 10}, out_bytes=2),
           Op(name="q", work={"d0": 5, "d1": 5, "d2": 1})]
    g = Graph(ops, [("p0", "q"), ("p1", "q")], name="join")
    return Problem(g, _mesh(3), Makespan(), [Congestion("port")]), 6.0


# ---------------------------------------------------------------------------- single-sample latency
def latency_graph() -> Graph:
    """``a -> {b, c} -> d``: b and c heavy (6 on an accelerator, 9 on the CPU), half-unit tensors."""
    ops = [Op(name="a", work={"accelerator": 2, "cpu": 5}, out_bytes=0.5),
           Op(name="b", work={"accelerator": 6, "cpu": 9}, out_bytes=0.5),
           Op(name="c", work={"accelerator": 6, "cpu": 9}, out_bytes=0.5),
           Op(name="d", work={"accelerator": 1, "cpu": 3})]
    return Graph(ops, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")], name="latency-diamond")


def latency_diamond() -> tuple[Problem, float]:
    """Tarnawski's invocation model on 2 accelerators + a CPU, contiguous: latency 13.5 (15 on one accelerator).

    ``a`` on acc0 (2 + out 0.5), ``b`` and ``c`` on the CPU from 2.5 to 11.5, ``d`` on acc1
    (in 1 + 1): 13.5 (brute force agrees).
    """
    return Problem(latency_graph(), Cluster.accelerators(2, cpus=1, bandwidth=1.0), Latency(), [Contiguous()]), 13.5


def latency_subgraphs() -> tuple[Problem, float]:
    """The same graph on 2 accelerators without a CPU, at most 2 subgraphs per accelerator (Fig. 4's q = 2): 15.

    Without the CPU, running ``b`` beside ``c`` costs two transfers each way, more than the 6 it
    saves; one accelerator runs everything in 15 (brute force agrees).
    """
    return Problem(latency_graph(), Cluster.accelerators(2, bandwidth=1.0), Latency(), [Subgraphs(2)]), 15.0


def invocation_workload(seed: int, n: int = 12, k: int = 2, memory_share: float = 0.2) -> tuple[Graph, Cluster]:
    """A Tarnawski-style single-sample input: ``n`` ops in a chain with skips back over up to five ops, each with an
    accelerator time and a 4-12 times slower CPU time and 0, 20 or 50 parameter bytes; ``k`` accelerators each holding
    ``memory_share`` of all the parameters (memory binds) beside one host CPU. Contiguity binds here: the contiguous
    optimum is often far above the best placement (the accelerators' runs come back after the CPU's)."""
    rng = random.Random(seed)
    ops = []
    for i in range(n):
        acc = round(rng.uniform(0.5, 3.0), 3)
        ops.append(Op(name=f"o{i}", work={"accelerator": acc, "cpu": round(acc * rng.uniform(4, 12), 3)},
                      param_bytes=float(rng.choice((0, 20, 50))), out_bytes=float(rng.choice((0.5, 2, 6)))))
    edges = sorted({(p, i) for i in range(1, n)
                    for p in {i - 1, *(rng.randrange(max(0, i - 5), i) for _ in range(rng.choice((0, 1, 2))))}})
    memory = round(memory_share * sum(op.param_bytes for op in ops), 1)
    devices = [Device(name=f"acc{j}", kind="accelerator", memory=memory, bandwidth=2.0) for j in range(k)]
    return (Graph(ops, [(f"o{u}", f"o{v}") for u, v in edges], name=f"invocations{n}-{seed}"),
            Cluster([*devices, Device(name="cpu0", kind="cpu", memory=1e9, host=True)]))


INSTANCES: dict[str, Callable[[], tuple[Problem, float]]] = {
    "chain": chain, "diamond": diamond, "diamond_noncontiguous": diamond_noncontiguous, "fork_join": fork_join,
    "lemma_b2": lemma_b2, "fig2": fig2, "overflow_chain": overflow_chain,
    "overflow_unlimited": overflow_unlimited, "accelerators_cpu": accelerators_cpu,
    "training_pipedream": training_pipedream, "training_gradients": training_gradients,
    "training_gpipe": training_gpipe,
    "colocated_pinned": colocated_pinned, "replicated_chain": replicated_chain,
    "makespan_fork": makespan_fork, "makespan_join": makespan_join, "link_binds": link_binds,
    "latency_diamond": latency_diamond, "latency_subgraphs": latency_subgraphs,
    **{name: instance for name, (instance, _, _) in BINDING.items()},
}


def valid_objectives(problem: Problem, methods: tuple[str, ...], time_limit: float = 5.0) -> list[float]:
    """The objectives of ``methods``' placements (each run for at most ``time_limit`` seconds) that ``problem``
    accepts: answers a bound must not exceed."""
    found = [run(m, problem.graph, problem.cluster, model=problem.cost_model(), time_limit=time_limit).placement
             for m in methods]
    return [problem.evaluate(p).objective for p in found if problem.is_valid(p)]


def moirai_sheet(succ: Callable[[int], list[int]], tasks: int, first: list[int], bandwidth: list[list[float]],
                 task: Callable[[int, int], tuple[float, list[float], list[float]]], memory: float,
                 name: str) -> tuple[Graph, Cluster]:
    """A MOIRAI sheet as :func:`placement_dsl.io.moirai.build` reads it: a zero-time source feeding ``first``, then
    tasks ``1..tasks``, task ``i`` feeding ``succ(i)`` with one flow per successor. ``task(i, successors)`` gives its
    memory (``mi``), its time on each device and each flow's size, which crosses devices ``a -> b`` in
    ``size / bandwidth[a][b]`` (nothing on one device); every device holds ``memory``."""
    K = len(bandwidth)
    headers = ["task", "c_task", "dir_succ", "dir_succ_add", *(f"p{k}" for k in range(K)),
               *(f"pc{a}{b}" for a in range(K) for b in range(K)), "mi", *(f"m{k}" for k in range(K))]
    blank = dict.fromkeys(headers, "")
    rows = [{**blank, "task": 0.0, "dir_succ": ",".join(map(str, first)), "mi": 0.0,
             **{f"p{k}": 0.0 for k in range(K)}, **{f"m{k}": memory for k in range(K)}}]
    flow = 10 * tasks
    for i in range(1, tasks + 1):
        after = succ(i)
        mi, times, sizes = task(i, len(after))
        row = {**blank, "task": float(i), "mi": mi, **{f"p{k}": t for k, t in enumerate(times)}}
        if after:
            row.update({"c_task": ",".join(str(flow + q) for q in range(len(after))),
                        "dir_succ": ",".join(map(str, after))})
            row.update({f"pc{a}{b}": ",".join("0.0" if a == b else str(round(s / bandwidth[a][b], 5)) for s in sizes)
                        for a in range(K) for b in range(K)})
            flow += len(after)
        rows.append(row)
    graph, cluster, _ = moirai.build(headers, [[r[h] for h in headers] for r in rows], name)
    return graph, cluster


def run_cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one ``placement-dsl`` command run in-process (argparse's own exits
    included); ``capsys`` is pytest's capture fixture."""
    from .cli import main

    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    captured = capsys.readouterr()
    return code, captured.out, captured.err
