"""Neighbourhood search with Tarnawski's throughput IP around an incumbent split (max load, any contiguity).

:func:`ip_neighbourhoods` improves a valid placement step by step. Each step frees a set of
colocation units, pins every other unit where the incumbent runs it (:class:`~..constraints.Pin`),
and solves Fig. 6's IP (``solve(..., "throughput")``) warm-started by the incumbent, so a step is
never worse; a better answer, re-checked by the cost model and ``problem.violations``, becomes the
incumbent and the neighbourhoods are rebuilt around it. Two kinds of neighbourhood, in turn:

* **boundary balls** — the units within ``h`` hops (edges between units) of a *boundary unit*, one
  with a neighbour on another device, taken from the busiest device's boundary outward, at most
  ``max_free`` units. A polished pipeline split is a few stage boundaries away from a better one
  (ResNet50's and InceptionV3's layer graphs); ``h`` = 1, 2, 3.
* **device sets** — every unit on the busiest device and on ``k - 1`` others (by load, highest
  first; ``k`` = 2, then 3): a re-packing of a few devices, where the max load is set by heavy
  units rather than by transfers (GNMT training's LSTM cells).

A neighbourhood solved to optimality without a gain is exhausted for that incumbent. When every
listed one is exhausted or timed out, random ones follow (a ball of ``max_free`` units around a random
boundary unit, or the busiest device with two random others, drawn from ``seed``) until
``time_limit``. One neighbourhood holding every unit, solved to optimality, proves the incumbent
optimal up to the solver's gap: the result then carries that step's dual bound and ``exact_among``.

This is large-neighbourhood search (Shaw, CP 1998) with the IP as the repair, the fixings chosen
around the incumbent as in local branching (Fischetti and Lodi, Math. Programming 2003) but by
structure (boundaries, devices) rather than by a distance row in the model.
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import numpy as np

from ..constraints import Pin
from ..errors import SpecError
from ..evaluate import device_costs
from ..placement import Placement
from ..problem import Problem
from ..solvers.base import Status
from .base import HeuristicResult
from .polish import _unit_neighbours

HOPS = (1, 2, 3)  # boundary-ball radii, in order
DEVICE_SETS = (2, 3)  # device-set sizes, in order


class _Units:
    """The problem's colocation units: a representative op each, their adjacency, the devices of a placement."""

    def __init__(self, problem: Problem):
        g = problem.graph
        reps, gid = np.unique(g.group_id, return_inverse=True)
        self.rep = reps.astype(np.int64)  # group_id holds each group's representative op
        self.adj = _unit_neighbours(g, gid.astype(np.int64))
        self.n = self.rep.size

    def devices(self, placement: Placement) -> np.ndarray:
        return np.asarray(placement.assign)[self.rep]

    def boundary(self, dev: np.ndarray) -> np.ndarray:
        """Units with a neighbour on another device."""
        return np.array([u for u in range(self.n) if (dev[self.adj[u]] != dev[u]).any()], dtype=np.int64)

    def ball(self, seeds: list[int], hops: int, cap: int) -> frozenset[int]:
        """Units within ``hops`` of the seeds, seed by seed (each seed's ball whole if it fits), at most ``cap``."""
        free: set[int] = set()
        for s in seeds:
            order, frontier = [s], [s]  # breadth-first: nearest first
            for _ in range(hops):
                frontier = sorted({int(w) for u in frontier for w in self.adj[u]} - set(order))
                order += frontier
            ball = set(order)
            if len(free | ball) > cap:
                if free:
                    continue
                ball = set(order[:cap])
            free |= ball
            if len(free) >= cap:
                break
        return frozenset(free)


def _loads(problem: Problem, placement: Placement) -> np.ndarray:
    return np.array([r.load for r in device_costs(placement, problem.cost_model())])


def _listed(units: _Units, dev: np.ndarray, loads: np.ndarray, max_free: int) -> Iterator[frozenset[int]]:
    """The neighbourhoods around an incumbent in the order they are tried: balls and device sets in turn."""
    rank = np.argsort(-loads, kind="stable")
    busiest = int(rank[0])
    seeds = sorted(units.boundary(dev).tolist(), key=lambda u: (-loads[dev[u]], u))
    balls = [units.ball(seeds, h, max_free) for h in HOPS] if seeds else []
    others = [int(d) for d in rank[1:]]
    sets = [frozenset(u for u in range(units.n) if dev[u] in (busiest, *rest))
            for k in DEVICE_SETS for rest in itertools.combinations(others, k - 1)]
    seen: set[frozenset[int]] = set()
    for free in itertools.chain.from_iterable(itertools.zip_longest(balls, sets)):
        if free and free not in seen:
            seen.add(free)
            yield free


