"""The command line: acceptance spellings, JSON fields, and clear errors."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from placement_dsl import zoo
from placement_dsl.cli import build_parser, main
from placement_dsl.io import save_workload
from placement_dsl.testing import run_cli

MODELS = Path(__file__).resolve().parents[2] / "models"


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
    assert main(["evaluate", str(workload), "--split", str(split)]) == 0
    text = capsys.readouterr().out
    assert "acc0" in text and "objective (throughput): 20.08" in text
    training = dnn_partitioning / "throughput-inputs/LayerGraphs/bert24_training.json"
    split = dnn_partitioning / "human-experts/bert24_training_expert.json"
    assert main(["evaluate", str(training), "--split", str(split), "--objective", "gpipe"]) == 0
    assert "objective (gpipe): 49.40" in capsys.readouterr().out


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
    """--stages 2 gives two accelerators (the CPU kept), and the DP uses both of them."""
    out = run_json(capsys, "solve", "zoo:transformer-small", "--stages", "2", "--method", "dp")
    accelerators = [d for d in out["devices"] if d["kind"] != "cpu"]
    assert len(accelerators) == 2 and all(d["ops"] > 0 for d in accelerators)
    assert set(out["placement"].values()) >= {d["device"] for d in accelerators}


def test_stages_on_a_cluster_with_links_give_the_copies_its_port_bandwidth(capsys, tmp_path):
    """A MOIRAI-kind workload (devices joined by links of about 5.5 GB/s): ``--stages 4`` copies its first GPU at
    that port's bandwidth, so a throughput split uses the copies. At the devices' former default (one byte per
    millisecond) every cut cost hours and the whole graph sat on one device."""
    w = zoo.gpt3(layers=1, hidden=1024, heads=16, vocab=8192)
    port = max(lk.bandwidth for lk in w.cluster.links if lk.src == w.cluster.devices[0].name)
    assert w.cluster.devices[0].bandwidth == pytest.approx(port)
    path = tmp_path / "gpt3.json"
    save_workload(w, path)
    out = run_json(capsys, "solve", str(path), "--stages", "4", "--method", "slicegraph", "--objective",
                   "throughput", "--time-limit", "20")
    used = [d for d in out["devices"] if d["ops"] > 0]
    assert len(used) >= 2 and out["objective"] < 0.8 * sum(d["compute_ms"] for d in out["devices"])


@pytest.mark.parametrize("argv, needle", [
    (["evaluate", "/nonexistent/w.json", "--split", "x.json"], "cannot read"),
    (["solve", "zoo:no-such-model", "--method", "greedy"], "no-such-model"),
])
def test_errors_exit_2_with_message(capsys, argv, needle):
    assert main(argv) == 2
    assert needle in capsys.readouterr().err



def _tiny(tmp_path: Path) -> str:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"graph": {"ops": [{"name": n, "work": 1} for n in "abc"],
                                          "edges": [["a", "b"], ["b", "c"]]}}))
    return str(path)


@pytest.mark.parametrize("option, value, needle", [
    ("--stages", "1e9", "--stages must be a whole number, got '1e9'"),
    ("--stages", "2.5", "--stages must be a whole number, got '2.5'"),
    ("--stages", "100000", "--stages must be at most 4096, got '100000'"),
    ("--cpus", "10000000", "--cpus must be at most 4096"),
    ("--bandwidth", "inf", "--bandwidth must be a finite number, got 'inf'"),
    ("--bandwidth", "nan", "--bandwidth must be a finite number|--bandwidth must be > 0"),
    ("--memory", "1e300", "--memory must be at most 1e+18 (or inf)"),
    ("--time-limit", "inf", "--time-limit must be a finite number"),
    ("--time-limit", "-inf", "--time-limit must be a finite number, got '-inf'"),  # argparse took it for an option
    ("--time-limit", "-1e308", "--time-limit must be > 0, got '-1e308'"),
    ("--bandwidth", "-inf", "--bandwidth must be a finite number, got '-inf'"),
])
def test_cluster_options_refuse_non_integers_non_finite_and_absurd_values(capsys, tmp_path, option, value, needle):
    with pytest.raises(SystemExit) as exit_:  # argparse refuses the value itself
        main(["solve", _tiny(tmp_path), "--method", "ip", option, value])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.count("\n") == 1 and re.search(needle if "|" in needle else re.escape(needle), err)


def test_more_stages_than_ops_is_refused_before_solving(capsys, tmp_path):
    assert main(["solve", _tiny(tmp_path), "--method", "ip", "--stages", "4", "--time-limit", "20"]) == 2
    assert "--stages 4: the graph has only 3 ops" in capsys.readouterr().err
    assert main(["bounds", _tiny(tmp_path), "--levels", "simple", "--memory", "inf", "--stages", "3", "--json"]) == 0


def _dnn_file(tmp_path: Path, **changes) -> str:
    node = {"supportedOnFpga": 1, "isBackwardNode": 0, "size": 1.0}
    data = {"maxSizePerFPGA": 100.0, "maxFPGAs": 2, "maxCPUs": 1,
            "nodes": [{"id": 1, "cpuLatency": 1.0, "fpgaLatency": 0.5, **node},
                      {"id": 2, "cpuLatency": 1.0, "fpgaLatency": 0.5, **node}],
            "edges": [{"sourceId": 1, "destId": 2, "cost": 0.1}]}
    for key, value in changes.items():
        if key in data:
            data[key] = value
        else:
            data["nodes"][0][key] = value
    path = tmp_path / "dnn.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("argv", [["bounds", "--levels", "simple,superblock"], ["solve", "--method", "dp"],
                                  ["solve", "--method", "ip", "--time-limit", "5"]])
def test_costs_that_overflow_are_refused_at_load_naming_the_node(capsys, tmp_path, argv):
    path = _dnn_file(tmp_path, cpuLatency=1e308, fpgaLatency=1e308)
    assert main([argv[0], path, *argv[1:]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "dnn.json': node 1: cpuLatency: 1e+308 is beyond 1e+18" in err


@pytest.mark.parametrize("changes, needle", [
    ({"maxFPGAs": 10**9}, "maxFPGAs: 1000000000 is out of range"),
    ({"maxFPGAs": 2.7}, "maxFPGAs: 2.7 is not a whole number"),
    ({"isBackwardNode": "no"}, "node 1: isBackwardNode must be 0 or 1"),
])
def test_small_dnn_partitioning_files_that_would_blow_up_or_misread(capsys, tmp_path, changes, needle):
    assert main(["bounds", _dnn_file(tmp_path, **changes), "--levels", "simple"]) == 2
    assert needle in capsys.readouterr().err

def test_bad_split_names_the_node(capsys, tmp_path, dnn_partitioning):
    workload = dnn_partitioning / "throughput-inputs/LayerGraphs/bert24_inference.json"
    split = tmp_path / "bad.json"
    split.write_text(json.dumps({"fpgas": [{"nodes": [999999]}], "cpus": []}))
    assert main(["evaluate", str(workload), "--split", str(split)]) == 2
    assert "999999" in capsys.readouterr().err


# ---------------------------------------------------------------------------- robustness
def _reject_constant(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name}")


def strict_loads(text: str) -> dict:
    """``json.loads`` that refuses ``NaN``/``Infinity`` (what ``python -m json.tool`` accepts)."""
    return json.loads(text, parse_constant=_reject_constant)


def write_native(path: Path, ops: list[dict], edges: list[list[str]], memory: float = 100.0) -> Path:
    """A native workload file of ``ops`` on two accelerators of ``memory`` bytes each."""
    data = {"format": "placement_dsl.workload", "version": 1,
            "graph": {"format": "placement_dsl.graph", "version": 1, "name": "g", "ops": ops, "edges": edges},
            "cluster": {"devices": [{"name": "a0", "memory": memory}, {"name": "a1", "memory": memory}]}}
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("method", ["slicegraph", "random", "brkga", "mla"])
def test_solve_json_is_strict_for_array_infos(capsys, method):
    code, out, err = run_cli(capsys, "solve", "zoo:transformer-small", "--method", method, "--json")
    assert code == 0, err
    payload = strict_loads(out)
    assert isinstance(payload["info"]["order"], list) and payload["objective"] > 0


def test_closed_stdout_exits_quietly(tmp_path):
    split = tmp_path / "split.json"
    assert main(["solve", "zoo:transformer-small", "--method", "one-device", "--out", str(split)]) == 0
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone away before anything is written
    proc = subprocess.run([sys.executable, "-m", "placement_dsl.cli", "evaluate", "zoo:transformer-small",
                           "--split", str(split), "--json"], stdout=write_end, stderr=subprocess.PIPE,
                          text=True, timeout=120, check=False)
    os.close(write_end)
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr
    assert proc.returncode in (0, 141)


@pytest.mark.parametrize("content, needle", [
    ('{"a": 1}', "--format"),
    (None, "cannot read"),
    ("", "empty"),
    ("{not json", "not valid JSON"),
])
def test_bad_workload_file_is_one_line_error(capsys, tmp_path, content, needle):
    path = tmp_path / "w.json"
    if content is not None:
        path.write_text(content)
    code, out, err = run_cli(capsys, "solve", str(path), "--method", "greedy")
    assert code == 2 and out == ""
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and needle in err


def test_missing_keys_say_which_keys_each_format_expects(capsys, tmp_path):
    path = tmp_path / "w.json"
    path.write_text('{"a": 1}')
    code, _, err = run_cli(capsys, "evaluate", str(path), "--split", str(path))
    assert code == 2 and "'graph'" in err and "'nodes'" in err and "--format" in err


@pytest.mark.parametrize("method", ["greedy", "dp", "slicegraph", "ip"])
def test_memory_infeasible_names_the_op_and_exits_3(capsys, tmp_path, method):
    path = write_native(tmp_path / "w.json", [{"name": "big", "work": 1, "param_bytes": 500},
                                              {"name": "small", "work": 2, "param_bytes": 1}], [["big", "small"]])
    code, out, err = run_cli(capsys, "solve", str(path), "--method", method, "--json")
    assert code == 3 and out == ""
    assert "'big'" in err and "500" in err and "100" in err and "Traceback" not in err


def test_help_documents_exit_codes(capsys):
    code, out, _ = run_cli(capsys, "--help")
    assert code == 0 and "3" in out and "infeasible" in out and "70" in out


def test_the_congestion_help_names_the_cost_model_s_default(capsys):
    """Latency and makespan are one objective scored under one default congestion; the help said latency's was
    'none' while the cost model priced a latency under 'port'."""
    from placement_dsl.evaluate import CostModel

    code, out, _ = run_cli(capsys, "solve", "--help")
    text = " ".join(out.split())
    defaults = re.findall(r"\((\w+), the (?:\w+'s )?default", text[text.index("--congestion {"):])
    assert code == 0 and defaults == [CostModel.named("latency").congestion.value] == \
        [CostModel.named("makespan").congestion.value]


@pytest.mark.parametrize("method", ["dp", "slicegraph", "greedy"])
def test_evaluations_on_a_method_without_them_is_a_note(capsys, method):
    code, out, err = run_cli(capsys, "solve", "zoo:transformer-small", "--method", method,
                             "--evaluations", "200", "--json")
    assert code == 0 and strict_loads(out)["method"] == method
    note = [line for line in err.splitlines() if "--evaluations" in line]
    assert len(note) == 1 and "brkga" in note[0] and method not in note[0].split("taken by")[-1].split(", ")


def test_mip_options_on_a_heuristic_are_a_note(capsys):
    code, out, err = run_cli(capsys, "solve", "zoo:transformer-small", "--method", "greedy", "--solver", "scip",
                             "--time-limit", "5", "--json")
    assert code == 0 and strict_loads(out)["method"] == "greedy"
    assert "--solver" in err and "ip" in err
    assert "--time-limit" not in err  # every heuristic takes its time limit


def test_time_limit_reaches_a_heuristic_that_searches(capsys):
    code, out, _ = run_cli(capsys, "solve", "zoo:transformer-small", "--method", "random", "--evaluations",
                           "100000", "--time-limit", "0.5", "--json")
    payload = strict_loads(out)
    assert code == 0 and payload["info"]["stopped"] == "time limit" and payload["status"] == "time_limit"
    assert payload["evaluations"] < 100000 and payload["valid"]


def test_training_objective_on_forward_graph_suggests_training(capsys, shared_data):
    profile = shared_data / "pipedream-profiles" / "alexnet.txt"
    for objective in ("gpipe", "pipedream"):
        code, out, err = run_cli(capsys, "solve", str(profile), "--method", "dp", "--objective", objective)
        assert code == 2 and "--training" in err and out == ""
    code, out, err = run_cli(capsys, "solve", str(profile), "--method", "dp", "--objective", "gpipe",
                             "--training", "--json")
    assert code == 0, err
    payload = strict_loads(out)
    assert any(op.endswith("~bw") for op in payload["placement"])


def test_cluster_options_set_memory_bandwidth_and_cpus(capsys, shared_data):
    profile = shared_data / "pipedream-profiles" / "alexnet.txt"
    code, out, err = run_cli(capsys, "solve", str(profile), "--method", "greedy", "--memory", "8e9",
                             "--bandwidth", "1e6", "--cpus", "1", "--stages", "2", "--json")
    assert code == 0, err
    rows = strict_loads(out)["devices"]
    assert [r["kind"] for r in rows] == ["accelerator", "accelerator", "cpu"]
    assert rows[0]["memory_capacity_bytes"] == 8e9


@pytest.mark.parametrize("method", ["dp", "ip"])
def test_solve_json_has_placement_and_device_rows(capsys, method):
    code, out, err = run_cli(capsys, "solve", "zoo:transformer-small", "--method", method, "--time-limit", "30",
                             "--json")
    assert code == 0, err
    payload = strict_loads(out)
    for key in ("objective", "bound", "gap", "status", "seconds", "placement", "devices"):
        assert key in payload
    assert len(payload["placement"]) == 50 and set(payload["placement"].values()) <= {"acc0", "acc1", "acc2", "cpu0"}
    row = payload["devices"][0]
    for key in ("device", "ops", "compute_ms", "in_ms", "out_ms", "memory_bytes", "memory_capacity_bytes",
                "memory_percent", "load_ms"):
        assert key in row
    assert sum(r["ops"] for r in payload["devices"]) == 50


def test_evaluate_json_has_device_rows(capsys, tmp_path):
    split = tmp_path / "split.json"
    assert main(["solve", "zoo:transformer-small", "--method", "dp", "--out", str(split)]) == 0
    capsys.readouterr()
    code, out, _ = run_cli(capsys, "evaluate", "zoo:transformer-small", "--split", str(split), "--json")
    rows = strict_loads(out)["devices"]
    assert code == 0 and rows[0]["memory_capacity_bytes"] == 16e9 and rows[-1]["memory_capacity_bytes"] is None
    assert 0 < rows[0]["memory_percent"] < 100 and rows[0]["memory_bytes"] > 0


def test_solve_text_has_units_memory_and_stage_ranges(capsys):
    code, out, _ = run_cli(capsys, "solve", "zoo:transformer-small", "--method", "dp")
    assert code == 0
    assert "ms" in out and "bytes" in out and " / 16 GB (" in out and "(0%)" not in out
    stages = [line for line in out.splitlines() if ".." in line and "ops" in line]
    assert len(stages) >= 2


def _actions(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from ((f"{name} {a.dest}", a) for a in sub._actions)
        else:
            yield parser.prog + " " + action.dest, action


def test_every_option_of_every_subcommand_has_help():
    missing = [name for name, action in _actions(build_parser()) if not (action.help or "").strip()]
    assert missing == []


def test_cold_kernel_cache_is_detected(tmp_path):
    code = "from placement_dsl.cli import kernels_cold; print(kernels_cold('dp'), kernels_cold('one-device'))"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert proc.stdout.split() == ["True", "False"], proc.stderr


def test_cold_kernel_note_goes_to_stderr_only(capsys, monkeypatch):
    from placement_dsl.cli import options

    monkeypatch.setattr(options, "kernels_cold", lambda method: True)
    code, out, err = run_cli(capsys, "solve", "zoo:transformer-small", "--method", "dp", "--json")
    assert code == 0 and strict_loads(out)["method"] == "dp"
    assert "compiling kernels once; later runs are fast" in err


def test_warm_kernel_cache_is_silent(capsys):
    from placement_dsl.cli import kernels_cold

    assert main(["solve", "zoo:transformer-small", "--method", "dp"]) == 0
    assert kernels_cold("dp") is False and "compiling" not in capsys.readouterr().err


def test_unexpected_exception_is_one_line_exit_70_and_debug_reraises(capsys, monkeypatch):
    from placement_dsl.cli import parser

    def boom(args):
        raise RuntimeError("boom")

    monkeypatch.setattr(parser, "cmd_zoo", boom)
    code, _, err = run_cli(capsys, "zoo")
    assert code == 70 and err.strip() == "internal error: RuntimeError: boom"
    with pytest.raises(RuntimeError, match="boom"):
        main(["zoo", "--debug"])


BAD_OPS = {
    "cyclic": ([{"name": "a", "work": 1}, {"name": "b", "work": 1}], [["a", "b"], ["b", "a"]]),
    "dangling": ([{"name": "a", "work": 1}], [["a", "zz"]]),
    "negative": ([{"name": "a", "work": -1}, {"name": "b", "work": 1}], [["a", "b"]]),
    "nan": ([{"name": "a", "work": float("nan")}, {"name": "b", "work": 1}], [["a", "b"]]),
    "infeasible": ([{"name": "a", "work": 1, "param_bytes": 500}], []),
}


@pytest.mark.parametrize("case", [
    *[("file", name) for name in BAD_OPS],
    ("text", '{"a": 1}'), ("text", '{"graph": [1]}'), ("text", '{"nodes": "x"}'), ("text", "[]"),
    ("argv", ("solve", "zoo:transformer-small", "--method", "ip", "--solver", "no-such-solver")),
    ("argv", ("solve", "zoo:transformer-small", "--method", "no-such-method")),
    ("argv", ("solve", "zoo:transformer-small", "--method", "dp", "--objective", "no-such-objective")),
    ("argv", ("solve", "/nonexistent/w.json", "--method", "dp")),
    ("argv", ("bounds", "/nonexistent/w.json")),
    ("argv", ("evaluate", "zoo:transformer-small", "--split", "/nonexistent/s.json")),
    ("argv", ("convert", "/nonexistent/w.json", "/nonexistent/out.json")),
])
def test_bad_inputs_never_end_in_a_traceback(capsys, tmp_path, case):
    kind, value = case
    if kind == "file":
        ops, edges = BAD_OPS[value]
        argv = ("solve", str(write_native(tmp_path / f"{value}.json", ops, edges)), "--method", "dp")
    elif kind == "text":
        (tmp_path / "w.json").write_text(value)
        argv = ("solve", str(tmp_path / "w.json"), "--method", "greedy")
    else:
        argv = value
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code in (2, 3) and "Traceback" not in err
    assert out == "" or strict_loads(out)
    lines = err.strip().splitlines()
    prog = build_parser().prog
    assert len(lines) == 1 and (lines[0].startswith("error:") or lines[0].startswith(prog) and ": error:" in lines[0])


@pytest.mark.parametrize("argv", [
    ("zoo",),
    ("bounds", "zoo:transformer-small", "--levels", "simple"),
    ("solve", "zoo:transformer-small", "--method", "pipedream"),
])
def test_every_json_output_is_strict(capsys, argv):
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code == 0, err
    strict_loads(out)


def test_seed_or_evaluations_with_a_mip_method_are_noted(capsys):
    from placement_dsl.cli import heuristic_options

    assert heuristic_options(argparse.Namespace(method="ip", evaluations=50, seed=3)) == {}
    err = capsys.readouterr().err
    assert "--seed does not apply to method ip" in err and "--evaluations does not apply to method ip" in err
    assert heuristic_options(argparse.Namespace(method="brkga", evaluations=50, seed=3)) == {"evaluations": 50,
                                                                                             "seed": 3}


def test_a_method_that_optimizes_another_objective_says_so(capsys):
    """Under --objective latency the max-load DP reports its split's latency and that it optimizes max-load."""
    code, out, _ = run_cli(capsys, "solve", "zoo:transformer-small", "--objective", "latency", "--method", "dp")
    assert code == 0 and "note: dp optimizes max_load, not latency; the latency of its split is" in out
    code, out, _ = run_cli(capsys, "solve", "zoo:transformer-small", "--objective", "latency", "--method", "dp",
                           "--json")
    payload = strict_loads(out)
    assert payload["info"]["optimizes"] == "max_load" and payload["bound"] is None


