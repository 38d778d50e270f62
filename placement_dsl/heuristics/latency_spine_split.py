"""The spine split: runs of cut ops one after another, each module between two runs spread over free accelerators.

Tarnawski et al.'s invocation model (NeurIPS 2020, §4): an op comparable with every other (a *cut* op: an Inception
module's concatenation, a residual block's add; :func:`~placement_dsl.structure.cut_segments`) lies on every
schedule's critical chain, so a split is a sequence of *runs* (consecutive cut ops on one device, with the modules
between them) and, between two runs, a module whose branches (the weakly connected components of its ops) run on the
run before it, or each on an accelerator of its own after that run ends and before the next one starts. The chain
split (:mod:`.latency_chain`) prices runs only, one device after another; the spreads of the local search
(:mod:`.latency_spread`) spread modules of a split that already uses its accelerators, so the twelve accelerators
of InceptionV3's input go to the first modules that get them. This DP weighs them against each other: over the cut
ops, with the accelerators and hosts used so far as its state (as the chain split's), a step is a run on the next
accelerator or host (its reads, work and writes within its memory, or its longest path of host times) followed by
the module after it, whose ``m`` branches that gain most from it each take one of the next ``m`` accelerators
(reading their inputs, computing, writing their outputs) while the others stay on the run's device or go to a host
of their own; the step costs the run plus the longest of the module's parts elsewhere. The sum along the cut ops is
the chain's latency where every part elsewhere ends before the next run starts (the referee may overlap more).

The prices are a chain's, not the referee's (a module's branches on the run's accelerator add their work to it; a
branch elsewhere goes whole, no prefix kept on the run): the split is a start for the latency local search, whose
module re-solves (:mod:`.latency_modules`) place prefixes and suffixes. :func:`spine_split` declines (``SpecError``)
without cut ops, above :data:`MAX_CUTS` of them, and without a module of two branches or more (the chain split's
case).
"""
from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..errors import SpecError
from ..evaluate import CostModel, MemoryMode
from ..graph import Graph
from ..structure import cut_segments
from .latency_modules import components

MAX_CUTS = 600  # cut ops above which the spine split declines (its runs grow as their square)
MAX_RUN = 128  # cut ops of one run, at most (the chain split prices longer runs)


def spine_split(graph: Graph, cluster: Cluster, model: CostModel, deadline: float | None = None) -> np.ndarray:
    """Op -> device of the cheapest chain of runs and spread modules (module docstring); ``deadline`` is
    ``time.monotonic()``'s.

    >>> from placement_dsl.graph import Op
    >>> ops = [Op(name=x, work={"accelerator": 1.0, "cpu": 1.0}, out_bytes=1.0) for x in ("a", "d")]
    >>> ops += [Op(name=x, work={"accelerator": 10.0, "cpu": 90.0}, out_bytes=1.0) for x in ("b", "c")]
    >>> g = Graph(ops, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    >>> c = Cluster.accelerators(3, memory=10.0, cpus=1)
    >>> split = spine_split(g, c, CostModel.named("latency"))  # b and c each on an accelerator after a's run
    >>> {g.names[v]: c.names[d] for v, d in enumerate(split)}
    {'a': 'acc0', 'd': 'cpu0', 'b': 'acc2', 'c': 'acc1'}
    """
    cuts, seg = cut_segments(graph)
    k = cuts.size
    if k == 0 or k > MAX_CUTS:
        raise SpecError(f"spine split: {k} cut ops (it needs 1 to {MAX_CUTS})")
    s = _Spine(graph, cluster, model, cuts, seg)
    if not any(len(components(graph, ops)) > 1 for ops in s.members if ops.size > 1):
        raise SpecError("spine split: no module of parallel branches (the chain split prices such a graph)")
    return s.solve(deadline)


