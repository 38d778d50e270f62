"""Live progress: the reporters, the command line's choice of one, and the long runs that report."""
from __future__ import annotations

import io
import math
import time

import pytest

from placement_dsl import progress
from placement_dsl.cli import main
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import DagOrder
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.objectives import Bottleneck
from placement_dsl.problem import Problem
from placement_dsl.progress import LineReporter, LogReporter, Recorder, Reporter, for_terminal, report, reporting


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _chain(n: int = 12) -> Graph:
    return Graph([Op(name=f"o{i}", work=1.0 + i % 3, out_bytes=1.0) for i in range(n)],
                 [(f"o{i}", f"o{i + 1}") for i in range(n - 1)])


def test_silent_by_default_and_recorder_in_a_block():
    report("dp", ideals=3)  # nobody listens: nothing happens
    with reporting(Recorder()) as rec:
        report("brkga", generation=1, best=2.5)
        with reporting(Recorder()) as inner:
            report("mip", incumbent=1.0)
        report("brkga", generation=2, best=2.0)
    assert [e.task for e in rec.events] == ["brkga", "brkga"] and [e.task for e in inner.events] == ["mip"]
    assert rec.events[0].seconds <= rec.events[1].seconds and rec.of("brkga")[1].fields["best"] == 2.0


def test_line_reporter_rewrites_one_line_and_clears_it():
    out = io.StringIO()
    line = LineReporter(out, interval=3600)
    line.update("brkga", generation=1, best=1.5)
    line.update("brkga", generation=2, best=1.25)  # throttled: same task within the interval
    line.update("certify", level="dp", bound=math.inf)
    text = out.getvalue()
    assert "\rbrkga: generation 1, best 1.5" in text and "generation 2" not in text
    assert "certify: level dp, bound inf" in text and "\n" not in text
    line.close()
    assert out.getvalue().endswith("\r") and out.getvalue().count("\r") == 4


def test_for_terminal_a_line_on_a_terminal_plain_lines_in_a_log_and_nothing_quiet():
    assert isinstance(for_terminal(stream=io.StringIO()), LogReporter)
    assert isinstance(for_terminal(stream=_Terminal()), LineReporter)
    assert type(for_terminal(quiet=True, stream=_Terminal())) is Reporter
    assert type(for_terminal(quiet=True, stream=io.StringIO())) is Reporter


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_log_reporter_writes_timed_lines_at_each_phase_and_every_interval():
    out, clock = io.StringIO(), _Clock()
    log = LogReporter(out, interval=5.0, delay=1.0, clock=clock, heartbeat=False)
    log.update("dp", ideals=3)  # within the delay: kept, not written
    clock.now += 2
    log.update("dp", ideals=40)  # the first line
    clock.now += 1
    log.update("dp", ideals=50)  # same phase within the interval: kept
    log.update("dp", phase="dp", pairs=7)  # a new phase of the task: written at once
    log.update("mip", incumbent=9.5, bound=7.0, gap="26.32%")  # a new task: written at once
    clock.now += 6
    log.update("mip", incumbent=9.0, bound=8.0, gap="11.11%")  # the interval has passed
    clock.now += 1
    log.update("mip", incumbent=8.5, bound=8.25, gap="2.94%")
    log.close()  # the last report, not yet written
    assert out.getvalue().splitlines() == [
        "[     2.0s] dp: ideals 40",
        "[     3.0s] dp: phase dp, pairs 7",
        "[     3.0s] mip: incumbent 9.5, bound 7, gap 26.32%",
        "[     9.0s] mip: incumbent 9, bound 8, gap 11.11%",
        "[    10.0s] mip: incumbent 8.5, bound 8.25, gap 2.94%",
    ]
    assert "\r" not in out.getvalue()


def test_log_reporter_repeats_a_quiet_phase_every_interval():
    out, clock = io.StringIO(), _Clock()
    log = LogReporter(out, interval=5.0, delay=1.0, clock=clock, heartbeat=False)
    log.tick()  # nothing reported yet
    log.update("mip", incumbent=9.0, bound=8.0)
    clock.now += 0.5
    log.tick()  # within the delay
    clock.now += 1.5
    log.update("mip", incumbent=9.0, bound=8.5)  # the first line
    clock.now += 4
    log.tick()  # 4 s since the last line
    clock.now += 1
    log.tick()  # 5 s: the latest report again
    clock.now += 12
    log.tick()
    log.close()  # everything written already
    assert out.getvalue().splitlines() == ["[     2.0s] mip: incumbent 9, bound 8.5",
                                           "[     7.0s] mip: incumbent 9, bound 8.5",
                                           "[    19.0s] mip: incumbent 9, bound 8.5"]


def test_log_heartbeat_writes_while_the_run_is_silent():
    out = io.StringIO()
    log = LogReporter(out, interval=0.1, delay=0.0)
    log.update("certify", level="superblock", bound=3.0)
    time.sleep(0.5)
    log.close()
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all(line.endswith("certify: level superblock, bound 3") for line in lines)
    assert not log._thread.is_alive()


def test_log_reporter_leaves_a_quick_run_silent():
    out = io.StringIO()
    log = LogReporter(out, delay=3600, heartbeat=False)
    log.update("dp", ideals=3)
    log.close()
    assert out.getvalue() == ""


