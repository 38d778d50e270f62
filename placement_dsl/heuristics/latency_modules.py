"""Module re-solves for the latency local search: one module's branches placed anew, the rest of a split fixed.

A *module* is the set ``S_j`` of ops between two consecutive cut ops ``c_{j-1}`` and ``c_j`` (ops comparable with
all others: an Inception module's concatenations, a residual block's adds; :func:`~placement_dsl.structure.cut_segments`).
Its *branches* are the weakly connected components of ``S_j``. With ``c_{j-1}`` on ``X`` and ``c_j`` on ``Y`` and
every op outside ``S_j`` where the split runs it, Tarnawski's contiguity (NeurIPS 2020, Def. 3.1, hosts too) leaves a
branch op three kinds of place: ``X``, ``Y``, or a device that holds no op outside ``S_j`` (any other device holds an
op before ``c_{j-1}`` or after ``c_j``, and a path through ``c_{j-1}`` or ``c_j`` would leave it and come back). In
a branch, ``X`` then holds an ideal ``P`` (a down-set of the branch), ``Y`` the complement of an ideal ``Q``, and
the difference ``Q \\ P`` (convex) runs on one device elsewhere. A branch's *options* are its pairs of ideals
``P <= Q`` with a device for ``Q \\ P``: a free accelerator (branches sharing one run in one invocation, reading
and writing once) or a free host (hosts never wait, so one free host of a kind serves every branch).

:class:`Modules` re-solves one module at a time: every combination of its branches' options, scored with the
compiled referee (:func:`.latency_kernels.latency`) and the memory excess, identical free accelerators taken in one
order only (they are interchangeable). It is exact over those combinations when they number at most :data:`EXACT`;
beyond, a descent over one branch's options at a time from the split's own placement of the module. The spreads of
:mod:`.latency_spread` move several modules' cut ops at once but split each branch at its fastest chain on a device
of its own; a re-solve keeps the cut ops and weighs every branch's prefix, middle and suffix against the others' on
the devices the split leaves, and lets branches share an accelerator when there are fewer free ones than branches.
"""
from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..graph import union_roots
from ..structure import ideal_masks
from .latency_kernels import better
from .latency_spread import Spreads

EXACT = 4000  # combinations of a module's branch options priced one by one, at most; beyond, a descent
MAX_IDEALS = 24  # ideals of a branch enumerated, at most (a path of n ops has n + 1); beyond, whole moves only
MAX_MODULE = 400  # ops of a module re-solved, at most


def ideals(graph: Any, ops: np.ndarray, most: int = MAX_IDEALS) -> list[np.ndarray] | None:
    """The down-sets of the subgraph ``ops`` induces (as boolean masks over ``ops``, smallest first), ``None`` when
    there are more than ``most``.

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name=x, work=1.0) for x in "abc"], [("a", "b"), ("a", "c")])
    >>> [m.astype(int).tolist() for m in ideals(g, np.array([0, 1, 2]))]
    [[0, 0, 0], [1, 0, 0], [1, 1, 0], [1, 0, 1], [1, 1, 1]]
    """
    where = {int(v): i for i, v in enumerate(ops.tolist())}
    succ = [[where[u] for u in graph.successors(int(v)).tolist() if u in where] for v in ops.tolist()]
    pred = [[where[u] for u in graph.predecessors(int(v)).tolist() if u in where] for v in ops.tolist()]
    found = ideal_masks(succ, pred, most)
    if found is None:
        return None
    members = [[i for i in range(ops.size) if bits >> i & 1] for bits in found]
    out = []
    for s in sorted(members, key=lambda s: (len(s), s)):
        mask = np.zeros(ops.size, dtype=bool)
        mask[s] = True
        out.append(mask)
    return out


