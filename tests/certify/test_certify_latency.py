"""The latency certificate: critical path, the latency IP's LP and its dual bound, each with its class.

Bounds are checked against brute force over every placement scored by the cost model
(:func:`placement_dsl.testing.brute_force`) on tiny graphs where memory and the number of
subgraphs per accelerator bind.
"""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pyomo.environ as pyo
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_dsl.blocks import latency_data as L
from placement_dsl.blocks.base import Context
from placement_dsl.blocks.latency import PathLink
from placement_dsl.blocks.latency_data import bounds, longest_paths, run_path_bound
from placement_dsl.blocks.latency_side import EXACT_ITEMS, fractional_price, knapsack_price
from placement_dsl.bounds.latency import critical_path_bound
from placement_dsl.certify import LEVELS, LevelStatus, certify, default_levels
from placement_dsl.cluster import Cluster
from placement_dsl.compile import compile
from placement_dsl.constraints import Colocate, Contiguous, Memory, Pin, Subgraphs
from placement_dsl.deadline import Deadline
from placement_dsl.evaluate import evaluate
from placement_dsl.formulations.latency import subgraphs_per_accelerator
from placement_dsl.graph import Graph, Op
from placement_dsl.io import load_workload
from placement_dsl.levels.base import Family, defaults_of
from placement_dsl.objectives import Latency
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.testing import host_op as op
from placement_dsl.testing import optimum, run_cli

TOL = 1e-6


def detour(limit: list) -> Problem:
    """``p -> h -> r``: ``p`` and ``r`` share the accelerator only as two subgraphs (``h`` does not fit with them)."""
    g = Graph([op("p", 1, 10, mem=4), op("h", 1, 1, mem=5), op("r", 1, 10, out=0, mem=4)],
              [("p", "h"), ("h", "r")], name="detour")
    return Problem(g, Cluster.accelerators(1, memory=10.0, cpus=1), Latency(), [Memory(), *limit])


def diamond() -> Problem:
    g = Graph([op("s", 1, 2), op("l", 5, 20), op("r", 5, 20), op("t", 1, 2, out=0)],
              [("s", "l"), ("s", "r"), ("l", "t"), ("r", "t")], name="diamond")
    return Problem(g, Cluster.accelerators(2, memory=math.inf, cpus=1), Latency(), [Contiguous()])


def test_latency_problems_get_the_latency_hierarchy():
    assert default_levels(diamond()) == defaults_of(Family.LATENCY)


def test_max_load_levels_refuse_latency():
    """Lemma 3.3's sum over devices is no latency bound: host cores run in parallel."""
    assert "latency" in (LEVELS["simple"].accepts(diamond()) or "")
    cert = certify(diamond(), budget=120, levels=("simple", "critical-path"))
    simple = next(r for r in cert.levels if r.level == "simple")
    assert simple.status is LevelStatus.NOT_APPLICABLE and "latency" in simple.message


def test_critical_path_is_the_longest_fastest_path():
    bound, path = critical_path_bound(diamond())
    assert bound == pytest.approx(7.0) and path[0] == "s" and path[-1] == "t" and len(path) == 3


def test_critical_path_follows_pins():
    """Pinned to the CPU, ``l`` takes 20: the longest path goes through it."""
    p = diamond()
    pinned = Problem(p.graph, p.cluster, p.objective, [Pin("l", p.cluster.names[-1])])
    bound, path = critical_path_bound(pinned)
    assert bound == pytest.approx(22.0) and path == ["s", "l", "t"]


@pytest.mark.parametrize("limit", [[Subgraphs(1)], [Subgraphs(2)], [], [Contiguous()]])
def test_certificate_proves_the_brute_force_optimum(limit):
    """The IP's slots admit exactly the problem's placements, so its bound is over the problem's own class."""
    p = detour(limit)
    opt = optimum(p)
    cert = certify(p, budget=60, gap=1e-6)
    assert cert.objective == pytest.approx(opt) and cert.bound == pytest.approx(opt)
    assert cert.scope is p.placement_class() and \
        cert.proved_by in ("cut-spine", "segment-path", "run-paths", "latency", "latency-lp")
    assert next(r for r in cert.levels if r.level == cert.proved_by).scope is p.placement_class()


def test_every_level_runs_and_orders_its_bounds():
    """critical path <= LP <= IP bound <= optimum: the LP carries the path cuts, the IP its LP."""
    p = detour([Subgraphs(1)])
    cert = certify(p, budget=60, gap=0.0, stop_at_gap=False)
    got = {r.level: r.bound for r in cert.levels}
    assert set(got) == set(defaults_of(Family.LATENCY)) and None not in got.values()
    assert got["critical-path"] <= got["latency-lp"] + TOL <= got["latency"] + 2 * TOL
    assert got["run-paths"] <= got["latency-lp"] + TOL  # the LP holds the run flows, so the paths' DP too
    assert got["latency"] == pytest.approx(optimum(p))
    assert got["critical-path"] == pytest.approx(3.0)  # three ops at 1 each, no transfers


