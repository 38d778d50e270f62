"""Every heuristic honours a time limit: it returns its best placement so far and says it stopped; the DP over
ideals declines graphs it cannot hold before building anything."""
from __future__ import annotations

import time

import numpy as np
import pytest

from placement_dsl.cluster import Cluster, Device
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import names, registry, run
from placement_dsl.heuristics.base import STOPPED
from placement_dsl.heuristics.fallback import fallback
from placement_dsl.zoo import regal

BUILT_AT_ONCE = {"greedy", "one-device", "pipedream"}  # one pass: nothing to cut short
MAKESPAN = {"list", "cpop", "one-device-best", "schedule-ls", "schedule-lns", "makespan-lns", "m-sct", "getf"}
LATENCY = {"latency-local-search", "latency-best", "latency-lns"}


def chain(n: int, seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    return Graph([Op(name=f"v{i}", work=float(rng.random()), out_bytes=1.0) for i in range(n)],
                 [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])


def _case(method: str) -> tuple[Graph, Cluster, CostModel | None]:
    """An input on which ``method`` searches for a while without a limit."""
    if method == "dp-servers":  # 41 ideals, under its limit of 64
        return chain(40), Cluster.hierarchical(2, 2, intra=8.0, inter=1.0), None
    if method in ("dp", "dpl"):  # DPL's sweep alone visits 4.5 million pairs
        return chain(3000), Cluster.stages(4), None
    g = regal(0, n=34).graph  # 94,620 ideals
    if method in MAKESPAN:  # the list schedulers' devices run one op at a time (MOIRAI)
        return g, Cluster([Device(name=f"stage{i}", invocations=False) for i in range(8)]), CostModel.named("makespan")
    return g, Cluster.stages(8), CostModel.named("latency") if method in LATENCY else None


@pytest.mark.parametrize("method", sorted(names()))
def test_every_method_returns_a_placement_at_once_and_says_it_stopped(method):
    graph, cluster, model = _case(method)
    t0 = time.perf_counter()
    result = run(method, graph, cluster, model=model, time_limit=0.0)
    assert time.perf_counter() - t0 < 120  # generous: no method searches on
    assert evaluate(result.placement, model or CostModel()).valid
    if method not in BUILT_AT_ONCE:
        assert result.info.get("stopped") == STOPPED, result.info
        assert result.exact_among is None


@pytest.mark.parametrize("method", ["dp", "slicegraph", "random"])
def test_a_limit_not_reached_changes_nothing(method):
    graph, cluster, model = regal(1, n=20).graph, Cluster.stages(3), None
    free, limited = run(method, graph, cluster, model=model), run(method, graph, cluster, model=model, time_limit=600)
    assert "stopped" not in limited.info and limited.objective == free.objective


def test_a_negative_time_limit_is_bad_input():
    with pytest.raises(SpecError, match=r"^greedy: time_limit must be a number of seconds >= 0 or None, got -1$"):
        run("greedy", chain(3), Cluster.stages(2), time_limit=-1)


def test_dp_stopped_before_its_lattice_returns_dpls_split_with_the_capacity_bound():
    graph, cluster = regal(0, n=34).graph, Cluster.stages(8)  # DPL: 35 ideals; the DP: 94,620, stopped at 4,096
    cut = run("dp", graph, cluster, time_limit=0.0)
    assert cut.info["stopped"] == STOPPED and "enumerating the ideals" in cut.info["stopped_in"]
    assert cut.objective == pytest.approx(run("dpl", graph, cluster).objective)
    assert 0 < cut.bound < cut.objective and cut.exact_among is None


def _boom(*args, **kwargs):
    raise AssertionError("the ideals were enumerated")


def test_dp_declines_a_wide_graph_before_enumerating_its_ideals(monkeypatch):
    from placement_dsl.heuristics import ideal_kernels

    monkeypatch.setattr(ideal_kernels, "enumerate_ideals", _boom)
    ops = [Op(name=f"c{c}_{i}", work=1.0, out_bytes=1.0) for c in range(30) for i in range(14)]
    wide = Graph(ops, [(f"c{c}_{i}", f"c{c}_{i + 1}") for c in range(30) for i in range(13)])  # 15^30 ideals
    t0 = time.perf_counter()
    with pytest.raises(SpecError, match=r"has at least 2\^30 ideals \(30 of its 420 supernodes lie side by side"):
        run("dp", wide, Cluster.stages(4))
    # ten chains of 40 joined at both ends: no level wider than 10 (2^10 ideals), 41^10 ~ 2^53.6, counted past
    # max_ideals from the frontier's patterns (the sampled estimate said 2^54)
    ops = [Op(name=f"c{c}_{i}", work=1.0, out_bytes=1.0) for c in range(10) for i in range(40)]
    ops += [Op(name="s", work=1.0, out_bytes=1.0), Op(name="t", work=1.0)]
    edges = [(f"c{c}_{i}", f"c{c}_{i + 1}") for c in range(10) for i in range(39)]
    edges += [("s", f"c{c}_0") for c in range(10)] + [(f"c{c}_39", "t") for c in range(10)]
    with pytest.raises(SpecError, match=r"has more than 2000000 ideals \(402 supernodes\)"):
        run("dp", Graph(ops, edges), Cluster.stages(4))
    assert time.perf_counter() - t0 < 30  # milliseconds once compiled: the enumeration took 24-52 s at 420 ops


def test_dpl_sizes_its_path_not_the_wide_graph():
    # DPL's path through 30 chains side by side numbers its nodes out of topological order: sized as numbered,
    # its 421 prefixes looked like 2^30 ideals and DPL was declined
    ops = [Op(name=f"c{c}_{i}", work=1.0, out_bytes=1.0) for c in range(30) for i in range(14)]
    wide = Graph(ops, [(f"c{c}_{i}", f"c{c}_{i + 1}") for c in range(30) for i in range(13)])
    result = run("dpl", wide, Cluster.stages(4))
    assert result.info["ideals"] == 421 and evaluate(result.placement).valid


def test_dp_on_a_long_chain_declines_without_dense_arrays():
    # 100,000 ops: a dense predecessor matrix would be 9.3 GiB; the ideals' bitsets alone 2.3 GiB, past the
    # 2 GiB limit (200,000 ops said the same at twice the time, most of it building the graph)
    with pytest.raises(SpecError, match=r"100000 supernodes: its ideals as bitsets need at least 2\.3 GiB"):
        run("dp", chain(100_000), Cluster.stages(4), time_limit=60)


def test_dp_on_a_chain_of_20k_ops_stops_at_its_limit_with_a_split():
    graph = chain(20_000)
    t0 = time.perf_counter()
    result = run("dp", graph, Cluster.stages(4), time_limit=2.0)
    assert time.perf_counter() - t0 < 90  # generous slack (the cut itself comes within a second or two)
    assert result.info["stopped"] == STOPPED and evaluate(result.placement).valid
    assert result.objective < 0.3 * graph.work("*").sum()  # the balanced fallback, not one device


@pytest.mark.parametrize("method", ["pipeline", "gpipe-split"])
def test_chain_dps_decline_before_allocating_tables_over_all_pairs(method):
    # 30,000 positions: their pair tables would take 100+ GiB (a MemoryError, or the machine's swap)
    with pytest.raises(SpecError, match=r"30000 positions along its DFS order need \d+\.\d GiB of tables"):
        run(method, chain(30_000), Cluster.stages(4))


def test_pipedream_planner_on_one_server_plans_a_long_chain_in_one_row_of_tables():
    # one server: the planner's tables are one row of positions x (P + 1); sized as the pipeline DP's pair tables
    # it was refused from ~5,100 positions (GPT-3 at 5,089 and 20,111 ops)
    graph = chain(6_000)
    result = run("pipedream-planner", graph, Cluster.stages(4))
    assert result.info["positions"] == 6_000 and evaluate(result.placement).valid
    assert result.objective < 0.3 * graph.work("*").sum()


@pytest.mark.parametrize("method", ["brkga", "random"])
def test_an_order_search_cuts_its_first_decode_at_the_limit(method):
    # the slicing DP of a 50,000-op chain on four stages takes ~0.1-0.5 s even when it visits few prefixes: the
    # first decode, always made, is cut at a limit of 0.02 s and the order's work-balanced slicing returned
    graph = chain(50_000)
    result = run(method, graph, Cluster.stages(4), time_limit=0.02)
    assert result.info["stopped"] == STOPPED and "slicing DP" in result.info["stopped_in"]
    assert evaluate(result.placement).valid and result.objective < 0.3 * graph.work("*").sum()


def test_a_heuristic_from_the_command_line_gets_what_is_left_of_the_commands_budget(tmp_path, monkeypatch):
    # `solve --method M --time-limit S` gave the heuristic all S seconds after reading the workload (10 s or more
    # for a 20,000-op file on a loaded machine): the command ended S + reading + answer after its start
    from placement_dsl import heuristics
    from placement_dsl.cli import build_parser, commands
    from placement_dsl.io import Workload, save_workload

    path = tmp_path / "chain.json"
    save_workload(Workload(chain(50), Cluster.stages(2)), path)
    seen = {}
    real = heuristics.run

    def spy(method, graph, cluster, **kw):
        seen["time_limit"] = kw.get("time_limit")
        return real(method, graph, cluster, **kw)

    monkeypatch.setattr(heuristics, "run", spy)
    args = build_parser().parse_args(["solve", str(path), "--method", "greedy", "--time-limit", "30", "--json"])
    args.started = time.monotonic() - 20.0  # 20 s of the 30 already spent (the interpreter, the reader)
    commands.cmd_solve(args)
    assert seen["time_limit"] is not None and seen["time_limit"] <= 10.0 - 2.0 + 0.01


def test_a_heuristic_taking_more_keywords_still_takes_its_time_limit_from_the_command_line():
    # latency-best passes its other keywords on (**search): the command line dropped its --time-limit as
    # "applies only to the MIP methods", and a 20,000-op graph ran its DPL baseline for minutes
    from placement_dsl.cli.options import accepted_options

    assert {"time_limit", "seed"} <= accepted_options("latency-best")
    # its declared options are what it passes on; --evaluations is not one (the local search counts max_evaluations)
    assert "evaluations" not in accepted_options("latency-best") and "max_evaluations" in accepted_options("latency-best")


def _heavy_head(n: int = 3000) -> tuple[Graph, Cluster]:
    """A chain whose first two ops overfill one device together: the work-balanced slicing puts both on the first."""
    ops = [Op(name=f"v{i}", work=1.0, param_bytes=6.0 if i < 2 else 0.0) for i in range(n)]
    return Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(n - 1)]), Cluster.stages(4, memory=10.0)


