"""The heuristics' registry: each method registers itself with what it optimizes; load() finds them all,
including methods defined in a package above the heuristics layer."""
from __future__ import annotations

import sys
import textwrap

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import registry, run
from placement_dsl.heuristics.base import HeuristicResult, methods_for, resolve

# every method the package has, with what it minimizes: a name or goal changed here changes the CLI and certify
KNOWN = {
    "dp": "max_load", "dpl": "max_load", "dp-servers": "max_load", "slicegraph": "max_load", "random": "max_load",
    "brkga": "max_load", "mla": "max_load", "mla-weighted": "max_load", "greedy": "memory_fill",
    "local-search": "cost_model", "polish": "max_load", "pipedream": "max_load", "pipedream-planner": "max_load",
    "pipeline": "max_load", "gpipe-split": "gpipe", "one-device": "cost_model", "latency-local-search": "latency",
    "latency-best": "latency", "list": "makespan", "one-device-best": "makespan", "schedule-lns": "makespan",
    "schedule-ls": "makespan", "cpop": "makespan", "latency-lns": "latency", "makespan-lns": "makespan",
}


def tiny() -> tuple[Graph, Cluster]:
    return Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2)], [("a", "b")]), Cluster.stages(2)


@pytest.fixture
def scratch(monkeypatch):
    """The registry as it is, restored after the test (entries and plugin packages)."""
    monkeypatch.setattr(registry, "HEURISTICS", dict(registry.load()))
    monkeypatch.setattr(registry, "PLUGIN_PACKAGES", list(registry.PLUGIN_PACKAGES))
    return registry


def test_every_method_is_registered_with_what_it_optimizes():
    table = registry.load()
    assert {name: h.optimizes for name, h in table.items() if name in KNOWN} == KNOWN
    assert set(KNOWN) <= set(table)
    assert resolve("dp").__name__ == "dp" and resolve("list").__name__ == "heft"
    assert "greedy" in methods_for("latency") and "dp" not in methods_for("latency")
    assert "dp" in methods_for("max_load") and "list" not in methods_for("max_load")


def test_a_decorated_function_is_a_method_run_finds(scratch):
    @registry.heuristic("first-device", optimizes="cost_model")
    def first_device(graph, cluster, *, model=None, seed=None, time_limit=None):
        """Everything on device 0."""
        from placement_dsl.evaluate import evaluate
        from placement_dsl.placement import Placement

        placement = Placement(graph, cluster, [0] * graph.n, source="first-device")
        return HeuristicResult("first-device", placement, evaluate(placement, model).objective, 0.0)

    g, c = tiny()
    assert run("first-device", g, c).objective == 4.0
    assert registry.get("first-device").doc == "Everything on device 0."
    assert "first-device" in methods_for("max_load")


def test_a_name_taken_by_another_function_is_refused(scratch):
    with pytest.raises(SpecError, match="'dp' is already registered by placement_dsl.heuristics.ideals.dp"):
        registry.heuristic("dp", optimizes="max_load")(lambda graph, cluster, **kw: None)
    with pytest.raises(SpecError, match="optimizes"):
        registry.heuristic("x", optimizes="")


def test_an_unknown_method_names_the_choices():
    g, c = tiny()
    with pytest.raises(SpecError, match=r"unknown heuristic 'nope'; choose from \[.*'brkga'"):
        run("nope", g, c)


def test_load_imports_methods_of_a_package_above_the_heuristics(scratch, tmp_path, monkeypatch):
    """A package that imports solve (above the heuristics) registers its methods; load() imports it by name."""
    pkg = tmp_path / "upstairs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "walk.py").write_text(textwrap.dedent('''
        from placement_dsl import solve  # noqa: F401 - above the heuristics
        from placement_dsl.heuristics.baselines import one_device
        from placement_dsl.heuristics.registry import heuristic

        @heuristic("upstairs-one", optimizes="cost_model")
        def upstairs_one(graph, cluster, *, model=None, seed=None, time_limit=None):
            return one_device(graph, cluster, model=model)
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_loaded", [False])
    scratch.PLUGIN_PACKAGES.append("upstairs")
    scratch.PLUGIN_PACKAGES.append("no_such_package_here")  # a package not installed is skipped
    try:
        assert "upstairs-one" in registry.names()
        g, c = tiny()
        assert run("upstairs-one", g, c).objective == 4.0
    finally:
        for name in ("upstairs", "upstairs.walk"):
            sys.modules.pop(name, None)


