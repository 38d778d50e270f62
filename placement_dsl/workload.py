"""Workloads as data: a graph with the cluster it is meant for, and the native mapping of a graph.

Below the problem layer (a :class:`~placement_dsl.problem.Problem` writes its graph in this mapping) and
the model zoo (which builds workloads); :mod:`placement_dsl.io.workload` reads and writes them as files.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .cluster import Cluster
from .errors import SpecError
from .graph import Graph

GRAPH_FORMAT = "placement_dsl.graph"
VERSION = 1


@dataclass(frozen=True)
class Workload:
    """A graph with the cluster it is meant for, and where it came from."""

    graph: Graph
    cluster: Cluster
    format: str = "native"
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.graph.name


def check_header(data: dict[str, Any], expected: str) -> None:
    """Refuse a mapping whose ``format`` is not ``expected`` or whose ``version`` this package does not read."""
    fmt = data.get("format", expected)
    if fmt != expected:
        raise SpecError(f"expected format {expected!r}, got {fmt!r}")
    version = data.get("version", VERSION)
    if version != VERSION:
        raise SpecError(f"{expected}: unsupported version {version!r}; this package reads version {VERSION}")


def graph_to_dict(graph: Graph) -> dict[str, Any]:
    """The native mapping of ``graph`` (``format: placement_dsl.graph``)."""
    return {
        "format": GRAPH_FORMAT, "version": VERSION, "name": graph.name,
        "ops": [op.model_dump(exclude_defaults=True) | {"name": op.name} for op in graph.ops],
        "edges": [list(e) for e in graph.edges],
    }


def graph_from_dict(data: dict[str, Any]) -> Graph:
    """The graph of a native mapping; a bad mapping is a :class:`SpecError`."""
    if not isinstance(data, dict):
        raise SpecError(f"'graph' must be a mapping with an 'ops' list, got {type(data).__name__}")
    check_header(data, GRAPH_FORMAT)
    if "ops" not in data:
        raise SpecError("graph mapping needs an 'ops' list")
    return Graph(data["ops"], data.get("edges", []), name=data.get("name", "graph"))
