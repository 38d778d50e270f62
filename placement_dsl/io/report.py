"""Reports of a placement for people and programs: per-device rows with units, the device table, stage ranges.

Times are in the workload's time unit (milliseconds for every bundled format) and sizes in
bytes; JSON rows carry the unit in each key (``compute_ms``, ``memory_bytes``) and the text
table in its header.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..evaluate import DeviceCost
    from ..placement import Placement

_BYTE_UNITS = ("B", "kB", "MB", "GB", "TB", "PB")
_TIME_FIELDS = (("compute", "compute"), ("compute_fw", "compute_fw"), ("compute_bw", "compute_bw"),
                ("in", "transfer_in"), ("in_fw", "in_fw"), ("in_bw", "in_bw"),
                ("out", "transfer_out"), ("out_fw", "out_fw"), ("out_bw", "out_bw"),
                ("overflow", "overflow"), ("load", "load"), ("load_fw", "load_fw"), ("load_bw", "load_bw"))


# ---------------------------------------------------------------------------- numbers
def human_bytes(value: float) -> str:
    """A byte count with a decimal unit and three significant digits.

    >>> human_bytes(1.2e9), human_bytes(16e9), human_bytes(500), human_bytes(float("inf"))
    ('1.2 GB', '16 GB', '500 B', 'unlimited')
    """
    if not math.isfinite(value):
        return "unlimited"
    step = 0
    while abs(value) >= 1000 and step < len(_BYTE_UNITS) - 1:
        value /= 1000
        step += 1
    return f"{value:.3g} {_BYTE_UNITS[step]}"


def percent(used: float, capacity: float) -> float | None:
    """``used`` as a percentage of ``capacity`` (``None`` when the capacity is unlimited or 0)."""
    if not math.isfinite(capacity) or capacity <= 0:
        return None
    return 100.0 * used / capacity


def _percent_text(value: float | None) -> str:
    """A percentage readable at any size: ``0.6%`` rather than ``0%``, ``<0.1%`` for a sliver."""
    if value is None:
        return ""
    if value == 0 or value >= 10:
        return f"{value:.0f}%"
    return f"{value:.1f}%" if value >= 0.1 else "<0.1%"


def memory_text(used: float, capacity: float) -> str:
    """``used / capacity (share)`` in human units, e.g. ``1.2 GB / 16 GB (7.5%)``."""
    share = _percent_text(percent(used, capacity))
    return f"{human_bytes(used)} / {human_bytes(capacity)}" + (f" ({share})" if share else "")


# ---------------------------------------------------------------------------- device rows
def device_row(d: DeviceCost) -> dict[str, Any]:
    """One device's costs with the unit in every key (``None`` for an unlimited capacity)."""
    row: dict[str, Any] = {"device": d.device, "kind": d.kind, "ops": d.ops}
    row.update({f"{key}_ms": float(getattr(d, attr)) for key, attr in _TIME_FIELDS})
    capacity = float(d.memory_capacity)
    row.update(memory_bytes=float(d.memory_used), memory_capacity_bytes=capacity if math.isfinite(capacity) else None,
               memory_percent=percent(d.memory_used, capacity))
    if d.replicas > 1:
        row.update(replicas=d.replicas, sync_ms=float(d.sync))
    return row


def device_rows(devices: Iterable[DeviceCost]) -> list[dict[str, Any]]:
    """:func:`device_row` of each device, in cluster order."""
    return [device_row(d) for d in devices]


_HEAD = (("device", "<10"), ("kind", "<11"), ("ops", ">5"), ("compute ms", ">11"), ("in ms", ">10"),
         ("out ms", ">10"), ("overflow ms", ">11"), ("memory bytes used / capacity", "<30"), ("load ms", ">11"))


def device_table(devices: Iterable[DeviceCost]) -> list[str]:
    """Aligned text rows (header with units, rule, one row per device holding ops)."""
    head = " ".join(f"{name:{fmt}}" for name, fmt in _HEAD)
    rows = [head, "-" * len(head)]
    for d in devices:
        if d.ops == 0:
            continue
        name = d.device if d.replicas == 1 else f"{d.device} x{d.replicas}"  # a replicated stage (App. C.2)
        cells = (name, d.kind, d.ops, f"{d.compute:.4g}", f"{d.transfer_in:.4g}", f"{d.transfer_out:.4g}",
                 f"{d.overflow:.4g}", memory_text(d.memory_used, d.memory_capacity), f"{d.load:.5g}")
        rows.append(" ".join(f"{cell:{fmt}}" for cell, (_, fmt) in zip(cells, _HEAD)))
    return rows


# ---------------------------------------------------------------------------- stage ranges
def device_major_order(placement: Placement) -> np.ndarray:
    """A topological order of the ops that keeps each device's ops together where the DAG allows.

    Kahn's algorithm, always taking a ready op of the earliest device (ties by the graph's
    own topological position): a DAG-ordered contiguous split comes out as one block per device.
    """
    g = placement.graph
    position = np.empty(g.n, dtype=np.int64)
    position[np.asarray(g.topo)] = np.arange(g.n)
    indeg = np.bincount(g.dst, minlength=g.n)
    succ: list[list[int]] = [[] for _ in range(g.n)]
    for u, v in zip(g.src.tolist(), g.dst.tolist()):
        succ[u].append(v)
    key = [(int(placement.assign[v]), int(position[v]), v) for v in range(g.n)]
    heap = [key[v] for v in range(g.n) if indeg[v] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        v = heapq.heappop(heap)[2]
        order.append(v)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, key[w])
    return np.array(order, dtype=np.int64)


def stage_ranges(placement: Placement) -> list[dict[str, Any]]:
    """Each device holding ops: its op count and its ops as ``[first, last]`` runs in topological order.

    A run is a maximal stretch of :func:`device_major_order` on one device, so a contiguous
    pipeline stage is one run ``first..last``.
    """
    order = device_major_order(placement)
    names, devices = placement.graph.names, placement.cluster.names
    runs: dict[int, list[list[str]]] = {}
    previous = -1
    for v in order.tolist():
        d = int(placement.assign[v])
        if d != previous:
            runs.setdefault(d, []).append([names[v], names[v]])
        runs[d][-1][1] = names[v]
        previous = d
    counts = np.bincount(placement.assign, minlength=placement.cluster.size)
    return [{"device": devices[d], "ops": int(counts[d]), "ranges": runs[d]} for d in sorted(runs)]


def stage_lines(stages: Sequence[dict[str, Any]], shown: int = 3) -> list[str]:
    """Text lines for :func:`stage_ranges`: ``acc0: 12 ops  a..b`` (and further runs when split)."""
    lines = ["stages (ops in topological order):"]
    width = max((len(s["device"]) for s in stages), default=0)
    for s in stages:
        spans = [a if a == b else f"{a}..{b}" for a, b in s["ranges"]]
        text = ", ".join(spans[:shown]) + (f", ... ({len(spans) - shown} more)" if len(spans) > shown else "")
        runs = f" in {len(spans)} runs" if len(spans) > 1 else ""
        lines.append(f"  {s['device']:<{width}}  {s['ops']:>5} ops{runs}  {text}")
    return lines
