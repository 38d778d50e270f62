"""A MIP level is given what is left of the budget less :data:`placement_dsl.certify.MODEL_MARGIN` (its model's
build, hand-over and read-back run past the solver's limit; the last MIP level, given all that was left, ended the
``bounds`` command 6 s past its budget under load); a closed form still gets half of what is left
beside the upper-bound heuristics' share."""
from __future__ import annotations

import dataclasses

import pytest

from placement_dsl import certify as certify_module
from placement_dsl.certificate import LevelStatus
from placement_dsl.certify import LEVELS, MODEL_MARGIN, certify
from placement_dsl.constraints import DagOrder
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck
from placement_dsl.problem import Problem, Stages


def test_the_last_mip_level_leaves_the_margin(monkeypatch):
    given = {}

    def record(name):
        def run(r, seconds):
            given[name] = (seconds, r.clock.left())
            return None, LevelStatus.NO_BOUND, "", r.scope
        return run

    for name in ("simple", "exact"):
        monkeypatch.setitem(LEVELS, name, dataclasses.replace(LEVELS[name], run=record(name)))
    monkeypatch.setattr(certify_module, "_upper", lambda *a, **k: None)
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2)], [("a", "b")])
    certify(Problem(g, Stages(2), Bottleneck(), [DagOrder()]), budget=20, levels=("simple", "exact"),
            stop_at_gap=False)
    seconds, left = given["exact"]
    assert seconds <= left - MODEL_MARGIN + 0.05  # (the level reads the clock a moment after its share was set)
    assert seconds >= left - MODEL_MARGIN - 0.5  # the rest of the budget, less the margin
    closed, left = given["simple"]  # the upper-bound heuristics, not run yet, keep their share of it
    assert closed == pytest.approx((left - certify_module.UPPER_SHARE * 20) / 2, abs=0.5)


def test_a_short_budget_keeps_a_share_of_it_not_the_whole_margin(monkeypatch):
    # the sweep's 2 s certify of a tiny graph skipped its superblock level: 2 s less a 4 s margin left it nothing
    from placement_dsl.certify import MARGIN_SHARE

    given = {}

    def run(r, seconds):
        given["exact"] = (seconds, r.clock.left())
        return None, LevelStatus.NO_BOUND, "", r.scope

    monkeypatch.setitem(LEVELS, "exact", dataclasses.replace(LEVELS["exact"], run=run))
    monkeypatch.setattr(certify_module, "_upper", lambda *a, **k: None)
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2)], [("a", "b")])
    certify(Problem(g, Stages(2), Bottleneck(), [DagOrder()]), budget=2, levels=("exact",), stop_at_gap=False)
    seconds, left = given["exact"]
    assert left - MARGIN_SHARE * left - 0.3 <= seconds <= left - MARGIN_SHARE * left + 0.05 and seconds > 1.0


@pytest.mark.parametrize("fits", [False, True])
def test_model_levels_that_cannot_be_built_leave_their_share_to_the_closed_forms(monkeypatch, fits):
    # GoogLeNet at 10 s: the schedule levels, whose model takes longer to build than the whole budget, held half of
    # what was left from CP-SAT's segments (none of 9 priced in 2.8 s), then were skipped with 3 s unused
    from placement_dsl import sizing
    from placement_dsl.testing import makespan_fork

    given = {}

    def run(r, seconds):
        given["segment-schedules"] = (seconds, r.clock.left())
        return None, LevelStatus.NO_BOUND, "", r.scope

    monkeypatch.setitem(LEVELS, "segment-schedules", dataclasses.replace(LEVELS["segment-schedules"], run=run))
    cost = 0.1 if fits else 1e6  # seconds to build each model, loaded and idle
    monkeypatch.setattr(sizing, "build_times", lambda problem, form, within=None: sizing.Build(cost, cost, 0.0))
    problem, _ = makespan_fork()
    cert = certify(problem, budget=20, levels=("segment-schedules", "schedule-lp", "schedule"), stop_at_gap=False)
    seconds, left = given["segment-schedules"]
    assert seconds == pytest.approx(left / 2 if fits else left, abs=0.3)
    skipped = {r.level for r in cert.levels if r.status is LevelStatus.SKIPPED}
    assert skipped == (set() if fits else {"schedule-lp", "schedule"})
