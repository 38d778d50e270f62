"""Testbed sweeps: every (graph, k, level or heuristic) of a grid, stored as it finishes, resumable.

A sweep expands a testbed (:func:`expand_testbed`) into tasks (:func:`plan`), runs the ones
its SQLite store (:class:`Store`) lacks on an executor (:class:`LocalExecutor`, or
:class:`DaskExecutor` for a Dask cluster) and stores each result as it arrives
(:func:`run_sweep`). Reports in the forms of Archer et al.'s Tables 1–3 and Fig. 4 are read
from the store (:func:`summary`, :func:`write_report`). See ``docs/sweeps.md``.

Examples
--------
>>> from placement_dsl.sweep import plan
>>> [t.key for t in plan([("regal-0", "zoo:regal-0")], [2], ["simple"], ["slicegraph"], 5.0)]
['regal-0|k=2|level=simple|limit=5', 'regal-0|k=2|method=slicegraph|limit=5']
"""
from __future__ import annotations

from .driver import SweepOutcome, missing, run_sweep
from .executors import DaskExecutor, LocalExecutor
from .report import summary, text, write_report
from .store import Store
from .tasks import Task, check_graphs, code_version, execute, expand_testbed, plan

__all__ = ["DaskExecutor", "LocalExecutor", "Store", "SweepOutcome", "Task", "check_graphs", "code_version",
           "execute", "expand_testbed", "missing", "plan", "run_sweep", "summary", "text", "write_report"]
