"""Searching over topological orders for SliceGraph (Archer et al. §4.2, App. C.1).

Every method maps node priorities ``x in [0, 1]^n`` to a topological order with Kahn's
algorithm (Alg. 3) and slices it optimally (Alg. 1):

* :func:`random_orders` — random-T: ``T`` i.i.d. ``U(0, 1)`` priority vectors, best slicing.
* :func:`brkga` — a biased random-key genetic algorithm (Gonçalves & Resende 2011) whose
  decoder is BrkgaSortAndSliceDecoder (Alg. 2); the fitness is the MTPP objective.
* :func:`mla`, :func:`mla_weighted` — BRKGA on the minimum-linear-arrangement objective
  ``h(pi) = sum_{(u,v) in E} w(u, v) |pi^-1(u) - pi^-1(v)|`` of the decoded order
  (``w = 1`` or ``w = io(u, v)``), then one slicing of the best order, kept where it beats the slicing of the
  topological order (sliced first: its time sizes what the search leaves for the last slicing).

Decoding only needs the exact fitness of candidates that can still matter, so each decode
gets a cutoff (the best value for random-T; the worst elite's value for BRKGA, since a child
above it can never enter the elite set) and the DP prunes every segment above it.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..errors import InfeasibleError, SpecError
from ..evaluate import CostModel, evaluate
from ..graph import Graph
from ..progress import report
from . import manifest
from .base import HeuristicResult, deadline_at, expired, stopped
from .jit import njit
from .kernels import priority_order
from .registry import heuristic
from .slice_kernels import SPARSE
from .slicegraph import Slicer

INF = math.inf
SLICING_RESERVE = 1.5  # times the initial order's slicing, the time mla's search leaves for the final slicing: that
# one is cut off at the initial value (0.31 s of CPU against 2.65 s uncut on GPT-3's 20,111 ops onto 4 stages), the
# rest is for the load rising meanwhile. Searching to the limit, mla returned GPT-3's work-balanced split at 10 s


# ---------------------------------------------------------------------------- options
def _count(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise SpecError(f"option {name}={value!r}: expected an integer >= {minimum}")
    return int(value)


def _fraction(name: str, value: Any, low: float = 0.0, high: float = 1.0) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise SpecError(f"option {name}={value!r}: expected a number in [{low}, {high}]") from None
    if not low <= value <= high:
        raise SpecError(f"option {name}={value!r}: expected a number in [{low}, {high}]")
    return value


@dataclass(frozen=True)
class BrkgaConfig:
    """BRKGA parameters (Gonçalves & Resende 2011; Archer et al. use population 100)."""

    evaluations: int = 1000
    population: int = 100
    elite: float = 0.2  # fraction of the population kept as elite
    mutants: float = 0.15  # fraction replaced by fresh random keys each generation
    rho: float = 0.7  # probability a child inherits a gene from its elite parent

    def __post_init__(self) -> None:
        _count("evaluations", self.evaluations)
        _count("population", self.population, 2)
        _fraction("elite", self.elite, 0.0, 1.0)
        _fraction("mutants", self.mutants, 0.0, 1.0)
        _fraction("rho", self.rho, 0.5, 1.0)
        if self.n_elite + self.n_mutants > self.population:
            raise SpecError(f"BRKGA: elite ({self.elite}) + mutants ({self.mutants}) exceed the population "
                            f"{self.population}; lower one of the fractions")

    @property
    def n_elite(self) -> int:
        return max(1, round(self.elite * self.population))

    @property
    def n_mutants(self) -> int:
        return round(self.mutants * self.population)


@dataclass
class SearchState:
    """The population and the bookkeeping of one BRKGA run."""

    keys: np.ndarray
    values: np.ndarray
    evaluations: int = 0
    history: list[float] = field(default_factory=list)


# ---------------------------------------------------------------------------- BRKGA core
Fitness = Callable[[np.ndarray, float], float]  # (keys, cutoff) -> exact value, or inf if above cutoff


def _evaluate_batch(fitness: Fitness, keys: np.ndarray, known: np.ndarray, n_elite: int,
                    state: SearchState, budget: int, deadline: float | None = None) -> np.ndarray:
    """Fitness of the rows the budget allows, the cutoff tightening to the current n_elite-th best; after
    ``deadline`` (``time.monotonic()``) no further row is decoded (the first always is): fewer values."""
    count = min(len(keys), budget - state.evaluations)
    out = np.full(count, INF)
    pool = list(np.sort(known)[:n_elite])
    for r in range(count):
        if r and expired(deadline):
            return out[:r]
        cutoff = pool[n_elite - 1] if len(pool) >= n_elite else INF
        out[r] = fitness(keys[r], cutoff)
        state.evaluations += 1
        if out[r] < cutoff:
            pool = sorted(pool + [out[r]])[:n_elite]
    return out


def _next_generation(state: SearchState, cfg: BrkgaConfig, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Elites survive, mutants are fresh keys, the rest are biased crossovers elite x non-elite."""
    P, n = state.keys.shape
    rank = np.argsort(state.values, kind="stable")
    elite, other = rank[: cfg.n_elite], rank[cfg.n_elite:]
    n_cross = P - cfg.n_elite - cfg.n_mutants
    mutants = rng.random((cfg.n_mutants, n))
    parents_e = state.keys[rng.choice(elite, n_cross)]
    parents_o = state.keys[rng.choice(other if other.size else elite, n_cross)]
    children = np.where(rng.random((n_cross, n)) < cfg.rho, parents_e, parents_o)
    return elite, np.vstack([mutants, children])


