"""Conformance checks every registered template and formulation must pass.

Like Pyomo's ``common_tests.check_*(self, "bigm")`` run against every transformation, these
functions take a formulation and a problem with a known optimum and check what the
formulation promises; the test suite runs them over the whole registry
(:data:`~placement_dsl.formulations.FORMULATIONS` × :data:`~placement_dsl.testing.INSTANCES`),
so a newly registered formulation or template is covered without a test of its own:

* :func:`check_template_rows` — for every block of the model, the values its template gives
  a feasible placement satisfy the block's own rows (the warm start is exact);
* :func:`check_formulation` — an exact formulation reaches the brute-force optimum; a
  restriction's optimum is that of the placements it represents (those whose values satisfy
  its rows) and never below the problem's; a relaxation's bound never exceeds it; and every
  component a template made says what it is (:func:`check_documented`).

The other registries are checked the same way, against :mod:`placement_dsl.brute` on tiny instances:

* :func:`check_heuristic` — a registered heuristic's placement is one of the graph on the cluster, the
  cost model reproduces its objective, and its ``bound``/``exact_among`` claims hold by brute force;
* :func:`check_level` — a registered certify level's bound never exceeds the optimum over the class of
  placements it names;
* :func:`check_format` — a format that is written as well as read gives back the workload it wrote.

Users who author a formulation, heuristic, level or format call them on their own instances.
"""
from __future__ import annotations

import functools
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyomo.environ as pyo

from . import brute
from .certify import certify
from .cluster import Cluster
from .compile import Compiled, compile
from .errors import SpecError
from .evaluate import evaluate
from .formulations import Formulation, Kind, get
from .graph import Graph, Op
from .heuristics import run
from .heuristics.base import DP_CLASS
from .io.workload import load_workload, save_workload
from .placement import Placement, PlacementClass
from .problem import Problem
from .starts import NONE
from .workload import Workload

TOL = 1e-7


def represented(compiled: Compiled, placement: Placement) -> bool:
    """The placement's values satisfy every row of the model (it lies in the formulation's class)."""
    try:
        values = compiled.varmap.values(placement)
    except SpecError:
        return False
    return compiled.varmap.residual(values)[0] <= TOL


def check_template_rows(compiled: Compiled, placement: Placement) -> list[str]:
    """Blocks whose template's values for ``placement`` violate the block's own rows (empty when all hold).

    ``placement`` must be feasible for the formulation (e.g. the brute-force optimum of an
    exact formulation's problem).
    """
    values = compiled.varmap.values(placement)
    bad = []
    for blk, template in compiled.varmap.built:
        worst, where = compiled.varmap.residual(values, blk)
        if worst > TOL:
            bad.append(f"{template!r} (block {blk.local_name!r}): {where!r} violated by {worst:.3g}")
    return bad


# components Pyomo makes itself: gdp's indicator variables, bigm's relaxed rows and the "exactly one" row
PYOMO_MADE = ("indicator_var", "binary_indicator_var", "transformedConstraints")


def check_documented(model: Any) -> list[str]:
    """Components of ``model`` (a Pyomo block) that a template made without a ``doc``: every set, variable,
    constraint, expression, objective, block, disjunct and disjunction, inside disjuncts too. Pyomo's own
    are left out: implicit ``*_index`` sets, :data:`PYOMO_MADE`, a disjunction's ``*_xor`` row and the
    transformations' ``_pyomo_*`` blocks."""
    from pyomo.gdp import Disjunct, Disjunction

    kinds = (pyo.Set, pyo.RangeSet, pyo.Var, pyo.Constraint, pyo.Expression, pyo.Objective, pyo.Block, Disjunct,
             Disjunction)
    return [comp.name for comp in model.component_objects(kinds, descend_into=(pyo.Block, Disjunct))
            if not (comp.doc or comp.local_name.endswith(("_index", "_xor")) or "_pyomo_" in comp.name
                    or comp.local_name in PYOMO_MADE)]


