"""Names moved to another module stay importable from their old module for one release, with a DeprecationWarning
that names the new place (placement_dsl.deprecated)."""
from __future__ import annotations

import importlib
import warnings

import pytest

MOVED = [
    ("placement_dsl.io.report", "device_table", "placement_dsl.report"),
    ("placement_dsl.io.report", "stage_ranges", "placement_dsl.report"),
    ("placement_dsl.io.report", "human_bytes", "placement_dsl.report"),
    ("placement_dsl.cli.problems", "problem_for_method", "placement_dsl.presets"),
    ("placement_dsl.cli.problems", "dag_problem", "placement_dsl.presets"),
    ("placement_dsl.cli.problems", "STRUCTURE", "placement_dsl.presets"),
    ("placement_dsl.cli.export", "boundaries_arg", "placement_dsl.cli.workloads"),
    ("placement_dsl.cli.export", "with_boundaries", "placement_dsl.cli.workloads"),
    ("placement_dsl.heuristics.base", "fallback", "placement_dsl.heuristics.fallback"),
    ("placement_dsl.heuristics.baselines", "level_path", "placement_dsl.heuristics.level_path"),
    ("placement_dsl.heuristics.baselines", "pipedream_path", "placement_dsl.heuristics.level_path"),
    ("placement_dsl.heuristics.baselines", "local_search", "placement_dsl.heuristics.local_search"),
    ("placement_dsl.heuristics.pipeline_dp", "pipeline", "placement_dsl.heuristics.pipeline"),
    ("placement_dsl.heuristics.ideals", "MAX_STATES", "placement_dsl.heuristics.ideal_lattice"),
    ("placement_dsl.heuristics.ideals", "IdealLattice", "placement_dsl.heuristics.ideal_lattice"),
    ("placement_dsl.heuristics.lns", "schedule_lns", "placement_dsl.search.lns"),  # modules moved whole
    ("placement_dsl.heuristics.neighbourhood", "ip_neighbourhoods", "placement_dsl.search.neighbourhood"),
    ("placement_dsl.formulations.chain", "target_level", "placement_dsl.search.chain"),
]


@pytest.mark.parametrize("old, name, new", MOVED)
def test_a_moved_name_warns_and_is_the_new_object(old, name, new):
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} moved to {new}\.{name}"):
        found = getattr(module, name)
    assert found is getattr(importlib.import_module(new), name)


def test_from_import_of_a_moved_name_works():
    with pytest.warns(DeprecationWarning):
        from placement_dsl.heuristics.pipeline_dp import pipeline
    assert pipeline.__module__ == "placement_dsl.heuristics.pipeline"


@pytest.mark.parametrize("old", ["placement_dsl.io.report", "placement_dsl.heuristics.lns"])
def test_an_unknown_name_is_still_an_attribute_error(old):
    module = importlib.import_module(old)  # names listed, or a module moved whole: no warning for a name never had
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no attribute 'nothing'"):
            module.nothing  # noqa: B018


def test_names_still_at_home_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from placement_dsl.heuristics.baselines import greedy, one_device  # noqa: F401
        from placement_dsl.heuristics.ideals import dp, dpl, ideal_lattice  # noqa: F401
        from placement_dsl.io.workload import Workload, graph_to_dict  # noqa: F401


def test_a_module_moved_whole_forwards_every_name_it_has():
    import json

    from placement_dsl.deprecated import moved

    getattr_ = moved("old", "json")
    with pytest.warns(DeprecationWarning, match=r"old\.dumps moved to json\.dumps; import it from there"):
        assert getattr_("dumps") is json.dumps
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        getattr_("nothing")
