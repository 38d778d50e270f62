"""Sweeps: the grid, the store, resuming after ``kill -9``, crashed workers, Dask against the pool, reports.

The grid is tiny (two 8-op graphs, k in {2, 4}, slicegraph, levels simple and superblock, 30 s
per task) and every MIP in it solves to optimality well inside its limit, so that every run
gives the same numbers whatever the executor or the interruptions (the first tasks' limits also
hold the sweep's start: the fork server loads the kernels and the MIP stack, seconds on a busy machine).
"""
from __future__ import annotations

import io
import json
import math
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from placement_dsl.cli import main
from placement_dsl.cli.sweep import split_ints
from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.io import Workload, save_workload
from placement_dsl.sweep import (
    LocalExecutor,
    Store,
    Task,
    expand_testbed,
    missing,
    plan,
    run_sweep,
    summary,
    write_report,
)
from placement_dsl.sweep.driver import Progress
from placement_dsl.sweep.tasks import DELAY_ENV, TESTING_ENV
from placement_dsl.testing import random_graph

GRID = {"ks": [2, 4], "levels": ["simple", "superblock"], "methods": ["slicegraph"], "time_limit": 30.0}
CLI_GRID = ["--stages", "2,4", "--levels", "simple,superblock", "--methods", "slicegraph", "--time-limit", "30"]
VOLATILE = {"seconds", "results", "code_versions", "executors"}


@pytest.fixture(scope="module")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two small DAGs as native workload files (seeds whose superblock MIPs solve in a fraction of a second)."""
    folder = tmp_path_factory.mktemp("testbed")
    for seed in (2, 3):
        graph = random_graph(np.random.default_rng(seed), 8, density=0.3, name=f"tiny{seed}")
        save_workload(Workload(graph, Cluster.stages(2), "native", {}), folder / f"tiny{seed}.json")
    (folder / "LICENSE.txt").write_text("not a workload\n")
    return folder


def grid(testbed: Path) -> list[Task]:
    return plan(expand_testbed(str(testbed)), **GRID)


def comparable(value: Any) -> Any:
    """A summary without times, paths and versions, numbers to 6 significant digits."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    if isinstance(value, float) and math.isfinite(value) and value:
        return float(f"{value:.6g}")
    return value


