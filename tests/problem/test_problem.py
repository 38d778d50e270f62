"""The declarative problem layer: validation, the cost-model view, JSON round trips."""
from __future__ import annotations

import json
import math
import sys

import pytest

from placement_dsl import Cluster, Graph, Op, SpecError
from placement_dsl.constraints import (
    AllowedKinds,
    Colocate,
    Contiguous,
    DagOrder,
    Memory,
    Overflow,
    Pin,
    term_from_dict,
)
from placement_dsl.evaluate import MemoryMode, Objective
from placement_dsl.io import Workload
from placement_dsl.objectives import (
    Bottleneck,
    GPipe,
    Interleaved1F1B,
    PipeDream,
    Throughput,
    ZeroBubbleH1,
    ZeroBubbleV,
    objective_of,
)
from placement_dsl.problem import Problem, Stages
from placement_dsl.testing import chain_graph, colocated_pinned, training_graph


def small() -> Graph:
    ops = [Op(name="a", work=1, out_bytes=1, attrs={"colorClass": 1}), Op(name="b", work=2, attrs={"colorClass": 1}),
           Op(name="c", work={"accelerator": 1, "cpu": 3})]
    return Graph(ops, [("a", "b"), ("b", "c")], name="small")


def test_problem_layer_imports_no_pyomo():
    code = ("import sys, placement_dsl.problem, placement_dsl.objectives, placement_dsl.constraints;"
            "print('pyomo' in sys.modules)")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("term, words", [
    (Pin("zz", "stage0"), ["Pin", "zz"]),
    (Pin("a", "gpu9"), ["gpu9", "stage0"]),
    (Colocate([["a", "nope"]]), ["Colocate", "nope"]),
    (Colocate.by("missing_attr"), ["missing_attr", "colorClass"]),
    (AllowedKinds(["a"], ["tpu"]), ["tpu", "accelerator"]),
])
def test_unknown_names_raise_spec_errors_naming_them(term, words):
    with pytest.raises(SpecError) as err:
        Problem(small(), Stages(2), Throughput(), [term])
    for w in words:
        assert w in str(err.value)


def test_a_single_term_reads_as_a_list_of_one_and_a_non_term_is_named():
    one = Problem(small(), Stages(2), Throughput(), Memory())
    assert one.constraints == Problem(small(), Stages(2), Throughput(), [Memory()]).constraints
    for bad in (42, "memory"):
        with pytest.raises(SpecError, match=f"constraints must be a term or a list of terms.*{bad!r}"):
            Problem(small(), Stages(2), Throughput(), bad)


def test_conflicting_pins_and_memory_modes_are_rejected():
    with pytest.raises(SpecError, match="conflicting pins"):
        Problem(small(), Stages(2), Throughput(), [Pin("a", "stage0"), Pin("a", "stage1")])
    with pytest.raises(SpecError, match="colocated ops"):
        Problem(small(), Stages(2), Throughput(), [Colocate([["a", "b"]]), Pin("a", "stage0"), Pin("b", "stage1")])
    with pytest.raises(SpecError, match="conflict"):
        Problem(small(), Stages(2), Throughput(), [Memory(), Overflow()])
    with pytest.raises(SpecError, match="overlap"):
        Throughput(overlap="sometimes")
    with pytest.raises(SpecError, match="objective"):
        Problem(small(), Stages(2), objective=Memory())  # type: ignore[arg-type]


def test_cost_model_view():
    g = small()
    cm = Problem(g, Stages(2), Bottleneck(overlap="half"), [Overflow(), DagOrder()]).cost_model()
    assert (cm.objective, cm.overlap.value, cm.memory) == (Objective.MAX_LOAD, "half", MemoryMode.OVERFLOW)
    assert cm.require == {"allowed", "colocation", "dag_order", "acyclic"}
    cm = Problem(training_graph(), Cluster.accelerators(2), GPipe(), [Memory(), Contiguous()]).cost_model()
    assert cm.objective is Objective.GPIPE and cm.require == {"allowed", "colocation", "memory", "contiguous"}
    assert Problem(g, Stages(2), PipeDream()).cost_model().objective is Objective.MAX_LOAD


