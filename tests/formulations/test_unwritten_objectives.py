"""Training objectives no IP writes: ``solve`` says so and names the methods that answer them (from the registry).

Before, ``solve(Problem(g, c, Interleaved1F1B(microbatches=4)))`` (formulation ``auto``) answered "formulation
'throughput': ... use formulation='auto' to pick the one written for it", although ``auto`` was used and no
formulation writes the objective.
"""
from __future__ import annotations

import pytest

from placement_dsl.cli import main
from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import methods_for, names
from placement_dsl.objectives import GPipe, Interleaved1F1B, PipeDream, ZeroBubbleH1, ZeroBubbleV
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.training_terms import TrainingMemory
from placement_dsl.zoo.training import with_backward


def chain() -> Graph:
    ops, edges = with_backward([Op(name=n, work=1.0, out_bytes=1.0, param_bytes=1.0) for n in "abc"],
                               [("a", "b"), ("b", "c")])
    return Graph(ops, edges, name="chain")


@pytest.mark.parametrize("objective", [Interleaved1F1B(microbatches=4), ZeroBubbleH1(microbatches=4),
                                       ZeroBubbleV(microbatches=4), ZeroBubbleV(), GPipe(microbatches=4)],
                         ids=["interleaved-1f1b", "zb-h1", "zbv", "zbv-steady", "gpipe-m4"])
@pytest.mark.parametrize("formulation", ["auto", "throughput"])
def test_solve_says_no_ip_writes_the_objective_and_names_the_methods(objective, formulation):
    problem = Problem(chain(), Cluster.stages(2), objective)
    with pytest.raises(SpecError) as err:
        solve(problem, formulation=formulation, time_limit=5.0)
    text = str(err.value)
    assert "\n" not in text and f"no IP writes objective {objective.names[0]!r}" in text
    if formulation == "auto":  # the named formulation's own reason comes first, then what answers the objective
        assert "formulation='auto'" not in text
    listed = text.split("the methods that answer it: ")[1].split(" (")[0].split(", ")
    assert set(listed) <= set(names()) and set(listed) >= set(methods_for(objective.names[0]))


def test_a_written_objective_keeps_the_reason_of_the_term_the_ip_refuses():
    # PipeDream is written; a cap of 1F1B's in-flight count by micro-batches is the term no rule writes
    problem = Problem(chain(), Cluster.stages(2), PipeDream(), [TrainingMemory("1f1b", microbatches=1)])
    with pytest.raises(SpecError) as err:
        solve(problem, time_limit=5.0)
    assert "no IP writes" not in str(err.value)


def test_command_line_ip_on_zero_bubble_names_the_methods(capsys):
    assert main(["solve", "zoo:bert-base-layers", "--training", "--stages", "4", "--objective", "zb-h1",
                 "--microbatches", "4", "--method", "ip"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(err) == 1 and "no IP writes objective 'zb-h1'" in err[0] and "local-search" in err[0]
