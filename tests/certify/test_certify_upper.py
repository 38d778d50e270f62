"""The upper-bound heuristics a certificate of a DAG-ordered problem runs before its levels.

Greedy's split (O(n + m)) runs first with all the share it needs: last, after an even split with slicegraph and
BRKGA, it was stopped on 20,000 ops (GPT-3 onto 64 stages) and the certificate had no placement at all.
"""
from __future__ import annotations

import math

import pytest

from placement_dsl import certify as certify_module
from placement_dsl import deadline, testing
from placement_dsl.certificate import LevelStatus
from placement_dsl.certify import certify
from placement_dsl.constraints import DagOrder
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck
from placement_dsl.problem import Problem, Stages


def test_greedy_runs_first_with_the_whole_upper_share_in_this_process(monkeypatch):
    """Greedy's split is O(n + m): it runs here, not in a forked child (whose copy-on-write pages and pickled answer
    doubled its CPU on cnn-20000, 0.16 -> 0.30 s of a 5 s bounds at load 6); the searches run in children."""
    import time

    given, forked = [], []
    heuristic = certify_module.heuristic

    def recording(method, *args, time_limit=None, **kwargs):
        given.append((method, time_limit, time.monotonic()))
        return heuristic(method, *args, time_limit=time_limit, **kwargs)

    def guarded(deadline, fn, method, *args, **kwargs):
        forked.append(method)
        return fn(method, *args, **kwargs)
    monkeypatch.setattr(certify_module, "heuristic", recording)
    monkeypatch.setattr(certify_module, "call_within", guarded)
    problem, optimum = testing.chain()
    t0 = time.monotonic()
    cert = certify(problem, budget=8.0, levels=("simple",))
    assert [m for m, _, _ in given][:4] == ["greedy", "pipedream", "slicegraph", "brkga"]
    assert "greedy" not in forked and forked[:3] == ["pipedream", "slicegraph", "brkga"]
    _, limit, at = given[0]
    share = 8.0 - (at - t0)
    assert limit >= 0.45 * 8.0 * (1 - deadline.STOP_MARGIN) - 0.05  # half of the call if it needs it (less
    assert limit <= share  # the scoring's margin): at scale often the only valid placement
    assert cert.objective is not None and cert.objective >= optimum


def _chain6():
    g = Graph([Op(name=f"v{i}", work=1.0 + i % 3, out_bytes=1.0) for i in range(6)],
              [(f"v{i}", f"v{i + 1}") for i in range(5)], name="chain6")
    return Problem(g, Stages(2), Bottleneck(), [DagOrder()])


def test_a_proven_optimum_runs_no_further_upper_bound_heuristic():
    """On a 6-op chain greedy's split (12) leaves a gap that the DP over its 7 ideals closes at once (7, exact over
    the DAG-ordered class): slicegraph and BRKGA (about 0.8 s of Python) could not change the certificate."""
    problem = _chain6()
    cert = certify(problem, budget=20.0, gap=0.0)
    assert (cert.objective, cert.bound, cert.gap) == (7.0, 7.0, 0.0)
    assert [u.method for u in cert.upper] == ["greedy"] and cert.upper[0].objective == 12.0
    assert cert.found_by == "dp" and problem.evaluate(cert.placement).objective == 7.0
    assert cert.to_dict()["heuristics"][0]["method"] == "greedy"


def test_a_graph_of_many_ideals_runs_the_heuristics_before_the_dp(monkeypatch):
    """Beyond DP_FIRST_IDEALS ideals the DP may take its whole share: the heuristics come first, as before;
    PipeDream's path (the chain's own slicing) meets one-or-cut's bound, so slicegraph, BRKGA and the DP do not run."""
    monkeypatch.setattr(certify_module, "DP_FIRST_IDEALS", 3)
    cert = certify(_chain6(), budget=20.0, gap=0.0)
    assert [u.method for u in cert.upper] == ["greedy", "pipedream"]
    assert (cert.objective, cert.bound, cert.found_by) == (7.0, 7.0, "pipedream")
    assert {r.level: r.status for r in cert.levels}["dp"] is LevelStatus.SKIPPED


