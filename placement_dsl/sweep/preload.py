"""Imported by the local executor's fork server: one solver thread, and everything a task needs loaded once.

Every task process is forked from the server, so none pays again for importing the package, loading
the heuristics' compiled kernels or the MIP stack (see :func:`placement_dsl.sweep.tasks.warm`); the first tasks,
whose clocks start with the sweep, wait for the server's loads within their limits.
"""
from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

from .tasks import warm  # after the thread limits: they must be set before the solvers load

warm()
