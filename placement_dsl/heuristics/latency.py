"""Heuristics for single-sample latency (Tarnawski et al., NeurIPS 2020, §4, §4.1 and §7).

* :func:`latency_local_search` — first-improvement local search on the invocation-model latency
  itself. A move puts a *block* on one device: an interval of the colocation groups in
  topological order (length 1 is a single group, i.e. a single op without colocation).
  Memory capacities, allowed kinds and colocation groups hold after every move. It starts
  from Tarnawski's §7 greedy and from the max-load DP split (the §7 baselines), then from
  the best split's device merges (all ops of one device onto another) and random kicks of it.
* :func:`latency_best` — greedy, the max-load DP and DPL splits and the latency local search
  seeded with them; the best latency wins and ``info["candidates"]`` lists every one.

The local search scores a move with :func:`.latency_kernels.latency`, a compiled copy of the referee
(:func:`placement_dsl.invocation.invocations`): contiguous subgraphs per accelerator
(§4.1), each invoked when its inputs are in host memory, subgraphs of one accelerator one
at a time (Fig. 4, constraint 14), host ops as soon as their inputs are ready. The
registry re-checks the final split with the referee.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..deadline import BudgetSpent, Deadline, can_fork, stream_within
from ..errors import InfeasibleError, PlacementError, SpecError
from ..evaluate import CostModel, MemoryMode, Objective, evaluate, execution
from ..graph import Graph
from ..placement import Placement
from ..progress import report
from . import manifest
from .base import HeuristicResult, deadline_at, expired, left, stopped
from .base import run as run_method
from .baselines import max_load_model
from .fallback import fallback, fallback_seconds, one_device_closed_form, one_device_split
from .latency_chain import chain_split, group_positions
from .latency_kernels import apply, better, descend, latency
from .latency_modules import Modules
from .latency_passes import PASSES, ops_search, passes
from .latency_spine_split import spine_split
from .latency_spread import Spreads
from .latency_starts import default_starts
from .registry import heuristic

INF = math.inf
LENGTHS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)  # blocks moved onto a device
SWAPS = (1, 2, 4)  # blocks exchanged between two devices (memory may be full) ...
WINDOW = 24  # ... when they start at most this many groups apart
CHUNK = 2000  # evaluations between checks of the clock, at most ...
CHECK_SECONDS = 0.25  # ... and about this many seconds of them (one evaluation is O(n): 20 ms at 200,000 ops)
MAX_MOVES = 1_000_000  # moves listed; above, as many drawn at random (see move_table)


# ---------------------------------------------------------------------------- setup
@dataclass
class _Setup:
    """Arrays of one (graph, cluster, model): the kernel's inputs and the move structure.

    Groups are the colocation groups, ordered by their first op in the graph's topological
    order; a block is an interval of that order. ``targets`` are the devices a block may go
    to: every accelerator and one host per class of identical hosts (hosts never wait).
    """

    graph: Graph
    cluster: Cluster
    model: CostModel
    kernel: tuple
    gid: np.ndarray  # op -> group position in the order
    gptr: np.ndarray
    gops: np.ndarray
    gmem: np.ndarray
    targets: np.ndarray
    bad: np.ndarray  # bad[d, i]: groups among the first i that may not run on device d
    cap: np.ndarray


def setup(graph: Graph, cluster: Cluster, model: CostModel) -> _Setup:
    """Kernel inputs, groups in topological order, per-device prefix counts of forbidden groups, capacities."""
    times = cluster.times(graph).T.copy()
    acc = np.flatnonzero(~cluster.host)
    col = np.full(cluster.size, -1, dtype=np.int64)
    col[acc] = np.arange(acc.size)
    kernel = (col, cluster.host.copy(), times, cluster.transfer_scale.copy(), graph.out_bytes.astype(float),
              graph.topo.astype(np.int64), graph.pred_ptr, graph.pred_idx, graph.succ_ptr, graph.succ_idx,
              int(acc.size), int(model.max_subgraphs or 0), graph.backward.astype(np.int64),
              2 * cluster.size if "contiguous" in model.require else 0)
    gid = group_positions(graph)
    groups = int(gid.max()) + 1 if gid.size else 0
    gops = np.argsort(gid, kind="stable")
    gptr = np.concatenate(([0], np.cumsum(np.bincount(gid, minlength=groups)))).astype(np.int64)
    gmem = np.bincount(gid, weights=graph.param_bytes + graph.activation_bytes, minlength=groups)
    hosts = [grp[0] for grp in cluster.homogeneous_groups() if cluster.host[grp[0]]]
    targets = np.array(sorted(acc.tolist() + hosts), dtype=np.int64)
    with np.errstate(invalid="ignore"):
        gtime = np.stack([np.bincount(gid, weights=times[d], minlength=groups) for d in range(cluster.size)])
    bad = np.concatenate([np.zeros((cluster.size, 1)), np.cumsum(~np.isfinite(gtime), axis=1)], axis=1)
    cap = cluster.memory.copy() if model.memory is MemoryMode.HARD else np.full(cluster.size, INF)
    return _Setup(graph, cluster, model, kernel, gid, gptr, gops, gmem, targets, bad.astype(np.int64), cap)


_setup = setup  # the former name, kept for one release


def split_score(su: _Setup, dev: np.ndarray) -> tuple[float, float, float]:
    """(memory excess, latency, sum of invocation finishes): the local search's key, smaller is better."""
    mem = np.bincount(dev, weights=su.graph.param_bytes + su.graph.activation_bytes, minlength=su.cluster.size)
    return (float(np.maximum(mem - su.cap, 0).sum()),) + latency(dev, *su.kernel)


