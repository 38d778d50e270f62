"""Neighbourhood search with Tarnawski's throughput IP around an incumbent split (max load, any contiguity).

:func:`ip_neighbourhoods` improves a valid placement step by step. Each step frees a set of
colocation units, pins every other unit where the incumbent runs it (:func:`~placement_dsl.search.pin.resolve_free`),
and solves Fig. 6's IP (``solve(..., "throughput")``) warm-started by the incumbent, so a step is
never worse; a better answer, re-checked by the cost model and ``problem.violations``, becomes the
incumbent and the neighbourhoods are rebuilt around it. Two kinds of neighbourhood, in turn:

* **boundary balls** — the units within ``h`` hops (edges between units) of a *boundary unit*, one
  with a neighbour on another device, taken from the busiest device's boundary outward, at most
  a cap of units; ``h`` = 1, 2, 3. A polished pipeline split is a few stage boundaries away from a
  better one (ResNet50's and InceptionV3's layer graphs). The cap starts at ``max_free / 2``, shrinks
  (x 0.6, at least 8) after a ball the IP could not settle in ``step_limit`` and grows (x 1.5, at most
  ``max_free``) after one it settled without a gain: training graphs' IPs are harder per free unit.
* **device sets** — every unit on the busiest device and on ``k - 1`` others (by load, highest
  first; ``k`` = 2, then 3): a re-packing of a few devices, where the max load is set by heavy
  units rather than by transfers (GNMT training's LSTM cells).

A neighbourhood tried without a gain is not tried again for that incumbent. When every listed one
has been tried and each was solved to optimality, the incumbent is a local optimum for all of them and
the search ends (``info["local_optimum"]``); when some timed out, random ones follow (a ball of the
cap's size around a random boundary unit, or the busiest device with two random others, drawn from
``seed``) until ``time_limit``. One neighbourhood holding every unit, solved to optimality, proves the
incumbent optimal up to the solver's gap: the result then carries that step's dual bound and
``exact_among``.

This is large-neighbourhood search (Shaw, CP 1998) with the IP as the repair, the fixings chosen
around the incumbent as in local branching (Fischetti and Lodi, Math. Programming 2003) but by
structure (boundaries, devices) rather than by a distance row in the model.
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import numpy as np

from ..errors import SpecError
from ..evaluate import device_costs
from ..heuristics.base import HeuristicResult
from ..heuristics.polish import unit_neighbours
from ..placement import Placement
from ..problem import Problem
from ..solvers.base import Status
from .pin import resolve_free

HOPS = (1, 2, 3)  # boundary-ball radii, in order
DEVICE_SETS = (2, 3)  # device-set sizes, in order
MIN_FREE, SHRINK, GROW = 8, 0.6, 1.5  # the ball cap's floor, and its factors after a timed-out / settled ball


class _Units:
    """The problem's colocation units: a representative op each, their adjacency, the devices of a placement."""

    def __init__(self, problem: Problem):
        g = problem.graph
        reps, gid = np.unique(g.group_id, return_inverse=True)
        self.rep = reps.astype(np.int64)  # group_id holds each group's representative op
        self.adj = unit_neighbours(g, gid.astype(np.int64))
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


def _listed(loads: np.ndarray) -> Iterator[tuple[str, tuple[int, ...]]]:
    """The neighbourhoods tried around an incumbent, in order: ``("ball", (h,))`` and ``("devices", set)`` in turn."""
    rank = [int(d) for d in np.argsort(-loads, kind="stable")]
    balls = [("ball", (h,)) for h in HOPS]
    sets = [("devices", (rank[0], *rest)) for k in DEVICE_SETS for rest in itertools.combinations(rank[1:], k - 1)]
    for item in itertools.chain.from_iterable(itertools.zip_longest(balls, sets)):
        if item is not None:
            yield item


def _free(units: _Units, dev: np.ndarray, loads: np.ndarray, kind: str, arg: tuple[int, ...],
          cap: int) -> frozenset[int]:
    """The units a neighbourhood frees: a ball around the boundary (busiest devices' boundary units first)
    of at most ``cap`` units, or every unit on a set of devices."""
    if kind == "ball":
        seeds = sorted(units.boundary(dev).tolist(), key=lambda u: (-loads[dev[u]], u))
        return units.ball(seeds, arg[0], cap) if seeds else frozenset()
    return frozenset(np.flatnonzero(np.isin(dev, arg)).tolist())


