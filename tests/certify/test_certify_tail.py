"""What a certification does after its levels holds to the call's deadline.

On a 15,000-task MOIRAI sheet (47,584 ops onto 5 devices) a 30 s ``bounds`` ended 56-100 s late at load 8: every
schedule heuristic was stopped, and the splits they fall back on (greedy, one device, the work-balanced slicing,
each scored by list scheduling the whole graph) were built after the levels without a look at the clock; the free
closed-form levels also ran past the spent budget, seconds each at that size. Both are sized from the op count now,
and what does not fit is skipped with the reason. The tests give the run a spent deadline (or a sizing that
allows one split), not a wall-clock race.
"""
from __future__ import annotations

import math
import time

import pytest

from placement_dsl.certificate import LevelStatus
from placement_dsl.certify import certify
from placement_dsl.cluster import Cluster, Device
from placement_dsl.deadline import BudgetSpent, Deadline
from placement_dsl.errors import PlacementError
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import fallback as fallbacks
from placement_dsl.objectives import Makespan
from placement_dsl.problem import Problem


def _schedule(n: int) -> Problem:
    """A makespan problem of ``n`` ops shaped as a generated sheet: a chain with skip edges, uneven work."""
    ops = [Op(name=f"t{i}", work=1.0 + (7 * i) % 5, out_bytes=float(i % 3)) for i in range(n)]
    edges = [(f"t{i}", f"t{i + 1}") for i in range(n - 1)] + [(f"t{i}", f"t{i + 7}") for i in range(n - 7)]
    return Problem(Graph(ops, edges, name=f"sheet{n}"), Cluster.accelerators(4), Makespan())


def test_a_spent_call_skips_the_fallback_splits_and_the_free_levels_it_cannot_hold(monkeypatch):
    from placement_dsl.levels import latency

    problem = _schedule(6000)
    monkeypatch.setattr(latency, "fallback_seconds", lambda g, c, split="balanced", checks=0: 60.0)  # past the grace
    spent = Deadline(1.0, start=time.monotonic() - 2.0)
    cert = certify(problem, budget=30.0, deadline=spent)
    ran = {u.method: u for u in cert.upper}
    for method in ("greedy", "fallback"):
        assert ran[method].objective is None and "skipped" in ran[method].message
        assert "6000 ops" in ran[method].message
    assert cert.placement is None and math.isinf(cert.objective)
    rows = {r.level: r for r in cert.levels}
    assert rows["route-path"].status is LevelStatus.SKIPPED  # a pass over 18,000 ops and edges: not milliseconds


def test_a_spent_call_holds_greedys_split_where_its_estimate_is_within_the_grace(monkeypatch):
    """Greedy's split is built in this process past a spent clock by the held split's grace, as solve's is: the
    certificate has a placement, and the closed form that fits proves it optimal (the chain's 18,000)."""
    from placement_dsl.levels import latency

    problem = _schedule(6000)
    monkeypatch.setattr(latency, "fallback_seconds", lambda g, c, split="balanced", checks=0: 1.0)
    cert = certify(problem, budget=30.0, deadline=Deadline(1.0, start=time.monotonic() - 2.0))
    greedy = [u for u in cert.upper if u.method == "greedy"]
    assert len(greedy) == 1 and greedy[0].objective == cert.objective
    assert cert.placement is not None and problem.is_valid(cert.placement)
    assert cert.objective == problem.evaluate(cert.placement).objective
    assert cert.bound <= cert.objective * (1 + 1e-9)


def test_with_time_left_the_certificate_still_has_the_fallback_split():
    problem = _schedule(300)
    cert = certify(problem, budget=20.0, levels=("route-path",))
    assert math.isfinite(cert.objective) and cert.bound <= cert.objective * (1 + 1e-9)


def test_the_fallback_builds_cheapest_first_only_the_splits_whose_estimate_fits(monkeypatch):
    problem = _schedule(600)
    g, c, model = problem.graph, problem.cluster, problem.cost_model()
    monkeypatch.setattr(fallbacks, "fallback_seconds", lambda g, c, split="balanced", checks=0: 1.0)
    with pytest.raises(BudgetSpent, match="no fallback split fits"):
        fallbacks.fallback("m", g, c, model, "phase", deadline=Deadline(0.5))
    monkeypatch.setattr(fallbacks, "fallback_seconds", lambda g, c, split="balanced", checks=0:
                        1.0 if split == "balanced" else 1e9)
    found = fallbacks.fallback("m", g, c, model, "phase", deadline=Deadline(60.0))
    skipped = found.info["skipped"]
    assert found.info["fallback"] == "balanced" and skipped and all("s left" in why for why in skipped)
    assert not any(why.startswith("balanced") for why in skipped)
    unbounded = fallbacks.fallback("m", g, c, model, "phase")  # without a deadline: every split, as before
    assert "skipped" not in unbounded.info and unbounded.objective <= found.objective


