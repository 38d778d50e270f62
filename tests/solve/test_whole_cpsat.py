"""A makespan solve whose MILP is too large to search searches CP-SAT's model of the whole graph from its best
schedule where that model is small (placement_dsl.stopped.whole_model, sized by placement_dsl.cpsat.whole_fits before
it is built): the list scheduler every other search scores with books ports greedily from the start, and on sheets
of wide layers CP-SAT's schedules were 28 % shorter than the local and window searches reached (1.257 against
1.436 on 183 ops onto 5 devices)."""
from __future__ import annotations

import random
import time

import pytest

from placement_dsl import cpsat, stopped
from placement_dsl.deadline import BudgetSpent, Deadline
from placement_dsl.evaluate import CostModel
from placement_dsl.presets import makespan_problem
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.starts import resolve
from placement_dsl.testing import moirai_sheet
from tests.solve.sheets import layered

pytestmark = pytest.mark.skipif(not cpsat.available(), reason="needs OR-Tools")
LIMIT = 20.0


def wide_sheet(tasks: int, width: int, devices: int, seed: int) -> Problem:
    """A MOIRAI sheet of layers up to ``width`` tasks side by side, each fed by one to three of the layer before,
    heterogeneous speeds and bandwidths, a flow per edge."""
    rng = random.Random(seed)
    layers, succ = layered(rng, tasks, width)
    speed = [rng.uniform(0.5, 2.5) for _ in range(devices)]
    bandwidth = [[rng.choice((2.0, 5.0, 10.0, 25.0)) for _ in range(devices)] for _ in range(devices)]

    def draw(i: int, successors: int) -> tuple[float, list[float], list[float]]:
        base = rng.lognormvariate(0, 1) * 0.05
        times = [round(base / speed[k] * rng.uniform(0.8, 1.25), 5) for k in range(devices)]
        return 1000.0, times, [rng.choice((0.1, 0.5, 1.0, 3.0)) for _ in range(successors)]

    graph, cluster = moirai_sheet(lambda i: sorted(succ[i]), tasks, layers[0], bandwidth, draw, 1e12,
                                  f"wide{tasks}-{seed}")
    return makespan_problem(graph, cluster, CostModel.named("makespan"))


def _too_large(*args, **kwargs):
    raise BudgetSpent("model too large to be searched in the time left")


@pytest.mark.parametrize("seed", [1, 2])
def test_cp_sat_on_the_whole_model_improves_a_list_schedule_or_proves_it(seed):
    problem = wide_sheet(24, 8, 3, seed)
    assert cpsat.whole_fits(problem)
    start = resolve(problem, "list")
    t0 = time.monotonic()
    found, bound = stopped.whole_model(problem, start, Deadline(12.0))
    assert time.monotonic() - t0 <= 12.0 + 5
    assert found.usable and not problem.violations(found.placement)
    assert found.objective == pytest.approx(problem.evaluate(found.placement).objective)
    assert bound is not None and bound <= found.objective * (1 + 1e-9)
    assert found.objective < start.objective * (1 - 1e-6) or bound >= found.objective * (1 - 1e-9)


def test_a_solve_whose_milp_is_too_large_searches_the_small_cp_sat_model(monkeypatch):
    import placement_dsl.solve as solve_module

    monkeypatch.setattr(solve_module, "check_fits", _too_large)  # the MILP is not built: the heuristics' path
    problem = wide_sheet(24, 8, 3, 1)
    t0 = time.monotonic()
    result = solve(problem, time_limit=LIMIT)
    assert time.monotonic() - t0 <= LIMIT + 5
    assert "+cpsat" in result.found_by or "CP-SAT on the whole model" in result.message
    assert result.timings.solve > 0 and not problem.violations(result.placement)
    assert result.bound <= result.objective * (1 + 1e-9)


def test_a_cp_sat_model_sized_too_large_is_not_built(monkeypatch):
    import placement_dsl.solve as solve_module

    monkeypatch.setattr(solve_module, "check_fits", _too_large)
    problem = wide_sheet(24, 8, 3, 1)
    monkeypatch.setattr(cpsat, "WHOLE_LITERALS", cpsat.literals(problem) - 1)
    assert not cpsat.whole_fits(problem)
    result = solve(problem, time_limit=10.0)
    assert "cpsat" not in result.found_by and result.timings.solve == 0
