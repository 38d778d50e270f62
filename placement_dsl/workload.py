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
        """Refuse (:class:`SpecError`) a workload with an op that no device of its cluster can run: its ``work``
        names only kinds the cluster has no device of. No placement exists; the input names kinds it lacks.

        >>> from .graph import Op
        >>> w = Workload(Graph([Op(name="a", work={"tpu": 1.0})], []), Cluster.stages(1))
        >>> w.check_runnable()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        placement_dsl.errors.SpecError: op 'a' runs only on kind 'tpu', and the cluster has no device of it ...
        """
        kinds = list(dict.fromkeys(d.kind for d in self.cluster.devices))
        runs = np.zeros(self.graph.n, dtype=bool)
        for kind in kinds:
            runs |= np.isfinite(self.graph.work(kind))
        bad = np.flatnonzero(~runs)
        if not bad.size:
            return
        op = self.graph.ops[bad[0]]
        named = ", ".join(map(repr, op.work))
        more = f" ({bad.size - 1} more op{'s' if bad.size > 2 else ''} likewise)" if bad.size > 1 else ""
        raise SpecError(f"op {op.name!r} runs only on kind{'s' if len(op.work) > 1 else ''} {named}, and the cluster "
                        f"has no device of {'them' if len(op.work) > 1 else 'it'} (its kinds: "
                        f"{', '.join(map(repr, kinds))}){more}; give the op's work on a kind the cluster has, or add "
                        "a device of its kind")


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
