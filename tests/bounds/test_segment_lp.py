"""The makespan through the cut ops' devices, each segment priced by its LP of work and transfer loads
(bounds/segment_lp.py)."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from placement_dsl.bounds import segment_lp
from placement_dsl.bounds.makespan import energy_makespan, route_path_makespan
from placement_dsl.bounds.segment_lp import segment_lp_bound
from placement_dsl.bounds.segments import transfer_segment_bound
from placement_dsl.brute import brute_force
from placement_dsl.certify import certify
from placement_dsl.constraints import Congestion, Pin
from placement_dsl.deadline import Deadline
from placement_dsl.graph import Graph, Op
from placement_dsl.lp import available, new_highs
from placement_dsl.objectives import Makespan
from placement_dsl.problem import Problem
from tests.bounds.forks import fork_chains, hubs, serial

pytestmark = pytest.mark.skipif(not available(), reason="the segments' LPs are solved by HiGHS")
TOL = 1e-6


def heads(k: int, size: float, mode: str | None) -> Problem:
    """``a -> q_i -> x_i -> b`` for ``k`` heads on two devices: ``a``, ``b`` and each ``x_i`` take 1, each ``q_i``
    nothing; ``a``'s tensor is 100, each ``q_i``'s ``size``, each ``x_i``'s empty (as an attention head's inputs)."""
    ops = [Op(name="a", work=1.0, out_bytes=100.0), Op(name="b", work=1.0)]
    ops += [Op(name=f"q{i}", work=0.0, out_bytes=size) for i in range(k)]
    ops += [Op(name=f"x{i}", work=1.0, out_bytes=0.0) for i in range(k)]
    edges = [e for i in range(k) for e in (("a", f"q{i}"), (f"q{i}", f"x{i}"), (f"x{i}", "b"))]
    return Problem(Graph(ops, edges), serial(2), Makespan(), [Congestion(mode)])


def test_the_ports_keep_the_heads_home():
    # moving a share H of the four heads loads d0's out-port with 10 H: the LP's least L = max(4 - H, 10 H) is
    # 40/11, and the makespan at least 1 + 40/11 + 1 = 62/11; the optimum keeps every head on d0: 6. The path says
    # 3, the work over two devices 3; the cut segments 6, for d1 joins only through a slice's tensor (10): the empty
    # tensors the heads send to b are read by no op of the segment
    p = heads(4, 10.0, "port")
    value, note, complete = segment_lp_bound(p, Deadline(30.0))
    assert complete and "2 cut ops" in note
    assert value == pytest.approx(62 / 11, rel=1e-5)
    assert brute_force(p)[0] == pytest.approx(6.0) == transfer_segment_bound(p)[0]
    assert max(route_path_makespan(p)[0], energy_makespan(p)[0]) <= 4.0 + TOL


def hub(k: int, view: float, size: float, devices: int) -> Problem:
    """``a -> v -> q_i -> x_i -> b``: ``a`` and ``b`` take 1, the view ``v`` and its slices ``q_i`` nothing, each head
    ``x_i`` 1; ``a``'s and ``v``'s tensors are ``view``, each slice's ``size``, each head's empty."""
    ops = [Op(name="a", work=1.0, out_bytes=view), Op(name="v", work=0.0, out_bytes=view), Op(name="b", work=1.0)]
    ops += [Op(name=f"q{i}", work=0.0, out_bytes=size) for i in range(k)]
    ops += [Op(name=f"x{i}", work=1.0, out_bytes=0.0) for i in range(k)]
    edges = [("a", "v")] + [e for i in range(k) for e in (("v", f"q{i}"), (f"q{i}", f"x{i}"), (f"x{i}", "b"))]
    return Problem(Graph(ops, edges), serial(devices), Makespan(), [Congestion("port")])


def without_port_cuts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("placement_dsl.bounds.segment_lp._port_cuts", lambda *args: [])


def test_a_head_moved_off_the_cut_ops_device_pays_its_way_out_of_that_port(monkeypatch):
    # two heads behind a view (4) and their slices (2 each), on three devices. With a and b on d0, moving a share
    # H of the heads off d0 sends at least 2 H through d0's out-port (a slice per head, or the view's 4 for both:
    # the least cut between a and the heads moved), so L >= max(2 - H, 2 H) = 4/3 and the makespan >= 1 + 4/3 + 1
    # = 10/3; the optimum keeps both heads on d0: 4. The flows alone relay: v's share on d1 serves both slices'
    # shares there, which d1 forwards to d2 from its own port, and the window is 1 (3 in all)
    p = hub(2, 4.0, 2.0, 3)
    assert segment_lp_bound(p, Deadline(30.0))[0] == pytest.approx(10 / 3, rel=1e-5)
    assert brute_force(p)[0] == pytest.approx(4.0)
    without_port_cuts(monkeypatch)
    assert segment_lp_bound(p, Deadline(30.0))[0] == pytest.approx(3.0, rel=1e-5)


def test_a_channel_carries_the_same_moves_and_no_congestion_none():
    # one channel d0 -> d1 carries every move, as the port did: 62/11; without congestion the heads split: 1 + 2 + 1
    assert segment_lp_bound(heads(4, 10.0, "channel"))[0] == pytest.approx(62 / 11, rel=1e-5)
    assert segment_lp_bound(heads(4, 10.0, None))[0] == pytest.approx(4.0, rel=1e-5)


def test_the_cut_ops_devices_are_priced_pair_by_pair():
    # with the cut ops anywhere, the LP splits a, b and every head half and half and moves nothing: 2, and 4 in all;
    # pricing each pair of the cut ops' devices finds that the heads must pay their way out of a's device
    p = heads(4, 10.0, "port")
    assert segment_lp_bound(p, pairs=False)[0] == pytest.approx(4.0, rel=1e-5)
    assert segment_lp_bound(p)[0] == pytest.approx(62 / 11, rel=1e-5)


def test_a_spent_clock_answers_at_once(monkeypatch):
    # spent before the start: nothing is priced; spent after the cut ops: every window counts 0, the cut ops their
    # times (1 + 1); a clock that lets the paths but no LP through keeps the segment's longest path (1): 3
    value, note, complete = segment_lp_bound(heads(4, 10.0, "port"), Deadline(0.0))
    assert not complete and value == 0.0 and "budget spent" in note

    assert segment_lp_bound(heads(4, 10.0, "port"), After(1))[:3:2] == (pytest.approx(2.0), False)
    assert segment_lp_bound(heads(4, 10.0, "port"), After(2))[:3:2] == (pytest.approx(3.0), False)


def layers_of_heads(layers: int) -> Problem:
    """``layers`` layers of four heads between cut ops on two serial devices: cut op ``c{j}`` (1, 100 bytes out)
    feeds four heads ``l{j}q{i}`` (0, 10 bytes out) -> ``l{j}x{i}`` (``1 + j``), which feed ``c{j + 1}``."""
    ops = [Op(name=f"c{j}", work=1.0, out_bytes=100.0) for j in range(layers + 1)]
    ops += [Op(name=f"l{j}q{i}", work=0.0, out_bytes=10.0) for j in range(layers) for i in range(4)]
    ops += [Op(name=f"l{j}x{i}", work=1.0 + j, out_bytes=0.0) for j in range(layers) for i in range(4)]
    edges = [e for j in range(layers) for i in range(4)
             for e in ((f"c{j}", f"l{j}q{i}"), (f"l{j}q{i}", f"l{j}x{i}"), (f"l{j}x{i}", f"c{j + 1}"))]
    return Problem(Graph(ops, edges), serial(2), Makespan(), [Congestion("port")])


def test_a_clock_that_stops_the_pairs_keeps_every_segments_floor():
    # two layers of four heads (the second's heads take 2): the floors of both are priced before any pair, so a clock
    # spent after them (nine questions: the start, and per layer a price, one per device as its port cuts are found,
    # and an LP) keeps both floors; priced layer by layer, the second layer counted 0 once the first one's pairs had
    # spent the clock
    p = layers_of_heads(2)
    floors = segment_lp_bound(p, pairs=False)[0]
    assert floors == pytest.approx(3.0 + 2.0 + 4.0, rel=1e-6)  # the cut ops; each layer's heads split half and half
    value, _, complete = segment_lp_bound(p, After(9))
    assert not complete and value == pytest.approx(floors, rel=1e-6)


class After:
    """A clock expired from its n-th question on."""

    def __init__(self, n: int):
        self.asked, self.n = 0, n

    def expired(self) -> bool:
        self.asked += 1
        return self.asked > self.n

    def left(self) -> float:
        return 1.0


def test_identical_segments_are_priced_once():
    # three layers of the same two-head fork: one LP for the three, its pairs solved once for all three
    ops = [Op(name=f"c{j}", work=1.0, out_bytes=5.0) for j in range(4)]
    ops += [Op(name=f"l{j}x{i}", work=2.0, out_bytes=5.0) for j in range(3) for i in range(2)]
    edges = [e for j in range(3) for i in range(2) for e in ((f"c{j}", f"l{j}x{i}"), (f"l{j}x{i}", f"c{j + 1}"))]
    p = Problem(Graph(ops, edges), serial(2), Makespan(), [Congestion("port")])
    _, note, complete = segment_lp_bound(p)
    assert complete and "(2 reused)" in note


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(fork_chains(times=(0, 4), most_size=4))
def test_never_above_the_brute_force_optimum(p):
    # brute force list-schedules every placement (at least the optimum); the bound is at least the route path
    value, _, complete = segment_lp_bound(p, Deadline(30.0))
    assert complete
    assert route_path_makespan(p)[0] - TOL <= value <= brute_force(p)[0] + TOL


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hubs())
def test_the_port_cuts_never_lift_it_above_the_brute_force_optimum(p):
    # views and slices of no time feeding heads, where the cut rows may raise the LP (the hand instance above; 3 of
    # the strategy's first 60 draws). The devices are alike, so some optimum runs a on d0: brute force pins it there
    value, _, complete = segment_lp_bound(p, Deadline(30.0))
    assert complete
    pinned = Problem(p.graph, p.cluster, p.objective, [*p.constraints, Pin("a", "d0")])
    assert value <= brute_force(pinned)[0] + TOL


def test_certify_runs_it_as_a_level():
    cert = certify(heads(4, 10.0, "port"), levels=("segment-lp",), budget=30.0, stop_at_gap=False)
    row = next(r for r in cert.levels if r.level == "segment-lp")
    assert row.bound == pytest.approx(62 / 11, rel=1e-5)


class Left:
    """A clock never spent, with ``seconds`` left whenever asked."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def expired(self) -> bool:
        return False

    def left(self) -> float:
        return self.seconds


