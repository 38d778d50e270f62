"""What a certificate's upper phase runs, and what it never costs the levels.

A single-sample latency certificate starts from the start solve makes (the family's searches raced, then the
latency search from the best), runs its heuristics again with the time the levels leave, and loads no Pyomo for
them; the closed-form levels of milliseconds run before the heuristics; a heuristic stopped with nothing (a kernel
in Python on a cold cache) leaves the certificate to go on.
"""
from __future__ import annotations

import subprocess
import sys
import time

from placement_dsl import certify as certify_module
from placement_dsl import starts
from placement_dsl.certificate import LevelStatus
from placement_dsl.certify import certify
from placement_dsl.cluster import Cluster, Device
from placement_dsl.constraints import Subgraphs
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics.base import ColdKernels
from placement_dsl.levels import dp as dp_level
from placement_dsl.objectives import Latency, Throughput
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem, Stages
from placement_dsl.progress import Recorder, reporting


def fresh(code: str) -> subprocess.CompletedProcess:
    """``code`` run by a fresh interpreter (what a first call imports), which must exit 0."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return out


def _latency_problem(*terms) -> Problem:
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=3, out_bytes=1), Op(name="c", work=2)],
              [("a", "b"), ("b", "c")])
    cluster = Cluster([Device(name=f"acc{i}", invocations=True) for i in range(2)])
    return Problem(g, cluster, Latency(), list(terms))


def test_the_latency_upper_phase_offers_the_start_solve_makes(monkeypatch):
    """Before, greedy and latency-best alone ran (and, for a 5-op graph at load 14, none in its 2 s share): the
    certificate held the fallback split's 4.5 where latency-best finds 3.0. Now solve's own start runs there."""
    problem = _latency_problem()
    chosen = Placement.from_mapping(problem.graph, problem.cluster, {"a": "acc0", "b": "acc0", "c": "acc0"})
    asked = []

    def resolved(p, spec, **kwargs):
        asked.append(spec)
        return starts.Start(chosen, p.evaluate(chosen), "", None, "raced")
    monkeypatch.setattr(starts, "resolve", resolved)
    cert = certify(problem, budget=20, levels=("critical-path",))
    assert asked and asked[0] == starts.AUTO
    assert ("raced", problem.evaluate(chosen).objective) in [(u.method, u.objective) for u in cert.upper]
    assert cert.objective <= problem.evaluate(chosen).objective


def test_the_single_sample_heuristics_run_again_with_the_time_the_levels_left(monkeypatch):
    """A 2 s share of an 8 s certificate stopped latency-best's chain split; the levels took 0.1 s and the call
    ended at 4.5 with 6 s unused."""
    given = []
    monkeypatch.setattr(certify_module, "latency_upper", lambda run, seconds: given.append(seconds))
    certify(_latency_problem(), budget=20, levels=("critical-path",))
    assert len(given) == 2
    assert given[0] <= 5.0 < given[1]  # a quarter of the call, then what the levels left


def test_the_heuristics_under_the_problems_q_load_no_pyomo():
    """The subgraphs per accelerator were read from the latency formulation, whose import (Pyomo) took 3 s of a 2 s
    share at load 14: no heuristic ran."""
    code = ("import sys\n"
            "from placement_dsl.beyond import search\n"
            "from placement_dsl.deadline import Deadline\n"
            "from placement_dsl.problem import subgraphs_per_accelerator\n"
            f"sys.path.insert(0, {__file__.rsplit('/', 1)[0]!r})\n"
            "from test_certify_upper_phase import _latency_problem\n"
            "from placement_dsl.constraints import Subgraphs\n"
            "p = _latency_problem(Subgraphs(1))\n"
            "got = []\n"
            "search(p, ('greedy',), Deadline(30), lambda placement, who: got.append(who))\n"
            "assert got == ['greedy'] and subgraphs_per_accelerator(p) == 1, got\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyomo'))\n")
    out = fresh(code)
    assert out.stdout.strip() == "[]"
    assert Subgraphs(1).q == 1


def test_the_closed_forms_of_milliseconds_run_before_the_heuristics_spend_the_budget(monkeypatch):
    """A 4 s bounds of 1,502 ops at load 14: start-up and the heuristics took it all and every level, simple's
    and capacity's included, read "budget spent": bound 0."""
    from placement_dsl.levels import base

    def spent(run, seconds):
        run.clock.at = time.monotonic()  # the heuristics took every second left
    monkeypatch.setattr(certify_module, "latency_upper", spent)
    monkeypatch.setattr(base, "slowdown", lambda: 1e9)  # a load at which no level runs past the budget
    cert = certify(_latency_problem(), budget=20, levels=("critical-path", "latency-lp"))
    rows = {r.level: r for r in cert.levels}
    assert rows["critical-path"].status is LevelStatus.OPTIMAL and rows["critical-path"].bound == 7.0
    assert rows["latency-lp"].status is LevelStatus.SKIPPED
    assert cert.bound == 7.0