def test_colocation_and_allowed_kinds_fold_into_the_graph():
    g = small()
    p = Problem(g, Cluster.accelerators(1, cpus=1), Throughput(), [Colocate.by("colorClass"), AllowedKinds("c", "cpu")])
    assert p.graph.group_id[0] == p.graph.group_id[1] and p.source_graph.group_id[1] == 1
    assert math.isinf(p.graph.ops[2].time_on("accelerator")) and p.graph.ops[2].time_on("cpu") == 3
    split = p.placement([0, 1, 1])
    assert any("colocation" in v for v in p.violations(split))
    assert p.is_valid(p.placement([0, 0, 1]))
    assert not p.is_valid(p.placement([0, 0, 0]))  # c may not run on the accelerator


def test_pins_are_checked_by_the_problem():
    problem, _ = colocated_pinned()
    bad = problem.placement([0, 0, 2, 0])
    assert any("pinned" in v for v in problem.violations(bad))


def _refused(constant: str) -> None:
    raise ValueError(f"non-standard JSON constant {constant}")


def test_json_round_trip(tmp_path):
    terms = [Colocate([["a", "b"]], shared=False), Pin("c", "acc0"), AllowedKinds(["c"], ["accelerator"]), Memory(),
             Contiguous()]
    p = Problem(small(), Cluster.accelerators(2, memory=8, cpus=1), GPipe(overlap="full"), terms)
    q = Problem.from_dict(p.to_dict())
    assert q == p and q.cost_model() == p.cost_model()
    p.save(tmp_path / "p.json")
    assert Problem.load(tmp_path / "p.json") == p
    text = (tmp_path / "p.json").read_text()  # standard JSON: the CPU's unlimited memory is null, not Infinity
    assert json.loads(text, parse_constant=_refused)["cluster"]["devices"][2]["memory"] is None
    with pytest.raises(SpecError, match="unknown problem term"):
        term_from_dict({"term": "NoSuchTerm"})



@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(objective=[1]), r"problem: objective must be a term mapping .*got list \[1\]"),
    (lambda d: d.update(constraints="Memory"), r"problem: 'constraints' must be a list of terms .*got str 'Memory'"),
    (lambda d: d.update(constraints=[5]), r"problem: constraints\[0\] must be a term mapping"),
    (lambda d: d.update(objective={"term": [1]}), r"problem: objective: unknown problem term \[1\]"),
    (lambda d: d.update(graph=None), r"'graph' must be a mapping"),
    (lambda d: d.update(cluster=[]), r"cluster must be a mapping"),
    (lambda d: d["graph"].update(edges=["ab"]), r"edge #0: expected a \(src, dst\) pair, got 'ab'"),
])
def test_from_dict_refuses_malformed_fields_by_name(change, message):
    data = Problem(small(), Cluster.accelerators(2), Throughput(), [Memory()]).to_dict()
    change(data)
    with pytest.raises(SpecError, match=message):
        Problem.from_dict(data)
    with pytest.raises(SpecError, match="problem mapping|a problem is a mapping"):
        Problem.from_dict([data])


def test_load_names_the_file(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"graph": {"ops": "abc"}, "cluster": {"devices": [{"name": "a"}]}, '
                    '"objective": {"term": "Throughput"}}')
    with pytest.raises(SpecError, match=r"problem '.*p\.json': .*ops must be a list"):
        Problem.load(path)
    path.write_text("[" * 100_000)
    with pytest.raises(SpecError, match=r"cannot read problem"):
        Problem.load(path)

def test_command_line_methods_map_to_terms():
    from placement_dsl.presets import problem_for_method

    w = Workload(chain_graph([1, 2, 3]), Stages(2))
    assert problem_for_method(w, "bottleneck", "exact").has(DagOrder)
    assert problem_for_method(w, "bottleneck", "exact").has(Overflow)
    p = problem_for_method(w, "throughput", "ip")
    assert p.has(Contiguous) and p.has(Memory)
    assert not problem_for_method(w, "gpipe", "ip-noncontig").has(Contiguous)
    with pytest.raises(SpecError, match="objective 'nope'"):
        problem_for_method(w, "nope", "ip")
    with pytest.raises(SpecError, match="method"):
        problem_for_method(w, "throughput", "magic")