def _random(units: _Units, dev: np.ndarray, loads: np.ndarray, max_free: int,
            rng: np.random.Generator) -> frozenset[int]:
    """A ball of ``max_free`` units around a random boundary unit, or the busiest device with two random others."""
    seeds = units.boundary(dev)
    D = loads.size
    if seeds.size and (D < 3 or rng.random() < 0.5):
        return units.ball([int(rng.choice(seeds))], units.n, max_free)
    busiest = int(np.argmax(loads))
    rest = rng.choice([d for d in range(D) if d != busiest], size=min(2, D - 1), replace=False)
    return frozenset(u for u in range(units.n) if dev[u] == busiest or dev[u] in rest)


def _step(problem: Problem, units: _Units, incumbent: Placement, free: frozenset[int], seconds: float,
          solver: str) -> tuple[Placement | None, bool, float | None]:
    """The throughput IP with every unit outside ``free`` pinned where the incumbent runs it: its answer,
    whether it was solved to optimality, and its dual bound."""
    from ..solve import solve  # the solve layer sits above the heuristics' numpy code

    g, c = problem.graph, problem.cluster
    dev = units.devices(incumbent)
    pins = [Pin(g.names[units.rep[u]], c.names[dev[u]]) for u in range(units.n) if u not in free]
    sub = Problem(problem.source_graph, c, problem.objective, [*problem.constraints, *pins])
    res = solve(sub, "throughput", solver=solver, time_limit=seconds, warm_start=incumbent)
    return res.placement, res.status is Status.OPTIMAL, res.bound


def ip_neighbourhoods(problem: Problem, start: Placement, *, time_limit: float = 20.0, step_limit: float = 8.0,
                      max_free: int = 64, seed: int | None = 0, solver: str = "highs") -> HeuristicResult:
    """Improve ``start`` by IP re-solves of neighbourhoods (see the module docstring) within ``time_limit`` s.

    ``step_limit`` seconds per re-solve, at most ``max_free`` free units per boundary ball. The answer is
    never worse than ``start``, which must be valid for ``problem``.

    >>> from placement_dsl.cluster import Cluster
    >>> from placement_dsl.graph import Graph, Op
    >>> from placement_dsl.objectives import Throughput
    >>> g = Graph([Op(name=f"v{i}", work={"accelerator": w, "cpu": 10 * w}) for i, w in enumerate([8, 3, 3, 3])])
    >>> problem = Problem(g, Cluster.accelerators(2, cpus=1), Throughput(), [])
    >>> found = ip_neighbourhoods(problem, Placement(g, problem.cluster, [0, 0, 1, 1]), time_limit=10)
    >>> found.objective, found.bound  # v1..v3 on the second accelerator; every unit was free: proven
    (9.0, 9.0)
    """
    t0 = time.perf_counter()
    bad = problem.violations(start)
    if bad:
        raise SpecError(f"ip_neighbourhoods: the start is invalid for the problem ({'; '.join(bad[:3])})")
    if time_limit <= 0 or step_limit <= 0 or max_free < 1:
        raise SpecError(f"ip_neighbourhoods: time_limit ({time_limit}) and step_limit ({step_limit}) must be "
                        f"positive and max_free ({max_free}) at least 1")
    units = _Units(problem)
    rng = np.random.default_rng(seed)
    incumbent, best = start, problem.evaluate(start).objective
    steps = improvements = 0
    bound: float | None = None  # the dual bound of a step that freed every unit
    listed = None
    while bound is None:
        left = time_limit - (time.perf_counter() - t0)
        if left < 0.5:
            break
        dev, loads = units.devices(incumbent), _loads(problem, incumbent)
        if listed is None:
            listed = _listed(units, dev, loads, max_free)
        free = next(listed, None)
        if free is None:
            free = _random(units, dev, loads, max_free, rng)
        found, optimal, dual = _step(problem, units, incumbent, free, min(step_limit, left), solver)
        steps += 1
        value = problem.evaluate(found).objective if found is not None and problem.is_valid(found) else np.inf
        if value < best * (1 - 1e-9):
            incumbent = Placement(problem.graph, problem.cluster, found.assign, source="ip-neighbourhoods")
            best, listed = value, None
            improvements += 1
        if optimal and dual is not None and len(free) == units.n:
            bound = min(dual, best)
    return HeuristicResult(method="ip-neighbourhoods", placement=incumbent, objective=best,
                           seconds=time.perf_counter() - t0, bound=bound,
                           exact_among=None if bound is None else "all placements", evaluations=steps,
                           info={"steps": steps, "improvements": improvements, "whole": bound is not None})
