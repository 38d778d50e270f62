"""The command line of training pipelines (--servers/--per-server/--intra/--inter, --schedule,
--microbatches, --replicate), and the planners on the PipeDream profiles (shared data)."""
from __future__ import annotations

import json

import pytest

from placement_dsl.cli import main
from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.heuristics.pipedream_planner import pipedream_planner
from placement_dsl.heuristics.pipeline import pipeline
from placement_dsl.io import pipedream
from placement_dsl.simulate import analytic_time_per_sample, simulate

MODEL = "zoo:bert-base-layers"
SERVERS = ["--servers", "2", "--per-server", "2", "--intra", "100", "--inter", "10"]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_solve_on_servers_with_replicas_and_evaluate_it_back(capsys, tmp_path):
    out_file = tmp_path / "split.json"
    out = run_json(capsys, "solve", MODEL, "--training", "--method", "pipeline", *SERVERS, "--objective",
                   "pipedream", "--out", str(out_file))
    assert out["status"] == "optimal" and out["valid"] and len(out["devices"]) == 4
    again = run_json(capsys, "evaluate", MODEL, "--training", "--split", str(out_file), *SERVERS, "--objective",
                     "pipedream")
    assert again["objective"] == pytest.approx(out["objective"], rel=1e-9)


def test_schedule_sets_objective_and_memory(capsys):
    base = ["solve", MODEL, "--training", "--method", "pipeline", "--stages", "4", "--cpus", "0"]
    gp = run_json(capsys, *base, "--schedule", "gpipe", "--microbatches", "8")
    steady = run_json(capsys, *base, "--objective", "gpipe")
    assert gp["valid"] and gp["objective"] > steady["objective"]  # the fill and drain of 8 micro-batches
    one = run_json(capsys, *base, "--schedule", "1f1b", "--memory", "1e12")
    assert one["valid"] and one["status"] == "optimal"


