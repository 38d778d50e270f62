"""The makespan through the cut ops' devices: a shortest path over the cut ops, each segment priced by an LP.

An op comparable with every other (a *cut* op, :func:`~placement_dsl.bounds.makespan.comparable_cuts`) splits every
schedule in time: the ops ``S`` between two consecutive cut ops ``a`` and ``b`` run in ``[end(a), start(b)]``, and
so do the transfers from ``S`` or ``a`` into ``S`` or ``b`` (each leaves after its producer ends and arrives before
its consumer starts). With ``a`` on ``da`` and ``b`` on ``db`` the length of that window is at least

* the longest path through ``S`` with route costs, from ``a`` on ``da`` to ``b`` on ``db`` (each op on its best
  device, each edge the transfer between the devices chosen), and
* the value of an LP: fractional assignments ``x[v, d]`` of ``S`` (``a`` and ``b`` fixed), each serial device's
  work ``sum_v p_vd x[v, d]`` at most ``L``, and, under congestion, each resource's transfer time at most ``L``: a
  tensor of ``u`` reaches device ``e`` from some ``y`` (``f[u, y, e] <= x[u, y]``) for at least the share of a
  consumer on ``e`` that ``u`` does not run there (``sum_y f[u, y, e] >= x[w, e] - x[u, e]``), and the transfers a
  resource carries (a device's out- and in-port, an ordered pair's channel, a link of the route) take ``sum
  comm[u, y, e] f[u, y, e]``. Integral, it is any schedule's assignment with one transfer per tensor and device.
  Under port congestion, cut rows (:func:`_port_cuts`) charge ``a``'s out-port and ``b``'s in-port the least cut of
  tensors that lets a share of the ops run elsewhere: the flows alone let a device relay a share of a view it holds
  to every consumer's share (GPT-3 330M's attention window at A->A: 1.63 by the flows, 2.17 with the cuts).

The makespan is then at least the shortest path over the cut ops' devices: ``F_b(db) = min_da F_a(da) + L_s(da,
db) + p_b(db)``, from the ops before the first cut op to the ops after the last. Each segment's LP is solved first with
its cut ops anywhere (a floor under every pair of their devices), then pair by pair only where the path needs it: the
pairs on the shortest path over the prices so far, until that path's pairs are all solved. Its value is then the one
every pair's LP gives (no price rises on it, the others only rise), from a fraction of the pairs (a GPT of 5,057 ops
on MOIRAI's inter-server cluster: 332 LPs where every pair took 744, both 24.77). Where a transformer's attention
heads must share the devices through their ports, the LP sees what neither the work nor the path can: moving a head
off the cut ops' device loads both ports with its inputs. Memory, colocation and the order on a device are
dropped, so the value holds for every placement.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..congestion import Congestion, Resource, TransferResources
from ..deadline import Deadline, contention
from ..graph import least_first_order
from ..lp import available, new_highs
from .makespan import allowed_times, comparable_cuts, transfer_table
from .parametric_cut import Flow
from .segments import REUSE

MAX_OPS = 6000  # the cut ops' reachability matrix (n^2 booleans)
MAX_LP_OPS = 2000  # a segment beyond is priced by its path alone
TOL = 1e-7  # relative slack taken off an LP's optimum (HiGHS's tolerances)
LP_CELL_SECONDS = 3e-5  # CPU seconds of a segment's LP per (node + edge) x device, its rows built and solved once:
# a generated DAG's one segment of 1,998 ops and 3,979 edges on 5 devices took 0.9 s, 2.5-3.1 s of wall at load 6.6
# on two cores; started with a 1.1 s share left, it took 2.5 s of a 10 s solve


def segment_lp_bound(problem: Any, deadline: Deadline | None = None, pairs: bool = True) -> tuple[float, str, bool]:
    """The bound of the module docstring in cost-model units, a note, and whether every LP the path needs was solved.
    Every segment is priced with the cut ops anywhere first (its floor), then, with ``pairs``, the pairs of their
    devices the shortest path takes (:func:`_refine`); a segment left unsolved, by ``deadline`` or HiGHS, is priced by
    its floor if it has one, else its path, and once ``deadline`` has passed by 0: the value still holds."""
    g, c = problem.graph, problem.cluster
    if g.n == 0:
        return 0.0, "empty graph", True
    memo = REUSE.get()
    done = None if memo is None else memo.get(("lp", id(problem), pairs))
    if done is not None and done[0] is problem:  # a solve prices them in-process, then its closed forms again
        return done[1]
    if g.n > MAX_OPS:
        return 0.0, f"declined: {g.n} ops (the cut ops' reachability: at most {MAX_OPS})", False
    if deadline is not None and deadline.expired():
        return 0.0, "budget spent before the cut ops were found", False
    times = allowed_times(problem)
    comm = transfer_table(g, c)
    congestion = problem.cost_model().congestion
    resources = _resources(c, congestion)
    reach, cuts = comparable_cuts(g)
    segment = np.where(np.isin(np.arange(g.n), cuts), -1, reach[cuts].sum(axis=0))  # the cut ops before each op
    del reach
    serial, ports = ~np.asarray(c.parallel, dtype=bool), congestion is Congestion.PORT
    pricer = _Pricer(g, times, comm, resources, serial, deadline, pairs, ports)
    prices, keys = _walk(pricer, segment, cuts)  # every segment's floor first
    value, complete = _refine(pricer, prices, keys, cuts, times) if pairs else \
        (_shortest(prices, cuts, times)[0], pricer.complete)
    note = (f"{len(cuts)} cut ops, {pricer.solved} segment LPs ({pricer.reused} reused)"
            + ("" if complete else "; some segments priced by their floor, their path alone or, past the clock, 0"))
    out = (value if math.isfinite(value) else 0.0), note, complete
    if complete and memo is not None:  # within segments.reused(): asked again, answered again
        memo[("lp", id(problem), pairs)] = (problem, out)
    return out


def lp_seconds(nodes: int, edges: int, devices: int) -> float:
    """Wall seconds a segment's LP of ``nodes`` ops and ``edges`` edges on ``devices`` devices, with its cut ops
    anywhere, is estimated to take here now: :data:`LP_CELL_SECONDS` per (node + edge) x device, times the machine's
    contention (:func:`~placement_dsl.deadline.contention`). A pair's LP, solved on the instance that one built, is
    stopped by HiGHS's time limit instead."""
    return LP_CELL_SECONDS * (nodes + edges) * devices * contention()


