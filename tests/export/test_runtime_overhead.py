"""The runtime's own cost per task, measured on a pipeline of stages that do no work: the idle pipeline's
shape and the overhead read back from its step through the simulator (:func:`placement_dsl.profile.runtime_overhead`)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.errors import SpecError
from placement_dsl.profile import LinkTime, RunCosts, idle_pipeline, runtime_overhead
from placement_dsl.simulate import simulate

NO_LINK = LinkTime(0.0, float("inf"))


def test_idle_pipeline_puts_stage_k_and_its_gradient_on_rank_k_mod_ranks():
    p = idle_pipeline(4, 2, 64.0)
    rank = dict(zip(p.graph.names, p.assign.tolist()))
    assert [rank[f"stage{k}"] for k in range(4)] == [rank[f"stage{k}.grad"] for k in range(4)] == [0, 1, 0, 1]
    assert sum(op.time_on("accelerator") for op in p.graph.ops) == 0.0
    assert [p.graph.ops[k].out_bytes for k in range(4)] == [64.0, 64.0, 64.0, 0.0]


@pytest.mark.parametrize("stages, ranks, size", [(3, 2, 0.0), (2, 1, 0.0), (2, 2, -1.0), (2, 2, float("inf"))])
def test_idle_pipeline_refuses_what_no_round_robin_runs(stages, ranks, size):
    with pytest.raises(SpecError, match=f"stages \\({stages}\\).*ranks \\({ranks}\\)"):
        idle_pipeline(stages, ranks, size)


def test_hand_values_of_the_overhead():
    """1F1B on 2 idle stages: each of the 2m tasks of a rank, plus one fill and one drain task, takes ``o`` and one
    message latency (one tensor in or out): makespan ``(m + 1) 2 (o + l)``; at m = 4, l = 0.5 and 3.75 ms per
    micro-batch, o = 1. Interleaved 1F1B on 4 idle stages over 2 ranks: 2 v m tasks a rank and 2 fill tasks,
    makespan 18 o at m = 4: 4.5 ms per micro-batch gives o = 1."""
    link = LinkTime(0.5, float("inf"))
    assert runtime_overhead(3.75, "1f1b", 4, stages=2, ranks=2, message_bytes=0.0, link=link) == pytest.approx(1.0)
    assert runtime_overhead(4.5, "interleaved-1f1b", 4, stages=4, ranks=2, message_bytes=0.0,
                            link=NO_LINK) == pytest.approx(1.0)
    assert runtime_overhead(1.0, "1f1b", 4, stages=2, ranks=2, message_bytes=0.0, link=link) == 0.0  # link alone


def test_hand_value_of_zbvs_overhead():
    """ZBV on 4 idle stages over 2 ranks, every task ``o``: rank 1 waits one task for 0F0, then runs its 24 (2 stages
    x 4 micro-batches x F, I, W): 25 o at m = 4, so 6.25 ms per micro-batch gives o = 1; the V's turn (stages 1 and 2
    on rank 1) sends nothing, so a message latency is paid on the 2 cross-rank hops only."""
    p = idle_pipeline(4, 2, 0.0, schedule="zbv")
    assert p.assign.tolist() == [0, 1, 2, 3, 3, 2, 1, 0]
    assert runtime_overhead(6.25, "zbv", 4, stages=4, ranks=2, message_bytes=0.0, link=NO_LINK) == pytest.approx(1.0)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(schedule=st.sampled_from([("gpipe", 2), ("1f1b", 2), ("interleaved-1f1b", 4), ("zb-h1", 2), ("zb-h1", 4),
                                  ("zbv", 4)]),
       m=st.sampled_from([2, 4, 6, 8]), o=st.floats(0.0, 5.0), latency=st.floats(0.0, 1.0),
       size=st.floats(0.0, 1e3), bandwidth=st.floats(10.0, 1e4))
def test_the_overhead_of_a_simulated_idle_run_comes_back(schedule, m, o, latency, size, bandwidth):
    name, stages = schedule
    link = LinkTime(latency, bandwidth)
    truth = RunCosts(1.0, link, o)
    p = idle_pipeline(stages, 2, size, schedule=name)
    measured = simulate(truth.placement(p), name, m, truth.model()).time_per_sample
    got = runtime_overhead(measured, name, m, stages=stages, ranks=2, message_bytes=size, link=link)
    assert got == pytest.approx(o, abs=1e-6 * max(1.0, measured))