@pytest.mark.parametrize("method", ["slicegraph", "mla", "random"])
def test_a_method_stopped_with_a_split_that_overfills_memory_answers_a_valid_one(method):
    graph, cluster = _heavy_head()
    result = run(method, graph, cluster, time_limit=0.0)
    assert result.info["stopped"] == STOPPED
    assert evaluate(result.placement, CostModel()).valid, result.info
    assert "invalid" in result.info["stopped_in"] and result.info["fallback"]



def test_run_gives_a_stopped_methods_invalid_split_the_fallback_the_methods_use(monkeypatch):
    """One fallback: the split :func:`run` answers for a stopped method whose own split the cost model rejects is the
    one a method stopped before it holds a split answers (:func:`placement_dsl.heuristics.fallback.fallback`, which
    the registry names), not a second choice among other splits."""
    assert registry.fallback() is fallback
    seen = []

    def recording(method, *args):
        seen.append(method)
        return fallback(method, *args)
    monkeypatch.setattr(registry, "fallback", lambda: recording)
    graph, cluster = _heavy_head()
    result = run("slicegraph", graph, cluster, time_limit=0.0)
    assert seen == ["slicegraph"]
    direct = fallback("slicegraph", graph, cluster, CostModel(), "the search")
    assert result.info["fallback"] == direct.info["fallback"]
    assert np.array_equal(result.placement.assign, direct.placement.assign)