def test_the_scored_fallback_is_refused_with_its_estimate_or_answers_as_the_problem_scores():
    problem = _schedule(2000)
    with pytest.raises(BudgetSpent, match="skipped: .* 2000 ops"):
        fallbacks.scored_fallback(problem, Deadline(0.0), "m", "phase")
    found, valid, value = fallbacks.scored_fallback(problem, Deadline(60.0), "m", "phase")
    assert valid and value.objective == problem.evaluate(found.placement).objective
    tiny = _schedule(12)  # milliseconds: built however little time is left
    found, valid, value = fallbacks.scored_fallback(tiny, Deadline(0.0), "m", "phase")
    assert valid and value.objective == tiny.evaluate(found.placement).objective


def test_a_solve_past_its_deadline_sizes_the_fallback_split_and_says_why(monkeypatch):
    """A solve whose clock is spent before it begins holds the fallback split in this process where the split's
    estimate is within ``HELD_GRACE`` (its 2 s within the promise's 5): it is the answer. Where the estimate is past
    the grace, the split is skipped and the answer says why."""
    from placement_dsl import stopped
    from placement_dsl.solve import solve
    from placement_dsl.solvers import Status

    monkeypatch.setattr(fallbacks, "slowdown", lambda: 1.0)  # the estimates as measured, whatever the load
    problem = _schedule(6000)  # its split's estimate: ~0.9 s (1.8 s at load 8, at the grace's edge)
    result = solve(problem, deadline=Deadline(1.0, start=time.monotonic() - 2.0), method="ip")
    assert result.placement is not None and problem.is_valid(result.placement)
    assert result.found_by.startswith("fallback (")
    monkeypatch.setattr(stopped, "HELD_GRACE", 0.1)
    result = solve(problem, deadline=Deadline(1.0, start=time.monotonic() - 2.0), method="ip")
    assert result.status is Status.TIME_LIMIT_NO_SOLUTION and result.placement is None
    assert "fallback split skipped" in result.message and "6000 ops" in result.message


def test_a_placement_is_scored_by_one_evaluation(monkeypatch):
    """Its validity and its objective come from one list schedule of the whole graph (5-7.5 s on 47,584 ops at
    load 8, where they were two): a given start, and the scored fallback split."""
    import placement_dsl.problem as problem_module
    from placement_dsl.starts import resolve

    calls, real = [], problem_module.evaluate
    monkeypatch.setattr(problem_module, "evaluate", lambda p, m: calls.append(p) or real(p, m))
    problem = _schedule(40)
    start = resolve(problem, problem.placement([0] * problem.graph.n))
    assert start.usable and len(calls) == 1
    calls.clear()
    found, valid, value = fallbacks.scored_fallback(_schedule(12), Deadline(0.0), "m", "phase")  # run here
    assert valid and len(calls) == 1 and value.objective == real(found.placement, problem.cost_model()).objective



def test_the_schedule_passes_leave_the_cheapest_split_its_time(monkeypatch):
    """On 47,584 ops the passes (one device, HEFT, CPOP, ...) took their 7.5 s share of a 30 s ``bounds`` and were
    stopped with nothing, and the split after the levels no longer fitted: "best inf". Their share now leaves the
    levels' clock the cheapest split's estimate, and the split is built where they found nothing."""
    from placement_dsl.levels import latency

    limits = []

    def stopped(deadline, fn, *args, time_limit=None, **kwargs):
        limits.append(time_limit)
        raise PlacementError("stopped with nothing")

    monkeypatch.setattr(latency, "fallback_seconds", lambda g, c, split="balanced", checks=0: 15.0)  # x WIDEN: 18 s
    monkeypatch.setattr(latency, "call_within", stopped)
    sheet = _schedule(300)  # devices that run one op at a time, as a sheet's
    problem = Problem(sheet.graph, Cluster([Device(name=f"d{i}", invocations=False) for i in range(4)]), Makespan())
    cert = certify(problem, budget=20.0, levels=("route-path",))
    assert limits and max(limits) < 2.0  # 20 s less the 18 s kept (the share was a quarter: 5 s)
    ran = {u.method: u for u in cert.upper}  # each pass stopped with nothing, then the split
    assert ran["fallback"].objective is not None and all(u.objective is None for u in cert.upper[:-1])
    assert cert.found_by.split("+")[0] == "fallback" and cert.bound <= cert.objective < math.inf
