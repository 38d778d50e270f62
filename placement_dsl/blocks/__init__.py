"""The library of Pyomo block templates that formulations compose.

=================  ==============================================  =========================
block name         template                                        paper
=================  ==============================================  =========================
``assignment``     :class:`Assignment` / :class:`OrderedAssignment`  Tarnawski (14) / Archer (11)
``pin``            :class:`PinOps`                                  —
``colocation``     :class:`Colocation`                              Tarnawski App. B
``dag_order``      :class:`DagOrderBlock`                           Archer (8)
``contiguity``     :class:`Contiguity`                              Tarnawski Lemma 4.1 (11-13)
``tensor_cut``     :class:`TensorCut`                               Archer (9-10) / Tarnawski (15-19)
``memory``         :class:`MemoryCapacity`                          Tarnawski (3)
``overflow``       :class:`OverflowCost`                            Archer (2)
``device_load``    :class:`DeviceLoad`                              Archer (7) / Tarnawski (20-21)
``max_load``       :class:`MaxLoad`                                 Archer (5-6) / Tarnawski Fig. 6
``gpipe``          :class:`GPipeObjective`                          Tarnawski §5.3, App. A
=================  ==============================================  =========================

A new template subclasses :class:`BlockTemplate` and is registered with :func:`register`.
"""
from .assignment import Assignment, Colocation, OrderedAssignment, PinOps
from .base import (ASSIGN, COST, CUT, LOAD, OBJECTIVE, STRUCTURE, TEMPLATES, BlockTemplate, Context, Scale, Warm,
                   register, resolve)
from .chain import AncestorCuts, ChainAssignment, ChainOrder, ChainTensorCut, CpuGaps, PositionWindows
from .load import DeviceLoad, MemoryCapacity, OverflowCost
from .objective import GPipeObjective, MaxLoad
from .order import Contiguity, DagOrderBlock
from .transfer import TensorCut

__all__ = [
    "ASSIGN", "COST", "CUT", "LOAD", "OBJECTIVE", "STRUCTURE", "TEMPLATES", "AncestorCuts", "Assignment",
    "BlockTemplate", "ChainAssignment", "ChainOrder", "ChainTensorCut", "CpuGaps", "PositionWindows",
    "Colocation", "Context", "Contiguity", "DagOrderBlock", "DeviceLoad", "GPipeObjective", "MaxLoad",
    "MemoryCapacity", "OrderedAssignment", "OverflowCost", "PinOps", "Scale", "TensorCut", "Warm", "register",
    "resolve",
]
