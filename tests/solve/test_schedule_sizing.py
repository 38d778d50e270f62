"""The schedule model's build is estimated from its size before it is built: within twice the model counted, on
generated sheets and graphs of every size, so that a small model is built and searched and a large one refused."""
from __future__ import annotations

import itertools
import random

import pytest

from placement_dsl.compile import compile
from placement_dsl.formulations import get
from placement_dsl.io import Workload
from placement_dsl.presets import problem_for_method
from placement_dsl.problem import Problem
from placement_dsl.sizing import SCHEDULE_PER_NONZERO, SCHEDULE_START, build_seconds, estimate_nonzeros
from placement_dsl.solve import solve
from placement_dsl.solvers.matrix import extract
from placement_dsl.testing import moirai_sheet


def fork_join_sheet(blocks: int, fanout: int, devices: int, seed: int) -> Problem:
    """A MOIRAI sheet of fork-join blocks (a fork fans out to 2..``fanout`` chains of 1-4 tasks that join; the next
    block's fork follows the join), heterogeneous device speeds and link bandwidths, a flow per edge of a task with
    successors, as the command line's ``--objective makespan --method ip`` reads it."""
    rng = random.Random(seed)
    succ: dict[int, list[int]] = {}
    task, join = 1, None
    for _ in range(blocks):
        fork, task = task, task + 1
        succ[fork] = []
        if join is not None:
            succ[join].append(fork)
        ends = []
        for _ in range(rng.randint(2, fanout)):
            chain = list(range(task, task + rng.randint(1, 4)))
            task += len(chain)
            succ[fork].append(chain[0])
            succ.update({a: [b] for a, b in itertools.pairwise(chain)})
            ends.append(chain[-1])
        join, task = task, task + 1
        succ[join] = []
        succ.update({e: [join] for e in ends})
    n, K = task - 1, devices
    speed = [rng.choice([0.4, 1.0, 3.0]) for _ in range(K)]
    bandwidth = [[rng.choice([1.0, 4.0, 20.0]) for _ in range(K)] for _ in range(K)]

    def draw(i: int, successors: int) -> tuple[float, list[float], list[float]]:
        base = rng.expovariate(1.0) * 0.1 + 0.005
        mi = float(rng.choice([0, 1, 5]) * 1000)
        return mi, [round(base / speed[k], 5) for k in range(K)], [rng.choice([0.0, 0.2, 1.0, 2.0])
                                                                  for _ in range(successors)]

    graph, cluster = moirai_sheet(lambda i: succ.get(i, []), n, [1], bandwidth, draw, 1e9, f"fj{blocks}-{seed}")
    return problem_for_method(Workload(graph, cluster, "moirai", {}), "makespan", "ip")


@pytest.mark.parametrize(("blocks", "fanout", "devices", "seed"),
                         [(2, 3, 2, 1), (8, 3, 2, 13), (8, 4, 3, 3), (15, 4, 2, 4), (30, 4, 4, 6)])
def test_the_schedule_models_estimate_is_within_twice_its_counted_size(blocks, fanout, devices, seed):
    # the estimate's seconds are its nonzeros at a rate measured on models counted so (34 to 1,661 ops: 1.7e-5 to
    # 3.6e-5 CPU seconds per estimated nonzero): a model counted at half its estimate builds in half the time
    problem = fork_join_sheet(blocks, fanout, devices, seed)
    form = get("auto", problem)
    counted = len(extract(compile(problem, form).model).value)
    estimate = estimate_nonzeros(problem, form)
    assert counted <= estimate <= 2 * counted
    assert build_seconds(problem, form, loaded=False) == pytest.approx(SCHEDULE_START + SCHEDULE_PER_NONZERO * estimate)


def test_a_small_sheets_model_is_built_and_searched_by_the_mip():
    # 65 tasks (141 ops with their flows): estimated at 1.12-1.5 s to build, built in 0.22 s, it was refused for want
    # of 20 times its build, and the answer was the heuristics'
    problem = fork_join_sheet(8, 3, 2, 13)
    assert problem.graph.n == 141
    result = solve(problem, time_limit=10)
    assert "not built" not in result.message, result.message
    assert result.timings.build > 0 and result.solver == "highs" and result.formulation == "schedule", result.message
    assert result.status.is_ok and problem.is_valid(result.placement)


def test_a_model_that_cannot_fit_is_refused_without_counting_its_pairs(monkeypatch):
    """Counting the unordered pairs is O(n^2) (5 s at 18,164 ops under load, twice before a 15 s ``bounds`` ran a
    level): where the model's part without them already overruns the time given, they are not counted."""
    from placement_dsl import sizing
    from placement_dsl.certify import certify
    from placement_dsl.deadline import BudgetSpent, Deadline

    problem = fork_join_sheet(6, 3, 3, 0)
    form = get("schedule", problem)

    def uncounted(*args, **kwargs):
        raise AssertionError("the pairs were counted")

    monkeypatch.setattr(sizing, "contention", lambda: 1e6)  # a machine so loaded that no model fits
    monkeypatch.setattr(sizing, "unordered_pairs", uncounted)
    assert build_seconds(problem, form, within=10.0) > 10.0
    with pytest.raises(BudgetSpent, match="at least"):
        sizing.check_fits(problem, form, Deadline(10.0))
    # the path level runs first: certify sizes the model levels after it (whether they fit) before its clock starts
    cert = certify(problem, budget=5.0, levels=("route-path", "schedule-lp", "schedule"), stop_at_gap=False)
    assert [row.bound is None for row in cert.levels] == [False, True, True]
