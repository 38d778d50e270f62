"""The lattice of ideals of a contracted DAG and what the DP over ideals reads from it (Tarnawski et al., NeurIPS 2020,
§5.1.1-5.1.2): device classes, the ideals as bitsets with their immediate-sub-ideal lists, size estimates that
decline a lattice too large to build, per-class node costs and tensors, and the DFS linearization of §5.1.2.

:mod:`.ideals` (the ``dp``/``dpl`` methods) and :mod:`.ideal_solve` (the DP's runs) both read it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..cluster import Cluster
from ..errors import SpecError
from ..graph import last_first_order
from ..structure import count_ideals
from . import ideal_kernels as K
from . import jit
from .base import TimeLimitReached, kernel_deadline
from .contract import Contraction, smallest_first_order, successor_csr

MAX_STATES = 4096
MAX_LATTICE_BYTES = 2 * 2**30  # the ideals' and tensors' bitsets (lattice_size_ok); beyond this it declines
DEFAULT_MAX_IDEALS = 2_000_000


# ---------------------------------------------------------------------------- devices
@dataclass(frozen=True)
class DeviceClass:
    """Interchangeable devices: same kind, memory, speed, bandwidth and host flag, and the same pins: ``banned`` are
    the ops pinned to a device outside the class, which may not run on it."""

    devices: tuple[int, ...]
    kind: str
    host: bool
    memory: float
    speed: float
    bandwidth: float
    banned: tuple[int, ...] = ()

    @property
    def count(self) -> int:
        return len(self.devices)


def device_classes(cluster: Cluster, pins: dict[int, str] | None = None) -> list[DeviceClass]:
    """The cluster's devices grouped into classes of identical devices (cluster order kept). With ``pins`` (op ->
    device name, :attr:`~placement_dsl.graph.Graph.pinned`) a device some op is pinned to is a class of its own, and
    each class bans the ops pinned outside it (:attr:`DeviceClass.banned`): a stage holding a pinned op goes to its
    device only, so the DP searches the splits that keep the pins (a stage of a class of identical devices could
    otherwise land on any of them)."""
    at = {} if not pins else {op: cluster.index[dev] for op, dev in pins.items() if dev in cluster.index}
    held = set(at.values())
    out = []
    for idx in cluster.homogeneous_groups():
        d = cluster.devices[idx[0]]
        rest = tuple(i for i in idx if i not in held)
        for members in [(i,) for i in idx if i in held] + ([rest] if rest else []):
            banned = tuple(sorted(op for op, dev in at.items() if dev not in members))
            out.append(DeviceClass(members, d.kind, bool(d.host), d.memory, d.speed, d.bandwidth, banned))
    states = math.prod(c.count + 1 for c in out)
    if states > MAX_STATES:
        sizes = ", ".join(f"{len(c.devices)} x {c.kind!r}" for c in out)
        raise SpecError(f"dp: the cluster has {len(out)} classes of identical devices ({sizes}), giving {states} "
                        f"device-count states > {MAX_STATES}; make devices of a kind identical (memory, speed, "
                        "bandwidth) or use a heuristic such as 'slicegraph'")
    return out


# ---------------------------------------------------------------------------- the lattice
@dataclass(frozen=True)
class IdealLattice:
    """All ideals of a contraction's forward DAG, as bitsets, with immediate-sub-ideal links."""

    contraction: Contraction
    ideals: np.ndarray  # (N, W) uint64, breadth-first (by cardinality): 0 = ∅, N-1 = all nodes
    sub_ptr: np.ndarray  # CSR: sub_idx[sub_ptr[i]:sub_ptr[i+1]] = ideals[i] minus one maximal node
    sub_idx: np.ndarray

    @property
    def count(self) -> int:
        return len(self.ideals)

    def nodes(self, i: int) -> np.ndarray:
        """Supernodes in ideal ``i``."""
        bits = np.unpackbits(self.ideals[i].view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[: self.contraction.n_nodes])