def check_formulation(formulation: str | Formulation, problem: Problem, optimum: float, placements: list[Placement],
                      solver: str = "highs", time_limit: float = 30.0, solve: bool = True) -> list[str]:
    """What ``formulation`` gets wrong on ``problem`` (empty when it conforms).

    ``placements`` are the problem's feasible placements (brute force) and ``optimum`` their
    best objective. ``solve=False`` skips the solver run (the rows and the class only).
    """
    form = get(formulation, problem)
    if form.kind is Kind.RELAXATION:
        return _check_relaxation(form, problem, optimum, solver, time_limit)
    compiled = compile(problem, form)
    inside = [p for p in placements if represented(compiled, p)]
    problems = [f"{form.name}: {name} has no doc" for name in check_documented(compiled.model)]
    if form.kind is Kind.EXACT:
        best = min(placements, key=lambda p: problem.evaluate(p).objective)
        if best not in inside:
            problems.append(f"{form.name}: the optimal placement {best.mapping()} violates the model")
        problems += check_template_rows(compiled, best) if best in inside else []
        target = optimum
    else:
        if not inside:  # the class is empty here: the solver must find nothing
            return _check_empty(form, problem, solver, time_limit)
        problems += check_template_rows(compiled, inside[0])
        target = min(problem.evaluate(p).objective for p in inside)
    return problems + (_check_optimum(form, problem, target, solver, time_limit) if solve else [])


def _check_optimum(form: Formulation, problem: Problem, target: float, solver: str, time_limit: float) -> list[str]:
    from .solve import solve

    result = solve(problem, form, solver=solver, time_limit=time_limit, gap=1e-9, warm_start=NONE)  # the model's own
    if result.objective is None or abs(result.objective - target) > 1e-6 * max(1.0, abs(target)):
        return [f"{form.name} with {solver}: objective {result.objective} != {target} over its class"]
    if result.bound is not None and result.bound > target * (1 + 1e-6) + 1e-9:
        return [f"{form.name} with {solver}: bound {result.bound} above the optimum {target}"]
    return []


def _check_empty(form: Formulation, problem: Problem, solver: str, time_limit: float) -> list[str]:
    from .solve import solve
    from .solvers.base import Status

    result = solve(problem, form, solver=solver, time_limit=time_limit, warm_start=NONE)  # a start would be an answer
    if result.status is not Status.INFEASIBLE:
        return [(f"{form.name} with {solver}: represents none of the problem's placements but ended "
                 f"{result.status.value} with objective {result.objective}")]
    return []


def _check_relaxation(form: Formulation, problem: Problem, optimum: float, solver: str,
                      time_limit: float) -> list[str]:
    from .certify import model_bound

    problems = [f"{form.name}: {name} has no doc" for name in check_documented(compile(problem, form).model)]
    bound, _ = model_bound(problem, form.name, solver, time_limit)
    if bound is not None and bound > optimum * (1 + 1e-6) + 1e-9:
        problems.append(f"{form.name} with {solver}: bound {bound} exceeds the optimum {optimum}")
    return problems


def templates_built(compiled: Compiled) -> set[type[Any]]:
    """The template classes a compiled model is made of."""
    return {type(template) for _, template in compiled.varmap.built}


# ---------------------------------------------------------------------------- heuristics, levels, formats
EXACT_CLASSES: dict[str, PlacementClass] = {  # what the heuristics name in HeuristicResult.exact_among
    "all placements": PlacementClass.ALL, "contiguous": PlacementClass.CONTIGUOUS,
    "dag-ordered": PlacementClass.DAG_ORDERED, DP_CLASS: PlacementClass.DP,
}
"""The ``exact_among`` names brute force checks, by the class they name. Other names (the pipeline DPs'
classes along one DFS order) are narrower than the contiguous class: their placements are checked to lie
in it, and their bound against their own objective only (a bound over a narrower class may exceed the
optimum over a wider one)."""

REL = 1e-9


@functools.lru_cache(maxsize=64)
def class_optimum(problem: Problem, cls: PlacementClass) -> float:
    """The brute-force optimum of ``problem`` over the placements of ``cls`` (``inf`` when none is valid).

    Kept for the last problems asked (equal problems have one optimum): checking every level or heuristic on one
    problem asks for the same brute force once per level or heuristic."""
    return brute.optimum(problem, cls)


