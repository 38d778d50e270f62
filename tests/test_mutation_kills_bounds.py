"""Kills for the mutants that survived the bounds' owning tests (docs/mutation.md): the packing bound's
search budget, its bisection and the start heavy_packing hands to local search; the stage-cut bound's
colocation groups, nets, overflow, witness and problem-level entry; the ancestor/descendant bound's CPU
floors and position windows; the makespan bounds' segments, weights and transfers; the latency critical
path under a pin its colocation group cannot follow. Hand-computed cases (numbers in the comments), brute
force only on problems of two to five ops, no solver."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from placement_dsl.bounds import latency, local, packing
from placement_dsl.bounds.combinatorial import chain_bound, position_windows
from placement_dsl.bounds.local import cheapest_stage, single_loads, stage_cut_applies, stage_cut_bound
from placement_dsl.bounds.makespan import _weights, makespan_bounds, path_bound, work_bound
from placement_dsl.bounds.packing import (
    FEASIBLE,
    INFEASIBLE,
    TOLERANCE,
    UNKNOWN,
    _Completion,
    _lpt,
    _Search,
    heavy_packing,
    packing_bound,
)
from placement_dsl.bounds.simple import simple_lower_bound
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.constraints import Overflow, Pin
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck, Latency, Throughput
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem, Stages
from placement_dsl.testing import optimum


def _layers(works: list[float], cpu_factor: float = 10.0) -> Graph:
    """A chain of layers, each ``cpu_factor`` times slower on the host CPU."""
    ops = [Op(name=f"v{i}", work={"accelerator": w, "cpu": w * cpu_factor}) for i, w in enumerate(works)]
    return Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(len(works) - 1)])


TWO = Cluster.accelerators(2, cpus=1)

# ---------------------------------------------------------------------------- bounds/packing.py


def test_lpt_puts_each_item_on_the_least_loaded_bin():
    # 3 | 3, then the 2s on 5 | 5 and 7 | 5: makespan 7 (the optimum {3, 3} | {2, 2, 2} is 6)
    assert _lpt(np.array([3.0, 3.0, 2.0, 2.0, 2.0]), 2) == 7.0
    # 8 | 5, 4 joins the 5 (9), 2 joins the 8 (10)
    assert _lpt(np.array([8.0, 5.0, 4.0, 2.0]), 2) == 10.0


def test_a_decision_may_spend_a_quarter_of_the_budget():
    # [2, 1] in one bin of 3: the bin's first set (node 1) takes the 1 (node 2) and is complete: 2 nodes
    w = np.array([2.0, 1.0])
    assert _Completion(w, 1, 3.0, 2).run() == FEASIBLE
    assert _Completion(w, 1, 3.0, 1).run() == UNKNOWN
    # a budget of 7 allows 7 // 4 = 1 node per decision, 8 allows 2
    assert _Search(1, 7).pack(w, 3.0)[0] == UNKNOWN
    search = _Search(1, 8)
    assert search.pack(w, 3.0)[0] == FEASIBLE and search.left == 6
    assert _Search(1, 3).per_decision == 1  # never below one node
    # [2] in one bin of 3 takes one node: a budget of 1 is enough
    assert _Search(1, 1).pack(np.array([2.0]), 3.0)[0] == FEASIBLE


def test_a_spent_budget_answers_unknown_even_where_the_sums_refute():
    # [3, 3] cannot fit one bin of 2 (sum 6 > 2, refuted before any node), but with no budget left the
    # search does not run: unknown, as for any decision past the budget
    assert _Completion(np.array([3.0, 3.0]), 1, 2.0, 0).run() == INFEASIBLE
    assert _Search(1, 0).pack(np.array([3.0, 3.0]), 2.0)[0] == UNKNOWN


def test_the_bisection_drops_to_the_makespan_of_a_packing_it_finds(monkeypatch):
    # [5, 5, 3, 3, 3] on two accelerators (the CPU, 10x slower, takes none below 30): the cheap bound
    # 9.5 (half the sum) is refuted; LPT packs 5+3+3 = 11; the search at the midpoint 10.25 finds
    # {5, 5} | {3, 3, 3}, whose makespan 10 becomes the top; 26 halvings of [9.5, 10] reach a width
    # 0.5 * 2^-26 <= 1e-9 * 10: 10 - 2^-27 (the midpoint 10.25 as the top ends elsewhere)
    decisions = []
    decide = packing._Search.decide

    def counted(self, w, C):
        decisions.append(C)
        if len(decisions) > 100:  # a bisection that never ends fails here instead of hanging
            raise AssertionError("the bisection does not converge")
        return decide(self, w, C)

    monkeypatch.setattr(packing._Search, "decide", counted)
    assert packing_bound(_layers([5.0, 5.0, 3.0, 3.0, 3.0]), TWO) == 10.0 - 2.0**-27
    # the step's top 30, the cheap bound 9.5, the midpoint 10.25, then the 26 halvings
    assert len(decisions) == 29 and decisions[:3] == [30.0, 9.5, 10.25]


def test_a_step_whose_units_cannot_fit_its_top_moves_to_the_next():
    # [8, 3, 3, 3] with the CPU 2.875x slower: a 3 takes 8.625 on the CPU. Below 8.625 all four need
    # the two accelerators (least makespan 9 > 8.625: the step is refuted at its top); from 8.625 on
    # only the 8 must, so the bound is the step 8.625 itself, the optimum ({8} | {3, 3} | CPU {3})
    graph = _layers([8.0, 3.0, 3.0, 3.0], cpu_factor=2.875)
    assert packing_bound(graph, TWO) == 8.625 == optimum(Problem(graph, TWO, Throughput(), []))


def test_the_bound_is_the_largest_capacity_refuted_below_a_step_it_fills_exactly():
    # [8, 3, 3, 3] with the CPU 3x slower: the 3s take 9 on the CPU, so the first step ends at 9, and
    # {8} | {3, 3, 3} fills it exactly: the top 9 is not refuted (the search's slack admits a bin summing
    # to its capacity); bisecting [8.5, 9] (mean, LPT 9) refutes up to 9 - 2^-27, the bound
    assert packing_bound(_layers([8.0, 3.0, 3.0, 3.0], cpu_factor=3.0), TWO) == 9.0 - 2.0**-27


def test_the_capacity_slack_stays_valid_at_a_tiny_time_scale():
    # the same layers in units of 1e-12: the absolute slack of 1e-12 accepts the cheap bound 9.5e-12
    # (below the optimum 1e-11); a capacity narrowed by it instead refutes the optimum itself
    graph = _layers([5e-12, 5e-12, 3e-12, 3e-12, 3e-12])
    bound = packing_bound(graph, TWO)
    assert bound == pytest.approx(9.5e-12, rel=1e-9)
    assert bound <= optimum(Problem(graph, TWO, Throughput(), [])) * (1 + 1e-9)


def test_heavy_packing_cut_short_keeps_the_bound_of_its_own_budget():
    # [8, 5, 4, 2]: 24 nodes refute 20 halvings of [9.5, 10] (cheap bound, LPT 8+2): 10 - 2^-20; the
    # default budget goes on to 10 - 2^-27; the packing {8, 2} | {5, 4}
    graph = _layers([8.0, 5.0, 4.0, 2.0])
    T, bins = heavy_packing(graph, TWO, budget=24)
    assert T == packing_bound(graph, TWO, budget=24) == 10.0 - 2.0**-20 < packing_bound(graph, TWO)
    assert [b.tolist() for b in bins] == [[0, 3], [1, 2]]


def test_heavy_packing_uses_the_bounds_default_budget():
    # its T is the bound's own: the same node budget when neither is given one
    default = inspect.signature(packing_bound).parameters["budget"].default
    assert inspect.signature(heavy_packing).parameters["budget"].default == default == 300_000


def test_heavy_packing_widens_the_bound_by_twice_the_tolerance(monkeypatch):
    # at a budget of 29 the bound stops at 10 - 2^-25 (about 10 - 2.98e-8); widened by 2e-9 it is
    # still below P = 10 and refuted, so the LPT makespan 10 (widened) is packed; widened by 3e-9 it
    # would reach 10 + 2e-10 and be packed first
    graph = _layers([8.0, 5.0, 4.0, 2.0])
    asked: list[tuple[float, int]] = []
    pack = packing._Search.pack

    def spy(self, w, C):
        verdict, found = pack(self, w, C)
        asked.append((C, verdict))
        return verdict, found

    monkeypatch.setattr(packing._Search, "pack", spy)
    T = packing_bound(graph, TWO, budget=29)
    assert T == 10.0 - 2.0**-25
    del asked[:]
    T, bins = heavy_packing(graph, TWO, budget=29)
    assert asked[-2:] == [(T * (1 + 2 * TOLERANCE), INFEASIBLE), (10.0 * (1 + 2 * TOLERANCE), FEASIBLE)]
    assert [b.tolist() for b in bins] == [[0, 3], [1, 2]]


def test_heavy_packing_fills_bins_with_equal_units_in_index_order():
    # ten layers of 1 then ten of 2, the CPU 100x slower: all twenty go to two accelerators (sum 30,
    # T = 15). The 2s (units 10-19) come first in index order: the first bin takes 10-16 (14) and
    # unit 0 (15), the second the rest. NumPy's default sort orders ties differently past 16 items
    graph = _layers([1.0] * 10 + [2.0] * 10, cpu_factor=100.0)
    T, bins = heavy_packing(graph, TWO)
    assert T == 15.0
    assert [b.tolist() for b in bins] == [[10, 11, 12, 13, 14, 15, 16, 0], [17, 18, 19, 1, 2, 3, 4, 5, 6, 7, 8, 9]]


@pytest.mark.parametrize("w, K, C", [
    # 13 + 13 + 13 (9+4, 7+3+3, 5+5+3) and 33 + 32 + 33 (19+8+6, 16+9+7, 15+9+3+3+3)
    ([9, 7, 5, 5, 4, 3, 3, 3], 3, 13.5),
    ([19, 16, 15, 9, 9, 8, 7, 6, 3, 3, 3], 3, 33.5),
])
def test_bin_completion_finds_a_packing_after_backtracking(w, K, C):
    # both need the search to undo a bin: the first bin's first maximal set leaves no packing of the rest.
    # An item left marked as used after its branch (or the first item of a failed bin) is lost to every
    # later bin, and the search refutes a packing that exists: a bound above the optimum
    search = _Completion(np.array(w, dtype=float), K, C, 10**6)
    assert search.run() == FEASIBLE
    assert sorted(i for b in search.members for i in b) == list(range(len(w)))
    assert all(sum(w[i] for i in b) <= C for b in search.members)


@pytest.mark.parametrize("w, K, C, nodes", [
    # sum 50, three bins of 17.5: slack 2.5. Bin 1 is {17} (waste 0.5); bin 2 starts at 13 with room 4.5
    # and nothing fits: 0.5 + 4.5 > 2.5, cut at its first node. Nodes: 4 for bin 1 (17, then 13, 10, 10
    # skipped), 1 for bin 2. Without the first bin's waste carried over, bin 2 is searched to its end
    ([17, 13, 10, 10], 3, 17.5, 5),
    # sum 52, three bins of 19: slack 5. {15, 4} fills bin 1; bin 2 from 12 (room 7, nothing fits) wastes
    # 7: cut. {15} alone is no maximal set (4 fits the room of 4 exactly) and is never yielded: 7 nodes.
    # Counting an exact fit as no fit yields it and searches its bin 2 (8 nodes)
    ([15, 12, 12, 9, 4], 3, 19.0, 7),
    # sum 71, two bins of 36: slack 1. {18, 15} wastes 3 (cut); with the first 15 skipped, its twin is
    # skipped too (the same sets would follow), then {18, 12} and {18} are cut: 6 nodes; 7 when the twin
    # 15 is tried (its set wastes 3: cut)
    ([18, 15, 15, 12, 11], 2, 36.0, 6),
])
def test_bin_completion_refutes_within_its_hand_counted_nodes(w, K, C, nodes):
    # the pruning rules (the waste carried from bin to bin, maximal sets only, twins skipped) decide how
    # far a search gets within its budget: each refutation here ends on the node counted by hand, so a
    # budget of exactly that many nodes still refutes, and a weaker rule runs out of nodes (UNKNOWN)
    search = _Completion(np.array(w, dtype=float), K, C, nodes)
    assert search.run() == INFEASIBLE
    assert search.nodes == nodes


def test_bin_completion_is_not_refuted_by_float_sums_in_another_order():
    # one bin of exactly the items' sum as the search adds them (largest first); NumPy's sum of the
    # same twelve numbers (eight partial sums) is one ulp larger, so the slack K C - sum w is -1 ulp
    # (1.9e-9 at this scale). The search's tolerance is relative (SLACK C = 7.7e-6): the bin is
    # filled. A tolerance that shrinks as C grows (SLACK / C) refutes the packing twice over: at the
    # sum test and at the waste cut
    w = np.array([974481.8, 967698.0, 882692.7, 824031.0, 804585.1, 792451.1, 605159.2, 546787.0,
                  446603.5, 406004.9, 385640.1, 43987.7])
    C = 0.0
    for x in w:
        C += x
    assert C < float(np.sum(w))  # the premise: the two orders disagree
    search = _Completion(w, 1, C, 1000)
    assert search.run() == FEASIBLE
    assert search.members == [list(range(12))]

# ---------------------------------------------------------------------------- bounds/local.py


def test_stage_cut_keeps_a_colocation_group_whole():
    # a, b, c (work 1, 1, 4) must share a stage, so every stage holding one of them costs 6, the optimum.
    # Lemma 3.3 gives 4 (the largest op; half the sum is 3). The search skips an op whose smallest stage
    # cannot beat the bound so far: that stage is its group (6), not the op alone (1, 1, 4 <= 4: all skipped)
    graph = Graph([Op(name=n, work=w, group="g") for n, w in (("a", 1.0), ("b", 1.0), ("c", 4.0))])
    assert single_loads(graph, Stages(2)).tolist() == [6.0, 6.0, 6.0]
    bound, op = stage_cut_bound(graph, Stages(2))
    assert bound == pytest.approx(6.0, rel=1e-9) and op == 0
    assert optimum(Problem(graph, Stages(2), Bottleneck(), [])) == 6.0


def test_single_loads_are_the_cost_models_load_of_each_ops_smallest_stage():
    # a (2) -> b (3) -> c (1), {b, c} colocated, on stages of 4 bytes at bandwidth 2 (0.5 per byte crossing);
    # a writes 1 byte to b, b 0.5 to c, c 4 bytes to no one. a alone: 2 + 0.5 (its tensor leaves) + its
    # overflow (3 + 2 - 4) / 2 = 0.5: 3; {b, c}: 4 + 0.5 (a's tensor enters; b's stays inside, c's has no
    # reader), memory 1 + 1 = 2 within the 4 bytes: 4.5
    graph = Graph([Op(name="a", work=2.0, out_bytes=1.0, param_bytes=3.0, activation_bytes=2.0),
                   Op(name="b", work=3.0, out_bytes=0.5, param_bytes=1.0, group="g"),
                   Op(name="c", work=1.0, out_bytes=4.0, activation_bytes=1.0, group="g")], [("a", "b"), ("b", "c")])
    stages = Stages(2, memory=4.0, bandwidth=2.0)
    loads = single_loads(graph, stages)
    assert loads.tolist() == [3.0, 4.5, 4.5]
    for v, members in ((0, [0]), (1, [1, 2]), (2, [1, 2])):
        assign = np.array([0 if u in members else 1 for u in range(graph.n)], dtype=np.int64)
        ev = evaluate(Placement(graph, stages, assign), CostModel.named("bottleneck"))
        assert ev.devices[0].load == loads[v]


def test_stage_cut_refuses_hosts_routes_and_unlike_devices_by_name():
    graph = Graph([Op(name="a", work=1.0)])
    why = "the stage-cut bound needs identical non-host devices without routes"
    assert stage_cut_applies(graph, Cluster.accelerators(2, cpus=1)) == why  # a host beside the accelerators
    assert stage_cut_applies(graph, Cluster.accelerators(0, cpus=2)) == why  # alike, but hosts
    assert stage_cut_applies(graph, Cluster.hierarchical(1, 2, intra=10.0, inter=1.0)) == why  # alike, but routed
    assert stage_cut_applies(graph, Cluster([Device(name="fast", speed=2.0), Device(name="slow")])) == why
    assert stage_cut_applies(graph, Stages(2)) is None


def test_stage_cut_starts_from_the_floor_it_is_given():
    # the transfer case bounds 11 from Lemma 3.3's 5; a floor of 20 leaves no op to cut, a floor of 0 lets the two
    # unit ops (Lemma 3.3: 1) be cut: 1 shaved by the relative SAFETY, not Lemma 3.3's own 1
    graph = Graph([Op(name="a", work=5, out_bytes=6), Op(name="b", work=1, out_bytes=6), Op(name="c", work=5)],
                  [("a", "b"), ("b", "c")])
    assert stage_cut_bound(graph, Stages(3), floor=20.0) == (20.0, None)
    two = Graph([Op(name="a", work=1.0), Op(name="b", work=1.0)])
    assert stage_cut_bound(two, Stages(2), floor=0.0) == (1.0 - 1e-12, 0)
    assert stage_cut_bound(two, Stages(2)) == (1.0, None)


def test_stage_cut_counts_activation_memory_in_the_overflow():
    # as test_stage_cut.py's overflow case with activations: 10 bytes on a 4-byte stage stream 6 at bandwidth 2
    graph = Graph([Op(name="a", work=2.0, activation_bytes=10.0), Op(name="b", work=1.0)], [("a", "b")])
    stages = Stages(2, memory=4.0, bandwidth=2.0)
    assert stage_cut_bound(graph, stages, overflow=True)[0] == pytest.approx(5.0, rel=1e-9)
    assert stage_cut_bound(graph, stages)[0] == 2.0  # by default the overflow is not counted: Lemma 3.3's 2
    assert optimum(Problem(graph, stages, Bottleneck(), [Overflow()])) == 5.0


def test_cheapest_stage_puts_the_rest_on_the_second_stage():
    # a (5) and b (1), no edge: the cheapest stage holding b is {b}; a goes to stage 1
    graph = Graph([Op(name="a", work=5.0), Op(name="b", work=1.0)])
    assert cheapest_stage(graph, Stages(2), 1).assign.tolist() == [1, 0]


def test_cheapest_stage_is_the_cut_without_memory():
    # a (1, 10 parameter bytes) writes 2 bytes to b (1): {b} costs 1 + 2, {a, b} costs 2, whatever a's
    # parameters (the lam = 0 cut; with them counted, 2 + 10 would send a away)
    graph = Graph([Op(name="a", work=1.0, param_bytes=10.0, out_bytes=2.0), Op(name="b", work=1.0)], [("a", "b")])
    assert cheapest_stage(graph, Stages(2), 1).assign.tolist() == [0, 0]


def test_stage_cut_problem_entry_names_its_op_or_lemma_3_3():
    # test_stage_cut.py's transfer case: b alone reads and writes 6 bytes (13), so it is cut first: 11
    graph = Graph([Op(name="a", work=5, out_bytes=6), Op(name="b", work=1, out_bytes=6), Op(name="c", work=5)],
                  [("a", "b"), ("b", "c")])
    problem = Problem(graph, Stages(3), Bottleneck(), [])
    assert local.problem_applies(problem) is None
    assert local.problem_bound(problem) == (pytest.approx(11.0, rel=1e-9), "the cheapest stage holding 'b'")
    # two unit ops without edges: no stage beats Lemma 3.3's 1
    two = Problem(Graph([Op(name="a", work=1.0), Op(name="b", work=1.0)]), Stages(2), Bottleneck(), [])
    assert local.problem_bound(two) == (1.0, "Lemma 3.3: no op's cheapest stage beats it")


def test_stage_cut_problem_entry_counts_overflow_only_when_streamed():
    # 10 parameter bytes on a 4-byte stage at bandwidth 2: 2 + 3 when the overflow streams, 2 under a hard cap
    graph = Graph([Op(name="a", work=2.0, param_bytes=10.0), Op(name="b", work=1.0)], [("a", "b")])
    stages = Stages(2, memory=4.0, bandwidth=2.0)
    streamed = local.problem_bound(Problem(graph, stages, Bottleneck(), [Overflow()]))
    assert streamed == (pytest.approx(5.0, rel=1e-9), "the cheapest stage holding 'a'")
    assert local.problem_bound(Problem(graph, stages, Bottleneck(), []))[0] == 2.0


def test_stage_cut_problem_entry_refuses_other_objectives_and_overlap():
    graph = Graph([Op(name="a", work=1.0)])
    assert local.problem_applies(Problem(graph, Stages(2), Latency(), [])) == (
        "the stage-cut bound bounds a max load, not 'latency'")
    assert local.problem_applies(Problem(graph, Stages(2), Bottleneck(overlap="half"), [])) == (
        "the stage-cut bound sums compute and transfers; overlap 'half' takes their maximum")


def test_stage_cut_names_the_first_of_equal_ops():
    # three unit ops, then two copies of the transfer case (a 5 -> b 1 -> c 5, 6-byte tensors) on 7 stages:
    # Lemma 3.3 gives 5 (half the sum 25 / 7 is less); the two b's read and write 12 bytes (13 alone), are cut
    # first, and cost 11 with their a and c; the first of the tie, b0 (op 4), is named, as on every machine
    # (NumPy's default sort may order the tie either way)
    ops = [Op(name=f"x{i}", work=1.0) for i in range(3)]
    edges = []
    for i in range(2):
        ops += [Op(name=f"a{i}", work=5, out_bytes=6), Op(name=f"b{i}", work=1, out_bytes=6), Op(name=f"c{i}", work=5)]
        edges += [(f"a{i}", f"b{i}"), (f"b{i}", f"c{i}")]
    assert stage_cut_bound(Graph(ops, edges), Stages(7)) == (pytest.approx(11.0, rel=1e-9), 4)

# ---------------------------------------------------------------------------- bounds/combinatorial.py


def test_chain_bound_takes_each_groups_own_cpu_floor():
    # v0 -> v1 -> v2 (1 on an accelerator, 10 on the CPU) and a lone x (0.5, 1) on two accelerators and a CPU:
    # rho = 0.5 (x's work per CPU second). v1 at position 1 needs A = 2 within 1 + 0.5 accelerators' worth
    # (4/3), at position 2 D = 2 within 1 + 0.5 (4/3); on the CPU it takes 10: 4/3. x's CPU floor (1) is x's
    ops = [Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 10.0}) for i in range(3)]
    graph = Graph(ops + [Op(name="x", work={"accelerator": 0.5, "cpu": 1.0})], [("v0", "v1"), ("v1", "v2")])
    cluster = Cluster.accelerators(2, cpus=1)
    assert chain_bound(graph, cluster) == pytest.approx(4 / 3)
    assert simple_lower_bound(graph, cluster) < 1.2


def test_position_windows_are_closed_with_a_relative_slack():
    # one op of e = 0.5 + 1e-9 on an accelerator or the CPU: every floor is e (A / (1 + rho) = e / 2 below it),
    # exactly the target 0.5 plus its slack 1e-9: on the edge, inside
    e = 0.5 + 1e-9
    allowed, cpu_ok = position_windows(Graph([Op(name="a", work={"accelerator": e, "cpu": e})]),
                                       Cluster.accelerators(1, cpus=1), 0.5)
    assert allowed.all() and cpu_ok.all()
    # below 1 the slack is 1e-9: an op of 0.5 is outside at 0.5 - 1.5e-9; above, 1e-9 of the target: 100 + 5e-8
    # is inside at 100
    assert not position_windows(Graph([Op(name="a", work=0.5)]), Stages(1), 0.5 - 1.5e-9)[0].any()
    assert position_windows(Graph([Op(name="a", work=100.00000005)]), Stages(1), 100.0)[0].all()

# ---------------------------------------------------------------------------- bounds/makespan.py


def _two_kinds(x_to_y: float = 1.0, y_to_x: float = 1.0) -> Cluster:
    return Cluster([Device(name="x", kind="x"), Device(name="y", kind="y")],
                   [Link(src="x", dst="y", bandwidth=x_to_y), Link(src="y", dst="x", bandwidth=y_to_x)])


def test_makespan_segments_before_between_and_after_the_ops_every_op_is_ordered_with():
    # r1, r2 -> s -> p0..p3 -> m -> (x1 -> x2 | y) -> t, unit works except x1 = x2 = 2 and y = 0.5, x2 listed
    # before x1, on two accelerators. s, m and t are ordered with every op (3); the segments {r1, r2} (path 1,
    # work 1), {p0..p3} (path 1, work 2) and {x1, x2, y} (path 4, work 2.25) add 1 + 2 + 4: 10. The critical
    # path r1 s p0 m x1 x2 t is 9, the work 13.5 / 2
    ops = [Op(name=n, work=1.0) for n in ("r1", "r2", "s", "p0", "p1", "p2", "p3", "m")]
    ops += [Op(name="x2", work=2.0), Op(name="x1", work=2.0), Op(name="y", work=0.5), Op(name="t", work=1.0)]
    edges = [("r1", "s"), ("r2", "s"), *[("s", f"p{i}") for i in range(4)], *[(f"p{i}", "m") for i in range(4)],
             ("m", "x1"), ("x1", "x2"), ("x2", "t"), ("m", "y"), ("y", "t")]
    bounds = makespan_bounds(Graph(ops, edges), Cluster.accelerators(2))
    assert bounds == {"critical_path": 9.0, "path": 9.0, "work": 6.75, "segments": 10.0, "bound": 10.0}


def test_makespan_bounds_below_one_time_unit():
    assert makespan_bounds(Graph([Op(name="a", work=0.5)]), Cluster.accelerators(1)) == {
        "critical_path": 0.5, "path": 0.5, "work": 0.5, "segments": 0.5, "bound": 0.5}


def test_makespan_bounds_with_an_op_one_device_cannot_run():
    # a runs on x only (2), b anywhere (1): every bound is a's 2 (the work bound at weights (1, 0), where a's
    # impossible time on y meets a zero weight)
    graph = Graph([Op(name="a", work={"x": 2.0}), Op(name="b", work={"x": 1.0, "y": 1.0})])
    assert makespan_bounds(graph, _two_kinds()) == {
        "critical_path": 2.0, "path": 2.0, "work": 2.0, "segments": 2.0, "bound": 2.0}


def test_work_bound_weighs_devices_by_the_inverse_of_what_they_can_run():
    # five devices (no grid): a runs on d0 only, b on d0 or d1 (1 each); d0's total is 2, d1's 1, the rest run
    # nothing: weights (1/3, 2/3, 0, 0, 0) give 1/3 + 1/3, above the uniform 0.2 + 0.2
    cluster = Cluster([Device(name=f"d{i}", kind=f"k{i}") for i in range(5)])
    graph = Graph([Op(name="a", work={"k0": 1.0}), Op(name="b", work={"k0": 1.0, "k1": 1.0})])
    assert work_bound(graph, cluster) == pytest.approx(2 / 3)


def test_path_bound_reads_each_devices_ready_time_and_each_producers_transfers():
    # a (x 1, y 5) writes 10 bytes to b (x 1, y 5): b on x is ready at 1 (2), on y at 5 (10): 2, not 5 + 1
    graph = Graph([Op(name="a", work={"x": 1.0, "y": 5.0}, out_bytes=10.0), Op(name="b", work={"x": 1.0, "y": 5.0})],
                  [("a", "b")])
    assert path_bound(graph, _two_kinds()) == 2.0
    # a (x 3, y 1) writes 10 bytes to b (x 1, y 3), c (1, 1) writes nothing to b: b on x waits for a on x (3) or
    # a on y plus 10 bytes (11): 4; on y it is ready at 1: 4. a's tensor from y is not c's (free)
    graph = Graph([Op(name="a", work={"x": 3.0, "y": 1.0}, out_bytes=10.0), Op(name="c", work={"x": 1.0, "y": 1.0}),
                   Op(name="b", work={"x": 1.0, "y": 3.0})], [("a", "b"), ("c", "b")])
    assert path_bound(graph, _two_kinds()) == 4.0


def test_work_weights_uniform_inverse_and_the_simplex_grid():
    rows = _weights(2, np.array([2.0, 6.0]))  # inverse (1/2, 1/6), normalized (3/4, 1/4); the grid i/20
    assert len(rows) == 2 + 21 and rows[:3].tolist() == [[0.5, 0.5], [0.75, 0.25], [0.0, 1.0]]
    assert rows[-1].tolist() == [1.0, 0.0]
    assert _weights(2, np.array([0.0, 4.0]))[1].tolist() == [0.0, 1.0]  # a device with nothing to run: weight 0
    assert _weights(2, np.array([0.5, np.inf]))[1].tolist() == [1.0, 0.0]  # ... or an impossible op
    assert len(_weights(2, np.array([0.0, np.inf]))) == 1 + 21  # no inverse weights at all
    assert len(_weights(4, np.ones(4))) == 2 + 1771 and len(_weights(5, np.ones(5))) == 2  # the grid up to D = 4


def test_work_bound_with_the_uniform_weights_alone():
    # five devices (no grid) and no work: no inverse weights either, one candidate row: 0
    assert work_bound(Graph([Op(name="a", work=0.0)]), Cluster.accelerators(5)) == 0.0

# ---------------------------------------------------------------------------- bounds/latency.py


def test_latency_critical_path_with_a_pin_its_group_cannot_follow():
    # u (accelerator 1, CPU 3) and v (accelerator only) are colocated; u is pinned to the CPU, so their unit
    # has no device (the problem's checks name that). They count 0 instead of claiming "no placement", and
    # the longest path u -> w is w's 2 (not u's CPU time 3 + 2, which the pin alone would give)
    graph = Graph([Op(name="u", work={"accelerator": 1.0, "cpu": 3.0}, group="g"),
                   Op(name="v", work={"accelerator": 1.0}, group="g"),
                   Op(name="w", work={"accelerator": 2.0, "cpu": 2.0})], [("u", "w")])
    problem = Problem(graph, Cluster.accelerators(1, cpus=1), Latency(), [Pin("u", "cpu0")])
    assert latency.critical_path_bound(problem) == (2.0, ["u", "w"])


def test_latency_critical_path_follows_the_slower_input_of_a_join():
    # c reads a (1) and b (5), listed in that order: the longest path ends b -> c (5 + 1), not a -> c (2)
    graph = Graph([Op(name="a", work=1.0), Op(name="b", work=5.0), Op(name="c", work=1.0)], [("a", "c"), ("b", "c")])
    assert latency.critical_path_bound(Problem(graph, Cluster.accelerators(2), Latency())) == (6.0, ["b", "c"])


def test_latency_critical_path_of_one_op_and_of_a_chain():
    # one op: its fastest time (the CPU's 2 beats the accelerator's 3); a chain: every op on it, first to last
    one = Graph([Op(name="a", work={"accelerator": 3.0, "cpu": 2.0})])
    assert latency.critical_path_bound(Problem(one, Cluster.accelerators(1, cpus=1), Latency())) == (2.0, ["a"])
    chain = Graph([Op(name=n, work=1.0) for n in "pqrs"], [("p", "q"), ("q", "r"), ("r", "s")])
    assert latency.critical_path_bound(Problem(chain, Cluster.accelerators(1), Latency())) == (4.0, list("pqrs"))


def test_packing_bound_below_one_time_unit_and_without_accelerators():
    # one op, 5 on the accelerator and 0.5 on the CPU: from T = 0.5 no unit must leave the CPU (the last step,
    # no unit): 0.5, the optimum; with hosts only there is nothing to pack: 0
    graph = Graph([Op(name="a", work={"accelerator": 5.0, "cpu": 0.5})])
    assert packing_bound(graph, Cluster.accelerators(1, cpus=1)) == 0.5
    assert packing_bound(graph, Cluster.accelerators(0, cpus=1)) == 0.0
