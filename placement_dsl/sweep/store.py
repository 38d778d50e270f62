"""The results store of a sweep: one SQLite file, one row per task, written as each task finishes.

Why SQLite: it is in the standard library, one file holds a whole sweep, and every result is
its own transaction, so a driver killed with ``kill -9`` loses at most the task it was
writing, never the file. In WAL mode a report (or a test) reads while the sweep writes. The
primary key is the task's key (:attr:`Task.key`): a sweep started again asks the store which
keys it holds and runs only the others. Parquet would need pyarrow and one file per write
(files are immutable), and a killed writer can leave a truncated file.

Tables: ``results`` (a row per task: its status, attempts, value, upper bound, seconds, the
worker's record as JSON, the error of a failed task, the code version that ran it) and
``runs`` (a row per start of a sweep: when, how, with which code).
"""
from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .tasks import Task

SCHEMA_VERSION = "1"
DONE, FAILED = "done", "failed"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY, graph TEXT NOT NULL, source TEXT NOT NULL, k INTEGER NOT NULL,
    kind TEXT NOT NULL, name TEXT NOT NULL, time_limit REAL NOT NULL,
    status TEXT NOT NULL, attempts INTEGER NOT NULL, value REAL, ub REAL, simple REAL, seconds REAL,
    family TEXT, n INTEGER, m INTEGER, error TEXT, record TEXT NOT NULL,
    code_version TEXT, executor TEXT, finished_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, started_at REAL NOT NULL, finished_at REAL,
    executor TEXT NOT NULL, code_version TEXT NOT NULL, config TEXT NOT NULL);
"""
COLUMNS = ("key", "graph", "source", "k", "kind", "name", "time_limit", "status", "attempts", "value", "ub",
           "simple", "seconds", "family", "n", "m", "error", "record", "code_version", "executor", "finished_at")


class Store:
    """A sweep's SQLite results file (created on first use).

    Parameters
    ----------
    path
        The file; its directory must exist.
    readonly
        Open an existing store for reading only (reports): a missing file is an error.
    """

    def __init__(self, path: str | Path, readonly: bool = False):
        self.path = Path(path)
        if readonly and not self.path.is_file():
            raise SpecError(f"results store {str(self.path)!r} does not exist; give the --results file of a sweep")
        if not readonly and not self.path.parent.is_dir():
            raise SpecError(f"results store {str(self.path)!r}: directory {str(self.path.parent)!r} does not exist; "
                            "create it first")
        uri = f"file:{self.path}?mode=ro" if readonly else str(self.path)
        try:
            self.db = sqlite3.connect(uri, uri=readonly, timeout=30.0, isolation_level=None)
            if not readonly:
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a killed process loses no commit
                self.db.executescript(_SCHEMA)
                self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            self._check_schema()
        except sqlite3.DatabaseError as err:
            raise SpecError(f"{str(self.path)!r} is not a sweep results store ({err}); give the --results file "
                            "of a sweep, or a new file name") from None

    def _check_schema(self) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None or row[0] != SCHEMA_VERSION:
            raise SpecError(f"{str(self.path)!r} has results schema {row and row[0]!r}, this version reads "
                            f"{SCHEMA_VERSION!r}; use a new --results file")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # ------------------------------------------------------------------------ writing
    def put(self, task: Task, record: dict[str, Any], attempts: int, executor: str) -> None:
        """Store the record of a finished (or finally failed) task, replacing an earlier row of its key."""
        row = {**task.to_dict(), "key": task.key, "status": record.get("status", FAILED), "attempts": attempts,
               "value": record.get("value"), "ub": record.get("ub"), "simple": record.get("simple"),
               "seconds": record.get("seconds"), "family": record.get("family"), "n": record.get("n"),
               "m": record.get("m"), "error": record.get("error"), "record": json.dumps(record, default=str),
               "code_version": record.get("code_version"), "executor": executor, "finished_at": time.time()}
        marks = ", ".join("?" for _ in COLUMNS)
        with self._transaction() as db:
            db.execute(f"INSERT OR REPLACE INTO results ({', '.join(COLUMNS)}) VALUES ({marks})",
                       [_finite(row[c]) for c in COLUMNS])

    def start_run(self, executor: str, code_version: str, config: dict[str, Any]) -> int:
        """Record the start of a sweep run; returns its id for :meth:`finish_run`."""
        with self._transaction() as db:
            cur = db.execute("INSERT INTO runs (started_at, executor, code_version, config) VALUES (?, ?, ?, ?)",
                             (time.time(), executor, code_version, json.dumps(config)))
        return int(cur.lastrowid or 0)

    def finish_run(self, run_id: int) -> None:
        with self._transaction() as db:
            db.execute("UPDATE runs SET finished_at = ? WHERE id = ?", (time.time(), run_id))

    # ------------------------------------------------------------------------ reading
    def keys(self, statuses: tuple[str, ...] = (DONE, FAILED)) -> set[str]:
        """Keys of the stored tasks with one of ``statuses``."""
        marks = ", ".join("?" for _ in statuses)
        return {r[0] for r in self.db.execute(f"SELECT key FROM results WHERE status IN ({marks})", statuses)}

    def count(self, status: str) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM results WHERE status = ?", (status,)).fetchone()[0])

    def rows(self) -> list[dict[str, Any]]:
        """Every stored task as a dict of :data:`COLUMNS` (``record`` parsed), in key order."""
        cur = self.db.execute(f"SELECT {', '.join(COLUMNS)} FROM results ORDER BY k, graph, kind, name")
        out = [dict(zip(COLUMNS, r)) for r in cur]
        for row in out:
            row["record"] = json.loads(row["record"])
        return out

    def runs(self) -> list[dict[str, Any]]:
        cur = self.db.execute("SELECT id, started_at, finished_at, executor, code_version, config FROM runs "
                              "ORDER BY id")
        return [{"id": i, "started_at": s, "finished_at": f, "executor": e, "code_version": v, "config": json.loads(c)}
                for i, s, f, e, v, c in cur]


def _finite(value: Any) -> Any:
    """SQLite stores inf as a REAL but JSON cannot carry it: non-finite floats become NULL."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
