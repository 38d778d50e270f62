"""ZBV on placements: the V's rank map, torch's order, the cost model against the simulator, memory, the objective."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import ZeroBubbleV, objective_named
from placement_dsl.pipeline_orders import rank_orders, stage_inflight, stash_peaks
from placement_dsl.placement import Placement
from placement_dsl.simulate import (
    analytic_time_per_sample,
    closed_form_time_per_sample,
    schedule_stage_times,
    simulate,
    stage_plan,
)
from placement_dsl.stage_schedules import stage_memory, stage_ranks
from placement_dsl.training import TrainingMemorySpec
from placement_dsl.zoo.training import with_backward

# torch 2.13's ScheduleZBVZeroBubble on 2 ranks and 4 micro-batches (its _calculate_single_rank_operations)
TORCH_P2_M4 = [
    "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 3W3 0I2 0W2 0I3 0W3",
    "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 1I2 2I3 1I3 1W2 2W3 1W3",
]


def chain(works, out_bytes=0.0, param_bytes=1.0) -> Graph:
    ops = [Op(name=f"l{i}", work=float(w), out_bytes=float(out_bytes), param_bytes=param_bytes)
           for i, w in enumerate(works)]
    ops, edges = with_backward(ops, [(f"l{i}", f"l{i + 1}") for i in range(len(works) - 1)])
    return Graph(ops, edges)


def placed(g: Graph, stage_device: list[int], k: int, memory: float = float("inf")) -> Placement:
    """Forward op ``i`` on ``stage_device[i]``, each gradient with its op."""
    return Placement(g, Cluster.stages(k, memory=memory), stage_device + stage_device[::-1])


def test_the_order_on_two_ranks_and_four_micro_batches_is_torchs():
    ours = [" ".join(map(str, o)) for o in rank_orders("zbv", 2, 2, 4)]
    assert ours == TORCH_P2_M4
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    s = object.__new__(schedules.ScheduleZBVZeroBubble)
    s.pp_group_size, s.num_stages, s._n_microbatches = 2, 4, 4
    torch_rows = [" ".join(str(a) for a in s._calculate_single_rank_operations(k) if a is not None) for k in (0, 1)]
    assert torch_rows == TORCH_P2_M4


def test_the_rank_map_folds_the_v():
    assert stage_ranks([0, 1, 2, 3], "zbv") == (0, 1, 1, 0)
    assert stage_ranks([5, 2, 7, 1, 0, 3], "zbv") == (0, 1, 2, 2, 1, 0)  # devices are slots, in any order
    assert stage_ranks([0, 1, 1, 0]) == (0, 1, 1, 0)  # without a fold a device is a rank
    assert stage_ranks([0, 1, 2, 0], "zbv") == (0, 1, 1, 0)  # a device may hold both stages of its rank
    with pytest.raises(SpecError, match="zbv runs 2 stages per rank in a V, and the placement has 3 stages"):
        stage_ranks([0, 1, 0], "zbv")
    with pytest.raises(SpecError, match="device 0 holds stage 2, which zbv runs on rank 1, and a stage of rank 0"):
        stage_ranks([0, 1, 0, 2], "zbv")


def test_hand_instance_of_equal_stages():
    """F = I = W = 1 on 4 stages, p = 2, m = 4: rank 1 waits 1 for 0F0, then runs its 24 tasks back to back
    (TORCH_P2_M4; rank 0 ends at 24): makespan 2 m (F + I + W) + (p - 1) = 25, 6.25 per micro-batch."""
    p = placed(chain([1, 1, 1, 1]), [0, 1, 2, 3], 4)
    t = schedule_stage_times(p)
    assert t.f == t.i == t.w == (1.0,) * 4
    assert simulate(p, "zbv", 4).makespan == 25.0
    ev = evaluate(p, ZeroBubbleV(microbatches=4).cost_model())
    assert ev.valid and ev.objective == 6.25 == analytic_time_per_sample(p, "zbv", microbatches=4)
    assert closed_form_time_per_sample(p, "zbv", 4) == 6.25
    assert evaluate(p, CostModel.named("zbv")).objective == 6.0  # the steady state: a rank's two stages, 2 x 3
    assert evaluate(p, "pipedream").objective == 3.0  # one device's own load, not its rank's


def test_a_placement_whose_v_turns_on_one_device_is_refused_with_the_reason():
    """Devices 0 1 1 0 along a chain: a V runs each device as one stage, and device 0's two ends make a cycle;
    devices 0 1 1 2: stages 1 and 2 merge on device 1, 3 stages, which the V cannot fold."""
    p = placed(chain([1, 1, 1, 1]), [0, 1, 1, 0], 2)
    ev = evaluate(p, ZeroBubbleV(microbatches=4).cost_model())
    assert not ev.valid and ev.objective == float("inf")
    assert "give the V's turn (stages p - 1 and p) and every other stage a device" in ev.violations[-1].message
    three = placed(chain([1, 1, 1, 1]), [0, 1, 1, 2], 3)
    assert "give the V's turn (stages p - 1 and p) a device each" in evaluate(
        three, ZeroBubbleV(microbatches=4).cost_model()).violations[-1].message
    with pytest.raises(SpecError, match="zbv runs 2 stages per rank in a V"):
        simulate(three, "zbv", 4)


@st.composite
def v_chains(draw):
    """A training chain of 2p stages of 1-3 ops, one device per stage, random works and tensors."""
    ranks = draw(st.integers(1, 3))
    sizes = draw(st.lists(st.integers(1, 3), min_size=2 * ranks, max_size=2 * ranks))
    works = draw(st.lists(st.integers(1, 6), min_size=sum(sizes), max_size=sum(sizes)))
    stage_device = [s for s, n in enumerate(sizes) for _ in range(n)]
    return chain(works, out_bytes=float(draw(st.integers(0, 2)))), stage_device, 2 * ranks


@settings(deadline=None, max_examples=25, derandomize=True)
@given(v_chains(), st.sampled_from([1, 3, 5, 64]))
def test_the_cost_model_scores_zbv_as_the_simulator_runs_it(case, m):
    """The cost model's figure is the max-plus recurrence of the rank orders: equal to the simulator (so within
    2 % at m = 64, exactly); the fill-work-drain closed form stays below it; no rank does its work faster."""
    g, stage_device, k = case
    p = placed(g, stage_device, k)
    sim = simulate(p, "zbv", m).time_per_sample
    ev = evaluate(p, ZeroBubbleV(microbatches=m).cost_model())
    assert ev.valid and ev.objective == pytest.approx(sim, rel=1e-12)
    assert closed_form_time_per_sample(p, "zbv", m) <= sim * (1 + 1e-12)
    times, _ = stage_plan(p, "zbv", m)
    load = np.bincount(times.rank, weights=np.add(np.add(times.f, times.i), times.w))
    assert load.max() == pytest.approx(evaluate(p, CostModel.named("zbv")).objective)
    assert sim * m >= m * load.max() * (1 - 1e-12)


def test_memory_counts_each_devices_stage_along_its_ranks_order():
    """Stage s keeps its micro-batches until their W: 4, 3, 2, 1 at p = 2, m = 8 (stage_inflight); each of the 4
    devices holds its own stage: the state (8 x (2 + 2): the op's parameter bytes and its gradient's) plus its count x
    (activations 1 + the input it receives 1; none into stage 0). A rank's peak is never above its slots' sum."""
    g = chain([1, 1, 1, 1], out_bytes=1.0, param_bytes=2.0)
    p = placed(g, [0, 1, 2, 3], 4)
    spec = TrainingMemorySpec(microbatches=8)
    assert spec.state_factor == 8.0
    assert stage_inflight("zbv", 4, 8).tolist() == [4, 3, 2, 1]
    assert stage_memory(p, "zbv", 8, spec).tolist() == [32 + 4 * 1, 32 + 3 * 2, 32 + 2 * 2, 32 + 1 * 2]
    rank_peak = stash_peaks(stage_plan(p, "zbv", 8)[0], rank_orders("zbv", 2, 2, 8), [1, 2, 2, 2])[1]
    assert rank_peak.tolist() == [5.0, 8.0]  # below the slots' sums, 4 + 2 and 6 + 4: their peaks fall apart
    model = replace(ZeroBubbleV(microbatches=8).cost_model(), training_memory=spec)
    assert evaluate(placed(g, [0, 1, 2, 3], 4, memory=38.0), model).valid
    ev = evaluate(placed(g, [0, 1, 2, 3], 4, memory=37.0), model)
    counted = [v for v in ev.violations if v.counts(model.require)]
    assert not ev.valid and [v.check for v in counted] == ["memory"] and "stage1" in counted[0].message


def test_the_objective_is_named_and_the_heuristics_answer_it():
    from placement_dsl.heuristics.base import run
    from placement_dsl.problem import Problem

    assert objective_named("zbv") == ZeroBubbleV()
    g = chain([3, 1, 1, 2, 2, 1, 2, 1])
    problem = Problem(g, Cluster.stages(4), ZeroBubbleV(microbatches=4))
    result = run("dp", g, problem.cluster, model=problem.cost_model(), time_limit=5)
    assert problem.is_valid(result.placement)
    assert result.objective == simulate(result.placement, "zbv", 4).time_per_sample
    assert result.bound is None and result.exact_among is None
    steady = run("dp", g, problem.cluster, model=ZeroBubbleV().cost_model(), time_limit=5)
    assert steady.objective == evaluate(steady.placement, CostModel.named("zbv")).objective
    assert steady.bound is None  # the DP bounds a device's load; a rank runs two


def test_the_v_turn_hands_its_tensor_over_in_the_rank_without_a_message():
    """Stages 1 and 2 share rank 1: torch passes stage 1's output to stage 2 in the process, so neither pays the
    tensor (1 byte at bandwidth 1); stage 0's output to stage 1 and stage 2's to stage 3 cross ranks and do."""
    p = placed(chain([1, 1, 1, 1], out_bytes=1.0), [0, 1, 2, 3], 4)
    zbv = schedule_stage_times_of(p, "zbv")
    assert zbv.f == (2.0, 2.0, 2.0, 2.0)
    assert stage_plan(p, "interleaved-1f1b", 4)[0].f == (2.0, 3.0, 3.0, 2.0)  # 4 ranks in a row: every tensor sent


def schedule_stage_times_of(p: Placement, schedule: str):
    return stage_plan(p, schedule, 4)[0]


@settings(deadline=None, max_examples=15, derandomize=True)
@given(st.lists(st.integers(1, 4), min_size=4, max_size=7), st.integers(0, 3), st.integers(20, 60),
       st.sampled_from([2, 4, 8]))
def test_the_dp_counts_zbvs_memory_as_the_cost_model_does(works, out_bytes, memory, m):
    """With a memory spec, the DP under zbv (each stage's micro-batches along the V's orders, stage_inflight) finds a
    placement exactly when some contiguous split of the chain into 2 or 4 stages fits, and its answer is valid."""
    import itertools

    from placement_dsl.errors import InfeasibleError
    from placement_dsl.heuristics.base import run

    g = chain(works, out_bytes=float(out_bytes))
    model = replace(ZeroBubbleV(microbatches=m).cost_model(), training_memory=TrainingMemorySpec(microbatches=m))
    n, fits = len(works), False
    for h in (2, 4):
        for cuts in itertools.combinations(range(1, n), h - 1):
            bounds = (0, *cuts, n)
            stage_device = [k for k in range(h) for _ in range(bounds[k + 1] - bounds[k])]
            fits |= evaluate(placed(g, stage_device, 4, memory=float(memory)), model).valid
    try:
        found = run("dp", g, Cluster.stages(4, memory=float(memory)), model=model, time_limit=5)
    except InfeasibleError:
        assert not fits
        return
    assert fits and evaluate(found.placement, model).valid


@pytest.mark.parametrize("p", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("m", [1, 4, 16, 64])
def test_equal_stages_take_two_m_tasks_of_three_plus_p_minus_one(p, m):
    """F = I = W = c on all 2p stages: 2 m (F + I + W) + (p - 1) F, the recurrence, the simulator and the closed form
    alike (for m >= 2p - 1, the V's full warm-up; below, torch drops the padded micro-batches)."""
    from placement_dsl.order_bounds import closed_form_makespan
    from placement_dsl.pipeline_orders import StageTimes, layout, order_makespan
    from placement_dsl.stage_schedules import simulate_orders

    c = 1.5
    t = StageTimes(tuple(layout("zbv", p, 2 * p)), (c,) * (2 * p), (c,) * (2 * p), (c,) * (2 * p))
    orders = rank_orders("zbv", p, 2, m)
    span = simulate_orders(t, orders).makespan
    assert order_makespan(t, orders) == span
    if m >= 2 * p - 1:
        assert span == 2 * m * 3 * c + (p - 1) * c == closed_form_makespan(t, orders)


def diamond(order: str) -> Placement:
    """a -> {b, c} -> d -> e, the ops listed in ``order``; a on device 0, b and c on 1, d on 2, e on 3 (unit works)."""
    device = {"a": 0, "b": 1, "c": 1, "d": 2, "e": 3}
    ops = [Op(name=n, work=1.0, param_bytes=1.0) for n in order]
    ops, edges = with_backward(ops, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("d", "e")])
    return Placement(Graph(ops, edges), Cluster.stages(4), [device[o.name.split(".")[0]] for o in ops])