def _walk(pricer: _Pricer, segment: np.ndarray, cuts: np.ndarray) -> tuple[list[np.ndarray], list[bytes | None]]:
    """Each segment's price ``(Da, Db)`` by ``pricer`` (one array for identical segments: a pair priced later raises
    every one of them) and its key (``None``: no LP, its price final)."""
    prices, keys = [], []
    for s in range(len(cuts) + 1):
        ops = np.flatnonzero(segment == s)
        a = int(cuts[s - 1]) if s > 0 else -1
        b = int(cuts[s]) if s < len(cuts) else -1
        price, key = pricer.price(ops, a, b)  # Da = 1 without a, Db = 1 without b; 0 once the clock is spent
        prices.append(price)
        keys.append(key)
    return prices, keys


def _shortest(prices: list[np.ndarray], cuts: np.ndarray, times: np.ndarray) -> tuple[float, list[tuple[int, int]]]:
    """The shortest path over the cut ops' devices with segment ``s`` priced ``prices[s]``: its length and, per
    segment, the devices ``(da, db)`` of its cut ops on it (0 for a cut op that is not there)."""
    finish, back = None, []  # finish[d]: least finish of the last cut op priced, on d
    for s, price in enumerate(prices):
        if finish is None:
            through, came = price[0], np.zeros(price.shape[1], dtype=np.int64)
        else:
            total = finish[:, None] + price
            came = np.argmin(total, axis=0)
            through = total[came, np.arange(total.shape[1])]
        back.append(came)
        finish = through + times[cuts[s]] if s < len(cuts) else through
    end = int(np.argmin(finish))
    path = []
    for came in reversed(back):
        path.append((int(came[end]), end))
        end = int(came[end])
    return float(finish.min()), path[::-1]


