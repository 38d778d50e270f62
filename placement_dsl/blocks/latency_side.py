"""What a run of a longest path pays besides its work and its two boundary tensors: its side inputs and outputs.

A run of the latency IP's run flows (:func:`~.latency_data.run_arcs`) holds a *body* of ops in one accelerator slot.
Tensors that cross the slot's border are read or written through host memory (Tarnawski et al., NeurIPS 2020, §4,
``CommIn``/``CommOut``). :func:`side_price` is the least price of the crossings besides the two boundary tensors:
some are paid for sure, the rest depend on which side ops share the slot (a knapsack on the slot's free memory).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .base import Context

EXACT_ITEMS = 12  # side ops of a run priced by an exact knapsack; beyond, the fractional one
REACH = 32  # side ops a side op's chain to the ops that cannot share the slot is followed through, at most


def knapsack_price(items: list[tuple[float, float]], room: float) -> float:
    """Least total price of the items ``(price, memory)`` left out of a knapsack of size ``room``.

    Exact (branch and bound over the items that may or may not fit) for up to :data:`EXACT_ITEMS`
    of them, else the fractional knapsack's value, which is lower: a lower bound either way.
    """
    pay = sum(c for c, m in items if m > room)
    mid = sorted(((c, m) for c, m in items if 0 < m <= room), key=lambda t: t[0] / t[1], reverse=True)
    if len(mid) > EXACT_ITEMS:
        return pay + fractional_price(mid, room)
    best = [sum(c for c, _ in mid)]

    def branch(k: int, room: float, kept: float) -> None:  # kept: price of the items taken so far
        left = sum(c for c, _ in mid[k:])
        if sum(c for c, _ in mid) - kept - (left - fractional_price(mid[k:], room)) >= best[0]:
            return
        if k == len(mid):
            best[0] = sum(c for c, _ in mid) - kept
            return
        c, m = mid[k]
        if m <= room:
            branch(k + 1, room - m, kept + c)
        branch(k + 1, room, kept)
    branch(0, room, 0.0)
    return pay + best[0]


def fractional_price(items: list[tuple[float, float]], room: float) -> float:
    """Price left out when ``items`` (sorted by price per byte, best first) fill ``room``, the last one fractionally."""
    pay = sum(c for c, _ in items)
    for c, m in items:
        if room <= 0:
            break
        take = 1.0 if m <= room else room / m
        pay, room = pay - c * take, room - m * take
    return max(pay, 0.0)


def marked(like: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """A mask over ``like``'s positions holding ``ids`` (``np.isin`` on op indices, without sorting)."""
    out = np.zeros(like.shape[0], dtype=bool)
    out[ids] = True
    return out


def outside(reach: np.ndarray | None, prev: int, after: int) -> np.ndarray | None:
    """With one subgraph per accelerator (``reach``: :func:`descendants`), the ops a run's slot cannot hold besides
    the path's other ops: those reaching ``prev`` (the path op before the run) or reached from ``after`` (the one
    past it). Both lie off the run's accelerator, so such an op in the slot would make the slot's set non-convex
    (Tarnawski's Def. 3.1: an op of the slot, then ``prev``, then the run's first op). ``None`` without ``reach``."""
    if reach is None:
        return None
    out = np.zeros(reach.shape[0], dtype=bool)
    if prev >= 0:
        out |= reach[:, prev]
    if after >= 0:
        out |= reach[after]
    return out