@pytest.fixture(scope="module")
def pool_run(testbed: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The grid run without interruption on two local processes: its store and comparable summary."""
    path = tmp_path_factory.mktemp("pool") / "results.db"
    with Store(path) as store:
        outcome = run_sweep(grid(testbed), store, LocalExecutor(workers=2))
        s = summary(store)
    assert (outcome.ran, outcome.failed, outcome.retried) == (12, [], [])
    assert s["tasks_done"] == 12 and s["tasks_failed"] == 0
    statuses = {lv["status"] for inst in s["instances"] for lv in inst["levels"].values()}
    assert statuses == {"optimal"}, "a MIP hit its limit: the comparisons below need exact bounds"
    return path, comparable(s)


# ---------------------------------------------------------------------------- planning
def test_testbed_and_plan(testbed: Path) -> None:
    graphs = expand_testbed(str(testbed))
    assert [g for g, _ in graphs] == ["tiny2", "tiny3"]  # the licence is skipped
    assert expand_testbed(f"{testbed}/tiny*.json,zoo:regal-0")[-1] == ("regal-0", "zoo:regal-0")
    tasks = grid(testbed)
    assert len(tasks) == 12 and [t.k for t in tasks[:6]] == [2] * 6
    assert len({t.key for t in tasks}) == 12
    assert Task.from_dict(tasks[0].to_dict()) == tasks[0]


@pytest.mark.parametrize("call, words", [
    (lambda tb: expand_testbed(f"{tb}/nothing*.json"), "matches no file"),
    (lambda tb: expand_testbed(f"{tb}/missing.json"), "is not a file"),
    (lambda tb: plan([("a", "zoo:regal-0")], [2], ["simplest"], [], 1.0), "unknown level"),
    (lambda tb: plan([("a", "zoo:regal-0")], [2], [], ["test-exit"], 1.0), "unknown method"),
    (lambda tb: plan([("a", "zoo:regal-0")], [0], ["simple"], [], 1.0), "stages must be integers"),
    (lambda tb: split_ints("2,x", "--stages"), "--stages 2,4,8"),
])
def test_spec_errors_name_the_item_and_the_fix(testbed: Path, call: Any, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        call(testbed)


def test_store_keys_and_schema(tmp_path: Path, testbed: Path) -> None:
    tasks = grid(testbed)
    with Store(tmp_path / "r.db") as store:
        store.put(tasks[0], {"status": "done", "value": 1.0, "ub": math.inf}, 1, "local")
        store.put(tasks[1], {"status": "failed", "error": "boom"}, 2, "local")
        assert len(missing(tasks, store)) == 10 and len(missing(tasks, store, retry_failed=True)) == 11
        assert store.rows()[0]["ub"] is None  # non-finite numbers are stored as NULL
    (tmp_path / "junk.db").write_text("not sqlite at all, just text " * 100)
    with pytest.raises(SpecError, match="not a sweep results store"):
        Store(tmp_path / "junk.db")
    with pytest.raises(SpecError, match="does not exist"):
        Store(tmp_path / "absent.db", readonly=True)


def test_progress_line_has_an_eta() -> None:
    out = io.StringIO()
    bar = Progress(4, out)
    bar.step()
    bar.step(failed=True)
    bar.close()
    assert "sweep: 2/4 tasks (1 failed)" in out.getvalue() and "ETA" in out.getvalue()
    assert Progress(4, None).line().startswith("sweep: 0/4")


# ---------------------------------------------------------------------------- running
def _stored(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM results").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0


@pytest.fixture(scope="module")
def killed_driver(testbed: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, threading.Thread]]:
    """A ``placement-dsl sweep`` subprocess, killed with SIGKILL by a watcher thread once 3 tasks are stored.

    It starts before :func:`pool_run` (request it first) so that the two drivers load the
    package side by side, one core each.
    """
    db = tmp_path_factory.mktemp("killed") / "results.db"
    env = {**os.environ, TESTING_ENV: "1", DELAY_ENV: "0.3"}  # tasks slow enough to stop halfway
    cmd = [sys.executable, "-m", "placement_dsl.cli", "sweep", str(testbed), *CLI_GRID, "--results", str(db),
           "--workers", "2", "--quiet"]
    driver = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def watch() -> None:
        deadline = time.monotonic() + 180
        while _stored(db) < 3 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        driver.kill()  # SIGKILL: no clean-up in the driver
        driver.wait()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    yield db, watcher
    driver.kill()


def test_killed_driver_resumes_with_the_same_report(testbed: Path, killed_driver: tuple[Path, threading.Thread],
                                                    pool_run: tuple[Path, dict[str, Any]]) -> None:
    db, watcher = killed_driver
    watcher.join(200)
    stored = _stored(db)
    assert 3 <= stored < 12, f"the driver stored {stored} of 12 tasks before it was killed"
    with Store(db) as store:
        outcome = run_sweep(grid(testbed), store, LocalExecutor(workers=2))
        assert (outcome.stored_before, outcome.ran) == (stored, 12 - stored)
        assert comparable(summary(store)) == pool_run[1]
        assert run_sweep(grid(testbed), store, LocalExecutor(workers=2)).ran == 0  # nothing left


def test_crashing_task_is_retried_once_then_recorded_failed(testbed: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TESTING_ENV, "1")
    tasks = plan(expand_testbed(str(testbed / "tiny2.json")), [2], [],
                 ["test-exit", "test-segfault", "test-error", "slicegraph"], 2.0)
    with Store(tmp_path / "r.db") as store:
        outcome = run_sweep(tasks, store, LocalExecutor(workers=2))
        rows = {r["name"]: r for r in store.rows()}
        again = run_sweep(tasks, store, LocalExecutor(workers=2))
    crashed = sorted(t.key for t in tasks if t.name in ("test-exit", "test-segfault"))
    assert sorted(outcome.retried) == crashed and again.ran == 0
    assert rows["test-exit"]["status"] == "failed" and rows["test-exit"]["attempts"] == 2
    assert rows["test-exit"]["error"].count("exited with status 86") == 2
    assert rows["test-segfault"]["attempts"] == 2 and "SIGSEGV" in rows["test-segfault"]["error"]
    assert rows["test-error"]["attempts"] == 1 and "RuntimeError" in rows["test-error"]["error"]  # not retried
    assert rows["slicegraph"]["status"] == "done" and rows["slicegraph"]["value"] > 0


def test_dask_cluster_gives_the_pool_results(testbed: Path, pool_run: tuple[Path, dict[str, Any]],
                                             tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dask = pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    db = tmp_path / "results.db"
    # worker processes forked from the fork server the local pool already warmed (the package loaded once)
    config = {"distributed.scheduler.allowed-failures": 0, "distributed.scheduler.worker-saturation": 1.0,
              "distributed.worker.multiprocessing-method": "forkserver"}
    with dask.config.set(config), distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                                           dashboard_address=None) as cluster:
        code = main(["sweep", str(testbed), *CLI_GRID, "--results", str(db), "--scheduler",
                     cluster.scheduler_address, "--json", "--quiet"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["ran"] == 12 and out["executors"] == ["dask"]
    with Store(db, readonly=True) as store:
        assert comparable(summary(store)) == pool_run[1]


# ---------------------------------------------------------------------------- reports
def _strict(text: str) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


def test_sweep_report_json_and_files(pool_run: tuple[Path, dict[str, Any]], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "report"
    assert main(["sweep-report", str(pool_run[0]), "--out", str(out_dir), "--json"]) == 0
    payload = _strict(capsys.readouterr().out)
    assert (payload["tasks_done"], payload["tasks_failed"]) == (12, 0)
    rows = {(r["level"], r["k"]): r for r in payload["bounds"]}
    assert set(rows) == {(lv, k) for lv in ("simple", "superblock") for k in (2, 4)}
    assert all(r["count"] == 2 and 0 < r["geomean"] <= 1 for r in rows.values())
    assert all(rows[("superblock", k)]["geomean"] >= rows[("simple", k)]["geomean"] for k in (2, 4))
    assert all(r["geomean"] >= 1 for r in payload["orderings"])  # UB / simple LB
    csv_lines = (out_dir / "instances.csv").read_text().splitlines()
    assert len(csv_lines) == 5 and csv_lines[0].startswith("graph,family,n,m,k,best_ub")
    report = (out_dir / "report.md").read_text()
    assert "Archer Tables 1 and 3 form" in report and "| simple (Lemma 3.3) |" in report
    if any(name.endswith(".png") for name in payload["files"]):
        assert "![Running times" in report and (out_dir / "running_times.png").stat().st_size > 1000


def test_report_of_a_store_with_a_failure_and_a_weak_level(tmp_path: Path) -> None:
    task = {t.name: t for t in plan([("g", "zoo:regal-0")], [2], ["simple", "superblock", "exact"], [], 1.0)}
    base = {"status": "done", "ub": 5.0, "simple": 4.0, "n": 3, "m": 2, "family": "regal"}
    with Store(tmp_path / "r.db") as store:
        store.put(task["simple"], {**base, "value": 4.0, "detail": {"status": "optimal", "ub_by": "brkga"}}, 1, "local")
        store.put(task["superblock"], {**base, "value": 3.0, "detail": {"status": "time_limit"}}, 1, "local")
        store.put(task["exact"], {"status": "failed", "error": "worker crashed on every attempt"}, 2, "local")
        s, _ = write_report(store, tmp_path / "out")
    assert (s["tasks_done"], s["tasks_failed"]) == (2, 1)
    rows = [(r["level"], r["geomean"], r["count"], r["geomean_own"]) for r in s["bounds"]]
    # superblock's own bound (time-limited) is below simple's: the best available at its level is simple's
    assert rows == [("simple", 0.8, 1, 0.8), ("superblock", 0.8, 1, 0.6), ("exact", None, 0, None)]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Failed tasks" in report and "own bound / best upper bound" in report
    # a level row is named by the level (what --levels takes), never by the 'bottleneck' cost model's name
    labels = [line.split("|")[1].strip() for line in report.splitlines() if line.startswith("| ")]
    assert any(label.startswith("superblock") for label in labels)
    assert not any(label.startswith("bottleneck") for label in labels)
