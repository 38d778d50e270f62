"""The DP over ideals with memory per schedule under torch's interleaved 1F1B and ZB-H1 orders: a stage holds the
micro-batches the rank's order keeps in flight (ZB-H1: ``min(p, m)`` on every stage, until their ``W``), as the cost
model counts them; checked against brute force over contiguous splits and against the simulator's trace."""
from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.errors import InfeasibleError, SpecError
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.pipeline_orders import FOLDS, ORDERS, SPLIT, StageTimes, layout, rank_orders, stage_inflight
from placement_dsl.placement import Placement
from placement_dsl.stage_schedules import simulate_orders
from placement_dsl.training import TrainingMemorySpec
from placement_dsl.zoo.training import with_backward


def chain(works, out_bytes, params) -> Graph:
    ops = [Op(name=f"l{i}", work=float(w), out_bytes=float(b), param_bytes=float(q))
           for i, (w, b, q) in enumerate(zip(works, out_bytes, params))]
    ops, edges = with_backward(ops, [(f"l{i}", f"l{i + 1}") for i in range(len(works) - 1)])
    return Graph(ops, edges)


def model_of(schedule: str, m: int, spec: TrainingMemorySpec, overlap: str = "none") -> CostModel:
    return CostModel.named(schedule, microbatches=m, training_memory=spec, overlap=overlap)


def test_hand_instances():
    """l0 .. l3, work 1, 1 byte out each, no parameters, 2 devices of 5 bytes, m = 4. Interleaved 1F1B keeps 3
    micro-batches on stage 0 (torch's warm-up of 2 forwards, then one more) and 1 on stage 1: l0 | l1 l2 l3 holds
    3 x 1 and 1 x (3 + 1 input); 1F1B's count (2 and 1) would take l0 l1 | l2 l3 (2 x 2, 1 x 3), which holds 6 on
    stage 0. ZB-H1 keeps 2 on both stages: every split needs 6 or 8 on one device, so all runs on one (4)."""
    g = chain([1] * 4, [1] * 4, [0] * 4)
    c = Cluster.stages(2, memory=5.0)
    spec = TrainingMemorySpec("1f1b")
    res = run("dp", g, c, model=model_of("interleaved-1f1b", 4, spec))
    ev = evaluate(res.placement, model_of("interleaved-1f1b", 4, spec))
    assert res.placement.assign.tolist()[:4] == [0, 1, 1, 1] and ev.valid
    assert [d.memory_used for d in ev.devices] == [3.0, 4.0]
    res = run("dp", g, c, model=model_of("zb-h1", 4, spec))
    ev = evaluate(res.placement, model_of("zb-h1", 4, spec))
    assert len(set(res.placement.assign.tolist())) == 1 and ev.valid and max(d.memory_used for d in ev.devices) == 4
    assert stage_inflight("interleaved-1f1b", 4, 8).tolist() == [7, 5, 3, 1]
    assert stage_inflight("zb-h1", 4, 8).tolist() == [4, 4, 4, 4] and stage_inflight("zb-h1", 4, 2).tolist() == [2] * 4


def contiguous(n: int, k: int):
    """Every split of a chain of ``n`` ops into at most ``k`` blocks on devices 0, 1, ... (forward ops only)."""
    for p in range(1, min(n, k) + 1):
        for cuts in itertools.combinations(range(1, n), p - 1):
            bounds = (0, *cuts, n)
            yield [s for s in range(p) for _ in range(bounds[s], bounds[s + 1])]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 3), st.integers(0, 2)), min_size=1, max_size=5),
       st.sampled_from(ORDERS), st.sampled_from([2, 3, 4]), st.integers(2, 3), st.booleans(),
       st.sampled_from([6.0, 10.0, 16.0, 30.0]), st.sampled_from(["none", "half"]))
def test_the_dp_is_brute_force_over_contiguous_splits(ops, schedule, m, k, recompute, cap, overlap):
    """Valid under the order's memory, and the least steady state (max FW + BW) of the valid contiguous splits."""
    g = chain(*zip(*ops))
    n = len(ops)
    cluster = Cluster.stages(k, memory=cap, bandwidth=2.0)
    spec = TrainingMemorySpec("1f1b", optimizer_bytes=4.0, weight_bytes=2.0, recompute=recompute)
    model = model_of(schedule, m, spec, overlap)
    steady = CostModel.named("pipedream", overlap=overlap, require=frozenset())
    want = math.inf
    for fw in contiguous(n, k):
        p = Placement(g, cluster, fw + fw[::-1])
        if evaluate(p, model).valid:
            want = min(want, evaluate(p, steady).objective)
    try:
        res = run("dp", g, cluster, model=model)
    except InfeasibleError:
        assert want == math.inf
        return
    assert evaluate(res.placement, model).valid
    assert evaluate(res.placement, steady).objective == pytest.approx(want, rel=1e-9, abs=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(ORDERS), st.integers(1, 4), st.sampled_from([1, 2, 3, 4, 8]), st.data())
def test_stage_inflight_is_the_peak_of_the_simulated_run(schedule, p, m, data):
    """Replaying the simulator's trace (random task times), a stage holds a micro-batch from its F's start to the
    end of its B (or W): the peak per stage is the order's."""
    try:
        want = stage_inflight(schedule, p, m).tolist()
    except SpecError:
        return
    times = st.lists(st.integers(1, 5), min_size=p, max_size=p)
    per = FOLDS.get(schedule, 1)  # ZBV: p stages in a V over p / 2 ranks
    t = StageTimes(tuple(layout(schedule, p // per, p)), *(tuple(map(float, data.draw(times))) for _ in range(3)))
    trace = simulate_orders(t, rank_orders(schedule, p // per, per, m), record=True).trace
    release = "W" if schedule in SPLIT else "B"
    events = sorted([(task.start, 1, task.action.stage) for task in trace if task.action.kind == "F"]
                    + [(task.end, -1, task.action.stage) for task in trace if task.action.kind == release])
    held, peak = [0] * p, [0] * p
    for _, step, s in events:  # a release at the instant of a start frees first (-1 sorts before 1)
        held[s] += step
        peak[s] = max(peak[s], held[s])
    assert peak == want


def test_the_methods_that_count_other_memory_refuse_these_orders():
    g = chain([1] * 4, [1] * 4, [0] * 4)
    model = model_of("zb-h1", 4, TrainingMemorySpec("gpipe", microbatches=4))
    for method in ("pipeline", "gpipe-split"):
        with pytest.raises(SpecError, match="zb-h1"):
            run(method, g, Cluster.stages(2, memory=50.0), model=model)
