"""The DP's feasibility run with a bitset per ideal against the float64 sweep, state by state."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster, Device
from placement_dsl.errors import InfeasibleError
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import ideal_feasible as F
from placement_dsl.heuristics import ideal_solve
from placement_dsl.heuristics.base import DP_CLASS
from placement_dsl.heuristics.ideal_solve import Sweeps
from placement_dsl.heuristics.ideals import ideal_lattice, search, setup
from placement_dsl.progress import Recorder, reporting
from tests.heuristics.test_ideals_pruning import MODELS, clusters, graphs


def _bits(feas: np.ndarray, S: int) -> np.ndarray:
    """Bitset rows -> boolean (N, S)."""
    return np.unpackbits(feas.view(np.uint8), axis=1, bitorder="little")[:, :S].astype(bool)


def _sweeps(graph, cluster, model, replication):
    su = setup(graph, cluster, model, replication, True)
    lat = ideal_lattice(su.con, 100_000)
    return Sweeps(lat, su.classes, model, replication), su


def _optimum(graph, cluster, model, replication) -> float:
    su = setup(graph, cluster, model, replication, True)
    try:
        return search(su, linearize=False, max_ideals=100_000, upper_bound=None, descend=False)[0].value
    except InfeasibleError:
        return math.inf


@settings(max_examples=80, deadline=None)
@given(graph=graphs(), cluster=clusters(), model=st.sampled_from(MODELS), replication=st.booleans(),
       shift=st.sampled_from([-0.25, -1e-9, 0.0, 1e-9, 0.2, 1.0]))
def test_bitsets_are_the_sweeps_finite_states(graph, cluster, model, replication, shift):
    """At targets around the optimum, every ideal's feasible states are the float64 sweep's finite
    ones (with the cut and without it), and the split read back has every stage within the target."""
    opt = _optimum(graph, cluster, model, replication)
    if not math.isfinite(opt) or opt <= 0:
        return
    T = opt * (1 + shift)
    sw, _ = _sweeps(graph, cluster, model, replication)
    S = sw.counts.shape[0]
    dp = sw.exact(T, T)[0]
    bits = _bits(sw.feasible_bits(T), S)
    np.testing.assert_array_equal(bits, np.isfinite(dp))
    steps = sw.feasible(T)
    assert bool(steps) == (T >= opt)
    if steps:
        assert sw.value(steps) <= T
        assert steps[0][1] == 0 and steps[-1][0] == sw.lat.count - 1
        assert all(j == i2 for (_, j, _, _), (i2, _, _, _) in zip(steps[1:], steps[:-1], strict=True))
        used = np.zeros(sw.counts.shape[1], np.int64)
        for _, _, c, k in steps:
            used[c] += k
        assert (used <= sw.counts[-1]).all()


@settings(max_examples=60, deadline=None)
@given(graph=graphs(), cluster=clusters(), model=st.sampled_from(MODELS), replication=st.booleans(),
       shifts=st.lists(st.sampled_from([-0.3, -0.1, -1e-9, 0.0, 0.05, 0.2, 1.0]), min_size=2, max_size=5))
def test_runs_that_reuse_earlier_bits_keep_every_state(graph, cluster, model, replication, shifts):
    """A run started from the bits of earlier runs (the feasible states of a lower target, the possible ones of
    a higher) ends with the states of a fresh run, in whatever order the targets come, with replicas too."""
    opt = _optimum(graph, cluster, model, replication)
    if not math.isfinite(opt) or opt <= 0:
        return
    sw, _ = _sweeps(graph, cluster, model, replication)
    S = sw.counts.shape[0]
    for shift in shifts:
        T = opt * (1 + shift)
        fresh, _ = _sweeps(graph, cluster, model, replication)
        np.testing.assert_array_equal(_bits(sw.feasible_bits(T), S), _bits(fresh.feasible_bits(T), S))
        steps = sw.feasible(T)
        assert bool(steps) == (T >= opt) and (not steps or sw.value(steps) <= T)


def test_a_run_between_two_earlier_ones_walks_only_for_the_states_they_leave_open():
    """Bisecting between an infeasible and a feasible run visits fewer pairs than the same run from scratch."""
    from placement_dsl.cli import resize
    from placement_dsl.zoo import regal

    w = regal(0, n=24)
    cluster, model = resize(w.cluster, 6), CostModel.named("bottleneck")
    opt = _optimum(w.graph, cluster, model, False)
    sw, _ = _sweeps(w.graph, cluster, model, False)
    assert sw.feasible(opt * 0.97) is None and sw.feasible(opt * 1.03)
    before = sw.visited
    again = sw.feasible_bits(opt)
    fresh, _ = _sweeps(w.graph, cluster, model, False)
    np.testing.assert_array_equal(again, fresh.feasible_bits(opt))
    assert sw.visited - before < fresh.visited / 2


def test_multiword_state_sets():
    """More than 64 device-count states (4 x 5 x 5 = 100): bits cross word boundaries when shifted."""
    g = Graph([Op(name=f"v{i}", work={"accelerator": 2 + i % 3, "cpu": 9, "gpu": 3}, out_bytes=1) for i in range(9)],
              [(f"v{i}", f"v{i + 1}") for i in range(8)] + [("v0", "v4"), ("v2", "v7")])
    devs = ([Device(name=f"a{i}", kind="accelerator") for i in range(3)]
            + [Device(name=f"g{i}", kind="gpu") for i in range(4)]
            + [Device(name=f"c{i}", kind="cpu", host=True) for i in range(4)])
    cluster = Cluster(devs)
    sw, _ = _sweeps(g, cluster, CostModel(), False)
    S = sw.counts.shape[0]
    assert S == 100 and sw.masks.shape[2] == 2
    opt = _optimum(g, cluster, CostModel(), False)
    for T in (opt * 0.9, opt, opt * 1.5):
        np.testing.assert_array_equal(_bits(sw.feasible_bits(T), S), np.isfinite(sw.exact(T, T)[0]))


@pytest.mark.parametrize("step", [0, 1, 63, 64, 65, 100])
def test_shift_crosses_words(step):
    rng = np.random.default_rng(step)
    bits = rng.random(130) < 0.5
    src = np.packbits(np.r_[bits, np.zeros(62, bool)], bitorder="little").view(np.uint64)
    mask = np.full(3, np.uint64(2**64 - 1), np.uint64)
    need = mask.copy()
    out = np.zeros(3, np.uint64)
    nz = F._shifted(src, step, mask, need, out)
    want = np.zeros(192, bool)
    want[step:130 + step] = bits[:192 - step] if step + 130 > 192 else bits
    got = np.unpackbits(out.view(np.uint8), bitorder="little").astype(bool)
    np.testing.assert_array_equal(got, want)
    assert nz == want.any()


def test_descending_search_uses_bitsets_only(monkeypatch):
    """With an incumbent the search never runs the float64 sweep (its table is what does not scale)."""
    g = Graph([Op(name=f"{s}{i}", work=1 + (i * 7 + ord(s)) % 5, out_bytes=1) for s in "abc" for i in range(6)],
              [(f"{s}{i}", f"{s}{i + 1}") for s in "abc" for i in range(5)] + [("a0", "b3"), ("b1", "c4")])
    cluster = Cluster.accelerators(4, cpus=2)
    exact = _optimum(g, cluster, CostModel(), False)
    monkeypatch.setattr(ideal_solve.Sweeps, "exact", lambda *a: pytest.fail("float64 sweep run"))
    su = setup(g, cluster, CostModel(), False, True)
    with reporting(Recorder()) as rec:
        sol, info = search(su, linearize=False, max_ideals=100_000, upper_bound=exact * 1.3, descend=True)
    assert sol.value == exact
    runs = [e.fields for e in rec.of("dp") if e.fields.get("phase") == "feasibility"]
    assert len(runs) == info["runs"] >= 2  # each run reported, the last one just below the optimum
    assert runs[-1]["target"] == exact * (1 - ideal_solve.RESOLUTION) and not runs[-1]["feasible"]
    assert any(r["feasible"] and r["target"] >= exact for r in runs)


def test_table_limit_counts_the_bitset_tables(monkeypatch):
    """The limit is on the tables' bytes: the bitset search fits where the float64 sweep's table would not."""
    from placement_dsl.errors import SpecError
    from placement_dsl.heuristics import ideals
    from placement_dsl.heuristics.ideals import dp, table_bytes

    g = Graph([Op(name=f"{s}{i}", work=1 + i, out_bytes=1) for s in "ab" for i in range(5)],
              [(f"{s}{i}", f"{s}{i + 1}") for s in "ab" for i in range(4)])
    cluster = Cluster.accelerators(3, cpus=1)
    classes = ideals.device_classes(cluster)
    n = dp(g, cluster).info["ideals"]  # 36 ideals, 8 states, 2 classes
    bits, exact = table_bytes(n, classes, exact=False), table_bytes(n, classes, exact=True)
    assert (bits, exact) == (n * (8 + 4 * 8 * 3), n * 8 * (15 + 8 * 3))
    monkeypatch.setattr(ideals, "MAX_TABLE_BYTES", (bits + exact) // 2)
    assert dp(g, cluster).objective == dp(g, cluster).bound
    with pytest.raises(SpecError, match=r"36 ideals x 8 device-count states need about .* GiB .* use method 'dpl' or "
                                        r"fewer device classes$"):
        dp(g, cluster, incumbent=False)


def test_descent_does_not_chase_rounding_noise():
    """Splits that beat the incumbent only by the rounding of their sums (a few ulps) end the search:
    one run just below it, not a bisection of the whole band and steps of an ulp each."""
    targets = []

    def feasible(T, deadline=math.inf):  # only the incumbent's noise-level twins exist: nothing below 10 (1 - 1e-15)
        targets.append(T)
        return [(T,)] if T >= 10.0 * (1 - 1e-15) else None

    steps, best, _ = ideal_solve.descending_search(feasible, lambda s: s[0][0] * (1 - 4e-16), 1.0, 10.0, [(10.0,)])
    assert targets == [10.0 * (1 - ideal_solve.RESOLUTION)]
    assert best == 10.0 and steps == [(10.0,)]
    targets.clear()  # a real improvement (8) is still found, to the resolution

    def better(T, deadline=math.inf):
        targets.append(T)
        return [(8.0,)] if T >= 8.0 else None

    steps, best, _ = ideal_solve.descending_search(better, lambda s: s[0][0], 1.0, 10.0, None)
    assert best == 8.0 and targets[-1] == 8.0 * (1 - ideal_solve.RESOLUTION) and len(targets) < 20


def test_descent_stops_at_its_deadline_with_the_split_in_hand_and_the_band_it_proved(monkeypatch):
    # optimum 8 in (1, 10]: every target from 8 up is feasible. Each run takes a second of a fake clock; with
    # the deadline at 3 s the search starts no fourth run and returns the split it has (8) and the largest
    # target it refuted; without a deadline it runs to the end, where the bound is the optimum itself
    targets, clock = [], [0.0]

    def feasible(T, deadline=math.inf):
        targets.append(T)
        clock[0] = float(len(targets))
        return [(8.0,)] if T >= 8.0 else None

    steps, best, lower = ideal_solve.descending_search(feasible, lambda s: s[0][0], 1.0, 10.0, None)
    assert steps == [(8.0,)] and best == lower == 8.0 and len(targets) > 3
    targets.clear()
    clock[0] = 0.0
    monkeypatch.setattr(ideal_solve, "time", SimpleNamespace(monotonic=lambda: clock[0], perf_counter=lambda: 0.0))
    steps, best, lower = ideal_solve.descending_search(feasible, lambda s: s[0][0], 1.0, 10.0, None, deadline=3.0)
    assert len(targets) == 3 and targets[0] == 10.0 * (1 - ideal_solve.RESOLUTION)
    assert steps == [(8.0,)] and best == 8.0
    assert lower == max(t for t in targets if t < 8.0) < 8.0  # the largest target refuted: the optimum lies above
    # no split in hand at the deadline (no incumbent, nothing feasible yet): the search goes on until it has one
    targets.clear()
    clock[0] = 10.0
    steps, best, lower = ideal_solve.descending_search(feasible, lambda s: s[0][0], 1.0, 7.0, None, deadline=3.0)
    assert steps == [] and best == lower == math.inf  # nothing at or below 7 exists


def test_dp_with_a_time_limit_returns_its_split_and_a_bound_not_a_certificate(monkeypatch):
    from placement_dsl.errors import SpecError
    from placement_dsl.heuristics import ideals
    from placement_dsl.heuristics.ideals import dp
    from placement_dsl.zoo import regal

    monkeypatch.setattr(ideals, "DP_SWEEP_IDEALS", 0)  # the descent (small lattices take one exact sweep)

    w = regal(0, n=14)  # Archer's REGAL graph: the DFS-order split (1556.43) is 8 % above the optimum
    cluster, model = Cluster.stages(3), CostModel.named("bottleneck")
    exact = dp(w.graph, cluster, model=model)
    assert exact.exact_among == DP_CLASS and exact.bound == exact.objective and exact.info["runs"] > 2
    cut = dp(w.graph, cluster, model=model, time_limit=1e-9)  # stops after its first run
    assert cut.info["stopped"] == "time limit" and cut.exact_among is None and cut.info["runs"] == 1
    assert 0 < cut.bound <= exact.objective <= cut.objective < cut.info["incumbent"]
    assert "stopped" not in exact.info
    with pytest.raises(SpecError, match="time_limit must be a number of seconds >= 0"):
        dp(w.graph, cluster, model=model, time_limit=-1)


def test_a_run_past_the_deadline_stops_and_the_search_returns_its_split(monkeypatch):
    # the kernel reads the clock every 16,384 ideals: a deadline already past stops the first run on a lattice of
    # 94,620 ideals; the search then returns the incumbent (DPL's split) with the capacity bound
    from placement_dsl.cli import resize
    from placement_dsl.heuristics.ideals import dp
    from placement_dsl.zoo import regal

    w = regal(0, n=34)
    cluster, model = resize(w.cluster, 8), CostModel.named("bottleneck")
    su = setup(w.graph, cluster, model, False, True)
    lat = ideal_lattice(su.con, 1_000_000)
    assert lat.count > 16_384
    sw = Sweeps(lat, su.classes, su.model, False)
    with pytest.raises(ideal_solve.Stopped):
        sw.feasible_bits(1e9, deadline=0.0)  # time.monotonic() > 0
    assert sw.feasible_bits(1e9)[-1].any()  # without a deadline the same run ends, feasible
    cut = dp(w.graph, cluster, model=model, time_limit=1e-6)
    assert cut.info["stopped"] == "time limit" and cut.objective == pytest.approx(cut.info["incumbent"], rel=1e-12)
    assert cut.bound < cut.objective and cut.exact_among is None
    assert cut.bound == pytest.approx(sw.lower * (1 - 1e-9), rel=1e-14) and cut.bound < sw.lower  # just below it


def test_brkgas_split_is_a_second_incumbent_on_large_lattices(monkeypatch):
    """On REGAL's graph 3 (30 nodes, 8 stages) BRKGA's split (1477.66) beats DPL's (1599.47): as a second
    incumbent it narrows the search's band, and the optimum (1395.24) is the same as without it."""
    from placement_dsl.cli import resize
    from placement_dsl.heuristics import ideals
    from placement_dsl.heuristics.orderings import brkga
    from placement_dsl.zoo import regal

    w = regal(3, n=30)
    cluster, model = resize(w.cluster, 8), CostModel.named("bottleneck")
    alone = ideals.dp(w.graph, cluster, model=model)
    assert "brkga" not in alone.info  # 12,128 ideals: below the threshold
    monkeypatch.setattr(ideals, "BRKGA_INCUMBENT_IDEALS", 1)
    both = ideals.dp(w.graph, cluster, model=model)
    assert both.objective == both.bound == alone.objective == alone.bound
    assert both.info["brkga"] == brkga(w.graph, cluster, model=model, seed=0).objective < both.info["incumbent"]
    assert both.info["pairs"] < alone.info["pairs"]
    bare = ideals.dp(w.graph, cluster, model=model, incumbent=False)  # no incumbent asked: neither DPL's nor BRKGA's
    assert "brkga" not in bare.info and bare.info["runs"] == 1 and bare.objective == alone.objective
    su = setup(w.graph, cluster, model, False, True)
    stages, value = ideals._brkga_split(su)
    assert value == both.info["brkga"]
    assign, _ = ideals.place(su.con, cluster, su.classes, stages)  # the same split (devices of a class renamed)
    mine = brkga(w.graph, cluster, model=model, seed=0).placement.assign
    assert len({(int(a), int(b)) for a, b in zip(assign, mine, strict=True)}) == len(stages)
    assert ideals._brkga_split(setup(w.graph, cluster, model, True, True)) == (None, None)  # replicas: not modelled
    asked = []  # the DP's time limit bounds BRKGA's run: it gets what is left of it
    monkeypatch.setattr(ideals, "brkga", lambda *a, **k: asked.append(k["time_limit"]) or brkga(*a, **k))
    ideals.dp(w.graph, cluster, model=model, time_limit=50)
    ideals.dp(w.graph, cluster, model=model)
    assert 0 < asked[0] < 50 and asked[1] is None


