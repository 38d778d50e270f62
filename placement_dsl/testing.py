"""Tiny placement problems with known optima, and a brute-force reference solver.

Every formulation and every solver must reproduce these optima; :func:`brute_force`
enumerates all placements (colocation groups move together, ops only on allowed
devices, pins respected) and scores them with the cost model.

>>> problem, optimum = chain()
>>> brute_force(problem)[0] == optimum
True
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np

from .cluster import Cluster
from .constraints import AllowedKinds, Colocate, Contiguous, DagOrder, Memory, Overflow, Pin
from .errors import InfeasibleError, SpecError
from .evaluate import evaluate
from .graph import Graph, Op
from .objectives import Bottleneck, GPipe, PipeDream, Throughput
from .placement import Placement
from .problem import Problem, Stages

MAX_BRUTE_FORCE = 20_000


def brute_force(problem: Problem) -> tuple[float, Placement]:
    """``(best objective, a best placement)`` over every valid placement (small problems only).

    Raises :class:`InfeasibleError` when no placement is valid.
    """
    g, c = problem.graph, problem.cluster
    reps = np.unique(g.group_id)
    times = c.times(g)
    choices = []
    pins = {g.index[o]: c.index[d] for o, d in problem.pins.items()}
    for r in reps:
        members = np.flatnonzero(g.group_id == r)
        ok = np.isfinite(times[members]).all(axis=0)
        pinned = {pins[m] for m in members if m in pins}
        choices.append([d for d in range(c.size) if ok[d] and (not pinned or d in pinned)])
    total = math.prod(len(ch) for ch in choices)
    if total > MAX_BRUTE_FORCE:
        raise SpecError(f"brute_force: {total} placements to enumerate (> {MAX_BRUTE_FORCE}); use a smaller problem")
    model = problem.cost_model()
    where = np.searchsorted(reps, g.group_id)
    best: tuple[float, Placement] | None = None
    for combo in itertools.product(*choices):
        placement = Placement(g, c, np.asarray(combo, dtype=np.int64)[where], source="brute-force")
        ev = evaluate(placement, model)
        if not ev.valid or (best is not None and ev.objective >= best[0]):
            continue
        if any(term.check(placement) for term in problem.constraints):
            continue
        best = (ev.objective, placement)
    if best is None:
        raise InfeasibleError(f"brute_force: no valid placement of {g!r} on {c!r} for {problem!r}")
    return best


# ---------------------------------------------------------------------------- graphs
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


def training_graph() -> Graph:
    """Forward ``f0 -> f1 -> f2``, backward ``g2 -> g1 -> g0``, with stashes ``f_i -> g_i``."""
    fw = [Op(name=f"f{i}", work=w, out_bytes=1) for i, w in enumerate((2, 3, 1))]
    bw = [Op(name=f"g{i}", work=w, out_bytes=1, backward=True) for i, w in enumerate((4, 6, 2))]
    edges = [("f0", "f1"), ("f1", "f2"), ("f2", "g2"), ("g2", "g1"), ("g1", "g0")]
    edges += [(f"f{i}", f"g{i}") for i in range(2)]
    return Graph(fw + bw, edges, name="training")


def training_pipedream() -> tuple[Problem, float]:
    """The training graph on 2 accelerators, PipeDream ``max_d FW_d + BW_d`` (optimum by brute force: 11)."""
    return Problem(training_graph(), Cluster.accelerators(2), PipeDream(), [Contiguous()]), 11.0


def training_gpipe() -> tuple[Problem, float]:
    """The training graph on 2 accelerators, GPipe ``max FW + max BW``: 14.

    ``{f0, g0} | {f1, f2, g1, g2}``: FW 3 and 5, BW 5 and 9, so 5 + 9 = 14 (brute force agrees),
    while the PipeDream optimum's split scores 6 + 9 = 15 here.
    """
    return Problem(training_graph(), Cluster.accelerators(2), GPipe(), [Contiguous()]), 14.0


def colocated_pinned() -> tuple[Problem, float]:
    """A chain with ``op0`` and ``op3`` colocated, ``op1`` pinned to ``acc1`` and ``op2`` CPU-only: 6.

    Work 2 everywhere, unit tensors, 2 accelerators and a CPU. ``{op0, op3}`` on one
    accelerator pays 4 + out op0 + in op2 = 6 (the CPU pays no transfers).
    """
    g = chain_graph([2, 2, 2, 2])
    terms = [Colocate([["op0", "op3"]]), Pin("op1", "acc1"), AllowedKinds(["op2"], ["cpu"])]
    return Problem(g, Cluster.accelerators(2, cpus=1), Throughput(), terms), 6.0


INSTANCES: dict[str, Callable[[], tuple[Problem, float]]] = {
    "chain": chain, "diamond": diamond, "diamond_noncontiguous": diamond_noncontiguous, "fork_join": fork_join,
    "lemma_b2": lemma_b2, "fig2": fig2, "overflow_chain": overflow_chain, "accelerators_cpu": accelerators_cpu,
    "training_pipedream": training_pipedream, "training_gpipe": training_gpipe,
    "colocated_pinned": colocated_pinned,
}
