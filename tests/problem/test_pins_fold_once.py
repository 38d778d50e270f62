"""A problem folds a run of pins into one copy of its graph: a contracted step's coarse problem pins every interval
outside its window (1,729 pins on GPT-3 330M), and a copy per pin took 37 s of a 15 s step (a 60 s solve: 67 s)."""
from __future__ import annotations

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Memory, Pin
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Latency
from placement_dsl.problem import Problem


def chain(n: int) -> Graph:
    return Graph([Op(name=f"v{i}", work=1.0, out_bytes=1.0) for i in range(n)],
                 [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])


def test_a_run_of_pins_copies_the_graph_once(monkeypatch):
    g, c = chain(200), Cluster.accelerators(2)
    copies = []
    real = Graph.replace
    monkeypatch.setattr(Graph, "replace", lambda self, **kw: copies.append(1) or real(self, **kw))
    pins = [Pin(f"v{i}", c.names[i % 2]) for i in range(150)]
    p = Problem(g, c, Latency(), [Memory(), *pins, Pin("v0", "acc0")])
    assert len(copies) == 1
    assert p.graph.pinned == {**{i: c.names[i % 2] for i in range(150)}, 0: "acc0"}


def test_pins_folded_at_once_are_checked_as_before():
    g, c = chain(4), Cluster.accelerators(2)
    with pytest.raises(Exception, match="conflicting pins"):
        Problem(g, c, Latency(), [Pin("v1", "acc0"), Pin("v1", "acc1")])
    with pytest.raises(Exception, match="unknown op"):
        Problem(g, c, Latency(), [Pin("v1", "acc0"), Pin("w", "acc1")])
