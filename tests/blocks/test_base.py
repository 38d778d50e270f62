"""The template library's base (blocks/base.py): activation bytes in memory rows, colocation without a common
device, links missing, provided twice or in a cycle, and the order templates are built in.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from placement_dsl.blocks.base import BlockTemplate, Context, Link, Stage, build_order
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Colocate
from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Throughput
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.testing import brute_force


# ---------------------------------------------------------------------------- blocks/base.py
def test_activation_bytes_count_toward_memory_in_the_model():
    # a -> b, 1 parameter byte and 3 activation bytes each, 5 bytes per accelerator: together (load 2) they do not
    # fit, so b reads a's 10-byte tensor on the other accelerator: 1 + 10
    from placement_dsl.constraints import Memory

    ops = [Op(name="a", work=1, param_bytes=1, activation_bytes=3, out_bytes=10),
           Op(name="b", work=1, param_bytes=1, activation_bytes=3)]
    problem = Problem(Graph(ops, [("a", "b")]), Cluster.accelerators(2, memory=5.0), Throughput(), [Memory()])
    r = solve(problem, formulation="throughput", solver="highs", time_limit=30)
    assert (r.objective, r.bound) == (11.0, pytest.approx(11.0)) and brute_force(problem)[0] == 11.0


def test_ops_colocated_with_no_common_device_are_named():
    from placement_dsl.errors import InfeasibleError

    ops = [Op(name="a", work={"accelerator": 1}), Op(name="b", work={"cpu": 1}), Op(name="c", work=1)]
    problem = Problem(Graph(ops), Cluster.accelerators(1, cpus=1), Throughput(), [Colocate([["a", "b"]])])
    with pytest.raises(InfeasibleError) as err:
        Context(problem)
    assert str(err.value) == ("op(s) ['a', 'b'] have no device they may all run on; relax AllowedKinds/colocation "
                              "or add a device of a suitable kind")


@dataclass(frozen=True)
class Ping(Link):
    """A link no library template provides (for the build-order tests)."""


@dataclass(frozen=True)
class Pong(Link):
    """A second such link."""


def test_links_missing_twice_provided_or_in_a_cycle_are_named():
    class Needs(BlockTemplate):
        def __init__(self, provides, needs):
            self.provides, self.needs = provides, needs

        def __repr__(self):
            return f"Needs({[k.__name__ for k in self.needs]})"

    with pytest.raises(SpecError) as err:
        build_order([Needs((), (Ping,))])
    assert str(err.value) == ("formulation: template Needs(['Ping']) needs ['Ping'], which no template of the "
                              "formulation provides; add the template that provides it")
    with pytest.raises(SpecError) as err:
        build_order([Needs((Ping,), (Pong,)), Needs((Pong,), (Ping,))])
    assert str(err.value) == ("formulation: templates [\"Needs(['Pong'])\", \"Needs(['Ping'])\"] need links from one "
                              "another in a cycle")
    ctx = Context(Problem(Graph([Op(name="a", work=1)]), Cluster.accelerators(1), Throughput()))
    ctx.provide(Ping())
    with pytest.raises(SpecError) as err:
        ctx.provide(Ping())
    assert str(err.value) == ("formulation: a template provides Ping, which another template already provides; keep "
                              "one of them")
    with pytest.raises(SpecError) as err:
        ctx.link(Pong)
    assert str(err.value) == ("formulation: Pong is needed but no template provides it; add a template that does "
                              "(see BlockTemplate.provides)")


def test_ready_templates_are_built_lower_stage_first_then_in_the_given_order():
    """The model reads like the paper's figure (variables, structure, cuts, costs, objective) whatever order a
    derived formulation lists its templates in; links still come first (``Late`` needs what ``Cut`` provides)."""
    def template(name, stage, provides=(), needs=()):
        return type(name, (BlockTemplate,), {"stage": stage, "provides": provides, "needs": needs,
                                             "__repr__": lambda self: name})()

    listed = [template("Objective", Stage.OBJECTIVE), template("Late", Stage.ASSIGN, needs=(Ping,)),
              template("Cut", Stage.CUT, provides=(Ping,)), template("Assign", Stage.ASSIGN),
              template("Structure", Stage.STRUCTURE), template("Assign2", Stage.ASSIGN)]
    assert [repr(t) for t in build_order(listed)] == ["Assign", "Assign2", "Structure", "Cut", "Late", "Objective"]