class Recorded:
    """A HiGHS instance that notes, at each run, its run time so far and the time limit it was given."""

    def __init__(self, highs: Any):
        self.highs, self.limit, self.runs = highs, None, []

    def setOptionValue(self, name: str, value: Any) -> Any:
        if name == "time_limit":
            self.limit = value
        return self.highs.setOptionValue(name, value)

    def run(self) -> Any:
        self.runs.append((self.highs.getRunTime(), self.limit))
        return self.highs.run()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.highs, name)


def test_a_segments_pair_lps_each_get_the_time_left_not_their_sum(monkeypatch):
    # HiGHS counts an instance's runs together: the pair LPs of a segment, re-run on one instance, stopped at once
    # with "time limit" once their sum passed the time left (GPT-3 330M inter-server: 2 of 24 LPs unsolved at 8.7 s,
    # 190.8 where 198.6 holds). So each run's limit is the instance's run time so far plus the time left: read from
    # the runs, not from whether 24 LPs fit in a short clock on a loaded machine
    from placement_dsl.zoo import gpt3

    made: list[Recorded] = []

    def recording(*args: Any, **kwargs: Any) -> Recorded:
        made.append(Recorded(new_highs(*args, **kwargs)))
        return made[-1]
    monkeypatch.setattr(segment_lp, "new_highs", recording)
    w = gpt3(None, layers=1, hidden=256, heads=2, seq_len=128, cluster="inter-server")
    p = Problem(w.graph, w.cluster, Makespan(), [Congestion("port")])
    value, note, complete = segment_lp_bound(p, Left(30.0))
    assert complete and "4 segment LPs" in note  # the floors, then the pairs the shortest path takes
    runs = [run for highs in made for run in highs.runs]
    assert len(runs) >= 4 and any(ran > 0 for ran, _ in runs)  # an instance ran its pair LPs one after another
    assert all(limit >= ran + 30.0 for ran, limit in runs)
    assert value == pytest.approx(segment_lp_bound(p)[0], rel=1e-9)


