"""Placements under interleaved 1F1B and ZB-H1: virtual stages, their times from the cost model, simulator, memory."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.placement import Placement
from placement_dsl.simulate import (
    analytic_time_per_sample,
    closed_form_time_per_sample,
    schedule_stage_times,
    simulate,
)
from placement_dsl.stage_schedules import stage_memory, virtual_stages
from placement_dsl.training import TrainingMemorySpec
from placement_dsl.zoo.training import with_backward


def chain(works, out_bytes=0.0, param_bytes=1.0) -> Graph:
    ops = [Op(name=f"l{i}", work=float(w), out_bytes=float(out_bytes), param_bytes=param_bytes)
           for i, w in enumerate(works)]
    ops, edges = with_backward(ops, [(f"l{i}", f"l{i + 1}") for i in range(len(works) - 1)])
    return Graph(ops, edges)


def placed(g: Graph, stage_device: list[int], k: int) -> Placement:
    """Forward op ``i`` on ``stage_device[i]``, each gradient with its op."""
    return Placement(g, Cluster.stages(k), stage_device + stage_device[::-1])


def test_virtual_stages_of_a_round_robin_chain():
    p = placed(chain([1, 2, 3, 4]), [0, 1, 0, 1], 2)
    stage, device = virtual_stages(p)
    assert stage.tolist() == [0, 1, 2, 3, 3, 2, 1, 0] and device == [0, 1, 0, 1]
    t = schedule_stage_times(p)
    assert t.f == (1.0, 2.0, 3.0, 4.0) and t.i == t.w == t.f  # backward = 2 x forward, half of it W


def test_zero_bubble_and_interleaved_exact_on_two_equal_stages():
    """F = I = W = 2 per stage, p = 2: ZB-H1 m (F+I+W) + (p-1)(F+I-W) = 6m + 2, 1F1B 6m + (p-1)(F+I+W) = 6m + 6."""
    p = placed(chain([1, 1, 1, 1]), [0, 0, 1, 1], 2)
    m = 8
    assert simulate(p, "zb-h1", m).makespan == 50.0 == analytic_time_per_sample(p, "zb-h1", microbatches=m) * m
    assert simulate(p, "interleaved-1f1b", m).makespan == 54.0
    assert closed_form_time_per_sample(p, "zb-h1", m) * m == 50.0


def test_interleaving_halves_the_bubble_and_tends_to_pipedreams_objective():
    """v = 2 on p = 2 equal ranks: bubble (p - 1)(f + b) with stages half as long as at v = 1."""
    g = chain([1] * 8)
    flat = placed(g, [0] * 4 + [1] * 4, 2)
    inter = placed(g, [0, 0, 1, 1, 0, 0, 1, 1], 2)
    m = 16
    assert simulate(flat, "interleaved-1f1b", m).makespan == 16 * 12 + 12
    assert simulate(inter, "interleaved-1f1b", m).makespan == 16 * 12 + 6
    assert analytic_time_per_sample(inter, "interleaved-1f1b") == evaluate(inter, "pipedream").objective == 12.0


def test_communication_enters_the_stage_times():
    """out_bytes 1 at bandwidth 1: every stage boundary costs its sender and its receiver 1 per pass."""
    p = placed(chain([1, 1, 1, 1], out_bytes=1.0), [0, 1, 0, 1], 2)
    t = schedule_stage_times(p)
    assert t.f == (2.0, 3.0, 3.0, 2.0)
    assert analytic_time_per_sample(p, "interleaved-1f1b") == evaluate(p, "pipedream").objective


@st.composite
def round_robin_chains(draw):
    k = draw(st.integers(1, 3))
    v = draw(st.integers(1, 2))
    sizes = draw(st.lists(st.integers(1, 2), min_size=k * v, max_size=k * v))
    works = draw(st.lists(st.integers(0, 5), min_size=sum(sizes), max_size=sum(sizes)))
    stage_device = [s % k for s, size in enumerate(sizes) for _ in range(size)]
    return placed(chain(works, out_bytes=draw(st.integers(0, 2))), stage_device, k), k


@settings(deadline=None, max_examples=25)
@given(round_robin_chains(), st.sampled_from(["interleaved-1f1b", "zb-h1"]))
def test_simulator_matches_the_recurrence_on_random_placements(case, schedule):
    p, k = case
    m = 2 * k
    sim = simulate(p, schedule, m).time_per_sample
    assert analytic_time_per_sample(p, schedule, microbatches=m) == pytest.approx(sim, abs=1e-9)
    assert closed_form_time_per_sample(p, schedule, m) <= sim + 1e-9
    assert analytic_time_per_sample(p, schedule) <= sim + 1e-9


def test_memory_per_virtual_stage():
    p = placed(chain([1, 1, 1, 1], out_bytes=1.0, param_bytes=2.0), [0, 0, 1, 1], 2)
    # stage 0 (l0, l1): state 8 x (4 + 4) = 64; act 2 per micro-batch; stage 1 reads 1: act + in = 3
    inter = stage_memory(p, "interleaved-1f1b", 4)  # torch's v = 1 warm-up: rank 0 runs 3 forwards first
    assert inter.tolist() == [64 + 3 * 2, 64 + 1 * 3]
    zb = stage_memory(p, "zb-h1", 4)  # rank 1 defers one W: holds 2
    assert zb.tolist() == [64 + 2 * 2, 64 + 2 * 3]
    rec = stage_memory(p, "zb-h1", 4, TrainingMemorySpec(recompute=True))
    assert rec.tolist() == [64 + 0 + 2, 64 + 2 * 1 + 3]


def test_refusals():
    g = chain([1, 1, 1])
    with pytest.raises(SpecError, match="3 stages do not split into 2 ranks"):
        simulate(placed(g, [0, 1, 0], 2), "interleaved-1f1b", 4)
    with pytest.raises(SpecError, match="stage 3 runs on rank 1, not on rank 0"):
        simulate(placed(chain([1] * 6), [0, 1, 2, 1, 0, 2], 3), "interleaved-1f1b", 3)
    with pytest.raises(SpecError, match="use 'pipeline'"):
        simulate(Placement(Graph([Op(name="a", work=1.0)], []), Cluster.stages(1), [0]), "zb-h1", 4)
    linked = Cluster([Device(name="a"), Device(name="b")], [Link(src="a", dst="b", bandwidth=1.0)])
    with pytest.raises(SpecError, match=r"op 'l1.grad'.s output has no route from device 'b' to 'a' \(stage 1 to stage 0\)"):
        simulate(Placement(chain([1, 1, 1], out_bytes=1.0), linked, [0, 1, 1, 1, 1, 0]), "zb-h1", 2)
    with pytest.raises(SpecError, match="weight_share of op 'l0' is 1.5"):
        simulate(placed(g, [0, 0, 1], 2), "zb-h1", 2, weight_share=1.5)
    with pytest.raises(SpecError, match=r"weight_share must be one number or one per op \(6\), got 2 values"):
        simulate(placed(g, [0, 0, 1], 2), "zb-h1", 2, weight_share=[0.5, 0.5])


def test_a_device_is_one_stage_per_level_whatever_joins_its_ops():
    """A device's ops are one stage per level (the most runs of its ops on a path ending in the op): ops side by side
    that no edge of the device joins are one stage, and ops an edge joins that a path through another device also
    joins are two (the stages would otherwise form a cycle)."""
    towers = [Op(name=f"t{i}", work=1.0, param_bytes=1.0) for i in range(6)]
    ops, edges = with_backward(towers, [])
    assign = [i % 3 for i in range(6)]
    side_by_side = Placement(Graph(ops, edges), Cluster.stages(3), assign + assign[::-1])
    stage, device = virtual_stages(side_by_side)
    assert stage[:6].tolist() == [0, 1, 2, 0, 1, 2] and device == [0, 1, 2]
    assert evaluate(side_by_side, CostModel.named("interleaved-1f1b", microbatches=4)).valid
    ops, edges = with_backward([Op(name=n, work=1.0) for n in "abc"], [("a", "b"), ("b", "c"), ("a", "c")])
    looped = Placement(Graph(ops, edges), Cluster.stages(2), [0, 1, 0, 0, 1, 0])
    assert virtual_stages(looped)[0][:3].tolist() == [0, 1, 2]
    with pytest.raises(SpecError, match="3 stages do not split into 2 ranks"):
        simulate(looped, "interleaved-1f1b", 2)


def test_levels_that_feed_each_other_are_cut_into_stages_that_do_not():
    """``a -> b`` and ``b' -> a'`` with ``a, a'`` on one device and ``b, b'`` on the other: each device's ops are one
    level, and the two levels feed each other; cut by each op's earliest stage in the round-robin layout (``a``: 0;
    ``b``, ``b'``: 1; ``a'``: 2), the stages are ``a``, then ``b'`` and ``b``, then ``a'``."""
    fw = [Op(name=n, work=1.0) for n in ("a", "a2", "b", "b2")]
    ops, edges = with_backward(fw, [("a", "b"), ("b2", "a2")])
    p = Placement(Graph(ops, edges), Cluster.stages(2), [0, 0, 1, 1, 1, 1, 0, 0])
    stage, device = virtual_stages(p)
    assert stage[:4].tolist() == [0, 2, 1, 1] and device == [0, 1, 0]


def test_the_cost_model_scores_the_schedules_as_the_simulator_runs_them():
    from placement_dsl.evaluate import CostModel
    from placement_dsl.objectives import Interleaved1F1B, ZeroBubbleH1

    p = placed(chain([1, 2, 1, 3], out_bytes=1.0), [0, 1, 0, 1], 2)
    for term in (Interleaved1F1B(microbatches=8), ZeroBubbleH1(microbatches=8)):
        ev = evaluate(p, term.cost_model())
        assert ev.valid and ev.objective == simulate(p, term.names[0], 8).time_per_sample
        steady = evaluate(p, CostModel.named(term.names[0]))
        assert steady.objective == evaluate(p, "pipedream").objective < ev.objective
    skewed = placed(chain([1] * 6), [0, 1, 2, 1, 0, 2], 3)  # stage 3 on the second device: torch cannot run it
    ev = evaluate(skewed, Interleaved1F1B(microbatches=6).cost_model())
    assert not ev.valid and ev.objective == float("inf")
    assert "interleaved-1f1b: pipeline schedule: stage 3 runs on rank 1, not on rank 0" in ev.violations[-1].message
    with pytest.raises(SpecError, match=r"ZeroBubbleH1\(microbatches=0\)"):
        ZeroBubbleH1(microbatches=0)


def test_the_formulations_refuse_the_schedules_and_heuristics_answer_them():
    from placement_dsl.heuristics.base import run
    from placement_dsl.objectives import Interleaved1F1B
    from placement_dsl.problem import Problem
    from placement_dsl.solve import solve

    g = chain([3, 1, 1, 2, 2, 1])
    problem = Problem(g, Cluster.stages(2), Interleaved1F1B(microbatches=4))
    with pytest.raises(SpecError, match="no IP writes objective .interleaved-1f1b."):
        solve(problem, formulation="throughput", time_limit=5)
    result = run("dp", g, problem.cluster, model=problem.cost_model(), time_limit=5)
    assert problem.is_valid(result.placement)
    assert result.objective == simulate(result.placement, "interleaved-1f1b", 4).time_per_sample
    assert result.bound is None and result.exact_among is None  # the DP minimizes the max load, not the bubble
    steady = run("dp", g, problem.cluster, model=Interleaved1F1B().cost_model(), time_limit=5)
    assert steady.bound == steady.objective == evaluate(steady.placement, "pipedream").objective  # exact there


@settings(deadline=None, max_examples=15)
@given(st.lists(st.integers(1, 6), min_size=2, max_size=5), st.integers(0, 2), st.integers(2, 3))
def test_the_steady_state_is_exact_under_the_dp_over_contiguous_placements(works, out_bytes, k):
    """Without micro-batches the objectives are the steady state, which the DP minimizes exactly over contiguous
    placements: it equals the brute-force optimum of the objective itself."""
    from placement_dsl.brute import brute_force
    from placement_dsl.constraints import Contiguous
    from placement_dsl.heuristics.base import run
    from placement_dsl.objectives import ZeroBubbleH1
    from placement_dsl.problem import Problem

    g = chain(works, out_bytes=float(out_bytes))
    problem = Problem(g, Cluster.stages(k), ZeroBubbleH1(), [Contiguous()])
    best, _ = brute_force(problem)
    found = run("dp", g, problem.cluster, model=problem.cost_model())
    assert problem.is_valid(found.placement)
    assert found.objective == pytest.approx(best) and found.bound == pytest.approx(best)


def test_the_cost_model_counts_memory_along_the_rank_orders():
    """With a memory spec the cost model holds each virtual stage's micro-batches in flight in torch's order, not
    1F1B's k - s (here rank 0 keeps 3 + 1 forwards of stages 0 and 2 in flight under torch's interleaved warm-up)."""
    from dataclasses import replace

    from placement_dsl.objectives import Interleaved1F1B

    p = placed(chain([1, 1, 1, 1], out_bytes=1.0, param_bytes=2.0), [0, 1, 0, 1], 2)
    spec = TrainingMemorySpec(microbatches=4)
    model = replace(Interleaved1F1B(microbatches=4).cost_model(), training_memory=spec)
    used = [d.memory_used for d in evaluate(p, model).devices]
    assert used == stage_memory(p, "interleaved-1f1b", 4, spec).tolist() == [71.0, 70.0]
    assert used != [d.memory_used for d in evaluate(p, replace(model, name="pipedream")).devices]
