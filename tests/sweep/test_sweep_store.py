"""The sweep's results store: damage is a one-line error naming the file, row and field; drivers on one store
share the work through claims; report files are written whole or the summary is printed."""
from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import placement_dsl.sweep as sweep_package
from placement_dsl import files
from placement_dsl.cli import main
from placement_dsl.cluster import Cluster
from placement_dsl.io import Workload, save_workload
from placement_dsl.sweep import Store, Task, expand_testbed, plan, run_sweep
from placement_dsl.sweep.executors import Outcome
from placement_dsl.sweep.store import COLUMNS
from placement_dsl.testing import random_graph

GRID = ["--stages", "2,4", "--levels", "simple", "--methods", "slicegraph", "--time-limit", "1"]


class InProcess:
    """An executor that runs nothing: each task "finishes" after ``seconds`` with a made-up record, and every
    task handed to it is logged in ``ran``."""

    name = "local"

    def __init__(self, slots: int = 1, seconds: float = 0.0, ran: list[str] | None = None):
        self.slots, self.seconds = slots, seconds
        self.ran = [] if ran is None else ran
        self._queue: list[tuple[Task, int]] = []

    def submit(self, task: Task, attempt: int) -> None:
        self.ran.append(task.key)
        self._queue.append((task, attempt))

    def pending(self) -> int:
        return len(self._queue)

    def wait(self, timeout: float) -> list[Outcome]:
        time.sleep(self.seconds)
        done, self._queue = self._queue, []
        return [Outcome(t, a, record(t)) for t, a in done]

    def close(self) -> None:
        self._queue.clear()


def record(task: Task) -> dict[str, Any]:
    return {"status": "done", "value": 1.0 + task.k, "ub": 2.0 + task.k, "simple": 1.0, "seconds": 0.01,
            "family": "random", "n": 8, "m": 9, "detail": {"status": "optimal"}}


@pytest.fixture(scope="module")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("testbed")
    for seed in (2, 3):
        graph = random_graph(np.random.default_rng(seed), 8, density=0.3, name=f"tiny{seed}")
        save_workload(Workload(graph, Cluster.stages(2), "native", {}), folder / f"tiny{seed}.json")
    return folder


def tasks_of(testbed: Path) -> list[Task]:
    return plan(expand_testbed(str(testbed)), [2, 4], ["simple"], ["slicegraph"], 1.0)