def move_table(su: _Setup, rng: np.random.Generator) -> np.ndarray:
    """Every move, shuffled: rows ``(i, j, device, -1, -1)`` put groups ``i .. j - 1`` on a target device
    (lengths :data:`LENGTHS`); rows ``(i, j, -1, k, l)`` exchange two blocks (:data:`SWAPS`, :data:`WINDOW`).

    Above :data:`MAX_MOVES` moves (about 9,000 groups on four devices), :data:`MAX_MOVES` of them drawn at
    random instead: a descent at that size evaluates far fewer moves than that within any budget, and the full
    list grows as ``O(groups x devices)`` rows (27 million, 1 GiB and a minute to shuffle, at 200,000 ops)."""
    G, T = su.gptr.size - 1, su.targets.size
    # blocks of moves: (first row, length, devices per start: T for a move onto a device, 0 for a swap, swap gap)
    blocks = [(length, T, 0, G - length + 1) for length in LENGTHS if length <= G]
    blocks += [(length, 0, gap, max(G - length - gap + 1, 0)) for length in SWAPS if 2 * length <= G
               for gap in range(length, length + WINDOW)]
    sizes = np.array([count * (per or 1) for _, per, _, count in blocks], dtype=np.int64)
    if sizes.sum() <= MAX_MOVES:
        rows = [np.empty((0, 5), dtype=np.int64)]
        for length, per, gap, count in blocks:
            i = np.arange(count)
            if per:
                i = np.repeat(i, T)
                rows.append(np.stack([i, i + length, np.tile(su.targets, count), -np.ones_like(i),
                                      -np.ones_like(i)], axis=1))
            else:
                rows.append(np.stack([i, i + length, -np.ones_like(i), i + gap, i + gap + length], axis=1))
        moves = np.concatenate(rows).astype(np.int64)
        return moves[rng.permutation(len(moves))]
    starts = np.concatenate(([0], np.cumsum(sizes)))
    pick = rng.integers(starts[-1], size=MAX_MOVES)
    block = np.searchsorted(starts, pick, side="right") - 1
    offset = pick - starts[block]
    length, per, gap = (np.array([b[f] for b in blocks], dtype=np.int64)[block] for f in range(3))
    swap = per == 0
    i = np.where(swap, offset, offset // np.maximum(per, 1))
    device = np.where(swap, -1, su.targets[offset % T])
    return np.stack([i, i + length, device, np.where(swap, i + gap, -1), np.where(swap, i + gap + length, -1)],
                    axis=1).astype(np.int64)


def _groups(su: _Setup, dev: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Colocation made whole (each group on its first op's device): (op devices, group devices, memory per device)."""
    gdev = np.asarray(dev, dtype=np.int64)[su.gops[su.gptr[:-1]]].copy()
    dev = gdev[su.gid].astype(np.int64)
    mem = np.bincount(dev, weights=su.graph.param_bytes + su.graph.activation_bytes, minlength=su.cluster.size)
    return dev, gdev, mem


def _descent(su: _Setup, start: np.ndarray, moves: np.ndarray, deadline: float, budget: int,
             progress: Callable[[int, np.ndarray], None] | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Local optimum from ``start``: (op devices, key, evaluations); ``progress(evaluations, key)`` after each chunk."""
    dev, gdev, mem = _groups(su, start)
    key = np.array(split_score(su, dev))
    pos = since = evals = 0
    chunk = 1  # evaluations per kernel call, grown to about CHECK_SECONDS of them as their speed is seen
    while since < len(moves) and evals < budget and time.perf_counter() < deadline:
        t = time.perf_counter()
        pos, since, done = descend(dev, gdev, su.gptr, su.gops, su.gmem, mem, su.cap, su.bad, moves,
                                   pos, since, min(chunk, budget - evals), key, *su.kernel)
        evals += done
        spent = time.perf_counter() - t
        per = spent / done if done else 0.0
        room = min(CHECK_SECONDS, max(deadline - time.perf_counter(), 0.0))
        chunk = CHUNK if per <= 0 else int(min(CHUNK, max(1.0, room / per)))
        if progress is not None:
            progress(evals, key)
    return dev, key, evals


class _Progress:
    """Live reports of the local search: phase, evaluations so far, the descent's latency and the best one."""

    def __init__(self) -> None:
        self.evaluations = 0
        self.best: np.ndarray | None = None
        self.phase = ""

    def __call__(self, evals: int, key: np.ndarray) -> None:
        best = key if self.best is None or better(*key, *self.best) else self.best
        report("latency-local-search", phase=self.phase, evaluations=self.evaluations + evals,
               latency=float(key[1]), best=float(best[1]), **({"excess": float(best[0])} if best[0] > 0 else {}))


def _compile(su: _Setup, start: np.ndarray, moves: np.ndarray) -> None:
    """Compile the kernels (cached on disk after the first run) before the clock starts."""
    dev, gdev, mem = _groups(su, start)
    key = np.array(split_score(su, dev))
    descend(dev, gdev, su.gptr, su.gops, su.gmem, mem, su.cap, su.bad, moves, 0, 0, 0, key, *su.kernel)


def _kick(su: _Setup, dev: np.ndarray, moves: np.ndarray, rng: np.random.Generator, kicks: int) -> np.ndarray:
    """``kicks`` random moves that fit in memory, whatever their latency (a restart point near ``dev``)."""
    dev, gdev, mem = _groups(su, dev)
    moved, was = np.empty((2, gdev.size), dtype=np.int64), np.empty((2, gdev.size), dtype=np.int64)
    done = 0
    for r in rng.integers(len(moves), size=50 * kicks):
        done += apply(moves[r], dev, gdev, su.gptr, su.gops, su.gmem, mem, su.cap, su.bad, moved, was)[0] >= 0
        if done == kicks:
            break
    return dev


MERGES = 4  # device merges descended from, the best of those better at once (see merged_descent)
STALE_KICKS = 50  # kicks in a row without a better split after which the best split's modules are re-solved


def merged_descent(su: _Setup, best: tuple[np.ndarray, np.ndarray], moves: np.ndarray, deadline: float, budget: int,
                   progress: Callable[[int, np.ndarray], None] | None = None,
                   spreads: Spreads | None = None) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """The best of ``best`` and the descents from its *device merges*: every op of one device moved onto another
    target (where all of them may run and fit); of the merges better than ``best`` at once, the :data:`MERGES` best
    are descended from. A block
    move shifts an interval of the groups, a merge empties a device whose ops lie in several intervals: BERT-3's
    seed-1 local optimum 409.94 runs acc0 between two runs of acc2, and merging acc0 onto acc2 is 408.47 at once,
    which its kicks did not reach in 60 s (the other seeds' optimum). The merges are tried in device order, so the
    neighbourhood does not depend on the seed. With ``spreads`` (:class:`.latency_spread.Spreads`) the split's
    spreads join the merges: a module's branches each on a free device at once. Returns the best ``(op devices,
    key)`` and the evaluations spent."""
    dev = np.asarray(best[0], dtype=np.int64)
    mem = np.bincount(dev, weights=su.graph.param_bytes + su.graph.activation_bytes, minlength=su.cluster.size)
    found, evals = [], 0
    for d in np.unique(dev).tolist():
        on_d = dev == d
        for e in su.targets.tolist():
            if time.perf_counter() >= deadline or evals >= budget:  # one evaluation is O(n): many devices, many ops
                break
            if e == d or mem[d] + mem[e] > su.cap[e] or np.any(~np.isfinite(su.kernel[2][e, on_d])):
                continue
            merged = np.where(on_d, e, dev)
            key = np.array(split_score(su, merged))
            evals += 1
            if better(*key, *best[1]):  # only a merge better at once is descended from: each descent is costly
                found.append((tuple(key), merged))
    for spread in spreads(dev) if spreads is not None else ():
        if time.perf_counter() >= deadline or evals >= budget:
            break
        key = np.array(split_score(su, _groups(su, spread)[0]))
        evals += 1
        if better(*key, *best[1]):
            found.append((tuple(key), spread))
    return _descend_best(su, best, found, moves, deadline, budget, evals, progress)


def _descend_best(su: _Setup, best: tuple[np.ndarray, np.ndarray], found: list, moves: np.ndarray, deadline: float,
                  budget: int, evals: int, progress: Callable[[int, np.ndarray], None] | None
                  ) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """Descents from the :data:`MERGES` best of ``found`` (``(key, split)`` pairs): the best of them and ``best``,
    and the evaluations spent in all (``evals`` so far)."""
    found.sort(key=lambda f: f[0])
    for _, merged in found[:MERGES]:
        if time.perf_counter() >= deadline or evals >= budget:
            break
        out, key, n = _descent(su, merged, moves, deadline, budget - evals, progress)
        evals += n
        if better(*key, *best[1]):
            best = (out, key)
    return best, evals


def module_descent(su: _Setup, best: tuple[np.ndarray, np.ndarray], moves: np.ndarray, deadline: float, budget: int,
                   modules: Modules, progress: Callable[[int, np.ndarray], None] | None = None
                   ) -> tuple[tuple[np.ndarray, np.ndarray], int]:
    """The best of ``best`` and the descents from its module re-solves (:class:`.latency_modules.Modules`: one
    module's branches placed anew on its cut ops' devices and the devices it leaves free, the rest fixed) that score
    better at once, the :data:`MERGES` best of them. Returns the best ``(op devices, key)`` and the evaluations."""
    before, found = modules.evaluations, []
    for split in modules(np.asarray(best[0], dtype=np.int64), best[1], deadline):
        found.append((tuple(split_score(su, split)), split))
        if modules.evaluations - before >= budget:
            break
    return _descend_best(su, best, found, moves, deadline, budget, modules.evaluations - before, progress)


def _latency_model(model: CostModel | None) -> CostModel:
    model = model or CostModel.named("latency")
    return model if model.objective is Objective.LATENCY else replace(model, objective=Objective.LATENCY)


# ---------------------------------------------------------------------------- methods
SEARCH_SECONDS = 20.0  # the latency local search's time limit when none is given


@heuristic("latency-local-search", optimizes="latency", options=manifest.LatencyLocalSearch)
def latency_local_search(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = 0,
                         starts: list[tuple[str, np.ndarray]] | None = None, restarts: int = 50, kicks: int = 8,
                         time_limit: float | None = None, max_evaluations: int = 1_000_000,
                         dp_max_ideals: int = 5000, also: list[tuple[str, np.ndarray]] | None = None
                         ) -> HeuristicResult:
    """First-improvement local search on the invocation-model latency (Tarnawski §4, §4.1).

    Parameters
    ----------
    starts
        ``(label, op -> device)`` start splits (a third item, a schedule, is kept where devices run one op at a
        time: :func:`.latency_passes.ops_search`); default Tarnawski §7's greedy and the max-load
        DP split (:func:`.latency_starts.maxload_start`). Each descends to a local optimum; then the best split's device
        merges are descended from (:func:`merged_descent`, again for each better split found), and ``restarts``
        times the best split so far takes ``kicks`` random moves (blocks, swaps) and descends again. When the kicks
        are spent, or :data:`STALE_KICKS` in a row found nothing better, the best split's module re-solves are
        descended from (:func:`module_descent`); a better split found there goes on as one found by a kick.
    also
        Start splits descended from first, before ``starts`` (or the default ones): a search continuing from a
        known split keeps the default starts' diversity (the kicks of one local optimum may not leave it).
    time_limit, max_evaluations
        Budget over the starts and all descents (seconds, ``None``: :data:`SEARCH_SECONDS` for the
        descents; latency evaluations). Every start is descended from; past the time limit the best
        so far, with ``info["stopped"]``.
    dp_max_ideals
        Above this many ideals the DP start is DPL's split (the exact DP's pairs grow fast).

    With ``model.max_subgraphs`` (Fig. 4's ``q``) a split needing more contiguous subgraphs on
    an accelerator counts as infinitely slow; ``max_subgraphs=1`` searches contiguous splits
    (Fig. 3). A ``model`` requiring ``contiguous`` (a :class:`~placement_dsl.constraints.Contiguous`
    term) counts a split whose device's forward or backward ops are not contiguous (Def. 3.1, hosts
    too) as infinitely slow. Under a non-latency ``model`` the search still optimizes latency (same memory mode);
    ``objective`` is the cost model's value under ``model``. ``info``: ``starts`` (each
    start's latency before and after its descent), ``restarts``, ``optimizes``.
    """
    t0 = time.perf_counter()
    at = deadline_at("latency-local-search", time_limit)
    lat = _latency_model(model)
    su = _setup(graph, cluster, lat)
    rng = np.random.default_rng(seed)
    moves = move_table(su, rng)
    begin = [*(also or []), *(starts if starts is not None else default_starts(graph, cluster, lat, dp_max_ideals, at))]
    if not begin:
        raise SpecError("latency-local-search: no start split given; pass starts=[(label, assignment)] or None")
    if execution(cluster) != "invocations":
        return ops_search(graph, cluster, model, lat, begin, seed, at, t0)
    _compile(su, np.asarray(begin[0][1]), moves)
    spreads = Spreads(su)
    modules = Modules(su, spreads, split_score)
    deadline, evals, best, log = time.perf_counter() + (SEARCH_SECONDS if at is None else left(at)), 0, None, []
    tell = _Progress()
    for label, assign, *_ in begin:
        tell.phase = f"start {label}"
        dev, key, n = _descent(su, np.asarray(assign), moves, deadline, max_evaluations - evals, tell)
        evals += n
        before = split_score(su, np.asarray(assign, dtype=np.int64))[1]
        log.append({"start": label, "latency": float(before), "after": float(key[1])})
        best = (dev, key) if best is None or better(*key, *best[1]) else best
        tell.evaluations, tell.best = evals, best[1]
    kicked, merge, stale = 0, True, 0
    while evals < max_evaluations and time.perf_counter() < deadline:
        if merge:  # a new best split: its device merges first (merged_descent), then the kicks go on from the best
            tell.phase = "device merges"
            best, n = merged_descent(su, best, moves, deadline, max_evaluations - evals, tell, spreads)
            evals, merge = evals + n, False
            tell.evaluations, tell.best = evals, best[1]
            continue
        if kicked >= restarts or stale == STALE_KICKS:  # the best split's module re-solves, on from a better one
            tell.phase = "module re-solves"
            found, n = module_descent(su, best, moves, deadline, max_evaluations - evals, modules, tell)
            evals, merge, stale = evals + n, better(*found[1], *best[1]), 0
            best = found
            tell.evaluations, tell.best = evals, best[1]
            tell(0, best[1])
            if merge or kicked < restarts:
                continue
            break
        tell.phase = f"restart {kicked + 1}/{restarts}"
        dev, key, n = _descent(su, _kick(su, best[0], moves, rng, kicks), moves, deadline, max_evaluations - evals,
                               tell)
        evals, kicked, stale = evals + n, kicked + 1, stale + 1
        if better(*key, *best[1]):
            best, merge, stale = (dev, key), True, 0
        tell.evaluations, tell.best = evals, best[1]
    placement = Placement(graph, cluster, best[0], source="latency-local-search")
    ev = evaluate(placement, model or lat)
    result = HeuristicResult(method="latency-local-search", placement=placement, objective=ev.objective,
                             valid=ev.valid, seconds=time.perf_counter() - t0, evaluations=evals,
                             info={"optimizes": "latency", "starts": log, "restarts": kicked, "moves": len(moves)})
    ran_out = kicked < restarts and evals < max_evaluations and time.perf_counter() >= deadline
    return stopped(result) if ran_out else result


def _candidate(method: str, assign: np.ndarray | None, seconds: float, graph: Graph, cluster: Cluster,
               model: CostModel, error: str = "", scored: tuple[float, bool | None] | None = None,
               schedule: Any = None) -> dict[str, Any]:
    """A candidate's row, its ``(latency, valid)`` as ``scored`` by ``model`` where its result carried them (a scoring
    is a list schedule of 47,584 ops on a 15,000-task sheet: greedy's cost one more than its three), else scored;
    with the ``schedule`` its result carried, which the score and the answer keep (HEFT's 731.0 on a 2,000-op DAG
    with links is 778.8 when the referee schedules its split again)."""
    if assign is None:
        return {"method": method, "error": error, "seconds": seconds}
    if scored is None or scored[1] is None:
        scored = (ev := evaluate(Placement(graph, cluster, assign, schedule=schedule), model)).objective, ev.valid
    row = {"method": method, "latency": scored[0], "valid": scored[1], "seconds": seconds, "assign": assign}
    return {**row, "schedule": schedule} if schedule is not None else row


def _scores(result: Any) -> tuple[float, bool | None]:  # the verdict on its placement (its schedule kept) where made
    return result.objective, getattr(result, "valid", None)


def _baselines(graph: Graph, cluster: Cluster, lat: CostModel, dp_max_ideals: int,
               at: float | None = None, found: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Greedy (§7), one device (:func:`.fallback.one_device_split`), the chain and spine splits, the max-load DP
    (§5.1.1) and DPL (§5.1.2) splits, scored for latency; the DPs get what is left until ``at``
    (``time.monotonic()``), and none starts after it. The chain split goes before the DPs: on layer graphs it is the best start by far and takes milliseconds
    (InceptionV3: 1,325.5, the DPs' 1,854.6), and a short call (a 10 s round of a solve's start) that spent its time
    on the DPs never reached it (a 60 s solve answered 1,312.7 where latency-best alone reaches 1,283.0).
    ``found(candidate)`` is called with each candidate as it is scored."""
    out = []  # greedy and the DPs by the registry's run: where links leave a pair of devices without a route it
    # searches within the devices that reach one another where a split sends a tensor across such a pair; the list
    # schedulers first where devices run one op at a time (:mod:`.latency_passes`)
    for method, run in (*passes(graph, cluster, lat, at),
                        ("greedy", lambda: run_method("greedy", graph, cluster, model=lat)),
                        ("one-device", lambda: _Split(one_device_split(graph, cluster))),  # one sum or longest path
                        ("chain", lambda: _Split(chain_split(graph, cluster, lat, _share(at, CHAIN_SHARE)))),
                        ("spine", lambda: _Split(spine_split(graph, cluster, lat, _share(at, CHAIN_SHARE)))),
                        ("dp", lambda: run_method("dp", graph, cluster, model=max_load_model(lat),
                                                  max_ideals=dp_max_ideals, time_limit=_seconds(at, DP_SHARE))),
                        ("dpl", lambda: run_method("dpl", graph, cluster, model=max_load_model(lat),
                                                   time_limit=_seconds(at, DP_SHARE)))):
        if out and expired(at):
            break
        t = time.perf_counter()
        try:
            res = run()  # greedy's and the passes' verdicts are by lat, the DPs' by the max-load model
            assign, error, scored = res.placement.assign, "", _scores(res) if method in BY_LATENCY else None
            schedule = res.placement.schedule if method in BY_LATENCY else None  # what its verdict scored
        except (SpecError, InfeasibleError, BudgetSpent) as err:
            assign, error, scored, schedule = None, str(err), None, None
        out.append(_candidate(method, assign, time.perf_counter() - t, graph, cluster, lat, error, scored, schedule))
        _report_candidates(out)
        if found is not None:
            found(out[-1])
    return out


BASELINES = 6  # greedy, one device (557.4 on a 15,000-task sheet, greedy 777.6), the chain, spine, DP and DPL splits
BY_LATENCY = ("greedy", *PASSES)  # the candidates run under the latency model: their verdict is the candidate's score
CHAIN_SHARE = 0.6  # of latency-best's time left, at most, for the chain split (O(groups^2) intervals: 27 s at 761;
# at 0.4 a 3.5 s call on a generated DAG of 2,000 ops at load 8 stopped it at 1.3 s, before the 2,180.0 it finds)
DP_SHARE = 0.5  # of latency-best's time left, at most, for each max-load DP's split: given all of it, DPL on a
# generated DAG of 2,000 ops on four linked accelerators and a host took 6.9 s of a 15 s call at load 7 for a split
# 9 % worse than the chain's, and the search from the best start had what was left


def _seconds(at: float | None, share: float) -> float | None:
    """``share`` of the time left until ``at`` (``None``: no limit)."""
    return None if at is None else share * left(at)


def _share(at: float | None, share: float) -> float | None:
    """The deadline ``share`` of the time left until ``at`` from now (``None``: no limit)."""
    return None if at is None else time.monotonic() + share * left(at)


@dataclass
class _Split:
    """A split found by a function that returns only the assignment (the chain split), as a method's result."""

    assign: np.ndarray

    @property
    def placement(self) -> _Split:
        return self


def _report_candidates(cands: list[dict[str, Any]]) -> None:
    """The latest candidate's latency and the best valid latency so far (``inf`` while none is valid)."""
    last = cands[-1]
    best = min((c["latency"] for c in cands if c.get("valid")), default=INF)
    report("latency-best", candidate=last["method"], latency=last.get("latency", math.nan), best=best)


@heuristic("latency-best", optimizes="latency", options=manifest.LatencySearch)
def latency_best(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = 0,
                 dp_max_ideals: int = 5000, time_limit: float | None = None, **search: Any) -> HeuristicResult:
    """The best single-sample latency among greedy, the max-load DP and DPL splits and the latency local search.

    The local search starts from each of those splits (``search`` goes to
    :func:`latency_local_search`). Valid splits beat invalid ones, then lower latency wins.
    ``info["candidates"]`` lists each method's latency, validity and seconds (or why it has
    no split, e.g. the DP's ideal limit); ``info["best"]`` names the winner. ``time_limit`` (seconds,
    ``None``: the local search's default) bounds the whole: the baselines, then the search gets what
    is left (``info["stopped"]`` when it ran out).
    """
    t0 = time.perf_counter()
    at = deadline_at("latency-best", time_limit)
    lat = _latency_model(model)
    same = model is None or model is lat  # the candidates' latencies are the answer's objective
    if at is None or not can_fork():  # no limit, or a daemonic process (no children): the searches stop themselves
        cands: list[dict[str, Any]] = []
        _searches(cands.append, graph, cluster, lat, dp_max_ideals, seed, search, at)
    else:
        cands = _clocked(graph, cluster, lat, dp_max_ideals, seed, search, at, same)
    ranked = [c for c in cands if "assign" in c]
    if not ranked:  # stopped before any candidate was scored: the O(n + m) splits that fit what is left, else
        try:  # the one device that holds the graph, by the closed form (no split could be built and scored in time)
            return fallback("latency-best", graph, cluster, model or lat, "its first candidate", t0, None if at is None
                            else Deadline(max(left(at) - checks_seconds(graph, cluster, 0), 0.0)))
        except BudgetSpent:
            found = one_device_closed_form("latency-best", graph, cluster, "its first candidate", t0)
            if found is None:
                raise
            return found
    ls = next((c for c in cands if c["method"] == "latency-local-search"), {})
    win = min(ranked, key=lambda c: (not c["valid"], c["latency"]))
    placement = Placement(graph, cluster, win["assign"], source=f"latency-best:{win['method']}",
                          schedule=win.get("schedule"))
    listed = [{k: v for k, v in c.items() if k not in ("assign", "schedule", "stopped", "evaluations")} for c in cands]
    objective = win["latency"] if same else evaluate(placement, model or lat).objective
    info = {"optimizes": "latency", "best": win["method"], "candidates": listed}
    if ls.get("stopped", True) or len(cands) < BASELINES + 1 + len(passes(graph, cluster, lat, None)):
        info["stopped"] = "time limit"
    return HeuristicResult(method="latency-best", placement=placement, objective=objective,
                           seconds=time.perf_counter() - t0, evaluations=ls.get("evaluations", 0), info=info)


CHECKS = 2  # evaluations of latency-best's answer after it returns: the registry's re-check and the caller's scoring


def checks_seconds(graph: Graph, cluster: Cluster, more: int) -> float:
    """Seconds the :data:`CHECKS` evaluations of the answer, and ``more``, take on this machine as loaded now."""
    return fallback_seconds(graph, cluster, "none", CHECKS + more)


def _clocked(graph: Graph, cluster: Cluster, lat: CostModel, dp_max_ideals: int, seed: int | None,
             search: dict[str, Any], at: float, scored: bool) -> list[dict[str, Any]]:
    """The candidates :func:`_searches` scored by ``at`` less the answer's checks (:func:`checks_seconds`; one more
    where the caller's model is not ``lat``): they run in a forked child stopped by force then
    (:func:`~placement_dsl.deadline.stream_within`), so that neither a candidate that checks no clock (greedy: 15-19
    s on a 15,000-task MOIRAI sheet of 47,584 ops at load 6-8) nor the scoring of one holds the call past it."""
    until = Deadline(max(left(at) - checks_seconds(graph, cluster, 0 if scored else 1), 0.0))
    return list(stream_within(until, _searches, graph, cluster, lat, dp_max_ideals, seed, search, until.at))


def _searches(send: Callable[[dict[str, Any]], None], graph: Graph, cluster: Cluster, lat: CostModel,
              dp_max_ideals: int, seed: int | None, search: dict[str, Any], at: float | None) -> None:
    """latency-best's candidates, each ``send``-ed as it is scored: the baselines, then the latency local search from
    them (the best first), which leaves one evaluation's time before ``at`` to score its answer."""
    if at is not None and fallback_seconds(graph, cluster, "greedy") > left(at):  # greedy's split and its scoring
        _first_split(send, graph, cluster, lat, at)  # will not fit: the cheapest one that does goes first
    cands = _baselines(graph, cluster, lat, dp_max_ideals, at, send)
    ranked = sorted((c for c in cands if "assign" in c), key=lambda c: (not c["valid"], c["latency"]))
    if not ranked:
        return
    # the best first (a short budget descends from it), with the schedule it came with
    starts = [(c["method"], c["assign"], *([c["schedule"]] if "schedule" in c else [])) for c in ranked]
    limit = None if at is None else max(left(at) - fallback_seconds(graph, cluster, "none", 1), 0.0)
    ls = latency_local_search(graph, cluster, model=lat, seed=seed, starts=starts, time_limit=limit, **search)
    cands.append({**_candidate("latency-local-search", ls.placement.assign, ls.seconds, graph, cluster, lat,
                               scored=_scores(ls), schedule=ls.placement.schedule),
                  "stopped": bool(ls.info.get("stopped")), "evaluations": ls.evaluations})
    _report_candidates(cands)
    send(cands[-1])


def _first_split(send: Callable[[dict[str, Any]], None], graph: Graph, cluster: Cluster, lat: CostModel,
                 at: float) -> None:
    """The cheapest of the fallback splits (:func:`~.fallback.fallback`, ``O(n + m)``) that fits before ``at``, scored
    and sent as a candidate: where greedy's split cannot be built and scored in time (47,584 ops at load 7: three
    list schedules, 15-19 s), the call still has a valid answer to give. None is sent where none fits."""
    t = time.perf_counter()
    try:
        found = fallback("latency-best", graph, cluster, lat, "greedy would not fit", t,
                         Deadline(max(left(at) - fallback_seconds(graph, cluster, "none", 1), 0.0)))
    except PlacementError:  # BudgetSpent too: no split fits
        return
    send(_candidate(f"fallback:{found.info['fallback']}", found.placement.assign, time.perf_counter() - t, graph,
                    cluster, lat))
