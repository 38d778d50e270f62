"""Wall-clock budgets: a time limit is the budget of a whole call, from its start.

A :class:`Deadline` is made once where a call starts (``solve``, ``certify``, a command-line
command: at the process's own start) and passed down; every phase (warm start, model build,
hand-off, search, each bound level) takes what is left of it, and a phase that cannot fit is
skipped with the reason. :func:`model_seconds` sizes a model before it is built, so that a
model too large for the time left is not built at all.

>>> d = Deadline(10.0)
>>> 9.0 < d.left() <= 10.0, d.expired(), d.clip(3.0)
(True, False, 3.0)
>>> Deadline(0.0).expired()
True
>>> seconds(float("nan"), "time_limit")
Traceback (most recent call last):
...
placement_dsl.errors.SpecError: time_limit nan: give a finite number of seconds > 0
"""
from __future__ import annotations

import math
import numbers
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from .errors import PlacementError, SpecError

__all__ = ["BudgetSpent", "Deadline", "answer_seconds", "call_within", "can_fork", "contention", "machine", "model_cpu",
           "model_seconds", "process_start", "scoring_seconds", "seconds", "slowdown", "stop_margin", "stream_within",
           "unlinked_locks"]

# CPU seconds per estimated nonzero of a placement MIP's constraint matrix (Archer's and Tarnawski's throughput models
# and their relaxations) to build the Pyomo model and extract its arrays for a solver, after a start-up of MODEL_START:
# refitted when the extraction stopped naming rows and read them with Pyomo's LinearRepnVisitor in one walk, and
# builds and extraction ran with the cyclic collector paused: zoo graphs of 50 to 290 ops onto 4 and 8 devices
# (throughput, exact, with contiguity and memory; 3.9k to 23k nonzeros), 9.3e-6 to 1.3e-5 (0.05 to 0.25 s,
# benchmarks/bench_model_sizing.py), and GPT-3 of 4,886 and 9,758 ops on its default cluster, 1.4e-5 and 1.6e-5 (399k
# and 798k estimated: 5.6 s, 17.6 s before, and 12.4 s); the estimate 0.9-1.6 times these builds. The former rate,
# 2.7e-5, was 1.9-3.1 times them; the one before it, 1.0e-5, fitted when builds took 0.4-0.6 of what they took then,
# let large models be built past their budget. Times the machine's contention (contention()), as the schedule and
# latency models' rates (placement_dsl.sizing)
SECONDS_PER_NONZERO = 1.4e-5
MODEL_START = 0.01  # CPU seconds of a placement MIP's build and extraction whatever its size
MIN_SEARCH = 1.0  # seconds of search below which a model is not worth building
PLACEMENT_NONZEROS = 9.0  # a placement MIP's nonzeros (Archer's and Tarnawski's models and their relaxations) per op
# or edge and device: the estimate :mod:`placement_dsl.sizing` makes of them, here without loading their formulations


class BudgetSpent(PlacementError):
    """The time left cannot hold the next phase (raised between the blocks of a model build)."""


def seconds(value: object, name: str) -> float:
    """``value`` as a budget in seconds, or a :class:`SpecError` naming ``name`` and ``value``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SpecError(f"{name} {value!r}: give a number of seconds > 0, not a {type(value).__name__}")
    out = float(value)
    if not math.isfinite(out) or out <= 0:
        raise SpecError(f"{name} {value!r}: give a finite number of seconds > 0")
    return out


def process_start() -> float:
    """When this process started, on the :func:`time.monotonic` clock (now, where the system does not say)."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat") as fh:
            stat = fh.read()
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        ticks = float(stat.rsplit(")", 1)[1].split()[19])  # field 22, counted after the command name
        age = uptime - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return now
    return now - age if 0 <= age < 3600 else now


