"""A window step of the contracted LNS fits its CP-SAT model by its contraction (placement_dsl/search/contracted.py),
and a step keeps for its expansion what the search measured rather than a fixed time per op: on a 5,057-op GPT the
first window's contraction kept 502 coarse ops, over CP-SAT's 500, and the search gave up all its windows; the 1 ms
per op it kept for the expansion (5.1 s, where it took 0.47 s) left its coarse step no time. And a window step's
contraction keeps the incumbent's schedule: its runs, merged across transfers, lasted 99.5 where the incumbent lasted
25.93, and CP-SAT started from that."""
from __future__ import annotations

import numpy as np

from placement_dsl.heuristics import run
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.schedule import list_schedule
from placement_dsl.search import contracted
from placement_dsl.search.anytime import search
from tests.solve.sheets import layered_sheet

WINDOW = 8


class _Stop:
    """A solve's answer with nothing found."""

    status = type("S", (), {"value": "time_limit_no_solution"})()
    objective = None
    message = ""
    placement = None


def _sheet() -> tuple[Problem, Placement]:
    problem = layered_sheet(40, 5, 0)
    return problem, run("list", problem.graph, problem.cluster, model=problem.cost_model()).placement


def _counted(monkeypatch) -> list[int]:
    """The coarse ops of every model the steps solve (no solve runs)."""
    sizes: list[int] = []

    def solve(small, **kw):
        sizes.append(small.graph.n)
        return _Stop()

    monkeypatch.setattr(contracted, "solve", solve)
    return sizes


def _first_over(problem: Problem, start: Placement) -> tuple[list[int], int]:
    """The first window of the start's order whose contraction keeps more coarse ops than the ops outside any window
    do, and those ops' count."""
    seq = contracted.order(problem, start)
    outside = len(contracted.intervals(problem, start, np.zeros(problem.graph.n, dtype=bool), 0))
    for lo in range(len(seq) - WINDOW):
        window = seq[lo:lo + WINDOW]
        mask = np.zeros(problem.graph.n, dtype=bool)
        mask[window] = True
        if len(contracted.intervals(problem, start, mask, 0)) > outside + 1:
            return window, outside
    raise AssertionError("no window contracts to more coarse ops than the ops outside it")


def test_a_window_whose_contraction_passes_cpsats_limit_is_shortened_until_it_fits(monkeypatch):
    problem, start = _sheet()
    window, outside = _first_over(problem, start)
    monkeypatch.setattr(contracted, "CPSAT_WINDOW_OPS", outside + 1)
    sizes = _counted(monkeypatch)
    found, info = contracted.step(problem, start, window, 60.0, solver="cpsat", after=0.0)
    assert "skipped" not in info, info
    assert len(sizes) == 1 and sizes[0] <= outside + 1 == contracted.CPSAT_WINDOW_OPS
    assert 1 <= info["free"] < WINDOW and found is None


def test_a_window_search_shortens_its_windows_rather_than_handing_its_time_back(monkeypatch):
    problem, start = _sheet()
    _, outside = _first_over(problem, start)
    monkeypatch.setattr(contracted, "CPSAT_WINDOW_OPS", outside + 1)
    sizes = _counted(monkeypatch)
    found, info = search(problem, start, 60.0, coarse=False, solver="cpsat", window=WINDOW, patience=3)
    assert "oversized" not in info and info["stalled"]
    assert len(sizes) == 3 and max(sizes) <= contracted.CPSAT_WINDOW_OPS and found is start


def test_the_coarse_step_keeps_the_expansion_the_search_measured_not_a_fixed_time_per_op(monkeypatch):
    problem, start = _sheet()
    monkeypatch.setattr(contracted, "EXPAND", 1.0)  # a second per op: 40 s, more than the whole search
    sizes = _counted(monkeypatch)
    _, info = search(problem, start, 20.0, solver="cpsat", patience=1)
    assert "skipped" not in info["coarse"], info["coarse"]
    assert sizes and sizes[0] == info["coarse"]["coarse_ops"]


def test_a_window_steps_contraction_keeps_the_incumbents_makespan(monkeypatch):
    """A run that takes an input or sends an output midway waits for all its inputs and sends every member's output
    to each consumer: the contraction cuts runs at transfers and sends only what crosses, so CP-SAT's hint, the
    incumbent on the coarse graph, lasts no longer than the incumbent."""
    problem, start = _sheet()
    best = problem.evaluate(start).objective
    hints = []

    def solve(small, warm_start=None, **kw):
        hints.append(small.evaluate(Placement(small.graph, small.cluster, warm_start.assign, "hint", schedule=list_schedule(
            warm_start, small.cost_model().congestion))).objective)
        return _Stop()

    monkeypatch.setattr(contracted, "solve", solve)
    seq = contracted.order(problem, start)
    for lo in range(0, len(seq) - WINDOW, 2 * WINDOW):
        contracted.step(problem, start, seq[lo:lo + WINDOW], 60.0, solver="cpsat", after=0.0)
    assert len(hints) >= 5 and max(hints) <= best * (1 + 1e-9), (best, hints)