def test_one_device_has_no_port_to_price():
    """With one device there is no other device for a tensor to leave to; the port rows took a minimum over none
    and the solve of a one-device MOIRAI sheet stopped with an internal error."""
    p = heads(3, 10.0, "port")
    one = Problem(p.graph, serial(1), Makespan(), [Congestion("port")])
    value, _, complete = segment_lp_bound(one, Deadline(30.0))
    assert complete and value == pytest.approx(5.0)  # a, b and the three heads run one after another


def every_pair(p: Problem) -> float:
    """The shortest path with every pair of every segment's cut ops' devices priced by its LP."""
    real = segment_lp._refine

    def exhaustive(pricer: Any, prices: Any, keys: Any, cuts: Any, times: Any) -> tuple[float, bool]:
        for key, model in pricer.models.items():
            for da, db in zip(*(~model.done).nonzero()):
                assert pricer.pair(key, int(da), int(db))
        return real(pricer, prices, keys, cuts, times)

    segment_lp._refine = exhaustive
    try:
        return segment_lp_bound(p)[0]
    finally:
        segment_lp._refine = real


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(fork_chains(times=(0, 4), most_size=4))
def test_the_pairs_the_path_takes_give_what_every_pair_gives(p):
    # a pair off the shortest path keeps its floor: it would only lengthen paths that are already not the shortest
    assert segment_lp_bound(p)[0] == pytest.approx(every_pair(p), rel=1e-9, abs=1e-9)


