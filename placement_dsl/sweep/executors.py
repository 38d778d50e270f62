"""Where tasks run: a local pool of processes (the default) or a Dask distributed cluster.

Both run :func:`placement_dsl.sweep.tasks.execute` in a worker process with one solver
thread, and report each task as an :class:`Outcome`: the worker's record, or ``crash`` when
the process died under the task (a segfault, ``os._exit``, a kill). The driver
(:mod:`placement_dsl.sweep.driver`) retries a crashed task once and stores the rest.

* :class:`LocalExecutor` gives every task a fresh process forked from a warm fork server (the
  package, numba's kernels and the MIP stack are loaded once, in the server), at most
  ``workers`` at a time. A process that dies loses only its task; one that outlives its
  watchdog (:func:`watchdog`) is killed and counts as crashed.
* :class:`DaskExecutor` submits each task to the scheduler at ``--scheduler ADDRESS``. A
  worker that dies under a task makes the scheduler give up on it (``KilledWorker``) after
  its own ``distributed.scheduler.allowed-failures`` retries (set it to 0 on the scheduler for
  exactly one retry in all). Dask rather than Ray: a pure-Python wheel of ~40 MB, a scheduler
  that is one command (``dask scheduler``) on any host, futures that map one-to-one onto
  tasks, and an in-process ``LocalCluster`` for tests; Ray brings a C++ runtime of a few
  hundred MB and a head node to start even for a test.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import uuid
from concurrent.futures import CancelledError
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

from ..errors import SpecError
from .tasks import Task, execute, hooks

PRELOAD = "placement_dsl.sweep.preload"
WATCHDOG_FACTOR, WATCHDOG_GRACE = 3.0, 300.0  # seconds: a task is killed after 3 x its limit + 5 minutes


def watchdog(time_limit: float) -> float:
    """Seconds after which a local task process is killed (its limit, MIP builds and heuristics included)."""
    return WATCHDOG_FACTOR * time_limit + WATCHDOG_GRACE


@dataclass
class Outcome:
    """A task's end in a worker: its ``record``, or ``crash`` (why the process died) without one."""

    task: Task
    attempt: int
    record: dict[str, Any] | None = None
    crash: str | None = None


class Executor(Protocol):
    """What the driver needs of an executor."""

    name: str
    slots: int

    def submit(self, task: Task, attempt: int) -> None: ...

    def wait(self, timeout: float) -> list[Outcome]: ...

    def pending(self) -> int: ...

    def close(self) -> None: ...


def payload(task: Task) -> dict[str, Any]:
    """What a worker receives: the task and the driver's test hooks."""
    return {**task.to_dict(), "hooks": hooks()}


def exit_reason(code: int | None) -> str:
    """Why a process ended, from its exit code (negative: the signal)."""
    if code is None:
        return "the worker process vanished"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the worker process was killed by {name}"
    return f"the worker process exited with status {code} before returning a result"


# ---------------------------------------------------------------------------- local processes
@dataclass
class _Job:
    task: Task
    attempt: int
    process: Any
    conn: Connection
    deadline: float


@dataclass
class LocalExecutor:
    """At most ``workers`` task processes at a time, each forked from a warm fork server.

    A task's time limit counts from when its worker slot was free (:func:`.tasks.execute`'s clock): the first
    ``workers`` tasks' from ``started`` (a :func:`time.monotonic` reading: the sweep's start, by default when the
    executor is made), so that reading the testbed, starting the fork server and its loads (13 s under a CPU-bound job
    beside) come out of them and a sweep of ``N`` tasks ends within ``ceil(N / workers)`` limits of its start."""

    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    name: str = "local"
    started: float | None = None

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise SpecError(f"--workers must be >= 1, got {self.workers}")
        self.slots = self.workers
        self._queue: list[tuple[Task, int]] = []
        self._running: list[_Job] = []
        self._free = [time.monotonic() if self.started is None else float(self.started)] * self.workers
        methods = multiprocessing.get_all_start_methods()
        self._ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
        if "forkserver" in methods:
            # "__main__" too: a task process then does not run the driver's script again (a console script has
            # no module spec, so multiprocessing would re-import it and whatever it imports, from disk, per task)
            self._ctx.set_forkserver_preload(["__main__", PRELOAD])

    def submit(self, task: Task, attempt: int) -> None:
        self._queue.append((task, attempt))

    def pending(self) -> int:
        return len(self._queue) + len(self._running)

    def _start(self) -> None:
        while self._queue and len(self._running) < self.workers:
            task, attempt = self._queue.pop(0)
            parent, child = self._ctx.Pipe(duplex=False)
            self._free.sort()
            proc = self._ctx.Process(target=_child, args=(child, {**payload(task), "clock": self._free.pop(0)}),
                                     daemon=True,
                                     name=f"sweep-{task.graph}-k{task.k}-{task.name}")
            proc.start()
            child.close()
            self._running.append(_Job(task, attempt, proc, parent, time.monotonic() + watchdog(task.time_limit)))

    def wait(self, timeout: float) -> list[Outcome]:
        """Start queued tasks, wait up to ``timeout`` seconds, and return the tasks that ended."""
        self._start()
        if not self._running:
            return []
        wait([j.conn for j in self._running] + [j.process.sentinel for j in self._running], timeout)
        out = [o for o in (self._check(j) for j in list(self._running)) if o is not None]
        self._start()
        return out

    def _check(self, job: _Job) -> Outcome | None:
        record, crash = None, None
        if job.conn.poll():
            try:
                record = job.conn.recv()
            except (EOFError, OSError):
                job.process.join(5)
                crash = exit_reason(job.process.exitcode)
        elif not job.process.is_alive():
            crash = exit_reason(job.process.exitcode)
        elif time.monotonic() > job.deadline:
            job.process.kill()
            crash = f"the task ran past its watchdog of {watchdog(job.task.time_limit):g} s and was killed"
        else:
            return None
        self._running.remove(job)
        self._free.append(time.monotonic())
        job.conn.close()
        job.process.join(5)
        return Outcome(job.task, job.attempt, record, crash)

    def close(self) -> None:
        """Kill the running task processes (their tasks stay missing in the store)."""
        for job in self._running:
            if job.process.is_alive():
                job.process.kill()
            job.process.join(5)
            job.conn.close()
        self._running.clear()
        self._queue.clear()


