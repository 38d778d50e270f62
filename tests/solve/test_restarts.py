"""A makespan solve whose model is too large uses its budget: after its start's searches stall it restarts from the
race's next best distinct starts and from kicks of its best schedule until its deadline (placement_dsl/restarts.py).

MOIRAI's GoogLeNet at 300 s returned at 157 s, after three fresh-seed rounds found nothing, 143 s unused."""
from __future__ import annotations

import math
import random
import time

import pytest

from placement_dsl import cpsat, restarts
from placement_dsl.constraints import Congestion, Memory
from placement_dsl.errors import SpecError
from placement_dsl.objectives import Makespan
from placement_dsl.problem import Problem
from placement_dsl.restarts import kicked, restart
from placement_dsl.solve import solve
from placement_dsl.starts import DISTINCT, KEPT, SPREAD, alternatives, race, resolve
from placement_dsl.zoo import gpt3

LIMIT = 15.0
PASSES = ["greedy", "one-device", "list", "cpop", "getf", "m-sct"]


def _problem() -> Problem:
    """One GPT-3 layer at operator level (137 ops) on MOIRAI's intra-server GPUs, hard memory, port congestion."""
    w = gpt3(layers=1, hidden=512, heads=8, seq_len=128, cluster="intra-server")
    return Problem(w.graph, w.cluster, Makespan(), [Memory(), Congestion("port")])


def test_a_race_keeps_its_next_best_distinct_starts_beside_the_best() -> None:
    problem = _problem()
    best, _, _ = race(problem, PASSES, 20.0)
    others = alternatives(problem, best.others)
    assert best.usable and 1 <= len(others) <= KEPT - 1
    kept, least = [best.placement.assign], max(1, math.ceil(DISTINCT * problem.graph.n))
    for found in others:
        assert found.usable and best.objective <= found.objective <= best.objective * (1 + SPREAD)
        assert all(int((found.placement.assign != other).sum()) >= least for other in kept)
        kept.append(found.placement.assign)
    assert [s.objective for s in others] == sorted(s.objective for s in others)


def test_a_kick_moves_a_window_of_the_schedule_and_stays_valid() -> None:
    problem = _problem()
    start = resolve(problem, "list")
    rng = random.Random(0)
    found = [kicked(problem, start, 8, rng) for _ in range(5)]
    moved = [k for k in found if k is not None]
    assert moved
    for k in moved:
        assert k.usable and not problem.violations(k.placement) and k.placement.schedule is not None
        assert int((k.placement.assign != start.placement.assign).sum()) >= 1


def test_a_kick_the_scheduler_refuses_is_no_start_and_any_other_error_is_raised(monkeypatch) -> None:
    """``kicked`` caught every exception, hiding a bug in the scheduler as "no start"; only the scheduler's refusal of
    a placement (a SpecError) is a kick that is no start."""
    problem = _problem()
    start = resolve(problem, "list")

    def refused(placement, congestion):
        raise SpecError("list_schedule: op 'x' cannot run on device 'y'")
    monkeypatch.setattr(restarts, "list_schedule", refused)
    assert all(kicked(problem, start, 8, random.Random(seed)) is None for seed in range(3))

    def broken(placement, congestion):
        raise ZeroDivisionError("a bug")
    monkeypatch.setattr(restarts, "list_schedule", broken)
    with pytest.raises(ZeroDivisionError):
        for seed in range(3):
            kicked(problem, start, 8, random.Random(seed))


def test_restarts_kick_the_best_until_the_deadline_and_never_answer_worse() -> None:
    from placement_dsl.deadline import Deadline

    problem = _problem()
    best = resolve(problem, "list")
    seconds, reserve, least = 6.0, 0.5, 1.0
    t0 = time.monotonic()
    found = restart(problem, best, [], Deadline(seconds), reserve=reserve, least=least, search=None, patience=3,
                    seed=0)
    assert seconds - reserve - least - 0.5 <= time.monotonic() - t0 <= seconds + 5
    assert found.info["restarts"] >= 1 and found.usable and found.objective <= best.objective
    assert not problem.violations(found.placement)


def test_a_makespan_too_large_to_model_restarts_until_its_deadline(monkeypatch) -> None:
    """The windows find nothing here, and the start's local optimum is reached in a second or two: the solve used
    to return then; now the restarts (from the race's other starts first, then kicks) hold it to its deadline."""
    import placement_dsl.solve as solve_module
    from placement_dsl import stopped
    from placement_dsl.deadline import BudgetSpent
    from placement_dsl.search import anytime

    def too_large(*args, **kwargs):
        raise BudgetSpent("model too large for the time left")

    starts_of: list[str] = []
    improve = restarts.improve

    def recorded(problem, start, seconds, seed=0, method=None, **options):
        if method is None:
            starts_of.append(start.method)
        return improve(problem, start, seconds, seed, method, **options)

    monkeypatch.setattr(solve_module, "check_fits", too_large)
    monkeypatch.setattr(cpsat, "whole_fits", lambda problem: False)  # the searches after the start, not CP-SAT's
    monkeypatch.setattr(anytime, "step", lambda *args, **kwargs: (None, {}))  # windows that find nothing
    monkeypatch.setattr(restarts, "improve", recorded)
    problem = _problem()
    t0 = time.monotonic()
    result = solve(problem, time_limit=LIMIT)
    wall = time.monotonic() - t0
    assert LIMIT - stopped.RESERVE - stopped.MIN_LNS - 1.0 <= wall <= LIMIT + 5
    assert result.placement is not None and not problem.violations(result.placement)
    assert result.objective <= result.start_objective
    assert starts_of and starts_of[0] != "kick"  # the race's other starts first
    assert result.timings.restarts > 0



def test_fresh_seed_rounds_that_find_nothing_leave_the_restarts_most_of_the_time(monkeypatch) -> None:
    """GPT-3 330M at 300 s: the first fresh-seed round (given all the time left) took the 87 s after the windows and
    found nothing; the restarts never ran. A round now takes a share of the time left, and one round without a
    better schedule hands the rest to the restarts."""
    import placement_dsl.solve as solve_module
    from placement_dsl import stopped
    from placement_dsl.deadline import BudgetSpent
    from placement_dsl.search import anytime

    def too_large(*args, **kwargs):
        raise BudgetSpent("model too large for the time left")

    def spends_all(problem, start, seconds, seed=0, method=None, **options):  # a local search that never stops
        if method is None:  # early and finds nothing; the windows find nothing at once
            time.sleep(seconds)
        return start

    monkeypatch.setattr(solve_module, "check_fits", too_large)
    monkeypatch.setattr(cpsat, "whole_fits", lambda problem: False)  # the searches after the start, not CP-SAT's
    monkeypatch.setattr(anytime, "step", lambda *args, **kwargs: (None, {}))
    monkeypatch.setattr(stopped, "improve", spends_all)
    problem, limit = _problem(), 2 * LIMIT
    t0 = time.monotonic()
    result = solve(problem, time_limit=limit)
    assert time.monotonic() - t0 <= limit + 5
    assert 0 < result.timings.again <= stopped.AGAIN_SHARE * limit  # one round of its share, then the restarts
    assert result.timings.restarts >= stopped.MIN_LNS and "restarts after the searches stalled" in result.message
    assert result.placement is not None and result.objective <= result.start_objective

