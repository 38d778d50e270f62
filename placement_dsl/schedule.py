"""Schedules on heterogeneous devices: when each op runs and when each tensor moves.

MOIRAI (Zhang et al., §III-D) scores a placement by its makespan on the augmented DAG
(eq. 3-4): ops run for their time on their device (eq. 4b), one at a time per device
(eq. 6), after their inputs (eq. 4a); a tensor crossing devices is a transfer task that
starts after its producer ends and occupies the link (eq. 7-8). Here a transfer is one
task per (producer ``u``, receiving device ``d``): ``u``'s output moves once to every other
device holding a consumer, as in the rest of the cost model. Its duration is the exact
MOIRAI matrix entry ``op.attrs["transfer_time"][dev(u)][d]`` where the op carries one
(:mod:`placement_dsl.io.moirai`), else ``out_bytes / route_bandwidth + route_latency``
(bytes over bytes per time unit, plus a time; :class:`~placement_dsl.cluster.Cluster`).

Congestion (:class:`Congestion`) says which transfers may not overlap: a transfer holds the
resources :class:`~placement_dsl.congestion.TransferResources` names (ports, its channel, or
under ``"link"`` every link of its route, MOIRAI's channel generalized to multi-hop routes) for
its whole duration, and two transfers holding one resource run one at a time. Ops and transfers of
zero duration are instants: they occupy neither a device nor a link (MOIRAI's flows are
not operators, so eq. 6 does not constrain them; zero-time flows carry no data).

:func:`check_schedule` referees a given schedule; :func:`list_schedule` builds one for a
fixed assignment by list scheduling (HEFT, Topcuoglu et al. 2002), so the cost model can
always answer.
"""
from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from .cluster import Cluster
from .congestion import Congestion, Resource, TransferResources
from .errors import SpecError
from .graph import Graph

if TYPE_CHECKING:
    from .placement import Placement

REL_TOL = 1e-9
MAX_REPORT = 10  # messages per kind of violation; the rest are counted


# ---------------------------------------------------------------------------- transfer durations
def exact_transfer_table(graph: Graph, D: int) -> tuple[np.ndarray, np.ndarray]:
    """``(pos, stack)``: ``stack[pos[u]]`` is op ``u``'s exact ``(D, D)`` transfer times; ``pos[u] = -1`` without one.

    Read-only, built once per graph and device count: every schedule and evaluation reads it (twice per evaluation),
    and building it from the ops' matrices took 0.16 s of CPU each time on a 20,000-task sheet (63,874 ops), a third
    of an evaluation of a placement that carries its schedule."""
    cache = graph.__dict__.setdefault("_exact_transfers", {})
    if D not in cache:
        cache[D] = tuple(_readonly(x) for x in _exact_transfer_table(graph, D))
    return cache[D]


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr


def _exact_transfer_table(graph: Graph, D: int) -> tuple[np.ndarray, np.ndarray]:
    pos = np.full(graph.n, -1, dtype=np.int64)
    mats = []
    for i, op in enumerate(graph.ops):
        exact = op.attrs.get("transfer_time")
        if exact is None:
            continue
        mat = np.asarray(exact, dtype=float)
        if mat.shape != (D, D) or not (mat >= 0).all():
            raise SpecError(f"op {op.name!r}: transfer_time must be a {D} x {D} matrix of times >= 0 (one row and "
                            f"column per device), got shape {mat.shape}: {exact!r}")
        pos[i] = len(mats)
        mats.append(mat)
    return pos, (np.stack(mats) if mats else np.zeros((0, D, D)))


def transfer_durations(graph: Graph, cluster: Cluster, prod: np.ndarray, src: np.ndarray,
                       dst: np.ndarray) -> np.ndarray:
    """Time to move each producer's output from device ``src`` to ``dst`` (element-wise arrays).

    ``out_bytes / route_bandwidth + route_latency`` (a tensor of zero bytes pays only the
    latency; an unreachable pair takes ``inf``), replaced by the MOIRAI matrix entry where
    the producer carries ``attrs["transfer_time"]``.
    """
    prod, src, dst = (np.asarray(x, dtype=np.int64) for x in (prod, src, dst))
    size = graph.out_bytes[prod]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(size > 0, size / cluster.route_bandwidth[src, dst], 0.0) + cluster.route_latency[src, dst]
    pos, stack = exact_transfer_table(graph, cluster.size)
    exact = pos[prod] >= 0
    out[exact] = stack[pos[prod[exact]], src[exact], dst[exact]]
    return np.where(src == dst, 0.0, out)


