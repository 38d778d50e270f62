"""REGAL-style random computation graphs (Paliwal et al. 2020; Archer et al. App. C.2)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..cluster import ACCELERATOR, CPU, Cluster
from ..errors import SpecError
from ..graph import Op
from ..workload import Workload
from .build import GraphBuilder, build_workload, check_choice, check_positive
from .costs import ACCELERATOR_ROOFLINE, CPU_ROOFLINE, round_significant

REGAL_MODELS = ("erdos_renyi", "barabasi_albert", "watts_strogatz")
REGAL_TENSOR_MEAN, REGAL_TENSOR_STD, REGAL_FRACTION_STD = 50.0, 10.0, 0.1
"""Archer et al. App. C.2: tensor sizes ~ N(50, 10); node cost fraction r ~ N(0, 0.1)."""


def _erdos_renyi(rng: np.random.Generator, n: int) -> list[tuple[int, int]]:
    """G(n, p) with mean degree 4: ``p = 4 / (n - 1)``."""
    iu, ju = np.triu_indices(n, 1)
    keep = rng.random(len(iu)) < 4.0 / (n - 1)
    return list(zip(iu[keep].tolist(), ju[keep].tolist()))


def _barabasi_albert(rng: np.random.Generator, n: int, m: int = 2) -> list[tuple[int, int]]:
    """Preferential attachment: each new node links to ``m`` distinct nodes drawn by degree."""
    edges = [(0, 1)]
    ends = [0, 1]
    for v in range(2, n):
        targets: set[int] = set()
        while len(targets) < min(m, v):
            targets.add(int(ends[rng.integers(len(ends))]))
        for u in sorted(targets):
            edges.append((u, v))
            ends += [u, v]
    return edges


def _watts_strogatz(rng: np.random.Generator, n: int, k: int = 4, beta: float = 0.3) -> list[tuple[int, int]]:
    """A ring lattice with ``k`` neighbours, each edge rewired with probability ``beta``."""
    edges: set[tuple[int, int]] = set()
    for u in range(n):
        for d in range(1, k // 2 + 1):
            v = (u + d) % n
            if rng.random() < beta:
                v = int(rng.integers(n))
                while v == u or (min(u, v), max(u, v)) in edges:
                    v = int(rng.integers(n))
            edges.add((min(u, v), max(u, v)))
    return sorted(edges)


_REGAL_BASE: dict[str, Callable[[np.random.Generator, int], list[tuple[int, int]]]] = {
    "erdos_renyi": _erdos_renyi, "barabasi_albert": _barabasi_albert, "watts_strogatz": _watts_strogatz,
}


def _regal_sizes(seed: int, n: int | None, model: str | None) -> tuple[np.random.Generator, int, str]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(50, 201)) if n is None else n
    model = REGAL_MODELS[int(rng.integers(len(REGAL_MODELS)))] if model is None else model
    return rng, n, model


def regal(seed: int = 0, n: int | None = None, model: str | None = None, stages: int = 4, training: bool = False,
          cluster: Cluster | None = None, name: str | None = None) -> Workload:
    """A REGAL-style random computation graph (Paliwal et al. 2020, as summarized by Archer et al. App. C.2).

    1. ``n ~ U{50..200}`` and a base model from :data:`REGAL_MODELS` (both drawn from ``seed``
       unless given); the undirected base graph is oriented by a random topological order.
    2. Every node has one output tensor of size ``s_v ~ N(50, 10)`` (clipped to >= 1).
    3. Node cost ``c_v = s_v + sum_{u -> v} s_u + |r_v| * sum_w s_w`` with ``r_v ~ N(0, 0.1)``
       (the magnitude of r: a cost cannot be negative).

    Costs are unitless: ``work["accelerator"] = c_v`` and ``work["cpu"] = c_v`` times the
    accelerator/CPU peak-FLOPs ratio; ``out_bytes = activation_bytes = s_v``. The default
    cluster is ``stages`` pipeline stages with unit bandwidth (Archer et al.'s MTPP setting, in
    which a tensor crossing a boundary costs its size). Paliwal et al.'s filter for graphs hard
    for peak-memory scheduling is not applied.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise SpecError(f"regal: seed must be an integer >= 0, got {seed!r}")
    if n is not None:
        check_positive("regal", n=n)
        if n < 2:
            raise SpecError(f"regal: n must be >= 2, got {n}")
    if model is not None:
        check_choice("regal", "model", model, REGAL_MODELS)
    check_positive("regal", stages=stages)
    rng, n, model = _regal_sizes(int(seed), n, model)
    order = rng.permutation(n)  # order[v] = position of v in the random topological order
    pairs = [(u, v) if order[u] < order[v] else (v, u) for u, v in _REGAL_BASE[model](rng, n)]
    size = np.maximum(rng.normal(REGAL_TENSOR_MEAN, REGAL_TENSOR_STD, n), 1.0).round(3)
    frac = np.abs(rng.normal(0.0, REGAL_FRACTION_STD, n))
    cost = size + frac * size.sum()
    for u, v in pairs:
        cost[v] += size[u]
    ratio = ACCELERATOR_ROOFLINE.peak_flops / CPU_ROOFLINE.peak_flops
    ops = [Op(name=f"n{v:03d}", work={ACCELERATOR: round_significant(cost[v]), CPU: round_significant(cost[v] * ratio)},
              out_bytes=float(size[v]), activation_bytes=float(size[v])) for v in range(n)]
    edges = [(f"n{u:03d}", f"n{v:03d}") for u, v in pairs]
    g = GraphBuilder()
    g.ops, g.edges = ops, edges
    params = {"seed": int(seed), "n": n, "model": model}
    return build_workload(name or f"regal-{seed}", g, training, cluster or Cluster.stages(stages), "regal", params)
