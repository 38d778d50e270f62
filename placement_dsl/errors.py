"""Exception hierarchy of the package.

Every error names the offending object (op, edge, device, option), shows the value
and, where one exists, says how to fix it.
"""
from __future__ import annotations


class PlacementError(Exception):
    """Base class of every error raised by placement_dsl."""


class SpecError(PlacementError, ValueError):
    """Invalid input: a graph, cluster, placement, problem or option that cannot be used."""


class InfeasibleError(PlacementError):
    """The problem has no feasible placement (e.g. memory cannot hold the ops)."""


class SolverUnavailableError(PlacementError):
    """The requested solver is unknown or not installed."""


class EvaluationMismatchError(PlacementError):
    """A solver's objective disagrees with the independent cost model."""