def test_pipedream_s_path_gives_the_upper_bound_where_slicegraph_is_stopped(monkeypatch):
    """GPT-3 of 20,000 ops onto 16 stages on a busy machine: slicegraph was stopped by its share, and the certificate
    read 78.306 (12.6 %) where PipeDream's path, one slicing DP over the cuts between levels, finds 68.437. It runs
    before slicegraph, as in the start race (starts.LEAD): here slicegraph and BRKGA are stopped, and the best is the
    path's (greedy's split is 12, the chain's optimum 7)."""
    from placement_dsl.deadline import BudgetSpent

    real = certify_module.call_within

    def stopping(deadline, fn, method, *args, **kwargs):
        if method in ("slicegraph", "brkga"):
            raise BudgetSpent(f"{method}: stopped at its share")
        return real(deadline, fn, method, *args, **kwargs)
    monkeypatch.setattr(certify_module, "call_within", stopping)
    problem = _chain6()
    cert = certify(problem, budget=20.0, gap=0.0, levels=())
    runs = {u.method: u.objective for u in cert.upper}
    assert runs["greedy"] == 12.0 and runs["slicegraph"] is None and runs["pipedream"] == 7.0
    assert (cert.found_by, cert.objective) == ("pipedream", 7.0)
    assert problem.evaluate(cert.placement).objective == 7.0