def _refine(pricer: _Pricer, prices: list[np.ndarray], keys: list[bytes | None], cuts: np.ndarray,
            times: np.ndarray) -> tuple[float, bool]:
    """The shortest path once the pairs of cut-op devices it takes have their LPs: each round solves the pairs of the
    current shortest path still priced by their floor, until it has none (its length is then the one every pair's LP
    would give) or the clock stops it (its length still holds: a pair unsolved keeps its floor). Whether it ended on
    a path of solved pairs with every segment's floor solved is the second value."""
    while True:
        value, path = _shortest(prices, cuts, times)
        todo = list(dict.fromkeys((keys[s], da, db) for s, (da, db) in enumerate(path)
                                  if keys[s] in pricer.models and not pricer.models[keys[s]].done[da, db]))
        if not todo:
            return value, pricer.complete
        for key, da, db in todo:
            if not pricer.pair(key, da, db):
                return _shortest(prices, cuts, times)[0], False


def _resources(cluster: Any, congestion: Congestion) -> list[list[tuple[int, int]]]:
    """The ordered device pairs ``(y, e)`` whose transfers each resource carries one at a time
    (:class:`~placement_dsl.congestion.TransferResources`)."""
    held, D = TransferResources(cluster, congestion), cluster.size
    carried: dict[Resource, list[tuple[int, int]]] = {r: [] for r in held.all}
    for y in range(D):
        for e in range(D):
            for r in held(y, e):
                carried[r].append((y, e))
    return list(carried.values())


