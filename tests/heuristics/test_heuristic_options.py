"""Every heuristic declares its own options (heuristics/manifest.py): the declarations match the functions, round-trip,
and what a caller passes is checked against them before the method runs."""
from __future__ import annotations

import inspect

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import registry, run
from placement_dsl.options import Options, describe, option, parse, validate

COMMON = {"graph", "cluster", "model", "seed", "time_limit"}


def _chain(n: int = 6) -> Graph:
    ops = [Op(name=f"v{i}", work={"accelerator": 1.0 + i % 3, "cpu": 10.0}) for i in range(n)]
    return Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])


def _keywords(fn) -> tuple[dict[str, object], bool]:
    params = inspect.signature(fn).parameters.values()
    named = {p.name: p.default for p in params if p.name not in COMMON and p.kind in (
        inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)}
    return named, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


@pytest.mark.parametrize("name", sorted(registry.load()))
def test_every_method_declares_its_keywords_with_the_functions_defaults(name):
    entry = registry.get(name)
    assert entry.options is not None, f"{name} declares no options (heuristics/manifest.py)"
    fields = {info.name: info.default for info in entry.describe()}
    named, rest = _keywords(entry.fn)
    assert named.items() <= fields.items(), f"{name}: declared {fields}, function takes {named}"
    if not rest:  # a function that passes **options on may declare the options it passes
        assert set(fields) == set(named)
    assert all(info.help for info in entry.describe())


@pytest.mark.parametrize("name", sorted(registry.load()))
def test_every_methods_declared_options_round_trip(name):
    entry = registry.get(name)
    defaults = {info.name: info.default for info in entry.describe()}
    assert entry.check(defaults) == defaults
    for info in entry.describe():
        if info.settable and info.default is not None:
            assert parse(name, entry.options, f"{info.name}={info.default}") == (info.name, info.default)


def test_an_unknown_option_is_refused_by_name():
    with pytest.raises(SpecError, match=r"heuristic 'dp': unknown option 'max_ideal'; it takes .*max_ideals"):
        run("dp", _chain(), Cluster.stages(2), max_ideal=10)
    with pytest.raises(SpecError, match=r"heuristic 'greedy': unknown option 'evaluations'"):
        run("greedy", _chain(), Cluster.stages(2), evaluations=10)


def test_an_invalid_option_is_refused_with_its_value():
    with pytest.raises(SpecError, match=r"heuristic 'brkga': option population=1: .*greater than or equal to 2"):
        run("brkga", _chain(), Cluster.stages(2), population=1)
    with pytest.raises(SpecError, match=r"heuristic 'random': option evaluations='many'"):
        run("random", _chain(), Cluster.stages(2), evaluations="many")


def test_a_method_receives_its_option():
    res = run("random", _chain(), Cluster.stages(2), evaluations=7)
    assert res.evaluations == 7
    with pytest.raises(SpecError, match="declined|ideals"):  # max_ideals reaches the DP, which declines the lattice
        run("dp", _chain(8), Cluster.stages(2), max_ideals=1)


def test_a_plugin_method_gets_its_declared_options(monkeypatch):
    class Depth(Options):
        depth: int = option(3, "how deep", ge=1)

    seen = {}

    def deep(graph, cluster, *, model=None, seed=None, time_limit=None, depth=3):
        seen["depth"] = depth
        return run("greedy", graph, cluster, model=model)

    monkeypatch.setattr(registry, "HEURISTICS", dict(registry.load()))
    registry.heuristic("deep", optimizes="max_load", options=Depth)(deep)
    run("deep", _chain(), Cluster.stages(2), depth=5)
    assert seen == {"depth": 5}
    with pytest.raises(SpecError, match=r"'deep': option depth=0"):
        run("deep", _chain(), Cluster.stages(2), depth=0)


def test_option_parsing_reads_the_declared_type():
    class Knobs(Options):
        n: int = option(1, "n", ge=0)
        x: float | None = option(None, "x")
        on: bool = option(False, "on")
        thing: object = option(None, "a python object")

    assert parse("m", Knobs, "n=4") == ("n", 4)
    assert parse("m", Knobs, "x=none") == ("x", None)
    assert parse("m", Knobs, "on=true") == ("on", True)
    with pytest.raises(SpecError, match=r"m: option n='four': give an int"):
        parse("m", Knobs, "n=four")
    with pytest.raises(SpecError, match=r"m: option 'thing' takes"):
        parse("m", Knobs, "thing=1")
    with pytest.raises(SpecError, match=r"m: unknown option 'nn'"):
        parse("m", Knobs, "nn=1")
    with pytest.raises(SpecError, match=r"give NAME=VALUE"):
        parse("m", Knobs, "n")
    assert validate("m", None, {}) == {}
    with pytest.raises(SpecError, match="m takes no options"):
        validate("m", None, {"n": 1})
    assert [i.name for i in describe(Knobs)] == ["n", "x", "on", "thing"]
    assert describe(Knobs)[0].line() == "n (int, default 1, >= 0): n"