def test_the_pipeline_dps_kernels_stop_at_their_deadline_and_say_so():
    """The pipeline DP's transfer tables and a segment's DP read the clock once per first position: past the deadline
    they end with ``done`` False (the planner then raises ``TimeLimitReached``). Without it a 5 s call on GPT-3's
    5,089 positions ran 19 s: 6 s of tables and the segment's DP, both in one kernel call each."""
    from placement_dsl.heuristics import pipeline_kernels as K
    from placement_dsl.heuristics.contract import contract
    from placement_dsl.heuristics.ideal_lattice import dfs_order
    from placement_dsl.heuristics.pipeline_dp import chain_data

    graph, cluster = chain(200), Cluster.stages(2)
    con = contract(graph, kinds={"stage"})
    c = chain_data(con, np.asarray(dfs_order(con), dtype=np.int64), cluster)
    args = (0, c.n, *c.tensors[:5], c.tensors[5], *c.incidence, 1.0, 1.0, c.comp, np.inf, 2.0)
    *tables, done = K.segment_tables(*args)
    assert done and tables[0].shape == (c.n + 1, c.n + 1)
    assert not K.segment_tables(*args, time.monotonic() - 1.0)[-1]
    dp = (0, c.n, 1, 2, 0, c.comp, c.param, c.memnode, c.act, *tables[:3], 0, 1.0, np.inf, 0, 1.0, 0, False, 1,
          np.inf, np.zeros(1))
    *found, done = K.inner_dp(*dp)
    assert done and np.isfinite(found[0][0, 2, 0])
    assert not K.inner_dp(*dp, time.monotonic() - 1.0)[-1]
