"""Structure tests: variables and constraints per block template, against the papers' sizes."""
from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest

from placement_dsl import Cluster, SpecError
from placement_dsl.blocks import TEMPLATES, TensorCut
from placement_dsl.compile import compile
from placement_dsl.conformance import check_documented
from placement_dsl.constraints import Colocate, Contiguous, DagOrder, Memory, Overflow, Pin
from placement_dsl.objectives import Bottleneck, GPipe, Throughput
from placement_dsl.problem import Problem, Stages
from placement_dsl.testing import chain_graph, diamond_graph, random_graph, training_graph


def with_params(g, size=1.0):
    return g.replace(ops=[op.model_copy(update={"param_bytes": size}) for op in g.ops])


def sizes(problem, formulation):
    return compile(problem, formulation).size()


def test_throughput_blocks_on_a_chain():
    # n = 4 ops, m = 3 edges, D = 2 devices, every tensor of size 1
    s = sizes(Problem(with_params(chain_graph([1, 1, 1, 1])), Stages(2, memory=2.5), Throughput(overlap="half"),
                      [Memory(), Contiguous(), DagOrder()]), "throughput")
    assert s["assignment"] == {"variables": 8, "constraints": 4}  # x[v, d]; sum_d x = 1
    assert s["tensor_cut"] == {"variables": 2 * 3 * 2, "constraints": 2 * 3 * 2}  # CommIn/Out per producer, device
    assert s["contiguity"]["variables"] == 4 * 2  # z[v, d, forward]
    assert s["contiguity"]["constraints"] == 4 * 2 + 3 * 2 + 3 * 2  # eq. 11, 12, 13
    assert s["dag_order"] == {"variables": 0, "constraints": 3 * 1}  # edges x (D - 1)
    assert s["memory"] == {"variables": 0, "constraints": 2}
    assert s["max_load"] == {"variables": 1, "constraints": 2 * 2}  # devices x parts (compute, comm)


def test_exact_blocks_follow_archer_fig3():
    s = sizes(Problem(with_params(diamond_graph()), Stages(3, memory=3.0), Bottleneck(), [DagOrder(), Overflow()]), "exact")
    n, m, k = 4, 4, 3
    assert s["assignment"] == {"variables": n * k, "constraints": n * (k - 1)}  # y and its monotonicity
    assert s["dag_order"]["constraints"] == m * (k - 1)  # eq. (8)
    producers = 3  # a, b, c make non-empty tensors
    assert s["tensor_cut"] == {"variables": producers * k, "constraints": m * (k - 1) + m * k}  # eq. (9), (10)
    assert s["overflow"]["variables"] == k and s["max_load"]["constraints"] == k


def test_exact_size_matches_theorem_3_2():
    rng = np.random.default_rng(3)
    g = random_graph(rng, 40, density=0.08)
    for k in (2, 4, 8):
        c = compile(Problem(g, Stages(k), Bottleneck(), [DagOrder()]), "exact")
        n, m = g.n, g.m
        nvars = sum(1 for _ in c.model.component_data_objects(pyo.Var))
        ncons = sum(1 for _ in c.model.component_data_objects(pyo.Constraint, active=True))
        assert nvars <= 2 * n * k + 1  # y, c, bottleneck: O(nk)
        assert ncons <= n * (k - 1) + 3 * m * k + k  # monotone y, (8), (9), (10), (6): O(mk)


def test_training_contiguity_has_forward_and_backward_sets():
    g = training_graph()
    c = compile(Problem(g, Cluster.accelerators(2), GPipe(), [Contiguous()]), "throughput")
    assert len(c.model.contiguity.labels) == 2 * 2
    assert c.size()["contiguity"]["variables"] == g.n * 4
    assert c.size()["gpipe"] == {"variables": 2, "constraints": 2 * 2}  # FW and BW epigraphs x devices
    assert set(c.model.device_load.passes) == {"total", "forward", "backward"}


def test_colocation_shared_or_equalities_and_pins():
    g = chain_graph([1, 1, 1, 1])
    shared = compile(Problem(g, Stages(3), Throughput(), [Colocate([["op0", "op3"]]), Pin("op1", "stage2")]))
    assert shared.size()["assignment"]["variables"] == 2 * 3 + 1  # three units, the pinned one on its device only
    assert shared.size()["pin"]["constraints"] == 1
    eq = compile(Problem(g, Stages(3), Throughput(), [Colocate([["op0", "op3"]], shared=False)]))
    assert eq.size()["assignment"]["variables"] == 4 * 3
    assert eq.size()["colocation"]["constraints"] == 3  # x[op3, d] = x[op0, d] per device


def test_every_component_is_documented():
    c = compile(Problem(training_graph(), Cluster.accelerators(2, memory=9, cpus=1), GPipe(overlap="full"),
                        [Memory(), Contiguous(), DagOrder()]))
    assert check_documented(c.model) == []


def test_template_registry_and_errors():
    assert {"assignment", "tensor_cut", "contiguity", "dag_order", "memory", "overflow", "device_load",
            "max_load", "gpipe", "pin", "colocation"} <= set(TEMPLATES.values())
    assert TensorCut in TEMPLATES  # keyed by class: two templates may build blocks of the same name
    with pytest.raises(SpecError, match="merged"):
        TensorCut(form="commio", merged=True)
