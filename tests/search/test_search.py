"""The search layer (placement_dsl/search/): one pin-and-re-solve helper, the searches above solve(), the
method names that reach them, and the old import paths kept for one release."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from placement_dsl import testing
from placement_dsl.constraints import Pin
from placement_dsl.heuristics.base import resolve as resolve_method
from placement_dsl.placement import Placement
from placement_dsl.search import pin
from placement_dsl.search.pin import pin_outside, resolve_free, units


def test_pin_outside_pins_every_unit_outside_the_free_set_where_the_incumbent_runs_it():
    problem, _ = testing.colocated_pinned()
    g, c = problem.graph, problem.cluster
    incumbent = testing.brute_force(problem)[1]
    reps = units(problem)
    free = reps[:1]
    pins = [t for t in pin_outside(problem, incumbent, free).constraints if isinstance(t, Pin)]
    added = pins[len([t for t in problem.constraints if isinstance(t, Pin)]):]
    assert [(p.op, p.device) for p in added] == [(g.names[r], c.names[incumbent.assign[r]]) for r in reps[1:]]
    assert len(pin_outside(problem, incumbent, reps).constraints) == len(problem.constraints)


def test_resolve_free_is_never_worse_than_the_incumbent_and_keeps_the_pins():
    problem, optimum = testing.contiguity_binds()
    start = Placement(problem.graph, problem.cluster, np.zeros(problem.graph.n, dtype=int))
    assert problem.is_valid(start)
    whole = resolve_free(problem, start, units(problem), "throughput", seconds=20)
    assert whole.objective == pytest.approx(optimum)
    none = resolve_free(problem, start, [], "throughput", seconds=20)
    assert list(none.placement.assign) == list(start.assign)


def test_every_search_re_solves_through_the_one_helper():
    """The neighbourhoods reach solve() only through search.pin (no copy of the pin-and-re-solve step); the former
    makespan LNS has no search of its own left (it forwards to the contracted LNS)."""
    mod = importlib.import_module("placement_dsl.search.neighbourhood")
    assert mod.resolve_free is pin.resolve_free and not hasattr(mod, "solve")
    lns = importlib.import_module("placement_dsl.search.lns")
    assert not any(hasattr(lns, name) for name in ("solve", "resolve_free", "build", "isolated"))


def test_schedule_lns_is_still_a_method_and_lives_in_the_search_layer():
    fn = resolve_method("schedule-lns")
    assert fn.__module__ == "placement_dsl.search.lns"


def test_schedule_lns_forwards_to_the_one_window_search_with_a_warning():
    from placement_dsl.cluster import Cluster, Device
    from placement_dsl.constraints import Congestion
    from placement_dsl.graph import Graph, Op
    from placement_dsl.heuristics import run
    from placement_dsl.objectives import Makespan
    from placement_dsl.problem import Problem

    ops = [Op(name=f"c{j}", work=1.0, out_bytes=1.0) for j in range(4)]
    ops += [Op(name=f"x{j}{i}", work=3.0 + i, out_bytes=1.0) for j in range(3) for i in range(3)]
    edges = [e for j in range(3) for i in range(3) for e in ((f"c{j}", f"x{j}{i}"), (f"x{j}{i}", f"c{j + 1}"))]
    problem = Problem(Graph(ops, edges), Cluster([Device(name=f"d{k}", invocations=False) for k in range(3)]),
                      Makespan(), [Congestion("port")])
    model = problem.cost_model()
    base = run("list", problem.graph, problem.cluster, model=model)
    with pytest.warns(DeprecationWarning, match="method 'schedule-lns' is deprecated; call method 'makespan-lns'"):
        lns = run("schedule-lns", problem.graph, problem.cluster, model=model, time_limit=6, window=4, step_limit=2)
    assert lns.method == "schedule-lns" and "coarse_seconds" in lns.info  # the contracted LNS's phases
    assert lns.objective <= base.objective + 1e-9
    assert lns.placement.schedule is not None and problem.is_valid(lns.placement)


@pytest.mark.parametrize("old, name, new", [
    ("placement_dsl.heuristics.lns", "makespan_problem", "placement_dsl.search.lns"),
    ("placement_dsl.heuristics.lns", "schedule_lns", "placement_dsl.search.lns"),
    ("placement_dsl.heuristics.neighbourhood", "ip_neighbourhoods", "placement_dsl.search.neighbourhood"),
    ("placement_dsl.formulations.chain", "target_level", "placement_dsl.search.chain"),
    ("placement_dsl.formulations.chain", "windowed_bound", "placement_dsl.search.chain"),
])
def test_old_import_paths_still_work_with_a_deprecation_warning(old, name, new):
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=f"moved to {new}"):
        found = getattr(module, name)
    assert found is getattr(importlib.import_module(new), name)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018


def test_nothing_below_solve_imports_solve_search_or_cpsat():
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("placement_dsl", cache_dir=None)
    low = ["placement_dsl.heuristics", "placement_dsl.formulations", "placement_dsl.compile", "placement_dsl.starts",
           "placement_dsl.blocks", "placement_dsl.bounds", "placement_dsl.sizing"]
    high = ["placement_dsl.solve", "placement_dsl.search", "placement_dsl.cpsat"]
    chains = {(a, b): graph.find_shortest_chains(importer=a, imported=b) for a in low for b in high}
    assert not {k: v for k, v in chains.items() if v}
    assert not graph.chain_exists(importer="placement_dsl.cpsat", imported="placement_dsl.solve")
