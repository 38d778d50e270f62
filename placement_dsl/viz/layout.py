"""A layered drawing of a DAG of boxes: layers by longest path, slots by the barycentre of the parents,
and deep graphs folded into side-by-side bands so the picture stays within a readable height.

Pure numpy: the positions are in slot units (one box per unit across, one layer per unit down),
the caller scales them to a canvas.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Layout:
    """Where each box goes: ``x`` (slot, bands side by side), ``y`` (row within its band, 0 at the top),
    its ``layer``, and the size in slots: ``width`` across all bands and ``rows`` per band."""

    x: np.ndarray
    y: np.ndarray
    layer: np.ndarray
    width: int
    rows: int
    bands: int


def layers(n: int, edges: Sequence[tuple[int, int]], rank: Sequence[int]) -> np.ndarray:
    """Longest-path layer of each box, visiting boxes by ``rank`` (a topological order of the boxes'
    first ops); an edge against that order (a cycle between groups) is left out of the layering.

    >>> layers(4, [(0, 1), (0, 2), (1, 3), (2, 3)], [0, 1, 2, 3]).tolist()
    [0, 1, 1, 2]
    """
    parents: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        if rank[a] < rank[b]:
            parents[b].append(a)
    layer = np.zeros(n, dtype=np.int64)
    for v in sorted(range(n), key=lambda i: rank[i]):
        if parents[v]:
            layer[v] = 1 + max(int(layer[u]) for u in parents[v])
    return layer


def layered(n: int, edges: Sequence[tuple[int, int]], rank: Sequence[int], max_rows: int = 40,
            aspect: float = 0.0) -> Layout:
    """Positions of ``n`` boxes: a layer per row, boxes of a layer side by side in the order of their
    parents' mean slot (ties by ``rank``), layers past ``max_rows`` folded into further bands, one empty
    slot apart.

    ``aspect`` (a slot's width over its height on the canvas) lets a very deep graph take more rows
    per band, as many as keep the canvas about square, so that thousands of layers do not become
    hundreds of bands side by side.

    >>> lay = layered(3, [(0, 1), (1, 2)], [0, 1, 2], max_rows=2)
    >>> lay.x.tolist(), lay.y.tolist(), (lay.width, lay.rows, lay.bands)
    ([0.0, 0.0, 2.0], [0.0, 1.0, 0.0], (3, 2, 2))
    """
    layer = layers(n, edges, rank)
    depth = int(layer.max()) + 1 if n else 0
    parents: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        parents[b].append(a)
    slot = np.zeros(n)
    members: list[list[int]] = [[] for _ in range(depth)]
    for v in sorted(range(n), key=lambda i: rank[i]):
        members[int(layer[v])].append(v)
    widest = max((len(row) for row in members), default=0)

    def centre(v: int) -> float:
        up = [slot[u] for u in parents[v] if layer[u] < layer[v]]
        return float(np.mean(up)) if up else float("inf")

    for row in members:
        row.sort(key=lambda v: (centre(v), rank[v]))
        for i, v in enumerate(row):
            slot[v] = i + (widest - len(row)) / 2  # each layer centred
    square = math.ceil(math.sqrt(depth * (widest + 1) * aspect))
    rows = max(1, min(max(max_rows, square), depth))
    band = layer // rows
    x = band * (widest + 1) + slot
    y = (layer % rows).astype(float)
    bands = int(band.max()) + 1 if n else 0
    return Layout(x.astype(float), y, layer, int(bands * (widest + 1) - 1) if n else 0, rows, bands)