@st.composite
def tiny_latency(draw):
    """3-4 ops in a random DAG on one or two accelerators and a CPU; memory that binds (an op may fill an
    accelerator), ops at times CPU-only, and at times two colocated ops (sharing memory or not) or a pinned op."""
    n = draw(st.integers(3, 4))
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, n) if draw(st.booleans())]
    fast = [draw(st.sampled_from([None, 1, 2, 3, 4, 5, 6])) for _ in range(n)]  # None: CPU-only
    ops = [op(f"v{i}", fast[i], draw(st.integers(1, 12)), out=draw(st.integers(0, 3)), mem=draw(st.integers(0, 6)))
           for i in range(n)]
    g = Graph(ops, edges, name="tiny")
    acc = draw(st.integers(1, 2))
    limit = draw(st.sampled_from([[Subgraphs(1)], [Subgraphs(2)], []]))
    extra = draw(st.sampled_from(["none", "colocate", "colocate-separate", "pin"]))
    u, v = draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True))
    if extra.startswith("colocate"):
        limit.append(Colocate([[f"v{u}", f"v{v}"]], shared=extra == "colocate"))
    elif extra == "pin":
        limit.append(Pin(f"v{u}", draw(st.sampled_from(["acc0", "cpu0"] if fast[u] is not None else ["cpu0"]))))
    return Problem(g, Cluster.accelerators(acc, memory=6.0, cpus=1), Latency(), [Memory(), *limit])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_latency())
def test_bounds_never_exceed_the_brute_force_optimum(p):
    opt = optimum(p)
    assert critical_path_bound(p)[0] <= opt + TOL
    cert = certify(p, budget=20, gap=0.0, stop_at_gap=False)
    if math.isfinite(opt):
        assert cert.objective >= opt - TOL
        for r in cert.levels:
            if r.bound is not None and p.placement_class() in r.scope:
                assert r.bound <= opt * (1 + TOL) + TOL, (r.level, r.bound, opt)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_latency())
def test_the_latency_ip_proves_the_brute_force_optimum(p):
    """The whole latency IP (its cuts included) on the tiny instances: optimal, at the brute-force optimum."""
    opt = optimum(p)
    # a start by name: "auto" would search for 30 % of the limit (about 17 s of a 60 s one) on a graph of four ops
    result = solve(p, formulation="latency", solver="highs", time_limit=60, warm_start="greedy")
    if not math.isfinite(opt):
        assert result.objective is None
        return
    assert result.status.value == "optimal" and result.objective == pytest.approx(opt, rel=1e-6, abs=1e-6)
    assert result.bound <= opt * (1 + TOL) + TOL


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_latency())
def test_run_paths_never_exceeds_the_brute_force_optimum(p):
    # no solver: the DP over the longest paths' runs alone, so many more draws than the certificate's test
    opt = optimum(p)
    ctx = Context(p)
    bound = run_path_bound(ctx, None, subgraphs_per_accelerator(p) == 1) * ctx.scale.time
    assert bound <= opt * (1 + TOL) + TOL


def test_a_side_op_that_exactly_fills_the_room_left_shares_the_runs_slot():
    """v2 (5 bytes) runs on the accelerator of 6 after v0 (CPU-only) and v1 (1 byte, a 2-byte tensor): v1 fits
    beside v2 exactly, so both share one slot, which starts when v0 is done: 1 + 1 + 1 = 3. In model units the
    room left, 1 - 5/6, is a hair below v1's 1/6: the run (v2) paid v1's read and the floor claimed 4 (found
    by the deep hypothesis profile). The run-paths floor and the latency IP both read the optimum's 3 or less."""
    g = Graph([op("v0", None, 1, out=0), op("v1", 1, 1, out=2, mem=1), op("v2", 1, 3, out=0, mem=5)],
              [("v0", "v2"), ("v1", "v2")])
    p = Problem(g, Cluster.accelerators(1, memory=6.0, cpus=1), Latency(), [Memory(), Subgraphs(1)])
    assert optimum(p) == 3.0
    ctx = Context(p)
    assert run_path_bound(ctx, None, True) * ctx.scale.time == pytest.approx(2.0)
    result = solve(p, formulation="latency", solver="highs", time_limit=60, warm_start="greedy")
    assert (result.status.value, result.objective, result.bound) == ("optimal", 3.0, pytest.approx(3.0))


def test_run_paths_lets_a_colocated_pair_take_two_slots_around_a_host_op():
    # a -> b -> c, a and c colocated, one accelerator, q = 2 (the path's longest run is 3). a, c on acc0
    # in two slots with b on the CPU: 1 + 1 (a's tensor) + 1 + 1 (b's) + 1 = 5; all on acc0: 1 + 4 + 1 = 6.
    # A run's colocated partner shares its device, not its slot: charging the run {a} for c's read of b
    # and the run {c} for a's write gave 3 + 1 + 3 = 7, so the floor claimed 6 above the optimum 5
    g = Graph([op("a", 1, 5), op("b", 4, 1), op("c", 1, 5, out=0)], [("a", "b"), ("b", "c")], name="around")
    p = Problem(g, Cluster.accelerators(1, cpus=1), Latency(), [Colocate([["a", "c"]])])
    assert optimum(p) == pytest.approx(5.0)
    cert = certify(p, budget=20, gap=0.0, stop_at_gap=False)  # every level runs: the cheaper ones prove 5 first
    got = {r.level: r.bound for r in cert.levels}
    assert got["run-paths"] == pytest.approx(5.0) and cert.objective == pytest.approx(5.0)


def test_latency_ip_compiles_a_colocated_group_larger_than_an_accelerator():
    # s -> a -> b with a, b colocated: their 4 + 3 bytes exceed an accelerator's 6, so both run on the CPU
    # (2 + 2) after s on an accelerator (1 + its tensor 1): 6. The memory-runs row of the path suffix (b,)
    # once let a host group free at most one of the two accelerators its 7 bytes count for, and its
    # constants alone read 0 >= 2, so the model refused to compile
    g = Graph([op("s", 1, 9), op("a", 1, 2, mem=4), op("b", 1, 2, out=0, mem=3)], [("s", "a"), ("a", "b")])
    p = Problem(g, Cluster.accelerators(2, memory=6.0, cpus=1), Latency(), [Memory(), Colocate([["a", "b"]])])
    assert optimum(p) == pytest.approx(6.0)
    r = solve(p, formulation="latency", solver="highs", time_limit=20, gap=0.0, warm_start="greedy")
    assert (r.objective, r.bound) == (pytest.approx(6.0), pytest.approx(6.0))
    assert r.placement.mapping() == {"s": "acc0", "a": "cpu0", "b": "cpu0"}


