"""The single-sample bench's ``--sheets FOLDER``: every MOIRAI sheet there is a makespan input of its own."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_sheets_of_a_folder_are_inputs_named_after_their_files(tmp_path, shared_data, monkeypatch):
    pytest.importorskip("xlrd")
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.delitem(sys.modules, "common", raising=False)
    import bench_single_sample as bench

    shutil.copy(shared_data / "moirai" / "example-1.xls", tmp_path / "mine.xls")
    cases = bench.sheets(shared_data, tmp_path)
    assert [c.name for c in cases] == ["sheet:mine"] and cases[0].anchor == "—"
    p = cases[0].problem
    assert type(p.objective).__name__ == "Makespan" and p.graph.n > 0
    assert [c.name for c in bench.sheets(shared_data)][:1] == ["moirai:GoogLeNet"]


def test_a_makespan_inputs_best_heuristic_is_the_schedule_search(shared_data, monkeypatch):
    """Makespan is Latency's alias: the column asked the objective's type and ran latency-best (Tarnawski's
    invocation search) on MOIRAI's sheets instead of schedule-ls from CPOP or HEFT."""
    pytest.importorskip("xlrd")
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.delitem(sys.modules, "common", raising=False)
    import bench_single_sample as bench

    p = bench.sheets(shared_data)[-1].problem  # example-1
    found = bench.best_heuristic(p, 1.0)
    assert found["method"] in ("schedule-ls from cpop", "schedule-ls from list") and found["value"] > 0


def test_a_noisy_generated_input_is_the_same_graph_in_every_process():
    """The GPU kinds of a Table III cluster were a set, and the noise drew one factor per kind in the set's order,
    which the string hash seed changes: resnet-1000-s1@inter-server had 428.31 ms of work in one process and 428.38
    in another, so a before and an after run scored different graphs."""
    code = ("import bench_single_sample as b; c = [c for c in b.generated([500], [1], False) "
            "if c.name == 'resnet-500-s1@inter-server'][0]; "
            "print(repr(sum(sum(op.work.values()) for op in c.problem.graph.ops)))")
    root = str(BENCHMARKS.parent)
    found = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": os.pathsep.join([str(BENCHMARKS), root])}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=root)
        found.add(out.stdout.strip())
    assert len(found) == 1


def test_the_linked_family_is_latency_on_lines_of_links_whose_ends_are_two_hops_apart(monkeypatch):
    """``--linked``: every graph kind with and without a CPU per seed, on devices that run one op at a time."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.delitem(sys.modules, "common", raising=False)
    import bench_single_sample as bench

    from placement_dsl.evaluate import execution

    cases = bench.linked_cases([0, 1])
    assert len(cases) == 16 and len({c.name for c in cases}) == 16
    p = next(c for c in cases if c.name == "transformer-s1@3acc-line+cpu").problem
    assert type(p.objective).__name__ == "Latency" and execution(p.cluster) == "ops"
    assert len(p.cluster.route("g0", "g2")) == 2 and p.cluster.names[-1] == "c0"
    assert sorted(d.speed for d in p.cluster.devices[:3]) == [0.5, 1.0, 2.0]
