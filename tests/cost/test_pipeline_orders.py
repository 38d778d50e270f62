"""Interleaved 1F1B and ZB-H1: torch's rank orders, their exact makespan, the closed form and the stash."""
from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.errors import SpecError
from placement_dsl.order_bounds import closed_form_makespan
from placement_dsl.pipeline_orders import (
    ORDERS,
    StageTimes,
    StageTransfer,
    check_round_robin,
    layout,
    order_makespan,
    rank_orders,
    stash_peaks,
)
from placement_dsl.stage_schedules import simulate_orders


def torch_orders(name: str, p: int, v: int, m: int) -> list[list[str]]:
    """torch's own per-rank actions (its schedule classes build them without stages from these four fields)."""
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    cls = {"interleaved-1f1b": schedules.ScheduleInterleaved1F1B,
           "zb-h1": schedules.ScheduleInterleavedZeroBubble}[name]
    s = object.__new__(cls)
    s.pp_group_size, s.n_local_stages, s._n_microbatches = p, v, m
    s.number_of_rounds = max(1, m // p)
    s.microbatches_per_round = m // s.number_of_rounds
    return [[str(a) for a in s._calculate_single_rank_operations(k) if a is not None] for k in range(p)]


def test_zbv_orders_are_torchs():
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    for p in (1, 2, 3, 4):
        for m in range(1, 2 * p + 5):  # below 2p - 1 torch builds 2p - 1 and drops the micro-batches past m
            s = object.__new__(schedules.ScheduleZBVZeroBubble)
            s.pp_group_size, s.num_stages, s._n_microbatches = p, 2 * p, m
            want = [[str(a) for a in s._calculate_single_rank_operations(k) if a is not None] for k in range(p)]
            assert [[str(a) for a in o] for o in rank_orders("zbv", p, 2, m)] == want, (p, m)
    with pytest.raises(SpecError, match=r"'zbv': needs 2 stages per rank \(a V over 2p stages\), got 3"):
        rank_orders("zbv", 3, 3, 4)


@pytest.mark.parametrize("name", ["interleaved-1f1b", "zb-h1"])
def test_orders_are_torchs(name):
    for p, v, m in itertools.product((1, 2, 3, 4), (1, 2, 3), (1, 2, 4, 6, 8, 12)):
        if m % max(1, m // p):
            continue
        assert [[str(a) for a in o] for o in rank_orders(name, p, v, m)] == torch_orders(name, p, v, m), (p, v, m)


def equal(p: int, v: int, f: float, i: float, w: float) -> StageTimes:
    s = p * v
    return StageTimes(tuple(k % p for k in range(s)), (f,) * s, (i,) * s, (w,) * s)


@pytest.mark.parametrize("p, v, m", [(4, 2, 64), (4, 1, 64), (2, 3, 8), (8, 2, 64)])
def test_interleaved_equal_stages_have_megatrons_bubble(p, v, m):
    """m v (f + b) + (p - 1)(f + b): a bubble of (p - 1) / (v m) of the ideal time (Narayanan et al. 2021, §2.2)."""
    t = equal(p, v, 1.0, 1.5, 1.0)
    orders = rank_orders("interleaved-1f1b", p, v, m)
    want = m * v * 3.5 + (p - 1) * 3.5
    assert order_makespan(t, orders) == want == closed_form_makespan(t, orders)
    assert simulate_orders(t, orders).makespan == want


@pytest.mark.parametrize("p, m", [(4, 64), (2, 8), (8, 64)])
def test_zb_h1_equal_stages_have_its_bubble(p, m):
    """ZB-H1: m (F + I + W) + (p - 1)(F + I - W) (Qi et al., §3), W filling what 1F1B leaves idle."""
    t = equal(p, 1, 1.0, 1.5, 1.0)
    orders = rank_orders("zb-h1", p, 1, m)
    want = m * 3.5 + (p - 1) * 1.5
    assert order_makespan(t, orders) == want == closed_form_makespan(t, orders)
    assert simulate_orders(t, orders).makespan == want
    assert want < order_makespan(t, rank_orders("interleaved-1f1b", p, 1, m))


def test_hand_instance_of_unequal_stages():
    """0F0 0..1, 0F1 1..2, 1F0 1..3, 1B0 3..4, 1F1 4..6, 1B1 6..7, 0B0 4..7, 0B1 7..10."""
    t = StageTimes((0, 1), (1.0, 2.0), (3.0, 1.0), (0.0, 0.0))
    orders = rank_orders("interleaved-1f1b", 2, 1, 2)
    run = simulate_orders(t, orders, record=True)
    assert order_makespan(t, orders) == run.makespan == 10.0
    bars = {str(task.action): (task.start, task.end) for task in run.trace}
    assert bars["1F1"] == (4.0, 6.0) and bars["0B0"] == (4.0, 7.0) and bars["0B1"] == (7.0, 10.0)


def shape(draw, fewest: int, rounds: int) -> tuple[str, int, int, int]:
    """An order's name, ranks ``p`` (from ``fewest``), stages per rank ``v`` and micro-batches ``m`` (at most
    ``rounds`` per rank)."""
    name = draw(st.sampled_from(ORDERS))
    p = draw(st.integers(fewest, 4))
    v = 2 if name == "zbv" else draw(st.integers(1, 3))
    m = draw(st.integers(1, rounds * p)) if name == "zbv" else p * draw(st.integers(1, rounds))
    return name, p, v, m


def stage_lists(draw, count: int, most: int, s: int) -> list[list[float]]:
    return [draw(st.lists(st.integers(0, most).map(float), min_size=s, max_size=s)) for _ in range(count)]


@st.composite
def instances(draw):
    name, p, v, m = shape(draw, 1, 4)
    s = p * v
    f, i, w = stage_lists(draw, 3, 6, s)
    return name, p, v, m, StageTimes(tuple(layout(name, p, s)), tuple(f), tuple(i), tuple(w))


@settings(deadline=None, max_examples=80)
@given(instances())
def test_recurrence_equals_simulator_and_closed_form_stays_below(case):
    name, p, v, m, t = case
    orders = rank_orders(name, p, v, m)
    span = simulate_orders(t, orders).makespan
    assert order_makespan(t, orders) == pytest.approx(span, abs=1e-9)
    assert closed_form_makespan(t, orders) <= span + 1e-9
    load = np.bincount(t.rank, weights=np.add(np.add(t.f, t.i), t.w), minlength=p)
    assert span >= m * load.max() - 1e-9  # no rank does its work faster than alone


def test_stash_of_interleaved_and_zero_bubble():
    t = equal(2, 2, 1.0, 1.0, 0.0)
    n, peak = stash_peaks(t, rank_orders("interleaved-1f1b", 2, 2, 4), [1.0, 1.0, 1.0, 1.0])
    assert n.tolist() == [4, 3, 2, 1] and peak.tolist() == [5.0, 3.0]
    # held until its W: torch's order defers k weight gradients on rank k, so every stage keeps p micro-batches
    # (1F1B's first stage's count; 1F1B itself keeps p - k)
    n, _ = stash_peaks(equal(4, 1, 1.0, 1.0, 1.0), rank_orders("zb-h1", 4, 1, 16), [1.0] * 4)
    assert n.tolist() == [4, 4, 4, 4]
    n, _ = stash_peaks(equal(4, 1, 1.0, 1.0, 0.0), rank_orders("interleaved-1f1b", 4, 1, 16), [1.0] * 4)
    assert n.tolist() == [7, 5, 3, 1]  # torch's interleaved warm-up at v = 1: 2 (p - 1 - k) forwards, one more


def test_refusals():
    with pytest.raises(SpecError, match="unknown schedule 'zb-h2'"):
        rank_orders("zb-h2", 2, 1, 4)
    with pytest.raises(SpecError, match="microbatches=10 is not a multiple of its 3 rounds"):
        rank_orders("interleaved-1f1b", 3, 2, 10)
    with pytest.raises(SpecError, match="virtual stages per rank must be a whole number >= 1, got 0"):
        rank_orders("zb-h1", 2, 0, 4)
    with pytest.raises(SpecError, match="stage 1 runs on rank 0, not on rank 1"):
        check_round_robin(StageTimes((0, 0, 1, 1), (1.0,) * 4, (1.0,) * 4, (0.0,) * 4), 2)
    with pytest.raises(SpecError, match="stage 2 runs on rank 0, not on rank 1; zbv places stages k and 2p - 1 - k"):
        check_round_robin(StageTimes((0, 1, 0, 1), (1.0,) * 4, (1.0,) * 4, (0.0,) * 4), 2, "zbv")


def linked(name: str, p: int, v: int, f, i, w, out, back) -> StageTimes:
    """Stages of ``layout(name)`` whose boundaries send one message each way over a link per ordered rank pair:
    ``out[s]`` / ``back[s]`` the time of the forward / backward message between stages ``s`` and ``s + 1``."""
    rank = tuple(layout(name, p, p * v))
    link: dict[tuple[int, int], int] = {}
    sent = []
    for s in range(p * v - 1):
        a, b = rank[s], rank[s + 1]
        if a != b:
            sent.append(StageTransfer(s, s + 1, "F", "F", (link.setdefault((a, b), len(link)),), (out[s],)))
            sent.append(StageTransfer(s + 1, s, "B", "B", (link.setdefault((b, a), len(link)),), (back[s],)))
    return StageTimes(rank, tuple(f), tuple(i), tuple(w), tuple(sent))


@pytest.mark.parametrize("name", ["interleaved-1f1b", "zb-h1"])
def test_the_closed_form_pays_the_messages_round_trip_and_the_links_fill_and_drain(name):
    """Two stages whose messages hold a link 4 each way per micro-batch, ranks busy 1.6: 1F1B is link-bound (the
    link's 64 x 4 after micro-batch 0's first forward, and the last gradient's reader after it: 4.103 per
    micro-batch), ZB-H1's order keeps one micro-batch fewer in flight than the round trip needs (5.21). The closed
    form read 4.0 for both (the links' time alone), 22 % under ZB-H1's."""
    split = name == "zb-h1"
    t = linked(name, 2, 1, (0.5, 0.5), (0.5,) * 2 if split else (0.8,) * 2, (0.3,) * 2 if split else (0.0,) * 2,
               (4.0,), (4.0,))
    orders = rank_orders(name, 2, 1, 64)
    exact = order_makespan(t, orders)
    assert exact == pytest.approx(simulate_orders(t, orders).makespan)
    assert 0.99 * exact <= closed_form_makespan(t, orders) <= exact + 1e-9


@st.composite
def linked_instances(draw):
    name, p, v, m = shape(draw, 2, 3)
    s = p * v
    f, i, w = stage_lists(draw, 3, 4, s)
    out, back = stage_lists(draw, 2, 8, s)
    return name, p, v, m, linked(name, p, v, f, i, w, out, back)


@settings(deadline=None, max_examples=60)
@given(linked_instances())
def test_the_closed_form_stays_below_the_recurrence_on_links(case):
    name, p, v, m, t = case
    orders = rank_orders(name, p, v, m)
    assert closed_form_makespan(t, orders) <= order_makespan(t, orders) + 1e-9


@pytest.mark.parametrize("name", ORDERS)
def test_a_links_latency_delays_each_message_not_the_link(name):
    """A latency after each hop: one micro-batch through two stages (four under ZBV's V) pays it once per message
    (the fill and the drain), the link carries its next hop meanwhile, so at m = 64 a latency far below the
    round trip's slack leaves the time per micro-batch within the fill and drain of it; the recurrence, the event
    simulator and the closed form agree on it as without one."""
    p = 2
    v = 2 if name == "zbv" else 1
    s = p * v
    plain = linked(name, p, v, (1.0,) * s, (1.0,) * s, (0.5,) * s, (0.5,) * s, (0.5,) * s)
    late = replace(plain, transfers=tuple(replace(x, latencies=(3.0,)) for x in plain.transfers))
    one = rank_orders(name, p, v, 1)
    messages = sum(1 for x in plain.transfers)
    assert order_makespan(late, one) == order_makespan(plain, one) + 3.0 * messages
    for m in (1, 4, 64):
        orders = rank_orders(name, p, v, m)
        span = order_makespan(late, orders)
        assert span == pytest.approx(simulate_orders(late, orders).makespan)
        assert closed_form_makespan(late, orders) <= span + 1e-9
        assert span >= order_makespan(plain, orders)
    assert late.link_loads() == plain.link_loads()  # the links' occupancy: bytes over bandwidth alone


def with_latency(case: tuple, latency: float) -> tuple[StageTimes, list]:
    """A drawn linked case's stage times with every message's hop paying ``latency`` on its link, and its ranks'
    orders."""
    name, p, v, m, t = case
    return replace(t, transfers=tuple(replace(x, latencies=(latency,)) for x in t.transfers)), rank_orders(name, p, v, m)


@settings(deadline=None, max_examples=40)
@given(linked_instances(), st.integers(0, 5).map(float))
def test_the_recurrence_equals_the_simulator_with_link_latencies(case, latency):
    t, orders = with_latency(case, latency)
    span = order_makespan(t, orders)
    assert span == pytest.approx(simulate_orders(t, orders).makespan, abs=1e-9)
    assert closed_form_makespan(t, orders) <= span + 1e-9


def test_interleaved_stages_sharing_a_link_queue_their_messages_in_the_closed_form():
    """Interleaved 1F1B at p = 2, v = 2: the boundaries 0 -> 1 and 2 -> 3 send their forwards and 2 -> 1 its
    gradients over one link (rank 0 to rank 1). A forward waits behind a 4.86 gradient there, and the rank behind
    it: the recurrence reads 695.7 at m = 64. The closed form read each message as a delay with no link shared,
    620.2 (10.9 % under); in the order rank 0 sends them (a sub-order of the link's), it is the recurrence."""
    t = linked("interleaved-1f1b", 2, 2, (0.58, 0.61, 0.76, 1.41), (2.16, 2.58, 2.54, 2.13), (0.0,) * 4,
               (0.70, 0.08, 0.02), (3.33, 4.86, 0.01))
    orders = rank_orders("interleaved-1f1b", 2, 2, 64)
    exact = order_makespan(t, orders)
    assert exact == pytest.approx(simulate_orders(t, orders).makespan)
    assert closed_form_makespan(t, orders) == pytest.approx(exact, rel=1e-12)


@settings(deadline=None, max_examples=60)
@given(linked_instances(), st.integers(0, 3).map(float))
def test_the_closed_form_is_the_recurrence_where_each_link_carries_one_ranks_messages(case, latency):
    """A link per ordered pair of ranks carries the messages of its first rank alone, in that rank's order."""
    t, orders = with_latency(case, latency)
    assert closed_form_makespan(t, orders) == pytest.approx(order_makespan(t, orders), rel=1e-12, abs=1e-9)


@settings(deadline=None, max_examples=60)
@given(linked_instances(), st.integers(0, 3).map(float))
def test_the_closed_form_stays_below_the_recurrence_on_a_ring(case, latency):
    """A one-way ring: each message hop by hop from its sender's rank to its reader's, a link carrying several
    ranks' messages, whose order between senders only the links' sorted order has."""
    name, p, v, m, t = case
    ring = []
    for x in t.transfers:
        a, b = t.rank[x.src], t.rank[x.dst]
        path = tuple((a + h) % p for h in range((b - a) % p))
        ring.append(replace(x, links=path, times=(x.times[0],) * len(path), latencies=(latency,) * len(path)))
    t = replace(t, transfers=tuple(ring))
    orders = rank_orders(name, p, v, m)
    span = order_makespan(t, orders)
    assert span == pytest.approx(simulate_orders(t, orders).makespan, abs=1e-9)
    assert closed_form_makespan(t, orders) <= span + 1e-9