# ---------------------------------------------------------------------------- command line
def _workload(path, memory: float = math.inf) -> str:
    ops = [{"name": "s", "work": {"accelerator": 1, "cpu": 2}, "out_bytes": 1},
           {"name": "l", "work": {"accelerator": 5, "cpu": 20}, "out_bytes": 1},
           {"name": "r", "work": {"accelerator": 5, "cpu": 20}, "out_bytes": 1},
           {"name": "t", "work": {"accelerator": 1, "cpu": 2}, "out_bytes": 0}]
    data = {"format": "placement_dsl.workload", "version": 1,
            "graph": {"format": "placement_dsl.graph", "version": 1, "name": "g", "ops": ops,
                      "edges": [["s", "l"], ["s", "r"], ["l", "t"], ["r", "t"]]},
            "cluster": {"devices": [{"name": "a0", "memory": memory}, {"name": "a1", "memory": memory},
                                    {"name": "cpu", "kind": "cpu", "host": True}]}}
    path.write_text(json.dumps(data))
    return str(path)


def _optimum(path: str, *terms) -> float:
    w = load_workload(path)
    return optimum(Problem(w.graph, w.cluster, Latency(), list(terms)))


def test_cli_bounds_for_latency_runs_the_latency_levels(capsys, tmp_path):
    w = _workload(tmp_path / "w.json")
    code, out, _ = run_cli(capsys, "bounds", w, "--objective", "latency", "--json", "--time-limit", "30")
    payload = json.loads(out)
    assert code == 0 and [r["level"] for r in payload["levels"]] == list(defaults_of(Family.LATENCY))
    opt = _optimum(w, Contiguous())  # latency's default class: contiguous splits (Fig. 3)
    assert payload["upper_bound"] == pytest.approx(opt) and payload["bound"] == pytest.approx(opt)


def test_cli_subgraphs_sets_q_for_the_ip_and_the_cost_model(capsys, tmp_path):
    w = _workload(tmp_path / "w.json")
    code, out, _ = run_cli(capsys, "solve", w, "--objective", "latency", "--method", "ip", "--subgraphs", "2",
                        "--time-limit", "20", "--json")
    payload = json.loads(out)
    assert code == 0 and payload["objective"] == pytest.approx(_optimum(w, Subgraphs(2)))
    assert {"objective", "bound", "gap", "status", "seconds"} <= set(payload)


@pytest.mark.parametrize("argv, needle", [
    (("--objective", "throughput", "--method", "ip", "--subgraphs", "2"), "use --objective latency"),
    (("--objective", "latency", "--method", "ip", "--subgraphs", "0"), "--subgraphs"),
])
def test_cli_subgraphs_misuse_is_a_one_line_error(capsys, tmp_path, argv, needle):
    code, _, err = run_cli(capsys, "solve", _workload(tmp_path / "w.json"), *argv)
    assert code == 2 and needle in err and "Traceback" not in err


def test_cli_out_writes_the_split_format_for_dnn_partitioning_inputs(capsys, tmp_path):
    """A dnn-partitioning input's latency split is written as that project's ``fpgas``/``cpus`` node lists."""
    native = _workload(tmp_path / "w.json", memory=1e9)
    dnn = tmp_path / "dnn.json"
    assert run_cli(capsys, "convert", native, str(dnn), "--to", "dnn-partitioning")[0] == 0
    split = tmp_path / "split.json"
    code, out, _ = run_cli(capsys, "solve", str(dnn), "--objective", "latency", "--method", "ip", "--time-limit", "20",
                        "--out", str(split), "--json")
    assert code == 0
    data = json.loads(split.read_text())
    nodes = [v for key in ("fpgas", "cpus") for dev in data[key] for v in dev["nodes"]]
    assert sorted(map(str, nodes)) == sorted(json.loads(out)["placement"])
    code, out, _ = run_cli(capsys, "evaluate", str(dnn), "--split", str(split), "--objective", "latency", "--json")
    assert code == 0 and json.loads(out)["objective"] == pytest.approx(_optimum(native, Contiguous()))


def test_side_inputs_are_priced_by_the_least_knapsack_left_out():
    # a run's side inputs (price, bytes) that its accelerator's free memory cannot keep are paid: exactly the least
    # price left out of a knapsack of that room up to EXACT_ITEMS items, beyond them the fractional knapsack's
    # value, which is lower. Checked against every subset on 300 draws (ties of bytes and room included)


    rng = np.random.default_rng(0)
    for draw in range(300):
        n = int(rng.integers(1, 8)) if draw < 240 else EXACT_ITEMS + int(rng.integers(0, 4))  # 12 itself: exact
        items = [(float(rng.integers(1, 10)), float(rng.integers(0, 6))) for _ in range(n)]
        room = float(rng.integers(0, 12))
        best = min(sum(c for (c, _), keep in zip(items, mask) if not keep)
                   for mask in itertools.product((False, True), repeat=n)
                   if sum(m for (_, m), keep in zip(items, mask) if keep) <= room)
        got = knapsack_price(items, room)
        if n <= EXACT_ITEMS:
            assert got == pytest.approx(best), (items, room)
        else:
            assert sum(c for c, m in items if m > room) <= got <= best + 1e-9, (items, room)