def test_a_polish_stopped_on_a_cold_kernel_cache_leaves_the_certificate_to_go_on(monkeypatch):
    """The DP level's polish runs here: its kernel in Python raised ColdKernels out of certify (4 ops)."""
    real = dp_level.heuristic

    def cold(method, *args, **kwargs):
        if method == "polish":
            raise ColdKernels("the time limit passed while kernel group_moves ran in Python")
        return real(method, *args, **kwargs)
    monkeypatch.setattr(dp_level, "heuristic", cold)
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=1, out_bytes=1), Op(name="c", work=2)],
              [("a", "b"), ("b", "c")])
    cert = certify(Problem(g, Stages(2), Throughput(), []), budget=20, levels=("simple", "dp"), stop_at_gap=False)
    assert cert.placement is not None
    polished = [u for u in cert.upper if u.method.startswith("polish")]
    assert polished and all(u.objective is None and "Python" in u.message for u in polished)


def test_the_closed_forms_of_milliseconds_still_run_once_start_up_spent_the_budget(monkeypatch):
    """Start-up took all of a 4 s bounds of 1,502 ops and 3,000 edges at load 14: simple, capacity (0.05 and
    0.001 s there) and critical-path (0.13 s) were estimated at route-path's rate per op and edge and skipped."""
    from placement_dsl.deadline import Deadline
    from placement_dsl.levels import base

    monkeypatch.setattr(base, "slowdown", lambda: 1.0)
    n = 2_500  # 4,999 ops and edges: 0.15 s at route-path's rate, over the 0.1 s a late level had
    g = Graph([Op(name=f"v{i}", work=1.0, out_bytes=1.0) for i in range(n)],
              [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])
    spent = Deadline(1e-9)
    time.sleep(0.01)
    cert = certify(Problem(g, Cluster([Device(name=f"acc{i}", invocations=True) for i in range(2)]), Latency()),
                   budget=20, levels=("critical-path", "latency-lp"), deadline=spent)
    rows = {r.level: r for r in cert.levels}
    assert rows["critical-path"].bound == float(n) and rows["latency-lp"].status is LevelStatus.SKIPPED
    cert = certify(Problem(g, Stages(2), Throughput()), budget=20, levels=("simple", "capacity"), deadline=spent)
    assert [r.status for r in cert.levels] == [LevelStatus.OPTIMAL] * 2 and cert.bound == n / 2


def test_the_split_a_small_graph_falls_back_on_loads_no_numba():
    """The last resort of a certificate with no placement: its balanced split loaded numba and the slicing kernels,
    6-12 s at load 14 for 5 ops, past the call's limit plus its grace."""
    code = ("import sys, time\n"
            f"sys.path.insert(0, {__file__.rsplit('/', 1)[0]!r})\n"
            "from test_certify_upper_phase import _latency_problem\n"
            "from placement_dsl.heuristics.fallback import fallback\n"
            "p = _latency_problem()\n"
            "found = fallback('certify', p.graph, p.cluster, p.cost_model(), 'certify')\n"
            "valid = p.is_valid(found.placement)\n"
            "assert valid, found\n"
            "print('numba' in sys.modules)\n")
    out = fresh(code)
    assert out.stdout.strip() == "False"