def test_the_old_tables_still_read_with_a_warning():
    from placement_dsl.heuristics import base

    with pytest.warns(DeprecationWarning, match="METHODS is deprecated"):
        methods = base.METHODS
    with pytest.warns(DeprecationWarning, match="OPTIMIZES is deprecated"):
        goals = base.OPTIMIZES
    assert methods["dp"] == "placement_dsl.heuristics.ideals:dp" and goals["cpop"] == "makespan"
    assert set(KNOWN) <= set(methods)


def test_the_declarations_say_what_the_modules_register():
    """:data:`registry.DECLARED` lists the package's methods without importing them: the same names, functions,
    goals as the decorators register once every module is imported (the order of registration follows whichever
    module an earlier caller imported first; the listing's order is the declarations')."""
    own = [h for h in registry.load().values() if h.module.startswith(registry.__package__ + ".")]
    assert sorted((h.name, h.where, h.optimizes, h.options.__name__) for h in own) == sorted(
        (name, f"{registry.__package__}.{target}", goal, options)
        for name, (target, goal, options) in registry.DECLARED.items())


def test_a_declared_method_is_listed_before_its_module_is_imported(monkeypatch):
    monkeypatch.setattr(registry, "HEURISTICS", {})
    monkeypatch.setattr(registry, "_loaded", [False])
    names = registry.names()
    assert names[:len(registry.DECLARED)] == list(registry.DECLARED) and "schedule-lns" in names
    assert isinstance(registry.HEURISTICS["dp"].target, str)  # declared by name, not yet imported
    assert registry.optimizes("dp") == "max_load" and isinstance(registry.HEURISTICS["dp"].target, str)
    assert registry.get("dp").fn.__name__ == "dp"  # its module imported on first use


def test_a_method_whose_module_registered_before_the_table_is_still_listed_in_the_declared_order(monkeypatch):
    """A module imported before the table was entered registers its method first; the listings (``names``,
    ``methods_for``, the docs' loop over them) keep the declared order whatever was imported first."""
    early = dict(registry.load())
    monkeypatch.setattr(registry, "HEURISTICS", {"polish": early["polish"], "slicegraph": early["slicegraph"]})
    monkeypatch.setattr(registry, "_loaded", [False])
    assert registry.names()[:len(registry.DECLARED)] == list(registry.DECLARED)
    assert registry.methods_for("max_load") == [n for n in registry.DECLARED if n in registry.methods_for("max_load")]


@pytest.mark.parametrize(("method", "objective"), [("schedule-lns", "max_load"), ("schedule-lns", "latency"),
                                                   ("latency-lns", "max_load"), ("makespan-lns", "max_load")])
def test_a_method_is_refused_for_an_objective_it_does_not_serve_before_its_module_loads(method, objective, monkeypatch):
    """The searches' modules load Pyomo and CP-SAT (10 s under load): their refusal comes from the registry first."""
    from placement_dsl.evaluate import CostModel
    from placement_dsl.heuristics import base

    def loaded(name):
        raise AssertionError(f"{name}'s module was imported")
    monkeypatch.setattr(base, "resolve", loaded)
    graph = Graph([Op(name="a", work=1.0), Op(name="b", work=1.0)], [("a", "b")])
    with pytest.raises(SpecError, match=f"^{method} searches .*; the cost model's objective is '{objective}'$"):
        run(method, graph, Cluster.stages(2), model=CostModel.named(objective))
    assert registry.get(method).serves is not None and objective not in registry.get(method).serves

