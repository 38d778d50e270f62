"""A certificate over a restricted class (contiguous placements: Tarnawski's invocations of whole subgraphs; DAG order;
``Subgraphs(q)``) names its class and says what the run knows beyond it: the best valid placement outside the class
when it beats the class's best, and the best bound over every placement. On 12 ops beside a CPU the contiguous
certificate read "best 212.802 ... gap 0%" while list scheduling's valid, non-contiguous placement had 99.049 and
the run's own segment-path level had proved 99.049 over every placement."""
from __future__ import annotations

import json

import pytest

from placement_dsl.certify import certify
from placement_dsl.cli import main
from placement_dsl.constraints import Contiguous, Memory, Subgraphs
from placement_dsl.evaluate import evaluate
from placement_dsl.io import Workload, load_workload, save_placement, save_workload
from placement_dsl.objectives import Latency
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.testing import invocation_workload, valid_objectives

TOL = 1e-9
SEEDS = (1, 2, 3)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_contiguous_latency_certificate_reports_the_better_placement_outside_its_class(seed):
    g, c = invocation_workload(seed)
    problem = Problem(g, c, Latency(), [Memory(), Contiguous()])
    family = problem.unrestricted()
    cert = certify(problem, budget=20)
    beyond = cert.family
    assert beyond is not None and beyond.label == "all placements"
    assert beyond.outside and beyond.objective < cert.objective  # memory binds: contiguity costs latency here
    ev = evaluate(beyond.placement, family.cost_model())
    assert ev.valid and ev.objective == pytest.approx(beyond.objective)
    assert not problem.is_valid(beyond.placement) and family.is_valid(beyond.placement)
    assert beyond.bound <= beyond.objective * (1 + TOL)
    assert cert.bound <= cert.objective * (1 + TOL)
    for value in valid_objectives(problem, ("greedy", "latency-best")):  # the class's bound under its valid answers
        assert cert.bound <= value * (1 + TOL)
    for value in valid_objectives(family, ("list", "latency-best", "greedy")):  # the family's under every valid one
        assert beyond.bound <= value * (1 + TOL)
    lines = cert.table().splitlines()
    assert lines[-2].startswith("best ") and "over contiguous placements only;" in lines[-2]
    assert lines[-1].startswith(f"outside contiguous placements: {beyond.objective:.6g} by {beyond.found_by}, valid; "
                                f"over all placements: bound {beyond.bound:.6g} by {beyond.proved_by}")
    classes = json.loads(json.dumps(cert.to_dict()))["classes"]
    assert set(classes) == {"contiguous placements", "all placements"}
    assert classes["all placements"]["outside"] and classes["all placements"]["objective"] == beyond.objective
    assert classes["contiguous placements"]["objective"] == cert.objective


def test_a_subgraph_limit_is_named_and_its_models_bound_only_its_class():
    """``Subgraphs(q)``'s class reads 'all placements' as a flag; its latency IP and LP bound only the placements with at
    most q subgraphs per accelerator, so they name that class and are not the family's bound."""
    g, c = invocation_workload(2)
    problem = Problem(g, c, Latency(), [Memory(), Subgraphs(1)])
    cert = certify(problem, budget=20, gap=0.0)
    assert cert.label == "placements with at most 1 contiguous subgraph per accelerator"
    rows = {r.level: r for r in cert.levels}
    assert rows["latency-lp"].named == cert.label and rows["critical-path"].named == "all placements"
    assert cert.family is not None and cert.family.proved_by not in {"latency-lp", "latency", "run-paths"}
    assert cert.family.bound <= cert.family.objective * (1 + TOL)
    for value in valid_objectives(problem.unrestricted(), ("list", "latency-best")):
        assert cert.family.bound <= value * (1 + TOL)


def test_an_unrestricted_certificate_has_no_family_line():
    g, c = invocation_workload(1)
    cert = certify(Problem(g, c, Latency(), [Memory()]), budget=10)
    assert cert.family is None and cert.table().splitlines()[-1].startswith("best ")
    assert list(cert.to_dict()["classes"]) == ["all placements"]


@pytest.mark.parametrize("seed", (4, 5))
def test_bounds_prints_and_writes_the_outside_answer_that_evaluate_accepts(seed, tmp_path, capsys):
    """``bounds --objective latency`` (the contiguous class by default) on generated inputs: the second line names the
    outside answer, and its JSON placement is one ``evaluate`` scores the same and finds valid."""
    g, c = invocation_workload(seed, n=16, k=3)
    path = tmp_path / "w.json"
    save_workload(Workload(g, c), path)
    assert main(["bounds", str(path), "--objective", "latency", "--time-limit", "15", "--quiet"]) == 0
    text = capsys.readouterr().out.strip().splitlines()
    assert "over contiguous placements only;" in text[-2] and text[-1].startswith("outside contiguous placements: ")
    assert main(["bounds", str(path), "--objective", "latency", "--time-limit", "15", "--quiet", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    wide = payload["classes"]["all placements"]
    assert payload["bound_scope"] == "contiguous placements" and wide["outside"]
    assert wide["bound"] <= wide["objective"] * (1 + TOL) and wide["objective"] < payload["objective"]
    split = tmp_path / "outside.json"
    w = load_workload(path)
    save_placement(Placement.from_mapping(w.graph, w.cluster, wide["placement"]), split, w)
    assert main(["evaluate", str(path), "--objective", "latency", "--split", str(split), "--json", "--quiet"]) == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["valid"] and verdict["objective"] == pytest.approx(wide["objective"])
    assert any(v["check"] == "contiguous" and not v["required"] for v in verdict["violations"])