class Modules:
    """The modules of one graph and their branches (computed once), and the re-solves of a split's modules.

    ``score(su, split)`` is the search's key (:func:`.latency.split_score`: memory excess, latency, sum of
    finishes); ``evaluations`` counts its calls so far."""

    def __init__(self, su: Any, spreads: Spreads, score: Callable[[Any, np.ndarray], tuple[float, float, float]]
                 ) -> None:
        self.su, self.score, self.evaluations = su, score, 0
        g = su.graph
        self.cuts, self.members = spreads.cuts, spreads.members
        self.branches: list[list[tuple[np.ndarray, list[np.ndarray] | None]]] = [[] for _ in self.members]
        for j in range(1, self.cuts.size):
            ops = self.members[j]
            if ops.size and ops.size <= MAX_MODULE and self._colocated_within(ops):
                self.branches[j] = [(comp, ideals(g, comp)) for comp in components(g, ops)]
        self._tried: set[tuple] = set()  # modules re-solved without a gain: (j, their devices, the free devices)

    def _colocated_within(self, ops: np.ndarray) -> bool:
        """Whether no colocation group holds ops both inside and outside ``ops`` (a group moves as one)."""
        gid = self.su.gid
        inside = np.zeros(self.su.gptr.size - 1, dtype=np.int64)
        np.add.at(inside, gid[ops], 1)
        sizes = np.diff(self.su.gptr)
        touched = np.unique(gid[ops])
        return bool((inside[touched] == sizes[touched]).all())

    def __call__(self, dev: np.ndarray, key: Any, deadline: float) -> Iterator[np.ndarray]:
        """Each module's re-solve of split ``dev`` (whose score is ``key``) that scores better than ``key``; modules
        whose devices and free devices are those of a re-solve without a gain are skipped."""
        for j in range(1, self.cuts.size):
            if time.perf_counter() >= deadline:
                return
            if not self.branches[j]:
                continue
            out = self.resolve(dev, key, j, deadline)
            if out is not None:
                yield out

    def free_devices(self, dev: np.ndarray, j: int) -> np.ndarray:
        """The devices other than ``c_{j-1}``'s and ``c_j``'s that hold no op outside module ``j``."""
        c = self.su.cluster
        outside = np.ones(dev.size, dtype=bool)
        outside[self.members[j]] = False
        busy = np.zeros(c.size, dtype=bool)
        busy[dev[outside]] = True
        return np.flatnonzero(~busy)

    def resolve(self, dev: np.ndarray, key: Any, j: int, deadline: float) -> np.ndarray | None:
        """Module ``j`` of ``dev`` re-solved (module docstring): the best split found, ``None`` when none scores
        better than ``key``."""
        ops = self.members[j]
        x, y = int(dev[self.cuts[j - 1]]), int(dev[self.cuts[j]])
        free = self.free_devices(dev, j)
        memo = (j, dev[ops].tobytes(), x, y, free.tobytes())
        if memo in self._tried:
            return None
        places = self._places(free)
        options = [self._options(comp, masks, x, y, places) for comp, masks in self.branches[j]]
        base = np.asarray(dev, dtype=np.int64).copy()
        best: list[Any] = [tuple(key), None]
        count = _combinations(options, places)
        comps = [comp for comp, _ in self.branches[j]]
        if count <= EXACT:
            self._exhaustive(base, comps, options, places, best, deadline)
        else:
            self._descend(base, comps, options, places, best, deadline)
        if best[1] is None:
            self._tried.add(memo)
        return best[1]

    def _places(self, free: np.ndarray) -> list[list[int]]:
        """The free devices a middle may go to, by class: for each class of identical free accelerators its members
        (used in order), and for each class of free hosts its first member (one serves every branch)."""
        c = self.su.cluster
        is_free = np.zeros(c.size, dtype=bool)
        is_free[free] = True
        out = []
        for grp in c.homogeneous_groups():
            members = [d for d in grp if is_free[d]]
            if members:
                out.append(members[:1] if c.host[members[0]] else members)
        return out

    def _options(self, comp: np.ndarray, masks: list[np.ndarray] | None, x: int, y: int,
                 places: list[list[int]]) -> list[tuple[np.ndarray, int]]:
        """A branch's options as ``(devices of its ops, place class)``: the class a middle goes to (``-1``: none; its
        ops then say ``-1`` for the middle's device, chosen at combination time)."""
        times = self.su.kernel[2]
        out: list[tuple[np.ndarray, int]] = []
        if masks is None:  # too many ideals: the whole branch on X, on Y, or elsewhere
            masks = [np.zeros(comp.size, dtype=bool), np.ones(comp.size, dtype=bool)]
        for a, b in itertools.combinations_with_replacement(range(len(masks)), 2):
            p, q = masks[a], masks[b]
            if not (p <= q).all():
                continue
            devs = np.where(p, x, np.where(q, -1, y)).astype(np.int64)
            if not (q & ~p).any():
                if np.isfinite(times[devs, comp]).all():
                    out.append((devs, -1))
                continue
            mid = comp[q & ~p]
            for k, members in enumerate(places):
                if np.isfinite(times[members[0], mid]).all():
                    out.append((devs, k))
        return out

    def _score(self, new: np.ndarray) -> tuple[float, float, float]:
        self.evaluations += 1
        return self.score(self.su, new)

    def _exhaustive(self, base: np.ndarray, comps: list[np.ndarray], options: list, places: list[list[int]],
                    best: list[Any], deadline: float) -> None:
        """Every combination, the accelerators of a class taken in order (a branch's middle goes to one already in
        use or to the next unused one)."""
        used = [0] * len(places)

        def place(i: int) -> None:
            if time.perf_counter() >= deadline:
                return
            if i == len(options):
                key = self._score(base)
                if better(*key, *best[0]):
                    best[0], best[1] = key, base.copy()
                return
            comp = comps[i]
            for devs, k in options[i]:
                if k < 0:
                    base[comp] = devs
                    place(i + 1)
                    continue
                members = places[k]
                for slot in range(min(used[k] + 1, len(members))):
                    base[comp] = np.where(devs < 0, members[slot], devs)
                    grew = slot == used[k]
                    used[k] += grew
                    place(i + 1)
                    used[k] -= grew

        place(0)

    def _descend(self, base: np.ndarray, comps: list[np.ndarray], options: list, places: list[list[int]],
                 best: list[Any], deadline: float) -> None:
        """One branch's options at a time (each middle on any free device of its class), from the split's own
        placement of the module, until no branch's change scores better."""
        improved = True
        while improved and time.perf_counter() < deadline:
            improved = False
            for i, comp in enumerate(comps):
                keep = base[comp].copy()
                for devs, k in options[i]:
                    for d in (places[k] if k >= 0 else [-1]):
                        base[comp] = np.where(devs < 0, d, devs)
                        key = self._score(base)
                        if better(*key, *best[0]):
                            best[0], best[1], keep, improved = key, base.copy(), base[comp].copy(), True
                base[comp] = keep
                if time.perf_counter() >= deadline:
                    return


def _combinations(options: list[list[tuple[np.ndarray, int]]], places: list[list[int]]) -> float:
    """An upper bound on the combinations :meth:`Modules._exhaustive` prices: branch ``i``'s middle in a class goes to
    one of at most ``min(i + 1, size)`` of its accelerators."""
    total = 1.0
    for i, opts in enumerate(options):
        total *= sum(1 if k < 0 else min(i + 1, len(places[k])) for _, k in opts)
        if total > 1e12:
            return math.inf
    return total


def components(graph: Any, ops: np.ndarray) -> list[np.ndarray]:
    """The weakly connected components of the subgraph ``ops`` induces, each in topological order."""
    where = {int(v): i for i, v in enumerate(ops.tolist())}
    label = np.array(union_roots(ops.size, [(i, where[int(u)]) for i, v in enumerate(ops.tolist())
                                            for u in graph.successors(int(v)).tolist() if int(u) in where]),
                     dtype=np.int64)
    rank = graph.rank[ops]
    out = []
    for r in np.unique(label):
        comp = ops[label == r]
        out.append(comp[np.argsort(rank[label == r], kind="stable")])
    out.sort(key=lambda comp: int(graph.rank[comp[0]]))
    return out