def _above(value: float, reference: float) -> bool:
    return value > reference + REL * max(1.0, abs(reference))


def well_formed(placement: Any, problem: Problem) -> list[str]:
    """What is wrong with ``placement`` as a placement of the problem's graph on its cluster (empty when nothing)."""
    g, c = problem.graph, problem.cluster
    if not isinstance(placement, Placement):
        return [f"returned {type(placement).__name__}, not a Placement"]
    out = []
    if placement.graph != g or placement.cluster != c:
        out.append(f"placed {placement.graph!r} on {placement.cluster!r}, asked {g!r} on {c!r}")
    assign = np.asarray(placement.assign)
    if assign.shape != (g.n,) or not np.issubdtype(assign.dtype, np.integer):
        out.append(f"assign has shape {assign.shape} and dtype {assign.dtype}, expected ({g.n},) integers")
    elif assign.size and (assign.min() < 0 or assign.max() >= c.size):
        out.append(f"assign holds devices outside 0..{c.size - 1}: {sorted(set(assign.tolist()))}")
    return out


def check_heuristic(name: str, problem: Problem, time_limit: float = 2.0, seed: int = 0,
                    valid: bool = False) -> list[str]:
    """What the registered heuristic ``name`` gets wrong on ``problem`` under its cost model (empty when it conforms).

    The method runs by :func:`~placement_dsl.heuristics.base.run` (which re-checks its objective to 1e-6);
    then its placement must be one of the problem's graph on its cluster, :func:`~placement_dsl.evaluate.evaluate`
    must reproduce the reported objective to 1e-9 relative, and a claim is checked by brute force: a ``bound``
    never above the optimum over the class ``exact_among`` names (all placements without one), and an
    ``exact_among`` result valid in that class and no worse than its optimum (:data:`EXACT_CLASSES`).
    ``valid=True`` also asks for a placement the problem accepts (its cost-model checks and its terms).
    """
    model = problem.cost_model()
    try:
        res = run(name, problem.graph, problem.cluster, model=model, seed=seed, time_limit=time_limit)
    except AssertionError as err:  # run's own re-check of the objective
        return [f"{name}: {err}"]
    bad = [f"{name}: {m}" for m in well_formed(res.placement, problem)]
    if bad:
        return bad
    ev = evaluate(res.placement, model)
    if valid and problem.violations(res.placement):
        bad.append(f"{name}: its placement is not valid for {problem!r}: {problem.violations(res.placement)[0]}")
    if abs(ev.objective - res.objective) > REL * max(1.0, abs(ev.objective)):
        bad.append(f"{name}: reported objective {res.objective!r}, the cost model says {ev.objective!r}")
    if res.bound is None and res.exact_among is None:
        return bad
    cls = EXACT_CLASSES.get(res.exact_among or "all placements", PlacementClass.CONTIGUOUS)
    if res.bound is not None and _above(res.bound, ev.objective):
        bad.append(f"{name}: bound {res.bound} above its own placement's objective {ev.objective}")
    named = res.exact_among is None or res.exact_among in EXACT_CLASSES
    best = class_optimum(problem, cls) if named else math.inf
    where = f"over {cls} of {problem!r}"
    if res.bound is not None and _above(res.bound, best):
        bad.append(f"{name}: bound {res.bound} above the brute-force optimum {best} {where}")
    if res.exact_among is not None:
        broken = problem.violations(res.placement)
        if broken or problem.class_of(res.placement) not in cls:
            bad.append(f"{name}: claims exact among {res.exact_among} but its placement is not a valid one of "
                       f"{cls}: {broken[:2] or [str(problem.class_of(res.placement))]}")
        elif named and _above(ev.objective, best):
            bad.append(f"{name}: claims exact among {res.exact_among} at {ev.objective}, brute force finds {best} "
                       f"{where}")
    return bad