class Deadline:
    """``seconds`` of wall clock from ``start`` (a :func:`time.monotonic` reading; now by default)."""

    def __init__(self, seconds: float, start: float | None = None):
        self.seconds = float(seconds)
        self.start = time.monotonic() if start is None else float(start)
        self.at = self.start + self.seconds

    def __repr__(self) -> str:
        return f"Deadline({self.seconds:g} s, {self.left():.3g} s left)"

    def left(self) -> float:
        """Seconds left (0 once spent)."""
        return max(self.at - time.monotonic(), 0.0)

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def expired(self, margin: float = 0.0) -> bool:
        """Whether less than ``margin`` seconds are left."""
        return self.at - time.monotonic() <= margin

    def clip(self, seconds: float | None) -> float:
        """``seconds``, at most what is left (what is left for ``None``)."""
        left = self.left()
        return left if seconds is None else max(min(float(seconds), left), 0.0)

    def within(self, seconds: float) -> Deadline:
        """A deadline ``seconds`` from now, no later than this one: a phase's share."""
        now = time.monotonic()
        return Deadline(max(min(now + seconds, self.at) - now, 0.0), now)

    def check(self, what: str) -> None:
        """Raise :class:`BudgetSpent` naming ``what`` when the budget is spent."""
        if self.expired():
            raise BudgetSpent(f"budget spent before {what} ({self.seconds:g} s, {self.elapsed():.1f} s elapsed)")


LOAD_MEASURED = 2.0  # runnable jobs per core at which the rates slowdown() scales were measured (beside one other job)


def slowdown() -> float:
    """How many times slower than at its measurement, beside one other job per core, a rate so measured runs here now
    (the evaluations' of :mod:`placement_dsl.heuristics.fallback`, the closed forms'): the one-minute load average per
    core this process may run on, beyond :data:`LOAD_MEASURED`, at least 1. A job holds one core's share of the
    machine; at load 8 on two cores a schedule model estimated within its 10 s took 19.7 s."""
    return max(1.0, contention() / LOAD_MEASURED)


def contention() -> float:
    """Wall seconds a CPU-bound job takes here now per second of its CPU time: the one-minute load average over the
    cores this process may run on, at least 1 (a job holds one core's share). Schedule models built at load 5.2-6.8 on
    two cores took 2.0-2.9 times their CPU time (this gives 2.6-3.4)."""
    cores, load = machine()
    return max(1.0, load / max(cores, 1))