def test_zoo_lists_exactly_the_zoo(capsys):
    from placement_dsl import zoo

    code, out, _ = run_cli(capsys, "zoo")
    assert code == 0 and out.split() == list(zoo.names())
    assert strict_loads(run_cli(capsys, "zoo", "--json")[1])["models"] == list(zoo.names())


def test_convert_writes_the_same_graph_in_the_other_format(capsys, tmp_path):
    from placement_dsl.io import load_workload

    out = tmp_path / "small.json"
    code, text, _ = run_cli(capsys, "convert", "zoo:transformer-small", str(out), "--to", "dnn-partitioning")
    source, again = load_workload(MODELS / "transformer-small.json"), load_workload(out)
    assert code == 0 and f"wrote {out}" in text
    assert again.format == "dnn-partitioning" and again.graph.n >= source.graph.n - 1
    assert again.graph.work("accelerator").sum() == pytest.approx(source.graph.work("accelerator").sum())


def test_bounds_prints_each_level_and_the_certificate(capsys):
    code, text, _ = run_cli(capsys, "bounds", "zoo:transformer-small", "--stages", "2", "--levels", "simple,dp",
                            "--time-limit", "30")
    rows = {line.split()[0]: line for line in text.splitlines() if line.split()}
    assert code == 0 and "simple" in rows and "dp" in rows
    assert "best " in text and "gap" in rows["best"]
    payload = strict_loads(run_cli(capsys, "bounds", "zoo:transformer-small", "--stages", "2", "--levels",
                                   "simple,dp", "--time-limit", "30", "--json")[1])
    simple = next(r for r in payload["levels"] if r["level"] == "simple")
    assert 0 < simple["bound"] <= payload["upper_bound"] and payload["stages"] >= 2


