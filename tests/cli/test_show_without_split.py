"""A picture without ``--split`` draws a placement whatever the graph: where the exact DP refuses it (too many
ideals), a heuristic that always answers places it."""
from __future__ import annotations

import json

import pytest

from placement_dsl.testing import run_cli


def wide_workload(tmp_path):
    wide = 24  # 24 ops side by side: 2^24 ideals, beyond the DP's limit
    ops = [{"name": "in", "work": 1, "out_bytes": 1}, *({"name": f"b{i}", "work": 1 + i % 3, "out_bytes": 1}
                                                        for i in range(wide)), {"name": "out", "work": 1}]
    edges = [["in", f"b{i}"] for i in range(wide)] + [[f"b{i}", "out"] for i in range(wide)]
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"format": "placement_dsl.workload", "version": 1,
                                "graph": {"name": "wide", "ops": ops, "edges": edges},
                                "cluster": {"devices": [{"name": f"d{k}"} for k in range(3)]}}))
    return path


def test_show_graph_draws_a_graph_the_dp_refuses(capsys, tmp_path):
    path = wide_workload(tmp_path)
    assert run_cli(capsys, "solve", str(path), "--method", "dp")[0] == 2  # the DP refuses this graph
    out = tmp_path / "g.dot"
    code, text, err = run_cli(capsys, "show", str(path), "--kind", "graph", "--out", str(out))
    assert code == 0 and out.exists() and f"wrote {out}" in text
    assert "slicegraph" in err and "dp refuses" in err


def test_show_splits_names_the_split_points_of_a_graph_the_dp_refuses(capsys, tmp_path):
    """The split points without ``--split`` come from the same placement a picture draws (one mechanism)."""
    path = wide_workload(tmp_path)
    code, text, err = run_cli(capsys, "show", str(path), "--kind", "splits", "--json")
    assert code == 0 and json.loads(text)["kind"] == "splits"
    assert "slicegraph" in err and "dp refuses" in err


def chain_workload(tmp_path, invocations=True):
    """Six unit ops in a chain, each passing one unit of data, on two devices: the throughput's best split halves it
    (a load of 3 + 1), the single sample's keeps it whole (6 against 3 + 1 + 1 + 3)."""
    ops = [{"name": f"o{i}", "work": 1, "out_bytes": 1} for i in range(6)]
    edges = [[f"o{i}", f"o{i + 1}"] for i in range(5)]
    path = tmp_path / "chain.json"
    path.write_text(json.dumps({"format": "placement_dsl.workload", "version": 1,
                                "graph": {"name": "chain", "ops": ops, "edges": edges},
                                "cluster": {"devices": [{"name": f"d{k}", "invocations": invocations}
                                                        for k in range(2)]}}))
    return path


@pytest.mark.parametrize("objective, invocations, method, stages", [
    ("throughput", True, "dp", 2), ("latency", True, "latency-best", 1), ("makespan", False, "list", 1)])
def test_show_without_split_draws_the_split_of_the_objective_asked_for(capsys, tmp_path, objective, invocations,
                                                                       method, stages):
    """The drawn split is searched for ``--objective`` (not the throughput's DP under every objective), and the note
    says which heuristic searched it for which objective."""
    path = chain_workload(tmp_path, invocations)
    code, text, err = run_cli(capsys, "show", str(path), "--kind", "splits", "--objective", objective, "--json")
    assert code == 0, err
    assert f"showing the {method} heuristic's placement for objective {objective!r}" in err
    assert len(json.loads(text)["stages"]) == stages