class _Spine:
    """The runs' prices and the modules' options of one graph and cluster, and the DP over them."""

    def __init__(self, graph: Graph, cluster: Cluster, model: CostModel, cuts: np.ndarray, seg: np.ndarray) -> None:
        self.g, self.c, self.cuts, self.deadline = graph, cluster, cuts, None
        k, n = cuts.size, graph.n
        iscut = np.zeros(n, dtype=bool)
        iscut[cuts] = True
        self.order = np.lexsort((graph.rank, iscut, seg))  # S_0, c_0, S_1, c_1, ...: a topological order
        self.pos = np.empty(n, dtype=np.int64)
        self.pos[self.order] = np.arange(n)
        self.members = [np.flatnonzero(~iscut & (seg == j)) for j in range(k + 1)]
        self.acc, self.hosts = np.flatnonzero(~cluster.host), np.flatnonzero(cluster.host)
        times = cluster.times(graph)  # (ops, devices), inf where not allowed
        self.times = times
        self.host = times[:, self.hosts].min(axis=1) if self.hosts.size else np.full(n, math.inf)
        self.mem = (graph.param_bytes + graph.activation_bytes).astype(float)
        self.cap = cluster.memory.astype(float) if model.memory is MemoryMode.HARD else np.full(cluster.size, math.inf)
        self.cap = self.cap * (1 + 1e-9)
        self.out = graph.out_bytes.astype(float)
        self.scale = cluster.transfer_scale.astype(float)
        ends = np.concatenate((self.pos[cuts[:-1]] + 1, [n]))  # a run ending at c_{e-1} (the last one: the graph's end)
        self.ends = ends
        self.starts = np.concatenate(([0], self.pos[cuts[1:]]))  # a run starting at c_i (the first: the graph's start)
        src_pos, dst_pos = self.pos[graph.src], self.pos[graph.dst]
        self.edges = (src_pos, dst_pos, self.out[graph.src])
        self.last = np.full(n, -1, dtype=np.int64)  # by position: its last consumer's position
        np.maximum.at(self.last, src_pos, dst_pos)

    # ------------------------------------------------------------------ runs
    def _transfers(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        """Bytes a run from position ``p`` reads and writes, for each end in :attr:`ends`."""
        src_pos, dst_pos, _ = self.edges
        before = (src_pos < p) & (dst_pos >= p)
        first = np.full(self.g.n, np.iinfo(np.int64).max)  # per producer before p: its first consumer from p on
        np.minimum.at(first, src_pos[before], dst_pos[before])
        has = first < np.iinfo(np.int64).max
        f, w = first[has], self.out[self.order][has]
        o = np.argsort(f)
        cum = np.concatenate(([0.0], np.cumsum(w[o])))
        reads = cum[np.searchsorted(f[o], self.ends, side="left")]
        n = self.g.n
        outb = np.where(self.last >= 0, self.out[self.order], 0.0)
        u = np.arange(p, n)  # an op from p on is written by a run ending at q when u < q <= its last consumer
        diff = np.zeros(n + 2)
        np.add.at(diff, u + 1, outb[u])
        np.add.at(diff, np.maximum(self.last[u], u) + 1, -outb[u])
        writes = np.cumsum(diff)[self.ends]
        return reads, writes

    def _host_paths(self, p: int) -> np.ndarray:
        """The longest path of host times inside a run from position ``p``, for each end in :attr:`ends`."""
        g, n = self.g, self.g.n
        dist = np.zeros(n)
        best = np.zeros(n)
        top = 0.0
        for q in range(p, n):
            v = int(self.order[q])
            preds = self.pos[g.predecessors(v)]
            preds = preds[preds >= p]
            dist[q] = self.host[v] + (float(dist[preds].max()) if preds.size else 0.0)
            top = max(top, dist[q])
            best[q] = top
        return best[self.ends - 1]

    # ------------------------------------------------------------------ modules
    def _branches(self, j: int, a: int, run_on_host: bool) -> dict[str, Any]:
        """Module ``j``'s branches after a run on a host (``run_on_host``) or an accelerator: their work on
        accelerator ``a`` with the writes of what they send (staying on an accelerator run), their longest host path,
        memory, and their time elsewhere: a chain's fastest cut (prefix on the run's device, middle on accelerator
        ``a`` reading the tensor before it and writing its last op's, suffix on the next run's device, priced at the
        run's kind: :meth:`_cut`), another branch whole on ``a``; ``cut`` holds each branch's ``(s, e)`` middle."""
        g = self.g
        comps = components(g, self.members[j]) if self.members[j].size else []
        inside = np.zeros(g.n, dtype=np.int64)
        out: dict[str, Any] = {"work": [], "mid": [], "host": [], "mem": [], "cut": [], "comps": comps}
        for b, comp in enumerate(comps):
            inside[comp] = b + 1
            t = self.times[comp, a]
            sent = [int(v) for v in comp.tolist() if any(inside[w] != b + 1 for w in g.successors(v).tolist())]
            out["work"].append(float(t.sum()) + self.scale[a] * float(self.out[sent].sum()))
            out["host"].append(g.longest(self.host, comp))
            out["mem"].append(float(self.mem[comp].sum()))
            mid, cut = self._cut(comp, a, self.host if run_on_host else self.times[:, a], inside, b + 1)
            out["mid"].append(mid)
            out["cut"].append(cut)
        return {key: (np.asarray(v, dtype=float) if key in ("work", "mid", "host", "mem") else v)
                for key, v in out.items()}

    def _cut(self, comp: np.ndarray, a: int, ends: np.ndarray, inside: np.ndarray, label: int) -> tuple[float, tuple]:
        """A branch's least time elsewhere and its middle ``(s, e)`` (positions in ``comp``): a chain's prefix and
        suffix at times ``ends``, its middle on accelerator ``a`` with one read and one write (within ``a``'s
        memory); a branch that is not a chain, whole on ``a`` with its reads and writes."""
        g = self.g
        chain = all(int((inside[g.predecessors(int(v))] == label).sum()) <= 1
                    and int((inside[g.successors(int(v))] == label).sum()) <= 1 for v in comp.tolist())
        t, mem = self.times[comp, a], self.mem[comp]
        if not chain or comp.size > 64:
            read = {int(u) for v in comp.tolist() for u in g.predecessors(v).tolist() if inside[u] != label}
            sent = [int(v) for v in comp.tolist() if any(inside[w] != label for w in g.successors(v).tolist())]
            io = self.scale[a] * (self.out[list(read)].sum() + self.out[sent].sum())
            whole = float(t.sum()) + float(io) if mem.sum() <= self.cap[a] else math.inf
            return whole, (0, comp.size - 1)
        preds = [[int(u) for u in g.predecessors(int(v)).tolist() if inside[u] != label] for v in comp.tolist()]
        outside_in = np.array([float(self.out[p].sum()) for p in preds])  # tensors from outside each op reads
        read = self.scale[a] * np.concatenate(([outside_in[0]], self.out[comp[:-1]] + outside_in[1:]))
        write = self.scale[a] * self.out[comp]
        e_ = ends[comp]
        head = np.concatenate(([0.0], np.cumsum(e_)))
        tail = np.concatenate((np.cumsum(e_[::-1])[::-1], [0.0]))
        work = np.concatenate(([0.0], np.cumsum(t)))
        room = np.concatenate(([0.0], np.cumsum(mem)))
        s, e = np.triu_indices(comp.size)
        with np.errstate(invalid="ignore"):
            cost = head[s] + read[s] + (work[e + 1] - work[s]) + write[e] + tail[e + 1]
        cost = np.where((room[e + 1] - room[s] <= self.cap[a]) & np.isfinite(cost), cost, math.inf)
        x = int(np.argmin(cost))
        return float(cost[x]), (int(s[x]), int(e[x]))

    def _options(self, j: int, run_on_host: bool) -> list[tuple[float, float, float, int, int, np.ndarray]]:
        """Module ``j``'s placements after a run: ``(time elsewhere, work added to the run, memory added to it,
        accelerators taken, hosts taken, branch -> 0 run / 1 + r its accelerator / -1 a new host)``."""
        br = self._branches(j, int(self.acc[0]), run_on_host) if self.acc.size else None
        if br is None or not br["comps"]:
            return [(0.0, 0.0, 0.0, 0, 0, np.zeros(0, dtype=np.int64))]
        B = len(br["comps"])
        opts = []
        gain = br["host"] if run_on_host else br["work"]
        order = np.argsort(-np.where(np.isfinite(br["mid"]), gain, -math.inf), kind="stable")
        for m in range(min(B, self.acc.size) + 1):
            moved, rest = order[:m], order[m:]
            where = np.zeros(B, dtype=np.int64)
            where[moved] = 1 + np.arange(m)
            mid = float(br["mid"][moved].max(initial=0.0))
            if not math.isfinite(mid):
                break
            if run_on_host:  # the rest on the run's host, beside the middles
                opts.append((max(mid, float(br["host"][rest].max(initial=0.0))), 0.0, 0.0, m, 0, where))
                continue
            opts.append((mid, float(br["work"][rest].sum()), float(br["mem"][rest].sum()), m, 0, where))
            if rest.size and self.hosts.size:
                on_host = where.copy()
                on_host[rest] = -1
                opts.append((max(mid, float(br["host"][rest].max())), 0.0, 0.0, m, 1, on_host))
        return opts

    # ------------------------------------------------------------------ the DP
    def solve(self, deadline: float | None) -> np.ndarray:
        """The DP over ``(cut op, accelerators used, hosts used, whether the last host holds only a module's rest)``:
        a run on a host after such a module takes that host (a host holds a convex set: the module's branches then
        the run)."""
        k, A, H = self.cuts.size, self.acc.size, self.hosts.size
        self.deadline = deadline
        best = np.full((k + 1, A + 1, H + 1, 2), math.inf)
        best[0, 0, 0, 0] = 0.0
        back: dict[tuple[int, int, int, int], tuple] = {}
        work = np.vstack([np.zeros(self.c.size), np.cumsum(np.where(np.isfinite(self.times), self.times, 0.0)
                                                           [self.order], axis=0)])
        banned = np.vstack([np.zeros(self.c.size), np.cumsum(~np.isfinite(self.times[self.order]), axis=0)])
        memsum = np.concatenate(([0.0], np.cumsum(self.mem[self.order])))
        opts = {(j, h): self._options(j, h) for j in range(1, k) for h in (False, True)}
        for i in range(k):
            if deadline is not None and time.monotonic() > deadline:
                raise SpecError("spine split: time limit reached before every run was priced")
            if not np.isfinite(best[i]).any():
                continue
            p = int(self.starts[i])
            q = self.ends[i:]
            reads, writes = self._transfers(p)
            reads, writes = reads[i:], writes[i:]
            hostpath = self._host_paths(p)[i:] if H else None
            body = memsum[q] - memsum[p]
            for a, h, f in zip(*np.nonzero(np.isfinite(best[i]))):
                runs = []
                if a < A:
                    d = int(self.acc[a])
                    ok = banned[q, d] - banned[p, d] == 0
                    cost = np.where(ok, work[q, d] - work[p, d] + self.scale[d] * (reads + writes), math.inf)
                    runs.append((d, False, cost, self.cap[d] - body, a + 1, h))
                if f or h < H:
                    d = int(self.hosts[h - 1] if f else self.hosts[h])
                    runs.append((d, True, hostpath, np.full(q.size, math.inf), a, h if f else h + 1))
                for d, on_host, cost, room, a1, h1 in runs:
                    self._steps(best, back, (i, a, h, f), d, on_host, cost, room, a1, h1, opts)
        a, h, f = np.unravel_index(int(np.argmin(best[k])), best[k].shape)
        if not math.isfinite(best[k, a, h, f]):
            raise SpecError("spine split: no chain of runs fits the accelerators' memory and the hosts")
        return self._assignment(back, (k, int(a), int(h), int(f)))

    def _steps(self, best: np.ndarray, back: dict, state: tuple[int, int, int, int], d: int, on_host: bool,
               cost: np.ndarray, room: np.ndarray, a1: int, h1: int, opts: dict) -> None:
        """The runs from ``state``'s cut op on device ``d`` (``cost`` and free memory ``room`` per end), each with
        every placement of the module after it."""
        k, A, H = self.cuts.size, self.acc.size, self.hosts.size
        i = state[0]
        base = best[state]
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise SpecError("spine split: time limit reached before every run was priced")
        for x in np.flatnonzero(np.isfinite(cost[:MAX_RUN]) & (room[:MAX_RUN] >= 0)).tolist():
            e = i + 1 + x
            if e == k:
                self._relax(best, back, (k, a1, h1, 0), base + cost[x], (state, d, None))
                continue
            for mid, extra, mem, m, hh, where in opts[(e, on_host)]:
                if a1 + m > A or h1 + hh > H or mem > room[x]:
                    continue
                self._relax(best, back, (e, a1 + m, h1 + hh, hh), base + cost[x] + extra + mid, (state, d, where))

    @staticmethod
    def _relax(best: np.ndarray, back: dict, state: tuple, value: float, how: tuple) -> None:
        if value < best[state]:
            best[state] = value
            back[state] = how

    def _assignment(self, back: dict, state: tuple[int, int, int, int]) -> np.ndarray:
        """The chain of runs and modules ending at ``state`` as op -> device."""
        steps = []
        while state[0] > 0:
            before, d, where = back[state]
            steps.append((before[0], state, d, where))
            state = before
        steps.reverse()
        assign = np.zeros(self.g.n, dtype=np.int64)
        for x, (i, (e, a1, h1, _), d, where) in enumerate(steps):
            p, q = int(self.starts[i]), int(self.ends[e - 1])
            assign[self.order[p:q]] = d
            if where is None:
                continue
            after = steps[x + 1][2]  # the next run's device holds the middles' suffixes
            br = self._branches(e, int(self.acc[0]), bool(self.c.host[d]))
            used_acc = a1 - int((where > 0).sum())
            for b, comp in enumerate(br["comps"]):
                if where[b] > 0:
                    first, last = br["cut"][b]
                    assign[comp] = d
                    assign[comp[first:last + 1]] = self.acc[used_acc + where[b] - 1]
                    assign[comp[last + 1:]] = after
                else:
                    assign[comp] = self.hosts[h1 - 1] if where[b] < 0 else d
        return assign

