"""The command line's method options come from the methods' declarations: ``placement-dsl methods`` lists them,
``solve --help`` names them, and ``solve --option NAME=VALUE`` reaches the method, typed and checked."""
from __future__ import annotations

import json

from placement_dsl.heuristics import registry
from placement_dsl.testing import run_cli


def test_methods_lists_every_heuristic_with_its_declared_options(capsys):
    code, out, _ = run_cli(capsys, "methods", "--json")
    assert code == 0
    listed = {m["name"]: m for m in json.loads(out)["heuristics"]}
    assert list(listed) == registry.names()
    for name, entry in registry.load().items():
        assert [o["name"] for o in listed[name]["options"]] == [o.name for o in entry.describe()]
        assert listed[name]["optimizes"] == entry.optimizes
    brkga = {o["name"]: o for o in listed["brkga"]["options"]}
    assert brkga["population"] == {"name": "population", "type": "int", "default": 100, "bounds": ">= 2",
                                   "help": "chromosomes per generation", "settable": True}
    code, out, _ = run_cli(capsys, "methods")
    assert code == 0 and "population (int, default 100, >= 2): chromosomes per generation" in out


def test_solve_help_names_each_methods_options(capsys):
    code, out, _ = run_cli(capsys, "solve", "--help")
    assert code == 0 and "--option NAME=VALUE" in out
    assert "  brkga: evaluations, population, elite, mutants, rho" in out


def test_an_option_reaches_the_method(capsys):
    code, out, _ = run_cli(capsys, "solve", "zoo:transformer-small", "--method", "random", "--option",
                           "evaluations=5", "--json")
    assert code == 0 and json.loads(out)["evaluations"] == 5


def test_an_unknown_ill_typed_or_misplaced_option_is_refused_by_name(capsys):
    base = ("solve", "zoo:transformer-small", "--method")
    code, _, err = run_cli(capsys, *base, "random", "--option", "evaluation=5")
    assert code == 2 and "method random: unknown option 'evaluation'; it takes evaluations" in err
    code, _, err = run_cli(capsys, *base, "brkga", "--option", "population=1")
    assert code == 2 and "heuristic 'brkga': option population=1" in err
    code, _, err = run_cli(capsys, *base, "brkga", "--option", "elite=lots")
    assert code == 2 and "method brkga: option elite='lots': give a float" in err
    code, _, err = run_cli(capsys, *base, "ip", "--option", "x=1")
    assert code == 2 and "method ip takes no --option" in err
