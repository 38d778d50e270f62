"""Live progress of long runs: one status line on stderr, or a record of timed events.

Long runs call :func:`report` with a task name and a few fields (the DP: ideals; BRKGA:
generation and best value; a MIP: incumbent, bound and gap in the problem's units; the
certificate: level and best bound). What happens to a report depends on the reporter in
force, set with :func:`reporting`:

* :class:`Reporter` (the default) drops it: a library call prints nothing;
* :class:`LineReporter` rewrites one line on stderr, at most ten times a second;
* :class:`LogReporter` writes plain lines (a log file, a pipe): one at each new task and at
  most one every few seconds otherwise, each with the seconds elapsed;
* :class:`Recorder` keeps every report with its time (the bounds-over-time picture is
  drawn from one), optionally passing it on to another reporter.

:func:`for_terminal` gives the command line's reporter: a status line when stderr is a
terminal, plain timed lines when it is not (redirected to a log), nothing under ``--quiet``.

Examples
--------
>>> with reporting(Recorder()) as rec:
...     report("brkga", generation=1, best=12.5)
>>> [(e.task, e.fields) for e in rec.events]
[('brkga', {'generation': 1, 'best': 12.5})]
"""
from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = ["Event", "LineReporter", "LogReporter", "Recorder", "Reporter", "for_terminal", "report", "report_mip", "reporting",
           "scaled"]


@dataclass(frozen=True)
class Event:
    """One report: ``seconds`` since the recorder started, the task and its fields."""

    seconds: float
    task: str
    fields: dict[str, Any] = field(default_factory=dict)


class Reporter:
    """The silent reporter: every report is dropped."""

    def update(self, task: str, **fields: Any) -> None:
        """Take one report of ``task`` (here: drop it)."""

    def close(self) -> None:
        """End the reporter's output (here: nothing to end)."""


def _value(value: Any) -> str:
    """A field value short enough for a status line."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return f"{value:.6g}"
    return str(value)


class LineReporter(Reporter):
    """One status line on ``stream`` (``task: key value, ...``), rewritten in place.

    Parameters
    ----------
    stream
        Where to write (default: ``sys.stderr``).
    interval
        Least seconds between two writes; a report of a new task is always written.
    """

    def __init__(self, stream: TextIO | None = None, interval: float = 0.1):
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self._last = -math.inf
        self._task = ""
        self._width = 0

    def update(self, task: str, **fields: Any) -> None:
        """Write ``task: key value, ...`` over the previous line (throttled)."""
        now = time.monotonic()
        if task == self._task and now - self._last < self.interval:
            return
        self._last, self._task = now, task
        text = f"{task}: " + ", ".join(f"{k} {_value(v)}" for k, v in fields.items())
        self._write("\r" + text.ljust(self._width))
        self._width = len(text)

    def close(self) -> None:
        """Clear the status line."""
        if self._width:
            self._write("\r" + " " * self._width + "\r")
            self._width = 0

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed stream ends the progress line, never the run
            self._width = 0


def _phase(task: str, fields: dict[str, Any]) -> tuple[Any, ...]:
    """What a phase change changes: the task, and the ``phase`` or ``level`` it reports."""
    return task, fields.get("phase"), fields.get("level")


class LogReporter(Reporter):
    """Plain lines on ``stream`` for a log: ``[   12.0s] task: key value, ...``, never a carriage return.

    A line is written at each phase change (a task, ``dp``, ``mip``, ``certify``, reporting for
    the first time since the last line, or a new ``phase`` or ``level`` field of the same task),
    and otherwise at most once every ``interval`` seconds. A phase that reports rarely still
    gets a line every ``interval`` seconds, repeating its latest report with the time elapsed
    (:meth:`tick`, run by a background thread with ``heartbeat``). A run shorter than ``delay``
    seconds writes nothing; on closing, the last report not yet written is written, so a log
    ends with the final incumbent and bound.

    Parameters
    ----------
    stream
        Where to write (default: ``sys.stderr``).
    interval
        Seconds between two lines of one phase.
    delay
        Seconds from the reporter's creation before the first line.
    clock
        Seconds of a monotonic clock (tests pass their own).
    heartbeat
        Run :meth:`tick` every ``interval / 2`` seconds in a daemon thread from the first report on.
    """

    def __init__(self, stream: TextIO | None = None, interval: float = 5.0, delay: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, heartbeat: bool = True):
        self.stream = stream if stream is not None else sys.stderr
        self.interval, self.delay, self.clock, self.heartbeat = interval, delay, clock, heartbeat
        self._start = clock()
        self._last = -math.inf
        self._task: tuple[Any, ...] = ()
        self._pending: tuple[float, str, dict[str, Any]] | None = None
        self._latest: tuple[str, dict[str, Any]] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def update(self, task: str, **fields: Any) -> None:
        """Write the report as a line if it changes the phase or the interval has passed, else keep it."""
        with self._lock:
            elapsed = self.clock() - self._start
            self._pending, self._latest = (elapsed, task, fields), (task, fields)
            if self.heartbeat and self._thread is None:
                self._thread = threading.Thread(target=self._beat, name="progress-log", daemon=True)
                self._thread.start()
            if elapsed < self.delay or (_phase(task, fields) == self._task and elapsed - self._last < self.interval):
                return
            self._flush()

    def tick(self) -> None:
        """Write the latest report again, with the time now, when no line was written for ``interval`` seconds."""
        with self._lock:
            elapsed = self.clock() - self._start
            if self._latest is None or elapsed < self.delay or elapsed - self._last < self.interval:
                return
            self._pending = (elapsed, *self._latest)
            self._flush()

    def close(self) -> None:
        """Stop the heartbeat; write the last report if a line was written before it and it was not."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        with self._lock:
            if self._pending is not None and self._task:
                self._flush()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval / 2):
            self.tick()

    def _flush(self) -> None:
        assert self._pending is not None
        elapsed, task, fields = self._pending
        self._pending, self._last, self._task = None, elapsed, _phase(task, fields)
        text = f"[{elapsed:8.1f}s] {task}: " + ", ".join(f"{k} {_value(v)}" for k, v in fields.items())
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed log ends the progress lines, never the run
            self._task = ()


