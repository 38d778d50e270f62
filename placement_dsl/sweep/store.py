"""The results store of a sweep: one SQLite file, one row per task, written as each task finishes.

Why SQLite: it is in the standard library, one file holds a whole sweep, and every result is
its own transaction, so a driver killed with ``kill -9`` loses at most the task it was
writing, never the file. In WAL mode a report (or a test) reads while the sweep writes. The
primary key is the task's key (:attr:`Task.key`): a sweep started again asks the store which
keys it holds and runs only the others. Parquet would need pyarrow and one file per write
(files are immutable), and a killed writer can leave a truncated file.

Tables: ``results`` (a row per task: its status, attempts, value, upper bound, seconds, the
worker's record as JSON, the error of a failed task, the code version that ran it), ``runs``
(a row per start of a sweep: when, how, with which code) and ``claims`` (the tasks a running
driver has taken, with the time it last said it is alive: two drivers on one store share the
work, and the claims of a driver that died go stale and are taken over).

A store is checked when opened (SQLite's own consistency check, the tables' columns, every
row's types); damage is a :class:`~placement_dsl.errors.SpecError` naming the file and the row
and field, never a crash in the report.
"""
from __future__ import annotations

import json
import math
import os
import socket
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .tasks import KINDS, Task

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
CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, heartbeat REAL NOT NULL);
"""
COLUMNS = ("key", "graph", "source", "k", "kind", "name", "time_limit", "status", "attempts", "value", "ub",
           "simple", "seconds", "family", "n", "m", "error", "record", "code_version", "executor", "finished_at")
RUN_COLUMNS = ("id", "started_at", "finished_at", "executor", "code_version", "config")
TABLES = {"meta": ("key", "value"), "results": COLUMNS, "runs": RUN_COLUMNS}  # claims: made when missing
STALE = 60.0  # seconds without a heartbeat after which a driver's claims are taken over (drivers beat every 10 s)
# what each results column holds: (types, may be NULL, what to call it in an error)
_TEXT, _INT, _NUM = (str,), (int,), (int, float)
FIELDS: dict[str, tuple[tuple[type, ...], bool, str]] = {
    **dict.fromkeys(("key", "graph", "source", "kind", "name", "status", "record"), (_TEXT, False, "UTF-8 text")),
    **dict.fromkeys(("family", "error", "code_version", "executor"), (_TEXT, True, "UTF-8 text or NULL")),
    **dict.fromkeys(("k", "attempts"), (_INT, False, "an integer")),
    **dict.fromkeys(("n", "m"), (_INT, True, "an integer or NULL")),
    **dict.fromkeys(("time_limit", "finished_at"), (_NUM, False, "a number")),
    **dict.fromkeys(("value", "ub", "simple", "seconds"), (_NUM, True, "a number or NULL")),
}


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
        with self._reading("open"):
            self.db = sqlite3.connect(uri, uri=readonly, timeout=30.0, isolation_level=None)
            self.db.text_factory = _text  # a damaged text cell is reported by the row checks, not a decode error
        try:
            with self._reading("open"):
                self._open(readonly)
        except BaseException:
            self.db.close()
            raise

    def _open(self, readonly: bool) -> None:
        """Check the file, make the tables of a new store, check the schema and every row."""
        self._check_file()
        if not readonly:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a killed process loses no commit
            self.db.executescript(_SCHEMA)
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
        self._check_schema()
        self._checked_rows()

    @contextmanager
    def _reading(self, doing: str) -> Iterator[None]:
        """SQLite's errors while ``doing`` something with the file as one-line :class:`SpecError` naming it."""
        try:
            yield
        except (sqlite3.DatabaseError, UnicodeError) as err:
            why = " ".join(str(err).split())
            if doing == "open":
                raise SpecError(f"{str(self.path)!r} is not a sweep results store or is damaged ({why}); give the "
                                "--results file of a sweep, or a new file name") from None
            raise SpecError(f"{str(self.path)!r}: cannot {doing} the sweep results store ({why})") from None

    def _check_file(self) -> None:
        """SQLite's own check of the file's pages (a flipped byte in a page or header shows here)."""
        problems = [r[0] for r in self.db.execute("PRAGMA quick_check")]
        if problems != ["ok"]:
            raise SpecError(f"{str(self.path)!r} is a damaged SQLite file (quick_check: "
                            f"{' '.join(str(problems[0]).split())!s:.160}); give a new --results file")

    def _check_schema(self) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if row is None or row[0] != SCHEMA_VERSION:
            raise SpecError(f"{str(self.path)!r} has results schema {row and row[0]!r}, this version reads "
                            f"{SCHEMA_VERSION!r}; use a new --results file")
        for table, columns in TABLES.items():
            have = [r[1] for r in self.db.execute(f"PRAGMA table_info({table})")]
            lacking = [c for c in columns if c not in have]
            if lacking:
                what = f"table {table} lacks column(s) {lacking}" if have else f"no table {table}"
                raise SpecError(f"{str(self.path)!r} is not a sweep results store of schema {SCHEMA_VERSION!r}: "
                                f"{what}; use a new --results file")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._reading("write to"):
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
            db.execute("DELETE FROM claims WHERE key = ?", (task.key,))

    def start_run(self, executor: str, code_version: str, config: dict[str, Any]) -> int:
        """Record the start of a sweep run; returns its id for :meth:`finish_run`."""
        with self._transaction() as db:
            cur = db.execute("INSERT INTO runs (started_at, executor, code_version, config) VALUES (?, ?, ?, ?)",
                             (time.time(), executor, code_version, json.dumps(config)))
        return int(cur.lastrowid or 0)

    def finish_run(self, run_id: int) -> None:
        with self._transaction() as db:
            db.execute("UPDATE runs SET finished_at = ? WHERE id = ?", (time.time(), run_id))

    # ------------------------------------------------------------------------ claims
    def claim(self, key: str, owner: str, skip: tuple[str, ...] = (DONE, FAILED), stale: float = STALE) -> bool:
        """Take task ``key`` for driver ``owner`` (this process): ``False`` when its result (status in ``skip``) is
        stored or another driver holds it. A claim is held while its driver beats (:meth:`heartbeat`) within
        ``stale`` seconds and, on this host, while the driver's process lives."""
        marks = ", ".join("?" for _ in skip)
        with self._transaction() as db:
            if db.execute(f"SELECT 1 FROM results WHERE key = ? AND status IN ({marks})", (key, *skip)).fetchone():
                return False
            held = db.execute("SELECT owner, host, pid, heartbeat FROM claims WHERE key = ?", (key,)).fetchone()
            if held is not None and held[0] != owner and _alive(*held[1:], stale):
                return False
            db.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?)",
                       (key, owner, socket.gethostname(), os.getpid(), time.time()))
        return True

    def heartbeat(self, owner: str) -> None:
        """Say that driver ``owner`` is alive: its claims stay its own."""
        with self._transaction() as db:
            db.execute("UPDATE claims SET heartbeat = ? WHERE owner = ?", (time.time(), owner))

    def release(self, owner: str) -> None:
        """Drop driver ``owner``'s claims (its unfinished tasks become free for any driver)."""
        with self._transaction() as db:
            db.execute("DELETE FROM claims WHERE owner = ?", (owner,))

    def claimed(self, owner: str, stale: float = STALE) -> set[str]:
        """Keys that drivers other than ``owner`` hold."""
        with self._reading("read the claims of"):
            cur = self.db.execute("SELECT key, host, pid, heartbeat FROM claims WHERE owner != ?", (owner,))
            return {key for key, *held in cur if _alive(*held, stale)}

    # ------------------------------------------------------------------------ reading
    def keys(self, statuses: tuple[str, ...] = (DONE, FAILED)) -> set[str]:
        """Keys of the stored tasks with one of ``statuses``."""
        marks = ", ".join("?" for _ in statuses)
        with self._reading("read the results of"):
            return {r[0] for r in self.db.execute(f"SELECT key FROM results WHERE status IN ({marks})", statuses)}

    def count(self, status: str) -> int:
        with self._reading("read the results of"):
            return int(self.db.execute("SELECT COUNT(*) FROM results WHERE status = ?", (status,)).fetchone()[0])

    def rows(self) -> list[dict[str, Any]]:
        """Every stored task as a dict of :data:`COLUMNS` (``record`` parsed), in key order."""
        with self._reading("read the results of"):
            return self._checked_rows()

    def _checked_rows(self) -> list[dict[str, Any]]:
        cur = self.db.execute(f"SELECT rowid, {', '.join(COLUMNS)} FROM results ORDER BY k, graph, kind, name")
        out = []
        for rowid, *values in cur:
            row = dict(zip(COLUMNS, values))
            where = f"{str(self.path)!r}: results row {rowid}" + (f" (key {row['key']!r:.80})"
                                                                if isinstance(row["key"], str) else "")
            for column, (types, nullable, what) in FIELDS.items():
                value = row[column]
                if not (value is None and nullable) and (not isinstance(value, types) or isinstance(value, bool)
                                                         or not _utf8(value)):
                    raise _damaged(where, column, value, what)
            if row["status"] not in (DONE, FAILED):
                raise _damaged(where, "status", row["status"], f"{DONE!r} or {FAILED!r}")
            if row["kind"] not in KINDS:
                raise _damaged(where, "kind", row["kind"], " or ".join(map(repr, KINDS)))
            row["record"] = _record(where, row["record"])
            out.append(row)
        return out

    def runs(self) -> list[dict[str, Any]]:
        with self._reading("read the runs of"):
            cur = self.db.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs ORDER BY id")
            out = [dict(zip(RUN_COLUMNS, r)) for r in cur]
        for run in out:
            try:
                run["config"] = json.loads(run["config"])
            except (TypeError, ValueError):
                raise _damaged(f"{str(self.path)!r}: runs row {run['id']!r}", "config", run["config"],
                               "a JSON object") from None
        return out


