"""PipeDream's hierarchical planner (Narayanan et al., SOSP 2019, §3.1), from its recurrences.

The model is a chain of layers ``0..n-1`` (here: the contracted forward DAG's supernodes in
the DFS order the pipeline planner uses, each carrying its backward ops). With ``T_l`` a
layer's forward + backward time, ``w_l`` its parameter bytes and ``a_s`` the forward bytes
crossing the cut after layer ``s`` (their gradients cross back), level ``k`` of the hierarchy
with bandwidth ``B_k`` and ``m_{k-1}`` workers per level-``(k-1)`` component has::

    T^k(i -> j, m) = (1/m) max(A^{k-1}(i -> j, m_{k-1}), 2 (m - 1) sum_{l=i..j} w_l / B_k)
    A^k(i -> j, m) = min( T^k(i -> j, m),
                          min_{i <= s < j} min_{1 <= m' < m} max(A^k(i -> s, m - m'), 2 a_s / B_k, T^k(s+1 -> j, m')) )

with ``A^0(i -> j, 1) = sum_{l=i..j} T_l``. Level 1 splits a segment over the ``P`` devices of
one server (``B_1`` intra-server), level 2 over the ``S`` servers (``B_2`` inter-server;
a server is a worker running level 1's best pipeline for its segment, replicated over ``m``
servers). The answer is ``A^2(0 -> n-1, S)`` (``A^1(0 -> n-1, P)`` on one server).

The planner's own estimate treats a link as a pipeline resource of its own (``2 a_s / B``) and
ignores memory; its configuration is then scored by the cost model
(:mod:`placement_dsl.evaluate`), like every placement, which is how it is compared with the
pipeline planner (:mod:`.pipeline_dp`), exact for the cost model over a class containing it.
"""
from __future__ import annotations

import time

import numpy as np

from ..cluster import Cluster
from ..evaluate import CostModel, evaluate
from ..graph import Graph
from . import manifest
from .base import HeuristicResult, deadline_at, expired, kernel_deadline
from .fallback import fallback
from .jit import njit
from .kernels import clock
from .pipeline_dp import Chain, Layout, build_planner, placement_of
from .registry import heuristic

INF = np.inf
NO_TABLE = np.zeros((0, 0))  # level()'s base where block times come from prefix sums


@njit(cache=True)
def _replicated(base, W, m, B, max_rep):
    """``T(i -> j, m)``: a block (worth ``base`` on one worker) on ``m`` data-parallel workers."""
    if m > max_rep:
        return INF
    return max(base, 2.0 * (m - 1) * W / B) / m


@njit(cache=True)
def level(base, prefix, wp, cut, B, M, lefts, max_rep, at):
    """``A^k(i -> j, m)`` for ``i`` in ``lefts``, all ``j >= i`` and ``m = 1..M``, with back-links.

    ``A^{k-1}(i -> j, m_{k-1})`` is ``base[i, j]``, or ``prefix[j + 1] - prefix[i]`` where ``base`` is empty
    (level 1: the layers' times, without an ``n x n`` table); ``wp`` prefix sums of ``w``; ``cut[s]`` = ``a_s``.
    Row ``r`` of the tables is ``i = lefts[r]``: ``split[r, j, m]`` is ``s`` (``-1``: the whole block replicated
    ``m`` times) and ``last[r, j, m]`` the last stage's ``m'``. The clock is read every row ``j`` against ``at``
    (``time.monotonic()``; ``inf``: none); past it, the rows are left unfinished and ``stopped`` is true.
    """
    n = wp.size - 1
    table = base.shape[0] > 0
    R = lefts.size
    A = np.full((R, n, M + 1), INF)
    split = np.full((R, n, M + 1), -2, np.int64)
    last = np.zeros((R, n, M + 1), np.int64)
    for r in range(R):
        i = lefts[r]
        for j in range(i, n):
            if at < INF and clock() > at:
                return A, split, last, True
            for m in range(1, M + 1):
                whole = base[i, j] if table else prefix[j + 1] - prefix[i]
                best = _replicated(whole, wp[j + 1] - wp[i], m, B, max_rep)
                bs, bm = -1, m
                for s in range(i, j):
                    comm = 2.0 * cut[s] / B
                    if comm >= best:
                        continue
                    right_base = base[s + 1, j] if table else prefix[j + 1] - prefix[s + 1]
                    for mp in range(1, m):
                        left = A[r, s, m - mp]
                        if left >= best:
                            continue
                        right = _replicated(right_base, wp[j + 1] - wp[s + 1], mp, B, max_rep)
                        v = max(max(left, comm), right)
                        if v < best:
                            best, bs, bm = v, s, mp
                A[r, j, m], split[r, j, m], last[r, j, m] = best, bs, bm
    return A, split, last, False


def planner_table_bytes(positions: int, lay: Layout) -> float:
    """The bytes of :func:`level`'s tables (``A``, ``split``, ``last``) over ``positions``: one row of
    ``positions x (P + 1)`` on one server; on several, a row per left end, then the second level's base
    (``positions^2``) and its one row over the servers."""
    P, S = lay.per_server, lay.servers
    if S == 1:
        return 24.0 * positions * (P + 1)
    return 24.0 * positions ** 2 * (P + 1) + 8.0 * positions ** 2 + 24.0 * positions * (S + 1)