@pytest.mark.parametrize("full, kept", [([0, 1, 1, 1], True), ([1, 0, 0, 0], True), ([0, 1, 0, 0], False),
                                        ([0, 1, 1, 2], False)])
def test_a_heuristic_split_is_an_incumbent_only_when_it_is_one_of_the_dps(monkeypatch, full, kept):
    # a -> b -> c -> z on three stages: {a} | {b, c} is a DP split, on the first two devices or backwards (the DP
    # places its stages in DAG order); {a, c} | {b} is not contiguous; the zero-work leaf z is merged into c (App. B),
    # so {a} | {b, c} | {z}, a valid placement, splits a supernode
    from placement_dsl.heuristics import ideals
    from placement_dsl.placement import Placement

    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=1, out_bytes=1), Op(name="c", work=1, out_bytes=1),
               Op(name="z", work=0)], [("a", "b"), ("b", "c"), ("c", "z")])
    cluster = Cluster.stages(3)
    su = setup(g, cluster, CostModel(), False, True)
    assert su.con.n_nodes == 3  # z merged into c
    monkeypatch.setattr(ideals, "brkga", lambda *a, **k: SimpleNamespace(
        placement=Placement(g, cluster, full), objective=7.0))
    stages, value = ideals._brkga_split(su)
    assert value == 7.0
    if kept:
        assert [(s.tolist(), c, k) for s, c, k in stages] == [([0], 0, 1), ([1, 2], 0, 1)]
    else:
        assert stages is None


