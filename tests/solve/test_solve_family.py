"""A solve of a problem its terms restrict to a class (contiguous placements: Tarnawski's invocations of whole
subgraphs; ``Subgraphs(q)``) says what its answer leaves open beyond the class, as ``certify`` does: the better valid
placement outside the class and a bound over every placement (``Result.family``, the certificate's second line, the
JSON's ``classes``). ``solve --method ip --objective latency`` printed the class line only: a user who asked for
contiguity could not see what it cost, one who did not could not see that the answer was restricted."""
from __future__ import annotations

import json
import time

import pytest

from placement_dsl.cli import main
from placement_dsl.constraints import Contiguous, Memory, Subgraphs
from placement_dsl.deadline import Deadline
from placement_dsl.evaluate import evaluate
from placement_dsl.heuristics import run
from placement_dsl.io import Workload, save_workload
from placement_dsl.objectives import Latency
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.starts import outside, race, rebuilt
from placement_dsl.testing import invocation_workload, valid_objectives

TOL = 1e-9
LIMIT = 8.0


@pytest.mark.parametrize("seed", (1, 2, 3))
def test_a_contiguous_latency_solve_reports_the_better_placement_outside_its_class(seed):
    g, c = invocation_workload(seed)
    problem = Problem(g, c, Latency(), [Memory(), Contiguous()])
    began = time.perf_counter()
    res = solve(problem, time_limit=LIMIT)
    assert time.perf_counter() - began <= LIMIT + 5.0
    beyond = res.family
    assert beyond is not None and beyond.label == "all placements"
    assert beyond.outside and beyond.objective < res.objective  # memory binds: contiguity costs latency here
    family = problem.unrestricted()
    ev = evaluate(beyond.placement, family.cost_model())
    assert ev.valid and ev.objective == pytest.approx(beyond.objective)
    assert not problem.is_valid(beyond.placement) and family.is_valid(beyond.placement)
    assert beyond.bound > 0 and beyond.proved_by != "none"
    for value in [beyond.objective, res.objective, *valid_objectives(family, ("list", "latency-best", "greedy"))]:
        assert beyond.bound <= value * (1 + TOL)  # over every placement: under every valid one
    lines = res.summary().splitlines()
    assert "over contiguous placements only," in lines[-2] and lines[-2].startswith("certificate: ")
    assert lines[-1] == beyond.line("contiguous placements")
    classes = json.loads(json.dumps(res.to_dict()))["classes"]
    assert set(classes) == {"contiguous placements", "all placements"}
    assert classes["all placements"]["outside"] and classes["all placements"]["objective"] == beyond.objective
    assert classes["contiguous placements"]["objective"] == res.objective
    assert res.timings.family > 0


def test_a_subgraph_limit_names_its_class_and_an_unrestricted_solve_has_no_family():
    g, c = invocation_workload(2)
    limited = solve(Problem(g, c, Latency(), [Memory(), Subgraphs(1)]), time_limit=LIMIT)
    assert limited.family is not None and limited.family.bound <= limited.objective * (1 + TOL)
    assert "subgraph" in limited.certificate_line() and limited.certificate_line().count(" only,") == 1
    free = solve(Problem(g, c, Latency(), [Memory()]), time_limit=LIMIT)
    assert free.family is None and "classes" not in free.to_dict()
    assert free.summary().splitlines()[-1].startswith("certificate: ") and " only," not in free.certificate_line()


def test_solve_ip_prints_and_writes_the_family(tmp_path, capsys):
    """``solve --method ip --objective latency`` (the contiguous class by default), text and JSON."""
    g, c = invocation_workload(4, n=16, k=3)
    path = tmp_path / "w.json"
    save_workload(Workload(g, c), path)
    args = ["solve", str(path), "--objective", "latency", "--method", "ip", "--time-limit", str(LIMIT), "--quiet"]
    assert main(args) == 0
    text = capsys.readouterr().out.strip().splitlines()
    assert "over contiguous placements only," in text[-2]
    assert text[-1].startswith(("outside contiguous placements: ", "over all placements: bound "))
    assert main([*args, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    wide = payload["classes"]["all placements"]
    assert payload["bound_scope"] == "contiguous placements" and wide["bound"] > 0
    assert wide["bound"] <= min(wide["objective"], payload["objective"]) * (1 + TOL)


def _linked_contiguous(n: int = 120) -> Problem:
    """A contiguous latency on devices that run one op at a time (linked accelerators and a host, MOIRAI §III), where
    HEFT's interleaved schedule lies outside the class."""
    from ..heuristics.test_latency_passes import _layered, _linked

    return Problem(_layered(0, n), _linked(), Latency(), [Memory(), Contiguous()])


def test_a_contiguous_latency_on_links_reports_heft_outside_its_class():
    problem = _linked_contiguous()
    heft = problem.unrestricted().evaluate(run("list", problem.graph, problem.cluster,
                                               model=problem.unrestricted().cost_model()).placement)
    res = solve(problem, time_limit=LIMIT)
    beyond = res.family
    assert not problem.is_valid(run("list", problem.graph, problem.cluster, model=problem.cost_model()).placement)
    assert beyond is not None and beyond.outside and beyond.objective <= heft.objective * (1 + TOL) < res.objective
    assert problem.unrestricted().is_valid(beyond.placement) and beyond.bound <= beyond.objective * (1 + TOL)


def test_a_race_keeps_the_placements_the_class_refuses_for_the_family():
    problem = _linked_contiguous()
    with outside() as kept:
        best, _, _ = race(problem, ["greedy", "list"], 20.0, Deadline(30.0))
    assert best.usable and best.method == "greedy"
    assert [m for _, m, _ in kept] == ["list"]
    objective, _, parts = kept[0]
    placement = rebuilt(problem, parts)
    assert not problem.is_valid(placement) and problem.unrestricted().evaluate(placement).objective == \
        pytest.approx(objective)
    assert race(problem, ["list"], 20.0, Deadline(30.0))[0].usable is False  # outside the block: nothing kept, no error
