"""A picture without ``--split`` draws a placement whatever the graph: where the exact DP refuses it (too many
ideals), a heuristic that always answers places it."""
from __future__ import annotations

import json

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