def test_an_incumbent_the_dp_may_not_take_is_priced_infinite_and_ignored():
    # a -> b -> c, each holding a byte and sending ten: two GPUs that hold one byte and a half each, and a CPU that
    # cannot run b. All three on one GPU (no transfers: 3) beats every split the DP may take (21), but breaks the
    # GPU's memory; so do a stage with b on the CPU and three GPU stages
    from placement_dsl.evaluate import evaluate
    from placement_dsl.heuristics.ideals import place
    from placement_dsl.placement import Placement

    ops = [Op(name=n, work=work, param_bytes=1, out_bytes=10) for n, work in
           (("a", {"gpu": 1, "cpu": 1}), ("b", {"gpu": 1}), ("c", {"gpu": 1, "cpu": 1}))]
    g = Graph(ops, [("a", "b"), ("b", "c")])
    cluster = Cluster([Device(name="g0", kind="gpu", memory=1.5), Device(name="g1", kind="gpu", memory=1.5),
                       Device(name="cpu", kind="cpu")])
    model = CostModel()
    sw, su = _sweeps(g, cluster, model, False)
    assert su.con.n_nodes == 3
    gpu, cpu = (next(i for i, c in enumerate(su.classes) if c.kind == kind) for kind in ("gpu", "cpu"))

    def split(*stages):
        return [(np.array(nodes), c, 1) for nodes, c in stages]

    def value(stages):
        return sw.value(ideal_solve._incumbent_steps(sw.lat, stages))

    good = split(([0], gpu), ([1], gpu), ([2], cpu))
    assign, _ = place(su.con, cluster, su.classes, good)
    assert value(good) == evaluate(Placement(g, cluster, assign), model).max_load == 21.0  # b: 1 + 10 in + 10 out
    bad = [split(([0, 1, 2], gpu)), split(([0], gpu), ([1, 2], cpu)), split(([0], gpu), ([1], gpu), ([2], gpu))]
    assert [value(s) for s in bad] == [math.inf] * 3
    for stages in bad:  # each bad split as the incumbent: the search still finds the optimum, a split it may take
        sol = ideal_solve.solve(sw.lat, su.classes, model, False, math.inf, incumbents=[stages])
        assert sol.value == 21.0 and sol.lower is None