def brkga_search(fitness: Fitness, n: int, cfg: BrkgaConfig, rng: np.random.Generator,
                 initial: np.ndarray | None = None, deadline: float | None = None,
                 objective: Callable[[np.ndarray], float] | None = None,
                 label: tuple[str, str] = ("brkga", "best")) -> SearchState:
    """Minimize ``fitness`` over random keys in ``[0, 1]^n`` within ``cfg.evaluations`` decodes; no decode
    starts after ``deadline`` (``time.monotonic()``) but the first population's first row. Each generation
    reports, as ``label`` (the method, the figure's name), the ``objective`` of its best keys (the cost model's,
    where the fitness is a decoder's value: computed when the best keys change), else their fitness (a search
    whose fitness is no objective names it otherwise: the linear arrangements' ``arrangement``)."""
    P = min(cfg.population, cfg.evaluations)
    keys = rng.random((P, n))
    if initial is not None:
        keys[: len(initial)] = initial[:P]
    state = SearchState(keys=keys, values=np.full(P, INF))
    n_elite = min(cfg.n_elite, P)
    state.values = _evaluate_batch(fitness, keys, np.empty(0), n_elite, state, cfg.evaluations, deadline)
    state.keys = keys[: state.values.size]
    state.history.append(float(state.values.min()))
    shown: tuple[float, float] | None = None  # (fitness, objective) of the best keys last reported
    while state.evaluations < cfg.evaluations and state.values.size > cfg.n_elite and not expired(deadline):
        elite, fresh = _next_generation(state, cfg, rng)
        values = _evaluate_batch(fitness, fresh, state.values[elite], cfg.n_elite, state, cfg.evaluations, deadline)
        state.keys = np.vstack([state.keys[elite], fresh[: values.size]])
        state.values = np.concatenate([state.values[elite], values])
        state.history.append(float(state.values.min()))
        if objective is not None and (shown is None or state.history[-1] < shown[0]):
            shown = (state.history[-1], objective(state.keys[int(np.argmin(state.values))]))
        best = state.history[-1] if shown is None else shown[1]
        report(label[0], generation=len(state.history), evaluations=state.evaluations, **{label[1]: best})
    return state


def topo_keys(graph: Graph) -> np.ndarray:
    """Priorities that make Kahn's algorithm reproduce the graph's topological order."""
    return 1.0 - (graph.rank + 0.5) / graph.n


# ---------------------------------------------------------------------------- MTPP decoders
GRID_OPS = 2_000  # from this many ops on, the searches' decodes cut their orders only on a grid of positions
GRID_CUTS = 1_000  # ... of about this many cuts, at least SPARSE + 1 positions apart


