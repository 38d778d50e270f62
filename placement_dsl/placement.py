"""Placements: which device runs each op (devices in pipeline order), and classes of placements."""
from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from .cluster import Cluster
from .deprecated import forward
from .errors import SpecError
from .graph import Graph
from .replication import ReplicaSpec, replica_sets, replicas_dict
from .schedule import Schedule

if TYPE_CHECKING:
    from .evaluate import CostModel, Evaluation

PLACEMENT_FORMAT = "placement_dsl.placement"


class PlacementClass(enum.Flag):
    """Classes of placements a bound or an optimum holds for; ``a in b`` iff ``a`` is a subclass of ``b``.

    Built from four disjoint parts: DAG-ordered and contiguous (:attr:`DP`, the class of
    Tarnawski et al.'s DP over ideals), contiguous with a cyclic quotient, DAG-ordered but not
    contiguous, and the rest. A bound over ``b`` covers a problem over ``a`` when ``a in b``.

    >>> PlacementClass.DP in PlacementClass.CONTIGUOUS, PlacementClass.CONTIGUOUS in PlacementClass.DP
    (True, False)
    >>> str(PlacementClass.DAG_ORDERED)
    'dag-ordered placements'
    """

    DP = 1
    CYCLIC_CONTIGUOUS = 2
    ORDERED_SPLIT = 4
    OTHER = 8
    CONTIGUOUS = DP | CYCLIC_CONTIGUOUS
    DAG_ORDERED = DP | ORDERED_SPLIT
    ALL = DP | CYCLIC_CONTIGUOUS | ORDERED_SPLIT | OTHER

    def __str__(self) -> str:
        return _CLASS_NAMES.get(self, self.name or repr(self))


_CLASS_NAMES = {
    PlacementClass.ALL: "all placements", PlacementClass.CONTIGUOUS: "contiguous placements",
    PlacementClass.DAG_ORDERED: "dag-ordered placements",
    PlacementClass.DP: "dag-ordered contiguous placements (DP class)",
}


