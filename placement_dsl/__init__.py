"""placement_dsl: declarative placement of DNN computation graphs onto devices.

Declare a graph and a cluster, score any placement with the one cost model
(:func:`evaluate`), find placements with fast heuristics, and solve exact or relaxed
Pyomo formulations with a certificate (placement, proven lower bound, gap).

The top-level namespace holds the Pyomo-free layers; the modelling layers are imported
from their modules (``placement_dsl.solve.solve``, ``placement_dsl.compile.compile``).
"""
from .boundaries import Boundaries
from .cluster import Cluster, Device, Link, Route
from .constraints import AllowedKinds, Colocate, Congestion, Contiguous, DagOrder, Memory, Overflow, Pin, Subgraphs
from .errors import EvaluationMismatchError, InfeasibleError, PlacementError, SolverUnavailableError, SpecError
from .evaluate import CostModel, Evaluation, evaluate
from .graph import Graph, Op
from .io import Workload, load_placement, load_workload, save_placement, save_workload
from .objectives import (
    Bottleneck,
    GPipe,
    Interleaved1F1B,
    Latency,
    Makespan,
    PipeDream,
    Throughput,
    ZeroBubbleH1,
    ZeroBubbleV,
)
from .placement import Placement
from .problem import Problem, Stages
from .training_terms import Replicate, TrainingMemory

__version__ = "0.1.0"

__all__ = [
    "AllowedKinds", "Bottleneck", "Boundaries", "Cluster", "Colocate", "Congestion", "Contiguous", "CostModel",
    "DagOrder", "Device", "Evaluation", "EvaluationMismatchError", "GPipe", "Graph", "InfeasibleError",
    "Interleaved1F1B", "Latency", "Link", "Makespan", "Memory", "Op", "Overflow", "Pin", "PipeDream", "Placement",
    "PlacementError", "Problem", "Replicate", "Route", "SolverUnavailableError", "SpecError", "Stages", "Subgraphs",
    "Throughput", "TrainingMemory", "Workload", "ZeroBubbleH1", "ZeroBubbleV", "evaluate", "load_placement",
    "load_workload", "save_placement", "save_workload",
]
