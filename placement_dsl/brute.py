"""Brute force over every placement of a small problem: the reference every formulation, bound and
heuristic is tested against.

:func:`brute_force` enumerates all placements (colocation groups move together, ops only on
allowed devices, pins respected, replica sets under ``Replicate``) and scores them with the
cost model and the problem's own checks; :func:`binding` tells whether a constraint changes
the optimum (brute force with and without it).
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any

import numpy as np

from .bounds.max_load import replicas
from .constraints import AllowedKinds, Colocate, Congestion, Contiguous, Memory, Overflow, Pin, Subgraphs, Term
from .errors import InfeasibleError, SpecError
from .evaluate import Objective, evaluate
from .objectives import Bottleneck, Latency, Makespan, Throughput
from .placement import Placement, PlacementClass
from .problem import Problem
from .schedule import ListScheduler, check_schedule

MAX_BRUTE_FORCE = 20_000
_ORDERLESS_OBJECTIVES = (Throughput, Bottleneck, Latency, Makespan)
"""Objectives whose cost model reads no device order: a max over the devices' and links' loads, or one schedule's last
finish (list scheduling breaks ties by op, never by device)."""
_ORDERLESS_TERMS = (Memory, Overflow, Contiguous, Colocate, AllowedKinds, Subgraphs, Congestion, Pin)
"""Constraint terms that read devices only through their attributes (pins by name: :func:`interchangeable` keeps
the pinned devices apart). Any other term (``DagOrder``'s numbering, ``Replicate``'s pools, a user's term) turns
the reduction off."""


def interchangeable(problem: Problem) -> list[list[int]]:
    """Classes of devices that swapping changes nothing the problem reads: equal in every attribute but the name
    (kind, memory, speed, bandwidth, host, server, execution), the same ops' times, swapped links and routes that are
    links and routes of the cluster (same bandwidth and latency), and named by no pin. Every permutation within a
    class maps each placement to one of the same objective and validity, so brute force scores one placement of each
    orbit (:func:`placements` with ``up_to_swaps``). Singletons are left out; none at all when the objective or a
    term may read the devices' order or identity (see :data:`_ORDERLESS_OBJECTIVES`, :data:`_ORDERLESS_TERMS`).

    >>> from placement_dsl.testing import chain
    >>> from placement_dsl.objectives import Latency
    >>> from placement_dsl.cluster import Cluster
    >>> interchangeable(Problem(chain()[0].graph, Cluster.accelerators(3, cpus=1), Latency()))
    [[0, 1, 2]]
    """
    model = problem.cost_model()
    if type(problem.objective) not in _ORDERLESS_OBJECTIVES or model.chained_stages or model.training_memory \
            is not None or model.virtual is not None or model.objective not in (Objective.MAX_LOAD, Objective.LATENCY,
                                                                                  Objective.MAKESPAN) \
            or any(type(t) not in _ORDERLESS_TERMS for t in problem.constraints):
        return []
    c, g = problem.cluster, problem.graph
    named = set(problem.pins.values()) | set(g.pinned.values())
    times = c.times(g)
    link_of = {(lk.src, lk.dst): k for k, lk in enumerate(c.links)}
    routes = c.route_links

    def swappable(d: int, e: int) -> bool:
        a, b = c.devices[d], c.devices[e]
        if a.model_dump(exclude={"name"}) != b.model_dump(exclude={"name"}) or {a.name, b.name} & named \
                or not np.array_equal(times[:, d], times[:, e]):
            return False
        swap = {d: e, e: d}
        name = {a.name: b.name, b.name: a.name}
        image = []
        for lk in c.links:
            k = link_of.get((name.get(lk.src, lk.src), name.get(lk.dst, lk.dst)))
            if k is None or (c.links[k].bandwidth, c.links[k].latency) != (lk.bandwidth, lk.latency):
                return False
            image.append(k)
        return all(routes[swap.get(x, x)][swap.get(y, y)] == (None if hops is None else tuple(image[k] for k in hops))
                   for x, row in enumerate(routes) for y, hops in enumerate(row))

    classes: list[list[int]] = []
    for d in range(c.size):  # swaps compose: a device joins the first class one of whose members it swaps with
        home = next((cl for cl in classes if swappable(cl[0], d)), None)
        if home is None:
            classes.append([d])
        else:
            home.append(d)
    return [cl for cl in classes if len(cl) > 1]


def _first_of_orbit(combo: tuple[int, ...], classes: list[list[int]]) -> bool:
    """Whether ``combo`` (a device per group) uses each class's devices in class order as they first appear: the
    least combination, in enumeration order, of its orbit under the swaps within the classes."""
    for cl in classes:
        seen = list(dict.fromkeys(d for d in combo if d in cl))
        if seen != cl[:len(seen)]:
            return False
    return True


def placements(problem: Problem, up_to_swaps: bool = False):
    """Every placement brute force considers: colocation groups together, allowed kinds, pins; with ``up_to_swaps``
    only the first of each orbit under swaps of :func:`interchangeable` devices (the same objectives and validity,
    the same first best placement).

    Raises :class:`SpecError` past :data:`MAX_BRUTE_FORCE` placements (counted before the reduction).
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
    classes = interchangeable(problem) if up_to_swaps else []
    where = np.searchsorted(reps, g.group_id)
    for combo in itertools.product(*choices):
        if not classes or _first_of_orbit(combo, classes):
            yield Placement(g, c, np.asarray(combo, dtype=np.int64)[where], source="brute-force")


def _replicated(problem: Problem, candidates: Any) -> Any:
    """Each placement, and with a ``Replicate`` term every choice of replica counts for its stages
    (replicas on the free devices of the stage's kind, in pipeline order: identical devices give
    every choice of devices the same cost)."""
    limit = replicas(problem)
    for placement in candidates:
        yield placement
        if limit == 1:
            continue
        c = placement.cluster
        used = [int(d) for d in np.unique(placement.assign) if not c.host[d]]
        for counts in itertools.product(range(1, limit + 1), repeat=len(used)):
            if max(counts, default=1) == 1:
                continue
            free = [d for d in range(c.size) if d not in set(placement.assign.tolist())]
            sets: dict[str, list[str]] = {}
            for d, r in zip(used, counts):
                pool = [e for e in free if c.devices[e].kind == c.devices[d].kind][:r - 1]
                if len(pool) < r - 1:
                    break
                free = [e for e in free if e not in pool]
                sets[c.names[d]] = [c.names[d], *(c.names[e] for e in pool)]
            else:
                yield placement.with_replicas(sets)


def brute_force(problem: Problem, among: PlacementClass = PlacementClass.ALL, up_to_swaps: bool = True
                ) -> tuple[float, Placement]:
    """``(best objective, the first best placement)`` over every valid placement (small problems only) of the class
    ``among`` (:meth:`Problem.class_of <placement_dsl.problem.Problem.class_of>`: the same test the solve
    applies to a start, so the DP's class holds its splits whatever the devices' numbering). ``up_to_swaps`` scores
    one placement per orbit of :func:`interchangeable` devices: the same answer, in a fraction of the time.

    Raises :class:`InfeasibleError` when no placement is valid.
    """
    model = problem.cost_model()
    best: tuple[float, Placement] | None = None
    for placement in _replicated(problem, placements(problem, up_to_swaps)):
        ev = evaluate(placement, model)
        if not ev.valid or (best is not None and ev.objective >= best[0]):
            continue
        if any(term.check(placement) for term in problem.constraints):
            continue
        if among is not PlacementClass.ALL and problem.class_of(placement) not in among:
            continue
        best = (ev.objective, placement)
    if best is None:
        raise InfeasibleError(f"brute_force: no valid placement of {problem.graph!r} on {problem.cluster!r} "
                              f"among {among} for {problem!r}")
    return best


def optimum(problem: Problem, among: PlacementClass = PlacementClass.ALL) -> float:
    """The brute-force optimum of ``problem`` over the class ``among``; ``inf`` when no placement is valid."""
    try:
        return brute_force(problem, among)[0]
    except InfeasibleError:
        return math.inf


def forward_ordered_optimum(problem: Problem) -> float:
    """Brute force over the DP's class of a (training) graph: placements whose forward edges never go
    back in pipeline order, so every device's forward part is ``I \\ J`` of two ideals; ``inf`` when
    none is valid. The problem's cost model judges validity (colocation, memory per schedule, ...)."""
    g, model = problem.graph, problem.cost_model()
    fw = ~g.backward[g.src] & ~g.backward[g.dst]
    best = math.inf
    for p in placements(problem):
        if (p.assign[g.src[fw]] <= p.assign[g.dst[fw]]).all():
            ev = evaluate(p, model)
            if ev.valid:
                best = min(best, ev.objective)
    return best


def without(problem: Problem, term: type[Term]) -> Problem:
    """``problem`` with its constraints of class ``term`` dropped (same graph, cluster and objective)."""
    if not problem.has(term):
        raise SpecError(f"without: {problem!r} has no {term.__name__} constraint")
    kept = [t for t in problem.constraints if not isinstance(t, term)]
    return Problem(problem.source_graph, problem.cluster, problem.objective, kept)


def binding(problem: Problem, term: type[Term]) -> tuple[float, float]:
    """``(optimum with, optimum without)`` the constraints of class ``term``, both by brute force.

    ``inf`` stands for infeasible. Dropping a constraint never raises the optimum, so the
    constraint *binds* exactly when the first value is larger (see :func:`binds`). A term
    that only adds cost-model checks (contiguity, DAG order, memory) is judged in one pass
    over the placements; one that changes the graph, the pins or the cost (colocation,
    allowed kinds, pins, overflow) by two brute-force solves.

    >>> from placement_dsl.constraints import DagOrder
    >>> from placement_dsl.testing import fig2
    >>> binding(fig2()[0], DagOrder)  # the cyclic split of Archer et al. Fig. 2 costs 5
    (6.0, 5.0)
    """
    other = without(problem, term)
    model, other_model = problem.cost_model(), other.cost_model()
    same_cost = dataclasses.replace(model, require=frozenset()) == dataclasses.replace(other_model, require=frozenset())
    if other.graph != problem.graph or other.pins != problem.pins or not same_cost:
        return optimum(problem), optimum(other)
    best, best_other = math.inf, math.inf  # best >= best_other throughout
    for placement in placements(other):
        ev = evaluate(placement, other_model)
        if ev.objective >= best:
            continue
        failed = {v.check for v in ev.violations}
        if any(t.check(placement) for t in other.constraints):
            continue
        if not failed & other_model.require and ev.objective < best_other:
            best_other = ev.objective
        if not failed & model.require and not any(t.check(placement) for t in problem.constraints):
            best = ev.objective
    return best, best_other


def binds(problem: Problem, term: type[Term]) -> bool:
    """Whether the constraints of class ``term`` change the optimum of ``problem`` (brute force)."""
    with_it, without_it = binding(problem, term)
    return not (with_it == without_it or math.isclose(with_it, without_it, rel_tol=1e-9, abs_tol=1e-9))


def record_binding(problem: Problem) -> dict[str, bool]:
    """Inside a hypothesis test: whether each constraint class of ``problem`` binds, as events.

    Emits ``hypothesis.event("<Term> binds")`` or ``"<Term> slack"`` per constraint class
    (``pytest --hypothesis-show-statistics`` prints the rates) and targets the number of
    binding classes, so the search drifts toward draws where the constraints matter.
    """
    from hypothesis import event, target

    out: dict[str, bool] = {}
    for term in sorted({type(t) for t in problem.constraints}, key=lambda t: t.__name__):
        out[term.__name__] = binds(problem, term)
        event(f"{term.__name__} {'binds' if out[term.__name__] else 'slack'}")
    target(float(sum(out.values())), label="binding constraint classes")
    return out


def scheduled_optimum(problem: Problem, valid_only: bool = True) -> float:
    """The least makespan the schedule referee accepts over every placement (the valid ones with ``valid_only``),
    each list-scheduled in every topological order of a tiny graph: the single-sample family's reference where the
    order, not only the placement, decides (congestion on ports, channels and links)."""
    g, c = problem.graph, problem.cluster
    congestion = problem.cost_model().congestion
    orders = [o for o in itertools.permutations(range(g.n))
              if all(o.index(u) < o.index(v) for u, v in zip(g.src.tolist(), g.dst.tolist()))]
    best = math.inf
    for p in placements(problem):
        if valid_only and not problem.is_valid(p):
            continue
        for order in orders:
            ls = ListScheduler(g, c, congestion)
            for v in order:
                ls.place(v, int(p.assign[v]))
            makespan, bad = check_schedule(p, ls.schedule(), congestion)
            if bad:
                raise AssertionError(f"the list schedule of {p.mapping()} in order {order} breaks {bad}")
            best = min(best, makespan)
    return best
