"""Workloads as data: a graph with the cluster it is meant for, and the native mapping of a graph.

Below the problem layer (a :class:`~placement_dsl.problem.Problem` writes its graph in this mapping) and
the model zoo (which builds workloads); :mod:`placement_dsl.io.workload` reads and writes them as files.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

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

    def check_runnable(self) -> None:
        """Refuse (:class:`SpecError`) a workload with an op that no device of its cluster can run (its ``work``
        names only kinds the cluster has no device of), or a colocation group whose ops share no kind: no
        placement exists, the input itself is contradictory.

        >>> from .graph import Op
        >>> w = Workload(Graph([Op(name="a", work={"tpu": 1.0})], []), Cluster.stages(1))
        >>> w.check_runnable()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        placement_dsl.errors.SpecError: op 'a' runs only on kind 'tpu', and the cluster has no device of it ...
        """
        g = self.graph
        kinds = list(dict.fromkeys(d.kind for d in self.cluster.devices))
        runs = np.column_stack([np.isfinite(g.work(kind)) for kind in kinds])  # (ops, kinds)
        bad = np.flatnonzero(~runs.any(axis=1))
        if bad.size:
            op = g.ops[bad[0]]
            many = len(op.work) > 1
            more = f" ({bad.size - 1} more op{'s' if bad.size > 2 else ''} likewise)" if bad.size > 1 else ""
            raise SpecError(f"op {op.name!r} runs only on kind{'s' if many else ''} {', '.join(map(repr, op.work))}, "
                            f"and the cluster has no device of {'them' if many else 'it'} (its kinds: "
                            f"{', '.join(map(repr, kinds))}){more}; give the op's work on a kind the cluster has, or "
                            "add a device of its kind")
        shared = np.ones((g.n, len(kinds)), dtype=bool)  # per group (indexed by its first op): kinds all members run
        np.logical_and.at(shared, g.group_id, runs)
        split = np.flatnonzero(~shared.any(axis=1))
        if split.size:
            members = np.flatnonzero(g.group_id == split[0])
            ran = "; ".join(f"{g.names[i]!r} on {', '.join(repr(k) for k, ok in zip(kinds, runs[i]) if ok)}"
                            for i in members[:4]) + ("; ..." if members.size > 4 else "")
            raise SpecError(f"colocation group {g.ops[split[0]].group!r}: its ops share a device, but no kind of the "
                            f"cluster runs them all ({ran}); give them a kind in common or split the group")


def check_header(data: dict[str, Any], expected: str) -> None:
    """Refuse a mapping whose ``format`` is not ``expected`` or whose ``version`` this package does not read."""
    fmt = data.get("format", expected)
    if fmt != expected:
        raise SpecError(f"expected format {expected!r}, got {fmt!r}")
    version = data.get("version", VERSION)
    if isinstance(version, bool) or version != VERSION:  # true == 1 in Python, but it is no version number
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