@pytest.fixture(scope="module")
def good_store(testbed: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete store of the grid (every task done), checkpointed into one file (no WAL beside it)."""
    path = tmp_path_factory.mktemp("good") / "good.db"
    with Store(path) as store:
        for task in tasks_of(testbed):
            store.put(task, record(task), 1, "local")
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.db.execute("PRAGMA journal_mode=DELETE")
    return path


@pytest.fixture(autouse=True)
def no_task_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    """``sweep`` through the CLI runs its (few) missing tasks in process."""
    monkeypatch.setattr(sweep_package, "LocalExecutor", lambda workers, started=None: InProcess())


# ---------------------------------------------------------------------------- damage
def damaged(good: Path, folder: Path, how: str) -> Path:
    """A copy of the good store with one kind of damage."""
    path = folder / f"{how}.db"
    shutil.copy(good, path)
    if how == "flipped-header":
        data = bytearray(path.read_bytes())
        data[20] ^= 0xFF  # the header's reserved bytes per page: every page's free space is then wrong
        path.write_bytes(bytes(data))
        return path
    if how == "truncated":
        path.write_bytes(path.read_bytes()[:5000])
        return path
    edits = {"schema-version": "UPDATE meta SET value = '0' WHERE key = 'schema'",
             "no-results-table": "DROP TABLE results",
             "column-missing": "ALTER TABLE results DROP COLUMN ub",
             "bad-json": "UPDATE results SET record = '{not json' WHERE rowid = 2",
             "record-not-object": "UPDATE results SET record = '[1, 2]' WHERE rowid = 2",
             "text-value": "UPDATE results SET value = 'abc' WHERE rowid = 2",
             "text-k": "UPDATE results SET k = 'two' WHERE rowid = 2",
             "unknown-status": "UPDATE results SET status = 'dnoe' WHERE rowid = 2",
             "not-utf8": "UPDATE results SET graph = CAST(X'74696e79f3' AS TEXT) WHERE rowid = 2"}
    with sqlite3.connect(path) as db:
        db.execute(edits[how])
    db.close()
    return path


KINDS = {"flipped-header": "damaged SQLite file", "truncated": "malformed",
         "schema-version": "schema '0'", "no-results-table": "no table results",
         "column-missing": r"lacks column\(s\) \['ub'\]", "bad-json": "row 2 .*field record is '{not json'",
         "record-not-object": r"row 2 .*field record is '\[1, 2\]'", "text-value": "row 2 .*field value is 'abc'",
         "text-k": "row 2 .*field k is 'two'", "unknown-status": "row 2 .*field status is 'dnoe'",
         "not-utf8": r"row 2 .*field graph is 'tiny\\udcf3', expected UTF-8 text"}


def one_error(capsys: pytest.CaptureFixture[str], path: Path) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and str(path) in err, err
    return err


@pytest.mark.parametrize("how", sorted(KINDS))
def test_a_damaged_store_is_one_line_naming_the_file_and_field(good_store, testbed, tmp_path, capsys, how):
    path = damaged(good_store, tmp_path, how)
    assert main(["sweep-report", str(path), "--out", str(tmp_path / "report"), "--json"]) == 2
    assert re.search(KINDS[how], one_error(capsys, path))
    if how != "no-results-table":  # a writable store gets its missing tables made
        assert main(["sweep", str(testbed), *GRID, "--results", str(path), "--json"]) == 2
        one_error(capsys, path)


SQL_VALUES = st.one_of(st.none(), st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=6),
                       st.binary(max_size=4))
DAMAGE = st.one_of(
    st.tuples(st.just("flip"), st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)), min_size=1,
                                        max_size=4)),
    st.tuples(st.just("cell"), st.tuples(st.sampled_from(COLUMNS), st.integers(1, 8), SQL_VALUES)),
    st.tuples(st.just("meta"), SQL_VALUES),
    st.tuples(st.just("truncate"), st.integers(0, 1 << 15)),
)


def apply(path: Path, damage: tuple[str, Any]) -> None:
    kind, what = damage
    if kind in ("flip", "truncate"):
        data = bytearray(path.read_bytes())
        if kind == "truncate":
            data = data[:what]
        for at, mask in what if kind == "flip" else []:
            data[at % len(data)] ^= mask
        path.write_bytes(bytes(data))
        return
    with sqlite3.connect(path) as db:
        edit = (("UPDATE meta SET value = ? WHERE key = 'schema'", (what,)) if kind == "meta" else
                (f"UPDATE results SET {what[0]} = ? WHERE rowid = ?", (what[2], what[1])))
        try:
            db.execute(*edit)
        except sqlite3.IntegrityError:  # NOT NULL or a duplicate key: SQLite keeps its own rules
            pass
    db.close()


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=DAMAGE, command=st.sampled_from(["sweep", "sweep-report"]))
def test_fuzzed_stores_exit_0_or_2_never_70(good_store, testbed, capsys, damage, command):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "store.db"
        shutil.copy(good_store, path)
        apply(path, damage)
        argv = ([command, str(testbed), *GRID, "--results", str(path)] if command == "sweep"
                else [command, str(path), "--out", str(Path(folder) / "report")])
        code = main([*argv, "--json"])
        captured = capsys.readouterr()
        assert code in (0, 2), captured.err
        if code == 2:
            assert captured.err.count("\n") == 1 and str(path) in captured.err, captured.err
        else:
            json.loads(captured.out)


# ---------------------------------------------------------------------------- drivers sharing a store
def test_two_drivers_on_one_store_run_each_task_once(testbed, tmp_path):
    tasks = tasks_of(testbed) + plan(expand_testbed(str(testbed)), [8, 16], ["simple", "superblock"], ["slicegraph"], 1.0)
    ran: list[list[str]] = [[], []]
    start = threading.Barrier(2)

    def drive(i: int) -> None:
        with Store(tmp_path / "r.db") as store:
            start.wait()
            run_sweep(tasks, store, InProcess(slots=1, seconds=0.02, ran=ran[i]))

    Store(tmp_path / "r.db").close()  # made once, before the drivers race
    drivers = [threading.Thread(target=drive, args=(i,)) for i in (0, 1)]
    for d in drivers:
        d.start()
    for d in drivers:
        d.join(60)
    assert sorted(ran[0] + ran[1]) == sorted(t.key for t in tasks)  # every task once between them
    assert ran[0] and ran[1]  # and both worked
    with Store(tmp_path / "r.db", readonly=True) as store:
        assert len(store.rows()) == len(tasks)
        assert store.db.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0  # released


def test_a_dead_drivers_claims_are_taken_over(testbed, tmp_path):
    tasks = tasks_of(testbed)
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = socket.gethostname()
    now = time.time()
    claims = [(tasks[0].key, "gone-here", host, dead.pid, now),  # this host, its process gone: free at once
              (tasks[1].key, "gone-there", "elsewhere", 1, now - 3600),  # another host, silent for an hour: free
              (tasks[2].key, "busy-there", "elsewhere", 1, now),  # another host, beating: held
              (tasks[3].key, "busy-here", host, os.getppid(), now)]  # this host, alive: held
    with Store(tmp_path / "r.db") as store:
        store.db.executemany("INSERT INTO claims VALUES (?, ?, ?, ?, ?)", claims)
        executor = InProcess()
        outcome = run_sweep(tasks, store, executor)
        assert sorted(outcome.elsewhere) == sorted([tasks[2].key, tasks[3].key])
        assert sorted(executor.ran) == sorted(t.key for t in tasks if t not in tasks[2:4])
        held = {r[0] for r in store.db.execute("SELECT owner FROM claims")}
    assert held == {"busy-there", "busy-here"}


# ---------------------------------------------------------------------------- report files
def test_sweep_report_on_a_full_disk_prints_the_summary(good_store, tmp_path, capsys, monkeypatch):
    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", fsync)
    out = tmp_path / "report"
    assert main(["sweep-report", str(good_store), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["tasks_done"] == 8
    assert captured.err.count("\n") == 1 and "No space left on device" in captured.err
    assert sorted(p.name for p in out.iterdir()) == []


def test_sweep_report_out_that_is_a_file_is_refused_first(good_store, tmp_path, capsys):
    (tmp_path / "taken").write_text("x")
    assert main(["sweep-report", str(good_store), "--out", str(tmp_path / "taken")]) == 2
    assert "it is not a directory" in one_error(capsys, tmp_path / "taken")
