"""Fast partitioners. Each is a pure function ``(graph, cluster, **options) -> HeuristicResult``.

Use :func:`run` with a method name from :data:`METHODS`; every result is re-scored by the
cost model (:func:`placement_dsl.evaluate.evaluate`).
"""
from .base import METHODS, HeuristicResult, run

__all__ = ["METHODS", "HeuristicResult", "run"]