@pytest.mark.parametrize("argv, needle", [
    (["--schedule", "gpipe"], "give microbatches"),
    (["--schedule", "1f1b", "--objective", "gpipe"], "--schedule 1f1b scores objective 'pipedream'"),
    (["--servers", "2"], "missing --per-server"),
    (["--microbatches", "4"], "needs --schedule"),
])
def test_training_flag_errors_are_one_line(capsys, argv, needle):
    assert main(["solve", MODEL, "--training", "--method", "pipeline", "--stages", "2", "--cpus", "0", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


def test_replicate_is_passed_on_or_said_not_to_apply(capsys):
    out = run_json(capsys, "solve", MODEL, "--training", "--method", "dp", "--stages", "3", "--replicate", "3",
                   "--objective", "pipedream")
    assert out["status"] == "optimal"
    argv = ["solve", MODEL, "--training", "--method", "slicegraph", "--stages", "3", "--objective", "pipedream"]
    plain, replicated = run_json(capsys, *argv), run_json(capsys, *argv, "--replicate", "2")
    assert replicated["valid"] and replicated["objective"] <= plain["objective"]  # SliceGraph chooses replicas too
    assert main(["solve", MODEL, "--training", "--method", "greedy", "--stages", "2", "--replicate", "2"]) == 0
    err = capsys.readouterr().err
    assert "--replicate does not apply to method greedy" in err and "slicegraph" in err


def test_replicate_with_a_mip_method_uses_the_replicated_ip(capsys):
    out = run_json(capsys, "solve", "zoo:transformer-small", "--method", "ip", "--stages", "2", "--replicate", "2",
                   "--time-limit", "30")
    assert out["valid"] and out["formulation"] == "throughput-replicated" and out["status"] == "optimal"


# ---------------------------------------------------------------------------- the PipeDream profiles
@pytest.mark.parametrize("name", ["alexnet", "vgg16", "resnet18"])
def test_ours_is_never_worse_than_pipedreams_planner_on_two_servers(shared_data, name):
    w = pipedream.load(shared_data / "pipedream-profiles" / f"{name}.txt", stages=4, training=True)
    model = CostModel.named("pipedream")
    for per in (2, 4, 8):
        c = Cluster.hierarchical(2, per, intra=12.5e6, inter=1.25e6, memory=16 * 2**30)
        theirs = pipedream_planner(w.graph, c, model=model, replication=True)
        ours = pipeline(w.graph, c, model=model, replication=True)
        assert ours.objective <= theirs.objective * (1 + 1e-9) and ours.bound == ours.objective
        assert ours.info["dp_value"] == pytest.approx(ours.objective, rel=1e-9)


def test_simulator_meets_the_analytic_objectives_on_a_profile(shared_data):
    w = pipedream.load(shared_data / "pipedream-profiles" / "resnet18.txt", stages=4, training=True)
    c = Cluster.hierarchical(2, 2, intra=12.5e6, inter=1.25e6, memory=16 * 2**30)
    p = pipeline(w.graph, c, model=CostModel.named("pipedream"), replication=True).placement
    for schedule in ("1f1b", "gpipe"):
        assert simulate(p, schedule, 256).time_per_sample == pytest.approx(
            analytic_time_per_sample(p, schedule), rel=0.01)
    for m in (1, 5, 32):
        assert analytic_time_per_sample(p, "gpipe", microbatches=m) == pytest.approx(
            simulate(p, "gpipe", m).time_per_sample, rel=1e-12)
    assert evaluate(p, CostModel.named("gpipe", microbatches=32)).objective == pytest.approx(
        simulate(p, "gpipe", 32).time_per_sample, rel=1e-12)


def test_evaluate_checks_replicas_against_replicate(capsys, tmp_path):
    out_file = tmp_path / "split.json"
    common = ["zoo:transformer-small", "--training", "--stages", "3", "--cpus", "0", "--bandwidth", "1e12"]
    run_json(capsys, "solve", *common, "--method", "dp", "--replicate", "3", "--objective", "pipedream",
             "--out", str(out_file))
    assert json.loads(out_file.read_text())["replicas"] == {"acc0": ["acc0", "acc1", "acc2"]}  # fast links: replicate
    assert run_json(capsys, "evaluate", *common, "--split", str(out_file), "--replicate", "3")["valid"]
    bad = run_json(capsys, "evaluate", *common, "--split", str(out_file), "--replicate", "2")
    assert not bad["valid"] and bad["violations"][-1]["check"] == "replicate"


def test_interleaved_objective_takes_microbatches_and_claims_no_optimum(capsys):
    code = main(["solve", "zoo:bert-base-layers-train", "--objective", "zb-h1", "--microbatches", "8", "--method", "dp",
                 "--time-limit", "10", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["valid"] and out["bound"] is None and out["status"] != "optimal"
    assert out["objective"] > max(d["load_ms"] for d in out["devices"])  # the bubble of 8 micro-batches
    assert main(["solve", "zoo:bert-base-layers-train", "--objective", "pipedream", "--microbatches", "8",
                 "--method", "dp"]) == 2  # elsewhere --microbatches still needs --schedule


@pytest.mark.parametrize("schedule", [[], ["--schedule", "1f1b"]])
def test_bounds_of_a_training_graph_stay_below_the_split_solve_finds(capsys, schedule):
    """A training graph's backward ops sit with their forward ones, so a DAG-ordered placement keeps every op on
    one device: bounds certified that class by default (bound = the one-device load, above a pipelined split
    solve finds and evaluate accepts); it certifies solve's class, with the schedule's memory."""
    base = [MODEL, "--training", "--stages", "3", "--cpus", "0", *schedule]
    solved = run_json(capsys, "solve", *base, "--method", "dp", "--time-limit", "20")
    bounds = run_json(capsys, "bounds", *base, "--time-limit", "20")
    assert solved["valid"] and bounds["bound"] <= solved["objective"] * (1 + 1e-9)
    assert bounds["bound_scope"] != "dag-ordered placements"


def test_microbatches_go_with_every_objective_that_scores_a_step_of_them(capsys, tmp_path):
    """--objective zbv --microbatches 4 was accepted and --objective gpipe --microbatches 4 refused ('needs
    --schedule gpipe|1f1b'), though GPipe's fill and drain is a step of m micro-batches: one rule for both."""
    base = ["zoo:transformer-small", "--training", "--stages", "2", "--cpus", "0"]
    out_file = tmp_path / "split.json"
    run_json(capsys, "solve", *base, "--method", "dp", "--objective", "pipedream", "--out", str(out_file))
    steady = run_json(capsys, "evaluate", *base, "--split", str(out_file), "--objective", "gpipe")
    filled = run_json(capsys, "evaluate", *base, "--split", str(out_file), "--objective", "gpipe", "--microbatches", "4")
    scheduled = run_json(capsys, "evaluate", *base, "--split", str(out_file), "--schedule", "gpipe", "--microbatches",
                         "4", "--memory", "1e15")
    assert filled["objective"] > steady["objective"]  # the fill and drain of 4 micro-batches
    assert filled["objective"] == pytest.approx(scheduled["objective"], rel=1e-9)
    assert main(["evaluate", *base, "--split", str(out_file), "--objective", "pipedream", "--microbatches", "4"]) == 2
    assert "needs --schedule gpipe|1f1b or --objective gpipe|" in capsys.readouterr().err
