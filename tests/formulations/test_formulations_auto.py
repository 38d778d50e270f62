"""formulation="auto" asks the registered formulations (their declared Auto), never their names."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from placement_dsl.constraints import DagOrder, Term
from placement_dsl.errors import SpecError
from placement_dsl.formulations import FORMULATIONS, Auto, Kind, choose, get
from placement_dsl.objectives import Latency
from placement_dsl.problem import Problem
from placement_dsl.testing import INSTANCES
from placement_dsl.training_terms import Replicate, TrainingMemory


@dataclass(frozen=True)
class Marked(Term):
    """A term only the test's formulation writes."""


def test_the_package_declares_its_choices():
    assert get("throughput").auto == Auto(rank=0)
    assert get("exact").auto == Auto(rank=1, requires=(DagOrder,), checked=True)
    assert get("throughput-replicated").auto.requires == (Replicate,)
    assert get("latency").auto.rank > get("throughput-replicated").auto.rank
    assert get("chain").auto is None and get("superblock").auto is None  # restrictions, relaxations: never
    assert TrainingMemory in get("throughput").rules  # declared with throughput, not added by importing a module


def test_the_old_choices_hold():
    chain, _ = INSTANCES["chain"]()
    assert choose(chain) == "exact"
    cpu, _ = INSTANCES["accelerators_cpu"]()
    assert choose(cpu) == "throughput"
    latency = Problem(chain.source_graph, chain.cluster, Latency(), [])
    assert choose(latency) == "latency"
    replicated = Problem(chain.source_graph, chain.cluster, chain.objective, [*chain.constraints, Replicate(2)])
    assert choose(replicated) == "throughput-replicated"


def test_a_registered_formulation_is_chosen_by_its_declaration(monkeypatch):
    mine = get("throughput").derive("marked", rules={Marked: lambda term, problem: []},
                                    auto=Auto(rank=5, requires=(Marked,)))
    monkeypatch.setitem(FORMULATIONS, "marked", mine)
    chain, _ = INSTANCES["chain"]()
    marked = Problem(chain.source_graph, chain.cluster, chain.objective, [*chain.constraints, Marked()])
    assert choose(marked) == "marked" and get("auto", marked) is mine
    assert choose(chain) == "exact"  # without its term it is not a candidate
    assert get("throughput").derive("plain").auto is None  # a derived formulation is not chosen unless it says so


def test_no_candidate_is_an_error_naming_the_choices(monkeypatch):
    for name, form in list(FORMULATIONS.items()):
        if form.kind is Kind.EXACT:
            monkeypatch.delitem(FORMULATIONS, name)
    chain, _ = INSTANCES["chain"]()
    with pytest.raises(SpecError, match="formulation 'auto': no registered formulation is chosen"):
        choose(chain)