def test_a_deadlocked_latency_placement_is_invalid_for_the_problem_too():
    # acc0 holds a and d, acc1 holds b and c: acc0's one invocation waits for c, acc1's for a
    from placement_dsl.objectives import Latency

    g = Graph([Op(name=n, work=1, out_bytes=1) for n in "abcd"], [("a", "b"), ("c", "d")])
    p = Problem(g, Cluster.accelerators(2), Latency())
    pl = p.placement([0, 1, 1, 0])
    ev = p.evaluate(pl)
    assert not ev.valid and ev.objective == math.inf
    assert p.is_valid(pl) is False
    assert p.violations(pl) == [("[contiguous] no invocation order exists: 2 of 2 invocations wait on each other, "
                                "e.g. the cycle acc0#1 -> acc1#1")]
    # the problem and the cost model give one answer: the violations the problem lists are the ones that bind
    assert [f"[{v.check}] {v.message}" for v in ev.binding] == p.violations(pl)


@pytest.mark.parametrize("constraints", [[], [Memory()]])
def test_gpipe_fill_and_drain_of_a_cyclic_placement_is_a_violation_not_an_error(constraints):
    # v0 and v2 on acc0, v1 on acc1: acc0's forward pass feeds acc1's, which feeds acc0's
    g = Graph([Op(name=f"v{i}", work=1, out_bytes=1, param_bytes=1) for i in range(3)], [("v0", "v1"), ("v1", "v2")])
    p = Problem(g, Cluster.accelerators(2, memory=100), GPipe(microbatches=4), constraints)
    pl = p.placement([0, 1, 0])
    ev = p.evaluate(pl)
    assert not ev.valid and ev.objective == math.inf
    assert p.is_valid(pl) is False
    assert p.violations(pl) == [("[acyclic] GPipe fill and drain: no schedule exists, the device passes form the cycle "
                                "acc1 forward -> acc0 forward -> acc1 forward")]
    assert p.is_valid(p.placement([0, 0, 1]))  # a contiguous placement has its schedule


def test_class_of_reads_the_structure_whatever_the_device_numbering():
    """The DP's split on accelerators and a CPU sends an edge from the CPU back to acc0 (DagOrder by the devices'
    numbering refuses it) and is still in the DP class; the best split when contiguity is dropped is neither
    contiguous nor acyclic."""
    from placement_dsl import testing
    from placement_dsl.constraints import Contiguous
    from placement_dsl.heuristics.base import run
    from placement_dsl.placement import PlacementClass

    problem = testing.accelerators_cpu()[0]
    dp = run("dp", problem.graph, problem.cluster, model=problem.cost_model()).placement
    assert problem.class_of(dp) is PlacementClass.DP
    contiguous = testing.contiguity_binds()[0]
    free = testing.without(contiguous, Contiguous)
    best = testing.brute_force(free)[1]
    assert free.class_of(best) is PlacementClass.OTHER and free.class_of(best) not in PlacementClass.CONTIGUOUS
    one = free.placement([0] * free.graph.n)
    assert free.class_of(one) is PlacementClass.DP


def test_a_pinned_op_off_its_pin_is_one_violation_naming_the_pin():
    # the pin is folded into the op's allowed devices, so the cost model's allowed check refuses it; the term
    # itself used to add a second violation for the same op ('[Pin] op 'c' is pinned to ...')
    p = Problem(small(), Cluster.accelerators(2, cpus=1), Throughput(), [Pin("c", "acc1")])
    found = p.violations(p.placement([0, 0, 0]))
    assert len(found) == 1, found
    assert found[0].startswith("[allowed]") and "'c'" in found[0] and "pinned to 'acc1'" in found[0]
    assert not p.violations(p.placement([0, 0, 1]))


@pytest.mark.parametrize("term", [Throughput(), PipeDream(), Bottleneck(), GPipe(), GPipe(microbatches=8),
                                  Interleaved1F1B(), Interleaved1F1B(microbatches=4, virtual=2),
                                  ZeroBubbleH1(virtual=3), ZeroBubbleV(microbatches=16)])
def test_the_term_of_a_cost_model_is_the_term_that_made_it(term):
    """The DAG-ordered problem ``bounds`` certifies (``presets.dag_problem``) rebuilds its objective from the cost
    model: it must keep the schedule it names and the step and stages per rank it reads (an interleaved model
    had come back as throughput, a GPipe of 8 micro-batches as the steady state)."""
    assert objective_of(term.cost_model()) == term