def test_few_ideals_counts_the_down_closed_sets():
    diamond = Graph([Op(name=x, work=1) for x in "abcd"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    assert certify_module.few_ideals(diamond, 6) and not certify_module.few_ideals(diamond, 5)  # {}, a, ab, ac, abc, V


def test_brkga_is_left_out_when_slicegraph_says_a_generation_cannot_fit(monkeypatch):
    """BRKGA's first decode is slicegraph's order: short of a generation of decodes it can only repeat slicegraph
    (on 20,000 ops it was stopped with nothing, after its share)."""
    monkeypatch.setattr(certify_module, "BRKGA_GENERATION", 1e9)
    cert = certify(_chain6(), budget=20.0, gap=0.0, levels=())  # below SLOW_SLICING_OPS: BRKGA runs whatever the
    assert [u.method for u in cert.upper] == ["greedy", "pipedream", "slicegraph", "brkga"]  # seconds (a sweep's rerun
    # differed)
    monkeypatch.setattr(certify_module, "SLOW_SLICING_OPS", 1)
    cert = certify(_chain6(), budget=20.0, gap=0.0, levels=())  # no level: the gap stays open
    # a graph that large also gets the balanced slicing in linear time, first: greedy's fill runs after the searches
    assert [u.method for u in cert.upper] == ["balanced", "pipedream", "slicegraph", "greedy"]
    assert cert.upper[2].work > 0
    monkeypatch.setattr(certify_module, "BRKGA_GENERATION", 0.0)
    cert = certify(_chain6(), budget=20.0, gap=0.0, levels=())
    assert [u.method for u in cert.upper] == ["balanced", "pipedream", "slicegraph", "brkga", "greedy"]


def test_slicegraph_takes_most_of_the_share_and_ends_before_it(monkeypatch):
    """Split evenly with BRKGA, slicegraph was stopped on cnn-20000 k=64 at load 10 (its DP takes 2-6 s there, then
    its placement is scored): it takes SLICING_PORTION of the share, its own limit a margin before its end."""
    given = []

    def recording(deadline, fn, method, *args, time_limit=None, **kwargs):
        given.append((method, time_limit, deadline.left()))
        return fn(method, *args, time_limit=time_limit, **kwargs)
    monkeypatch.setattr(certify_module, "call_within", recording)
    monkeypatch.setattr(certify_module, "BRKGA_GENERATION", 0.0)
    certify(_chain6(), budget=40.0, gap=0.0, levels=())
    _, limit, share = given[1]
    assert [m for m, _, _ in given] == ["pipedream", "slicegraph", "brkga"]  # greedy's split runs here, unforked
    whole = 40.0 * certify_module.UPPER_SHARE
    assert 0.55 * whole <= share <= 0.75 * whole + 1e-6 and limit <= share * (1 - deadline.STOP_MARGIN) + 0.01


def test_on_few_ideals_the_ideals_bounds_and_the_dp_run_before_slicegraph(monkeypatch):
    """BERT-24 inference (32 ops, a host CPU last): ordered-memory (a closed form over the same few ideals) started
    slicegraph and BRKGA before the DP, whose bound then left BRKGA needless."""
    from placement_dsl import levels
    from placement_dsl.cluster import Cluster

    calls = []

    def recording(deadline, fn, method, *args, **kwargs):
        calls.append(method)
        return fn(method, *args, **kwargs)
    monkeypatch.setattr(certify_module, "call_within", recording)
    monkeypatch.setattr(levels.dp, "call_within", recording)
    g = _chain6().graph
    problem = Problem(g, Cluster.accelerators(2, memory=1e9, cpus=1), Bottleneck(), [DagOrder()])
    cert = certify(problem, budget=20.0, gap=0.0)
    rows = {r.level: r for r in cert.levels}
    assert rows["ordered-memory"].status is LevelStatus.OPTIMAL and rows["dp"].status is LevelStatus.OPTIMAL
    # the balanced slicing (beside the host, built here) is the first placement; greedy waits with the others
    assert calls[0] == "dp" and "brkga" not in calls and cert.gap == 0.0
    assert cert.upper[0].method == "spread"


def test_a_large_graph_s_heuristic_stops_earlier_to_score_its_placement(monkeypatch):
    """A search's limit ends before its share by what scoring and handing back its answer costs, at the machine's
    load: slicegraph stopped at its limit on 20,000 ops returned 2.4 s later at load 20 and past its share it was
    stopped with nothing. Sized at 1.5e-4 s per op, the margin held PipeDream's path on GPT-3 of 20,111 ops onto 16
    stages to half of its 1.9 s share, and its 0.9 s slicing DP was stopped (the slicing's 78.306 stood, 12.6 % above
    its 68.437)."""
    margin = certify_module.stop_margin
    monkeypatch.setattr(deadline.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(deadline.os, "getloadavg", lambda: (1.0, 0.0, 0.0))  # idle
    assert margin(10.0, 6) == pytest.approx(1.5)  # a small graph: 15 %
    assert margin(2.0, 20_000) == pytest.approx(0.3)  # 15 %: scoring 20,000 ops idle takes less
    assert margin(10.0, 20_000) == pytest.approx(1.5)
    monkeypatch.setattr(deadline.os, "getloadavg", lambda: (20.0, 0.0, 0.0))  # ten jobs per core
    assert margin(10.0, 40_000) == pytest.approx(10 * deadline.SCORE_CPU_PER_OP * 40_000)
    assert margin(2.0, 20_000) == pytest.approx(1.0)  # never more than half


def test_the_levels_end_before_the_call_to_hand_the_certificate_over():
    from placement_dsl.deadline import Deadline

    assert certify_module._reserved(Deadline(60.0), 20_000).left() == pytest.approx(57.0, abs=0.05)
    assert certify_module._reserved(Deadline(10.0), 20_000).left() == pytest.approx(9.0, abs=0.05)
    assert certify_module._reserved(Deadline(10.0), 6).left() == pytest.approx(10.0, abs=0.05)


def test_slicegraph_keeps_a_floor_when_greedy_spent_the_share(monkeypatch):
    """At load 16 greedy took the heuristics' whole share on 20,000 ops, and slicegraph (81.4 against greedy's 189.75
    on 64 accelerators) never started."""
    given = []
    heuristic = certify_module.heuristic

    def slow_greedy(method, *args, **kwargs):
        if method == "greedy":
            import time
            time.sleep(certify_module.UPPER_SHARE * 20.0 + 0.2)  # past the heuristics' share
        return heuristic(method, *args, **kwargs)

    def recording(deadline, fn, method, *args, time_limit=None, **kwargs):
        given.append((method, deadline.left()))
        return fn(method, *args, time_limit=time_limit, **kwargs)
    monkeypatch.setattr(certify_module, "heuristic", slow_greedy)  # greedy runs here, the searches through
    monkeypatch.setattr(certify_module, "call_within", recording)  # call_within
    cert = certify(_chain6(), budget=20.0, gap=0.0, levels=())
    assert [m for m, _ in given][:2] == ["pipedream", "slicegraph"] and given[1][1] > 0.1 * 14.0
    assert cert.objective == 7.0


def test_beside_a_slow_host_the_accelerators_slicing_is_offered_in_linear_time():
    from placement_dsl.cluster import Cluster

    ops = [Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 30.0}) for i in range(12)]
    g = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(11)])
    problem = Problem(g, Cluster.accelerators(3, cpus=1), Bottleneck(), [DagOrder()])
    cert = certify(problem, budget=20.0, gap=0.0, levels=())
    methods = [u.method for u in cert.upper]
    assert methods[0] == "spread" and methods[-1] == "greedy" and cert.upper[0].objective == pytest.approx(4.0)
    assert cert.objective == pytest.approx(4.0)