class _Pricer:
    """Each segment's window lengths ``(Da, Db)``: its floor at once (:meth:`price`), a pair of its cut ops' devices
    on demand (:meth:`pair`, with ``pairs``); identical segments (same times, transfers and edges, as a transformer's
    layers) are priced once, into one array."""

    def __init__(self, g: Any, times: np.ndarray, comm: np.ndarray, resources: list[list[tuple[int, int]]],
                 serial: np.ndarray, deadline: Deadline | None, pairs: bool = True, ports: bool = False) -> None:
        self.g, self.times, self.comm, self.resources, self.serial = g, times, comm, resources, serial
        self.ports = ports  # each device's out- and in-port is a resource: the cut rows (:func:`_port_cuts`) hold
        self.deadline = deadline
        self.cache: dict[bytes, np.ndarray] = {}
        self.models: dict[bytes, _Model] = {}  # a segment's LP kept for its pairs (with ``pairs``)
        self.cut_rows: dict[bytes, list] = {}  # the port cuts of segments alike but for their ops' times
        self.bases: dict[tuple, Any] = {}  # the optimal basis of a pair's LP, by the segment's form
        self.solved, self.reused, self.complete = 0, 0, True
        self.lp_ok, self.pairs = available(), pairs

    def price(self, ops: np.ndarray, a: int, b: int) -> tuple[np.ndarray, bytes | None]:
        """The segment's price with its cut ops anywhere in its LP (its path pair by pair) and its key (``None``
        for a segment without ops)."""
        D = self.times.shape[1]
        if ops.size == 0:
            if a < 0 or b < 0:
                return np.zeros((1 if a < 0 else D, 1 if b < 0 else D)), None
            edge = b in self.g.successors(a).tolist()
            return (self.comm[a].copy() if edge else np.zeros((D, D))), None
        nodes, edges = self._local(ops, a, b)
        key = self._key(nodes, edges, a, b)
        if key in self.cache:
            self.reused += 1
            return self.cache[key], key
        if self.deadline is not None and self.deadline.expired():  # a window is at least 0 long
            self.complete = False
            self.cache[key] = np.zeros((1 if a < 0 else D, 1 if b < 0 else D))
            return self.cache[key], key
        path = self._path(ops, a, b)
        fits = self._fits(nodes, edges)
        if not self.lp_ok or ops.size > MAX_LP_OPS or not fits:
            self.complete = self.complete and ops.size <= MAX_LP_OPS and self.lp_ok and fits
            self.cache[key] = path
            return path, key
        self.cache[key] = path
        floor, model = self._lp(nodes, edges, a, b, path.shape)
        np.maximum(path, floor, out=path)
        if model is not None and self.pairs:
            self.models[key] = model
        return path, key

    def pair(self, key: bytes, da: int, db: int) -> bool:
        """Price the pair ``(da, db)`` of segment ``key``'s cut ops' devices by its LP (the price only rises: the
        floor stays under it); ``False`` once the clock has stopped it."""
        m = self.models[key]
        value = self._solve(m, da, db)
        m.done[da, db] = True
        if value is None:
            return self.deadline is None or not self.deadline.expired()  # HiGHS gave up: the floor stays
        self.cache[key][da, db] = max(self.cache[key][da, db], value)
        return True

    def _fits(self, nodes: np.ndarray, edges: list[tuple[int, int]]) -> bool:
        """Whether the segment's LP is estimated to end within the deadline (:func:`lp_seconds`): its rows are built
        and solved without a look at the clock, so one started with less time left overruns it."""
        return self.deadline is None or lp_seconds(len(nodes), len(edges), self.times.shape[1]) <= \
            self.deadline.left()

    def _local(self, ops: np.ndarray, a: int, b: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """The window's nodes (``a``, the ops, ``b``; the ones present) and its edges as local index pairs: producer in
        ``a`` or the ops, consumer in the ops or ``b``."""
        nodes = np.array(([a] if a >= 0 else []) + ops.tolist() + ([b] if b >= 0 else []), dtype=np.int64)
        at = {int(v): i for i, v in enumerate(nodes)}
        edges = []
        for u in nodes.tolist():
            if u == b:
                continue
            for w in self.g.successors(u).tolist():
                if w in at and w != a:
                    edges.append((at[u], at[w]))
        return nodes, edges

    def _key(self, nodes: np.ndarray, edges: list[tuple[int, int]], a: int, b: int) -> bytes:
        t, cm = self.times[nodes], self.comm[nodes[:-1] if b >= 0 else nodes]  # b's own tensor leaves after the window
        return b"|".join([np.ascontiguousarray(t).tobytes(), np.ascontiguousarray(cm).tobytes(),
                          np.asarray(edges, dtype=np.int64).tobytes(), bytes([a >= 0, b >= 0])])

    def _path(self, ops: np.ndarray, a: int, b: int) -> np.ndarray:
        """``(Da, Db)``: the longest path through the ops from ``a`` on ``da`` (ending at 0) to ``b`` on ``db``."""
        g, p, comm = self.g, self.times, self.comm
        D = p.shape[1]
        order = ops[np.argsort(g.rank[ops])]
        at = {int(v): i for i, v in enumerate(order.tolist())}
        m, Da, Db = len(order), (D if a >= 0 else 1), (D if b >= 0 else 1)
        ready = np.zeros((Da, m, D))
        for i, v in enumerate(order.tolist()):
            best = np.zeros((Da, D))
            for u in g.predecessors(v).tolist():
                if u == a:
                    best = np.maximum(best, comm[a])  # (da, x)
                elif u in at:
                    j = at[u]
                    arrive = (ready[:, j, :, None] + p[u][None, :, None] + comm[u][None]).min(axis=1)
                    best = np.maximum(best, arrive)
            ready[:, i] = best
        tail = np.zeros((Db, m, D))
        for i in range(m - 1, -1, -1):
            v = int(order[i])
            best = np.zeros((Db, D))
            for w in g.successors(v).tolist():
                if w == b:
                    best = np.maximum(best, comm[v].T)  # (db, x)
                elif w in at:
                    j = at[w]
                    after = (comm[v][None] + (p[w][None] + tail[:, j])[:, None, :]).min(axis=2)
                    best = np.maximum(best, after)
            tail[:, i] = best
        through = ready[:, None] + p[order][None, None] + tail[None]  # (Da, Db, m, D)
        with np.errstate(invalid="ignore"):
            value = np.nan_to_num(through, nan=np.inf).min(axis=3).max(axis=2)
        return np.where(np.isfinite(value), value, 0.0)

    def _lp(self, nodes: np.ndarray, edges: list[tuple[int, int]], a: int, b: int,
            shape: tuple[int, int]) -> tuple[np.ndarray, _Model | None]:
        """``(Da, Db)``: the LP of the module docstring with the cut ops anywhere (0 where unsolved), and the LP
        kept for its pairs (``None`` unsolved)."""
        p, comm = self.times[nodes], self.comm[nodes]
        N, D = p.shape
        form = _form(p, comm, edges, a >= 0, b >= 0)
        inner = np.ones(N, dtype=bool)
        if a >= 0:
            inner[0] = False
        if b >= 0:
            inner[-1] = False
        col = 1 + np.arange(N * D).reshape(N, D)  # x[i, d]; column 0 is L
        producers = sorted({u for u, _ in edges})
        pairs = [(y, e) for y in range(D) for e in range(D) if y != e]
        fcol: dict[tuple[int, int, int], int] = {}
        nxt = 1 + N * D
        if self.resources:
            for u in producers:
                for y, e in pairs:
                    if math.isfinite(comm[u, y, e]):
                        fcol[(u, y, e)] = nxt
                        nxt += 1
        rows: list[tuple[list[int], list[float], float, float]] = []
        for i in range(N):  # each node on one device
            ok = [d for d in range(D) if math.isfinite(p[i, d])]
            rows.append(([int(col[i, d]) for d in ok], [1.0] * len(ok), 1.0, 1.0))
        for d in np.flatnonzero(self.serial).tolist():  # each serial device's work within L
            idx = [i for i in np.flatnonzero(inner).tolist() if math.isfinite(p[i, d]) and p[i, d] > 0]
            rows.append(([int(col[i, d]) for i in idx] + [0], [float(p[i, d]) for i in idx] + [-1.0], -np.inf, 0.0))
        if self.resources:
            consumers: dict[int, list[int]] = {}
            for u, w in edges:
                consumers.setdefault(u, []).append(w)
            for u in producers:
                for e in range(D):
                    src = [fcol[(u, y, e)] for y in range(D) if (u, y, e) in fcol]
                    for w in consumers[u]:  # the tensor reaches e for the share of w on e that u is not
                        if not math.isfinite(p[w, e]):
                            continue
                        cols = src + [int(col[w, e])]
                        vals = [1.0] * len(src) + [-1.0]
                        if math.isfinite(p[u, e]):
                            cols.append(int(col[u, e]))
                            vals.append(1.0)
                        rows.append((cols, vals, 0.0, np.inf))
            for (u, y, _e), k in fcol.items():  # sent from y only as much as u runs there
                if math.isfinite(p[u, y]):
                    rows.append(([k, int(col[u, y])], [1.0, -1.0], -np.inf, 0.0))
                else:
                    rows.append(([k], [1.0], -np.inf, 0.0))
            for carried in self.resources:
                cols, vals = [], []
                for y, e in carried:
                    for u in producers:
                        k = fcol.get((u, y, e))
                        if k is not None and comm[u, y, e] > 0:
                            cols.append(k)
                            vals.append(float(comm[u, y, e]))
                if cols:
                    rows.append((cols + [0], vals + [-1.0], -np.inf, 0.0))
        if self.ports:
            rows += self._port_rows(form, p, comm, edges, col, a >= 0, b >= 0)
        n_cols = nxt
        upper = np.full(n_cols, np.inf)
        upper[1:1 + N * D] = np.where(np.isfinite(p), 1.0, 0.0).ravel()
        r_idx = np.concatenate([np.full(len(r[0]), k) for k, r in enumerate(rows)]).astype(np.int64)
        c_idx = np.concatenate([np.asarray(r[0], dtype=np.int64) for r in rows])
        v_all = np.concatenate([np.asarray(r[1], dtype=float) for r in rows])
        order = np.lexsort((r_idx, c_idx))
        r_idx, c_idx, v_all = r_idx[order], c_idx[order], v_all[order]
        start = np.searchsorted(c_idx, np.arange(n_cols + 1)).astype(np.int32)
        cost = np.zeros(n_cols)
        cost[0] = 1.0
        h = new_highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)
        h.passModel(n_cols, len(rows), len(v_all), 1, 1, 0.0, cost, np.zeros(n_cols), upper,
                    np.array([r[2] for r in rows], dtype=float), np.array([r[3] for r in rows], dtype=float),
                    start, r_idx.astype(np.int32), v_all, np.zeros(n_cols, dtype=np.int32))
        model = _Model(h, n_cols, upper, col, p, a >= 0, b >= 0, (form, len(rows)))
        floor = self._solve(model, -1, -1)  # the cut ops anywhere: a floor under every pair
        if floor is None:
            return np.zeros(shape), None
        return np.full(shape, floor), model

    def _solve(self, m: _Model, da: int, db: int) -> float | None:
        """The LP of ``m`` with its cut ops on ``da`` and ``db`` (``-1``: anywhere), from the optimal basis of the
        same pair in a segment of the same form (:func:`_form`) where one was solved, else from scratch, presolved.
        A noisy GPT's layers differ only in their ops' times, and a layer's optimal basis often holds for the next
        as it is: a 5,057-op GPT's 332 LPs (inter-server) took 98,816 simplex iterations so, 250,784 from scratch;
        from the last pair's basis of the same segment they took twice those from scratch. A floor (cut ops anywhere)
        runs from scratch: from the layer before's it took 1,000 iterations where it takes 840."""
        basis = self.bases.get((m.form, da, db)) if da >= 0 else None
        if basis is None:
            m.highs.clearSolver()
        else:
            m.highs.setBasis(basis)
        value = self._run(m.highs, m.n_cols, m.fixed(da, db))
        if value is not None and da >= 0:
            self.bases[(m.form, da, db)] = m.highs.getBasis()
        return value

    def _port_rows(self, form: bytes, p: np.ndarray, comm: np.ndarray, edges: list[tuple[int, int]], col: np.ndarray,
                   has_a: bool, has_b: bool) -> list[tuple[list[int], list[float], float, float]]:
        """:func:`_port_cuts`, found once for segments that differ only in their ops' times (a noisy transformer's
        layers): the cuts read the tensors' transfer times, the edges, and which ops may run where and take time.
        Their max flows, in Python, took 35 of a 5,057-op GPT's 51 s of floors under a profiler (41 layers, one
        set of cuts); rows a spent clock cut short are not kept."""
        rows = self.cut_rows.get(form)
        if rows is None:
            rows = _port_cuts(p, comm, edges, col, has_a, has_b, self.deadline)
            if self.deadline is None or not self.deadline.expired():
                self.cut_rows[form] = rows
        return rows

    def _run(self, h: Any, n_cols: int, upper: np.ndarray) -> float | None:
        """The LP's optimum with the columns' upper bounds ``upper`` (less HiGHS's tolerance), ``None`` unsolved."""
        if self.deadline is not None:
            if self.deadline.expired():
                self.complete = False
                return None
            h.setOptionValue("time_limit", h.getRunTime() + max(0.05, self.deadline.left()))  # HiGHS counts the
            # instance's runs together: a segment's pair LPs, re-run on one instance, hit a limit of the time left
            # at once once their sum passed it (GPT-3 330M inter-server: 2 of 24 LPs, 190.8 where 198.6 holds)
        h.changeColsBounds(n_cols, np.arange(n_cols, dtype=np.int32), np.zeros(n_cols), upper)
        h.run()
        if str(h.getModelStatus()) != "HighsModelStatus.kOptimal":
            self.complete = False
            return None
        self.solved += 1
        return max(0.0, float(h.getInfo().objective_function_value) * (1 - TOL) - TOL)


