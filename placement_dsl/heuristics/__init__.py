"""Fast partitioners. Each is a pure function ``(graph, cluster, **options) -> HeuristicResult``.

Use :func:`run` with a method name from the registry (:func:`names`; a method registers itself with
:func:`heuristic`); every result is re-scored by the cost model (:func:`placement_dsl.evaluate.evaluate`).
"""
from typing import Any

from . import base
from .base import HeuristicResult, run
from .registry import HEURISTICS, Heuristic, heuristic, load, methods_for, names

__all__ = ["HEURISTICS", "Heuristic", "HeuristicResult", "heuristic", "load", "methods_for", "names", "run"]


def __getattr__(name: str) -> Any:
    """``METHODS``, the old table of method names, read from the registry (deprecated)."""
    if name == "METHODS":
        return base.__getattr__(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