@settings(max_examples=20, deadline=None)
@given(graph=graphs(), cluster=clusters())
def test_both_runs_begin_and_end_their_walk_below_an_ideal_alike(graph, cluster):
    """The feasibility run and the sweep begin the walk below ``I`` with one kernel: ``I``'s immediate sub-ideals,
    stamped, each with the tensors its stage sends out of ``I`` (those its removed node makes that leave ``I``);
    ending it clears what each node sends."""
    from placement_dsl.heuristics.ideal_sweep import walk_end, walk_scratch, walk_start

    sw, _ = _sweeps(graph, cluster, CostModel(), False)
    (ideals, sub_ptr, sub_idx, *_), (sptr, sidx, _, towner, tcost) = sw.head, sw.head[16:21]
    N = ideals.shape[0]
    stamp, stack, _, _, _, _, _, _, leaving, out_lb = walk_scratch(N, 1, 1, sw.head[18].shape[1] * 64)
    for I in range(1, N):
        top = walk_start(I, ideals[I], ideals, sub_ptr, sub_idx, sptr, sidx, towner, tcost, stamp, stack, out_lb,
                         leaving)
        subs = sub_idx[sub_ptr[I]:sub_ptr[I + 1]]
        assert sorted(stack[:top].tolist()) == sorted(subs.tolist()) and (stamp[subs] == I).all()
        for J in subs.tolist():
            (x,) = np.flatnonzero(_bits(ideals[I:I + 1] & ~ideals[J:J + 1], 64 * ideals.shape[1])[0])
            crossing = sidx[sptr[I]:sptr[I + 1]]
            assert out_lb[J] == pytest.approx(tcost[crossing[towner[crossing] == x]].sum())
        walk_end(I, sptr, sidx, towner, leaving)
        assert not leaving.any()