def _child(conn: Connection, task: dict[str, Any]) -> None:
    """A task process: run the task and send its record; die with the fork server (hence the driver)."""
    _die_with_parent()
    try:
        conn.send(execute(task))
    except (BrokenPipeError, EOFError):  # the driver is gone: nobody wants the result
        pass
    finally:
        conn.close()


def _die_with_parent() -> None:
    """On Linux, have the kernel kill this process when its parent dies (``kill -9`` of the driver)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl
        os._exit(1)


# ---------------------------------------------------------------------------- Dask
class DaskExecutor:
    """Tasks submitted to a Dask distributed scheduler; the driver stores what comes back.

    Parameters
    ----------
    address
        The scheduler's address (``tcp://host:8786``), or a ``distributed.Client`` to reuse.
    """

    name = "dask"

    def __init__(self, address: Any):
        try:
            from distributed import Client
        except ImportError:
            raise SpecError("--scheduler needs Dask: pip install 'placement_dsl[sweep]' (dask[distributed]), "
                            "or drop --scheduler to run a local process pool") from None
        if isinstance(address, Client):
            self.client, self._own = address, False
        else:
            try:
                self.client, self._own = Client(address, timeout="30s", set_as_default=False), True
            except (OSError, TimeoutError) as err:
                raise SpecError(f"--scheduler {address!r}: cannot reach the Dask scheduler ({err}); start one "
                                "with 'dask scheduler' and workers with 'dask worker ADDRESS --nthreads 1'") from None
        self.slots = max(1, sum(self.client.nthreads().values()))
        self._futures: dict[Any, tuple[Task, int]] = {}
        self._run = uuid.uuid4().hex[:8]

    def submit(self, task: Task, attempt: int) -> None:
        key = f"sweep-{self._run}-{task.graph}-k{task.k}-{task.kind}-{task.name}-a{attempt}"
        future = self.client.submit(execute, payload(task), key=key, pure=False, retries=0)
        self._futures[future] = (task, attempt)

    def pending(self) -> int:
        return len(self._futures)

    def wait(self, timeout: float) -> list[Outcome]:
        from distributed import wait as dask_wait

        if not self._futures:
            return []
        try:
            with self.client.as_current():
                dask_wait(list(self._futures), timeout=timeout, return_when="FIRST_COMPLETED")
        except (TimeoutError, CancelledError):  # nothing ended yet; or some ended cancelled (handled below)
            pass
        return [self._outcome(f) for f in list(self._futures) if f.status != "pending"]

    def _outcome(self, future: Any) -> Outcome:
        from distributed import KilledWorker

        task, attempt = self._futures.pop(future)
        if future.status == "cancelled":
            return Outcome(task, attempt, crash="the scheduler cancelled the task (a lost worker or scheduler)")
        if future.status == "finished":
            record = future.result()
            future.release()
            return Outcome(task, attempt, record)
        err = future.exception()
        future.release()
        if isinstance(err, KilledWorker):
            return Outcome(task, attempt, crash=f"the Dask worker died under the task ({err})")
        return Outcome(task, attempt, {"status": "failed", "error": f"{type(err).__name__}: {err}"})

    def close(self) -> None:
        for future in self._futures:
            future.cancel()
        self._futures.clear()
        if self._own:
            self.client.close()