def test_on_identical_stages_the_balanced_slicing_is_offered_in_linear_time_before_any_share_is_spent(monkeypatch):
    # a 5 s bounds on GPT-3's 20,111 ops onto 4 stages answered greedy's 983.23: slicegraph's share was spent, while
    # the balanced slicing (268.19) costs O(n + m)
    from placement_dsl.cluster import Cluster

    g = Graph([Op(name=f"v{i}", work=1.0) for i in range(12)], [(f"v{i}", f"v{i + 1}") for i in range(11)])
    problem = Problem(g, Cluster.stages(3), Bottleneck(), [DagOrder()])
    monkeypatch.setattr(certify_module, "UPPER", ("greedy",))  # no slicegraph or BRKGA: the linear splits alone
    monkeypatch.setattr(certify_module, "SLOW_SLICING_OPS", 12)  # a graph as large as those where slicegraph is slow
    cert = certify(problem, budget=20.0, gap=0.0, levels=())
    methods = [u.method for u in cert.upper]
    assert methods[:2] == ["balanced", "greedy"] and cert.upper[0].objective == pytest.approx(4.0)
    assert cert.objective == pytest.approx(4.0) and cert.upper[1].objective > 4.0


def test_the_memory_bounds_run_before_slicegraph_on_any_graph(monkeypatch):
    """On cnn-20000 k=16 ordered-memory's 34,094 closes an 81 % gap; run after the heuristics at load 14 it had no
    time left. The closed-form bounds ranked before the DP now come first whatever the ideals' count."""
    import dataclasses

    from placement_dsl.cluster import Cluster
    from placement_dsl.levels.base import LEVELS

    order = []
    upper = certify_module._upper
    memory = LEVELS["ordered-memory"]

    def recording_upper(run, methods, *args, **kwargs):
        order.extend(methods)
        return upper(run, methods, *args, **kwargs)

    def recording_level(run, seconds):
        order.append("ordered-memory")
        return memory.run(run, seconds)
    monkeypatch.setattr(certify_module, "_upper", recording_upper)
    monkeypatch.setitem(LEVELS, "ordered-memory", dataclasses.replace(memory, run=recording_level))
    monkeypatch.setattr(certify_module, "DP_FIRST_IDEALS", 3)  # many ideals: the DP after the heuristics
    problem = Problem(_chain6().graph, Cluster.accelerators(2, memory=1e9, cpus=1), Bottleneck(), [DagOrder()])
    certify(problem, budget=20.0, gap=0.0)
    # the balanced slicing beside the host first; greedy's fill after the searches
    assert order[:4] == ["ordered-memory", "pipedream", "slicegraph", "brkga"]