def test_latency_on_accelerators_alone_is_exact():
    # no CPU at all: the run arcs have no host op to price (a fork a -> b, a -> c on two accelerators; brute force: 6)
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=3, out_bytes=1), Op(name="c", work=1)],
              [("a", "b"), ("a", "c")])
    p = Problem(g, Cluster.accelerators(2), Latency())
    result = solve(p, formulation="latency", time_limit=60)
    assert optimum(p) == 6.0 and (result.objective, result.bound) == (6.0, pytest.approx(6.0))


@pytest.mark.parametrize(("terms", "floor"), [([], 5.0), ([Contiguous()], 6.0)])
def test_run_paths_prices_the_longest_paths_side_inputs_and_contiguous_bodies(terms, floor):
    # every op takes 1 on the accelerator and 10 on the CPU but s, which runs on the CPU only (0.5) and sends b
    # 2 bytes. The longest path is a -> b -> c (not a -> x, a's first successor): one run, 3, plus s's tensor, read
    # for sure: 5. Under Contiguous the run's one slot also holds y (a -> y -> c lies between its ops): 6. Both
    # are below the optimum, 7.5
    g = Graph([op("a", 1, 10), op("x", 1, 10, out=0), op("b", 1, 10), op("c", 1, 10, out=0), op("s", None, 0.5, out=2),
               op("y", 1, 10)], [("a", "x"), ("a", "b"), ("b", "c"), ("s", "b"), ("a", "y"), ("y", "c")])
    p = Problem(g, Cluster.accelerators(1, cpus=1), Latency(), terms)
    ctx = Context(p)
    assert run_path_bound(ctx, None, subgraphs_per_accelerator(p) == 1) * ctx.scale.time == pytest.approx(floor)
    assert optimum(p) == pytest.approx(7.5)


def test_longest_paths_follow_each_ops_longest_way_on():
    # every op takes 1. Through a the longest path goes on to b -> c, not to its first successor x; through b it
    # comes from s (after r), whose head is longer than a's. Paths are listed once, by their first op through
    g = Graph([Op(name=n, work=1, out_bytes=1) for n in ("r", "s", "a", "x", "b", "c")],
              [("r", "s"), ("s", "b"), ("a", "x"), ("a", "b"), ("b", "c")])
    ctx = Context(Problem(g, Cluster.accelerators(1, cpus=1), Latency()))
    paths = longest_paths(ctx, bounds(ctx, None), trim=False)
    assert [[g.names[v] for v in p] for p in paths] == [["r", "s", "b", "c"], ["a", "b", "c"], ["a", "x"]]


def _every_ops_path(ctx: Context, bd) -> list[tuple[int, ...]]:
    """The definition walked op by op: each op's heaviest-head chain back, then its heaviest-tail chain on."""
    g, out = ctx.graph, {}
    for v in range(g.n):
        path, u = [v], v
        while (p := g.predecessors(u)).size:
            u = int(p[np.argmax(bd.head[p])])
            path.append(u)
        path.reverse()
        u = v
        while (s := g.successors(u)).size:
            u = int(s[np.argmax(bd.fastest[s] + bd.tail[s])])
            path.append(u)
        out[tuple(path)] = None
    return [p for p in out if len(p) > 1]


@pytest.mark.parametrize("seed", range(4))
def test_longest_and_critical_paths_are_the_op_by_op_definitions(seed):
    from placement_dsl.zoo import inception, regal, transformer

    w = regal(seed=seed, n=120) if seed % 2 else inception() if seed == 0 else transformer(layers=3,
                                                                                          granularity="operator")
    ctx = Context(Problem(w.graph, w.cluster, Latency()))
    bd = bounds(ctx, None)
    every = _every_ops_path(ctx, bd)
    assert longest_paths(ctx, bd, trim=False) == every
    ranked = sorted(every, key=lambda p: (-float(bd.fastest[list(p)].sum()), p))
    assert L.critical_paths(ctx, bd, 3) == ranked[:3]


def _long_chain(n: int) -> Problem:
    """A chain of ``n`` ops with a side op per 10 (``v(i-1) -> v(i+1)`` beside ``v(i)``), on two accelerators."""
    ops = [Op(name=f"v{i}", work=1.0 + (i % 10 == 0), out_bytes=1.0) for i in range(n)]
    edges = [(f"v{i}", f"v{i + 1}") for i in range(n - 1) if i % 10 != 9] + \
            [(f"v{i - 1}", f"v{i + 1}") for i in range(1, n - 1) if i % 10 == 0]
    return Problem(Graph(ops, edges), Cluster.accelerators(2, cpus=1), Latency())


def test_the_critical_paths_of_20000_ops_are_found_without_walking_every_ops_path():
    """A 20,000-op chain with a side op per 10: every op lies on a path of ~18,000 ops, so walking each op's path took
    minutes (bounds --time-limit 10 of a 20k-op transformer ran 170 s in its run-paths level)."""
    n = 20_000
    ctx = Context(_long_chain(n))
    bd = bounds(ctx, None)
    clock = Deadline(20.0)
    paths = L.critical_paths(ctx, bd, 3)
    assert not clock.expired() and len(paths) == 3 and len(paths[0]) > 0.8 * n


