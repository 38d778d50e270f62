"""Rule tables inherit: a rule added to a parent formulation reaches every child, also one defined earlier."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.compile import compile
from placement_dsl.constraints import Term
from placement_dsl.errors import SpecError
from placement_dsl.formulations import BASE, BASE_RULES, Kind, get
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Latency, Makespan, Throughput
from placement_dsl.problem import Problem


@dataclass(frozen=True)
class Marked(Term):
    """A user's term: no effect on the cost model; its rule records that it was asked."""


CALLS: list[str] = []


def marked(term: Marked, problem: Problem) -> list:
    CALLS.append(type(problem.objective).__name__)
    return []


@pytest.fixture
def restore():
    """Remove the user's rule from every table it was added to."""
    added: list = []
    yield added
    for table in added:
        table.pop(Marked, None)
    CALLS.clear()


def _problem(objective) -> Problem:
    g = Graph([Op(name="a", work={"accelerator": 1.0}, out_bytes=1.0), Op(name="b", work={"accelerator": 2.0})],
              [("a", "b")])
    return Problem(g, Cluster.accelerators(2), objective, [Marked()])


@pytest.mark.parametrize("name", ["throughput", "exact", "latency", "schedule", "chain", "throughput-replicated"])
def test_a_rule_added_to_the_base_reaches_every_formulation_defined_before(name, restore):
    with pytest.raises(SpecError, match="no rule for term Marked"):
        get(name).rule_for(Marked())
    BASE.add_rule(Marked, marked)
    restore.append(BASE.rules)
    assert get(name).rule_for(Marked()) is marked


def test_the_base_table_is_the_shared_one(restore):
    BASE_RULES[Marked] = marked
    restore.append(BASE_RULES)
    assert get("latency").rule_for(Marked()) is marked


@pytest.mark.parametrize("objective", [Latency(), Makespan(), Throughput()])
def test_the_inherited_rule_is_used_when_compiling(objective, restore):
    BASE.add_rule(Marked, marked)
    restore.append(BASE.rules)
    compile(_problem(objective), "auto")
    assert CALLS == [type(objective).__name__]


def test_a_rule_added_to_a_parent_reaches_a_child_derived_earlier(restore):
    child = get("latency").derive("latency-child", cls=type(get("latency")))
    assert child.kind is Kind.EXACT
    get("latency").add_rule(Marked, marked)
    restore.append(get("latency").rules)
    assert child.rule_for(Marked()) is marked
    assert get("schedule").accepts(_problem(Makespan())) is not None  # a sibling does not see it


def test_the_child_overrides_keep_precedence_over_the_base():
    # the latency and schedule formulations refuse other objectives with their own rule, not the base's max load
    from placement_dsl.objectives import Bottleneck

    for name in ("latency", "schedule"):
        with pytest.raises(SpecError, match=f"formulation '{name}': it minimizes"):
            get(name).rule_for(Bottleneck())(Bottleneck(), _problem(Bottleneck()))