def machine() -> tuple[int, float]:
    """The cores this process may run on (its affinity) and the one-minute load average (0 where unknown)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    return cores, load


def model_seconds(nonzeros: float) -> float:
    """Seconds to build and extract a placement MIP of ``nonzeros`` matrix entries (estimated; :func:`model_cpu`) on
    this machine as loaded now (:func:`contention`: a build holds one core's share)."""
    return model_cpu(nonzeros) * contention()


def model_cpu(nonzeros: float) -> float:
    """CPU seconds on an idle core to build and extract a placement MIP of ``nonzeros`` matrix entries (estimated):
    :data:`MODEL_START` and :data:`SECONDS_PER_NONZERO` each."""
    return MODEL_START + nonzeros * SECONDS_PER_NONZERO


GRACE = 1.0  # seconds a guarded call may run past its deadline before it is stopped
STOP_MARGIN = 0.15  # of its share, a guarded search's own time limit ends this early (stop_margin), and at least
SCORE_CPU_PER_OP = 6e-6  # CPU seconds per op of what a search does after its own limit: its placement scored by
# the cost model (1-2.7e-6 per op: GPT-3, ResNet copies, REGAL DAGs and BERT training graphs of 1,800-20,111 ops onto
# 4-64 stages), handed back (call_within: 3e-6 per op of wall at load 9, the graph by reference), or, stopped, its
# slicing of the work (slicegraph on 20,111 ops: 0.25 s of CPU, 0.41 s wall at load 9); times the machine's contention


SCHEDULE_CPU_PER_OP = 1e-5  # CPU seconds per op to score a single-sample answer (makespan, latency) whose schedule
# the cost model builds, or to finish a list schedule cut at its limit (the ops left placed where they go, no device
# compared) and check it: on a 20,000-task MOIRAI sheet (63,874 ops onto 4 devices) a list schedule took 0.47 s of
# CPU, its check 0.1-0.18 s (one device's schedule 1.2 s); times the machine's contention. At 2e-5, with the two
# below, a list schedule at 30 s on that sheet (load 10) was cut 14 s before the command's limit
ANSWER_CPU_PER_OP = 1.8e-5  # CPU seconds per op for a command to re-check a heuristic's answer by the cost model,
# report it (per-device rows, stage ranges) and print it as JSON: 0.8-1.2 s of CPU on that sheet (load 8)


def scoring_seconds(ops: int, single_sample: bool) -> float:
    """Seconds to score an answer of ``ops`` ops by the cost model on this machine as loaded now (:func:`contention`):
    a single-sample schedule built and checked (:data:`SCHEDULE_CPU_PER_OP`; a cut list schedule finished and
    checked alike), else a pipelined score (:data:`SCORE_CPU_PER_OP`)."""
    return (SCHEDULE_CPU_PER_OP if single_sample else SCORE_CPU_PER_OP) * ops * contention()


def answer_seconds(ops: int) -> float:
    """Seconds for a command to re-check, report and print a heuristic's answer of ``ops`` ops on this machine as
    loaded now (:data:`ANSWER_CPU_PER_OP` at the :func:`contention`)."""
    return ANSWER_CPU_PER_OP * ops * contention()


def stop_margin(seconds: float, ops: int) -> float:
    """How much earlier than its share of ``seconds`` a guarded search's own time limit ends, so that its answer is
    scored and handed back before it is stopped: :data:`STOP_MARGIN` of the share, at least :data:`SCORE_CPU_PER_OP`
    per op at the machine's :func:`contention`, at most half. The former 1.5e-4 s per op (measured when a 20,000-op
    answer was copied back whole) held PipeDream's path on GPT-3 of 20,111 ops onto 16 stages to half of a 1.9 s share:
    its slicing DP (0.9 s at load 4) was stopped and the certificate read the work-balanced slicing, 12.6 % above
    its 68.437."""
    return min(max(STOP_MARGIN * seconds, SCORE_CPU_PER_OP * ops * contention()), 0.5 * seconds)


def call_within(deadline: Deadline, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, stopped by force at ``deadline`` (and :data:`GRACE`): its value or its exception,
    else :class:`BudgetSpent`.

    It runs in a forked child process (which may be stopped at any moment; its value comes back through
    a pipe, the package's objects among the arguments by reference: :func:`_kept`), except without a finite deadline
    or inside a daemonic process (which may have no children), where it runs here and is trusted to stop itself
    (e.g. a heuristic's ``time_limit``).
    """
    if not math.isfinite(deadline.at) or not can_fork():
        return fn(*args, **kwargs)
    name = getattr(fn, "__name__", repr(fn))
    if deadline.expired():
        raise BudgetSpent(f"budget spent before {name} started")
    ctx = _fork()
    recv, send = ctx.Pipe(duplex=False)
    kept = _kept(args, kwargs)
    proc = ctx.Process(target=_child, args=(send, fn, args, kwargs), daemon=True, name="placement_dsl-guarded")
    proc.start()
    send.close()
    try:
        while not recv.poll(_waitable(deadline.left() + GRACE)):
            if deadline.expired(-GRACE):
                raise BudgetSpent(f"budget spent: {name} was stopped at the deadline ({deadline.seconds:.1f} s)")
        ok, value = _loads(recv.recv_bytes(), kept)
    except EOFError:
        proc.join(timeout=1.0)
        raise BudgetSpent(f"{name} ended without an answer (exit code {proc.exitcode})") from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=1.0)
        recv.close()
    if ok:
        return value
    raise value


MAX_WAIT = 86400.0  # seconds: the longest single wait on a pipe; poll() takes its timeout in ms as a C int (2**31 ms,
# 24.8 days), so a larger finite time limit (e.g. --time-limit 1e7) overflowed it. A caller waiting longer re-checks its
# deadline after each wait (_waitable: the guarded calls' waits)


def _waitable(seconds: float) -> float:
    """``seconds`` as a timeout the operating system's waits accept: at most :data:`MAX_WAIT`.

    >>> _waitable(1e7), _waitable(2.5)
    (86400.0, 2.5)
    """
    return min(seconds, MAX_WAIT)


def can_fork() -> bool:
    """Whether this process may run a guarded call in a forked child (not a daemonic process, which may have none)."""
    import multiprocessing as mp  # only a call with a deadline forks: most commands never need it

    return not mp.current_process().daemon and "fork" in mp.get_all_start_methods()


def _fork() -> Any:
    """multiprocessing's fork context (imported here: see :func:`can_fork`)."""
    import multiprocessing as mp

    return mp.get_context("fork")


def stream_within(deadline: Deadline, fn: Callable[..., Any], *args: Any) -> Iterator[Any]:
    """What ``fn(send, *args)`` sends (``send(message)``, any number of times) until it returns or ``deadline``
    passes, whichever comes first; the forked child running it is then stopped by force, so the caller regains
    control at the deadline however long ``fn``'s current step would take. An exception in ``fn`` ends the
    messages. Where no child may be forked (:func:`can_fork`), ``fn`` runs here, trusted to stop itself, and its
    messages come after it returns."""
    if not can_fork():
        sent: list[Any] = []
        try:
            fn(sent.append, *args)
        except Exception:  # noqa: BLE001, S110 - as in a child: the messages sent so far are the answer
            pass
        yield from sent
        return
    ctx = _fork()
    recv, send = ctx.Pipe(duplex=False)
    kept = _kept(args, {})
    proc = ctx.Process(target=_streaming, args=(send, fn, args), daemon=True, name="placement_dsl-streamed")
    proc.start()
    send.close()
    try:
        while True:
            if not recv.poll(_waitable(deadline.left())):
                if deadline.expired():
                    return
                continue
            try:
                message = _loads(recv.recv_bytes(), kept)
            except EOFError:  # the child returned (or died): everything it sent has been read
                return
            yield message
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=1.0)
        recv.close()


def unlinked_locks() -> None:
    """Make the locks this process creates from now on as a forked process makes them: their semaphores are unlinked
    at once instead of registered with the resource tracker, which a spawned child shares with its parent.

    The initializer of every ``spawn`` pool's worker (:func:`placement_dsl.cpsat.spawn_pool`; this module imports no
    Pyomo, so it runs before the task's modules load): Pyomo's import makes a lock (its output-capture lock), and a
    worker stopped by its pool (``terminate``: at a deadline, or while it was still ending) never unregisters it, so
    the resource tracker reported it at the parent's exit ("leaked semaphore objects", 4 of 9 makespan solves of a
    931-op sheet at 30 s)."""
    import multiprocessing as mp

    mp.set_start_method("fork", force=True)


def _kept(args: tuple, kwargs: dict) -> list[Any]:
    """The objects of a guarded call that its answer may hold and the caller has already: the package's own objects
    among its arguments and their attributes (a problem's graph and cluster), in a fixed order. A child sends them back
    by their place in this list, not copied (a placement holds its graph: a 20,111-op GPT-3 answer pickled 5.9 MB and
    took 0.3 s to copy and read back idle, 0.6 s at load 7, where its assignment is 0.16 MB); plain data (numbers,
    strings, containers, arrays), which the child may have changed, is copied. Listed in the parent before the child
    is forked and in the child before the call, so both lists are of the same objects."""
    root = __name__.split(".")[0]

    def own(value: Any) -> bool:
        return type(value).__module__.split(".")[0] == root and not isinstance(value, type)
    kept: dict[int, Any] = {}
    for value in (*args, *kwargs.values()):
        if own(value):
            kept.setdefault(id(value), value)
            for attr in getattr(value, "__dict__", {}).values():
                if own(attr):
                    kept.setdefault(id(attr), attr)
    return list(kept.values())


def _dumps(value: Any, kept: list[Any]) -> bytes:
    """``value`` pickled, the objects of ``kept`` in it by their place there (:func:`_kept`)."""
    import io
    import pickle

    place = {id(obj): i for i, obj in enumerate(kept)}
    out = io.BytesIO()
    pickler = pickle.Pickler(out, pickle.HIGHEST_PROTOCOL)
    pickler.persistent_id = lambda obj: place.get(id(obj))  # type: ignore[method-assign]
    pickler.dump(value)
    return out.getvalue()


def _loads(data: bytes, kept: list[Any]) -> Any:
    """What :func:`_dumps` pickled, the caller's own objects in place of their places."""
    import io
    import pickle

    unpickler = pickle.Unpickler(io.BytesIO(data))
    unpickler.persistent_load = kept.__getitem__  # type: ignore[method-assign]
    return unpickler.load()


def _streaming(conn: Any, fn: Callable[..., Any], args: tuple) -> None:
    kept = _kept(args, {})
    try:
        fn(lambda message: conn.send_bytes(_dumps(message, kept)), *args)
    except BaseException:  # noqa: BLE001, S110 - the messages sent so far are the answer
        pass
    finally:
        conn.close()


def _child(conn: Any, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
    kept = _kept(args, kwargs)
    try:
        out: tuple[bool, Any] = (True, fn(*args, **kwargs))
    except BaseException as err:  # noqa: BLE001 - handed to the parent, which raises it
        out = (False, err)
    try:
        conn.send_bytes(_dumps(out, kept))
    except Exception as err:  # noqa: BLE001 - e.g. an exception that does not pickle
        conn.send_bytes(_dumps((False, RuntimeError(f"{type(err).__name__}: {err}")), []))
    finally:
        conn.close()