def test_a_heuristic_its_share_stopped_runs_again_with_the_time_the_levels_left(monkeypatch):
    """At 20,000 ops slicegraph's share ended before its slicing DP (its work-balanced fallback, 268.19 for GPT-3
    onto 4 stages) and the levels left most of the call unused, where the DP ends at 250.59: here its first run
    gets no time at all, and the certificate's best is the DP's slicing all the same."""
    from placement_dsl.heuristics import run

    first = []

    def starved(deadline, fn, method, *args, time_limit=None, **kwargs):
        if method == "slicegraph" and not first:
            first.append(method)
            time_limit = 0.0
        return fn(method, *args, time_limit=time_limit, **kwargs)
    monkeypatch.setattr(certify_module, "call_within", starved)
    g = Graph([Op(name=f"v{i}", work=1.0 + (i * 7919) % 13, out_bytes=1.0 if i % 50 == 7 else 100.0)
               for i in range(3000)],
              [(f"v{i}", f"v{i + 1}") for i in range(2999)], name="chain3000")
    problem = Problem(g, Stages(4), Bottleneck(), [DagOrder()])
    cert = certify(problem, budget=30.0, levels=("simple",), gap=0.0)
    sliced = run("slicegraph", g, problem.cluster, model=problem.cost_model())
    assert [u.method for u in cert.upper].count("slicegraph") == 2
    stopped = next(u for u in cert.upper if u.method == "slicegraph")  # the stopped run's split
    assert stopped.objective > sliced.objective
    assert cert.objective == pytest.approx(sliced.objective)


def test_a_contiguous_problem_beside_a_host_gets_the_pipeline_heuristics_upper_bound():
    # bounds certifies the contiguous class on a cluster with a host; at 5 s on cnn-20000 it then ran no upper-bound
    # heuristic and answered a bound without any placement
    from placement_dsl.cluster import Cluster
    from placement_dsl.constraints import Contiguous, Memory
    from placement_dsl.objectives import Throughput

    g = Graph([Op(name=f"v{i}", work=1.0) for i in range(12)], [(f"v{i}", f"v{i + 1}") for i in range(11)])
    problem = Problem(g, Cluster.accelerators(3, cpus=1), Throughput(), [Memory(), Contiguous()])
    cert = certify(problem, budget=20.0, gap=0.0, levels=())
    methods = [u.method for u in cert.upper]
    assert methods[0] == "spread" and "greedy" in methods and math.isfinite(cert.objective)


@pytest.mark.parametrize("fits", [False, True])
def test_a_stopped_heuristic_run_again_before_model_levels_that_cannot_fit_takes_all_that_is_left(monkeypatch, fits):
    """GPT-3 of 20,000 ops onto 16 stages on a busy machine: slicegraph, stopped by its share, ran again before the
    MIP levels with half of what was left, was stopped again, and the MIP levels then skipped (~393 s to build): the
    gap stayed 12.6 % where one run of all that time finds the split. Where no level from here can be built, the
    second run takes it all; where one can, half."""
    import time

    from placement_dsl.levels import base

    given = []

    def starved(deadline, fn, method, *args, time_limit=None, **kwargs):
        if method == "slicegraph":
            given.append((deadline.left(), time.monotonic()))
            if len(given) == 1:
                time_limit = 0.0
        return fn(method, *args, time_limit=time_limit, **kwargs)
    monkeypatch.setattr(certify_module, "call_within", starved)
    monkeypatch.setattr(base, "model_seconds", lambda nonzeros: 0.1 if fits else 1e6)  # the MIP levels' estimate
    g = Graph([Op(name=f"v{i}", work=1.0 + (i * 7919) % 13, out_bytes=1.0 if i % 50 == 7 else 100.0)
               for i in range(3000)], [(f"v{i}", f"v{i + 1}") for i in range(2999)], name="chain3000")
    start, budget = time.monotonic(), 30.0
    certify(Problem(g, Stages(4), Bottleneck(), [DagOrder()]), budget=budget, levels=("exact",), gap=0.0)
    assert len(given) >= 2
    seconds, at = given[1]
    left = budget - (at - start)
    assert (0.4 * left <= seconds <= 0.55 * left) if fits else seconds >= 0.85 * left


