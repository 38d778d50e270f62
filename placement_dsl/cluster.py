"""Devices and the links between them.

A device runs an op ``v`` in ``work[v][device.kind] / device.speed``. A device that is not
a *host* device pays ``out_bytes / bandwidth`` for every tensor crossing its boundary
(Archer et al. eq. 1, Tarnawski et al. §3: an accelerator reads its inputs from and
writes its outputs to host memory); host devices (CPUs) pay no transfers.

Pairwise links (MOIRAI §III-A) give directed bandwidth and latency between devices. The
*route* between two devices is a list of links (:meth:`Cluster.route`): declared by the
user (``routes=``), else the direct link, else a shortest route (:meth:`Cluster.default_route`).
A transfer of ``s`` bytes over a route takes ``sum of the hops' latencies + s / bottleneck``
(:attr:`Cluster.route_latency`, :attr:`Cluster.route_bandwidth`); each link of the route
carries the tensor (a resource for throughput, a serialized channel under
``Congestion("link")``). With no links at all, transfers go through host memory at each
device's bandwidth.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from functools import cached_property
from typing import Any

import numpy as np

from .errors import SpecError
from .limits import (
    MAX_DEVICES,
    MAX_TOTAL,
    REQUIRED,
    Validated,
    construct,
    count,
    field,
    optional_flag,
    optional_text,
    real,
    text,
    texts,
)
from .limits import name as name_text

ACCELERATOR = "accelerator"
CPU = "cpu"


def _memory(value: Any) -> float:
    value = math.inf if value is None else real(value)  # null in JSON: unlimited
    if math.isnan(value) or value <= 0:
        raise ValueError(f"memory must be > 0 (use inf for unlimited), got {value!r}")
    if math.isfinite(value) and value > MAX_TOTAL:
        raise ValueError(f"memory must be at most {MAX_TOTAL:g} (use inf for unlimited), got {value!r}")
    return value


def _rate(what: str) -> Callable[[Any], float]:
    """The check of a speed or bandwidth: a finite number in ``[1 / MAX_TOTAL, MAX_TOTAL]``."""
    def check(value: Any) -> float:
        value = real(value)
        if math.isnan(value) or math.isinf(value) or value <= 0:
            raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
        if not 1 / MAX_TOTAL <= value <= MAX_TOTAL:
            raise ValueError(f"{what} must lie in [{1 / MAX_TOTAL:g}, {MAX_TOTAL:g}], got {value!r}")
        return value
    return check


class Device(Validated):
    """One device (a pipeline stage, an accelerator or a CPU)."""

    name: str = field(REQUIRED, name_text)
    kind: str = field(ACCELERATOR, text, description="device kind; ops give their work per kind")
    memory: float = field(math.inf, _memory, description="memory capacity (same unit as op bytes); inf, "
                                                         "null in JSON, is unlimited")
    speed: float = field(1.0, _rate("speed"), description="speed factor: time = work / speed")
    bandwidth: float = field(1.0, _rate("bandwidth"), description="transfer bandwidth to the interconnect / host memory")
    host: bool | None = field(None, optional_flag,
                              description="lives in host memory and pays no transfers (default: kind == 'cpu')")
    server: str | None = field(None, optional_text,
                               description="server (machine) holding the device in a hierarchical cluster; "
                                           "labelled devices exchange tensors over their links")
    invocations: bool | None = field(None, optional_flag,
                                     description="single sample: runs its ops as invocations of whole contiguous "
                                                 "subgraphs (Tarnawski §4) rather than one op at a time (MOIRAI); "
                                                 "default: a non-host device of a cluster without links "
                                                 "(Cluster.invocation)")

    def _after(self) -> None:
        if self.host is None:
            self.__dict__["host"] = self.kind == CPU


def _link_bandwidth(value: Any) -> float:
    value = math.inf if value is None else real(value)  # null in JSON: unlimited
    if math.isnan(value) or value <= 0:
        raise ValueError(f"bandwidth must be > 0, got {value!r}")
    return value


def _latency(value: Any) -> float:
    value = real(value)
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise ValueError(f"latency must be a finite number >= 0, got {value!r}")
    return value


class Link(Validated):
    """A directed link ``src -> dst`` with bandwidth (bytes per time unit) and latency."""

    src: str = field(REQUIRED, text)
    dst: str = field(REQUIRED, text)
    bandwidth: float = field(REQUIRED, _link_bandwidth)
    latency: float = field(0.0, _latency)

    def _after(self) -> None:
        if self.src == self.dst:
            raise ValueError("src and dst are the same device; a link joins two different devices")


class Route(Validated):
    """The physical route of transfers ``src -> dst``: the devices it passes, ``path[0] == src`` and
    ``path[-1] == dst``; each step ``path[i] -> path[i + 1]`` must be a link of the cluster."""

    src: str = field(REQUIRED, text)
    dst: str = field(REQUIRED, text)
    path: tuple[str, ...] = field(REQUIRED, texts)

    def _after(self) -> None:
        if self.src == self.dst:
            raise ValueError(f"route {self.src!r} -> {self.dst!r} joins a device to itself")
        if len(self.path) < 2 or self.path[0] != self.src or self.path[-1] != self.dst:
            raise ValueError(f"path {list(self.path)!r} must start at {self.src!r} and end at {self.dst!r}")
        again = next((name for i, name in enumerate(self.path) if name in self.path[:i]), None)
        if again is not None:
            raise ValueError(f"path {list(self.path)!r:.80} passes device {again!r} twice; a route visits each "
                             "device once")


def _route_items(routes: Any) -> list[Any]:
    """Declared routes as :class:`Route` items or mappings: a mapping ``{(src, dst): path}`` or a list."""
    if routes is None:
        return []
    if isinstance(routes, Mapping):
        items = []
        for key, path in routes.items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise SpecError(f"cluster: routes key {key!r:.40} must be a (src, dst) pair of device names")
            if isinstance(path, (str, bytes)) or not isinstance(path, Iterable):
                raise SpecError(f"cluster: route {key[0]!r} -> {key[1]!r}: path must be a list of device names, "
                                f"got {path!r:.40}")
            items.append({"src": key[0], "dst": key[1], "path": tuple(path)})
        return items
    return _listed(routes, "routes")


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


def port_bandwidths(devices: Iterable[Device], links: Iterable[Link]) -> list[Device]:
    """``devices`` with each non-host device's ``bandwidth`` set to its fastest finite outgoing link (its port).

    Pairwise links (MOIRAI) say how fast two devices exchange tensors; a device's own ``bandwidth``
    (what it pays per byte crossing its boundary in a throughput load, Archer et al. eq. 1) is then
    that of its port, not the field's default of one byte per time unit. A device without a finite
    outgoing link keeps its bandwidth.

    >>> devs = port_bandwidths([Device(name="a"), Device(name="b")], [Link(src="a", dst="b", bandwidth=4.0)])
    >>> devs[0].bandwidth, devs[1].bandwidth
    (4.0, 1.0)
    """
    best: dict[str, float] = {}
    for lk in links:
        if math.isfinite(lk.bandwidth):
            best[lk.src] = max(best.get(lk.src, 0.0), lk.bandwidth)
    return [d if d.host or d.name not in best else d.model_copy(update={"bandwidth": best[d.name]})
            for d in devices]


class Cluster:
    """An ordered set of devices (the order is the pipeline order), optional links and declared routes.

    ``routes`` maps ``(src, dst)`` to the devices a transfer passes (or lists :class:`Route` items);
    the pairs it leaves out take :meth:`default_route`.

    Examples
    --------
    >>> c = Cluster.accelerators(2, memory=16.0, cpus=1)
    >>> [d.name for d in c.devices], [d.host for d in c.devices]
    (['acc0', 'acc1', 'cpu0'], [False, False, True])
    >>> line = Cluster([Device(name=n) for n in ("a", "b", "c")],
    ...                [Link(src="a", dst="b", bandwidth=4.0, latency=1.0), Link(src="b", dst="c", bandwidth=2.0, latency=1.0)])
    >>> line.route_links[0][2], float(line.route_latency[0, 2]), float(line.route_bandwidth[0, 2])  # a -> b -> c
    ((0, 1), 2.0, 2.0)
    """

    def __init__(self, devices: Iterable[Device | Mapping[str, Any]], links: Iterable[Link | Mapping[str, Any]] = (),
                 routes: Mapping[tuple[str, str], Iterable[str]] | Iterable[Route | Mapping[str, Any]] | None = None):
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
        link_of: dict[tuple[str, str], int] = {}
        for k, lk in enumerate(self.links):
            for end in (lk.src, lk.dst):
                if end not in self.index:
                    raise SpecError(f"link {lk.src!r} -> {lk.dst!r} names unknown device {end!r}")
            if (lk.src, lk.dst) in link_of:  # which of the two would carry the transfers is no choice to make silently
                raise SpecError(f"link {lk.src!r} -> {lk.dst!r} is declared twice; keep one")
            link_of[lk.src, lk.dst] = k
        self.routes: tuple[Route, ...] = tuple(construct(Route, r, "route", i)
                                               for i, r in enumerate(_route_items(routes)))
        self._declared: dict[tuple[int, int], tuple[int, ...]] = {}
        for r in self.routes:
            for name in r.path:
                if name not in self.index:
                    raise SpecError(f"route {r.src!r} -> {r.dst!r} names unknown device {name!r}")
            key = (self.index[r.src], self.index[r.dst])
            if key in self._declared:
                raise SpecError(f"route {r.src!r} -> {r.dst!r} is declared twice; keep one")
            for a, b in zip(r.path, r.path[1:]):
                if (a, b) not in link_of:
                    raise SpecError(f"route {r.src!r} -> {r.dst!r}: hop {a!r} -> {b!r} is not a link of the cluster")
            self._declared[key] = tuple(link_of[hop] for hop in zip(r.path, r.path[1:]))

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
        >>> c.names, float(c.route_bandwidth[0, 1]), float(c.route_bandwidth[1, 2]), c.routed
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
    def parallel(self) -> np.ndarray:
        """Single sample: devices that run any number of ops at once, each as soon as its inputs are ready (the host
        CPUs of Tarnawski §4, as many cores as the graph is wide): the host flag."""
        return self.host

    @cached_property
    def invocation(self) -> np.ndarray:
        """Single sample: devices that run whole contiguous subgraphs as invocations (reads, compute, writes;
        Tarnawski §4, Fig. 3-4). A device's ``invocations`` flag, else every non-host device of a cluster without
        links (its tensors go through host memory, which it reads and writes itself). Other non-host devices run
        one op at a time with transfer tasks over routes (MOIRAI §III)."""
        default = not self.links
        return np.array([(d.invocations if d.invocations is not None else default) and not d.host
                         for d in self.devices], dtype=bool)

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
        """``(n_ops, n_devices)`` running times of every op on every device (``inf`` = not allowed): a pinned op
        (:attr:`Graph.pinned <placement_dsl.graph.Graph.pinned>`) is allowed on its device only, so every method
        that picks devices by these times honours the pin."""
        cols = [graph.work(d.kind) / d.speed for d in self.devices]
        times = np.column_stack(cols)
        for i, name in getattr(graph, "pinned", {}).items():
            times[i, [d.name != name for d in self.devices]] = np.inf
        return times

    def homogeneous_groups(self) -> list[list[int]]:
        """Indices of devices that are interchangeable (same kind, memory, speed, bandwidth, host, server, execution)."""
        groups: dict[tuple, list[int]] = {}
        for i, d in enumerate(self.devices):
            groups.setdefault((d.kind, d.memory, d.speed, d.bandwidth, d.host, d.server, d.invocations), []).append(i)
        return list(groups.values())

    # ------------------------------------------------------------------ routes
    def default_route(self, a: int, b: int) -> tuple[int, ...] | None:
        """The route ``a -> b`` when none is declared: link indices, ``None`` when ``b`` is unreachable.

        The rule: fewest hops (so the direct link when there is one); among those, the widest
        bottleneck; then the smallest sum of latencies; then the smallest sequence of link indices.
        """
        return () if a == b else self._default_routes(a).get(b)

    def _default_routes(self, a: int) -> dict[int, tuple[int, ...]]:
        """:meth:`default_route` from ``a`` to every reachable device: breadth-first layers, each device
        keeping the routes of its layer that are not beaten on both bottleneck and latency."""
        out = self._out_links
        labels: dict[int, list[tuple[float, float, tuple[int, ...]]]] = {a: [(math.inf, 0.0, ())]}
        layer = [a]
        while layer:
            grown: dict[int, list[tuple[float, float, tuple[int, ...]]]] = {}
            for u in layer:
                for k in out[u]:
                    lk = self.links[k]
                    v = self.index[lk.dst]
                    if v in labels:
                        continue
                    grown.setdefault(v, []).extend((min(bw, lk.bandwidth), lat + lk.latency, path + (k,))
                                                   for bw, lat, path in labels[u])
            for v, labs in grown.items():
                kept, best_lat = [], math.inf
                for lab in sorted(labs, key=lambda t: (-t[0], t[1], t[2])):
                    if lab[1] < best_lat:
                        kept.append(lab)
                        best_lat = lab[1]
                labels[v] = kept
            layer = sorted(grown)
        return {v: labs[0][2] for v, labs in labels.items() if v != a}

    @cached_property
    def _out_links(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(self.size)]
        for k, lk in enumerate(self.links):
            out[self.index[lk.src]].append(k)
        return out

    @cached_property
    def route_links(self) -> tuple[tuple[tuple[int, ...] | None, ...], ...]:
        """``route_links[a][b]``: the links (indices into :attr:`links`) of the route ``a -> b``, in order;
        ``()`` on the diagonal, ``None`` for an unreachable pair. Declared routes win, else
        :meth:`default_route`. Empty rows (all ``None`` off the diagonal) without links: host memory."""
        D = self.size
        if not self.links:
            return tuple(tuple(() if a == b else None for b in range(D)) for a in range(D))
        rows = []
        for a in range(D):
            found = self._default_routes(a)
            rows.append(tuple(() if a == b else self._declared.get((a, b), found.get(b)) for b in range(D)))
        return tuple(rows)

    def route(self, src: str, dst: str) -> list[Link]:
        """The links a transfer ``src -> dst`` crosses, in order (empty without links or on one device)."""
        a, b = self.index.get(src), self.index.get(dst)
        if a is None or b is None:
            raise SpecError(f"route {src!r} -> {dst!r}: unknown device; the cluster has {list(self.index)}")
        hops = self.route_links[a][b]
        if hops is None and self.links:
            raise SpecError(f"route {src!r} -> {dst!r}: no route between these devices (no chain of links)")
        return [self.links[k] for k in hops or ()]

    @cached_property
    def route_bandwidth(self) -> np.ndarray:
        """``(D, D)`` bandwidth from device a to b: the bottleneck (narrowest link) of the route a -> b.

        With no links at all, transfers go through host memory: ``min(bw_a, bw_b)``.
        Unreachable pairs get 0; the diagonal is ``inf``.
        """
        D = self.size
        if not self.links:
            bw = np.minimum.outer(self.bandwidth, self.bandwidth)
            np.fill_diagonal(bw, math.inf)
            return bw
        out = np.zeros((D, D))
        for a in range(D):
            for b in range(D):
                hops = self.route_links[a][b]
                if hops is not None:
                    out[a, b] = min((self.links[k].bandwidth for k in hops), default=math.inf)
        return out

    @cached_property
    def route_latency(self) -> np.ndarray:
        """``(D, D)`` fixed latency of a transfer: the sum of the latencies of its route's links (0 without links)."""
        D = self.size
        lat = np.zeros((D, D))
        for a in range(D):
            for b in range(D):
                hops = self.route_links[a][b]
                if hops:
                    lat[a, b] = sum(self.links[k].latency for k in hops)
        return lat

    def to_dict(self) -> dict[str, Any]:
        return {
            "devices": [d.model_dump(exclude={k for k in ("server", "invocations") if getattr(d, k) is None} or None)
                        for d in self.devices],
            "links": [lk.model_dump() for lk in self.links],
            **({"routes": [{"src": r.src, "dst": r.dst, "path": list(r.path)} for r in self.routes]}
               if self.routes else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cluster:
        if not isinstance(data, Mapping):
            raise SpecError(f"cluster must be a mapping with a 'devices' list, got {type(data).__name__}")
        if "devices" not in data:
            raise SpecError("cluster mapping needs a 'devices' list")
        return cls(data["devices"], data.get("links", ()), data.get("routes"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cluster) and self.devices == other.devices and self.links == other.links \
            and self._declared == other._declared

    def __hash__(self) -> int:
        return hash(self.devices)

    def __repr__(self) -> str:
        kinds: dict[str, int] = {}
        for d in self.devices:
            kinds[d.kind] = kinds.get(d.kind, 0) + 1
        return f"Cluster({', '.join(f'{v}x{k}' for k, v in kinds.items())})"