def test_the_single_sample_heuristics_run_again_before_a_model_level_while_no_placement_is_held(monkeypatch):
    """A Pin refused greedy's split of 6 ops and a 1.5 s share stopped latency-best's: the latency IP then ran 4.6 s
    without a start and found nothing (no placement at all), where solve's start and IP prove 24.0 in 3.3 s."""
    given = []
    monkeypatch.setattr(certify_module, "latency_upper", lambda run, seconds: given.append((seconds, len(run.rows))))
    certify(_latency_problem(), budget=20, levels=("critical-path", "latency-lp"))
    assert [rows for _, rows in given][:2] == [1, 1]  # before the upper phase, critical-path; again before the LP
    assert len(given) == 3 and given[1][0] < given[0][0] * 4  # a quarter of what was left, then the end's


def _pinned_problem() -> Problem:
    """6 ops onto an accelerator and a CPU, the fifth pinned to the CPU, one subgraph on the accelerator: greedy's fill
    runs v0-v3 and v5 there (two subgraphs, 26.0), which Subgraphs(1) refuses; every op on the CPU is valid (58.0)."""
    from placement_dsl.constraints import Pin

    acc, cpu = [2, 1, 4, 1, 4, 1], [5, 11, 10, 11, 10, 11]
    ops = [Op(name=f"v{i}", work={"accelerator": float(a), "cpu": float(c)}, out_bytes=1.0)
           for i, (a, c) in enumerate(zip(acc, cpu, strict=True))]
    edges = [("v0", "v1"), ("v0", "v3"), ("v1", "v2"), ("v1", "v3"), ("v1", "v4"), ("v2", "v3"), ("v3", "v4"),
             ("v3", "v5"), ("v4", "v5")]
    cluster = Cluster([Device(name="acc0", kind="accelerator", invocations=True), Device(name="cpu0", kind="cpu")])
    return Problem(Graph(ops, edges), cluster, Latency(), [Pin("v4", "cpu0"), Subgraphs(1)])


def test_the_fallback_split_keeps_the_pin_and_the_subgraphs_per_accelerator():
    """The fallback chose among its splits by the problem's cost model without q: greedy's (26.0) over every op on
    the CPU, and one device meant an accelerator only (the pin ruled it out), so no split it held was valid."""
    from placement_dsl.deadline import Deadline
    from placement_dsl.heuristics.fallback import scored_fallback

    problem = _pinned_problem()
    found, valid, ev = scored_fallback(problem, Deadline(30.0), "certify", "certify")
    assert valid and found.info["fallback"] == "one-device" and ev.objective == 58.0
    assert set(found.placement.assign.tolist()) == {problem.cluster.names.index("cpu0")}


def test_a_certificate_holds_a_valid_placement_where_greedy_breaks_a_pin_and_the_searches_are_stopped(monkeypatch):
    """A 6-op latency problem with a Pin and Subgraphs(1), certify budget 8: greedy's split broke the pin's
    subgraphs and latency-best's share stopped it, and the certificate ended with no placement where solve finds
    24.0. The fallback split that keeps them is offered in the upper phase, a start for the levels after it."""
    from placement_dsl.levels import latency

    monkeypatch.setattr(latency, "search", lambda *args, **kwargs: None)  # every search stopped with nothing
    monkeypatch.setattr(latency, "_start", lambda *args, **kwargs: None)
    problem = _pinned_problem()
    with reporting(Recorder()) as rec:
        cert = certify(problem, budget=8.0, levels=("critical-path", "route-path"))
    assert [e.fields["best"] for e in rec.of("certify") if e.fields["level"] == "start"] == [58.0]  # before the levels
    assert cert.placement is not None and problem.is_valid(cert.placement)
    assert cert.objective == problem.evaluate(cert.placement).objective == 58.0
    assert [u.method for u in cert.upper].count("fallback") == 1  # built once: not again after the levels
    assert cert.bound <= cert.objective