def _text(data: bytes) -> str:
    """A TEXT cell as a string; bytes that are not UTF-8 stay as surrogates for :func:`_utf8` to catch."""
    return data.decode("utf-8", "surrogateescape")


def _utf8(value: Any) -> bool:
    """Whether ``value`` is not text, or text that was valid UTF-8 in the file."""
    if not isinstance(value, str):
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _damaged(where: str, column: str, value: Any, what: str) -> SpecError:
    return SpecError(f"{where}: field {column} is {value!r:.60}, expected {what}; the store is damaged: delete "
                     "the row (its task runs again) or use a new --results file")


def _record(where: str, text: str) -> dict[str, Any]:
    """A row's ``record``: a JSON object whose ``detail``, if any, is an object too."""
    try:
        record = json.loads(text)
    except ValueError:
        raise _damaged(where, "record", text, "a JSON object") from None
    if not isinstance(record, dict) or not isinstance(record.get("detail", {}), dict):
        raise _damaged(where, "record", text, "a JSON object (with an object as its detail)")
    return record


def _alive(host: Any, pid: Any, heartbeat: Any, stale: float) -> bool:
    """Whether a claim's driver still holds it: a heartbeat within ``stale`` seconds, and on this host a live
    process (a driver killed here frees its claims at once; elsewhere, once its heartbeat is stale)."""
    if not isinstance(heartbeat, (int, float)) or heartbeat < time.time() - stale:
        return False
    if host != socket.gethostname() or not isinstance(pid, int):
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, another user's
        return True
    return True


def _finite(value: Any) -> Any:
    """SQLite stores inf as a REAL but JSON cannot carry it: non-finite floats become NULL."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