def test_a_certificate_of_20000_ops_has_a_placement_when_latency_best_is_stopped():
    """latency-best's DPs on 20,000 ops run past its share of a 6 s call and it is stopped with nothing: greedy, in
    O(n + m), runs first, so the certificate has a placement (it had none: best inf, gap inf)."""
    result = certify(_long_chain(20_000), budget=6.0, levels=["critical-path"])
    assert math.isfinite(result.objective) and result.bound <= result.objective


def test_a_certificate_whose_heuristics_were_all_stopped_has_the_split_they_fall_back_on(monkeypatch):
    """On a loaded machine greedy itself was stopped on 20,000 ops in a 6 s call, and the certificate had no
    placement: certify then builds the ``O(n + m)`` splits every stopped heuristic falls back on."""
    import placement_dsl.certify as certify_module

    monkeypatch.setattr(certify_module, "latency_upper", lambda run, seconds: None)  # every heuristic stopped
    result = certify(_long_chain(2_000), budget=6.0, levels=["critical-path"])
    assert result.found_by == "fallback" and result.bound <= result.objective < math.inf


def _side() -> Context:
    """a -> c -> d on the accelerator's path, b (CPU only) feeding c from the side; one accelerator holding 10, a
    CPU (time scale 3.5)."""
    g = Graph([op("a", 2, 10, mem=1), op("b", None, 1, mem=0), op("c", 2, 10, mem=1), op("d", 2, 10, out=0, mem=0)],
              [("a", "c"), ("b", "c"), ("c", "d")], name="side")
    return compile(Problem(g, Cluster.accelerators(1, memory=10.0, cpus=1), Latency(), [Memory()]), "latency") \
        .varmap.context


def test_the_horizon_keeps_the_start_that_set_it_strictly_inside():
    """H is the hint raised by a relative and an absolute 1e-9, so the start whose latency set it satisfies every
    row H bounds, whether H is below or above 1 in model units; without a hint, the serial bound raised so."""
    ctx = _side()
    for hint in (2.0, 9.0):
        assert L.bounds(ctx, hint).horizon > hint / ctx.scale.time
    assert L.bounds(ctx, None).horizon > L.serial_bound(ctx)


def test_latency_data_on_a_side_input():
    ctx = _side()
    s = ctx.scale.time
    # every op on its slowest device it may run on (b: the CPU's 1), and every tensor moved to each consumer, twice
    assert L.serial_bound(ctx) * s == pytest.approx(10 + 1 + 10 + 10 + 2 * 3)
    free, hinted = L.bounds(ctx, None), L.bounds(ctx, 9.0)  # one model, two horizons: bounds for each
    assert free.horizon * s == pytest.approx(37.0) and hinted.horizon * s == pytest.approx(9.0)
    assert (free.head * s).tolist() == pytest.approx([2, 1, 4, 6]) and (free.tail * s).tolist() == pytest.approx(
        [4, 4, 2, 0])
    assert L.longest_paths(ctx, free) == [(0, 2)]  # cut to the ops that take memory: d holds none
    assert L.critical_paths(ctx, free, 3) == [(0, 2, 3), (1, 2, 3)]
    arcs = L.run_arcs(ctx, (0, 2, 3), L.accelerators(ctx), False)
    # a and c on the accelerator: their times, c's tensor written for d, and b's tensor read (b runs on the CPU)
    assert arcs[0, 2] * s == pytest.approx(2 + 2 + 1 + 1) and arcs[0, 3] * s == pytest.approx(2 + 2 + 2 + 1)
    assert arcs[-2, 2] * s == pytest.approx(10)  # c on the CPU


RUN_ARCS = {  # (i, j) -> cost on the path a, b, c, d (every op 1 on the accelerator, 10 on the CPU)
    False: {(0, 1): 2, (0, 2): 6, (0, 3): 9, (0, 4): 13, (1, 2): 5, (1, 3): 7, (1, 4): 11, (2, 3): 4, (2, 4): 7,
            (3, 4): 4},
    True: {(0, 1): 2, (0, 2): 6, (0, 3): 11, (0, 4): 14, (1, 2): 5, (1, 3): 7, (1, 4): 11, (2, 3): 4, (2, 4): 7,
           (3, 4): 4},
}


@pytest.mark.parametrize("contiguous", [False, True])
def test_run_arcs_price_their_bodies_boundaries_and_side_tensors(contiguous):
    """Every arc of the path a -> b -> c -> d (2 bytes each, 1-byte tensors) on an accelerator of 10, by hand.

    Beside the path: s and t (CPU-only) send b and d 2 bytes each, read for sure; w (4 bytes) sends c 3, y (2
    bytes) sits on a -> y -> c, z (5 bytes) reads b's tensor and e (5 bytes) d's: items of the knapsack of the
    room the body leaves; a -> c makes a's tensor a sure write of runs that end before c; x runs on
    accelerators only. (0, 2): 1 + 1, b's tensor out, s's in, a's to c: 6. (0, 3): 3 + c's out + s's 2, room 4
    keeps w and pays y (its tensor and a's to it, 2) and z (1): 9. (0, 4): 4 + s's and t's 2 + 2, room 2 keeps y
    and pays w, z, e: 13. (1, 4): 3 + a's in + 2 + 2, room 4 keeps w and pays y, z, e: 11. (2, 4): 2 + b's in +
    a's in + t's 2, room 6 keeps w and y, pays e: 7. One slot per accelerator (``contiguous``) puts y in the slot
    of runs from a to c: (0, 3) 4 + 1 + 2, room 2 pays w and z: 11; (0, 4) fills the accelerator exactly (room
    0): 5 + 2 + 2 + w, z, e: 14.
    """
    g = Graph([op("a", 1, 10, mem=2), op("b", 1, 10, mem=2), op("c", 1, 10, mem=2), op("d", 1, 10, mem=2),
               op("s", None, 1, out=2), op("w", 1, 10, out=3, mem=4), op("z", 1, 10, out=0, mem=5),
               op("y", 1, 10, mem=2), op("e", 1, 10, out=0, mem=5), Op(name="x", work={"accelerator": 1}, out_bytes=0),
               op("t", None, 1, out=2)],
              [("a", "b"), ("b", "c"), ("c", "d"), ("s", "b"), ("w", "c"), ("b", "z"), ("a", "y"), ("y", "c"),
               ("a", "c"), ("d", "e"), ("t", "d")])
    ctx = compile(Problem(g, Cluster.accelerators(1, memory=10.0, cpus=1), Latency(), [Memory()]), "latency") \
        .varmap.context
    arcs = {k: v * ctx.scale.time for k, v in L.run_arcs(ctx, (0, 1, 2, 3), L.accelerators(ctx), contiguous).items()}
    hosts = {(-k - 1, k + 1): 10.0 for k in range(4)}  # each path op alone on the CPU
    assert arcs == pytest.approx({**hosts, **RUN_ARCS[contiguous]})