def test_a_dag_whose_stages_interleave_in_op_order_folds_by_its_devices():
    """Listed a b d c e, stage 1's ops (b, c) lie on both sides of stage 2's (d), and no edge joins b and c: still
    one stage per device, in the devices' data-flow order 0 1 2 3. Stages F = I = W = 1 2 1 1; rank 0 runs stages 0
    and 3 (3 + 3), rank 1 stages 1 and 2 (6 + 3 = 9), the steady state; the op order changes nothing."""
    for order in ("abcde", "abdce", "adbec"):
        p = diamond(order)
        t, _ = stage_plan(p, "zbv", 4)
        assert t.f == t.i == t.w == (1.0, 2.0, 1.0, 1.0)
        ev = evaluate(p, CostModel.named("zbv"))
        assert ev.valid and ev.objective == 9.0
        stepped = evaluate(p, ZeroBubbleV(microbatches=4).cost_model())
        assert stepped.valid and stepped.objective == simulate(p, "zbv", 4).time_per_sample
        assert stepped.objective == evaluate(diamond("abcde"), ZeroBubbleV(microbatches=4).cost_model()).objective


def test_the_turns_tensor_is_dropped_as_a_rebuilt_graph_would_drop_it():
    """The edges between two stages of one rank (the V's turn) leave the graph the cost model prices, in O(n + m): the
    same edges, successors and predecessors as the graph built without them."""
    g = chain([1, 2, 3, 4], out_bytes=1.0)
    turn = {("l1", "l2"), ("l2.grad", "l1.grad")}  # the tensors between stages 1 and 2, both on rank 1 at p = 2
    drop = np.array([e in turn for e in g.edges])
    fast = g.without_edges(drop)
    slow = Graph(g.ops, [e for e, x in zip(g.edges, drop) if not x])
    assert fast.edges == slow.edges and fast.m == slow.m == g.m - 2
    for i in range(g.n):
        assert sorted(fast.successors(i)) == sorted(slow.successors(i))
        assert sorted(fast.predecessors(i)) == sorted(slow.predecessors(i))
    assert g.m == len(g.edges)  # the original keeps its edges