def side_price(ctx: Context, inside: np.ndarray, on_path: np.ndarray, prev: int, last: int, c: np.ndarray,
                on_acc: np.ndarray, room: float, barred: np.ndarray | None = None) -> float:
    """Least price of a run body's (``inside``, a mask) reads and writes besides its two boundary tensors (``prev``'s,
    ``last``'s).

    A tensor from the path (or from an op no accelerator runs, or, with one subgraph per accelerator, from an op
    ``barred`` from the slot by convexity, :func:`outside`) is read for sure; a tensor of a body op with a consumer
    on the path past the run (or one that cannot share the slot) is written for sure. Each other side op ``w`` is
    an item: its tensor's read and the writes of body ops whose first outside consumer it is are paid unless ``w``
    shares the run's slot, for which its memory must fit in ``room`` (a knapsack, :func:`knapsack_price`: a lower bound on
    the price). A ``w`` in the slot needs its own inputs there too, and sends its tensor on to the ops past it that
    cannot share the slot (:func:`_surcharges`), so ``w`` saves at most its price less those reads and writes.
    """
    g = ctx.graph
    never = on_path | ~on_acc if barred is None else on_path | ~on_acc | barred  # ops that cannot share the slot
    src_in, dst_in = inside[g.src], inside[g.dst]
    feeds = marked(inside, g.src[dst_in & ~src_in])
    if prev >= 0:
        feeds[prev] = False
    ins = np.flatnonzero(feeds)
    sure = never[ins]
    fixed = float(c[ins[sure]].sum())
    items = {int(u): float(c[u]) for u in ins[~sure]}
    out = src_in & ~dst_in & (g.src != last)
    src, dst = g.src[out], g.dst[out]
    written = np.zeros(ctx.n, dtype=bool)
    written[src[never[dst]]] = True
    fixed += float(c[written].sum())
    first = np.full(ctx.n, ctx.n, dtype=np.int64)
    keep = ~written[src]
    np.minimum.at(first, src[keep], dst[keep])
    for v in np.flatnonzero(first < ctx.n).tolist():
        w = int(first[v])
        items[w] = items.get(w, 0.0) + float(c[v])
    extra = _surcharges(ctx, items, inside, ins[sure], prev, c, never) if barred is not None else {}
    for w, s in extra.items():
        fixed += min(items[w], s)
        items[w] = max(items[w] - s, 0.0)
    return fixed + knapsack_price([(cost, float(ctx.mem[w])) for w, cost in items.items()], room)


def _surcharges(ctx: Context, items: dict[int, float], inside: np.ndarray, read: np.ndarray, prev: int,
                c: np.ndarray, never: np.ndarray) -> dict[int, float]:
    """Per item ``w``: the reads and writes its joining the slot adds (``never``: ops that cannot share the slot —
    path ops, host-only ops, ops barred by convexity).

    *In*: an input of ``w`` outside the body that cannot share the slot is read then; an input that could, but only
    descends from ops that cannot by a chain outside the body (:func:`_chain`), brings a read of one of the chain's
    tensors, at least the least of them. *Out*: when ``w`` reaches an op that cannot share the slot by a chain
    outside the body (its own consumer, or the skip branch of a residual block ending on the path past the run), a
    tensor of ``w`` or of the chain leaves the slot: at least the least write among them. A chain touching a tensor
    the slot reads anyway (``read``, ``prev``), an item's, or one charged already is not charged, so no crossing is
    paid twice."""
    g, claimed, out = ctx.graph, {prev, *read.tolist(), *items}, {}
    sent: set[int] = set()  # ops whose writes are charged already
    for w in sorted(items):
        for x in g.predecessors(w).tolist():
            if inside[x] or x in claimed:
                continue
            chain = {x} if never[x] else _chain(g.predecessors, x, inside, never)
            if chain and not chain & claimed and (price := min(float(c[u]) for u in chain)) > 0:
                claimed |= chain
                out[w] = out.get(w, 0.0) + price
        chain = _chain(g.successors, w, inside, never, keep_ends=False)
        if chain and not chain & sent and (price := min(float(c[u]) for u in chain)) > 0:
            sent |= chain
            out[w] = out.get(w, 0.0) + price
    return out


def _chain(step: Any, start: int, inside: np.ndarray, never: np.ndarray, keep_ends: bool = True) -> set[int] | None:
    """The ops outside the body ``step`` (predecessors or successors) leads through from ``start`` (included) up to
    the ops that cannot share the slot (included when ``keep_ends``): ``None`` when it reaches none of them or passes
    :data:`REACH` ops (then nothing is charged)."""
    seen, todo, ends = {start}, [start], False
    while todo:
        for u in step(todo.pop()).tolist():
            if inside[u] or u in seen:
                continue
            if never[u]:
                ends = True
                if not keep_ends:
                    continue
            elif len(seen) >= REACH:
                return None
            else:
                todo.append(u)
            seen.add(u)
    return seen if ends else None