def transfer_tasks(placement: Placement) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(producer, receiving device, duration)`` of every transfer a placement needs, sorted.

    One task per producer ``u`` and device ``d != dev(u)`` holding a consumer of ``u``.
    """
    g, a = placement.graph, placement.assign
    cross = a[g.src] != a[g.dst]
    keys = np.unique(g.src[cross] * placement.cluster.size + a[g.dst[cross]])
    prod, recv = np.divmod(keys, placement.cluster.size)
    return prod, recv, transfer_durations(g, placement.cluster, prod, a[prod], recv)


# ---------------------------------------------------------------------------- the schedule
@dataclass(frozen=True, eq=False)
class Schedule:
    """Start times of ops (``start[i]``, op index order) and of transfers.

    ``transfer_start[(u, d)]`` is when op ``u``'s output starts moving to device index ``d``.
    Finish times follow from the placement (op time on its device, transfer durations).
    Equality compares the times exactly.
    """

    start: np.ndarray
    transfer_start: Mapping[tuple[int, int], float]

    def __post_init__(self) -> None:
        start = np.array(self.start, dtype=float)
        if start.ndim != 1 or not np.isfinite(start).all():
            raise SpecError(f"schedule: op start times must be a 1-d array of finite numbers, got {self.start!r}")
        start.setflags(write=False)
        times = {(int(u), int(d)): float(t) for (u, d), t in self.transfer_start.items()}
        bad = [(key, t) for key, t in times.items() if not math.isfinite(t)]
        if bad:
            raise SpecError(f"schedule: transfer (op #, device #) {bad[0][0]} starts at {bad[0][1]!r}; give a finite time")
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "transfer_start", MappingProxyType(times))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its times (a read-only view does not pickle): e.g. a heuristic's answer from a child process."""
        return (Schedule, (self.start, dict(self.transfer_start)))

    def to_dict(self, graph: Graph, cluster: Cluster) -> dict[str, Any]:
        """``{"ops": {op: start}, "transfers": [{"op", "device", "start"}]}`` by names (strict JSON)."""
        if self.start.shape != (graph.n,):
            raise SpecError(f"schedule has {self.start.size} op start times, graph {graph.name!r} has {graph.n} ops")
        transfers = [{"op": graph.names[u], "device": cluster.names[d], "start": t}
                     for (u, d), t in sorted(self.transfer_start.items())]
        return {"ops": dict(zip(graph.names, self.start.tolist())), "transfers": transfers}

    @classmethod
    def from_dict(cls, graph: Graph, cluster: Cluster, data: Mapping[str, Any]) -> Schedule:
        """Inverse of :meth:`to_dict`; every op needs a start time."""
        if not isinstance(data, Mapping):
            raise SpecError(f"schedule must be a mapping with 'ops' and 'transfers', got {type(data).__name__}")
        ops = data.get("ops")
        if not isinstance(ops, Mapping):
            raise SpecError("schedule mapping needs 'ops': {op name: start time}")
        start = np.full(graph.n, math.nan)
        for name, t in ops.items():
            if name not in graph.index:
                raise SpecError(f"schedule names unknown op {name!r} (graph {graph.name!r})")
            start[graph.index[name]] = _time(t, f"op {name!r}")
        if np.isnan(start).any():
            missing = [graph.names[i] for i in np.flatnonzero(np.isnan(start))[:5]]
            raise SpecError(f"schedule gives no start time for {int(np.isnan(start).sum())} op(s), e.g. {missing}")
        transfers = {}
        items = data.get("transfers", [])
        if not isinstance(items, list) or not all(isinstance(item, Mapping) for item in items):
            raise SpecError(f"schedule: 'transfers' must be a list of {{'op', 'device', 'start'}}, got {items!r:.40}")
        for item in items:
            op, dev = item.get("op"), item.get("device")
            if not isinstance(op, str) or not isinstance(dev, str) or op not in graph.index or dev not in cluster.index:
                raise SpecError(f"schedule transfer names unknown op {op!r} or device {dev!r}")
            transfers[(graph.index[op], cluster.index[dev])] = _time(item.get("start"), f"transfer of {op!r} to {dev!r}")
        return cls(start, transfers)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schedule):
            return NotImplemented
        return bool(np.array_equal(self.start, other.start)) and dict(self.transfer_start) == dict(other.transfer_start)


