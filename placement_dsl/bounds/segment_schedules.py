"""The makespan's segments scheduled exactly: each segment between two cut ops is a small schedule of its own.

An op comparable with every other (a *cut*, :func:`~placement_dsl.bounds.makespan.comparable_cuts`) splits every
schedule in time, and between two cuts ``a`` and ``b`` the devices run the segment's ops ``S`` and nothing else: an op
outside ``S`` is an ancestor of ``a`` (done before ``a`` ends) or a descendant of ``b`` (started after ``b`` starts).
So the window ``[end(a), start(b)]`` is at least the least makespan of the *segment problem*: the graph ``S`` plus a
copy of ``a`` and of ``b`` that take no time (``a``'s tensor still has to reach ``S``'s devices, ``S``'s tensors
``b``'s device), on the same cluster, scheduled with the problem's congestion (the transfers of the window are a
subset of the schedule's, so their ports, channels or links exclude each other in the window too).

Dropped (so the segment problem is a relaxation): memory, pins, colocation, allowed kinds narrowed by them, edges
from ops before ``a`` and to ops after ``b`` (and the transfers they cause), and the transfers between consecutive
cuts. The makespan is at least the cut ops' fastest times plus, per segment, the larger of its longest path and the
segment problem's proven lower bound (and, without parallel hosts, the cut segments' work with transfers,
:mod:`.segments`); and at least the longest path with route costs
(:func:`~placement_dsl.bounds.makespan.route_path_makespan`), which pays the transfers between cuts.

Each segment problem is the package's CP-SAT interval model (:func:`placement_dsl.cpsat.build`); its objective bound,
corrected for the durations it rounds up, bounds the segment whether or not CP-SAT proves the optimum. This module
cuts the segments and builds their problems; :mod:`placement_dsl.cpsat_segments` prices them in one child process
(OR-Tools stays out of the bounds layer); a segment not priced in time keeps its longest path.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..constraints import Congestion
from ..graph import Graph
from ..objectives import Makespan
from ..problem import Problem
from .makespan import allowed_times, comparable_cuts, segment_path
from .segments import segment_values

MAX_SEGMENT_OPS = 64  # larger segments keep their closed forms: CP-SAT's bound on a transformer layer's 86 or 166 ops
# in 10-20 s is far below them (0.16 against 1.45 on GPT-3 330M), and the child would only take the search's core
MAX_OPS = 6000  # the cut ops' reachability matrix (n^2 booleans), as :mod:`.segments`


@dataclass
class Segment:
    """One segment: its problem (``None`` for a segment of one op, whose fastest time is exact, or of more than
    :data:`MAX_SEGMENT_OPS`), its closed-form bound (the longest path at the fastest allowed times, and the work with
    each device's transfers in and out, :func:`~placement_dsl.bounds.segments.segment_values`), and its op count."""

    problem: Any
    path: float
    ops: int


def segments(problem: Any) -> tuple[float, list[Segment]]:
    """The cut ops' fastest times summed, and every segment between cuts (and before the first, after the last)."""
    g, c = problem.graph, problem.cluster
    fastest = allowed_times(problem).min(axis=1)
    reach, cuts = comparable_cuts(g)
    segment = np.where(np.isin(np.arange(g.n), cuts), -1, reach[cuts].sum(axis=0))
    mode = problem.cost_model().congestion
    closed = {} if c.parallel.any() else segment_values(problem)[1]  # path and spread (counting every device serial)
    out = []
    for s in np.unique(segment[segment >= 0]).tolist():
        ops = np.flatnonzero(segment == s)
        path = max(segment_path(g, ops, fastest), closed.get(s, 0.0))
        if len(ops) < 2 or len(ops) > MAX_SEGMENT_OPS:
            out.append(Segment(None, path, len(ops)))
            continue
        keep = set(ops.tolist())
        ends = [int(cuts[s - 1])] if s > 0 else []
        ends += [int(cuts[s])] if s < len(cuts) else []
        nodes = [g.ops[v] for v in ops.tolist()] + [
            g.ops[v].model_copy(update={"work": {k: 0.0 for k in g.ops[v].work}}) for v in ends]
        keep |= set(ends)
        edges = [(g.names[u], g.names[v]) for u, v in zip(g.src.tolist(), g.dst.tolist()) if u in keep and v in keep]
        sub = Problem(Graph(nodes, edges, name=f"{g.name}-segment{s}"), c, Makespan(),
                      [Congestion(None if mode == "none" else mode)])
        out.append(Segment(sub, path, len(ops)))
    return float(fastest[cuts].sum()) if len(cuts) else 0.0, out


def segments_or_reason(problem: Any) -> tuple[float, list[Segment], str]:
    """:func:`segments`, or nothing and why (a graph too large for the cut ops' reachability)."""
    if problem.graph.n > MAX_OPS:
        return 0.0, [], f"declined: {problem.graph.n} ops (the cut ops' reachability: at most {MAX_OPS})"
    return (*segments(problem), "")


def identity(sub: Any) -> str:
    """What makes two segment problems the same schedule problem: their structure (edges by position), each op's
    times, tensor and attributes (its transfer times), the congestion and the cluster (the same object). The layers
    of a model without profiling noise are identical segments, priced once (:func:`distinct`)."""
    g = sub.graph
    h = hashlib.sha1()
    h.update(np.asarray(g.src, dtype=np.int64).tobytes() + b"|" + np.asarray(g.dst, dtype=np.int64).tobytes())
    h.update(repr([(sorted(op.work.items()) if isinstance(op.work, dict) else op.work, op.out_bytes,
                    sorted(op.attrs.items())) for op in g.ops]).encode())
    h.update(f"{sub.cost_model().congestion}|{id(sub.cluster)}".encode())
    return h.hexdigest()


def distinct(problems: list[Any]) -> tuple[list[Any], list[int]]:
    """The distinct segment problems (:func:`identity`), in order of first appearance, and for each problem the
    position of its own among them."""
    first: dict[str, int] = {}
    where = [first.setdefault(identity(q), len(first)) for q in problems]
    own = [None] * len(first)
    for q, k in zip(problems, where):
        own[k] = own[k] or q
    return own, where


def combined(cut_total: float, parts: list[Segment], priced: dict[int, float | None]) -> float:
    """The cut ops' times plus each segment's larger of its longest path and its priced bound (``priced[i]``, from
    CP-SAT; missing or ``None``: the path alone)."""
    return cut_total + float(sum(max(s.path, priced.get(i) or 0.0) for i, s in enumerate(parts)))
