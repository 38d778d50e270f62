"""Training pipelines in the cost model: memory per schedule and GPipe's fill and drain.

Memory per schedule (:class:`TrainingMemorySpec`)
------------------------------------------------
A training stage on device ``d`` holds (per replica):

* weights, gradients and optimizer state: ``state_factor * param_bytes(d)`` with
  ``state_factor = optimizer_bytes / weight_bytes``. The default assumes Adam in mixed precision,
  16 bytes per parameter (fp16 weight 2 + fp16 gradient 2 + fp32 master weight 4 + fp32 first
  and second moments 4 + 4), over graphs whose ``param_bytes`` count 2-byte (fp16) weights:
  a factor of 8. Profiles measured in fp32 (PipeDream's ``parameter_size`` is 4 bytes per
  parameter) want ``weight_bytes=4``.
* the activations of every micro-batch in flight, stashed for its backward pass: per
  micro-batch ``act(d) = sum over d's forward ops of (out_bytes + activation_bytes)`` plus the
  forward tensors ``d`` receives (``in(d)``, its stage input). With ``recompute`` (GPipe's
  re-materialization) only the stage inputs are stashed and one micro-batch's activations are
  rebuilt at a time: ``n * in(d) + act(d) + in(d)``.
* micro-batches in flight ``n`` (Archer et al. §2's peak activation memory, per schedule):
  1F1B (PipeDream) — stage ``s`` of ``k`` (0-based, in pipeline order) keeps ``k - s``, capped
  by ``microbatches`` when given; GPipe — all ``m = microbatches``. A stage on ``r`` replicas
  deals its micro-batches round-robin: ``ceil(n / r)`` per replica.

GPipe with ``m`` micro-batches (Tarnawski §5.3, App. A; Huang et al.)
----------------------------------------------------------------------
A unit is one device's forward or backward pass, lasting its per-sample load; units depend on
each other through the edges that cross them. A device runs its forward unit for micro-batches
``0..m-1``, then its backward unit for ``0..m-1`` (the flush), each task as soon as the device is
free and its inputs are done: ``C(u, j) = max(C(previous task of the device), C(v, j) for the
units v feeding u) + t_u``, and a mini-batch takes the last ``C``; the time per sample is that
over ``m``. On a cluster with links a link's unit is one too (its load), and its latency is paid after it,
by the unit reading it (``C(v, j) + latency``): a delay of every micro-batch's tensors, in the fill and
the drain, not time the link is held (the steady state, ``max FW + max BW``, is unchanged by it). When the passes meet only at the loss, this is ``(F_m + B_m) / m`` with the flow-shop
makespan ``F_m = max over units u of ((m - 1) t_u + longest path through u)`` of each pass
(:func:`flow_shop`): on ``k`` equal stages ``(m + k - 1) / m`` times the steady state, a bubble of
``(k - 1) / (m + k - 1)``. As ``m`` grows it tends to ``max FW + max BW``.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import SpecError
from .graph import last_first_order
from .replication import replica_routes

if TYPE_CHECKING:
    from .placement import Placement

SCHEDULES = ("1f1b", "gpipe")
ADAM_MIXED_BYTES = 16.0  # bytes per parameter: fp16 weight + fp16 grad + fp32 master, m, v
FP16_WEIGHT_BYTES = 2.0


@dataclass(frozen=True)
class TrainingMemorySpec:
    """How a training stage's memory is counted (see the module docstring for the formula).

    Parameters
    ----------
    schedule
        ``"1f1b"`` (PipeDream: stage ``s`` of ``k`` stashes ``k - s`` micro-batches) or ``"gpipe"``
        (every stage stashes all ``microbatches``).
    microbatches
        ``m``: needed for GPipe; caps the 1F1B count when given.
    optimizer_bytes, weight_bytes
        Bytes per parameter of weights + gradients + optimizer state, and of a weight as the
        graph's ``param_bytes`` count it; the ratio multiplies ``param_bytes``.
    recompute
        Stash only stage inputs and rebuild one micro-batch's activations at a time.
    """

    schedule: str = "1f1b"
    microbatches: int | None = None
    optimizer_bytes: float = ADAM_MIXED_BYTES
    weight_bytes: float = FP16_WEIGHT_BYTES
    recompute: bool = False

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise SpecError(f"training memory: unknown schedule {self.schedule!r}; choose from {list(SCHEDULES)}")
        m = self.microbatches
        if m is not None and (isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1):
            raise SpecError(f"training memory: microbatches must be a whole number >= 1, got {m!r}")
        if self.schedule == "gpipe" and m is None:
            raise SpecError("training memory: schedule 'gpipe' stashes all micro-batches; give microbatches=M")
        for name in ("optimizer_bytes", "weight_bytes"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise SpecError(f"training memory: {name} must be a finite number > 0, got {value!r}")

    @property
    def state_factor(self) -> float:
        """Bytes of weights, gradients and optimizer state per byte of ``param_bytes``."""
        return self.optimizer_bytes / self.weight_bytes

    def inflight(self, stages_from_end: np.ndarray | int, replicas: np.ndarray | int) -> np.ndarray:
        """Micro-batches stashed per replica by a stage with ``stages_from_end`` stages from it to the
        end (itself included, ``k - s``) on ``replicas`` devices."""
        n = np.asarray(stages_from_end, dtype=float)
        if self.schedule == "gpipe":
            n = np.full_like(n, float(self.microbatches))
        elif self.microbatches is not None:
            n = np.minimum(n, float(self.microbatches))
        return np.ceil(n / np.asarray(replicas, dtype=float))

    def stage_bytes(self, param: Any, act: Any, inputs: Any, inflight: Any) -> Any:
        """Memory of one replica: state + stashed activations (numpy arrays or scalars)."""
        if self.recompute:
            return self.state_factor * param + inflight * inputs + act + inputs
        return self.state_factor * param + inflight * (act + inputs)

    def to_dict(self) -> dict[str, Any]:
        return {"schedule": self.schedule, "microbatches": self.microbatches, "optimizer_bytes": self.optimizer_bytes,
                "weight_bytes": self.weight_bytes, "recompute": self.recompute}


def stage_positions(assign: np.ndarray, size: int) -> np.ndarray:
    """``k - s`` for every device holding ops (its stage and those after it, pipeline order); 0 elsewhere."""
    used = np.bincount(assign, minlength=size) > 0
    after = np.cumsum(used[::-1])[::-1]
    return np.where(used, after, 0)


def training_memory(p: Placement, spec: TrainingMemorySpec, sets: Any, in_fw_bytes: np.ndarray) -> np.ndarray:
    """Per-device memory under ``spec`` (replica devices hold what their stage's device holds)."""
    g, D = p.graph, p.cluster.size
    if not g.is_training:
        raise SpecError(f"training memory: graph {g.name!r} has no backward pass; use a training graph "
                        "(--training) or plain memory")
    fw = ~g.backward
    param = np.bincount(p.assign, weights=g.param_bytes, minlength=D)
    act = np.bincount(p.assign, weights=np.where(fw, g.out_bytes + g.activation_bytes, 0.0), minlength=D)
    r = np.array([len(m) for m in sets], dtype=float)
    n = spec.inflight(stage_positions(p.assign, D), r)
    used = np.bincount(p.assign, minlength=D) > 0
    mem = np.where(used, spec.stage_bytes(param, act, in_fw_bytes, n), 0.0)
    for d, members in enumerate(sets):
        mem[list(members[1:])] = mem[d]
    return mem


# ---------------------------------------------------------------------------- GPipe fill and drain
def flow_shop(duration: np.ndarray, preds: list[list[int]], m: int) -> float:
    """Makespan of ``m`` identical jobs through a DAG of units (each unit one job at a time, in order).

    ``max over u of ((m - 1) * duration[u] + longest path through u)``: along any path the
    jobs queue behind its slowest unit.
    """
    n = len(duration)
    if n == 0:
        return 0.0
    order = _topological(preds, n)
    head = np.zeros(n)  # longest path ending at u (u included)
    for u in order:
        head[u] = duration[u] + max((head[v] for v in preds[u]), default=0.0)
    tail = np.zeros(n)  # longest path starting at u (u included)
    succ = _successors(preds)
    for u in reversed(order):
        tail[u] = duration[u] + max((tail[v] for v in succ[u]), default=0.0)
    return float(((m - 1) * duration + head + tail - duration).max())


def _successors(preds: list[list[int]]) -> list[list[int]]:
    """Each unit's successors, from each unit's predecessors."""
    succ: list[list[int]] = [[] for _ in preds]
    for u, before in enumerate(preds):
        for v in before:
            succ[v].append(u)
    return succ


def _topological(preds: list[list[int]], n: int) -> list[int]:
    out = last_first_order(_successors(preds), [len(p) for p in preds], [u for u in range(n) if not preds[u]])
    if len(out) < n:
        raise SpecError("GPipe fill and drain: the device passes form a cycle; make the placement contiguous")
    return out


def unit_graph(p: Placement) -> tuple[np.ndarray, list[list[int]]]:
    """Units ``2 * device + backward`` present in ``p`` and each one's predecessor units (crossing edges).

    On a cluster with links link ``k`` is resource ``D + k``: a tensor crossing devices passes the units
    ``2 * (D + k) + backward`` of its route's links, in its producer's pass, of each replica pair's route
    under replicated stages (:func:`placement_dsl.replication.replica_routes`; :func:`placement_dsl.evaluate.link_loads`)."""
    g, c = p.graph, p.cluster
    label = 2 * p.assign + g.backward.astype(np.int64)
    cross = label[g.src] != label[g.dst]
    edges: set[tuple[int, int]] = set()
    for u, v in zip(g.src[cross].tolist(), g.dst[cross].tolist()):
        a, b = int(p.assign[u]), int(p.assign[v])
        routes = replica_routes(c, p.replica_sets, a, b) if c.links and a != b and g.out_bytes[u] > 0 else []
        for route in routes or [()]:  # each replica pair's route
            path = [int(label[u]), *(2 * (c.size + k) + int(g.backward[u]) for k in route), int(label[v])]
            edges |= set(itertools.pairwise(path))
    present = np.unique(np.concatenate([label, np.array([x for e in edges for x in e], dtype=np.int64)]))
    uid = {int(x): i for i, x in enumerate(present)}
    preds: list[set[int]] = [set() for _ in present]
    for a, b in edges:
        preds[uid[b]].add(uid[a])
    return present, [sorted(x) for x in preds]


def pass_cycle(p: Placement) -> list[str]:
    """Device passes (``"acc0 forward"``) on a cycle of :func:`unit_graph`, first repeated last; ``[]`` without one.

    GPipe's fill and drain has no schedule then: each pass waits on a later one.
    """
    present, preds = unit_graph(p)
    indeg = np.array([len(x) for x in preds], dtype=np.int64)
    last_first_order(_successors(preds), indeg, [u for u in range(len(present)) if indeg[u] == 0])  # counts indeg down
    left = np.flatnonzero(indeg > 0)
    if left.size == 0:
        return []
    seen: dict[int, int] = {}
    u = int(left[0])
    while u not in seen:  # every unit left has a predecessor left: walking back must repeat one
        seen[u] = len(seen)
        u = next(v for v in preds[u] if indeg[v] > 0)
    walk = list(seen)[seen[u]:][::-1]
    resources = [*p.cluster.names, *(f"link {lk.src}->{lk.dst}" for lk in p.cluster.links)]
    names = [f"{resources[present[x] // 2]} {'backward' if present[x] % 2 else 'forward'}" for x in walk]
    return names + names[:1]


def gpipe_time_per_sample(p: Placement, load_fw: np.ndarray, load_bw: np.ndarray, m: int,
                          links: Sequence[Any] = ()) -> float:
    """GPipe's time per sample for one mini-batch of ``m`` micro-batches, fill and drain included.

    The max-plus recurrence of the module docstring over the units of ``p`` (per-sample loads
    ``load_fw``/``load_bw`` per device, then per link of the cluster when :func:`unit_graph` routes
    tensors over links: ``links``, the cost model's per-link loads with ``load_fw``/``load_bw``,
    :func:`placement_dsl.evaluate.link_loads`); a cycle among units is a :class:`SpecError`.
    """
    present, preds = unit_graph(p)
    if present.max(initial=0) // 2 >= len(load_fw):  # link units: their loads follow the devices'
        if len(links) + len(load_fw) <= present.max(initial=0) // 2:
            raise SpecError("gpipe_time_per_sample: the placement routes tensors over links; pass their loads "
                            "(placement_dsl.evaluate.link_loads)")
        load_fw = np.concatenate([load_fw, [lk.load_fw for lk in links]])
        load_bw = np.concatenate([load_bw, [lk.load_bw for lk in links]])
    dur = np.where(present % 2 == 1, load_bw[present // 2], load_fw[present // 2])
    order = _topological(preds, len(present))
    fw = [u for u in order if present[u] % 2 == 0]
    bw = [u for u in order if present[u] % 2 == 1]
    done = np.zeros((len(present), m))
    free = np.zeros(int(present.max()) // 2 + 1)  # when each device is next free
    resource = present // 2
    D = p.cluster.size
    lag = np.array([p.cluster.links[r - D].latency if r >= D else 0.0 for r in resource.tolist()])
    for units in (fw, bw):
        for j in range(m):
            for u in units:
                ready = max((done[v, j] + lag[v] for v in preds[u]), default=0.0)  # a link's latency after it
                d = present[u] // 2
                done[u, j] = max(ready, free[d]) + dur[u]
                free[d] = done[u, j]
    return float(done.max(initial=0.0)) / m