class Placement:
    """An assignment op -> device for one graph on one cluster.

    ``assign[i]`` is the index (in ``cluster.devices``) of the device running op ``i``.
    The cluster's device order is the pipeline order. ``schedule`` optionally says when each
    op and transfer runs (:class:`~placement_dsl.schedule.Schedule`, scored by the makespan
    objective). ``replicas`` optionally runs a device's stage on several devices (Tarnawski
    App. C.2): one count per device, or ``{device: count or [device names]}``
    (:func:`~placement_dsl.replication.replica_sets`); default 1 each. Equality looks at the
    assignment and the replicas, hashing at the assignment: a schedule is an annotation of
    the placement, not part of what it is.

    Examples
    --------
    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name="a", work=1), Op(name="b", work=2)], [("a", "b")])
    >>> p = Placement.from_mapping(g, Cluster.stages(2), {"a": "stage0", "b": "stage1"})
    >>> p.device_of("b"), p.ops_on("stage0")
    ('stage1', ['a'])
    """

    def __init__(self, graph: Graph, cluster: Cluster, assign: Sequence[int] | np.ndarray, source: str = "",
                 *, schedule: Schedule | None = None, replicas: ReplicaSpec = None):
        arr = np.asarray(assign)
        if arr.shape != (graph.n,):
            raise SpecError(f"placement for graph {graph.name!r} needs {graph.n} device indices, got shape {arr.shape}")
        if arr.size and (not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0 or arr.max() >= cluster.size):
            bad = int(np.flatnonzero((arr < 0) | (arr >= cluster.size))[0]) if np.issubdtype(arr.dtype, np.integer) else 0
            raise SpecError(
                f"placement: op {graph.names[bad]!r} has device index {arr[bad].item()!r}; valid are 0..{cluster.size - 1}"
            )
        self.graph = graph
        self.cluster = cluster
        self.assign = arr.astype(np.int64)
        self.assign.setflags(write=False)
        self.source = source
        if schedule is not None and schedule.start.shape != (graph.n,):
            raise SpecError(f"placement for graph {graph.name!r}: its schedule has {schedule.start.size} op start "
                            f"times for {graph.n} ops")
        self.schedule = schedule
        self.replica_sets = replica_sets(cluster, self.assign, replicas)

    @cached_property
    def op_times(self) -> np.ndarray:
        """Each op's running time on its device (``inf`` where it may not run there): :meth:`Cluster.times
        <placement_dsl.cluster.Cluster.times>` at the assignment, computed once per placement (read-only), as the
        cost model's parts each read it."""
        times = self.cluster.times(self.graph)[np.arange(self.graph.n), self.assign]
        times.setflags(write=False)
        return times

    @property
    def replicas(self) -> np.ndarray:
        """Replica count of every device's stage (1 for unreplicated stages and idle devices)."""
        return np.array([len(m) for m in self.replica_sets], dtype=np.int64)

    @property
    def replicated(self) -> bool:
        return any(len(m) > 1 for m in self.replica_sets)

    def with_replicas(self, replicas: ReplicaSpec) -> Placement:
        """The same assignment (and schedule) with other replicas."""
        return Placement(self.graph, self.cluster, self.assign, self.source, schedule=self.schedule,
                         replicas=replicas)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_mapping(cls, graph: Graph, cluster: Cluster, mapping: Mapping[str, str], source: str = "",
                     *, schedule: Schedule | None = None, replicas: ReplicaSpec = None) -> Placement:
        """From ``{op name: device name}``; every op must be placed exactly once."""
        assign = np.full(graph.n, -1, dtype=np.int64)
        for op, dev in mapping.items():
            if not isinstance(dev, str):
                raise SpecError(f"placement puts op {op!r:.40} on {dev!r:.40}, which is not a device name")
            if op not in graph.index:
                raise SpecError(f"placement names unknown op {op!r} (graph {graph.name!r})")
            if dev not in cluster.index:
                raise SpecError(f"placement puts op {op!r} on unknown device {dev!r}; devices are {list(cluster.index)}")
            assign[graph.index[op]] = cluster.index[dev]
        missing = np.flatnonzero(assign < 0)
        if missing.size:
            names = [graph.names[i] for i in missing[:5]]
            raise SpecError(f"placement leaves {missing.size} op(s) unplaced, e.g. {names}; place every op once")
        return cls(graph, cluster, assign, source, schedule=schedule, replicas=replicas)

    @classmethod
    def from_groups(cls, graph: Graph, cluster: Cluster, groups: Mapping[str, Sequence[str]], source: str = "") -> Placement:
        """From ``{device name: [op names]}``; an op listed twice is an error."""
        mapping: dict[str, str] = {}
        for dev, ops in groups.items():
            for op in ops:
                if op in mapping and mapping[op] != dev:
                    raise SpecError(f"placement puts op {op!r} on two devices: {mapping[op]!r} and {dev!r}")
                mapping[op] = dev
        return cls.from_mapping(graph, cluster, mapping, source)

    @classmethod
    def from_dict(cls, graph: Graph, cluster: Cluster, data: Mapping[str, Any]) -> Placement:
        if data.get("format", PLACEMENT_FORMAT) != PLACEMENT_FORMAT:
            raise SpecError(f"not a placement file: format {data.get('format')!r}")
        if "assignment" not in data:
            raise SpecError("placement mapping needs an 'assignment' {op: device}")
        if not isinstance(data["assignment"], Mapping):
            raise SpecError(f"placement: 'assignment' must map op names to device names, got "
                            f"{type(data['assignment']).__name__} {data['assignment']!r:.40}")
        schedule = Schedule.from_dict(graph, cluster, data["schedule"]) if data.get("schedule") is not None else None
        return cls.from_mapping(graph, cluster, data["assignment"], data.get("source", ""), schedule=schedule,
                                replicas=data.get("replicas"))

    # ------------------------------------------------------------------ views
    def device_of(self, op: str) -> str:
        try:
            return self.cluster.devices[self.assign[self.graph.index[op]]].name
        except KeyError:
            raise SpecError(f"unknown op {op!r}") from None

    def ops_on(self, device: str) -> list[str]:
        d = self.cluster.index.get(device)
        if d is None:
            raise SpecError(f"unknown device {device!r}; devices are {list(self.cluster.index)}")
        return [self.graph.names[i] for i in np.flatnonzero(self.assign == d)]

    def mapping(self) -> dict[str, str]:
        """``{op name: device name}``."""
        names = self.cluster.names
        return {op: names[d] for op, d in zip(self.graph.names, self.assign)}

    def members(self) -> list[np.ndarray]:
        """Op indices on each device, in device order."""
        order = np.argsort(self.assign, kind="stable")
        bounds = np.searchsorted(self.assign[order], np.arange(1, self.cluster.size))
        return np.split(order, bounds)

    def used_devices(self) -> list[str]:
        return [self.cluster.names[d] for d in np.unique(self.assign)]

    def split_points(self, order: Sequence[int] | np.ndarray | None = None) -> list[int]:
        """Positions in ``order`` (default: the graph's topological order) where the device changes."""
        order = self.graph.topo if order is None else np.asarray(order)
        seq = self.assign[order]
        return [int(i) for i in np.flatnonzero(seq[1:] != seq[:-1]) + 1]

    def evaluate(self, model: CostModel | None = None) -> Evaluation:
        """Deprecated: ``placement_dsl.evaluate(placement, model)``, the one evaluation entry.

        The cost model sits above placements, so this method reaches up the layers; it goes in the next release.
        """
        return forward("Placement.evaluate()", "placement_dsl.evaluate:evaluate", self, model,
                       instead="placement_dsl.evaluate(placement, model)")

    def table(self, model: CostModel | None = None) -> str:
        """Deprecated: ``placement_dsl.evaluate(placement, model).table()``."""
        return forward("Placement.table()", "placement_dsl.evaluate:evaluate", self, model,
                       instead="placement_dsl.evaluate(placement, model).table()").table()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": PLACEMENT_FORMAT, "version": 1, "graph": self.graph.name}
        if self.source:
            out["source"] = self.source
        out["assignment"] = self.mapping()
        if self.schedule is not None:
            out["schedule"] = self.schedule.to_dict(self.graph, self.cluster)
        if self.replicated:
            out["replicas"] = replicas_dict(self.cluster, self.replica_sets)
        return out

    def with_cluster(self, cluster: Cluster) -> Placement:
        """The same op -> device-name mapping (and schedule, by names) on another cluster with those device names."""
        schedule = None
        if self.schedule is not None:
            schedule = Schedule.from_dict(self.graph, cluster, self.schedule.to_dict(self.graph, self.cluster))
        replicas = replicas_dict(self.cluster, self.replica_sets) or None
        return Placement.from_mapping(self.graph, cluster, self.mapping(), self.source, schedule=schedule,
                                      replicas=replicas)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Placement):
            return NotImplemented
        same_graph = self.graph is other.graph or self.graph == other.graph
        return (same_graph and self.cluster == other.cluster and bool(np.array_equal(self.assign, other.assign))
                and self.replica_sets == other.replica_sets)

    def __hash__(self) -> int:
        return hash(self.assign.tobytes())

    def __repr__(self) -> str:
        used = len(np.unique(self.assign))
        src = f", source={self.source!r}" if self.source else ""
        rep = f", replicas={replicas_dict(self.cluster, self.replica_sets)}" if self.replicated else ""
        return f"Placement({self.graph.name!r}: {self.graph.n} ops on {used}/{self.cluster.size} devices{src}{rep})"