def test_dp_time_limit_reports_a_time_limit_status_with_its_bound(capsys, tmp_path, monkeypatch):
    """The DP's time limit reaches it from --time-limit; stopped with the band open, the answer is its split
    and the bound the search proved, with status time_limit (not optimal, not a bare heuristic)."""
    from placement_dsl.heuristics import ideals
    from placement_dsl.io.workload import save_workload
    from placement_dsl.zoo import regal

    monkeypatch.setattr(ideals, "DP_SWEEP_IDEALS", 0)  # the descent: a lattice this small takes one exact sweep

    path = tmp_path / "regal.json"
    save_workload(regal(0, n=14), path)
    args = ["solve", str(path), "--stages", "3", "--method", "dp", "--objective", "bottleneck"]
    exact = run_json(capsys, *args)
    cut = run_json(capsys, *args, "--time-limit", "1e-9")
    assert exact["status"] == "optimal" and exact["gap"] == 0.0
    assert cut["status"] == "time_limit" and cut["exact_among"] is None and cut["info"]["stopped"] == "time limit"
    assert cut["bound"] <= exact["objective"] <= cut["objective"] and cut["gap"] > 0



def test_solve_json_says_the_wall_from_the_commands_start(capsys):
    """``seconds`` counts from the method's call: the answer of ``--method ip --time-limit 0.5`` said 0.11 s where
    the command ended 8 s after its start (the time limit's clock). ``wall_seconds`` counts from that start, the
    workload's reading and the answer's report included."""
    code, out, err = run_cli(capsys, "solve", "zoo:transformer-small", "--method", "dp", "--json")
    assert code == 0, err
    payload = strict_loads(out)
    assert payload["wall_seconds"] >= payload["seconds"] > 0
