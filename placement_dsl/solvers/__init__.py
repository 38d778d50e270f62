"""Solver backends behind one call: :func:`solve_model` (:mod:`.dispatch`).

The results' vocabulary (:mod:`.base`: statuses, outcomes, options) loads with the package; the backends and the
dispatch load Pyomo and the solvers' bindings, and are imported on their first use (a name of :data:`DISPATCH`), so
that what only reads a status (the formulations' declarations, a solve that answers before its model build) does
not pay their start-up.
"""
from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from .base import (
    Bound,
    Capabilities,
    Final,
    HandedOff,
    Incumbent,
    Native,
    SolveOptions,
    SolverOutcome,
    StartVerdict,
    Status,
    Timings,
)
from .base import (
    classify as classify,
)

__all__ = [
    "Backend", "Bound", "Capabilities", "Final", "HandedOff", "Incumbent", "Native", "SolveOptions", "SolverOutcome",
    "StartVerdict", "Status", "Timings", "available_solvers", "backend", "known", "solve_model",
]

DISPATCH = frozenset({"Backend", "NATIVE", "PYOMO_CANDIDATES", "START_TOL", "CLAIM_TOL", "RETRY_SECONDS",
                      "MIN_HANDOFF", "available_solvers", "backend", "solve_model"})


def __getattr__(name: str) -> Any:
    """The dispatch's names (:data:`DISPATCH`), loading it (and Pyomo) on first use."""
    if name in DISPATCH:
        return getattr(importlib.import_module(f"{__name__}.dispatch"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def known(solver: str) -> None:
    """Refuse ``solver`` when it is unknown or not installed (:class:`~placement_dsl.errors.SolverUnavailableError`, as
    :func:`solve_model` would), before any work of a solve: the native names without loading Pyomo (a solve may answer
    before its model build, whose start-up it then does not pay), any other name by the dispatch (:func:`backend`)."""
    native = {"highs": "highspy", "scip": "pyscipopt"}  # found installed, not imported: highspy loads in ~0.3 s
    if solver in native and importlib.util.find_spec(native[solver]):
        return
    importlib.import_module(f"{__name__}.dispatch").backend(solver)
