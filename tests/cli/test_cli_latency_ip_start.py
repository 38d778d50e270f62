"""``solve FILE --objective latency --method ip`` on a generated graph nobody tuned to: it starts from the best
latency heuristic, answers within its limit with a bound, and never answers worse than its start, even when the
solver's incumbent is worse than the start by the cost model (a start the solver was not given, or a model value
that is not tight)."""
from __future__ import annotations

import json
import time

import numpy as np
import pyomo.environ as pyo
import pytest

import placement_dsl.solve as solve_module
from placement_dsl import stopped
from placement_dsl.cli import main
from placement_dsl.graph import Graph
from placement_dsl.io import Workload, save_workload
from placement_dsl.placement import Placement
from placement_dsl.solvers import SolverOutcome, Status
from placement_dsl.zoo import default_cluster, transformer

LIMIT = 8.0


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A two-layer operator-level transformer on two accelerators whose memory binds and a CPU ten times slower."""
    g = transformer(layers=2, hidden=256, heads=4, seq_len=64, batch=2, granularity="operator").graph
    ops = [op.model_copy(update={"work": {"accelerator": op.work["accelerator"], "cpu": 10 * op.work["accelerator"]}})
           for op in g.ops]
    g = Graph(ops, [(g.names[u], g.names[v]) for u, v in zip(g.src, g.dst)], name="tiny-transformer")
    mem = np.asarray(g.param_bytes + g.activation_bytes, dtype=float)
    cluster = default_cluster(2, 1, memory=max(float(mem.sum()) / 1.5, 1.05 * float(mem.max())))
    path = tmp_path_factory.mktemp("latency") / "tiny.json"
    save_workload(Workload(g, cluster, "native", {}), path)
    return path


def solved(capsys, path, method):
    t0 = time.perf_counter()
    code = main(["solve", str(path), "--objective", "latency", "--method", method, "--time-limit", str(LIMIT),
                 "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out), time.perf_counter() - t0


def test_latency_ip_answers_no_worse_than_latency_best_within_its_limit(capsys, generated):
    ip, wall = solved(capsys, generated, "ip")
    best, _ = solved(capsys, generated, "latency-best")
    assert wall <= LIMIT + 5
    assert ip["valid"] and ip["objective"] <= best["objective"] * (1 + 1e-9)
    assert ip["objective"] <= ip["start_objective"] * (1 + 1e-9)
    assert ip["bound"] is not None and ip["bound"] <= ip["objective"] and ip["gap"] is not None


def test_latency_ip_answers_its_start_when_the_solver_returns_a_worse_incumbent(capsys, generated, monkeypatch):
    """The solver stands in for one whose incumbent at the limit runs every op on the CPU (worse than the start)."""
    compiled_models = []
    real_compile = solve_module.compile

    def compile_and_keep(*args, **kwargs):
        compiled = real_compile(*args, **kwargs)
        compiled_models.append(compiled)
        return compiled

    def worse_incumbent(model, solver, options, start=None):
        compiled = compiled_models[-1]
        p = compiled.problem
        worse = Placement(p.graph, p.cluster, np.full(p.graph.n, p.cluster.index["cpu0"]))  # valid, ten times slower
        for var, value in compiled.varmap.values(worse).items():
            var.set_value(value, skip_validation=True)
        objective = float(sum(pyo.value(o.expr) for o in model.component_data_objects(pyo.Objective, active=True)))
        return SolverOutcome(Status.TIME_LIMIT_FEASIBLE, objective, 0.0, True, solver)

    monkeypatch.setattr(solve_module, "compile", compile_and_keep)
    monkeypatch.setattr(solve_module, "solve_model", worse_incumbent)
    monkeypatch.setattr(stopped.Stop, "proves_start", lambda self: False)  # the floor proves this tiny start optimal
    ip, _ = solved(capsys, generated, "ip")
    assert compiled_models, "the model was not built: the test did not reach the solver"
    assert ip["valid"] and ip["objective"] == pytest.approx(ip["start_objective"])
    assert "worse than the start" in ip["message"]