def test_cli_writes_progress_lines_to_a_redirected_stderr(capsys, monkeypatch):
    monkeypatch.setattr(progress, "LOG_DELAY", 0.0)
    assert main(["solve", "zoo:transformer-small", "--method", "dp", "--json"]) == 0
    lines = capsys.readouterr().err.splitlines()
    progress_lines = [line for line in lines if line.startswith("[")]
    assert progress_lines and all(line.split("] ")[1].startswith("dp: ") for line in progress_lines), lines
    assert not any("\r" in line for line in lines)


def test_mip_reports_are_in_the_problem_units():
    with reporting(Recorder()) as rec, progress.scaled(10.0):
        progress.report_mip(2.0, 1.5)
        progress.report_mip(None, 1.0)
    first, second = (e.fields for e in rec.events)
    assert first == {"incumbent": 20.0, "bound": 15.0, "gap": "25.00%"}
    assert math.isnan(second["incumbent"]) and second["gap"] == "-"


def test_heuristics_report_their_progress():
    g = _chain()
    with reporting(Recorder()) as rec:
        run("dp", g, Cluster.stages(3))
        run("brkga", g, Cluster.stages(3), evaluations=400, population=50)
    dp = rec.of("dp")
    assert dp and dp[-1].fields["ideals"] == g.n + 1 and "pairs" in dp[-1].fields
    gens = [e.fields["generation"] for e in rec.of("brkga")]
    assert gens == list(range(2, len(gens) + 2)) and len(gens) >= 3
    best = [e.fields["best"] for e in rec.of("brkga")]
    assert best == sorted(best, reverse=True)


def test_certify_and_mip_report_bounds():
    from placement_dsl.certify import certify

    problem = Problem(_chain(), Cluster.stages(3), Bottleneck(), [DagOrder()])
    with reporting(Recorder()) as rec:
        cert = certify(problem, budget=20, levels=("simple", "superblock", "exact"), gap=0.0, stop_at_gap=False)
    levels = [e.fields["level"] for e in rec.of("certify")]
    assert levels == ["simple", "start", "superblock", "exact"]  # the free closed form before the heuristics
    assert rec.of("certify")[-1].fields["bound"] == pytest.approx(cert.bound)
    mip = rec.of("mip")
    assert mip and all(e.fields["incumbent"] >= cert.objective * (1 - 1e-6) for e in mip
                       if not math.isnan(e.fields["incumbent"]))


def test_quiet_flag_is_accepted(capsys):
    assert main(["solve", "zoo:transformer-small", "--method", "dp", "--quiet", "--json"]) == 0
    assert capsys.readouterr().err == ""


def test_latency_heuristics_report_their_progress():
    from placement_dsl.evaluate import CostModel, evaluate
    from placement_dsl.testing import latency_graph

    g, c, lat = latency_graph(), Cluster.accelerators(2, cpus=1, bandwidth=1.0), CostModel.named("latency")
    with reporting(Recorder()) as rec:
        ls = run("latency-local-search", g, c, model=lat, restarts=3)
    events = [e.fields for e in rec.of("latency-local-search")]
    phases = list(dict.fromkeys(e["phase"] for e in events))
    assert phases == ["start greedy", "start dp", "restart 1/3", "restart 2/3", "restart 3/3", "module re-solves"]
    evals = [e["evaluations"] for e in events]
    best = [e["best"] for e in events]
    assert evals == sorted(evals) and evals[-1] == ls.evaluations > 0
    assert best == sorted(best, reverse=True) and all(b <= e["latency"] for b, e in zip(best, events))
    assert best[-1] == pytest.approx(evaluate(ls.placement, lat).objective) == pytest.approx(13.5)

    with reporting(Recorder()) as rec:
        lb = run("latency-best", g, c, model=lat, restarts=2)
    events = [e.fields for e in rec.of("latency-best")]
    assert [e["candidate"] for e in events] == ["greedy", "one-device", "chain", "spine", "dp", "dpl",
                                                      "latency-local-search"]
    assert [e["latency"] for e in events] == [cand.get("latency", math.nan) for cand in lb.info["candidates"]]
    assert events[-1]["best"] == pytest.approx(lb.objective) and rec.of("latency-local-search")


def test_random_orders_report_each_improvement_and_each_percent():
    branches = [Op(name=f"b{i}", work=float(1 + (7 * i) % 5), out_bytes=1.0) for i in range(16)]
    g = Graph([Op(name="s", work=1.0, out_bytes=1.0), *branches, Op(name="t", work=1.0)],
              [("s", b.name) for b in branches] + [(b.name, "t") for b in branches])
    with reporting(Recorder()) as rec:  # a fork-join: the order of the branches decides the slicing
        result = run("random", g, Cluster.stages(3), evaluations=250, seed=3)
    events = [e.fields for e in rec.of("random")]
    orders = [e["orders"] for e in events]
    assert orders == sorted(set(orders)) and orders[-1] == 250 and {e["of"] for e in events} == {250}
    assert set(range(2, 251, 2)) <= set(orders)  # every 1 % of 250 orders, at least
    best = [e["best"] for e in events]
    assert best == sorted(best, reverse=True) and best[-1] == pytest.approx(result.objective)
    assert len(set(best)) >= 2  # the first order was improved on, and reported when it was
