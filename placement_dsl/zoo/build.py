"""Shared pieces of the generators: a graph builder, argument checks, the default cluster, the workload."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..errors import SpecError
from ..graph import Graph, Op
from ..workload import Workload
from .costs import ACCELERATOR_MEMORY, PCIE_BANDWIDTH, Cost, op_from_costs
from .training import with_backward


class GraphBuilder:
    """Collects ops and edges in creation order (which is a topological order)."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.edges: list[tuple[str, str]] = []

    def add(self, name: str, pieces: Cost | Sequence[Cost], inputs: Iterable[str] = (), kind: str = "") -> str:
        pieces = [pieces] if isinstance(pieces, Cost) else list(pieces)
        self.ops.append(op_from_costs(name, pieces, **({"type": kind} if kind else {})))
        self.edges.extend((u, name) for u in inputs if u)  # "" = no producer (a graph input)
        return name


def default_cluster(accelerators: int = 4, cpus: int = 1, memory: float = ACCELERATOR_MEMORY) -> Cluster:
    """``accelerators`` devices of ``memory`` bytes and ``cpus`` CPUs on a PCIe-like link (bytes per ms)."""
    return Cluster.accelerators(accelerators, memory=memory, cpus=cpus, bandwidth=PCIE_BANDWIDTH)


def build_workload(name: str, builder: GraphBuilder, training: bool, cluster: Cluster, generator: str,
                   params: dict[str, Any]) -> Workload:
    """The workload of ``builder``'s ops and edges (with their backward pass when ``training``) on ``cluster``,
    its metadata naming the zoo ``generator`` and its ``params``."""
    ops, edges = (with_backward(builder.ops, builder.edges) if training else (builder.ops, builder.edges))
    meta = {"generator": f"placement_dsl.zoo.{generator}", "params": params, "training": training,
            "units": {"time": "ms", "size": "bytes", "bandwidth": "bytes/ms"}}
    return Workload(Graph(ops, edges, name=name), cluster, "native", meta)


def check_positive(generator: str, **values: Any) -> None:
    """Refuse (:class:`SpecError` naming ``generator`` and the key) any of ``values`` that is not an integer >= 1."""
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise SpecError(f"{generator}: {key} must be an integer >= 1, got {value!r}")


def check_choice(generator: str, key: str, value: Any, allowed: Sequence[str]) -> None:
    """Refuse (:class:`SpecError` naming ``generator``, ``key`` and the choices) a ``value`` not in ``allowed``."""
    if value not in allowed:
        raise SpecError(f"{generator}: {key} must be one of {list(allowed)}, got {value!r}")