def test_a_run_never_splits_a_colocated_pair_at_the_start_of_its_path():
    """a and b share a device: no run ends between them nor starts at b, with or without one slot per accelerator."""
    ops = [Op(name=n, work={"accelerator": 1, "cpu": 10}, out_bytes=1, param_bytes=1, group="ab" if n in "ab" else None)
           for n in "abc"]
    g = Graph(ops, [("a", "b"), ("b", "c")], name="pair")
    ctx = compile(Problem(g, Cluster.accelerators(1, memory=10.0, cpus=1), Latency(), [Memory()]), "latency") \
        .varmap.context
    for contiguous in (False, True):
        runs = {k for k in L.run_arcs(ctx, (0, 1, 2), L.accelerators(ctx), contiguous) if k[0] >= 0}
        assert runs == {(0, 2), (0, 3), (2, 3)}


def test_identical_unbounded_hosts_merge_unless_contiguity_tells_them_apart():
    g = Graph([op("a", 1, 10), op("b", 1, 10, out=0)], [("a", "b")])
    cluster = Cluster.accelerators(1, cpus=2)
    assert L.merged_hosts(Context(Problem(g, cluster, Latency()))).tolist() == [0, 1, 1]
    assert L.merged_hosts(Context(Problem(g, cluster, Latency(), [Contiguous()]))).tolist() == [0, 1, 2]


def test_a_longest_path_comes_from_the_predecessor_with_the_longest_head_whatever_its_index():
    """b's predecessors are a (head 1) and s (head 2, after r); s's own way on is x -> y -> z, so the path r, s, b, c
    is found only by walking back from b to s. The two longest by fastest times come longest first."""
    g = Graph([Op(name=n, work=1, out_bytes=1) for n in ("a", "b", "c", "r", "s", "x", "y", "z")],
              [("a", "b"), ("b", "c"), ("r", "s"), ("s", "b"), ("s", "x"), ("x", "y"), ("y", "z")])
    ctx = Context(Problem(g, Cluster.accelerators(1, cpus=1), Latency()))
    bd = bounds(ctx, None)
    names = lambda paths: [[g.names[v] for v in p] for p in paths]
    assert names(longest_paths(ctx, bd, trim=False)) == [["a", "b", "c"], ["r", "s", "b", "c"],
                                                          ["r", "s", "x", "y", "z"]]
    assert names(L.critical_paths(ctx, bd, 2)) == [["r", "s", "x", "y", "z"], ["r", "s", "b", "c"]]


def test_descendants_are_the_transitive_closure():
    g = Graph([Op(name=n, work=1, out_bytes=1) for n in "abcd"], [("a", "b"), ("b", "c"), ("c", "d")])
    ctx = Context(Problem(g, Cluster.accelerators(1, cpus=1), Latency()))
    assert L.descendants(ctx).tolist() == [[j >= i for j in range(4)] for i in range(4)]


def test_an_accelerator_a_start_leaves_empty_gets_empty_slots_at_time_zero():
    """Six independent ops, 1 anywhere, on two accelerators and a CPU (time scale 2): o0 on acc0 and the rest side
    by side on the CPU take 1, 0.5 in model units. acc1's empty slots start and end at 0, so the start satisfies
    every row and TotalLatency is its latency."""
    ops = [Op(name=f"o{i}", work={"accelerator": 1, "cpu": 1}, out_bytes=0) for i in range(6)]
    p = Problem(Graph(ops, []), Cluster.accelerators(2, cpus=1), Latency())
    compiled = compile(p, "latency")
    placement = Placement(p.graph, p.cluster, [0, 2, 2, 2, 2, 2])
    values = compiled.varmap.values(placement)
    assert compiled.varmap.residual(values)[0] <= 1e-9
    assert values[compiled.model.latency.total] * compiled.objective_scale == pytest.approx(1.0)
    assert compiled.objective_scale == pytest.approx(2.0)


def test_the_side_knapsack_prices_what_is_left_out():
    items = [(2.0, 1.0), (3.0, 2.0)]  # (price, memory), best price per byte first
    assert fractional_price(items, 2.0) == pytest.approx(1.5)  # the first whole, half the second: 3 - 1.5 left out
    assert knapsack_price(items, 2.0) == pytest.approx(2.0)  # exactly: keep the second, leave the first out
    assert fractional_price(items, 0.0) == knapsack_price(items, 0.0) == pytest.approx(5.0)
    # twelve items of 2 bytes (price 3) in a room of 5: two kept, exactly (30 left out); past EXACT_ITEMS the
    # fractional knapsack keeps two and a half (39 - 7.5)
    assert knapsack_price([(3.0, 2.0)] * EXACT_ITEMS, 5.0) == pytest.approx(30.0)
    assert knapsack_price([(3.0, 2.0)] * (EXACT_ITEMS + 1), 5.0) == pytest.approx(31.5)


