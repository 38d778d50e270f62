"""The packing bound's search (bounds/packing.py): LPT, the budget of a decision, the bisection, bin completion,
and the start heavy_packing hands to local search. Hand-computed cases, no solver.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from placement_dsl.bounds import packing
from placement_dsl.bounds.packing import (
    FEASIBLE,
    INFEASIBLE,
    TOLERANCE,
    UNKNOWN,
    BinCompletion,
    PackingSearch,
    heavy_packing,
    lpt,
    packing_bound,
)
from placement_dsl.cluster import Cluster
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Throughput
from placement_dsl.problem import Problem
from placement_dsl.testing import optimum

TWO = Cluster.accelerators(2, cpus=1)


def _layers(works: list[float], cpu_factor: float = 10.0) -> Graph:
    """A chain of layers, each ``cpu_factor`` times slower on the host CPU."""
    ops = [Op(name=f"v{i}", work={"accelerator": w, "cpu": w * cpu_factor}) for i, w in enumerate(works)]
    return Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(len(works) - 1)])


# ---------------------------------------------------------------------------- bounds/packing.py


def test_lpt_puts_each_item_on_the_least_loaded_bin():
    # 3 | 3, then the 2s on 5 | 5 and 7 | 5: makespan 7 (the optimum {3, 3} | {2, 2, 2} is 6)
    assert lpt(np.array([3.0, 3.0, 2.0, 2.0, 2.0]), 2) == 7.0
    # 8 | 5, 4 joins the 5 (9), 2 joins the 8 (10)
    assert lpt(np.array([8.0, 5.0, 4.0, 2.0]), 2) == 10.0


def test_a_decision_may_spend_a_quarter_of_the_budget():
    # [2, 1] in one bin of 3: the bin's first set (node 1) takes the 1 (node 2) and is complete: 2 nodes
    w = np.array([2.0, 1.0])
    assert BinCompletion(w, 1, 3.0, 2).run() == FEASIBLE
    assert BinCompletion(w, 1, 3.0, 1).run() == UNKNOWN
    # a budget of 7 allows 7 // 4 = 1 node per decision, 8 allows 2
    assert PackingSearch(1, 7).pack(w, 3.0)[0] == UNKNOWN
    search = PackingSearch(1, 8)
    assert search.pack(w, 3.0)[0] == FEASIBLE and search.left == 6
    assert PackingSearch(1, 3).per_decision == 1  # never below one node
    # [2] in one bin of 3 takes one node: a budget of 1 is enough
    assert PackingSearch(1, 1).pack(np.array([2.0]), 3.0)[0] == FEASIBLE


def test_a_spent_budget_answers_unknown_even_where_the_sums_refute():
    # [3, 3] cannot fit one bin of 2 (sum 6 > 2, refuted before any node), but with no budget left the
    # search does not run: unknown, as for any decision past the budget
    assert BinCompletion(np.array([3.0, 3.0]), 1, 2.0, 0).run() == INFEASIBLE
    assert PackingSearch(1, 0).pack(np.array([3.0, 3.0]), 2.0)[0] == UNKNOWN


def test_the_bisection_drops_to_the_makespan_of_a_packing_it_finds(monkeypatch):
    # [5, 5, 3, 3, 3] on two accelerators (the CPU, 10x slower, takes none below 30): the cheap bound
    # 9.5 (half the sum) is refuted; LPT packs 5+3+3 = 11; the search at the midpoint 10.25 finds
    # {5, 5} | {3, 3, 3}, whose makespan 10 becomes the top; 26 halvings of [9.5, 10] reach a width
    # 0.5 * 2^-26 <= 1e-9 * 10: 10 - 2^-27 (the midpoint 10.25 as the top ends elsewhere)
    decisions = []
    decide = packing.PackingSearch.decide

    def counted(self, w, C):
        decisions.append(C)
        if len(decisions) > 100:  # a bisection that never ends fails here instead of hanging
            raise AssertionError("the bisection does not converge")
        return decide(self, w, C)

    monkeypatch.setattr(packing.PackingSearch, "decide", counted)
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
    pack = packing.PackingSearch.pack

    def spy(self, w, C):
        verdict, found = pack(self, w, C)
        asked.append((C, verdict))
        return verdict, found

    monkeypatch.setattr(packing.PackingSearch, "pack", spy)
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
    search = BinCompletion(np.array(w, dtype=float), K, C, 10**6)
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
    search = BinCompletion(np.array(w, dtype=float), K, C, nodes)
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
    search = BinCompletion(w, 1, C, 1000)
    assert search.run() == FEASIBLE
    assert search.members == [list(range(12))]

# ---------------------------------------------------------------------------- packing below one unit
def test_packing_bound_below_one_time_unit_and_without_accelerators():
    # one op, 5 on the accelerator and 0.5 on the CPU: from T = 0.5 no unit must leave the CPU (the last step,
    # no unit): 0.5, the optimum; with hosts only there is nothing to pack: 0
    graph = Graph([Op(name="a", work={"accelerator": 5.0, "cpu": 0.5})])
    assert packing_bound(graph, Cluster.accelerators(1, cpus=1)) == 0.5
    assert packing_bound(graph, Cluster.accelerators(0, cpus=1)) == 0.0