def test_a_layers_pairs_are_priced_where_the_path_takes_them():
    # a 1-layer GPT on four devices: 24 LPs with every pair of each segment's cut ops' devices priced, 4 on demand on
    # the inter-server cluster; on the intra-server one the first path's pairs rise past another path, whose pairs
    # then need their LPs too (6)
    from placement_dsl.zoo import gpt3

    for cluster, heads, lps in (("inter-server", 2, 4), ("intra-server", 1, 6)):
        w = gpt3(None, layers=1, hidden=256, heads=heads, seq_len=128, cluster=cluster)
        p = Problem(w.graph, w.cluster, Makespan(), [Congestion("port")])
        value, note, complete = segment_lp_bound(p)
        assert complete and f"{lps} segment LPs" in note
        assert value == pytest.approx(every_pair(p), rel=1e-9)


def test_layers_alike_but_for_their_times_share_their_port_cuts(monkeypatch):
    # three layers of four heads whose heads take 1, 2 and 3: three LPs, one set of port cuts (the cuts read the
    # tensors, not the times), and the bound the cuts found layer by layer give
    p = layers_of_heads(3)
    found, real = [], segment_lp._port_cuts
    monkeypatch.setattr(segment_lp, "_port_cuts", lambda *args: found.append(1) or real(*args))
    value, note, complete = segment_lp_bound(p)
    assert complete and "(0 reused)" in note and len(found) == 1
    monkeypatch.setattr(segment_lp._Pricer, "_port_rows", lambda self, form, *args: real(*args, self.deadline))
    assert value == pytest.approx(segment_lp_bound(p)[0], rel=1e-12)


def test_a_layers_lps_start_from_the_layer_befores_basis(monkeypatch):
    # three GPT layers whose ops' times differ by a few percent: each pair's LP starts from the optimal basis of the
    # same pair of the layer before, to the same optimum in fewer simplex iterations than from scratch
    import numpy as np

    from placement_dsl.zoo import gpt3

    w = gpt3(None, layers=3, hidden=256, heads=2, seq_len=128, cluster="inter-server")
    factors = np.random.default_rng(1).lognormal(0.0, 0.1, (w.graph.n, 4))
    ops = [op.model_copy(update={"work": {k: t * f for (k, t), f in zip(op.work.items(), row)}})
           for op, row in zip(w.graph.ops, factors)]
    g = Graph(ops, [(w.graph.names[u], w.graph.names[v]) for u, v in zip(w.graph.src, w.graph.dst)])
    p = Problem(g, w.cluster, Makespan(), [Congestion("port")])
    iterations, real = [], segment_lp._Pricer._run

    def counted(self: Any, highs: Any, n_cols: int, upper: Any) -> Any:
        value = real(self, highs, n_cols, upper)
        iterations.append(highs.getInfo().simplex_iteration_count)
        return value
    monkeypatch.setattr(segment_lp._Pricer, "_run", counted)
    value, _, complete = segment_lp_bound(p)
    kept = sum(iterations)
    monkeypatch.setattr(segment_lp._Pricer, "bases", property(lambda self: {}, lambda self, v: None), raising=False)
    iterations.clear()
    assert complete and value == pytest.approx(segment_lp_bound(p)[0], rel=1e-9)
    assert kept < sum(iterations)
