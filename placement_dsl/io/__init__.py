"""Importers and exporters: workloads (graph + cluster) and placements, in every supported format."""
from .workload import Workload, detect_format, load_placement, load_workload, save_placement, save_workload

__all__ = ["Workload", "detect_format", "load_placement", "load_workload", "save_placement", "save_workload"]
