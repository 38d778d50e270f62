"""The tensor cut (blocks/transfer.py) and the device loads (blocks/load.py): each pass pays for its own tensors,
the cut's options and their errors, which tensors get cut variables, and the overflow under overlap.
"""
from __future__ import annotations

import pyomo.environ as pyo
import pytest

from placement_dsl.blocks import OrderedAssignment, TensorCut
from placement_dsl.cluster import Cluster
from placement_dsl.compile import compile
from placement_dsl.constraints import DagOrder, Overflow
from placement_dsl.errors import SpecError
from placement_dsl.formulations import get
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck, GPipe, Throughput
from placement_dsl.problem import Problem
from placement_dsl.testing import brute_force
from tests.blocks.helpers import asymmetric_training_problem, proved_by_every_formulation, whole


# ---------------------------------------------------------------------------- tensor cut: passes, options, variables
@pytest.mark.parametrize("objective", [GPipe(), Throughput()], ids=["gpipe", "throughput"])
def test_each_pass_pays_for_its_own_tensors(objective):
    # split {f0, b0} | {f1, b1}: stage0 fw 4 + writes f0's 2 = 6, bw reads b1's 1 + 7 = 8; stage1 fw reads 2 + 3 = 5,
    # bw 2 + writes 1 = 3. GPipe max fw + max bw = 6 + 8 = 14 (one stage: 7 + 9 = 16); throughput max(14, 8) = 14.
    # Counting the forward tensors in the backward pass instead gives the split 6 + 7 = 13.
    problem = asymmetric_training_problem(objective)
    best, _ = brute_force(problem)
    assert best == 14.0
    proved_by_every_formulation(problem, 14.0)


def test_tensor_cut_options_and_their_errors():
    assert (TensorCut().form, TensorCut().merged) == ("commio", False)
    with pytest.raises(SpecError, match=whole("tensor_cut: unknown form 'arch'; choose from ['commio', 'archer']")):
        TensorCut(form="arch")
    with pytest.raises(SpecError, match=whole("tensor_cut: merged=True needs form='archer' (Archer's single c "
                                                  "variable)")):
        TensorCut(merged=True)


def test_a_merged_cut_refuses_to_split_in_from_out_for_full_overlap():
    merged = get("exact").derive("exact_merged_cut", skeleton=lambda p: [OrderedAssignment(),
                                                                         TensorCut(form="archer", merged=True)])
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2)], [("a", "b")])
    problem = Problem(g, Cluster.stages(2), Bottleneck(overlap="full"), [DagOrder()])
    with pytest.raises(SpecError, match=whole("tensor_cut: merged c cannot split in from out; use merged=False "
                                                  "for overlap='full'")):
        compile(problem, merged)


def test_only_tensors_with_bytes_get_cut_variables():
    # a's tensor has 1 byte, b's none: only a gets a cut variable per device (b -> c crosses too)
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2), Op(name="c", work=2)], [("a", "b"), ("b", "c")])
    c = compile(Problem(g, Cluster.stages(3), Bottleneck()), "throughput")
    cut = c.model.tensor_cut
    assert sorted(cut.tensors) == [("a", "stage0"), ("a", "stage1"), ("a", "stage2")]
    assert sorted(cut.cut_in) == sorted(cut.cut_out) == sorted(cut.tensors)


def test_archers_merged_cut_variables_are_non_negative():
    # under DAG order every c[u, b] has a row with a non-negative right-hand side at an integer point, but the
    # LP relaxation needs the bound: without it c = y + x - 1 < 0 prices a fractional split below zero
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2)], [("a", "b")])
    cut = compile(Problem(g, Cluster.stages(2), Bottleneck(), [DagOrder()]), "exact").model.tensor_cut.cut
    assert len(cut) == 2 and all(v.lb == 0 and v.domain is pyo.NonNegativeReals for v in cut.values())


# ---------------------------------------------------------------------------- device loads under overlap
def test_full_overlap_prices_each_pass_with_its_own_tensors_in_and_out():
    # f0 (10, tensor 6) -> f1 (10) -> b1 (2, tensor 5) -> b0 (1), f0/b0 and f1/b1 colocated; full overlap: a pass's
    # load is max(compute, in, out). Split: fw max(10, 6) = 10 on both; bw stage0 max(1, in 5) = 5, stage1
    # max(2, out 5) = 5: GPipe 15 (one stage: 20 + 3 = 23). The forward tensors priced in the backward pass: 16
    ops = [Op(name="f0", work=10, out_bytes=6, group="a"), Op(name="f1", work=10, group="b"),
           Op(name="b1", work=2, out_bytes=5, backward=True, group="b"), Op(name="b0", work=1, backward=True, group="a")]
    problem = Problem(Graph(ops, [("f0", "f1"), ("f1", "b1"), ("b1", "b0")]), Cluster.stages(2), GPipe(overlap="full"))
    best, _ = brute_force(problem)
    assert best == 15.0
    proved_by_every_formulation(problem, 15.0)


@pytest.mark.parametrize("overlap", ["half", "full"])
def test_overflow_counts_on_the_transfer_side_of_an_overlapped_load(overlap):
    # a (work 1, 3 parameter bytes, tensor 2) -> b (work 1, 3 bytes) on stages of memory 2, bandwidth 1:
    # split, each stage streams 1 byte: half max(1, 2 + 1) = 3; full max(1, 0, 2 + 1) = 3 on the writer.
    # One stage streams 4: max(2, 4) = 4. Subtracting the overflow would price the split at 1 (half) or 2 (full)
    g = Graph([Op(name="a", work=1, param_bytes=3, out_bytes=2), Op(name="b", work=1, param_bytes=3)], [("a", "b")])
    problem = Problem(g, Cluster.stages(2, memory=2.0), Bottleneck(overlap=overlap), [Overflow()])
    best, _ = brute_force(problem)
    assert best == 3.0
    proved_by_every_formulation(problem, 3.0)
