"""The sweep's driver: what is missing from the store runs, each result is stored as it arrives.

A task whose worker process dies under it is run once more; a second death stores it as
``failed`` with both reasons. A task that raises is stored as ``failed`` at once (the error
would repeat). Killing the driver loses only the tasks in flight: started again on the same
store, :func:`run_sweep` runs exactly the tasks the store lacks.

Drivers share a store: each claims a task in the store (:meth:`Store.claim`) just before it
hands it to its executor, keeping no more tasks than the executor's slots in hand, so a second
``sweep`` on the same results file runs what the first has not taken, and no task runs twice.
A driver beats every :data:`HEARTBEAT` seconds; the claims of one that died are taken over
(at once on its host, after :data:`~placement_dsl.sweep.store.STALE` seconds elsewhere).
"""
from __future__ import annotations

import os
import socket
import sys
import time
import uuid
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..errors import PlacementError
from .executors import Executor, Outcome
from .store import DONE, FAILED, Store
from .tasks import Task, code_version

MAX_ATTEMPTS = 2  # a crashed task is retried once
POLL = 0.5  # seconds between progress refreshes while waiting
HEARTBEAT = 10.0  # seconds between a driver's heartbeats on its claims


@dataclass
class SweepOutcome:
    """What a call of :func:`run_sweep` did: tasks in the grid, already stored, run now, failed now, and
    left to another driver (claimed by it, or stored by it while this one ran)."""

    planned: int
    stored_before: int
    ran: int = 0
    failed: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)
    seconds: float = 0.0
    elsewhere: list[str] = field(default_factory=list)


def driver_id() -> str:
    """A name for this driver, unique among the drivers on one store: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def missing(tasks: list[Task], store: Store, retry_failed: bool = False) -> list[Task]:
    """The tasks ``store`` holds no result for (``retry_failed``: failed ones count as missing)."""
    have = store.keys((DONE,) if retry_failed else (DONE, FAILED))
    return [t for t in tasks if t.key not in have]


def run_sweep(tasks: list[Task], store: Store, executor: Executor, *, retry_failed: bool = False,
              progress: bool = False, config: dict[str, Any] | None = None) -> SweepOutcome:
    """Run the tasks the store lacks on ``executor``, storing each result as it finishes.

    Parameters
    ----------
    tasks
        The grid (:func:`placement_dsl.sweep.tasks.plan`).
    store
        Where results go; it decides what is missing.
    executor
        A :class:`~placement_dsl.sweep.executors.LocalExecutor` or ``DaskExecutor``; closed on return.
    retry_failed
        Run the tasks stored as failed again.
    progress
        Draw a progress line with an ETA on stderr.
    config
        What the ``runs`` table records about this start (command-line options).
    """
    todo = missing(tasks, store, retry_failed)
    outcome = SweepOutcome(len(tasks), len(tasks) - len(todo))
    owner, skip = driver_id(), ((DONE,) if retry_failed else (DONE, FAILED))
    run_id = store.start_run(executor.name, code_version(), config or {})
    bar = Progress(len(todo), sys.stderr if progress else None)
    crashes: dict[str, list[str]] = {}
    start = beat = time.monotonic()
    try:
        while _feed(todo, store, executor, owner, skip, outcome, bar):
            for done in executor.wait(POLL):
                if _settle(done, store, executor, crashes, outcome):
                    bar.step(failed=done.task.key in outcome.failed)
            if time.monotonic() - beat > HEARTBEAT:
                store.heartbeat(owner)
                beat = time.monotonic()
            bar.draw()
    finally:
        executor.close()
        bar.close()
        with suppress(PlacementError):  # a store that failed under the sweep keeps its error; the claims go stale
            store.release(owner)
    store.finish_run(run_id)
    outcome.seconds = time.monotonic() - start
    return outcome


def _feed(todo: list[Task], store: Store, executor: Executor, owner: str, skip: tuple[str, ...],
          outcome: SweepOutcome, bar: Progress) -> int:
    """Claim and submit tasks of ``todo`` (consumed) until the executor's slots are full; tasks another driver
    holds or has stored are left to it. Returns the tasks in hand."""
    while todo and executor.pending() < executor.slots:
        task = todo.pop(0)
        if store.claim(task.key, owner, skip):
            executor.submit(task, 1)
        else:
            outcome.elsewhere.append(task.key)
            bar.total -= 1
    return executor.pending()


def _settle(done: Outcome, store: Store, executor: Executor, crashes: dict[str, list[str]],
            outcome: SweepOutcome) -> bool:
    """Store a task's result, or resubmit it after its first crash; ``True`` when the task is settled."""
    task = done.task
    if done.record is None:
        reasons = crashes.setdefault(task.key, [])
        reasons.append(f"attempt {done.attempt}: {done.crash}")
        if done.attempt < MAX_ATTEMPTS:
            outcome.retried.append(task.key)
            executor.submit(task, done.attempt + 1)
            return False
        record: dict[str, Any] = {"status": FAILED, "error": "worker crashed on every attempt: " + "; ".join(reasons)}
    else:
        record = done.record
    store.put(task, record, done.attempt, executor.name)
    outcome.ran += 1
    if record.get("status") != DONE:
        outcome.failed.append(task.key)
    return True


class Progress:
    """``sweep: 12/48 tasks (1 failed), 3m05s elapsed, ETA 9m10s`` on one redrawn line.

    The ETA is the elapsed time per task settled in this run (the executor's parallelism
    included) times the tasks left. Nothing is drawn without a stream.
    """

    def __init__(self, total: int, stream: TextIO | None):
        self.total, self.stream = total, stream
        self.done = self.failed = 0
        self.start = time.monotonic()
        self.last = 0.0

    def step(self, failed: bool = False) -> None:
        self.done += 1
        self.failed += int(failed)
        self.draw(force=True)

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        left = self.total - self.done
        eta = "ETA -" if not self.done else f"ETA {_clock(elapsed / self.done * left)}"
        fail = f" ({self.failed} failed)" if self.failed else ""
        return f"sweep: {self.done}/{self.total} tasks{fail}, {_clock(elapsed)} elapsed, {eta}"

    def draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.stream is None or (not force and now - self.last < POLL):
            return
        self.last = now
        self.stream.write("\r\033[K" + self.line())
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None:
            self.stream.write("\r\033[K" + self.line() + "\n")
            self.stream.flush()


def _clock(seconds: float) -> str:
    """``1h02m``, ``3m05s`` or ``42s``."""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"