class _Model:
    """A segment's LP on its HiGHS instance, solved with the cut ops anywhere, and the pairs of their devices done
    (solved, or not to be: a cut op that may not run on a device is never there on the path)."""

    def __init__(self, highs: Any, n_cols: int, upper: np.ndarray, col: np.ndarray, p: np.ndarray, has_a: bool,
                 has_b: bool, form: tuple[bytes, int]) -> None:
        self.highs, self.n_cols, self.upper, self.col, self.has_a, self.has_b = highs, n_cols, upper, col, has_a, has_b
        self.form = form  # segments of one form have one layout of rows and columns
        first = np.isfinite(p[0]) if has_a else np.ones(1, dtype=bool)
        last = np.isfinite(p[-1]) if has_b else np.ones(1, dtype=bool)
        self.done = ~(first[:, None] & last[None, :])

    def fixed(self, da: int, db: int) -> np.ndarray:
        """The columns' upper bounds with ``a`` on ``da`` and ``b`` on ``db`` (``-1``: anywhere)."""
        upper = self.upper.copy()
        if da < 0:
            return upper
        if self.has_a:
            upper[self.col[0]] = 0.0
            upper[self.col[0, da]] = 1.0
        if self.has_b:
            upper[self.col[-1]] = 0.0
            upper[self.col[-1, db]] = 1.0
        return upper


