"""Importers and exporters: workloads (graph + cluster) and placements, in every supported format."""
from .workload import Workload, load_workload, save_workload, load_placement, save_placement, detect_format

__all__ = ["Workload", "load_workload", "save_workload", "load_placement", "save_placement", "detect_format"]
