"""certify(): gap 0 on tiny instances, the DP's own certificate, the bounds command's payload."""
from __future__ import annotations

import json
import math

import pytest

from placement_dsl import testing
from placement_dsl.certify import LEVELS, Certificate, LevelStatus, certify
from placement_dsl.cli.problems import bounds_payload
from placement_dsl.constraints import Contiguous, DagOrder
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel
from placement_dsl.heuristics.base import DP_CLASS
from placement_dsl.io import Workload
from placement_dsl.objectives import Bottleneck
from placement_dsl.placement import PlacementClass
from placement_dsl.presets import dag_problem
from placement_dsl.problem import Problem, Stages


@pytest.mark.parametrize("instance", [testing.chain, testing.diamond, testing.fig2, testing.overflow_chain])
def test_gap_zero_on_tiny_instances(instance) -> None:
    problem, optimum = instance()
    cert = certify(problem, budget=60.0, gap=0.0)
    assert cert.objective == pytest.approx(optimum)
    assert cert.bound == pytest.approx(optimum)
    assert cert.gap == pytest.approx(0.0, abs=1e-9) and cert.certified
    assert problem.evaluate(cert.placement).objective == pytest.approx(optimum)
    assert cert.proved_by in LEVELS and cert.found_by


def test_stops_once_the_gap_is_met() -> None:
    """Half the work plus the tensor every stage cuts proves 5; greedy's split is worse, and on this graph of few
    ideals the DP runs next (before slicegraph and BRKGA): its split meets the bound and every later level and
    heuristic is skipped."""
    problem, optimum = testing.chain()
    cert = certify(problem, budget=60.0, gap=0.0)
    by_level = {r.level: r for r in cert.levels}
    assert cert.proved_by == "one-or-cut" and cert.bound == pytest.approx(optimum)
    assert all(by_level[lv].status is LevelStatus.SKIPPED for lv in ("stage-cut", "superblock", "guess", "exact"))
    assert [u.method for u in cert.upper] == ["greedy"]
    assert [r.level for r in cert.levels] == ["simple", "capacity", "one-or-cut", "cut-stages", "ordered-memory", "host-share",
                                              "dp", "stage-cut",
                                              "superblock", "guess", "exact"]


def test_contiguous_dp_is_a_certificate_by_itself() -> None:
    problem = Problem(testing.chain_graph([2, 2, 2, 2]), Stages(2), Bottleneck(), [DagOrder(), Contiguous()])
    cert = certify(problem, levels=("simple", "dp"), gap=0.0)
    assert cert.exact_among == DP_CLASS and cert.proved_by == "dp"
    assert cert.gap == 0.0 and cert.objective == pytest.approx(5.0)


def test_dp_without_structure_only_bounds_from_above() -> None:
    base, _ = testing.accelerators_cpu()
    problem = Problem(base.graph, base.cluster, base.objective, [t for t in base.constraints
                                                                 if not isinstance(t, (Contiguous, DagOrder))])
    assert not problem.has(Contiguous) and not problem.has(DagOrder)
    cert = certify(problem, levels=("simple", "dp"), gap=0.0)
    dp = next(r for r in cert.levels if r.level == "dp")
    assert dp.bound is None and dp.status is LevelStatus.NO_BOUND
    assert cert.exact_among is None and cert.proved_by == "simple"


def test_dp_is_exact_for_dag_ordered_identical_stages() -> None:
    problem, optimum = testing.chain()
    assert problem.has(DagOrder)
    cert = certify(problem, levels=("simple", "dp"), gap=0.0)
    dp = next(r for r in cert.levels if r.level == "dp")
    assert dp.status is LevelStatus.OPTIMAL and dp.bound == pytest.approx(optimum)
    assert dp.bound <= testing.brute_force(problem)[0] + 1e-9
    assert cert.exact_among == "dag-ordered" and cert.gap == pytest.approx(0.0, abs=1e-12)


def test_guess_in_worker_processes_matches_in_process() -> None:
    problem, optimum = testing.fig2()
    one = certify(problem, levels=("guess",), gap=0.0, stop_at_gap=False)
    two = certify(problem, levels=("guess",), gap=0.0, workers=2, stop_at_gap=False)
    assert one.levels[0].bound == pytest.approx(two.levels[0].bound)
    assert one.levels[0].bound <= optimum + 1e-9


def test_unknown_level() -> None:
    with pytest.raises(SpecError, match="unknown level"):
        certify(testing.chain()[0], levels=("simple", "lp"))


