"""Levels and heuristics that cannot change the certificate are not run: a MIP level where the gap is within the
gap it is solved to, stage-cut where no op's cheapest stage can beat the bound, and no heuristic once the gap is
within the precision of the bound's own level (the cut-stages bisection's width). With a gap target of 0 on a
623-op GPT-3 onto 4 stages they took 35 s of a 60 s certificate (BRKGA twice) to move nothing."""
from __future__ import annotations

import math
import time
from types import SimpleNamespace

import pytest

from placement_dsl import certify as certify_module
from placement_dsl.certificate import MIP_GAP, LevelStatus
from placement_dsl.certify import certify
from placement_dsl.evaluate import CostModel
from placement_dsl.io.workload import Workload
from placement_dsl.levels.base import LEVELS
from placement_dsl.presets import dag_problem, resize
from placement_dsl.zoo.gpt3 import gpt3


@pytest.fixture(scope="module")
def gpt3_on_4():
    w = gpt3(layers=3, hidden=1024, heads=16, vocab=8192)
    return dag_problem(Workload(w.graph, resize(w.cluster, 4), w.format, w.meta), CostModel.named("throughput"))


def test_what_cannot_change_the_certificate_is_skipped(gpt3_on_4, monkeypatch):
    ran = []

    def recording(deadline, fn, method, *args, **kwargs):
        ran.append(method)
        return fn(method, *args, **kwargs)
    monkeypatch.setattr(certify_module, "call_within", recording)
    t = time.perf_counter()
    cert = certify(gpt3_on_4, budget=60.0, gap=0.0)
    wall = time.perf_counter() - t
    rows = {r.level: r for r in cert.levels}
    assert cert.proved_by == "cut-stages" and 0 < cert.gap <= LEVELS["cut-stages"].precision
    for name in ("stage-cut", "superblock", "guess", "exact"):
        assert rows[name].status is LevelStatus.SKIPPED
        assert rows[name].message == "the gap is within the precision of cut-stages"
    assert "brkga" not in ran  # slicegraph met the bound to the bisection's width: nothing left to find
    assert wall < 30.0  # 35 s before, on an idle machine


def test_a_level_with_nothing_to_add_says_why():
    exact, stage_cut = LEVELS["exact"], LEVELS["stage-cut"]
    assert exact.beyond_reach(100.0, 100.0 * (1 - 0.5 * MIP_GAP), None).startswith("the gap")
    assert exact.beyond_reach(100.0, 100.0 * (1 - 2 * MIP_GAP), None) is None  # a MIP may still close it
    assert exact.beyond_reach(float("inf"), 1.0, None) is None  # no placement yet: everything may help
    assert LEVELS["dp"].beyond_reach(100.0, 99.9999999, None) is None  # an exact level may close any gap
    assert stage_cut.reach is not None and stage_cut.precision == 0.0


def test_stage_cut_is_skipped_where_no_op_can_beat_the_bound(gpt3_on_4):
    # GPT-3's layers load at most 8.45 between their residual adds: no op's cheapest stage beats a bound of 10
    run = SimpleNamespace(problem=gpt3_on_4, best=(math.inf, None))
    why = LEVELS["stage-cut"].beyond_reach(20.0, 10.0, run)
    assert why is not None and why.startswith("its bound is at most 8.45")
    assert LEVELS["stage-cut"].beyond_reach(20.0, 8.0, run) is None