def _time(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SpecError(f"schedule: {what} starts at {value!r}; give a finite number")
    return float(value)


# ---------------------------------------------------------------------------- checking
def _report(out: list[str], messages: list[str], kind: str) -> None:
    out.extend(messages[:MAX_REPORT])
    if len(messages) > MAX_REPORT:
        out.append(f"... and {len(messages) - MAX_REPORT} more {kind} violations")


def _overlaps(group: np.ndarray, start: np.ndarray, finish: np.ndarray, tol: float) -> list[tuple[int, int]]:
    """Pairs ``(i, j)`` of intervals in one group with ``j`` starting before ``i`` (started earlier) ends."""
    pairs = []
    for g in np.unique(group):
        idx = np.flatnonzero(group == g)
        idx = idx[np.lexsort((finish[idx], start[idx]))]
        top = np.maximum.accumulate(finish[idx])
        bad = np.flatnonzero(start[idx[1:]] < top[:-1] - tol) + 1
        first = np.searchsorted(top, top[bad - 1], side="left")  # the interval that reached that finish
        pairs.extend(zip(idx[first].tolist(), idx[bad].tolist()))
    return pairs


def _given_transfers(p: Placement, schedule: Schedule, prod: np.ndarray, recv: np.ndarray,
                     out: list[str]) -> np.ndarray:
    """Start of each needed transfer (``nan`` when missing); missing and extra ones are reported."""
    D, g, c = p.cluster.size, p.graph, p.cluster
    need = dict(zip((prod * D + recv).tolist(), range(prod.size)))
    ts = np.full(prod.size, math.nan)
    extra = []
    for (u, d), t in schedule.transfer_start.items():
        k = need.get(u * D + d) if 0 <= u < g.n and 0 <= d < D else None
        if k is None:
            what = f"op {g.names[u]!r} to device {c.names[d]!r}" if 0 <= u < g.n and 0 <= d < D else f"({u}, {d})"
            extra.append(f"transfer of {what} at {t:.6g} is not needed (no consumer there, or same device)")
        else:
            ts[k] = t
    missing = [f"missing transfer of op {g.names[u]!r}'s output from device {c.names[p.assign[u]]!r} to "
               f"{c.names[d]!r}" for u, d in zip(prod[np.isnan(ts)], recv[np.isnan(ts)])]
    _report(out, missing, "missing-transfer")
    _report(out, extra, "extra-transfer")
    return ts


def _precedence(p: Placement, start: np.ndarray, finish: np.ndarray, keys: np.ndarray, arrive: np.ndarray,
                tol: float) -> list[str]:
    """Ops starting before a same-device predecessor ends or a cross-device input arrives."""
    g, c, a = p.graph, p.cluster, p.assign
    u, v = g.src, g.dst
    same = a[u] == a[v]
    at = np.where(same, 0, np.searchsorted(keys, u * c.size + a[v]).clip(max=max(keys.size - 1, 0)))
    ready = np.where(same, finish[u], arrive[at] if keys.size else np.nan)
    msgs = []
    for e in np.flatnonzero(start[v] < ready - tol):
        what = f"its predecessor {g.names[u[e]]!r} finishes" if same[e] else \
            f"op {g.names[u[e]]!r}'s output arrives from {c.names[a[u[e]]]!r}"
        msgs.append(f"op {g.names[v[e]]!r} starts at {start[v[e]]:.6g} on device {c.names[a[v[e]]]!r} before "
                    f"{what} at {ready[e]:.6g}")
    return msgs


def _contention(p: Placement, ops: tuple[np.ndarray, np.ndarray, np.ndarray],
                transfers: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
                congestion: Congestion, tol: float) -> list[str]:
    """Device overlaps of ops, and transfers that hold a common resource (:class:`TransferResources`) at once, both
    among positive durations only."""
    g, c, a = p.graph, p.cluster, p.assign
    start, finish, busy = ops
    msgs = []
    for i, j in _overlaps(a[busy], start[busy], finish[busy], tol):
        i, j = busy[i], busy[j]
        msgs.append(f"device {c.names[a[i]]!r} runs ops {g.names[i]!r} [{start[i]:.6g}, {finish[i]:.6g}) and "
                    f"{g.names[j]!r} [{start[j]:.6g}, {finish[j]:.6g}) at once")
    prod, src, dst, ts, tf = transfers
    held = TransferResources(c, congestion)
    rows = [(k, r) for k in range(prod.size) for r in held(src[k], dst[k])]
    if not rows:
        return msgs
    ids = {r: i for i, r in enumerate(held.all)}
    which = np.array([k for k, _ in rows], dtype=np.int64)
    group = np.array([ids[r] for _, r in rows], dtype=np.int64)
    for i, j in _overlaps(group, ts[which], tf[which], tol):
        one, two = which[i], which[j]
        msgs.append(f"{held.name(held.all[group[i]])}: transfers of op {g.names[prod[one]]!r} ({c.names[src[one]]}->"
                    f"{c.names[dst[one]]}, [{ts[one]:.6g}, {tf[one]:.6g})) and op {g.names[prod[two]]!r} "
                    f"({c.names[src[two]]}->{c.names[dst[two]]}, [{ts[two]:.6g}, {tf[two]:.6g})) overlap")
    return msgs


def check_schedule(placement: Placement, schedule: Schedule,
                   congestion: Congestion | str = Congestion.PORT) -> tuple[float, list[str]]:
    """``(makespan, violations)`` of a schedule for a placement (MOIRAI eq. 4-8).

    Ops last their time on their device (``cluster.times``); an op starts after each
    same-device predecessor ends and after the transfer of each cross-device input arrives;
    a transfer starts after its producer ends; every needed transfer is present (missing and
    extra ones are reported); a device runs one op at a time unless it is parallel (a host,
    :attr:`Cluster.parallel <placement_dsl.cluster.Cluster.parallel>`); transfers obey ``congestion``.
    Comparisons allow ``1e-9`` of the horizon. The makespan is the latest finish of an op or
    a needed transfer (``inf`` when an op cannot run on its device or a transfer has no route).
    """
    congestion = Congestion(congestion)
    g, c, a = placement.graph, placement.cluster, placement.assign
    start = schedule.start
    if start.shape != (g.n,):
        raise SpecError(f"schedule has {start.size} op start times, graph {g.name!r} has {g.n} ops")
    out: list[str] = []
    dur = placement.op_times
    prod, recv, tdur = transfer_tasks(placement)
    ts = _given_transfers(placement, schedule, prod, recv, out)
    out += _unschedulable(placement)
    if not (np.isfinite(dur).all() and np.isfinite(tdur).all()):
        return math.inf, out
    finish, tf = start + dur, ts + tdur
    have = ~np.isnan(ts)
    horizon = float(max(finish.max(), tf[have].max(initial=0.0)))
    tol = REL_TOL * max(abs(horizon), float(np.abs(start).max()))
    early = [f"op {g.names[i]!r} starts at {start[i]:.6g} < 0" for i in np.flatnonzero(start < -tol)]
    early += [f"transfer of op {g.names[prod[k]]!r} to {c.names[recv[k]]!r} starts at {ts[k]:.6g} before the op "
              f"finishes at {finish[prod[k]]:.6g}" for k in np.flatnonzero(have & (ts < finish[prod] - tol))]
    _report(out, early, "start-time")
    _report(out, _precedence(placement, start, finish, prod * c.size + recv, tf, tol), "precedence")
    busy, moving = np.flatnonzero((dur > 0) & ~c.parallel[a]), np.flatnonzero(have & (tdur > 0))
    transfers = (prod[moving], a[prod[moving]], recv[moving], ts[moving], tf[moving])
    _report(out, _contention(placement, (start, finish, busy), transfers, congestion, tol), "overlap")
    return horizon, out


# ---------------------------------------------------------------------------- list scheduling
class Timeline:
    """Busy intervals of one resource (a device, a port, a channel), merged when they touch.

    :meth:`earliest` finds the first gap of a given length at or after a time (insertion-based
    scheduling, HEFT); :meth:`book` occupies it and returns what :meth:`undo` needs.
    """

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []

    def earliest(self, t: float, dur: float) -> float:
        if dur <= 0:
            return t
        i = bisect_right(self.ends, t)
        starts, ends = self.starts, self.ends
        while i < len(starts) and starts[i] < t + dur:
            t = max(t, ends[i])
            i += 1
        return t

    def book(self, t: float, dur: float) -> tuple[int, list[float], list[float]] | None:
        """Occupy ``[t, t + dur)`` (which must be free); returns the token :meth:`undo` takes."""
        if dur <= 0:
            return None
        s, e = t, t + dur
        lo = bisect_right(self.ends, s)
        if lo > 0 and self.ends[lo - 1] == s:
            lo -= 1
        hi = lo
        while hi < len(self.starts) and self.starts[hi] <= e:
            hi += 1
        old = (self.starts[lo:hi], self.ends[lo:hi])
        if hi > lo:
            s, e = min(s, old[0][0]), max(e, old[1][-1])
        self.starts[lo:hi], self.ends[lo:hi] = [s], [e]
        return (lo, *old)

    def copy(self) -> Timeline:
        """The same busy intervals, booked on apart."""
        new = Timeline()
        new.starts, new.ends = self.starts.copy(), self.ends.copy()
        return new

    def undo(self, token: tuple[int, list[float], list[float]] | None) -> None:
        """Free what :meth:`book` occupied (undo bookings newest first)."""
        if token is not None:
            lo, starts, ends = token
            self.starts[lo:lo + 1], self.ends[lo:lo + 1] = starts, ends


def earliest_free(lines: list[Timeline], t: float, dur: float) -> float:
    """First ``t' >= t`` at which every timeline is free for ``dur``."""
    while True:
        t0 = t
        for line in lines:
            t = line.earliest(t, dur)
        if t == t0:
            return t


_earliest = earliest_free  # the former name, kept for one release


class ListScheduler:
    """Insertion-based list scheduling state: ops are placed one by one, predecessors first.

    Placing op ``v`` on device ``d`` books, for each cross-device input ``u`` not yet on ``d``
    (inputs by finish time, then index), the transfer ``(u, d)`` at the earliest time after
    ``u`` ends when the resources it holds are free (:class:`~placement_dsl.congestion.TransferResources`:
    both ports, the channel or every link of the route); then ``v`` takes the earliest gap of its device
    after its inputs arrive. :meth:`finish_on` tries a device without keeping anything.
    """

    def __init__(self, graph: Graph, cluster: Cluster, congestion: Congestion | str = Congestion.PORT):
        n, D = graph.n, cluster.size
        self.graph, self.cluster, self.congestion = graph, cluster, Congestion(congestion)
        self.times = cluster.times(graph)
        with np.errstate(divide="ignore"):
            self._per_byte = (1.0 / cluster.route_bandwidth).tolist()
        self._latency, self._bytes = cluster.route_latency.tolist(), graph.out_bytes.tolist()
        self._exact, self._D = _exact_lists(graph, D), D
        self._preds = graph.predecessor_lists
        self.device, self.start, self.finish = [-1] * n, [math.nan] * n, [math.nan] * n
        self.transfer_start: dict[tuple[int, int], float] = {}
        self._arrive: dict[tuple[int, int], float] = {}
        self._devices = [Timeline() for _ in range(D)]
        self._parallel = cluster.parallel.tolist()  # host devices run any number of ops at once (Tarnawski §4)
        self._held = TransferResources(cluster, self.congestion)
        self._resources: dict[Resource, Timeline] = {}  # a port, channel or link: its busy intervals

    def fresh(self) -> ListScheduler:
        """An empty scheduler of the same graph, cluster and congestion that shares this one's tables (op times,
        routes, exact transfer times, predecessors): nothing of them changes while ops are placed, and building them
        was two thirds of a list schedule of a 3,065-op sheet (39 of 59 ms), paid again by every candidate of a
        search that list-schedules each one."""
        new = object.__new__(ListScheduler)
        new.graph, new.cluster, new.congestion, new.times = self.graph, self.cluster, self.congestion, self.times
        new._per_byte, new._latency, new._bytes, new._exact = self._per_byte, self._latency, self._bytes, self._exact
        new._D = self._D
        new._preds, new._parallel, new._held = self._preds, self._parallel, self._held
        n = self.graph.n
        new.device, new.start, new.finish = [-1] * n, [math.nan] * n, [math.nan] * n
        new.transfer_start, new._arrive = {}, {}
        new._devices = [Timeline() for _ in range(self.cluster.size)]
        new._resources = {}
        return new

    def copy(self) -> ListScheduler:
        """This state (the ops placed so far, their transfers, every device's and resource's bookings) to place the
        rest of the ops on apart: a search resumes copies of one incumbent's prefix (:mod:`~placement_dsl.heuristics
        .schedule_moves`) instead of placing the ops before the first one a move changes again."""
        new = self.fresh()
        new.device, new.start, new.finish = self.device.copy(), self.start.copy(), self.finish.copy()
        new.transfer_start, new._arrive = dict(self.transfer_start), dict(self._arrive)
        new._devices = [line.copy() for line in self._devices]
        new._resources = {r: line.copy() for r, line in self._resources.items()}
        return new

    def duration(self, u: int, a: int, b: int) -> float:
        """Transfer time of op ``u``'s output from device ``a`` to ``b`` (see :func:`transfer_durations`)."""
        if a == b:
            return 0.0
        place = self._exact[0][u]
        if place >= 0:
            return self._exact[1][(place * self._D + a) * self._D + b]
        size = self._bytes[u]
        return (size * self._per_byte[a][b] if size > 0 else 0.0) + self._latency[a][b]

    def lines(self, a: int, b: int) -> list[Timeline]:
        """The timelines of the resources a transfer ``a -> b`` holds (:class:`TransferResources`)."""
        return [self._resources.setdefault(r, Timeline()) for r in self._held(a, b)]

    def _inputs(self, v: int, d: int, undo: list, booked: list) -> float:
        """Book the transfers ``v`` needs on ``d``; returns when its last input is there."""
        ready = 0.0
        for u in sorted(self._preds[v], key=lambda u: (self.finish[u], u)):
            a = self.device[u]
            if a == d:
                ready = max(ready, self.finish[u])
                continue
            arrive = self._arrive.get((u, d))
            if arrive is None:
                dur = self.duration(u, a, d)
                if not math.isfinite(dur):
                    return math.inf
                lines = self.lines(a, d)
                t = _earliest(lines, self.finish[u], dur)
                undo.extend((line, line.book(t, dur)) for line in lines)
                booked.append(((u, d), t, t + dur))
                arrive = t + dur
            ready = max(ready, arrive)
        return ready

    def finish_on(self, v: int, d: int) -> float:
        """When ``v`` would finish on device ``d`` (``inf`` if it cannot run there); nothing is kept."""
        undo: list = []
        ready = self._inputs(v, d, undo, [])
        dur = float(self.times[v, d])
        end = self._earliest_on(d, ready, dur) + dur if math.isfinite(ready + dur) else math.inf
        for line, token in reversed(undo):
            line.undo(token)
        return end

    def place(self, v: int, d: int) -> float:
        """Schedule ``v`` on device ``d`` (its predecessors placed already); returns its finish time."""
        booked: list = []
        ready, dur = self._inputs(v, d, [], booked), float(self.times[v, d])
        if not math.isfinite(ready + dur):
            raise SpecError(f"op {self.graph.names[v]!r} cannot run on device {self.cluster.names[d]!r} "
                            f"(time {dur}, inputs ready at {ready})")
        for key, t, end in booked:
            self.transfer_start[key], self._arrive[key] = t, end
        t = self._earliest_on(d, ready, dur)
        if not self._parallel[d]:
            self._devices[d].book(t, dur)
        self.device[v], self.start[v], self.finish[v] = d, t, t + dur
        return t + dur

    def book(self, v: int, d: int, start: float) -> None:
        """Run ``v`` on device ``d`` from ``start`` (a given schedule replayed; nothing is checked)."""
        dur = float(self.times[v, d])
        if not self._parallel[d]:
            self._devices[d].book(start, dur)
        self.device[v], self.start[v], self.finish[v] = d, start, start + dur

    def book_transfer(self, u: int, d: int, start: float) -> None:
        """Move ``u``'s output (``u`` booked already) to device ``d`` from ``start`` (a given schedule replayed)."""
        dur = self.duration(u, self.device[u], d)
        for line in self.lines(self.device[u], d):
            line.book(start, dur)
        self.transfer_start[(u, d)], self._arrive[(u, d)] = start, start + dur

    def _earliest_on(self, d: int, ready: float, dur: float) -> float:
        """The first time device ``d`` can run ``dur`` from ``ready``: at once on a parallel (host) device."""
        return ready if self._parallel[d] else self._devices[d].earliest(ready, dur)

    def schedule(self) -> Schedule:
        if -1 in self.device:
            raise SpecError(f"op {self.graph.names[self.device.index(-1)]!r} has not been scheduled")
        return Schedule(np.array(self.start), self.transfer_start)


def _exact_lists(graph: Graph, D: int) -> tuple[list[int], list[float]]:
    """:func:`exact_transfer_table` as the scheduler reads it, Python lists made once per graph and device count:
    each op's place (``-1``: none) and the matrices flat (op ``u``'s ``a -> b`` at ``(place * D + a) * D + b``). A
    table of them made for every schedule was a third of a list schedule of a 20,000-task sheet (1.1 s of CPU)."""
    cache = graph.__dict__.setdefault("_exact_lists", {})
    if D not in cache:
        pos, stack = exact_transfer_table(graph, D)
        cache[D] = (pos.tolist(), stack.reshape(-1).tolist())
    return cache[D]


def upward_rank(graph: Graph, time: np.ndarray, edge_comm: np.ndarray) -> np.ndarray:
    """HEFT's upward rank (Topcuoglu et al. 2002): ``rank(u) = time(u) + max_v (comm(u, v) + rank(v))``.

    ``time`` per op, ``edge_comm`` per edge (aligned with ``graph.src``/``graph.dst``).
    """
    order = np.argsort(graph.src, kind="stable")  # the order of the successor CSR
    comm, ptr, succ = np.asarray(edge_comm, float)[order].tolist(), graph.succ_ptr.tolist(), graph.succ_idx.tolist()
    rank = np.asarray(time, dtype=float).tolist()
    for u in graph.topo[::-1].tolist():
        tail = max((comm[k] + rank[succ[k]] for k in range(ptr[u], ptr[u + 1])), default=0.0)
        rank[u] += tail
    return np.array(rank)


def priority_order(graph: Graph, rank: np.ndarray) -> list[int]:
    """Ops by decreasing rank among those whose predecessors came first; ties by topological index."""
    indeg = np.bincount(graph.dst, minlength=graph.n).tolist()
    key, topo = (-np.asarray(rank, dtype=float)).tolist(), graph.rank.tolist()
    ptr, succ = graph.succ_ptr.tolist(), graph.succ_idx.tolist()
    heap = [(key[v], topo[v], v) for v in range(graph.n) if indeg[v] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, _, u = heapq.heappop(heap)
        order.append(u)
        for v in succ[ptr[u]:ptr[u + 1]]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, (key[v], topo[v], v))
    return order


def _unschedulable(placement: Placement) -> list[str]:
    """Why no schedule exists: ops that cannot run on their device, transfers without a route."""
    g, c, a = placement.graph, placement.cluster, placement.assign
    dur = placement.op_times
    out = [f"op {g.names[i]!r} cannot run on device {c.names[a[i]]!r} (kind {c.devices[a[i]].kind!r})"
           for i in np.flatnonzero(~np.isfinite(dur))[:MAX_REPORT]]
    prod, recv, tdur = transfer_tasks(placement)
    out += [f"op {g.names[prod[k]]!r}'s output has no route from {c.names[a[prod[k]]]!r} to {c.names[recv[k]]!r}"
            for k in np.flatnonzero(~np.isfinite(tdur))[:MAX_REPORT]]
    return out


def list_schedule(placement: Placement, congestion: Congestion | str = Congestion.PORT) -> Schedule:
    """A schedule for a fixed assignment by insertion-based list scheduling (HEFT's rule).

    Ops are taken by decreasing upward rank (:func:`upward_rank`, with each op's time on its
    own device and each edge's actual transfer time, 0 on one device; ties by topological
    index) and placed by :class:`ListScheduler`: each transfer at the earliest time its ports
    (or channel) are free after the producer ends, each op in the earliest idle gap of its
    device after its inputs arrive. Deterministic; ``O((n + m) log n)`` plus the gap scans.
    """
    errors = _unschedulable(placement)
    if errors:
        raise SpecError(f"list_schedule: {errors[0]}")
    g, c, a = placement.graph, placement.cluster, placement.assign
    comm = transfer_durations(g, c, g.src, a[g.src], a[g.dst])
    rank = upward_rank(g, placement.op_times, comm)
    builder = ListScheduler(g, c, congestion)
    for v in priority_order(g, rank):
        builder.place(v, int(a[v]))
    return builder.schedule()


def schedule_makespan(placement: Placement, congestion: Congestion | str = Congestion.PORT) -> tuple[float, list[str]]:
    """``(makespan, violations)`` of the placement's own schedule, else of :func:`list_schedule`'s."""
    if placement.schedule is not None:
        return check_schedule(placement, placement.schedule, congestion)
    errors = _unschedulable(placement)
    return (math.inf, errors) if errors else check_schedule(placement, list_schedule(placement, congestion), congestion)
