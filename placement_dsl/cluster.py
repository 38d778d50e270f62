"""Devices and the links between them.

A device runs an op ``v`` in ``work[v][device.kind] / device.speed``. A device that is not
a *host* device pays ``out_bytes / bandwidth`` for every tensor crossing its boundary
(Archer et al. eq. 1, Tarnawski et al. §3: an accelerator reads its inputs from and
writes its outputs to host memory); host devices (CPUs) pay no transfers.

Pairwise links (MOIRAI §III-A) give directed bandwidth and latency between devices for
the latency models; without an explicit link, a multi-hop route's bandwidth is the
bottleneck link of the widest route, and a full mesh through host memory is assumed
when no links are given at all.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any

import numpy as np
from pydantic import ConfigDict, Field, field_validator, model_validator

from .errors import SpecError
from .limits import MAX_DEVICES, MAX_TOTAL, Validated, construct, count

ACCELERATOR = "accelerator"
CPU = "cpu"


class Device(Validated):
    """One device (a pipeline stage, an accelerator or a CPU)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    kind: str = Field(ACCELERATOR, description="device kind; ops give their work per kind")
    memory: float = Field(math.inf, description="memory capacity (same unit as op bytes)")
    speed: float = Field(1.0, description="speed factor: time = work / speed")
    bandwidth: float = Field(1.0, description="transfer bandwidth to the interconnect / host memory")
    host: bool | None = Field(None, description="lives in host memory and pays no transfers (default: kind == 'cpu')")
    server: str | None = Field(None, description="server (machine) holding the device in a hierarchical cluster; "
                                                 "labelled devices exchange tensors over their links")

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: float) -> float:
        if math.isnan(value) or value <= 0:
            raise ValueError(f"memory must be > 0 (use inf for unlimited), got {value!r}")
        if math.isfinite(value) and value > MAX_TOTAL:
            raise ValueError(f"memory must be at most {MAX_TOTAL:g} (use inf for unlimited), got {value!r}")
        return float(value)

    @field_validator("speed", "bandwidth")
    @classmethod
    def _positive(cls, value: float, info: Any) -> float:
        if math.isnan(value) or math.isinf(value) or value <= 0:
            raise ValueError(f"{info.field_name} must be a finite number > 0, got {value!r}")
        if not 1 / MAX_TOTAL <= value <= MAX_TOTAL:
            raise ValueError(f"{info.field_name} must lie in [{1 / MAX_TOTAL:g}, {MAX_TOTAL:g}], got {value!r}")
        return float(value)

    @model_validator(mode="after")
    def _default_host(self) -> Device:
        if self.host is None:
            object.__setattr__(self, "host", self.kind == CPU)
        return self


class Link(Validated):
    """A directed link ``src -> dst`` with bandwidth (bytes per time unit) and latency."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    src: str
    dst: str
    bandwidth: float
    latency: float = 0.0

    @field_validator("bandwidth")
    @classmethod
    def _bw(cls, value: float) -> float:
        if math.isnan(value) or value <= 0:
            raise ValueError(f"bandwidth must be > 0, got {value!r}")
        return float(value)

    @field_validator("latency")
    @classmethod
    def _lat(cls, value: float) -> float:
        if math.isnan(value) or math.isinf(value) or value < 0:
            raise ValueError(f"latency must be a finite number >= 0, got {value!r}")
        return float(value)


def _listed(value: Any, what: str) -> list[Any]:
    """``value`` as a list of at most :data:`MAX_DEVICES` items (``MAX_DEVICES**2`` for links); a string, a
    mapping or a number is refused."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise SpecError(f"cluster: {what} must be a list, got {type(value).__name__} {value!r:.40}")
    items = list(value)
    limit = MAX_DEVICES if what == "devices" else MAX_DEVICES**2
    if len(items) > limit:
        raise SpecError(f"cluster: {len(items)} {what}, more than the {limit} this package handles")
    return items


