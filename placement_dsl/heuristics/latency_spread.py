"""Spreads for the latency local search: a module's parallel branches, each on a device of its own.

Between two ops comparable with all others (*cut* ops: an Inception module's concatenations, a residual block's
add) the branches of a module can run at once: in Tarnawski's invocation model (NeurIPS 2020, §4) a branch's middle on
an accelerator of its own costs its accelerator time, one read and one write, and its ends on hosts their host time,
while the module on one accelerator costs the sum of its branches. The local search's block moves reach that one
branch at a time, and under contiguity (Def. 3.1, hosts too) a branch can leave a device only once the cut op after it
has left it as well, so no single move gets there (InceptionV3's split of 1,282.97 runs two modules per accelerator).

A *spread* of the cut ops ``lo .. hi`` of a split rewrites it at once: each of those cut ops on a host of its own,
and each disjoint path of the segments between them split where its chain is fastest, its host prefix on the host of
the cut op before it, its middle on an accelerator the split leaves free, its host suffix on the host of the cut op
after it (the paths that gain most get the free accelerators first); the rest of those segments runs on the host of
the cut op before it, or after it where it follows a middle (a host holds a convex set too). Devices holding only
ops of the spread ops count as free. A spread that needs more free hosts
than there are is not made.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..structure import cut_segments, disjoint_paths

WIDTHS = (1, 2, 3, 4, 6, 8)  # consecutive cut ops spread at once


class Spreads:
    """The cut ops, segments and disjoint paths of one graph (computed once), and the spreads of a split."""

    def __init__(self, su: Any) -> None:
        self.su = su
        g = su.graph
        self.cuts, self.seg = cut_segments(g)
        k = self.cuts.size
        iscut = np.zeros(g.n, dtype=bool)
        iscut[self.cuts] = True
        self.iscut = iscut
        rest = np.flatnonzero(~iscut)
        rest = rest[np.argsort(self.seg[rest], kind="stable")]
        self.members = np.split(rest, np.searchsorted(self.seg[rest], np.arange(1, k + 1)))
        self.paths: list[list[np.ndarray]] = [[] for _ in range(k + 1)]
        inside = np.zeros(g.n, dtype=bool)
        for j in range(1, k):
            if self.members[j].size:
                inside[self.members[j]] = True
                self.paths[j] = [p for p in disjoint_paths(g, int(self.cuts[j - 1]), int(self.cuts[j]), inside)
                                 if p.size]
                inside[self.members[j]] = False
        branched = np.array([len(p) > 1 for p in self.paths], dtype=np.int64)  # segments of parallel paths
        self.branched = np.concatenate(([0], np.cumsum(branched)))  # among the first j

    def __call__(self, dev: np.ndarray) -> Iterator[np.ndarray]:
        """The spreads of split ``dev`` (op -> device), widths :data:`WIDTHS`, every start."""
        k = self.cuts.size
        for width in WIDTHS:
            for lo in range(k - width + 1):
                hi = lo + width - 1
                if self.branched[hi + 1] == self.branched[lo + 1]:  # no segment between them has parallel paths
                    continue
                out = self.spread(dev, lo, hi)
                if out is not None:
                    yield out

    def spread(self, dev: np.ndarray, lo: int, hi: int) -> np.ndarray | None:
        """Cut ops ``lo .. hi`` and the segments between them spread (module docstring); ``None`` when the split
        leaves too few free hosts or an op may not run where the spread puts it."""
        su = self.su
        c = su.cluster
        times, scale, out = su.kernel[2], su.kernel[3], su.kernel[4]
        window = np.zeros(dev.size, dtype=bool)
        window[self.cuts[lo:hi + 1]] = True
        for j in range(lo + 1, hi + 1):
            window[self.members[j]] = True
        busy = np.zeros(c.size, dtype=bool)
        busy[dev[~window]] = True
        hosts = [d for d in np.flatnonzero(c.host & ~busy).tolist()]
        accs = [d for d in np.flatnonzero(~c.host & ~busy).tolist()]
        if len(hosts) < hi - lo + 1:
            return None
        new = np.asarray(dev, dtype=np.int64).copy()
        cpu = dict(zip(range(lo, hi + 1), hosts))
        for i in range(lo, hi + 1):
            new[self.cuts[i]] = cpu[i]
        offers = []
        for j in range(lo + 1, hi + 1):
            new[self.members[j]] = cpu[j - 1]
            if accs:
                for b in self.paths[j]:
                    offer = self._middle(b, int(self.cuts[j - 1]), times[cpu[j - 1]], times[cpu[j]], times[accs[0]],
                                         float(scale[accs[0]]), out, float(su.cap[accs[0]]))
                    if offer is not None:
                        offers.append((offer[0], j, b, offer[1], offer[2]))
        offers.sort(key=lambda o: -o[0])
        moved = set()
        for _, j, b, s, e in offers[:len(accs)]:
            new[b[s:e + 1]] = accs.pop(0)
            new[b[e + 1:]] = cpu[j]
            moved.add(j)
        for j in moved:  # the ops off the paths that follow a middle go to the host after it (hosts stay convex)
            self._after_middles(new, j, cpu[j - 1], cpu[j])
        if not np.isfinite(times[new, np.arange(new.size)]).all():
            return None
        return new

    def _after_middles(self, new: np.ndarray, j: int, before: int, after: int) -> None:
        """Segment ``j``'s ops on host ``before`` that descend from an accelerator's or host ``after``'s op move to host
        ``after``: a host holds a convex set, and a path from ``before`` through an accelerator back to it is none."""
        g, host = self.su.graph, self.su.cluster.host
        ops = self.members[j]
        late = np.zeros(g.n, dtype=bool)
        for v in ops[np.argsort(g.rank[ops], kind="stable")].tolist():
            preds = g.predecessors(v)
            late[v] = bool((late[preds] | ~host[new[preds]] | (new[preds] == after)).any())
            if late[v] and new[v] == before:
                new[v] = after

    def _middle(self, b: np.ndarray, before: int, pre: np.ndarray, suf: np.ndarray, acc: np.ndarray, scale: float,
                out: np.ndarray, cap: float) -> tuple[float, int, int] | None:
        """Path ``b``'s fastest chain with its middle ``b[s..e]`` on an accelerator (times ``acc``, transfer
        ``scale``; the middle reads the tensor before it and writes its last op's) and its ends on hosts (times
        ``pre`` before, ``suf`` after): ``(time saved over the path on the host before it, s, e)``, ``None`` when no
        middle saves time or fits the accelerator's memory ``cap``."""
        h0, h1, a = pre[b], suf[b], acc[b]
        mem = self.su.graph.param_bytes[b] + self.su.graph.activation_bytes[b]
        read = scale * np.concatenate(([out[before]], out[b[:-1]]))
        write = scale * out[b]
        head = np.concatenate(([0.0], np.cumsum(h0)))  # host time of b[:s]
        tail = np.concatenate((np.cumsum(h1[::-1])[::-1], [0.0]))  # host time of b[e + 1:]
        work = np.concatenate(([0.0], np.cumsum(a)))
        room = np.concatenate(([0.0], np.cumsum(mem)))
        s, e = np.triu_indices(b.size)
        with np.errstate(invalid="ignore"):
            t = head[s] + read[s] + (work[e + 1] - work[s]) + write[e] + tail[e + 1]
        t = np.where((room[e + 1] - room[s]) <= cap * (1 + 1e-9), t, np.inf)
        t = np.where(np.isfinite(t), t, np.inf)
        if not t.size:
            return None
        best = int(np.argmin(t))
        saved = float(head[-1]) - float(t[best])
        return (saved, int(s[best]), int(e[best])) if saved > 0 else None