def pack_bitsets(rows: list[np.ndarray] | np.ndarray, n: int) -> np.ndarray:
    """Boolean rows (k x n) -> uint64 words (k x ceil(n/64))."""
    rows = np.asarray(rows, dtype=bool).reshape(-1, n)
    W = max(1, -(-n // 64))
    padded = np.zeros((len(rows), W * 64), dtype=bool)
    padded[:, :n] = rows
    return np.packbits(padded, axis=1, bitorder="little").view(np.uint64).reshape(len(rows), W)


def ideal_lattice(con: Contraction, max_ideals: int = DEFAULT_MAX_IDEALS, deadline: float | None = None,
                  chain: np.ndarray | None = None) -> IdealLattice:
    """Enumerate the ideals of ``con``'s DAG (``chain``: the order of a path through every node, DPL's; its
    ``n + 1`` ideals are that order's prefixes, built at once, the same arrays as the enumeration's).

    Raises :class:`SpecError` beyond ``max_ideals`` ideals or :data:`MAX_LATTICE_BYTES` of bitsets,
    declined at once (:func:`lattice_size_ok`) where the DAG surely or very likely has too many;
    :class:`~.base.TimeLimitReached` when ``time.monotonic()`` passes ``deadline`` first.
    """
    n = con.n_nodes
    W = max(1, -(-n // 64))
    log2_count = lattice_size_ok(con, max_ideals, chain is not None)
    if chain is not None and n + 1 <= max_ideals:
        jit.note_work(n + 1.0, n + 1.0, n)
        return _prefixes(con, chain, W)
    pred_ptr, pred_idx = _predecessors(con)
    cap = int(max_ideals)
    if jit.tentative() and jit.note_work(2.0 ** log2_count, 2.0 ** log2_count, n):  # in Python while it stays small
        cap = min(cap, jit.python_ideals(n) + 1)
    ideals, child, parent, status = K.enumerate_ideals(pred_ptr, pred_idx, W, cap, kernel_deadline(deadline))
    if status == 1 and cap < max_ideals:  # larger than the estimate said: enumerate again, compiled
        jit.note_work(math.inf)
        ideals, child, parent, status = K.enumerate_ideals(pred_ptr, pred_idx, W, int(max_ideals),
                                                           kernel_deadline(deadline))
    if status == 1:
        raise SpecError(f"dp: graph {con.graph.name!r} has more than {max_ideals} ideals ({n} supernodes); "
                        "use method 'dpl' (linearized DP) or raise max_ideals")
    if status == 2:
        raise TimeLimitReached(f"dp: the time limit passed while enumerating the ideals of graph {con.graph.name!r} "
                               f"({len(ideals)} so far, {n} supernodes)")
    order = np.argsort(child, kind="stable")
    ptr = np.zeros(len(ideals) + 1, dtype=np.int64)
    np.cumsum(np.bincount(child, minlength=len(ideals)), out=ptr[1:])
    return IdealLattice(con, ideals, ptr, parent[order].astype(np.int64))


def _prefixes(con: Contraction, order: np.ndarray, W: int) -> IdealLattice:
    """The lattice of a DAG with a path through every node in ``order``: ideal ``k`` is ``order[:k]``, and its
    one immediate sub-ideal is ``k - 1`` (what :func:`.ideal_kernels.enumerate_ideals` finds breadth-first, without
    its hash table: 0.15 s in Python on ResNet-50's 177 supernodes)."""
    n = con.n_nodes
    if np.any(np.sort(order) != np.arange(n)):
        raise ValueError("dp: the chain's order is not a permutation of the supernodes")
    step = np.zeros((n + 1, W), dtype=np.uint64)
    order = np.asarray(order, dtype=np.int64)
    step[np.arange(1, n + 1), order >> 6] = np.left_shift(np.uint64(1), (order & 63).astype(np.uint64))
    ideals = np.bitwise_or.accumulate(step, axis=0)
    return IdealLattice(con, ideals, np.concatenate([[0, 0], np.arange(1, n + 1)]).astype(np.int64),
                        np.arange(n, dtype=np.int64))


def _predecessors(con: Contraction, topological: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The DAG's predecessor lists in CSR form (``pred_idx[pred_ptr[v]:pred_ptr[v + 1]]``); with ``topological``
    of the nodes renumbered so that every edge goes up (DPL's added path need not)."""
    src, dst, n = con.src, con.dst, con.n_nodes
    if topological and (src >= dst).any():
        pos = np.empty(n, dtype=np.int64)
        pos[smallest_first_order(n, *successor_csr(n, src, dst))] = np.arange(n)
        src, dst = pos[src], pos[dst]
    by_dst = np.argsort(dst, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=ptr[1:])
    return ptr, np.ascontiguousarray(src[by_dst], dtype=np.int64)


ESTIMATE_WALKS = 64
ESTIMATE_MARGIN = 3  # log2: an estimate this far (8x) above max_ideals declines (exact on chains, else mostly low)
COUNT_WORK = 50_000
"""Frontier patterns :func:`~placement_dsl.structure.count_ideals` may visit (5-30 ms in Python) before the sampled
estimate stands in: every shared operator and layer graph is counted exactly in 2 ms or less (GNMT's 17,914 ideals
in 10 ms), where the sampled estimate said 405 of BERT-L3 training's 2,774 and 1,726-24,083 of GNMT's, by seed.
A random DAG's frontier holds most of the nodes decided, and its patterns are about its ideals: there, where the
kernels' path is still open (:func:`.jit.tentative`), it is counted on up to :func:`.jit.python_ideals`."""


_SIZED: list = []  # (contraction, max_ideals, log2 count) of the last lattice_size_ok call that passed


def lattice_size_ok(con: Contraction, max_ideals: int, chain: bool = False) -> float:
    """log2 of the ideals' count as far as cheaply known; :class:`SpecError` (in ``O(n + m)`` steps and at most
    :data:`COUNT_WORK` frontier patterns, before any enumeration) when the DAG has more than ``max_ideals`` ideals
    for sure (``2 ** w`` for ``w`` supernodes of one depth, or counted), very likely (where the count ran out of
    patterns, the sampled estimate :func:`.ideal_kernels.log2_ideal_estimate` is 8 times above), or its bitsets
    would pass :data:`MAX_LATTICE_BYTES` (each ideal and each tensor is a row of ``n / 64`` words).

    The count (:func:`~placement_dsl.structure.count_ideals`) is exact where the DAG's frontier stays narrow (a few
    branches side by side), and then the answer is: whether the DP runs in Python or compiled
    (:func:`.jit.note_work`) goes by it, not by a sample that is mostly low (BERT-L3 training: 405 of 2,774, so the
    DP enumerated in Python to :data:`.jit.PYTHON_IDEALS` and started again compiled). ``chain``: the DAG has a path
    through every node (DPL's), so it has ``n + 1`` ideals and nothing is walked. The DP asks twice of one
    contraction (before DPL's run and at its lattice): the second answer is remembered."""
    if _SIZED and _SIZED[0] is con and _SIZED[1] == max_ideals:
        return _SIZED[2]
    n = con.n_nodes
    name, limit = con.graph.name, math.log2(max(int(max_ideals), 1))
    counted, exact = n + 1, chain
    if chain:
        wide, guess = min(n, 1), math.log2(n + 1)
    else:
        pred_ptr, pred_idx = _predecessors(con, topological=True)
        wide = int(K.widest_level(pred_ptr, pred_idx))
    if wide > limit:
        raise SpecError(f"dp: graph {name!r} has at least 2^{wide} ideals ({wide} of its {n} supernodes lie side "
                        f"by side at one depth), more than max_ideals={max_ideals}; use method 'dpl' (linearized DP) "
                        "or 'slicegraph'")
    if not chain:
        ptr, idx = pred_ptr.tolist(), pred_idx.tolist()
        pred = [idx[ptr[v]:ptr[v + 1]] for v in range(n)]
        counted, exact = count_ideals(pred, cap=max_ideals, work=COUNT_WORK)
        few = jit.python_ideals(n)
        if not exact and counted <= few and jit.tentative():  # Python or compiled: count up to the line, whatever
            counted, exact = count_ideals(pred, cap=few)  # it costs (n * few <= jit.PYTHON_NODE_IDEALS patterns)
        if counted > max_ideals:
            raise SpecError(f"dp: graph {name!r} has more than {max_ideals} ideals ({n} supernodes); use method 'dpl' "
                            "(linearized DP) or raise max_ideals")
        guess = math.log2(counted) if exact else max(
            math.log2(counted), float(K.log2_ideal_estimate(pred_ptr, pred_idx, ESTIMATE_WALKS, 0)))
    if guess > limit + ESTIMATE_MARGIN:
        raise SpecError(f"dp: graph {name!r} has about 2^{guess:.0f} ideals by sampling ({n} supernodes), far more "
                        f"than max_ideals={max_ideals}; use method 'dpl' (linearized DP) or 'slicegraph'")
    at_least = float(counted) if exact else max(n + 1.0, 2.0 ** wide, float(counted),
                                                min(2.0 ** guess, float(max_ideals)))
    need = (at_least + n) * 8 * max(1, -(-n // 64))  # ideals and (up to about n) tensors, n / 64 words each
    if need > MAX_LATTICE_BYTES:
        raise SpecError(f"dp: graph {name!r} has {n} supernodes: its ideals as bitsets need at least "
                        f"{need / 2**30:.1f} GiB, above the limit of {MAX_LATTICE_BYTES / 2**30:.1f} GiB; use method "
                        "'slicegraph' or 'pipeline', or coarsen the graph")
    found = math.log2(at_least) if exact else max(math.log2(at_least), guess)
    if not chain:
        _SIZED[:] = (con, max_ideals, found)
    return found


# ---------------------------------------------------------------------------- instance data
def node_costs(con: Contraction, classes: list[DeviceClass]):
    """Per supernode: work per class, unsupported-op count per class, memory, parameters."""
    g, n = con.graph, con.n_nodes
    work = np.zeros((len(classes), n))
    unsup = np.zeros((len(classes), n), dtype=np.int64)
    for c, cls in enumerate(classes):
        t = g.work(cls.kind) / cls.speed
        bad = ~np.isfinite(t)
        bad[list(cls.banned)] = True  # pinned to a device outside the class
        work[c] = np.bincount(con.image, weights=np.where(bad, 0.0, t), minlength=n)
        unsup[c] = np.bincount(con.image, weights=bad, minlength=n).astype(np.int64)
    mem = np.bincount(con.image, weights=g.param_bytes + g.activation_bytes, minlength=n)
    param = np.bincount(con.image, weights=g.param_bytes, minlength=n)
    return work, unsup, mem, param


def tensor_sets(con: Contraction, forward_only: bool = False):
    """Tensors as supernode sets: (masks, owner node, bytes, first word, end word).

    The tensor of op ``u`` touches its own node and its consumers' nodes; it crosses a
    device boundary iff that set is split. Tensors with the same (owner, set) are summed.
    ``forward_only`` keeps the tensors made by forward ops (a training stage's stashed inputs).
    """
    g, img = con.graph, con.image
    agg: dict[tuple[int, frozenset[int]], float] = {}
    for u in np.flatnonzero((g.out_bytes > 0) & ~(g.backward & forward_only)):
        nodes = frozenset(img[g.successors(u)].tolist()) | {int(img[u])}
        if len(nodes) > 1:
            key = (int(img[u]), nodes)
            agg[key] = agg.get(key, 0.0) + float(g.out_bytes[u])
    n = con.n_nodes
    masks = np.zeros((len(agg), max(1, -(-n // 64))), np.uint64)  # bitsets built directly: no dense tensors x n
    if agg:
        row = np.repeat(np.arange(len(agg)), [len(nodes) for _, nodes in agg])
        col = np.fromiter((v for _, nodes in agg for v in nodes), dtype=np.int64, count=len(row))
        np.bitwise_or.at(masks, (row, col >> 6), np.left_shift(np.uint64(1), (col & 63).astype(np.uint64)))
    owner = np.array([a for a, _ in agg], dtype=np.int64)
    cost = np.array(list(agg.values()), dtype=float)
    lo = np.array([min(s) // 64 for _, s in agg], dtype=np.int64)
    hi = np.array([max(s) // 64 + 1 for _, s in agg], dtype=np.int64)
    return masks, owner, cost, lo, hi


def count_states(classes: list[DeviceClass]) -> tuple[np.ndarray, np.ndarray]:
    """All device-count vectors (mixed radix, index increasing in every count) and strides."""
    radix = [c.count + 1 for c in classes]
    strides = np.cumprod([1] + radix[:-1]).astype(np.int64)
    counts = np.array(np.unravel_index(np.arange(math.prod(radix)), radix[::-1], order="C")).T[:, ::-1]
    return np.ascontiguousarray(counts, dtype=np.int64), strides


# ---------------------------------------------------------------------------- linearization
def natural_rank(names: list[str]) -> np.ndarray:
    """Rank of names in natural order: integers numerically, before other names."""
    keys = [(0, int(x), "") if x.lstrip("-").isdigit() else (1, 0, x) for x in names]
    rank = np.empty(len(keys), dtype=np.int64)
    rank[sorted(range(len(keys)), key=keys.__getitem__)] = np.arange(len(keys))
    return rank


def dfs_order(con: Contraction) -> np.ndarray:
    """A topological order of the forward DAG by DFS (Kahn's algorithm with a stack, §5.1.2).

    Ready nodes are pushed in the natural order of their representative op's name and the
    last one pushed is visited first; on the paper's integer-id inputs this is the order
    of the reference implementation, which makes DPL reproduce Table 1.
    """
    n = con.n_nodes
    key = natural_rank([con.graph.names[r] for r in con.rep])
    indeg = np.bincount(con.dst, minlength=n)
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v in sorted(zip(con.src.tolist(), con.dst.tolist()), key=lambda e: key[e[1]]):
        succ[u].append(v)
    stack = sorted(np.flatnonzero(indeg == 0).tolist(), key=key.__getitem__)
    return np.array(last_first_order(succ, indeg, stack), dtype=np.int64)