def _random(units: _Units, dev: np.ndarray, loads: np.ndarray, cap: int,
            rng: np.random.Generator) -> tuple[str, frozenset[int]]:
    """A ball of ``cap`` units around a random boundary unit, or the busiest device with two random others."""
    seeds = units.boundary(dev)
    D = loads.size
    if seeds.size and (D < 3 or rng.random() < 0.5):
        return "ball", units.ball([int(rng.choice(seeds))], units.n, cap)
    busiest = int(np.argmax(loads))
    rest = rng.choice([d for d in range(D) if d != busiest], size=min(2, D - 1), replace=False)
    return "devices", _free(units, dev, loads, "devices", (busiest, *rest.tolist()), cap)


def _step(problem: Problem, units: _Units, incumbent: Placement, free: frozenset[int], seconds: float,
          solver: str) -> tuple[Placement | None, bool, float | None]:
    """The throughput IP with every unit outside ``free`` pinned where the incumbent runs it
    (:func:`~placement_dsl.search.pin.resolve_free`): its answer, whether it was solved to optimality,
    and its dual bound."""
    res = resolve_free(problem, incumbent, (int(units.rep[u]) for u in free), "throughput", seconds=seconds,
                       solver=solver, budget=seconds)
    return res.placement, res.status is Status.OPTIMAL, res.bound


def ip_neighbourhoods(problem: Problem, start: Placement, *, time_limit: float = 20.0, step_limit: float = 5.0,
                      max_free: int = 64, seed: int | None = 0, solver: str = "highs") -> HeuristicResult:
    """Improve ``start`` by IP re-solves of neighbourhoods (see the module docstring) within ``time_limit`` s.

    ``step_limit`` seconds per re-solve (model build included), at most ``max_free`` free units per boundary
    ball. A step is not started unless it can end by ``time_limit`` (the most a step has run past its limit
    is kept). The answer is never worse than ``start``, which must be valid for ``problem``.

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
    steps, gains = 0, []
    floor = min(MIN_FREE, max_free)
    cap = max(floor, max_free // 2)
    settled, local = True, False  # whether every step around the incumbent was solved to optimality
    bound: float | None = None  # the dual bound of a step that freed every unit
    listed: Iterator[tuple[str, tuple[int, ...]]] | None = None
    seen: set[frozenset[int]] = set()
    over = 0.5  # seconds a step runs past its limit (the sub-problem's model and hand-off), the most seen
    while bound is None:
        seconds = min(step_limit, time_limit - (time.perf_counter() - t0) - over)
        if seconds < 0.5:
            break
        dev, loads = units.devices(incumbent), _loads(problem, incumbent)
        if listed is None:
            listed, seen = _listed(loads), set()
        kind, free = "", frozenset()
        for kind, arg in listed:
            free = _free(units, dev, loads, kind, arg, cap)
            if free and free not in seen:
                break
        else:
            if settled:  # every listed neighbourhood of the incumbent solved to optimality: a local optimum
                local = True
                break
            kind, free = _random(units, dev, loads, cap, rng)
        seen.add(free)
        t = time.perf_counter()
        found, optimal, dual = _step(problem, units, incumbent, free, seconds, solver)
        over = max(over, time.perf_counter() - t - seconds)
        steps += 1
        settled = settled and optimal
        value = problem.evaluate(found).objective if found is not None and problem.is_valid(found) else np.inf
        if value < best * (1 - 1e-9):
            incumbent = Placement(problem.graph, problem.cluster, found.assign, source="ip-neighbourhoods")
            best, listed, settled = value, None, True
            gains.append(kind)
        elif kind == "ball":  # smaller balls where the IP cannot settle one, larger where it settles them
            cap = min(max_free, int(cap * GROW)) if optimal else max(floor, int(cap * SHRINK))
        if optimal and dual is not None and len(free) == units.n:
            bound = min(dual, best)
    return HeuristicResult(method="ip-neighbourhoods", placement=incumbent, objective=best,
                           seconds=time.perf_counter() - t0, bound=bound,
                           exact_among=None if bound is None else "all placements", evaluations=steps,
                           info={"steps": steps, "improvements": len(gains), "gains": gains, "free_cap": cap,
                                 "whole": bound is not None, "local_optimum": local})
