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

A new template subclasses :class:`BlockTemplate`, declares the links it ``provides`` and ``needs``
(:class:`AssignmentLink`, :class:`TransferLink`, :class:`LoadLink`, ...) and is listed in the library with
:func:`register` (keyed by class); formulations map problem terms to templates
(:mod:`placement_dsl.formulations`).
"""
from .assignment import Assignment, Colocation, OrderedAssignment, PinOps
from .base import (
    TEMPLATES,
    AssignmentLink,
    BlockTemplate,
    BottleneckLink,
    Context,
    Link,
    LoadLink,
    OverflowLink,
    Scale,
    ScheduleLink,
    Stage,
    TransferLink,
    Warm,
    build_order,
    register,
)
from .chain import (
    AncestorCuts,
    ChainAssignment,
    ChainLink,
    ChainOrder,
    ChainTensorCut,
    CpuGaps,
    CpuGapsLink,
    PositionWindows,
)
from .load import DeviceLoad, MemoryCapacity, OverflowCost
from .objective import GPipeObjective, MaxLoad
from .order import Contiguity, DagOrderBlock
from .superblock import HostSuperblocks, NoTransfer, SuperblockLoad, Superblocks
from .transfer import TensorCut

__all__ = [
    "TEMPLATES", "AncestorCuts", "Assignment", "AssignmentLink", "BlockTemplate", "BottleneckLink",
    "ChainAssignment", "ChainLink", "ChainOrder", "ChainTensorCut", "Colocation", "Context", "Contiguity", "CpuGaps",
    "CpuGapsLink", "DagOrderBlock", "DeviceLoad", "GPipeObjective", "HostSuperblocks", "Link", "LoadLink", "MaxLoad",
    "MemoryCapacity", "NoTransfer", "OrderedAssignment", "OverflowCost", "OverflowLink", "PinOps", "PositionWindows",
    "Scale", "ScheduleLink", "Stage", "SuperblockLoad", "Superblocks", "TensorCut", "TransferLink", "Warm", "build_order", "register",
]
