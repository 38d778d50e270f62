"""The problems the command line means: ``--method`` and ``--objective`` turned into problem terms.

The mapping itself (``problem_for_method``, ``dag_problem``) lives in :mod:`placement_dsl.presets`, which the
sweep shares; the old names here warn and forward for one release.
"""
from __future__ import annotations

from typing import Any

from .. import presets
from ..deprecated import moved
from ..problem import Problem

__getattr__ = moved(__name__, dict.fromkeys(("STRUCTURE", "dag_problem", "problem_for_method"), presets))


def bounds_payload(problem: Problem, levels: list[str] | tuple[str, ...] | None = None, time_limit: float = 60.0,
                   workers: int = 1, solver: str = "highs", deadline: Any = None) -> tuple[dict[str, Any], str]:
    """Every requested level's bound and status, the best upper bound, and bound/UB (``placement-dsl bounds``).

    ``levels`` default to the problem's hierarchy. ``time_limit`` is the total wall-clock budget (ending by
    ``deadline`` too, the command's :class:`~placement_dsl.deadline.Deadline`); the run stops once the bound
    meets the best placement (gap 0). The payload is JSON-ready.
    """
    from ..certify import certify  # the solver stack: loaded when a command runs

    cert = certify(problem, budget=time_limit, levels=levels, gap=0.0, solver=solver, workers=workers,
                   deadline=deadline)
    ub = cert.objective
    payload = cert.to_dict()
    payload.update(graph=problem.graph.name, stages=problem.cluster.size, upper_bound=ub,
                   upper_bound_by=cert.found_by,
                   ratios={r.level: (None if r.bound is None or not ub else r.bound / ub) for r in cert.levels})
    return payload, cert.table()