def test_the_run_paths_floor_cuts_only_the_paths_it_is_asked_for():
    # x1 -> x2 is the longest path by fastest times (6) and fits the accelerator (floor 6); y1 and y2 (4) fit only the
    # CPU (floor 20 + 20): one path gives 6, two give 40
    g = Graph([op("x1", 3, 30, mem=1), op("x2", 3, 30, out=0, mem=1), op("y1", 2, 20, mem=11),
               op("y2", 2, 20, out=0, mem=11)], [("x1", "x2"), ("y1", "y2")], name="two_paths")
    ctx = compile(Problem(g, Cluster.accelerators(1, memory=10.0, cpus=1), Latency(), [Memory()]), "latency") \
        .varmap.context
    floors = [run_path_bound(ctx, None, False, paths=k) * ctx.scale.time for k in (1, 2)]
    assert floors == pytest.approx([6.0, 40.0])


def test_a_contiguous_run_never_ends_just_before_an_op_colocated_with_it():
    # a -> b -> c with a and c in one group: a run of a and b would hold c in its slot too, so with contiguous bodies
    # it must run on through c (no arc (0, 2)); without, a and b may form a run and c another
    ops = [Op(name=n, work={"accelerator": 1, "cpu": 10}, out_bytes=0 if n == "c" else 1, param_bytes=1,
              group="ac" if n != "b" else None) for n in "abc"]
    g = Graph(ops, [("a", "b"), ("b", "c")], name="ring")
    ctx = compile(Problem(g, Cluster.accelerators(1, memory=10.0, cpus=1), Latency(), [Memory(), Contiguous()]),
                  "latency").varmap.context
    acc = L.accelerators(ctx)
    assert (0, 2) not in L.run_arcs(ctx, (0, 1, 2), acc, True) and (0, 3) in L.run_arcs(ctx, (0, 1, 2), acc, True)
    assert (0, 2) in L.run_arcs(ctx, (0, 1, 2), acc, False)


def test_a_longest_path_too_big_for_one_accelerator_gets_its_memory_cut():
    # p, h and r hold 13 together and the accelerator 10: the path needs two runs, whatever the placement
    compiled = compile(detour([]), "latency")
    cuts, _ = compiled.varmap.block("path_cuts")
    assert list(cuts.segments) == [0] and len(cuts.memory_runs) == 1


@pytest.mark.parametrize("mems, segments", [
    ([4, 4, 4, 4, 4], {(0, 1, 2): 2, (2, 3, 4): 2, (0, 1, 2, 3, 4): 2}),  # 1.2 of the accelerator each way, 2.0 whole
    ([5, 5, 5, 5], {(0, 1, 2): 2, (1, 2, 3): 2, (0, 1, 2, 3): 2}),  # a prefix of exactly 1.0 still fits: not (0, 1)
    ([5, 15, 5], {(0, 1): 2, (1, 2): 2, (0, 1, 2): 3}),  # 2.0 at b is two accelerators, not three
    ([15, 5, 5], {(0,): 2, (0, 1, 2): 3}),  # an op above the accelerator alone; the suffix (1, 2) holds 1.0
])
def test_memory_segments_are_the_shortest_prefixes_and_suffixes_past_each_multiple(mems, segments):
    """A chain of ops with these memories on an accelerator of 10: each prefix and suffix that first exceeds k
    accelerators (k >= 1) and the whole path, each with R = ceil(memory / 10) when R >= 2. The CPU holds 20, so
    model units are not the accelerator's (M = 0.5)."""
    names = "abcde"[:len(mems)]
    g = Graph([op(n, 1, 10, mem=m) for n, m in zip(names, mems)], list(itertools.pairwise(names)))
    problem = Problem(g, Cluster.accelerators(1, memory=10.0, cpus=1, cpu_memory=20.0), Latency(), [Memory()])
    ctx = compile(problem, "latency").varmap.context
    M = L.capacity_bound(ctx, L.accelerators(ctx))
    assert (M, M * ctx.scale.memory) == pytest.approx((0.5, 10.0))
    assert dict(L.memory_segments(ctx, bounds(ctx, None), M)) == segments


def test_a_colocated_group_counts_its_memory_once_along_a_path():
    """a and b share a device (4 + 4) and c holds 4: the path meets the group's 8 at a and nothing more at b, so
    no prefix short of c exceeds the accelerator (not a, b: 0.8); the suffix b, c holds 4 + 8 (b brings a)."""
    g = Graph([op("a", 1, 10, mem=4), op("b", 1, 10, mem=4), op("c", 1, 10, mem=4, out=0)], [("a", "b"), ("b", "c")])
    problem = Problem(g, Cluster.accelerators(1, memory=10.0, cpus=1), Latency(), [Memory(), Colocate([["a", "b"]])])
    ctx = compile(problem, "latency").varmap.context
    assert list(L.fresh_memory(ctx, (0, 1, 2)) * ctx.scale.memory) == pytest.approx([8.0, 0.0, 4.0])
    M = L.capacity_bound(ctx, L.accelerators(ctx))
    assert dict(L.memory_segments(ctx, bounds(ctx, None), M)) == {(0, 1, 2): 2, (1, 2): 2}