def check_level(name: str, problem: Problem, optimum: float | None = None, budget: float = 3.0) -> list[str]:
    """What the registered certify level ``name`` gets wrong on ``problem`` (empty when it conforms).

    The level runs alone through :func:`~placement_dsl.certify.certify`; each bound it proves must not
    exceed the brute-force optimum of the problem over the class of placements it names (``optimum``,
    the problem's known optimum, stands in where that class holds the problem's: a makespan's brute
    force schedules each placement by a heuristic, an upper bound).
    """
    try:
        cert = certify(problem, budget=budget, levels=(name,), stop_at_gap=False)
    except AssertionError as err:  # certify's own check: the bound is above a placement its heuristics found
        return [f"level {name}: {err}"]
    bad = []
    for row in cert.levels:
        if row.level != name or row.bound is None:
            continue
        best = class_optimum(problem, row.scope)
        if optimum is not None and problem.placement_class() in row.scope:
            best = min(best, optimum)
        if _above(row.bound, best):
            bad.append(f"level {name}: bound {row.bound} ({row.status.value}) above the optimum {best} over "
                       f"{row.scope} of {problem!r}")
    return bad


def check_format(name: str, workload: Workload, folder: str | Path) -> list[str]:
    """What the registered format ``name`` gets wrong writing ``workload`` and reading it back (empty when it
    round-trips). A format without a writer raises :class:`SpecError` (see :func:`writable`).

    The graph must come back the same to the cost model (:func:`same_graph`: names, work, bytes, direction,
    edges and colocation; a format may name groups its own way), the cluster equal; and a second round trip
    must give back exactly what the first read."""
    once = _round_trip(name, workload, Path(folder) / f"once-{name}")
    twice = _round_trip(name, once, Path(folder) / f"twice-{name}")
    bad = [f"format {name}: the graph read back differs: {why}" for why in same_graph(workload.graph, once.graph)]
    if once.cluster != workload.cluster:
        bad.append(f"format {name}: the cluster read back differs: {workload.cluster.to_dict()} became "
                   f"{once.cluster.to_dict()}")
    if twice.graph != once.graph or twice.cluster != once.cluster:
        bad.append(f"format {name}: a second round trip changes the workload: {same_graph(once.graph, twice.graph)}")
    return bad


def _round_trip(name: str, workload: Workload, path: Path) -> Workload:
    path = path.with_suffix(".json")
    save_workload(workload, path, format=name)
    return load_workload(path, format=name)


def same_graph(a: Graph, b: Graph) -> list[str]:
    """How ``b`` differs from ``a`` for the cost model (empty when not): op names in order, their work per kind,
    parameter plus activation bytes, output bytes and direction, the edges, and which ops are colocated."""
    if [o.name for o in a.ops] != [o.name for o in b.ops]:
        return [f"ops {[o.name for o in a.ops]} became {[o.name for o in b.ops]}"]
    out = []
    for x, y in zip(a.ops, b.ops):
        mine = (x.work, x.param_bytes + x.activation_bytes, x.out_bytes, x.backward)
        theirs = (y.work, y.param_bytes + y.activation_bytes, y.out_bytes, y.backward)
        if mine != theirs:
            out.append(f"op {x.name!r}: (work, bytes held, out bytes, backward) {mine} became {theirs}")
    if sorted(a.edges) != sorted(b.edges):
        out.append(f"edges {sorted(a.edges)} became {sorted(b.edges)}")
    if not np.array_equal(np.unique(a.group_id, return_inverse=True)[1], np.unique(b.group_id, return_inverse=True)[1]):
        out.append(f"colocation groups {a.group_id.tolist()} became {b.group_id.tolist()}")
    return out


def writable(name: str) -> str | None:
    """``None`` when :func:`~placement_dsl.io.workload.save_workload` writes the format ``name``, else why not."""
    tiny = Workload(Graph([Op(name="a", work=1)], [], name="probe"), Cluster.accelerators(1))
    with tempfile.TemporaryDirectory() as tmp:
        try:
            save_workload(tiny, Path(tmp) / "probe.json", format=name)
        except SpecError as err:
            return str(err)
    return None
