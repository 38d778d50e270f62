"""The command line: acceptance spellings, JSON fields, and clear errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement_dsl.cli import main

MODELS = Path(__file__).resolve().parents[1] / "models"


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv) + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_evaluate_expert_split_json(capsys, dnn_partitioning):
    workload = dnn_partitioning / "throughput-inputs/LayerGraphs/gnmt_inference.json"
    split = dnn_partitioning / "human-experts/gnmt_inference_expert.json"
    out = run_json(capsys, "evaluate", str(workload), "--split", str(split))
    assert out["valid"] is True
    assert out["objective"] == pytest.approx(46.21, abs=5e-3)


def test_evaluate_text_table(capsys, dnn_partitioning):
    workload = dnn_partitioning / "throughput-inputs/LayerGraphs/bert24_inference.json"
    split = dnn_partitioning / "human-experts/bert24_inference_expert.json"
    assert main(["evaluate", str(workload), "--split", str(split), "--objective", "gpipe"]) == 0
    text = capsys.readouterr().out
    assert "acc0" in text and "objective (gpipe): 20.08" in text


def test_convert_round_trip_keeps_objective(capsys, tmp_path, dnn_partitioning):
    workload = dnn_partitioning / "throughput-inputs/LayerGraphs/bert24_training.json"
    split = dnn_partitioning / "human-experts/bert24_training_expert.json"
    native = tmp_path / "bert.json"
    assert main(["convert", str(workload), str(native)]) == 0
    capsys.readouterr()
    a = run_json(capsys, "evaluate", str(workload), "--split", str(split))
    b = run_json(capsys, "evaluate", str(native), "--split", str(split))
    assert a["objective"] == pytest.approx(b["objective"], rel=1e-12)


def test_solve_heuristic_writes_split(capsys, tmp_path):
    out_file = tmp_path / "split.json"
    out = run_json(capsys, "solve", str(MODELS / "transformer-small.json"), "--method", "greedy",
                   "--out", str(out_file))
    for key in ("objective", "bound", "gap", "status", "method", "solver", "seconds"):
        assert key in out
    assert out["method"] == "greedy" and out["objective"] > 0
    again = run_json(capsys, "evaluate", str(MODELS / "transformer-small.json"), "--split", str(out_file))
    assert again["objective"] == pytest.approx(out["objective"], rel=1e-9)


def test_stages_override(capsys):
    out = run_json(capsys, "solve", "zoo:transformer-small", "--stages", "2", "--method", "one-device")
    assert out["objective"] > 0


@pytest.mark.parametrize("argv, needle", [
    (["evaluate", "/nonexistent/w.json", "--split", "x.json"], "cannot read"),
    (["solve", "zoo:no-such-model", "--method", "greedy"], "no-such-model"),
])
def test_errors_exit_2_with_message(capsys, argv, needle):
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_bad_split_names_the_node(capsys, tmp_path, dnn_partitioning):
    workload = dnn_partitioning / "throughput-inputs/LayerGraphs/bert24_inference.json"
    split = tmp_path / "bad.json"
    split.write_text(json.dumps({"fpgas": [{"nodes": [999999]}], "cpus": []}))
    assert main(["evaluate", str(workload), "--split", str(split)]) == 2
    assert "999999" in capsys.readouterr().err