class Cluster:
    """An ordered set of devices (the order is the pipeline order) and optional links.

    Examples
    --------
    >>> c = Cluster.accelerators(2, memory=16.0, cpus=1)
    >>> [d.name for d in c.devices], [d.host for d in c.devices]
    (['acc0', 'acc1', 'cpu0'], [False, False, True])
    """

    def __init__(self, devices: Iterable[Device | Mapping[str, Any]], links: Iterable[Link | Mapping[str, Any]] = ()):
        self.devices: tuple[Device, ...] = tuple(construct(Device, d, "device", i)
                                                 for i, d in enumerate(_listed(devices, "devices")))
        if not self.devices:
            raise SpecError("cluster has no devices; add at least one device")
        self.index: dict[str, int] = {}
        for i, d in enumerate(self.devices):
            if d.name in self.index:
                raise SpecError(f"cluster: duplicate device name {d.name!r}")
            self.index[d.name] = i
        self.links: tuple[Link, ...] = tuple(construct(Link, lk, "link", i) for i, lk in enumerate(_listed(links, "links")))
        for lk in self.links:
            for end in (lk.src, lk.dst):
                if end not in self.index:
                    raise SpecError(f"link {lk.src!r} -> {lk.dst!r} names unknown device {end!r}")

    # ------------------------------------------------------------------ shorthands
    @classmethod
    def stages(cls, k: int, memory: float = math.inf, bandwidth: float = 1.0, kind: str = ACCELERATOR) -> Cluster:
        """``k`` identical pipeline stages (Archer et al.): every stage pays its IO."""
        k = count(k, "Cluster.stages: k", 1)
        return cls(Device(name=f"stage{i}", kind=kind, memory=memory, bandwidth=bandwidth) for i in range(k))

    @classmethod
    def accelerators(
        cls, k: int, memory: float = math.inf, cpus: int = 0, bandwidth: float = 1.0,
        kind: str = ACCELERATOR, cpu_memory: float = math.inf,
    ) -> Cluster:
        """``k`` identical accelerators and ``cpus`` CPUs (Tarnawski et al. §3)."""
        k, cpus = count(k, "Cluster.accelerators: k"), count(cpus, "Cluster.accelerators: cpus")
        if k + cpus > MAX_DEVICES:
            raise SpecError(f"Cluster.accelerators: k + cpus = {k + cpus} devices, more than {MAX_DEVICES}")
        if k + cpus == 0:
            raise SpecError(f"Cluster.accelerators: need k + cpus >= 1 with both >= 0, got k={k}, cpus={cpus}")
        accs = [Device(name=f"acc{i}", kind=kind, memory=memory, bandwidth=bandwidth) for i in range(k)]
        cpu = [Device(name=f"cpu{i}", kind=CPU, memory=cpu_memory, bandwidth=bandwidth) for i in range(cpus)]
        return cls(accs + cpu)

    @classmethod
    def hierarchical(cls, servers: int, per_server: int, *, intra: float, inter: float,
                     memory: float = math.inf, kind: str = ACCELERATOR) -> Cluster:
        """``servers`` machines of ``per_server`` identical accelerators (Tarnawski App. C.3; PipeDream).

        Device ``s{i}g{j}`` is accelerator ``j`` of server ``i`` (server-major pipeline order).
        Every ordered pair of devices has a link: ``intra`` bytes per time unit inside a
        server, ``inter`` between servers. The devices carry their server, which makes the
        cost model route every transfer over the link between its two devices
        (:attr:`routed`) instead of through host memory.

        >>> c = Cluster.hierarchical(2, 2, intra=10.0, inter=1.0)
        >>> c.names, c.route_bandwidth[0, 1], c.route_bandwidth[1, 2], c.routed
        (('s0g0', 's0g1', 's1g0', 's1g1'), 10.0, 1.0, True)
        """
        servers, per_server = count(servers, "Cluster.hierarchical: servers"), count(per_server, "per_server")
        if servers * per_server > MAX_DEVICES:
            raise SpecError(f"Cluster.hierarchical: {servers} x {per_server} devices, more than {MAX_DEVICES}")
        if servers < 1 or per_server < 1:
            raise SpecError(f"Cluster.hierarchical: need servers >= 1 and per_server >= 1, got servers={servers}, "
                            f"per_server={per_server}")
        for name, value in (("intra", intra), ("inter", inter)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise SpecError(f"Cluster.hierarchical: {name} bandwidth must be a finite number > 0, got {value!r}")
        devices = [Device(name=f"s{i}g{j}", kind=kind, memory=memory, bandwidth=intra, server=f"s{i}")
                   for i in range(servers) for j in range(per_server)]
        links = [Link(src=a.name, dst=b.name, bandwidth=intra if a.server == b.server else inter)
                 for a in devices for b in devices if a is not b]
        return cls(devices, links)

    # ------------------------------------------------------------------ views
    @property
    def size(self) -> int:
        return len(self.devices)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.devices)

    @cached_property
    def memory(self) -> np.ndarray:
        return np.array([d.memory for d in self.devices], dtype=float)

    @cached_property
    def speed(self) -> np.ndarray:
        return np.array([d.speed for d in self.devices], dtype=float)

    @cached_property
    def bandwidth(self) -> np.ndarray:
        return np.array([d.bandwidth for d in self.devices], dtype=float)

    @cached_property
    def host(self) -> np.ndarray:
        return np.array([bool(d.host) for d in self.devices], dtype=bool)

    @cached_property
    def servers(self) -> np.ndarray:
        """Server index of every device (order of first appearance), ``-1`` for unlabelled devices."""
        labels = [d.server for d in self.devices]
        known = list(dict.fromkeys(x for x in labels if x is not None))
        return np.array([known.index(x) if x is not None else -1 for x in labels], dtype=np.int64)

    @property
    def routed(self) -> bool:
        """Devices carry servers (:meth:`hierarchical`): transfers run over the route between the two
        devices (:attr:`route_bandwidth`) rather than through host memory at each device's bandwidth."""
        return bool((self.servers >= 0).any())

    @cached_property
    def transfer_scale(self) -> np.ndarray:
        """Time per byte crossing each device's boundary (0 for host devices)."""
        return np.where(self.host, 0.0, 1.0 / self.bandwidth)

    def device(self, name: str) -> Device:
        try:
            return self.devices[self.index[name]]
        except KeyError:
            raise SpecError(f"unknown device {name!r}; the cluster has {list(self.index)}") from None

    def times(self, graph: Any) -> np.ndarray:
        """``(n_ops, n_devices)`` running times of every op on every device (``inf`` = not allowed)."""
        cols = [graph.work(d.kind) / d.speed for d in self.devices]
        return np.column_stack(cols)

    def homogeneous_groups(self) -> list[list[int]]:
        """Indices of devices that are interchangeable (same kind, memory, speed, bandwidth, host, server)."""
        groups: dict[tuple, list[int]] = {}
        for i, d in enumerate(self.devices):
            groups.setdefault((d.kind, d.memory, d.speed, d.bandwidth, d.host, d.server), []).append(i)
        return list(groups.values())

    # ------------------------------------------------------------------ routes
    @cached_property
    def route_bandwidth(self) -> np.ndarray:
        """``(D, D)`` bandwidth from device a to b: a direct link, else the widest route's bottleneck.

        With no links at all, transfers go through host memory: ``min(bw_a, bw_b)``.
        Unreachable pairs get 0.
        """
        D = self.size
        if not self.links:
            bw = np.minimum.outer(self.bandwidth, self.bandwidth)
            np.fill_diagonal(bw, math.inf)
            return bw
        adj: dict[int, list[tuple[int, float]]] = {i: [] for i in range(D)}
        for lk in self.links:
            adj[self.index[lk.src]].append((self.index[lk.dst], lk.bandwidth))
        out = np.zeros((D, D))
        for s in range(D):  # widest-path Dijkstra from each source
            best = np.zeros(D)
            best[s] = math.inf
            heap = [(-math.inf, s)]
            while heap:
                neg, u = heapq.heappop(heap)
                if -neg < best[u]:
                    continue
                for v, b in adj[u]:
                    w = min(-neg, b)
                    if w > best[v]:
                        best[v] = w
                        heapq.heappush(heap, (-w, v))
            out[s] = best
        direct = np.zeros((D, D))  # a direct link is the channel (MOIRAI §III-A); routes only for unlinked pairs
        for lk in self.links:
            a, b = self.index[lk.src], self.index[lk.dst]
            direct[a, b] = max(direct[a, b], lk.bandwidth)
        np.fill_diagonal(direct, 0.0)
        return np.where(direct > 0, direct, out)

    @cached_property
    def route_latency(self) -> np.ndarray:
        """``(D, D)`` fixed latency of a transfer (direct link latency, else 0)."""
        lat = np.zeros((self.size, self.size))
        for lk in self.links:
            lat[self.index[lk.src], self.index[lk.dst]] = lk.latency
        return lat

    def to_dict(self) -> dict[str, Any]:
        return {
            "devices": [d.model_dump(exclude={"server"} if d.server is None else None) for d in self.devices],
            "links": [lk.model_dump() for lk in self.links],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cluster:
        if not isinstance(data, Mapping):
            raise SpecError(f"cluster must be a mapping with a 'devices' list, got {type(data).__name__}")
        if "devices" not in data:
            raise SpecError("cluster mapping needs a 'devices' list")
        return cls(data["devices"], data.get("links", ()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cluster) and self.devices == other.devices and self.links == other.links

    def __hash__(self) -> int:
        return hash(self.devices)

    def __repr__(self) -> str:
        kinds: dict[str, int] = {}
        for d in self.devices:
            kinds[d.kind] = kinds.get(d.kind, 0) + 1
        return f"Cluster({', '.join(f'{v}x{k}' for k, v in kinds.items())})"
