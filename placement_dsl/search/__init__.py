"""Searches that re-solve parts of a problem with :func:`~placement_dsl.solve.solve` (or CP-SAT) around an
incumbent, above the solve layer: the makespan LNS (:mod:`.lns`, method ``"schedule-lns"``), the throughput
IP's neighbourhoods (:mod:`.neighbourhood`), RINS where good splits disagree (:mod:`.rins`, imported by its module name: its function has the same name), and the chain
formulation's target search (:mod:`.chain`). Each step pins everything outside a free set and re-solves
(:mod:`.pin`)."""
from __future__ import annotations

from .chain import target_level, target_search, windowed_bound
from .lns import makespan_problem, schedule_lns
from .neighbourhood import ip_neighbourhoods
from .pin import pin_outside, resolve_free

__all__ = ["ip_neighbourhoods", "makespan_problem", "pin_outside", "resolve_free", "schedule_lns",
           "target_level", "target_search", "windowed_bound"]
