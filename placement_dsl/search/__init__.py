"""Searches that re-solve parts of a problem with :func:`~placement_dsl.solve.solve` (or CP-SAT) around an
incumbent, above the solve layer: the single-sample window search (:mod:`.anytime`; the deprecated
``"schedule-lns"`` of :mod:`.lns` forwards to it), the throughput IP's neighbourhoods (:mod:`.neighbourhood`) and the chain formulation's target search (:mod:`.chain`). Each
step pins everything outside a free set and re-solves (:mod:`.pin`).

Importing this package loads none of its modules (they load Pyomo and the solvers): each name below is
imported on first use, and :data:`HEURISTICS` declares the methods this package adds to the heuristics'
registry, so listing the methods stays cheap.
"""
from __future__ import annotations

import importlib
from typing import Any

from ..heuristics.manifest import ScheduleStart
from ..options import Options, option


class ScheduleLns(ScheduleStart):
    """The makespan LNS's options."""

    window: int = option(16, "units freed per step at first (doubled after a pass without improvement)", ge=1)
    step_limit: float = option(5.0, "seconds per step's re-solve", gt=0)
    solver: str | None = option(None, "the re-solve's solver (None: CP-SAT when installed, else HiGHS)")
    threads: int = option(1, "solver threads", ge=1)


class ContractedLns(Options):
    """The single-sample anytime search's options (the coarse solve, then LNS over windows)."""

    start: Any = option("auto", "a heuristic name, 'auto' or a placement to start from")
    problem: Any = option(None, "the problem to search, with its pins and terms (None: the cost model's)")
    solver: str | None = option(None, "the sub-solver (None: CP-SAT for a makespan when installed, else HiGHS)")
    window: int = option(24, "ops a window frees at first", ge=1)
    coarse: bool = option(True, "solve a coarsened model before the windows")
    patience: int | None = option(None, "window steps in a row without a better schedule after which the search "
                                  "ends and gives its time back (None: it runs until its time limit)", ge=1)


SINGLE_SAMPLE = ("latency", "makespan")
HEURISTICS = {"schedule-lns": ("lns:schedule_lns", "makespan", ScheduleLns, ("makespan",)),
              "latency-lns": ("anytime:latency_lns", "latency", ContractedLns, SINGLE_SAMPLE),
              "makespan-lns": ("anytime:makespan_lns", "makespan", ContractedLns, SINGLE_SAMPLE)}
"""The methods this package registers (:mod:`placement_dsl.heuristics.registry`): name -> (module:function, what
it minimizes, its declared options, the cost models' objectives it answers: another is refused before its module,
which loads Pyomo, is imported)."""

_WHERE = {"contracted_lns": "anytime", "target_level": "chain", "target_search": "chain", "windowed_bound": "chain", "makespan_problem": "lns",
          "schedule_lns": "lns", "ip_neighbourhoods": "neighbourhood", "pin_outside": "pin", "resolve_free": "pin"}

__all__ = ["contracted_lns", "ip_neighbourhoods", "makespan_problem", "pin_outside", "resolve_free", "schedule_lns", "target_level",
           "target_search", "windowed_bound"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
