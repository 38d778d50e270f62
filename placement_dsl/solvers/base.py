"""What every solver backend shares: statuses, capabilities, options, outcomes and progress reports."""
from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


class Status(str, enum.Enum):
    """How a solve ended. A time limit is a status, never an exception."""

    OPTIMAL = "optimal"
    TIME_LIMIT_FEASIBLE = "time_limit_feasible"
    TIME_LIMIT_NO_SOLUTION = "time_limit_no_solution"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    ERROR = "error"

    @property
    def has_solution(self) -> bool:
        return self in (Status.OPTIMAL, Status.TIME_LIMIT_FEASIBLE)

    @property
    def is_ok(self) -> bool:
        """The solve ran as asked (optimal, or stopped by the time limit)."""
        return self in (Status.OPTIMAL, Status.TIME_LIMIT_FEASIBLE, Status.TIME_LIMIT_NO_SOLUTION)


class Native(str, enum.Enum):
    """A backend's termination, before the solution check turns it into a :class:`Status`.

    Each backend maps its solver's own status codes onto these through a table; a code it
    does not list is ``UNKNOWN``, which becomes :attr:`Status.ERROR` — never a guessed status.
    """

    OPTIMAL = "optimal"
    LIMIT = "limit"  # time, node, gap-independent stop, interrupt: keep what was found
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    INF_OR_UNBD = "infeasible_or_unbounded"
    ERROR = "error"
    UNKNOWN = "unknown"


def classify(native: Native, has_solution: bool) -> Status:
    """The :class:`Status` of a native termination, given whether a solution exists."""
    if native is Native.OPTIMAL:
        return Status.OPTIMAL if has_solution else Status.ERROR
    if native is Native.LIMIT:
        return Status.TIME_LIMIT_FEASIBLE if has_solution else Status.TIME_LIMIT_NO_SOLUTION
    if native in (Native.INFEASIBLE, Native.INF_OR_UNBD):
        return Status.INFEASIBLE
    if native is Native.UNBOUNDED:
        return Status.UNBOUNDED
    return Status.ERROR


def lookup(table: Mapping[Any, Native], code: Any) -> Native:
    """``table[code]``, or :attr:`Native.UNKNOWN` for a code the table does not list."""
    return table.get(code, Native.UNKNOWN)


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; tests choose solvers by these flags."""

    mip_start: bool = False
    time_limit: bool = True
    gap: bool = True
    reports_bound: bool = False
    streams_incumbents: bool = False


@dataclass(frozen=True)
class SolveOptions:
    """Options every backend understands.

    Parameters
    ----------
    time_limit
        Seconds for hand-off plus search. Enforced by the project, not only by the solver:
        a solve still running at ``time_limit + grace`` is stopped and returns what it has.
    gap
        Relative MIP gap at which the solver may stop.
    threads
        Solver threads (1 by default: parallel work uses processes).
    log_path
        File for the solver's log, or ``None``.
    verbose
        Echo the solver's log to standard output.
    grace
        Seconds allowed past ``time_limit`` before the solve is stopped by force.
    isolate
        Run the solver in a child process that can be stopped at any moment (default). With
        ``False`` the solver runs in this process and is stopped through its interrupt API only.
    cutoff
        Seek only solutions of objective below it (model units): the solver may prune any node
        whose bound reaches it, so it may end infeasible or optimal above it with nothing found
        below. Its bound ``b`` then only says ``min(cutoff, b) <= min(cutoff, optimum)``: the
        outcome's bound is capped at the cutoff.
        ``None``: no cutoff. Backends without the option ignore it.
    deadline
        The caller's deadline on the :func:`time.monotonic` clock (its whole call's budget): the
        hand-off and search end by it, whatever ``time_limit`` says. ``None``: ``time_limit`` from
        the start of the hand-off.
    """

    time_limit: float = 60.0
    gap: float = 1e-4
    threads: int = 1
    log_path: str | Path | None = None
    verbose: bool = False
    grace: float = 0.5
    isolate: bool = True
    cutoff: float | None = None
    deadline: float | None = None

    def __post_init__(self) -> None:
        if not self.time_limit > 0:
            raise ValueError(f"time_limit must be > 0 seconds, got {self.time_limit!r}")
        if not 0 <= self.gap < 1:
            raise ValueError(f"gap must be in [0, 1), got {self.gap!r}")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads!r}")


@dataclass
class Timings:
    """Seconds spent building the arrays, handing them to the solver, and searching."""

    build: float = 0.0
    handoff: float = 0.0
    solve: float = 0.0

    @property
    def total(self) -> float:
        return self.build + self.handoff + self.solve

    def to_dict(self) -> dict[str, float]:
        return {"build": self.build, "handoff": self.handoff, "solve": self.solve, "total": self.total}


@dataclass
class SolverOutcome:
    """What a solve found; the values are loaded into the model's variables when ``has_solution``.

    ``objective`` and ``bound`` are in the model's units; ``bound`` is the solver's proven dual
    bound (``None`` if it reports none). ``start_accepted`` is ``None`` without a start.
    """

    status: Status
    objective: float | None
    bound: float | None
    has_solution: bool
    solver: str
    timings: Timings = field(default_factory=Timings)
    log_path: str | None = None
    start_objective: float | None = None
    start_accepted: bool | None = None
    message: str = ""


# ---------------------------------------------------------------------------- progress reports
@dataclass(frozen=True)
class Incumbent:
    """A new best solution (column values in :class:`~.matrix.LinearModel` order)."""

    seconds: float
    objective: float
    x: np.ndarray


@dataclass(frozen=True)
class Bound:
    """A new dual bound."""

    seconds: float
    bound: float


@dataclass(frozen=True)
class StartVerdict:
    """Whether the solver took the start as its incumbent, and the evidence."""

    accepted: bool
    evidence: str


@dataclass(frozen=True)
class HandedOff:
    """The solver holds the model; ``seconds`` is the hand-off time."""

    seconds: float


@dataclass(frozen=True)
class Final:
    """The solver's own end: native termination and its last solution and bound."""

    native: Native
    code: str
    objective: float | None
    bound: float | None
    x: np.ndarray | None
    seconds: float


Report = Incumbent | Bound | StartVerdict | HandedOff | Final
Emit = Callable[[Report], None]