def test_memory_cuts_need_a_memory_term_and_an_accelerator():
    """Without the Memory term a device's memory binds nothing, and without accelerators nothing is cut: the
    capacity the memory cuts divide by is then unbounded."""
    g = Graph([op("a", 1, 10, mem=4), op("b", 1, 10, mem=4, out=0)], [("a", "b")])
    free = compile(Problem(g, Cluster.accelerators(1, memory=10.0, cpus=1), Latency(), []), "latency").varmap.context
    assert L.capacity_bound(free, L.accelerators(free)) == math.inf
    hosts = compile(Problem(g, Cluster.accelerators(0, cpus=2, cpu_memory=10.0), Latency(), [Memory()]),
                    "latency").varmap.context
    assert L.accelerators(hosts) == [] and L.capacity_bound(hosts, []) == math.inf
    assert run_path_bound(hosts, None, False) == 0.0  # no runs to cut either


def _memory_row_slacks(problem: Problem, assign: list[int]) -> list[float]:
    """The memory-runs rows' slacks (``crossed`` over its right-hand side) at a placement's values."""
    compiled = compile(problem, "latency")
    compiled.varmap.set_values(Placement(problem.graph, problem.cluster, assign))
    cuts, _ = compiled.varmap.block("path_cuts")
    return [row.slack() for row in cuts.memory_runs.values()]


@pytest.mark.parametrize("assign, slack", [
    ((1, 1, 1), 2), ((0, 1, 1), 2), ((1, 0, 1), 2), ((1, 1, 0), 2), ((0, 0, 1), 0), ((1, 0, 0), 0), ((0, 1, 0), 2)])
def test_the_memory_row_frees_a_run_per_host_op_by_its_rounding(assign, slack):
    """The detour's path holds 0.4 + 0.5 + 0.4 of the accelerator: R = 2 runs, frac = 0.3, and each op on the host
    frees min(ceil(f), f / frac) = 1 run, so the row reads crossed >= 4 - 2 off - x_p - x_r. Its slack at each
    placement (devices of p, h, r; 0 the accelerator, 1 the CPU): 0 where one run is cut by the host op after it."""
    assert _memory_row_slacks(detour([]), list(assign)) == pytest.approx([slack])


def test_an_op_as_big_as_the_accelerator_frees_one_run_on_the_host():
    """a fills the accelerator (f = 1) and b half of it: R = 2, frac = 0.5. On the host a frees min(ceil(1), 1 / 0.5)
    = 1 run, not 2: with a on the CPU and b on the accelerator the row is tight, 1 >= 4 - 2 - 0 - 1."""
    g = Graph([op("a", 1, 10, mem=10), op("b", 1, 10, out=0, mem=5)], [("a", "b")])
    problem = Problem(g, Cluster.accelerators(1, memory=10.0, cpus=1), Latency(), [Memory()])
    assert _memory_row_slacks(problem, [1, 0]) == pytest.approx([0.0])


def test_the_memory_row_holds_to_the_last_bit_where_a_host_op_frees_a_whole_run():
    """a holds 1/6 of the accelerator and b all of it: R = 2, frac = 1/6, and a on the host frees f / frac = 1
    run, which floats compute as 0.99999999999999956. With both on the CPU the row is tight, so that roundoff
    cut the placement off by 9e-16 (and made the row the constant False where no op could use the accelerator)."""
    g = Graph([op("a", 1, 1, mem=1), op("b", 1, 1, out=0, mem=6)], [("a", "b")])
    problem = Problem(g, Cluster.accelerators(1, memory=6.0, cpus=1), Latency(), [Memory()])
    slacks = _memory_row_slacks(problem, [1, 1])
    assert slacks == pytest.approx([0.0], abs=1e-8) and min(slacks) >= 0.0


def test_a_segment_only_hosts_may_run_gets_no_memory_row():
    """b and c run on CPUs only and hold 16 against the accelerator's 10: their segment needs two accelerators on
    paper, but no placement puts it on one, and its row would have no variable (Pyomo refuses such a row). The
    latency IP makes none for it (the whole path, 18, keeps its row) and proves the optimum: a on the accelerator,
    its tensor written, b and c: 4."""
    g = Graph([op("a", 1, 5, mem=2), op("b", None, 1, mem=8), op("c", None, 1, mem=8, out=0)], [("a", "b"), ("b", "c")])
    problem = Problem(g, Cluster.accelerators(1, memory=10.0, cpus=1), Latency(), [Memory()])
    cuts, _ = compile(problem, "latency").varmap.block("path_cuts")
    assert len(cuts.memory_runs) == 1
    result = solve(problem, formulation="latency", solver="highs", time_limit=60, warm_start="greedy")
    assert (result.status.value, result.objective, result.bound) == ("optimal", 4.0, pytest.approx(4.0))
    assert optimum(problem) == 4.0


def test_a_path_span_adds_its_ops_reads_and_writes():
    # p and r on the accelerator, h on the CPU: 1 + 1 + 1 of compute, p's tensor written out and h's read in: 5, the
    # placement's latency (the span is tight here)

    problem = detour([])
    compiled = compile(problem, "latency")
    placement = Placement(problem.graph, problem.cluster, [0, 1, 0])
    compiled.varmap.set_values(placement)
    spans = compiled.varmap.context.link(PathLink).spans
    assert [pyo.value(s) * compiled.varmap.context.scale.time for s in spans] == pytest.approx([5.0])
    assert evaluate(placement, problem.cost_model()).objective == pytest.approx(5.0)

