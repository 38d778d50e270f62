"""The least tensor time a contiguous device pays across the blocks beside its run of cut ops.

A device of :mod:`.cut_stages` whose cut ops are ``s_f .. s_l`` may hold part of the block ``A`` before ``s_f``
and part of the block ``B`` after ``s_l``. Being contiguous, its part of ``B`` is an *ideal* ``I`` (with an op,
every op of ``B`` before it: ``s_l`` reaches that op, which reaches one the device holds) and its part of ``A`` a
*filter* ``F``. It sends every tensor of ``s_l`` or ``I`` read in ``B \\ I`` or after ``s_{l+1}``, and receives
every tensor of ``A \\ F`` or of an op at or before ``s_{f-1}`` read in ``F`` or by ``s_f``. Whatever ``I`` and
``F`` are, it pays at least the least such sum: a minimum cut of a small network per block (each tensor a node
whose in-arc carries its time, read by arcs that cannot be cut; each order within the block an arc that cannot
be cut), the *hyperedge* cut of Lawler's construction. The tensors :func:`.cut_stages` already prices (``s_l``'s
when it is read after ``s_{l+1}``, an earlier op's when a cut op at or after ``s_f`` reads it) are left out, so
the two sum. A GPT-3 attention block's device pays about one hidden tensor each way beside it, whichever heads it
holds; at 16 stages the split falls there half the time. Identical blocks (a model's repeated layers) are cut
once: the network in the block's local numbering is the key.

Those least cuts hold whatever the device holds of the block; :func:`block_prices` prices by how much it holds.
A GPT-3 device holding none of the attention block after its last cut op sends the ``qkv`` tensor (three hidden
tensors), all of it the heads' outputs (one); splitting the heads sends the slices of those not held. Its price is
at least every line of the lower convex hull of the points (work held, least price holding it)
(:func:`.parametric_cut.cut_envelope`: one minimum cut per hull point), so a chain of devices that shares a block
pays what sharing it costs (:mod:`.cut_chain`). A device holding no cut op lies inside one block (a convex set
meets no other block without holding the cut op between): it receives the inputs of its first op and sends the
output of its last, at least the least of each over the block.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Graph
from .parametric_cut import Arc, Line, cut_envelope, min_cut

ENVELOPE_OPS = 2000  # blocks above this many ops are priced by their least cut alone (one minimum cut, not 16)
# ops of the distinct networks priced by envelopes, in all: the rest by their least cut (two blocks of 2,000 ops of a
# random DAG took 0.7 s of CPU; GPT-3's distinct attention blocks at 20k ops, 500 ops)
ENVELOPE_BUDGET = 20_000


def segments(g: Graph, cuts: np.ndarray) -> np.ndarray:
    """Each op's segment: ``2i`` for the cut op ``i`` (``cuts`` in topological order), ``2i - 1`` for an op of the
    block between cut ops ``i - 1`` and ``i`` (``-1`` before the first, ``2r - 1`` after the last)."""
    pos = np.empty(g.n, dtype=np.int64)
    pos[g.topo] = np.arange(g.n)
    cut_pos = np.sort(pos[cuts])
    seg = 2 * np.searchsorted(cut_pos, pos, side="right") - 1
    seg[cuts] = 2 * np.searchsorted(cut_pos, pos[cuts])
    return seg


def block_costs(g: Graph, cuts: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(enter, leave)``: ``enter[f]`` the least time of the tensors a device whose first cut op is ``f``
    receives in its part of the block before ``s_f`` (beyond the hull's), ``leave[l]`` the least a device whose last
    cut op is ``l`` sends from its part of the block after ``s_l``; ``cuts`` the cut ops in topological order,
    ``size`` each op's tensor time. Any such device pays at least ``enter[f] + leave[l]`` more than the hull's
    tensors.

    >>> from placement_dsl.graph import Graph, Op
    >>> ops = [Op(name=n, work=1.0, out_bytes=b) for n, b in [("x", 4), ("h0", 1), ("h1", 1), ("y", 1)]]
    >>> g = Graph(ops, [("x", "h0"), ("x", "h1"), ("h0", "y"), ("h1", "y")])
    >>> block_costs(g, np.array([0, 3]), g.out_bytes)  # both heads' tensors, or x's
    (array([0., 2.]), array([2., 0.]))
    """
    r = len(cuts)
    seg, members, cut_op, pos = _blocks(g, cuts)
    enter, leave = np.zeros(r), np.zeros(r)
    cache: dict[tuple[Arc, ...], float] = {}
    for s, ops in members.items():
        if s + 1 < 2 * r:  # a block before cut op (s + 1) / 2
            enter[(s + 1) // 2] = _least(_entering(g, seg, pos, ops, s, cut_op[(s + 1) // 2], size), cache)
        if s > 0:  # a block after cut op (s - 1) / 2
            leave[(s - 1) // 2] = _least(_leaving(g, seg, pos, ops, s, cut_op[(s - 1) // 2], size), cache)
    return enter, leave


def _blocks(g: Graph, cuts: np.ndarray) -> tuple[np.ndarray, dict[int, np.ndarray], dict[int, int], np.ndarray]:
    """Each op's segment (:func:`segments`), the ops of each block by its odd segment number, the cut op of each
    index along ``cuts``, and each op's position in the graph's topological order."""
    r = len(cuts)
    seg = segments(g, cuts)
    order = np.argsort(seg, kind="stable")
    bounds = np.searchsorted(seg[order], np.arange(-1, 2 * r + 1))
    members = {s: order[bounds[s + 1]:bounds[s + 2]] for s in range(-1, 2 * r, 2) if bounds[s + 2] > bounds[s + 1]}
    cut_op = {int(seg[v]) // 2: int(v) for v in np.flatnonzero(seg % 2 == 0)}
    pos = np.empty(g.n, dtype=np.int64)
    pos[g.topo] = np.arange(g.n)
    return seg, members, cut_op, pos


@dataclass(frozen=True)
class BlockPrices:
    """Per block ``b = 0..r`` (the ops before cut op ``b``; ``r``: after the last) its work, the lines under the
    price a device whose first cut op is ``b`` pays for the filter of the block it holds (``price >= enter_level[b,
    q] + enter_slope[b, q] * work held``, every ``q``), the lines for the ideal a device whose last cut op is
    ``b - 1`` holds (``leave_*``), rows padded with lines at level ``-inf``, and the least price of a device inside
    the block (``inner[b]``). Those prices leave out the tensors :mod:`.cut_stages` prices on the hull."""

    work: np.ndarray
    enter_slope: np.ndarray
    enter_level: np.ndarray
    leave_slope: np.ndarray
    leave_level: np.ndarray
    inner: np.ndarray


def block_prices(g: Graph, cuts: np.ndarray, size: np.ndarray, work: np.ndarray) -> BlockPrices:
    """:class:`BlockPrices` of the blocks between ``cuts`` (topological order), ``size`` each op's tensor time and
    ``work`` its time: one envelope (:func:`.parametric_cut.cut_envelope`) per distinct network and side, the least
    cut alone for a block of more than :data:`ENVELOPE_OPS` ops or past :data:`ENVELOPE_BUDGET` ops of envelopes.

    >>> from placement_dsl.graph import Graph, Op
    >>> ops = [Op(name=n, work=1.0, out_bytes=b) for n, b in [("x", 4), ("h0", 1), ("h1", 1), ("y", 1)]]
    >>> g = Graph(ops, [("x", "h0"), ("x", "h1"), ("h0", "y"), ("h1", "y")])
    >>> p = block_prices(g, np.array([0, 3]), g.out_bytes, np.ones(4))
    >>> p.leave_slope[1].tolist(), p.leave_level[1].tolist()  # x's device: 4 holding no head, 2 holding both
    ([-1.0], [4.0])
    """
    r = len(cuts)
    seg, members, cut_op, pos = _blocks(g, cuts)
    enter: dict[int, list[Line]] = {}
    leave: dict[int, list[Line]] = {}
    cache: dict[tuple[object, ...], list[Line]] = {}
    budget = [ENVELOPE_BUDGET]
    for s, ops in members.items():
        local = _local(ops, pos)
        works = {i: float(work[v]) for v, i in local.items()}
        if s + 1 < 2 * r:
            arcs = _entering(g, seg, pos, ops, s, cut_op[(s + 1) // 2], size)
            enter[(s + 1) // 2] = _envelope(arcs, works, False, budget, cache)
        if s > 0:
            arcs = _leaving(g, seg, pos, ops, s, cut_op[(s - 1) // 2], size)
            leave[(s + 1) // 2] = _envelope(arcs, works, True, budget, cache)
    block_work = np.bincount(seg + 1, weights=work, minlength=2 * r + 1)[0::2]
    return BlockPrices(block_work, *_padded(enter, r + 1), *_padded(leave, r + 1), _inner(g, seg, size, r))


def _envelope(arcs: list[Arc], works: dict[int, float], held_on_source: bool, budget: list[int],
              cache: dict[tuple[object, ...], list[Line]]) -> list[Line]:
    """The lines of one side of one block, once per distinct network; its least cut alone for a block past
    :data:`ENVELOPE_OPS` ops or the ``budget`` of ops left for envelopes (spent here)."""
    key = (held_on_source, tuple(arcs), tuple(works.values()))
    if key not in cache:
        ops = len(works)
        if ops <= min(ENVELOPE_OPS, budget[0]):
            budget[0] -= ops
            cache[key] = cut_envelope(arcs, works, held_on_source)
        else:
            cache[key] = [(0.0, min_cut(arcs)[0])]
    return cache[key]


def _padded(lines: dict[int, list[Line]], rows: int) -> tuple[np.ndarray, np.ndarray]:
    """``(slopes, levels)`` with a row per block: its lines (``0 + 0 * work`` where none), then ``-inf`` levels."""
    width = max((len(v) for v in lines.values()), default=1)
    slope, level = np.zeros((rows, width)), np.full((rows, width), -np.inf)
    level[:, 0] = 0.0
    for b, row in lines.items():
        slope[b, :len(row)] = [lam for lam, _ in row]
        level[b, :len(row)] = [c for _, c in row]
    return slope, level


def _inner(g: Graph, seg: np.ndarray, size: np.ndarray, r: int) -> np.ndarray:
    """Per block, the least a device holding some of its ops and no cut op pays: its first op receives every
    input (their makers are not its), its last sends its output if read (its readers are not its)."""
    inputs = np.bincount(g.dst, weights=size[g.src], minlength=g.n)
    read = np.bincount(g.src, minlength=g.n) > 0
    output = np.where(read, size, 0.0)
    block = (seg[seg % 2 != 0] + 1) // 2  # seg is odd for block ops: -1 -> 0, 2b - 1 -> b
    least_in, least_out = np.full(r + 1, np.inf), np.full(r + 1, np.inf)
    np.minimum.at(least_in, block, inputs[seg % 2 != 0])
    np.minimum.at(least_out, block, output[seg % 2 != 0])
    return np.where(np.isfinite(least_in), least_in + least_out, 0.0)


def _local(ops: np.ndarray, pos: np.ndarray) -> dict[int, int]:
    """The block's ops numbered 2.. in topological order (0 the source, 1 the sink)."""
    return {int(v): 2 + i for i, v in enumerate(ops[np.argsort(pos[ops])])}


def _leaving(g: Graph, seg: np.ndarray, pos: np.ndarray, ops: np.ndarray, s: int, cut: int,
             size: np.ndarray) -> list[Arc]:
    """The network of the block ``s`` after the cut op ``cut``: source side the device's ideal (and ``cut``), sink
    side the rest of the block and every op after the next cut op."""
    local = _local(ops, pos)
    arcs: list[Arc] = []
    tensor = len(local) + 2
    makers = [cut] + list(local) if not (seg[g.successors(cut)] > s).any() else list(local)
    for p in makers:
        readers = [local.get(int(q), 1) for q in g.successors(p) if seg[q] >= s]
        if size[p] <= 0 or not readers:
            continue
        arcs.append((local.get(p, 0), tensor, float(size[p])))
        arcs.extend((tensor, q, np.inf) for q in set(readers))
        tensor += 1
    arcs.extend((local[v], local[int(u)], np.inf) for v in local for u in g.predecessors(v) if int(u) in local)
    return arcs


def _entering(g: Graph, seg: np.ndarray, pos: np.ndarray, ops: np.ndarray, s: int, cut: int,
              size: np.ndarray) -> list[Arc]:
    """The network of the block ``s`` before the cut op ``cut``: source side every op before the block and the
    block's ops the device does not hold, sink side its filter and ``cut``."""
    local = _local(ops, pos)
    local_and_cut = {**local, cut: 1}
    arcs: list[Arc] = []
    tensor = len(local) + 2
    early = {int(u) for v in local for u in g.predecessors(v) if seg[u] < s}
    early = [u for u in sorted(early) if not (seg[g.successors(u)] > s).any()]  # else the hull's price has it
    for p in early + list(local):
        readers = {local_and_cut[int(q)] for q in g.successors(p) if int(q) in local_and_cut}
        if size[p] <= 0 or not readers:
            continue
        arcs.append((local.get(p, 0), tensor, float(size[p])))
        arcs.extend((tensor, q, np.inf) for q in readers)
        tensor += 1
    arcs.extend((local[int(w)], local[v], np.inf) for v in local for w in g.successors(v) if int(w) in local)
    return arcs


def _least(arcs: list[Arc], cache: dict[tuple[Arc, ...], float]) -> float:
    """The network's minimum cut from node 0 to node 1, once per distinct network."""
    key = tuple(arcs)
    if key not in cache:
        cache[key] = min_cut(arcs)[0]
    return cache[key]