def test_a_heuristic_stopped_in_python_for_a_cold_kernel_cache_runs_again_compiled_at_the_end(monkeypatch):
    """On a cold kernel cache SliceGraph runs its kernels in Python and is stopped at its share (ColdKernels) while a
    background process compiles them; the certificate waits for that compile with the time the levels left and runs
    it again, compiled: a cold gpt3-2000 onto 4 stages answered balanced's 42.498 (gap 32 %) at 23 s of a 60 s
    ``bounds``, where SliceGraph finds 28.8249."""
    from placement_dsl.errors import PlacementError
    from placement_dsl.heuristics import kernel_cache
    from placement_dsl.heuristics.base import ColdKernels

    cold, waited = {"now": True}, []

    def guarded(deadline, fn, method, *args, **kwargs):
        if method == "slicegraph" and cold["now"]:
            raise ColdKernels("the time limit passed while kernel slice_dp ran in Python (numba's cache was cold)")
        if method in ("pipedream", "brkga"):
            raise PlacementError(f"{method} declines here")
        return fn(method, *args, **kwargs)

    def wait(until):
        waited.append(until)
        cold["now"] = False
        return True
    monkeypatch.setattr(certify_module, "call_within", guarded)
    monkeypatch.setattr(kernel_cache, "compiling", lambda: cold["now"])
    monkeypatch.setattr(kernel_cache, "wait_compiled", wait)
    problem = Problem(testing.chain_graph([3, 1, 4, 1, 5, 9, 2, 6, 5, 3]), Stages(3), Bottleneck(), [DagOrder()])
    cert = certify(problem, budget=10.0, levels=("simple",), gap=0.0)
    runs = [(u.method, u.objective) for u in cert.upper]
    assert [m for m, _ in runs].count("slicegraph") == 2 and runs[-1][0] == "slicegraph" and waited
    first = next(u for u in cert.upper if u.method == "slicegraph")
    assert first.objective is None and "cache was cold" in first.message
    assert cert.objective == pytest.approx(runs[-1][1]) and cert.found_by == "slicegraph"


def test_the_balanced_slicing_comes_first_and_the_cut_stages_bisect_below_it_before_greedy(monkeypatch):
    """Where the work-balanced slicing (milliseconds) is valid, the closed forms before the DP bisect below it before
    greedy and the other heuristics run: greedy first took 1 s of a 5 s ``bounds`` of GPT-3 at 20,111 ops onto 4
    stages, and the cut stages (0.2 s, 250.59 below the slicing's 268.19) were skipped for want of time."""
    order = []

    def recording(deadline, fn, method, *args, **kwargs):
        order.append(method)
        return fn(method, *args, **kwargs)
    import dataclasses

    level = certify_module.LEVELS["cut-stages"]

    def cut_stages(run, seconds):
        order.append("cut-stages")
        return level.run(run, seconds)
    monkeypatch.setattr(certify_module, "call_within", recording)
    monkeypatch.setattr(certify_module, "SLOW_SLICING_OPS", 1)
    monkeypatch.setitem(certify_module.LEVELS, "cut-stages", dataclasses.replace(level, run=cut_stages))
    cert = certify(_chain6(), budget=20.0, gap=0.0, levels=("cut-stages",))
    assert cert.upper[0].method == "balanced"
    assert order[0] == "cut-stages"  # before greedy (here needless once the cut stages prove the slicing optimal)
    assert cert.objective is not None and cert.bound > 0


def test_a_call_loads_the_kernels_of_the_search_it_forks_next_from_its_share(monkeypatch):
    """A forked child loads the kernels its search runs (numba's import and the cached code: 0.4 s of the 0.88 s of
    CPU PipeDream's path took on GPT-3 of 20,111 ops onto 16 stages), and each child after it loaded them again. The
    call loads each search's kernels here, once, before its first child, where its share holds the load; loading
    every method's up front took 1 s of a 5 s ``bounds`` on 20,000 ops, so nothing else is loaded."""
    from placement_dsl import deadline
    from placement_dsl.heuristics import jit

    loads = []
    monkeypatch.setattr(jit, "load_kernels", lambda methods: loads.append(tuple(methods)))
    monkeypatch.setattr(jit, "python_kernels", lambda: False)
    monkeypatch.setattr(deadline, "contention", lambda: 1.0)
    g = testing.chain_graph([1.0 + i % 3 for i in range(40)])
    problem = Problem(g, Stages(2), Bottleneck(), [DagOrder()])
    certify(problem, budget=10.0, levels=("simple",))
    assert loads and loads[0] == ("pipedream",) and all(len(m) == 1 for m in loads)
    loads.clear()
    monkeypatch.setattr(deadline, "contention", lambda: 1e6)  # no share holds the load: the child loads them
    certify(problem, budget=10.0, levels=("simple",))
    assert loads == []


