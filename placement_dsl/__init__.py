"""placement_dsl: declarative placement of DNN computation graphs onto devices.

Declare a graph and a cluster, score any placement with the one cost model
(:func:`evaluate`), find placements with fast heuristics, and solve exact or relaxed
Pyomo formulations with a certificate (placement, proven lower bound, gap).

The top-level namespace holds the Pyomo-free layers; the modelling layers are imported
from their modules (``placement_dsl.solve.solve``, ``placement_dsl.compile.compile``).
"""
from .cluster import Cluster, Device, Link, Route
from .errors import (EvaluationMismatchError, InfeasibleError, PlacementError, SolverUnavailableError,
                     SpecError)
from .evaluate import CostModel, Evaluation, evaluate
from .graph import Graph, Op
from .io import Workload, load_placement, load_workload, save_placement, save_workload
from .placement import Placement
from .objectives import (Bottleneck, GPipe, Interleaved1F1B, Latency, Makespan, PipeDream, Throughput, ZeroBubbleH1,
                         ZeroBubbleV)
from .constraints import AllowedKinds, Colocate, Congestion, Contiguous, DagOrder, Memory, Overflow, Pin, Subgraphs
from .training_terms import Replicate, TrainingMemory
from .problem import Problem, Stages
from .boundaries import Boundaries

__version__ = "0.1.0"

__all__ = [
    "AllowedKinds", "Bottleneck", "Boundaries", "Colocate", "Contiguous", "DagOrder", "GPipe", "Memory", "Overflow",
    "Pin", "PipeDream", "Problem", "Stages", "Throughput",
    "Congestion", "Interleaved1F1B", "Latency", "Makespan", "Replicate", "Subgraphs", "TrainingMemory", "ZeroBubbleH1",
    "ZeroBubbleV",
    "Cluster", "CostModel", "Device", "Evaluation", "EvaluationMismatchError", "Graph", "InfeasibleError",
    "Link", "Op", "Placement", "PlacementError", "Route", "SolverUnavailableError", "SpecError", "Workload",
    "evaluate", "load_placement", "load_workload", "save_placement", "save_workload",
]