def test_bounds_command_payload() -> None:
    problem, optimum = testing.diamond()
    workload = Workload(problem.graph, problem.cluster, "json", {})
    payload, text = bounds_payload(dag_problem(workload, CostModel.named("bottleneck")),
                                   levels=["simple", "superblock", "exact"], time_limit=20.0)
    json.dumps(payload)
    assert payload["upper_bound"] == pytest.approx(optimum)
    assert set(payload["ratios"]) == {"simple", "superblock", "exact"}
    assert all(r is None or 0 <= r <= 1 + 1e-9 for r in payload["ratios"].values())
    # the time limit is a total budget and the run stops once the gap is closed: no level runs after the proof
    proved = [r for r in payload["levels"] if r["bound"] is not None and r["bound"] == pytest.approx(optimum)]
    assert proved, payload["levels"]
    after = payload["levels"][payload["levels"].index(proved[0]) + 1:]
    assert all(r["status"] == "skipped" and r["message"] == "gap target met" for r in after)
    assert [lv["level"] for lv in payload["levels"]] == ["simple", "superblock", "exact"]
    assert "exact" in text


def test_certificate_gap() -> None:
    cert = Certificate(None, 10.0, "x", 9.0, "y", gap_target=0.05)
    assert cert.gap == pytest.approx(0.1) and not cert.certified


def test_throughput_levels_on_a_contiguous_problem() -> None:
    problem, optimum = testing.accelerators_cpu()  # Throughput, Memory, Contiguous
    cert = certify(problem, budget=60.0, gap=0.0)
    assert [r.level for r in cert.levels] == ["simple", "capacity", "one-or-cut", "cut-stages", "host-share", "dp", "chain",
                                              "superblock",
                                              "throughput"]
    assert cert.objective == pytest.approx(optimum) and cert.bound == pytest.approx(optimum)
    assert cert.scope is PlacementClass.CONTIGUOUS and cert.proved_by == "cut-stages"  # it prices the host too
    alone = certify(problem, budget=60.0, gap=0.0, levels=("throughput",))
    assert alone.bound == pytest.approx(optimum) and alone.proved_by == "throughput"
    by_level = {r.level: r for r in cert.levels}
    assert by_level["dp"].scope is by_level["chain"].scope is PlacementClass.DP
    assert cert.gap_in(PlacementClass.DP) == pytest.approx(0.0, abs=1e-9)
    assert json.loads(json.dumps(cert.to_dict()))["bound_scope"] == "contiguous placements"


def test_non_contiguous_problem_uses_the_dp_as_warm_start() -> None:
    problem, optimum = testing.diamond_noncontiguous()
    cert = certify(problem, budget=60.0, gap=0.0)
    assert [r.level for r in cert.levels] == ["simple", "capacity", "one-or-cut", "dp", "superblock", "throughput", "neighbourhoods"]
    assert cert.levels[-1].status is LevelStatus.SKIPPED  # the gap was closed before the search
    dp = next(r for r in cert.levels if r.level == "dp")
    assert dp.bound is None and dp.status is LevelStatus.NO_BOUND
    assert cert.objective == pytest.approx(optimum) and cert.bound == pytest.approx(optimum)
    assert cert.scope is PlacementClass.ALL and cert.certified


def test_without_a_placement_from_the_dp_the_upper_bound_comes_from_a_heuristic_that_applies(monkeypatch):
    """The DP over servers refuses large training graphs (too many ideals): a pipeline heuristic still gives the
    certificate its upper bound, instead of 'best inf'."""
    from placement_dsl.certify import FALLBACK_UPPER, UPPER, Level

    problem, optimum = testing.contiguity_binds()
    refused = Level("dp", lambda run, seconds: (None, LevelStatus.NOT_APPLICABLE, "too many ideals", run.scope),
                    closed_form=True)
    monkeypatch.setitem(LEVELS, "dp", refused)
    cert = certify(problem, budget=20.0, levels=("simple", "dp", "superblock"), gap=0.0)
    assert cert.found_by in FALLBACK_UPPER + UPPER and cert.objective >= optimum and cert.objective < float("inf")
    assert cert.gap < 1.0


def test_greedy_gives_the_upper_bound_when_the_slicing_heuristics_find_none(monkeypatch) -> None:
    from placement_dsl import certify as certify_module
    from placement_dsl.errors import InfeasibleError

    real = certify_module.heuristic

    def without_slicing(method, *args, **kwargs):
        if method in ("pipedream", "slicegraph", "brkga"):  # as when the slicing DPs run out of time
            raise InfeasibleError(f"{method}: no valid split in time")
        return real(method, *args, **kwargs)

    monkeypatch.setattr(certify_module, "heuristic", without_slicing)
    problem, _ = testing.chain()
    cert = certify(problem, budget=20.0, levels=("simple",))
    assert cert.found_by == "greedy" and math.isfinite(cert.objective)