def cut_grid(n: int) -> int | None:
    """How many positions apart a decode of an order of ``n`` ops may cut (``None``: anywhere, below
    :data:`GRID_OPS`); :func:`order_grid` picks the positions.

    A decode slices its order exactly (Alg. 1), ``O(n * band)`` with the band the positions whose work fits the
    cutoff, ``n / k`` and more: seconds at 20,000 ops (BRKGA and random-T decoded 2-9 orders in 10-60 s, and their
    answer was the first order's), 40 s beside a slow host whose stage's band is the whole order. Cut only once every
    ``r`` positions (``r > SPARSE``), the slicing DP extends just the few prefixes on the grid
    (:func:`.slice_kernels.slice_dp`'s sparse visits), so a decode costs about ``n`` steps plus ``(n / r)^2``; its
    value, a slicing of the order, bounds the order's optimum from above, and the best order found is sliced once
    more with every cut allowed (:func:`refine`)."""
    if n < GRID_OPS:
        return None
    return max(SPARSE + 1, -(-n // GRID_CUTS))


def order_grid(graph: Graph, order: np.ndarray, step: int) -> np.ndarray:
    """The cuts a decode of ``order`` may make: in each run of ``step`` positions the one the fewest bytes cross (the
    tensors made before it and read after it), and both ends. A fixed grid cut GPT-3's layers inside their attention,
    where many tensors cross: random-T's best of 511 orders onto 16 stages was 9 % above the best of 3 full slicings."""
    n = int(order.size)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    last = pos.copy()
    np.maximum.at(last, graph.src, pos[graph.dst])
    sent = np.where(last > pos, graph.out_bytes, 0.0)
    diff = np.zeros(n + 2)
    np.add.at(diff, pos + 1, sent)
    np.add.at(diff, last + 1, -sent)
    live = np.cumsum(diff)[: n + 1]  # live[b]: bytes made before position b and read at or after it
    runs = (n - 1) // step
    grid = np.zeros(n + 1, dtype=bool)
    grid[[0, n]] = True
    if runs > 0:
        grid[1 + np.arange(runs) * step + live[1: 1 + runs * step].reshape(runs, step).argmin(axis=1)] = True
    return grid


class Decoder:
    """BrkgaSortAndSliceDecoder (Archer Alg. 2) that keeps the slicing of its best decode.

    Called as a :data:`Fitness`; a decode cut by ``deadline`` counts as ``inf``. The best keys' order and stage bounds
    are kept from the decode that found them, so that neither the generations' reports nor the final placement slice
    that order again: a decode of GPT-3's 20,111 ops onto 4 stages took 8 s at load 6, and the final one, run whatever
    the time, ended BRKGA 7.7 s past a 60 s limit. ``grid`` (:func:`cut_grid`): how far apart a decode's cuts are
    (:func:`order_grid`); :func:`refine` slices the best order again with every cut allowed."""

    def __init__(self, slicer: Slicer, deadline: float | None = None, grid: int | None = None):
        self.slicer, self.deadline, self.grid = slicer, deadline, grid
        self.value, self.keys = INF, None
        self.order: np.ndarray | None = None
        self.bounds: np.ndarray | None = None
        self.cut = False  # whether the last decode passed the deadline
        self._scored: tuple[float, float] | None = None  # (value, cost-model objective) of the best decode

    def __call__(self, keys: np.ndarray, cutoff: float = INF) -> float:
        order = self.slicer.order(keys)
        cuts = None if self.grid is None else order_grid(self.slicer.sliced, order, self.grid)
        value, bounds = self.slicer.solve(order, cutoff, boundaries=cuts, deadline=self.deadline)
        self.cut = math.isnan(value)
        if self.cut:
            return INF
        if value < self.value:
            self.value, self.keys, self.order, self.bounds = value, np.array(keys, dtype=float), order, bounds
        return value

    def objective(self, keys: np.ndarray) -> float:
        """The cost model's objective of the best decode's split (the decoder's value is the slicing's max load,
        whatever the objective), scored once per best decode; ``inf`` before any decode ended."""
        if self.order is None:
            return INF
        if self._scored is None or self._scored[0] != self.value:
            placement = self.slicer.placement(self.order, self.bounds)
            self._scored = (self.value, evaluate(placement, self.slicer.model).objective)
        return self._scored[1]


REFINE_SHARE = 0.25  # of a search's time, what it leaves the last slicing of its best order with every cut allowed


def search_until(start: float, deadline: float | None, grid: int | None) -> float | None:
    """When a search on ``grid`` stops to leave :data:`REFINE_SHARE` of its time to :func:`refine` (``deadline``
    itself without a grid, or without one)."""
    if grid is None or deadline is None:
        return deadline
    return deadline - REFINE_SHARE * max(0.0, deadline - start)


def refine(decode: Decoder, deadline: float | None) -> bool:
    """Slice the best order on a grid once more with every cut allowed, cut off at its grid slicing's value (a
    slicing of the same order): whether that slicing improved on it (a slicing stopped by ``deadline`` is not
    taken)."""
    if decode.grid is None or decode.order is None:
        return False
    value, bounds = decode.slicer.solve(decode.order, decode.value, deadline=deadline)
    if not value < decode.value:  # nan (stopped), inf (none below), or no better
        return False
    decode.value, decode.bounds, decode._scored = value, bounds, None
    return True


def _finish(slicer: Slicer, method: str, keys: np.ndarray, start: float, evaluations: int,
            deadline: float | None = None, best: Decoder | None = None, **info: Any) -> HeuristicResult:
    """The result of the best keys' order, marked stopped when ``deadline`` has passed. ``best``, a decoder that
    sliced some keys in full, gives the answer (its best keys, order and slicing: nothing is decoded again); else
    ``keys``' order is sliced until ``deadline``, and then its work-balanced slicing is returned."""
    if best is not None and best.order is not None:
        result = slicer.result(method, best.order, best.bounds, start, evaluations, dp_value=best.value,
                               keys=best.keys, **info)
        return stopped(result) if expired(deadline) else result
    order = slicer.order(keys)
    value, bounds = slicer.solve(order, deadline=deadline)
    if math.isnan(value):
        result = slicer.result(method, order, bounds, start, evaluations, keys=keys, **info)
        return stopped(result, stopped_in="the slicing DP (the work-balanced slicing is returned)")
    if value == INF:
        raise InfeasibleError(f"{method}: no order found slices onto {slicer.k} devices within their memory "
                              f"(graph {slicer.graph.name!r}); add devices or use the 'bottleneck' (overflow) model")
    result = slicer.result(method, order, bounds, start, evaluations, dp_value=value, keys=keys, **info)
    return stopped(result) if expired(deadline) else result


@heuristic("random", optimizes="max_load", options=manifest.Random)
def random_orders(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
                  evaluations: int = 1000, time_limit: float | None = None) -> HeuristicResult:
    """random-T (Archer App. C.1): best slicing over ``T = evaluations`` i.i.d. ``U(0,1)`` priority vectors
    (fewer when ``time_limit`` seconds pass first: the best so far, ``info["stopped"]``). From :data:`GRID_OPS` ops on
    the orders are sliced on :func:`cut_grid`'s positions and the best one in full (``info["grid"]``,
    ``info["refined"]``: whether that improved it), within :data:`REFINE_SHARE` of the time."""
    start = time.perf_counter()
    at = deadline_at("random", time_limit)
    T = _count("evaluations", evaluations)
    slicer = Slicer(graph, cluster, model)
    rng = np.random.default_rng(seed)
    grid = cut_grid(slicer.sliced.n)
    until = search_until(time.monotonic(), at, grid)
    decode, first = Decoder(slicer, until, grid), rng.random(graph.n)
    every, done = max(1, T // 100), 0
    for t in range(T):
        if t and expired(until):
            break
        done += 1
        before = decode.value
        decode(first if t == 0 else rng.random(graph.n), before)
        if decode.cut:  # the decode passed the time limit
            break
        improved = decode.value < before
        if improved or (t + 1) % every == 0 or t + 1 == T:  # each SliceGraph that improves, and each 1 %
            report("random", orders=t + 1, of=T, best=decode.value)
    refined = refine(decode, at)
    return _finish(slicer, "random", first, start, done, at, best=decode, grid=grid is not None, refined=refined)


@heuristic("brkga", optimizes="max_load", options=manifest.Brkga)
def brkga(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
          evaluations: int = 1000, population: int = 100, elite: float = 0.2, mutants: float = 0.15,
          rho: float = 0.7, initial: np.ndarray | None = None, time_limit: float | None = None) -> HeuristicResult:
    """BRKGA over node priorities with the sort-and-slice decoder (Archer Alg. 2, App. C.1).

    The initial population holds ``initial`` (rows of priorities; default: the priorities of
    the graph's topological order, so the result is never worse than :func:`slicegraph`)
    and uniform random keys. ``info['history']`` is the best value after each generation.
    ``time_limit`` (seconds): no decode starts after it but the first (the initial order's), and
    the result says ``info["stopped"]``. From :data:`GRID_OPS` ops on decodes cut on :func:`cut_grid`'s positions
    and the best order is sliced in full at the end, as :func:`random_orders` does.
    """
    start = time.perf_counter()
    deadline = deadline_at("brkga", time_limit)
    cfg = BrkgaConfig(evaluations, population, elite, mutants, rho)
    slicer = Slicer(graph, cluster, model)
    init = _initial(graph, initial)
    grid = cut_grid(slicer.sliced.n)
    until = search_until(time.monotonic(), deadline, grid)
    decode = Decoder(slicer, until, grid)
    state = brkga_search(decode, graph.n, cfg, np.random.default_rng(seed), init, until, objective=decode.objective)
    best = state.keys[int(np.argmin(state.values))]
    refined = refine(decode, deadline)
    return _finish(slicer, "brkga", best, start, state.evaluations, deadline, best=decode, history=state.history,
                   grid=grid is not None, refined=refined)


def _initial(graph: Graph, initial: np.ndarray | None) -> np.ndarray:
    if initial is None:
        return topo_keys(graph)[None, :]
    init = np.atleast_2d(np.asarray(initial, dtype=float))
    if init.shape[1] != graph.n or not np.all(np.isfinite(init)):
        raise SpecError(f"option initial: expected rows of {graph.n} finite priorities, got shape {init.shape}")
    return init


# ---------------------------------------------------------------------------- MLA
@njit(cache=True)
def _arrangement(keys, succ_ptr, succ_idx, indeg, src, dst, weight):
    """h(pi) = sum_e w_e (pi^-1(v) - pi^-1(u)) of the Kahn order of ``keys`` (forward edges only)."""
    order = priority_order(keys, succ_ptr, succ_idx, indeg)
    pos = np.empty(order.size, dtype=np.int64)
    for q in range(order.size):
        pos[order[q]] = q
    total = 0.0
    for e in range(src.size):
        total += weight[e] * (pos[dst[e]] - pos[src[e]])
    return total


def _mla(graph: Graph, cluster: Cluster, model: CostModel | None, seed: int | None, weighted: bool,
         cfg: BrkgaConfig, method: str, time_limit: float | None) -> HeuristicResult:
    start = time.perf_counter()
    at = deadline_at(method, time_limit)
    slicer = Slicer(graph, cluster, model)
    weight = graph.out_bytes[graph.src] if weighted else np.ones(graph.m)
    indeg = np.diff(graph.pred_ptr)

    def fitness(keys: np.ndarray, cutoff: float) -> float:
        return _arrangement(keys, graph.succ_ptr, graph.succ_idx, indeg, graph.src, graph.dst, weight)

    decode, first = Decoder(slicer, at), topo_keys(graph)
    began = time.monotonic()
    decode(first)  # the initial order's slicing: the answer to beat, and what one slicing costs here
    search_at = None if at is None else at - SLICING_RESERVE * (time.monotonic() - began)
    state = brkga_search(fitness, graph.n, cfg, np.random.default_rng(seed), first[None, :], search_at,
                         label=(method, "arrangement"))
    best = state.keys[int(np.argmin(state.values))]
    if decode.order is not None and not np.array_equal(slicer.order(best), decode.order):
        decode(best, decode.value)  # cut off at the initial order's value: only a better slicing is kept
    return _finish(slicer, method, best, start, state.evaluations, at, best=decode,
                   arrangement=float(state.values.min()), history=state.history)


@heuristic("mla", optimizes="max_load", options=manifest.Mla)
def mla(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
        evaluations: int = 1000, population: int = 100, elite: float = 0.2, mutants: float = 0.15,
        rho: float = 0.7, time_limit: float | None = None) -> HeuristicResult:
    """mla (Archer App. C.1): BRKGA on the unweighted linear-arrangement cost, then slice the best order; the answer
    is the better of that slicing and the topological order's. Under ``time_limit`` the search stops
    :data:`SLICING_RESERVE` times the topological order's slicing before it, so that the last slicing ends in time."""
    cfg = BrkgaConfig(evaluations, population, elite, mutants, rho)
    return _mla(graph, cluster, model, seed, False, cfg, "mla", time_limit)


@heuristic("mla-weighted", optimizes="max_load", options=manifest.Mla)
def mla_weighted(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
                 evaluations: int = 1000, population: int = 100, elite: float = 0.2, mutants: float = 0.15,
                 rho: float = 0.7, time_limit: float | None = None) -> HeuristicResult:
    """mla-weighted (Archer App. C.1): edge weights ``io(u, v)``, the producer's tensor size."""
    cfg = BrkgaConfig(evaluations, population, elite, mutants, rho)
    return _mla(graph, cluster, model, seed, True, cfg, "mla-weighted", time_limit)
