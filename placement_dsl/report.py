"""Reports of a placement for people and programs: per-device rows with units, the device table, stage ranges.

Times are in the workload's time unit (milliseconds for every bundled format) and sizes in
bytes; JSON rows carry the unit in each key (``compute_ms``, ``memory_bytes``) and the text
table in its header.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .graph import least_first_order

if TYPE_CHECKING:
    from .evaluate import DeviceCost
    from .graph import Graph
    from .placement import Placement

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
_PASSES = (("fw load ms", ">11"), ("bw load ms", ">11"))


def device_table(devices: Iterable[DeviceCost], passes: bool | None = None) -> list[str]:
    """Aligned text rows (header with units, rule, one row per device holding ops).

    ``passes`` adds each device's forward and backward loads (what GPipe's ``max FW + max BW``
    and PipeDream's ``max (FW + BW)`` score apart); ``None`` adds them when any device has a
    backward load (a training graph).
    """
    devices = list(devices)
    if passes is None:
        passes = any(d.load_bw > 0 for d in devices)
    head_cells = _HEAD + (_PASSES if passes else ())
    head = " ".join(f"{name:{fmt}}" for name, fmt in head_cells)
    rows = [head, "-" * len(head)]
    for d in devices:
        if d.ops == 0:
            continue
        name = d.device if d.replicas == 1 else f"{d.device} x{d.replicas}"  # a replicated stage (App. C.2)
        cells: tuple[Any, ...] = (name, d.kind, d.ops, f"{d.compute:.4g}", f"{d.transfer_in:.4g}",
                                  f"{d.transfer_out:.4g}", f"{d.overflow:.4g}",
                                  memory_text(d.memory_used, d.memory_capacity), f"{d.load:.5g}")
        if passes:
            cells += (f"{d.load_fw:.5g}", f"{d.load_bw:.5g}")
        rows.append(" ".join(f"{cell:{fmt}}" for cell, (_, fmt) in zip(cells, head_cells)))
    return rows


# ---------------------------------------------------------------------------- stage ranges
def device_major_order(placement: Placement) -> np.ndarray:
    """A topological order of the ops that keeps each device's ops together where the DAG allows.

    Kahn's algorithm, always taking a ready op of the earliest device in pipeline order (ties by the graph's
    own topological position): a DAG-ordered contiguous split comes out as one block per device, whatever
    order its devices are listed in.
    """
    g = placement.graph
    rank = pipeline_rank(placement)
    position = np.empty(g.n, dtype=np.int64)
    position[np.asarray(g.topo)] = np.arange(g.n)
    key = [(int(rank[placement.assign[v]]), int(position[v])) for v in range(g.n)]
    return np.array(least_first_order(g.n, zip(g.src.tolist(), g.dst.tolist()), key), dtype=np.int64)


def pipeline_rank(placement: Placement) -> np.ndarray:
    """Each device's place in the pipeline: the topological order of the devices by the tensors between them
    (ties, and devices on a cycle of them, by index). A split whose stages run in another order than the devices
    are listed (its first stage on the last device) was cut into runs that left one device two stages."""
    g, a, D = placement.graph, placement.assign, placement.cluster.size
    cross = a[g.src] != a[g.dst]
    pairs = {(int(x), int(y)) for x, y in zip(a[g.src[cross]].tolist(), a[g.dst[cross]].tolist())}
    order = least_first_order(D, sorted(pairs))
    seen = set(order)
    order += [d for d in range(D) if d not in seen]  # a cycle: its devices by index
    rank = np.empty(D, dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(D)
    return rank


def display_names(graph: Graph) -> list[str]:
    """Each op's name for people: the source's ``name`` attribute when the op has one (a
    dnn-partitioning node's ``bert.embeddings.word_embeddings.weight``), else its id ``op.name``."""
    return [str(op.attrs["name"]) if op.attrs.get("name") else op.name for op in graph.ops]


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def _by_name(names: list[str]) -> tuple[str, str, int] | None:
    """Lowest and highest of ``names`` read as ``prefix<number>`` and how many names that span covers;
    ``None`` unless every name is one prefix and a number."""
    parts = [_NUMBERED.match(n) for n in names]
    if not parts or any(m is None for m in parts) or len({m.group(1) for m in parts if m}) != 1:
        return None
    numbers = sorted((int(m.group(2)), m.group(0)) for m in parts if m)
    return numbers[0][1], numbers[-1][1], numbers[-1][0] - numbers[0][0] + 1


def stage_ranges(placement: Placement) -> list[dict[str, Any]]:
    """What each device holding ops really holds: its op count, its first and last op in topological
    order and its ops as ``[first, last]`` runs of that order.

    The order is :func:`device_major_order`, so a contiguous pipeline stage is one run
    (``one_interval``); a stage split into several runs is not one interval of any order this
    function knows. Names are :func:`display_names`. When every name of a stage is one prefix
    and a number (``node12``), ``by_name`` gives the lowest and highest and how many names lie
    between them, since a reader takes ``node14..node41`` for a name range.
    """
    order = device_major_order(placement)
    names, devices = display_names(placement.graph), placement.cluster.names
    runs: dict[int, list[list[str]]] = {}
    held: dict[int, list[str]] = {}
    previous = -1
    for v in order.tolist():
        d = int(placement.assign[v])
        if d != previous:
            runs.setdefault(d, []).append([names[v], names[v]])
        runs[d][-1][1] = names[v]
        held.setdefault(d, []).append(names[v])
        previous = d
    out = []
    for d in sorted(runs):
        stage = {"device": devices[d], "ops": len(held[d]), "first": held[d][0], "last": held[d][-1],
                 "one_interval": len(runs[d]) == 1, "ranges": runs[d]}
        span = _by_name(held[d])
        if span is not None and (span[0], span[1]) != (held[d][0], held[d][-1]):
            stage["by_name"] = {"lowest": span[0], "highest": span[1], "between": span[2]}
        out.append(stage)
    return out


def stage_lines(stages: Sequence[dict[str, Any]], shown: int = 3) -> list[str]:
    """Text lines for :func:`stage_ranges`: ``acc0: 12 ops  a..b``, the runs of a stage that is not one
    interval, and the name span when it differs from the topological one."""
    lines = ["stages (count, first..last op in topological order):"]
    width = max((len(s["device"]) for s in stages), default=0)
    for s in stages:
        spans = [a if a == b else f"{a}..{b}" for a, b in s["ranges"]]
        if len(spans) == 1:
            text = spans[0]
        else:
            text = (f"{s['first']}..{s['last']}, not one interval: {len(spans)} runs " + ", ".join(spans[:shown])
                    + (f", ... ({len(spans) - shown} more)" if len(spans) > shown else ""))
        named = s.get("by_name")
        if named:
            text += (f"  (by name {named['lowest']}..{named['highest']}: holds {s['ops']} of the "
                     f"{named['between']} names between)")
        lines.append(f"  {s['device']:<{width}}  {s['ops']:>5} ops  {text}")
    return lines