class Recorder(Reporter):
    """Keeps every report as an :class:`Event` timed from the recorder's creation.

    Parameters
    ----------
    forward
        A reporter that also gets every report (e.g. the terminal's line).
    """

    def __init__(self, forward: Reporter | None = None):
        self.events: list[Event] = []
        self.forward = forward or Reporter()
        self._start = time.perf_counter()

    def update(self, task: str, **fields: Any) -> None:
        """Record the report, then pass it on."""
        self.events.append(Event(time.perf_counter() - self._start, task, dict(fields)))
        self.forward.update(task, **fields)

    def close(self) -> None:
        """Close the forwarded reporter."""
        self.forward.close()

    def of(self, task: str) -> list[Event]:
        """The recorded events of ``task``, in time order."""
        return [e for e in self.events if e.task == task]


_SILENT = Reporter()
LOG_INTERVAL = 5.0
"""Seconds between two progress lines of one task in a log (:func:`for_terminal`)."""
LOG_DELAY = 1.0
"""Seconds a command runs before its first progress line in a log: quick commands leave none."""
_CURRENT: ContextVar[Reporter | None] = ContextVar("placement_dsl_progress", default=None)
_SCALE: ContextVar[float] = ContextVar("placement_dsl_progress_scale", default=1.0)


def report(task: str, **fields: Any) -> None:
    """Give one progress report of ``task`` to the reporter in force (by default: nobody)."""
    (_CURRENT.get() or _SILENT).update(task, **fields)


def report_mip(incumbent: float | None, bound: float | None) -> None:
    """A MIP's incumbent, bound and relative gap, in the problem's units (see :func:`scaled`)."""
    scale = _SCALE.get()
    inc = None if incumbent is None else incumbent * scale
    low = None if bound is None else bound * scale
    gap = None
    if inc is not None and low is not None and math.isfinite(inc) and inc != 0:
        gap = max(inc - low, 0.0) / abs(inc)
    report("mip", incumbent=inc if inc is not None else math.nan, bound=low if low is not None else math.nan,
           gap=f"{gap:.2%}" if gap is not None else "-")


@contextlib.contextmanager
def scaled(factor: float) -> Iterator[None]:
    """Within the block, MIP reports are multiplied by ``factor`` (a model's time scale) into the problem's units."""
    token = _SCALE.set(float(factor))
    try:
        yield
    finally:
        _SCALE.reset(token)


@contextlib.contextmanager
def reporting(reporter: Reporter) -> Iterator[Reporter]:
    """Within the block, :func:`report` goes to ``reporter``; it is closed on the way out."""
    token = _CURRENT.set(reporter)
    try:
        yield reporter
    finally:
        _CURRENT.reset(token)
        reporter.close()


def for_terminal(quiet: bool = False, stream: TextIO | None = None) -> Reporter:
    """The command line's reporter on ``stream`` (default stderr): silence when ``quiet``, a
    :class:`LineReporter` on a terminal, else a :class:`LogReporter` (no carriage returns in a file)."""
    stream = stream if stream is not None else sys.stderr
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError):
        tty = False
    if quiet:
        return Reporter()
    return LineReporter(stream) if tty else LogReporter(stream, LOG_INTERVAL, LOG_DELAY)
