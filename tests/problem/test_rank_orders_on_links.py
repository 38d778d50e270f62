"""Interleaved 1F1B, ZB-H1 and ZBV on clusters with links: refused up front, by name, on every path.

Their stage times pay each transfer as the device's own and make no link a resource, so a linked or
hierarchical cluster would have every placement scored without its links' loads (every answer infinite, and
the command line reported it as an infeasible memory problem). The objectives that pay each tensor on the
links of its route (PipeDream's and GPipe's) answer the brute-force optimum on the same tiny clusters.
"""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl.brute import brute_force
from placement_dsl.cli import main
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.objectives import GPipe, Interleaved1F1B, PipeDream, ZeroBubbleH1, ZeroBubbleV
from placement_dsl.problem import Problem
from placement_dsl.zoo.training import with_backward

RANK_ORDERS = {"interleaved-1f1b": Interleaved1F1B, "zb-h1": ZeroBubbleH1, "zbv": ZeroBubbleV}


def linked() -> Cluster:
    """Two accelerators joined by one directed link each way (no servers)."""
    return Cluster([Device(name="a"), Device(name="b")],
                   [Link(src="a", dst="b", bandwidth=2.0), Link(src="b", dst="a", bandwidth=1.0)])


def servers() -> Cluster:
    """Two servers of two accelerators, fast links inside a server and slow ones between."""
    return Cluster.hierarchical(servers=2, per_server=2, intra=4.0, inter=1.0)


CLUSTERS = {"linked": linked, "hierarchical": servers}


def tiny(seed: int) -> Graph:
    """A training chain of three ops with random work, tensors and parameters, each op with its gradient."""
    rng = np.random.default_rng(seed)
    fw = [Op(name=f"v{i}", work=float(rng.integers(1, 6)), out_bytes=float(rng.integers(1, 4)),
             param_bytes=float(rng.integers(0, 3))) for i in range(3)]
    ops, edges = with_backward(fw, [("v0", "v1"), ("v1", "v2")])
    return Graph(ops, edges, name=f"chain{seed}")


@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("name", RANK_ORDERS)
@pytest.mark.parametrize("microbatches", [None, 4])
def test_problem_refuses_rank_orders_on_links_naming_objective_and_links(name, cluster, microbatches):
    c = CLUSTERS[cluster]()
    with pytest.raises(SpecError) as err:
        Problem(tiny(0), c, RANK_ORDERS[name](microbatches=microbatches))
    text = str(err.value)
    assert "\n" not in text and repr(name) in text and "links" in text and f"{c.links[0].src}->" in text
    assert "infeasible" not in text and "memory" not in text


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_a_heuristic_run_with_the_cost_model_alone_refuses_too(cluster):
    # heuristics.run takes a cost model, not a Problem: the same refusal, naming the method
    c = CLUSTERS[cluster]()
    with pytest.raises(SpecError, match=r"^local-search: objective 'zb-h1': .* cluster with links"):
        run("local-search", tiny(0), c, model=ZeroBubbleH1(microbatches=4).cost_model(), time_limit=5.0)


@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("objective", [PipeDream(), GPipe(), GPipe(microbatches=3)], ids=["pipedream", "gpipe",
                                                                                          "gpipe-m3"])
def test_the_objectives_that_pay_links_answer_the_brute_force_optimum_there(objective, cluster):
    # the refusal's advice holds: PipeDream's and GPipe's objectives are modelled on these clusters
    for seed in range(2):
        problem = Problem(tiny(seed), CLUSTERS[cluster](), objective)
        best = brute_force(problem)[0]
        result = run("local-search", problem.graph, problem.cluster, model=problem.cost_model(), time_limit=5.0)
        assert problem.is_valid(result.placement) and np.isfinite(best)
        assert result.objective == pytest.approx(problem.evaluate(result.placement).objective, rel=1e-9)
        assert result.objective >= best - 1e-9


def test_the_rank_orders_still_answer_without_links():
    # the refusal is the links', not the objective's: the same chain on two plain stages answers
    problem = Problem(tiny(0), Cluster.stages(2), ZeroBubbleH1(microbatches=4))
    best = brute_force(problem)[0]
    result = run("local-search", problem.graph, problem.cluster, model=problem.cost_model(), time_limit=5.0)
    assert np.isfinite(best) and np.isfinite(result.objective) and result.objective >= best - 1e-9


@pytest.mark.parametrize("command", ["solve", "evaluate"])
def test_command_line_refuses_with_exit_2_not_infeasible(command, tmp_path, capsys):
    split = tmp_path / "split.json"
    base = ["zoo:bert-base-layers", "--training", "--cpus", "0", "--servers", "2", "--per-server", "2",
            "--intra", "1e7", "--inter", "1e6", "--objective", "zbv", "--microbatches", "4"]
    if command == "evaluate":
        assert main(["solve", *base[:-4], "--objective", "pipedream", "--method", "greedy", "--out", str(split)]) == 0
        capsys.readouterr()
        argv = ["evaluate", *base, "--split", str(split)]
    else:
        argv = ["solve", *base, "--method", "local-search"]
    assert main(argv) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(err) == 1 and "'zbv'" in err[0] and "links" in err[0] and "infeasible" not in err[0]