def test_the_heuristics_share_is_theirs_whatever_the_levels_before_them_take(monkeypatch):
    """The closed forms ranked before the DP run before the searches; their share was a window from the call's start,
    which the cut stages used up (5.9 s of a 20 s ``bounds`` on GPT-3 of 20,111 ops onto 16 stages at load 7), and
    PipeDream's path was given 0.4 s: its 68.437 never came back beside the slicing's 78.306."""
    import dataclasses
    import time

    given = []
    level = certify_module.LEVELS["cut-stages"]

    def slow(run, seconds):  # a level that takes all of its share
        time.sleep(seconds)
        return None, LevelStatus.NO_BOUND, "slept", run.scope

    def guarded(deadline, fn, method, *args, **kwargs):
        given.append((method, kwargs["time_limit"]))
        return fn(method, *args, **kwargs)
    monkeypatch.setattr(certify_module, "call_within", guarded)
    monkeypatch.setitem(certify_module.LEVELS, "cut-stages", dataclasses.replace(level, run=slow))
    problem, _ = testing.chain()
    budget = 5.0
    certify(problem, budget=budget, gap=0.0, levels=("cut-stages",))
    limits = dict(given)
    assert "pipedream" in limits
    least = certify_module.LEAD_SHARE * certify_module.UPPER_SHARE * budget * (1 - deadline.STOP_MARGIN)
    assert limits["pipedream"] >= 0.8 * least


def test_the_packing_bound_takes_a_quarter_of_the_simple_level_s_share_at_most(monkeypatch):
    """The simple level runs first and even once the budget is spent: its packing searches took their whole 2 s of
    a 5 s ``bounds`` on GPT-3 of 20,111 ops (245.81), leaving the cut stages (250.59 in 0.2 s) no time."""
    from placement_dsl.levels import simple

    given = []
    real = simple.packing_bound

    def recording(graph, cluster, *args, seconds=None, **kwargs):
        given.append(seconds)
        return real(graph, cluster, *args, seconds=seconds, **kwargs)
    monkeypatch.setattr(simple, "packing_bound", recording)
    problem, _ = testing.chain()
    certify(problem, budget=2.0, levels=("simple",))
    assert given and given[0] <= simple.PACKING_SHARE * 2.0 + 1e-9


def test_with_a_valid_slicing_greedy_comes_after_the_searches_and_the_path_takes_the_lead_share(monkeypatch):
    """GPT-3 of 20,111 ops onto 16 stages, a 10 s bounds at load 6: the work-balanced slicing gave 78.306, then greedy
    (first of the rest, all of the share for an O(n + m) method) gave 983.2 and PipeDream's path (68.437) never ran.
    With a valid slicing known, greedy's fill comes last and PipeDream's path takes half of the share, as in the start
    race."""
    from placement_dsl.starts import LEAD_SHARE

    given = []

    def recording(deadline, fn, method, *args, time_limit=None, **kwargs):
        given.append((method, deadline.left()))
        return fn(method, *args, time_limit=time_limit, **kwargs)
    monkeypatch.setattr(certify_module, "call_within", recording)
    monkeypatch.setattr(certify_module, "SLOW_SLICING_OPS", 1)  # the balanced slicing applies to the small chain
    monkeypatch.setattr(certify_module, "BRKGA_GENERATION", 0.0)
    cert = certify(_chain6(), budget=40.0, gap=0.0, levels=())
    assert [m for m, _ in given] == ["pipedream", "slicegraph", "brkga"]  # greedy's split runs here, unforked, last
    assert [u.method for u in cert.upper] == ["balanced", "pipedream", "slicegraph", "brkga", "greedy"]
    whole = 40.0 * certify_module.UPPER_SHARE
    assert LEAD_SHARE * whole * 0.9 <= given[0][1] <= LEAD_SHARE * whole + 1e-6


