"""The closed forms a solve raises its bound by hold where a stage may run on replicas, which divide its load.

On a chain whose stage of two replicas reaches 7.5, the largest op (10), one device or a cut (11) and the cut stages
on an answer of 11 (11) were all above the optimum: a solve stopped before its model, holding a start of 11 on one
device, proved that start optimal.
"""
from __future__ import annotations

from placement_dsl import testing
from placement_dsl.bounds import cut_stages
from placement_dsl.bounds.max_load import max_load_bound, replicas
from placement_dsl.formulations import get
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.result import Result
from placement_dsl.solvers import Status
from placement_dsl.stopped import Stop


def test_the_closed_forms_stay_below_a_replicated_optimum():
    problem, optimum = testing.replicated_chain()
    assert max_load_bound(problem) <= optimum
    assert cut_stages.applies(problem) is not None and cut_stages.answer_bound(problem, 11.0) is None


def test_the_replica_cap_is_the_largest_replicate_term_and_one_without():
    """The bound's ``R`` and the levels' (the simple and DP levels, Tarnawski's IP's choice) are one reading."""
    problem, _ = testing.replicated_chain()
    assert replicas(problem) == 3
    plain = Problem(problem.source_graph, problem.cluster, problem.objective, problem.constraints[:1])
    assert replicas(plain) == 1


def test_a_stopped_solve_does_not_prove_a_start_a_replicated_stage_beats():
    problem, optimum = testing.replicated_chain()
    start = Placement(problem.graph, problem.cluster, [0, 0])  # both ops on one device, no replica: 11
    ev = problem.evaluate(start)
    assert ev.objective == 11.0
    stop = Stop(problem, get("auto", problem), "ip", "highs", "greedy", start, ev, "", 0.0)
    result = Result(status=Status.TIME_LIMIT_FEASIBLE, placement=start, objective=ev.objective, bound=None,
                    method="ip", solver="highs", formulation="auto")
    stop.known_bound(result)
    assert result.bound is not None and result.bound <= optimum and result.status is Status.TIME_LIMIT_FEASIBLE
