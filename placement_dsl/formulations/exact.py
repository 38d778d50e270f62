"""Archer et al. Fig. 3: the exact MIP for max-throughput pipeline partitioning."""
from __future__ import annotations

from ..blocks import OrderedAssignment, TensorCut
from ..blocks.base import BlockTemplate
from ..constraints import DagOrder
from ..evaluate import Overlap
from ..problem import Problem
from .base import Auto, Formulation, Kind, register
from .rules import BASE


def _skeleton(problem: Problem) -> list[BlockTemplate]:
    form = "archer" if problem.has(DagOrder) else "commio"
    merged = form == "archer" and problem.objective.overlap is not Overlap.FULL
    return [OrderedAssignment(), TensorCut(form=form, merged=merged)]


EXACT = register(Formulation("exact", Kind.EXACT, _skeleton, parent=BASE,
                             auto=Auto(rank=1, requires=(DagOrder,), checked=True), doc="""
Archer Fig. 3 with ``x`` eliminated by eq. (11): ``y_{vb}`` binaries (eq. 11-12), DAG order (eq. 8,
from :class:`DagOrder`), tensor cut ``c_{ub}`` (eq. 9-10), block cost (eq. 7) and
``minimize bottleneck`` (eq. 5-6): O(nk) variables and O(mk) constraints (Theorem 3.2). Without
:class:`DagOrder` the cut uses Tarnawski's CommIn/CommOut rows, which hold for any device order. ``formulation="auto"`` picks it under
:class:`DagOrder` where it writes the problem (not on a routed cluster)."""))