def _form(p: np.ndarray, comm: np.ndarray, edges: list[tuple[int, int]], has_a: bool, has_b: bool) -> bytes:
    """What a segment's LP reads but its ops' times: the tensors' transfer times, the edges, which ops may run where
    and take time. Segments of one form (a noisy transformer's layers) have the same port cuts and the same layout of
    rows and columns."""
    sent = comm[:-1] if has_b else comm  # b's own tensor leaves after the window
    return b"|".join([np.ascontiguousarray(sent).tobytes(), np.isfinite(p).tobytes(), (p > 0).tobytes(),
                      np.asarray(edges, dtype=np.int64).tobytes(), bytes([has_a, has_b])])


def _port_cuts(p: np.ndarray, comm: np.ndarray, edges: list[tuple[int, int]], col: np.ndarray, has_a: bool,
               has_b: bool, deadline: Deadline | None = None) -> list[tuple[list[int], list[float], float, float]]:
    """Rows that price, on each device ``d``, what leaves ``a``'s out-port and enters ``b``'s in-port when ops run
    elsewhere (port congestion; ``a`` is local node 0, ``b`` the last).

    With ``a`` on ``d``, every op ``w`` off ``d`` is reached from ``a`` along a path that leaves ``d`` at some op ``u``
    on ``d``, whose tensor then crosses ``d``'s out-port (at least ``min_e comm[u, d, e]``): the ops off ``d`` are cut
    from ``a`` by the tensors ``d`` exports. So ``d``'s out-port carries at least ``phi(K)``, the least cut between
    ``a`` and the set ``K`` of ops off ``d`` (a max flow). ``phi`` is submodular, so the greedy increments ``c_w`` of
    adding the ops one at a time (the farthest from ``a`` first) give ``sum_{w in K} c_w <= phi(K)`` for every ``K``,
    and ``L >= sum_w c_w (x[a, d] - x[w, d])`` holds for every assignment (with ``a`` off ``d`` the right side is at
    most 0). The in-port of ``b``'s device is the mirror image. What the LP's flows miss and these rows see: a tensor
    a device holds a share of serves every consumer's share there, so the LP relays a fan-out op's share (a view of
    the attention heads' inputs) through another device at a fraction of its cost; the cut charges each op moved off
    ``d`` its share of the cheapest way out. Past ``deadline`` the rows found so far are returned (each holds alone:
    fewer rows, a weaker LP, still a bound)."""
    N, D = p.shape
    order = least_first_order(N, edges)
    timed = [i for i in order if np.any(np.isfinite(p[i]) & (p[i] > 0))]  # an op of no time moves no work
    rows = []
    for d in range(D):
        if deadline is not None and deadline.expired():
            break
        others = [e for e in range(D) if e != d]
        if not others:  # one device: nothing crosses a port
            break
        if has_a and math.isfinite(p[0, d]):
            cost = np.min(comm[:, d, others], axis=1)
            for sinks in _orders([i for i in reversed(timed) if i not in (0, N - 1)], [N - 1] if has_b else []):
                net = Flow(2 * N + 1)
                for u, w in edges:
                    net.arc(N + u, w, math.inf)
                for u in {u for u, _ in edges}:
                    net.arc(u, N + u, cost[u] if math.isfinite(cost[u]) else 0.0)
                rows += _cut_row(net, 0, sinks, col[:, d], col[0, d])
        if has_b and math.isfinite(p[-1, d]):
            cost = np.min(comm[:, others, d], axis=1)
            for sinks in _orders([i for i in timed if i not in (0, N - 1)], [0] if has_a else []):
                net = Flow(2 * N + 1)
                for u, w in edges:
                    net.arc(w, N + u, math.inf)
                for u in {u for u, _ in edges}:
                    net.arc(N + u, u, cost[u] if math.isfinite(cost[u]) else 0.0)
                rows += _cut_row(net, N - 1, sinks, col[:, d], col[-1, d])
    return rows


def _orders(inner: list[int], end: list[int]) -> list[list[int]]:
    """The sinks' orders of the cut rows: the segment's ops, then the other cut op (it runs off ``d`` for some pairs
    only, and first it would take the share the ops need); and, when there is one, that cut op first."""
    return [inner + end] + ([end + inner] if end else [])


def _cut_row(net: Flow, source: int, sinks: list[int], x: np.ndarray,
             pinned: int) -> list[tuple[list[int], list[float], float, float]]:
    """``L + sum_w c_w x[w] - (sum_w c_w) x[pinned] >= 0`` with ``c_w`` the max flow's increments as each sink joins."""
    sink = net.n - 1
    coef: dict[int, float] = {}
    for w in sinks:
        net.arc(w, sink, math.inf)
        gained = net.augment(source, sink)
        if gained > 0:
            coef[int(x[w])] = coef.get(int(x[w]), 0.0) + gained
    if not coef:
        return []
    total = sum(coef.values())
    return [([0, *coef, int(pinned)], [1.0, *coef.values(), -total], 0.0, np.inf)]


__all__ = ["segment_lp_bound"]
