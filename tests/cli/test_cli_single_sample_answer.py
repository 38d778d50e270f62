"""A single-sample schedule is an answer like a placement: ``solve --out`` writes it, ``evaluate --split`` reads it
back with its own times, and ``show --kind gantt`` draws the sample's schedule rather than a pipeline."""
from __future__ import annotations

import json

import pytest

from placement_dsl.cli import main
from placement_dsl.cluster import Cluster
from placement_dsl.graph import Graph, Op
from placement_dsl.io import Workload, save_workload

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(capsys, *argv):
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    return code, captured


def ok(capsys, *argv):
    code, captured = run(capsys, *argv)
    assert code == 0, captured.err
    return json.loads(captured.out)


@pytest.fixture
def sheet(shared_data):
    pytest.importorskip("xlrd")
    return shared_data / "moirai" / "example-1.xls"


@pytest.fixture
def native(tmp_path):
    """A diamond on two accelerators and a CPU: some placements move tensors and run a host op."""
    ops = [Op(name=n, work={"accelerator": w, "cpu": 3 * w}, out_bytes=1.0) for n, w in
           (("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 1.0))]
    g = Graph(ops, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")], name="diamond")
    path = tmp_path / "diamond.json"
    save_workload(Workload(g, Cluster.accelerators(2, cpus=1), "native", {}), path)
    return path


def test_evaluate_reads_back_the_schedule_solve_wrote_for_a_sheet(capsys, tmp_path, sheet):
    out = tmp_path / "schedule.json"
    solved = ok(capsys, "solve", str(sheet), "--objective", "latency", "--method", "list", "--out", str(out))
    scored = ok(capsys, "evaluate", str(sheet), "--objective", "latency", "--split", str(out))
    assert scored["valid"] and scored["objective"] == pytest.approx(solved["objective"])
    # its own times are scored, not a schedule made again for its assignment: delay every task by 5
    data = json.loads(out.read_text())
    data["start"] = {k: t + 5 for k, t in data["start"].items()}
    data["transfer_start"] = {k: t + 5 for k, t in data["transfer_start"].items()}
    late = tmp_path / "late.json"
    late.write_text(json.dumps(data))
    assert ok(capsys, "evaluate", str(sheet), "--objective", "latency", "--split", str(late))["objective"] == \
        pytest.approx(solved["objective"] + 5)


def test_a_schedule_file_that_misses_a_task_is_refused_by_name(capsys, tmp_path, sheet):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"assignment": {}, "start": {}}))
    code, captured = run(capsys, "evaluate", str(sheet), "--objective", "latency", "--split", str(bad))
    assert code == 2 and "assignment has no entry for task" in captured.err


def test_show_gantt_draws_the_sheets_schedule(capsys, tmp_path, sheet):
    out, picture = tmp_path / "schedule.json", tmp_path / "gantt.png"
    solved = ok(capsys, "solve", str(sheet), "--objective", "latency", "--method", "list", "--out", str(out))
    shown = ok(capsys, "show", str(sheet), "--objective", "latency", "--split", str(out), "--kind", "gantt",
               "--out", str(picture))
    assert shown["schedule"] == "single-sample" and shown["objective"] == "makespan"
    assert shown["makespan"] == pytest.approx(solved["objective"]) and shown["transfers"] > 0
    assert picture.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize("objective", ["latency", "makespan"])
def test_show_gantt_of_a_single_sample_objective_ends_at_its_objective(capsys, tmp_path, native, objective):
    split, picture = tmp_path / "split.json", tmp_path / "gantt.svg"
    solved = ok(capsys, "solve", str(native), "--objective", objective, "--method", "greedy", "--out", str(split))
    scored = ok(capsys, "evaluate", str(native), "--objective", objective, "--split", str(split))
    shown = ok(capsys, "show", str(native), "--objective", objective, "--split", str(split), "--kind", "gantt",
               "--out", str(picture))
    assert shown["schedule"] == "single-sample"
    assert shown["makespan"] == pytest.approx(scored["objective"]) == pytest.approx(solved["objective"])
    assert "<svg" in picture.read_text()


def test_show_gantt_of_a_pipeline_objective_still_simulates_the_pipeline(capsys, tmp_path, native):
    shown = ok(capsys, "show", str(native), "--objective", "throughput", "--kind", "gantt",
               "--out", str(tmp_path / "g.png"))
    assert shown["schedule"] == "pipeline" and shown["microbatches"] == 8


def test_the_ip_answers_makespan_as_latency_on_a_cluster_of_invocations(capsys, native):
    """Makespan is latency under MOIRAI's name: on a cluster without links (its accelerators run invocations) the
    command line asked the op-at-a-time schedule formulation for it, which refused the cluster ("use formulation
    'latency'", a choice the command line does not offer), where --objective latency answered."""
    found = {name: ok(capsys, "solve", str(native), "--objective", name, "--method", "ip", "--time-limit", "30")
             for name in ("latency", "makespan")}
    assert found["makespan"]["status"] == found["latency"]["status"] == "optimal"
    assert found["makespan"]["objective"] == pytest.approx(found["latency"]["objective"])


def test_makespan_takes_ip_noncontig_as_ip_and_says_why_exact_has_no_formulation(capsys, native):
    """The makespan problem places any op on any device, so --method ip-noncontig asks the problem --method ip solves
    (it was refused, "use --method ip", where latency took it); exact's DAG-ordered pipeline has no makespan
    formulation, and the refusal says so."""
    free = ok(capsys, "solve", str(native), "--objective", "makespan", "--method", "ip-noncontig", "--time-limit", "30")
    listed = ok(capsys, "solve", str(native), "--objective", "makespan", "--method", "list")
    assert free["status"] == "optimal" and free["valid"] and free["objective"] <= listed["objective"] + 1e-9
    code, captured = run(capsys, "solve", str(native), "--objective", "makespan", "--method", "exact")
    assert code == 2 and "DAG-ordered" in captured.err and len(captured.err.strip().splitlines()) == 1