def _blocks(split: np.ndarray, last: np.ndarray, i: int, j: int, m: int) -> list[tuple[int, int, int]]:
    """Back-track ``A(i -> j, m)`` into blocks ``(first, last + 1, workers)`` in order."""
    out: list[tuple[int, int, int]] = []
    while True:
        s, mp = int(split[i, j, m]), int(last[i, j, m])
        if s == -1:
            return [(i, j + 1, m), *out]
        out.insert(0, (s + 1, j + 1, mp))
        j, m = s, m - mp


def _workers(A: np.ndarray, replication: bool) -> np.ndarray:
    """The workers each block ``A[i, j]`` is planned on: all ``M`` (PipeDream's recurrence, replicas taking
    the spare ones), or without replication the ``m <= M`` of the least ``A[i, j, m]`` (one stage per worker,
    so a block of fewer layers than workers leaves some idle instead of having no plan)."""
    M = A.shape[2] - 1
    if replication:
        return np.full(A.shape[:2], M, np.int64)
    return 1 + np.argmin(A[:, :, 1:], axis=2)


def layer_data(chain: Chain) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prefix sums of ``T_l`` (a block's time is a difference of two), of ``w``, and ``a_s`` (forward bytes over
    each cut)."""
    n = chain.n
    owner, nbytes, forward, _, maxc, _ = chain.tensors
    diff = np.zeros(n + 1)
    keep = forward & (maxc > owner)
    np.add.at(diff, owner[keep], nbytes[keep])
    np.add.at(diff, maxc[keep], -nbytes[keep])
    return np.ascontiguousarray(chain.comp, dtype=np.float64), chain.param, np.cumsum(diff)[:n]


@heuristic("pipedream-planner", optimizes="max_load", options=manifest.Replicated)
def pipedream_planner(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
                      replication: bool = False, max_replicas: int | None = None,
                      time_limit: float | None = None) -> HeuristicResult:
    """PipeDream's hierarchical planner (module docstring) on a flat or two-level cluster.

    PipeDream replicates stages by design; that takes ``replication=True`` (a stage on at most
    ``max_replicas`` devices of a server, segments over servers), as a problem with a ``Replicate``
    term allows. Without it (the default, as ``pipeline``'s) the planner runs with one device per
    stage and segment (``m = 1`` at both levels), so its placement is valid where replicas are not.

    ``info["planner_estimate"]`` is its own objective; ``objective`` the cost model's value of
    its configuration (as a placement with replicas). No bound. ``time_limit`` (seconds) is checked
    between its levels: past it, :func:`.fallback.fallback`'s split (``info["stopped"]``).
    """
    del seed
    start = time.perf_counter()
    at = deadline_at("pipedream-planner", time_limit)
    model = CostModel() if model is None else model
    con, chain, planner = build_planner(graph, cluster, model, replication, None, None, max_replicas,
                                        method="pipedream-planner", tables=planner_table_bytes)
    if expired(at):
        return fallback("pipedream-planner", graph, cluster, model, "the chain's tables", start)
    lay, n = planner.lay, chain.n
    prefix, wp, cut = layer_data(chain)
    max_rep = planner.max_rep
    lefts = np.arange(n) if lay.servers > 1 else np.zeros(1, np.int64)
    A1, split1, last1, stopped = level(NO_TABLE, prefix, wp, cut, lay.intra, lay.per_server, lefts, max_rep,
                                       kernel_deadline(at))
    if stopped or expired(at):
        return fallback("pipedream-planner", graph, cluster, model, "the planner's first level", start)
    workers1 = _workers(A1, replication)
    if lay.servers == 1:
        m1 = int(workers1[0, n - 1])
        estimate = float(A1[0, n - 1, m1])
        segments = [(0, n, 1, _blocks(split1, last1, 0, n - 1, m1))]
    else:
        base2 = np.ascontiguousarray(np.take_along_axis(A1, workers1[:, :, None], axis=2)[:, :, 0])
        A2, split2, last2, stopped = level(base2, prefix, wp, cut, lay.inter, lay.servers, np.zeros(1, np.int64),
                                           lay.servers if replication else 1, kernel_deadline(at))
        if stopped:
            return fallback("pipedream-planner", graph, cluster, model, "the planner's second level", start)
        m2 = int(_workers(A2, replication)[0, n - 1])
        estimate = float(A2[0, n - 1, m2])
        segments = [(a, b, m, _blocks(split1, last1, a, b - 1, int(workers1[a, b - 1])))
                    for a, b, m in _blocks(split2, last2, 0, n - 1, m2)]
    placement = placement_of(con, chain, lay, cluster, segments, "pipedream-planner")
    ev = evaluate(placement, model)
    info = {"planner_estimate": estimate, "positions": n,
            "segments": [{"positions": [a, b], "servers": m,
                          "stages": [{"positions": [x, y], "replicas_per_server": r} for x, y, r in st]}
                         for a, b, m, st in segments]}
    return HeuristicResult(method="pipedream-planner", placement=placement, objective=ev.objective,
                           seconds=time.perf_counter() - start, evaluations=1, info=info)