def test_a_placement_offered_is_scored_by_one_evaluation(monkeypatch):
    """Each placement the certificate is offered was validated, then evaluated: two passes of the cost model over
    its ops (0.1 s of CPU for greedy's split of 20,000 ops, in a 5 s bounds). Problem.scored gives both at once."""
    passes = []
    scored, evaluate = Problem.scored, Problem.evaluate

    def counted_scored(self, placement):
        passes.append("scored")
        return scored(self, placement)

    def counted_evaluate(self, placement):
        passes.append("evaluate")
        return evaluate(self, placement)
    monkeypatch.setattr(Problem, "scored", counted_scored)
    monkeypatch.setattr(Problem, "evaluate", counted_evaluate)
    monkeypatch.setattr(certify_module, "UPPER", ("greedy",))
    cert = certify(_chain6(), budget=20.0, gap=0.0, levels=())
    assert [u.method for u in cert.upper] == ["greedy"] and cert.objective == 12.0
    assert passes == ["scored"]


def test_a_search_stopped_by_force_at_its_share_runs_again_with_the_time_left(monkeypatch):
    """GPT-3 of 20,111 ops onto 16 stages, a 20 s bounds at load 6: PipeDream's path was stopped by force at its share
    (1.75 s, no answer) and never ran again, while 2.6 s were left unused at the end and its split (68.437) meets the
    cut stages' bound. A search stopped by force is run again, as one its own limit stopped."""
    from placement_dsl.deadline import BudgetSpent

    calls = []
    real = certify_module.call_within

    def first_stopped(deadline, fn, method, *args, **kwargs):
        calls.append(method)
        if method == "pipedream" and calls.count("pipedream") == 1:
            raise BudgetSpent("budget spent: run was stopped at the deadline")
        return real(deadline, fn, method, *args, **kwargs)
    monkeypatch.setattr(certify_module, "call_within", first_stopped)
    monkeypatch.setattr(certify_module, "UPPER", ("pipedream",))
    cert = certify(_chain6(), budget=20.0, gap=0.0, levels=())
    assert calls.count("pipedream") == 2 and cert.found_by == "pipedream" and cert.objective == 7.0


def test_the_first_search_s_kernels_load_before_the_heuristics_share_starts(monkeypatch):
    """A 5 s bounds of GPT-3 of 1,029 ops onto 4 stages at load 5: PipeDream's path had 0.86 s, in which its child
    loaded the compiled kernels (0.35 s of CPU) and was stopped, and slicegraph likewise; the certificate read the
    work-balanced slicing, 42 % above the path's 17.514. The first search's kernels are loaded here before the share
    starts (they serve every search after it), where the call's time left holds the load and the search's share."""
    import time

    loads, given = [], []

    def loading(ops, method, seconds):
        loads.append((method, seconds))
        if len(loads) == 1:
            time.sleep(1.0)  # the load, on a busy machine

    def guarded(deadline, fn, method, *args, **kwargs):
        given.append((method, kwargs["time_limit"]))
        return fn(method, *args, **kwargs)
    monkeypatch.setattr(certify_module.jit, "warm_within", loading)
    monkeypatch.setattr(certify_module, "call_within", guarded)
    problem, _ = testing.chain()
    budget = 8.0
    certify(problem, budget=budget, gap=0.0, levels=("simple",))
    share = certify_module.LEAD_SHARE * certify_module.UPPER_SHARE * budget
    assert loads[0][0] == "pipedream" and loads[0][1] >= 0.9 * (budget - share)  # all the call leaves but its share
    limits = dict(given)
    least = certify_module.LEAD_SHARE * certify_module.UPPER_SHARE * budget * (1 - deadline.STOP_MARGIN)
    assert limits["pipedream"] >= 0.9 * least  # its share whole: the load came before it
