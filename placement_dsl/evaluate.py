"""The cost model: the single referee of what a placement costs and whether it is valid.

Every objective the package reports (heuristics, MIPs, bounds' incumbents) is re-checked
here. For a device ``d`` holding ops ``S`` (Archer et al. eq. 1-3; Tarnawski et al. §5.1):

* ``compute(d) = sum_{v in S} work_{kind(d)}(v) / speed(d)``
* ``in(d)  = sum of out_bytes(u) / bw(d)`` over producers ``u`` outside ``S`` with a consumer in ``S``
* ``out(d) = sum of out_bytes(u) / bw(d)`` over producers ``u`` in ``S`` with a consumer outside ``S``
  (each tensor once per boundary, however many consumers; host devices pay no transfers)
* ``overflow(d) = (param(S) + act(S) - memory(d))^+ / bw(d)`` when memory is soft (Archer eq. 2,
  with the activation reserve of a stage taken as the sum of its ops' ``activation_bytes``)
* ``load(d) = compute + in + out + overflow``; with overlapped communication (Tarnawski App. C.1)
  ``max(compute, in + out + overflow)``, or ``max(compute, in, out + overflow)`` full duplex.
* a pipeline runtime's fixed costs (``CostModel.message_latency``, ``CostModel.task_overhead``, 0 by
  default; measured and fitted by :mod:`placement_dsl.profile`): each tensor of ``in``/``out`` adds
  ``message_latency``, and a device's load adds ``task_overhead`` per pass it runs ops of. The searches
  price neither (:func:`placement_dsl.heuristics.run` refuses them); the simulator and this referee do.

Training graphs split each term into a forward and a backward part: compute by the op's pass, and a transfer by the pass
of the tensor's *producer* (the tensor moves when it is made). Objectives: ``max_load`` = ``max_d load(d)`` (pipeline
bottleneck, Tarnawski throughput, PipeDream ``max_d FW_d + BW_d``); ``gpipe`` = ``max_d FW_d + max_d BW_d`` (overflow is
charged to the forward pass); on a cluster with links each link is a resource too (:func:`link_loads`: every tensor
loads each link of its route with ``bytes / bandwidth``), in ``max_load`` and ``gpipe`` (a stage of GPipe's fill and
drain with micro-batches); ``interleaved-1f1b``, ``zb-h1`` and ``zbv`` = the time per sample of torch's rank orders over
the placement's virtual stages with ``microbatches`` (:mod:`placement_dsl.pipeline_orders`), their steady state ``max``
over ranks of their stages' ``F + I + W`` without (``max_d (FW_d + BW_d)``; ZBV folds two devices onto a rank and hands
the tensor between them over in its process); on a cluster with links each message between stages of two devices is also
a task on every link of its route (and the steady state the most work of a rank or a link); ``latency`` = single-sample
latency in Tarnawski's invocation model (§4): a non-host device starts its (contiguous) subgraph when all its inputs are
in host memory, then reads them, computes and writes its outputs; host ops run as soon as their inputs are ready. A
non-contiguous device set is cut into contiguous subgraphs run one at a time (§4.1, Fig. 4;
:mod:`placement_dsl.invocation`). On a cluster with links, latency and makespan pay each transfer over its route (every
hop's latency plus size over the bottleneck, :class:`~placement_dsl.cluster.Cluster`), under the model's congestion
(latency: ``none`` unless a :class:`~placement_dsl.constraints.Congestion` term asks).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

import numpy as np

from .cluster import Cluster
from .congestion import Congestion
from .errors import SpecError
from .graph import unique_pairs
from .invocation import invocations, subgraph_levels
from .pipeline_orders import ORDERS, check_round_robin, check_step, order_makespan, rank_orders, steady_state
from .placement import Placement
from .replication import replica_link_loads, replica_owner, replicated, routed_transfers, sync_times
from .report import device_rows, device_table
from .schedule import schedule_makespan, transfer_tasks
from .stage_schedules import stage_memory, stage_times
from .training import TrainingMemorySpec, gpipe_time_per_sample, pass_cycle, training_memory
from .validity import Violation, contiguity_violations, order_violations

REL_TOL = 1e-9


class Objective(str, Enum):
    MAX_LOAD = "max_load"
    GPIPE = "gpipe"
    LATENCY = "latency"
    MAKESPAN = "makespan"  # MOIRAI eq. (4): the last finish of a schedule (placement_dsl.schedule)


class Overlap(str, Enum):
    NONE = "none"  # load = compute + in + out
    HALF = "half"  # load = max(compute, in + out)
    FULL = "full"  # load = max(compute, in, out)

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:  # terms print as GPipe(overlap='none')
        return repr(self.value)


class MemoryMode(str, Enum):
    HARD = "hard"  # capacity is a constraint
    OVERFLOW = "overflow"  # excess parameters are streamed at the device's bandwidth


CHECKS = ("allowed", "memory", "colocation", "contiguous", "dag_order", "acyclic", "schedule")
DEFAULT_REQUIRE = frozenset({"allowed", "memory", "colocation"})

# user-facing objective names -> (objective, memory mode)
NAMED = {
    "throughput": (Objective.MAX_LOAD, MemoryMode.HARD),
    "pipedream": (Objective.MAX_LOAD, MemoryMode.HARD),
    "max_load": (Objective.MAX_LOAD, MemoryMode.HARD),
    "bottleneck": (Objective.MAX_LOAD, MemoryMode.OVERFLOW),
    "gpipe": (Objective.GPIPE, MemoryMode.HARD),
    "latency": (Objective.LATENCY, MemoryMode.HARD),
    "makespan": (Objective.MAKESPAN, MemoryMode.HARD),
    "interleaved-1f1b": (Objective.MAX_LOAD, MemoryMode.HARD),  # placement_dsl.pipeline_orders: torch's orders
    "zb-h1": (Objective.MAX_LOAD, MemoryMode.HARD),
    "zbv": (Objective.MAX_LOAD, MemoryMode.HARD),
}


@dataclass(frozen=True)
class CostModel:
    """What to measure: objective, overlap of communication, memory mode, required checks."""

    objective: Objective = Objective.MAX_LOAD
    overlap: Overlap = Overlap.NONE
    memory: MemoryMode = MemoryMode.HARD
    require: frozenset[str] = DEFAULT_REQUIRE
    congestion: Congestion = Congestion.PORT  # which transfers exclude each other (makespan; latency over links)
    max_subgraphs: int | None = None  # latency: contiguous subgraphs per accelerator (Tarnawski Fig. 4's q)
    microbatches: int | None = None  # gpipe: m micro-batches per mini-batch, fill and drain (placement_dsl.training)
    virtual: int | None = None  # interleaved-1f1b, zb-h1: virtual stages per rank asked (None: as the placement has)
    training_memory: TrainingMemorySpec | None = None  # memory per schedule (placement_dsl.training)
    task_overhead: float = 0.0  # fixed time a device pays per pass of a sample (a pipeline runtime's per action)
    message_latency: float = 0.0  # fixed time per tensor crossing a device's boundary, paid where bytes / bw is
    name: str | None = field(default=None, compare=False)  # the objective asked by name (pipedream, throughput)

    def __post_init__(self) -> None:
        for name, enum in (("objective", Objective), ("overlap", Overlap), ("memory", MemoryMode),
                           ("congestion", Congestion)):
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, enum(value))
            except ValueError:
                raise SpecError(f"CostModel: unknown {name} {value!r}; choose from {[e.value for e in enum]}") from None
        unknown = set(self.require) - set(CHECKS)
        if unknown:
            raise SpecError(f"CostModel: unknown checks {sorted(unknown)}; choose from {list(CHECKS)}")
        object.__setattr__(self, "require", frozenset(self.require))
        q = self.max_subgraphs
        if q is not None and (isinstance(q, bool) or not isinstance(q, int) or q < 1):
            raise SpecError(f"CostModel: max_subgraphs must be a whole number >= 1 or None, got {q!r}")
        check_step(self.name, self.microbatches, self.virtual)
        for name in ("task_overhead", "message_latency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
                raise SpecError(f"CostModel: {name} must be a finite number >= 0, got {value!r}")

    @classmethod
    def named(cls, name: str, **changes: Any) -> CostModel:
        """A cost model by objective name: throughput, pipedream, bottleneck, gpipe, latency, makespan."""
        if name not in NAMED:
            raise SpecError(f"unknown objective {name!r}; choose from {sorted(NAMED)}")
        objective, memory = NAMED[name]
        require = DEFAULT_REQUIRE
        if memory is MemoryMode.OVERFLOW:
            require = require - {"memory"}
        if objective in (Objective.LATENCY, Objective.MAKESPAN):  # one single-sample model: a schedule to check
            require = require | {"schedule"}
        return replace(cls(objective=objective, memory=memory, require=require, name=name), **changes)

    @property
    def chained_stages(self) -> bool:
        """Whether the schedule runs the stages in a chain, pricing a split whose stages form a cycle ``inf``: the rank
        orders of :data:`~placement_dsl.pipeline_orders.ORDERS` (max load), GPipe's fill and drain (micro-batches)."""
        return self.name in ORDERS if self.objective is Objective.MAX_LOAD else \
            self.objective is Objective.GPIPE and self.microbatches is not None


@dataclass(frozen=True)
class DeviceCost:
    """One row of the per-device table."""

    device: str
    kind: str
    ops: int
    compute_fw: float
    compute_bw: float
    in_fw: float
    in_bw: float
    out_fw: float
    out_bw: float
    overflow: float
    memory_used: float
    memory_capacity: float
    load_fw: float
    load_bw: float
    load: float
    replicas: int = 1  # devices running this stage (App. C.2); loads are per sample on each of them
    sync: float = 0.0  # per-sample weight all-reduce of a replicated stage (placement_dsl.replication)

    @property
    def compute(self) -> float:
        return self.compute_fw + self.compute_bw

    @property
    def transfer_in(self) -> float:
        return self.in_fw + self.in_bw

    @property
    def transfer_out(self) -> float:
        return self.out_fw + self.out_bw


@dataclass(frozen=True)
class LinkCost:
    """One physical link's load per sample: ``bytes / bandwidth`` of every tensor whose route crosses it
    (once per tensor and receiving device), by the producer's pass."""

    link: str  # "src->dst"
    load_fw: float
    load_bw: float

    @property
    def load(self) -> float:
        return self.load_fw + self.load_bw


@dataclass(frozen=True)
class Evaluation:
    """The cost model's verdict on one placement."""

    objective: float
    valid: bool
    model: CostModel
    devices: tuple[DeviceCost, ...]
    violations: tuple[Violation, ...] = ()
    latency: float | None = None
    finish_times: dict[str, float] = field(default_factory=dict, repr=False)
    subgraphs: dict[str, int] = field(default_factory=dict)  # latency: invocations per accelerator
    links: tuple[LinkCost, ...] = ()  # throughput on a cluster with links: each link's load (a resource too)

    @property
    def binding(self) -> tuple[Violation, ...]:
        """The violations that make the placement invalid (``valid`` is True exactly when there are none)."""
        return tuple(v for v in self.violations if v.counts(self.model.require))

    @property
    def max_load(self) -> float:
        """The largest load of a device or, on a cluster with links, of a link."""
        return max([d.load for d in self.devices] + [lk.load for lk in self.links], default=0.0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready verdict; ``devices`` has one row per device with the unit in each key
        (``compute_ms``, ``memory_bytes``, ``memory_capacity_bytes``, ``memory_percent``, ...)."""
        return {
            "objective": self.objective,
            "valid": self.valid,
            "model": {k: (sorted(v) if isinstance(v, frozenset) else v.to_dict() if hasattr(v, "to_dict")
                          else getattr(v, "value", v))
                      for k, v in self.model.__dict__.items()},
            "violations": self.violation_rows(),
            "devices": device_rows(self.devices),
            **({"latency": self.latency} if self.latency is not None else {}),
            **({"subgraphs": dict(self.subgraphs)} if self.subgraphs else {}),
            **({"links": [{"link": lk.link, "load_fw": lk.load_fw, "load_bw": lk.load_bw, "load": lk.load}
                          for lk in self.links]} if self.links else {}),
        }

    def violation_rows(self) -> list[dict[str, Any]]:
        """Every violation as ``{"check", "message", "required"}``: whether the model's required checks make it one
        that invalidates the placement, or a note (e.g. a non-contiguous device where contiguity is not asked)."""
        return [{"check": v.check, "message": v.message, "required": v.counts(self.model.require)}
                for v in self.violations]

    def table(self) -> str:
        """Per-device table as aligned text: times in ms, memory as bytes used / capacity (share)."""
        rows = device_table(self.devices, passes=self.model.objective is Objective.GPIPE or None)
        if self.links:
            busiest = max(self.links, key=lambda lk: lk.load)
            rows.append(f"busiest link {busiest.link}: load {busiest.load:.6g} (of {len(self.links)} links)")
        rows.append(f"objective ({self.model.name or self.model.objective.value}): {self.objective:.6g}   "
                    f"valid: {self.valid}")
        for v in self.violations:
            label = "violation" if v.counts(self.model.require) else "note (not required)"
            rows.append(f"  {label} [{v.check}] {v.message}")
        return "\n".join(rows)


# ---------------------------------------------------------------------------- pieces
def transfer_terms(p: Placement, counts: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bytes entering/leaving each device, split by the producer's pass: (in_fw, in_bw, out_fw, out_bw).

    Each tensor is counted once per device boundary (Archer eq. 1): producers ``u`` with at least one consumer on
    another device; for the receiving side, once per (tensor, device). ``counts``: the number of such tensors
    instead of their bytes (the messages a runtime sends).
    """
    g, D = p.graph, p.cluster.size
    dev = p.assign
    cross = dev[g.src] != dev[g.dst]
    prod = g.src[cross]
    recv = dev[g.dst[cross]]
    out_prod = np.unique(prod)
    in_pairs = unique_pairs(prod, recv)
    res = []
    for producers, devices in ((in_pairs[:, 0], in_pairs[:, 1]), (out_prod, dev[out_prod])):
        for backward in (False, True):
            mask = g.backward[producers] == backward
            weights = np.ones(int(mask.sum())) if counts else g.out_bytes[producers[mask]]
            res.append(np.bincount(devices[mask], weights=weights, minlength=D))
    in_fw, in_bw, out_fw, out_bw = res
    return in_fw, in_bw, out_fw, out_bw


def link_loads(p: Placement) -> tuple[LinkCost, ...]:
    """Per link of the cluster (none without links), the time it spends moving one sample's tensors.

    A tensor ``u`` read on device ``d != dev(u)`` crosses every link of the route ``dev(u) -> d``
    (:attr:`Cluster.route_links <placement_dsl.cluster.Cluster.route_links>`) once, loading each link with
    ``out_bytes(u) / bandwidth``, in the pass of its producer. A replicated placement (Tarnawski App. C.2) spreads
    each tensor's samples over its replicas' routes and all-reduces a stage's parameters over the links between its
    replicas (:func:`~placement_dsl.replication.replica_link_loads`).
    """
    g, c = p.graph, p.cluster
    if not c.links:
        return ()
    dev = p.assign
    cross = dev[g.src] != dev[g.dst]
    fw, bw = replica_link_loads(g, c, dev, p.replica_sets)[:2] if p.replicated else np.zeros((2, len(c.links)))
    if cross.any() and not p.replicated:
        pairs = unique_pairs(g.src[cross], dev[g.dst[cross]])
        u, d = pairs[:, 0], pairs[:, 1]
        key, D = dev[u] * c.size + d, c.size
        for side, mask in ((fw, ~g.backward[u]), (bw, g.backward[u])):  # bytes per ordered device pair, then links
            per_pair = np.bincount(key[mask], weights=g.out_bytes[u[mask]], minlength=D * D)
            for pair in np.flatnonzero(per_pair > 0).tolist():
                for k in c.route_links[pair // D][pair % D] or ():
                    side[k] += per_pair[pair] / c.links[k].bandwidth
    return tuple(LinkCost(f"{lk.src}->{lk.dst}", float(fw[k]), float(bw[k])) for k, lk in enumerate(c.links))


def unrouted(p: Placement) -> list[Violation]:
    """Tensors read on a device that no chain of links reaches from their producer's (a cluster with links): they
    cannot move, and :func:`link_loads` prices no link for them (the single-sample schedules see them as endless)."""
    g, c = p.graph, p.cluster
    if not c.links:
        return []
    if p.replicated:  # each replica pair's route, and the all-reduce's between the replicas
        return [Violation("allowed", f"{what} has no route from device {c.names[a]!r} to {c.names[b]!r}", essential=True)
                for what, a, b in replica_link_loads(g, c, p.assign, p.replica_sets)[2][:10]]
    dev, out = p.assign, []
    for u, v in zip(g.src.tolist(), g.dst.tolist()):
        if dev[u] != dev[v] and g.out_bytes[u] > 0 and c.route_links[dev[u]][dev[v]] is None and len(out) < 10:
            out.append(Violation("allowed", f"op {g.names[u]!r}'s output has no route from device "
                                            f"{c.names[dev[u]]!r} to {c.names[dev[v]]!r}", essential=True))
    return out


def _combine(overlap: Overlap, compute: np.ndarray, tin: np.ndarray, tout: np.ndarray, extra: np.ndarray) -> np.ndarray:
    if overlap is Overlap.NONE:
        return compute + tin + tout + extra
    if overlap is Overlap.HALF:
        return np.maximum(compute, tin + tout + extra)
    return np.maximum(np.maximum(compute, tin), tout + extra)


combine_loads = _combine  # how a device's compute and transfers add up under its overlap


def device_costs(p: Placement, model: CostModel) -> tuple[DeviceCost, ...]:
    g, c = p.graph, p.cluster
    D = c.size
    times = p.op_times
    with np.errstate(invalid="ignore"):
        comp_fw = np.bincount(p.assign, weights=np.where(g.backward, 0.0, times), minlength=D)
        comp_bw = np.bincount(p.assign, weights=np.where(g.backward, times, 0.0), minlength=D)
    owner = replica_owner(p.replica_sets)
    bytes_in_fw, *other = transfer_terms(p)
    if c.routed:  # hierarchical cluster: each transfer over its route (Tarnawski App. C.3)
        in_fw, in_bw, out_fw, out_bw = routed_transfers(g, c, p.assign, p.replica_sets)
    else:
        in_fw, in_bw, out_fw, out_bw = (t * c.transfer_scale[owner] for t in (bytes_in_fw, *other))
    if model.message_latency:  # a fixed time per tensor on each side that pays its bytes (none on hosts)
        paid = np.where(c.host, 0.0, model.message_latency)[owner]
        in_fw, in_bw, out_fw, out_bw = (t + n * paid for t, n in zip((in_fw, in_bw, out_fw, out_bw),
                                                                     transfer_terms(p, counts=True)))
    if model.training_memory is not None and model.name in ORDERS and model.microbatches is not None:
        mem = _rank_order_memory(p, model, bytes_in_fw)
    elif model.training_memory is not None:
        mem = training_memory(p, model.training_memory, p.replica_sets, bytes_in_fw)
    else:
        mem = np.bincount(p.assign, weights=g.param_bytes + g.activation_bytes, minlength=D)[owner]
    if model.memory is MemoryMode.OVERFLOW:
        overflow = np.where(c.host, 0.0, np.maximum(mem - c.memory, 0.0) / c.bandwidth)
    else:
        overflow = np.zeros(D)
    zero = np.zeros(D)
    load_fw = _combine(model.overlap, comp_fw, in_fw, out_fw, overflow)
    load_bw = _combine(model.overlap, comp_bw, in_bw, out_bw, zero)
    load = _combine(model.overlap, comp_fw + comp_bw, in_fw + in_bw, out_fw + out_bw, overflow)
    if model.task_overhead:  # per pass of a sample on a device that runs ops of that pass
        task_fw = model.task_overhead * (np.bincount(p.assign, weights=~g.backward, minlength=D) > 0)[owner]
        task_bw = model.task_overhead * (np.bincount(p.assign, weights=g.backward, minlength=D) > 0)[owner]
        load_fw, load_bw, load = load_fw + task_fw, load_bw + task_bw, load + task_fw + task_bw
    r = p.replicas.astype(float)[owner]
    sync = sync_times(c, p.replica_sets, np.bincount(p.assign, weights=g.param_bytes, minlength=D))[owner]
    if p.replicated:  # App. C.2: per-sample load on each replica; replica devices mirror their stage's row
        comp_fw, comp_bw, in_fw, in_bw, out_fw, out_bw = (x[owner] for x in (comp_fw, comp_bw, in_fw, in_bw,
                                                                              out_fw, out_bw))
        load_fw, load_bw, load = (x[owner] for x in (load_fw, load_bw, load))
        load_fw = load_fw / r
        load_bw = replicated(model.overlap.value, load_bw, sync, r)
        load = replicated(model.overlap.value, load, sync, r)
    counts = np.bincount(p.assign, minlength=D)
    return tuple(
        DeviceCost(
            device=d.name, kind=d.kind, ops=int(counts[i]),
            compute_fw=float(comp_fw[i]), compute_bw=float(comp_bw[i]),
            in_fw=float(in_fw[i]), in_bw=float(in_bw[i]), out_fw=float(out_fw[i]), out_bw=float(out_bw[i]),
            overflow=float(overflow[i]), memory_used=float(mem[i]), memory_capacity=d.memory,
            load_fw=float(load_fw[i]), load_bw=float(load_bw[i]), load=float(load[i]),
            replicas=int(r[i]), sync=float(sync[i]),
        )
        for i, d in enumerate(c.devices)
    )


# ---------------------------------------------------------------------------- validity
def _violations(p: Placement, model: CostModel, rows: tuple[DeviceCost, ...]) -> list[Violation]:
    g, c = p.graph, p.cluster
    out: list[Violation] = []
    times = p.op_times
    pins = g.pinned
    for i in np.flatnonzero(~np.isfinite(times))[:10]:
        d = c.devices[p.assign[i]]
        why = f"pinned to {pins[i]!r}" if i in pins and pins[i] != d.name else f"kind {d.kind!r}"
        out.append(Violation("allowed", f"op {g.names[i]!r} cannot run on device {d.name!r} ({why})"))
    if model.memory is MemoryMode.HARD:
        for r in rows:
            if r.memory_used > r.memory_capacity * (1 + REL_TOL):
                out.append(Violation("memory", f"device {r.device!r}: ops need {r.memory_used:.6g} > "
                                               f"{r.memory_capacity:.6g} capacity"))
    for grp in g.groups:
        devs = np.unique(p.assign[grp])
        if devs.size > 1:
            out.append(Violation("colocation", f"group {g.ops[grp[0]].group!r} is split over devices "
                                               f"{[c.names[d] for d in devs]}"))
    out.extend(contiguity_violations(p))
    out.extend(order_violations(p))
    return out


# ---------------------------------------------------------------------------- latency
def invocation_latency(p: Placement, model: CostModel | None = None
                       ) -> tuple[float, dict[str, float], dict[str, int], list[Violation]]:
    """Single-sample latency in Tarnawski's invocation model (§4, §4.1; :func:`.invocation.invocations`).

    Returns the latency, each op's finish time, the number of contiguous subgraphs (invocations) on each
    accelerator, and the violations: invocations that wait on each other (no order exists, latency ``inf``), or an
    accelerator needing more subgraphs than ``model.max_subgraphs`` (Fig. 4's ``q``).
    """
    s = invocations(p, Congestion.NONE if model is None else model.congestion)
    c, g = p.cluster, p.graph
    subgraphs = {c.names[d]: int(s.subgraphs[d]) for d in np.flatnonzero(~c.host)}
    out = []
    if s.waiting:
        out.append(Violation("contiguous", f"no invocation order exists: {s.waiting} of {s.invocations} invocations "
                                           f"wait on each other, e.g. the cycle {' -> '.join(s.blocked)}",
                             essential=True))
        return math.inf, {}, subgraphs, out
    if c.links and not math.isfinite(s.latency):  # a tensor between devices no chain of links joins
        prod, recv, tdur = transfer_tasks(p)
        for k in np.flatnonzero(~np.isfinite(tdur))[:10]:
            out.append(Violation("allowed", f"op {g.names[prod[k]]!r}'s output has no route from device "
                                            f"{c.names[p.assign[prod[k]]]!r} to {c.names[recv[k]]!r}", essential=True))
    q = None if model is None else model.max_subgraphs
    for name, k in subgraphs.items():
        if q is not None and k > q:
            out.append(Violation("contiguous", f"device {name!r} needs {k} contiguous subgraphs, more than the "
                                               f"{q} per accelerator allowed (max_subgraphs)", essential=True))
    return s.latency, {g.names[i]: float(s.finish[i]) for i in range(g.n)}, subgraphs, out


def execution(cluster: Cluster) -> str:
    """How the single-sample schedule model runs ``cluster``'s devices: ``"invocations"`` when every device
    either runs invocations or is parallel (Tarnawski's restriction), ``"ops"`` when every one either runs one
    op at a time or is parallel (MOIRAI's general case); see :attr:`Cluster.invocation <placement_dsl.cluster.Cluster.invocation>`.

    Raises :class:`SpecError` for a cluster mixing invocation devices and one-op-at-a-time devices.
    """
    inv, serial = cluster.invocation, ~cluster.invocation & ~cluster.parallel
    if inv.any() and serial.any():
        names = [cluster.names[d] for d in np.flatnonzero(inv)][:3], [cluster.names[d] for d in np.flatnonzero(serial)][:3]
        raise SpecError(f"cluster: devices {names[0]} run invocations (invocations=True) and devices {names[1]} run "
                        "one op at a time; the single-sample model takes one or the other: set every non-host "
                        "device's invocations flag alike")
    return "ops" if serial.any() else "invocations"


def single_sample(p: Placement, model: CostModel | None = None
                  ) -> tuple[float, dict[str, float], dict[str, int], list[Violation]]:
    """Single-sample latency of one input: the one referee of the ``latency`` and ``makespan`` objectives.

    One schedule model: every op gets a device and a start time, a tensor crossing devices is a transfer task after
    its producer ends (over its route under ``model.congestion`` on a cluster with links; through host memory
    otherwise), a device that is not parallel runs one thing at a time, and the latency is the last finish. Two
    kinds of devices (:func:`execution`):

    * one op at a time (MOIRAI §III, eq. 4-8; the general case): the placement's own schedule is checked
      (:func:`~placement_dsl.schedule.check_schedule`), else list scheduling's is scored;
    * invocations (Tarnawski §4, the restriction): an accelerator runs each contiguous subgraph of its ops as one
      invocation that reads its inputs, computes and writes its outputs (reads and writes are the transfers, at its
      bandwidth, on a cluster without links), subgraphs in turn. The schedule is then fixed by the placement (every
      invocation as early as its inputs allow; :func:`invocation_latency`), so a placement's attached schedule is
      not consulted.

    Parallel (host) devices run every op as soon as its inputs are ready in both. Returns the latency, each op's
    finish (invocations) , the subgraphs per accelerator and the violations; ``model.max_subgraphs`` caps the
    subgraphs of an accelerator in both (Tarnawski Fig. 4's ``q``).
    """
    model = CostModel.named("latency") if model is None else model
    if execution(p.cluster) == "invocations":
        latency, finish, subgraphs, out = invocation_latency(p, model)
        g, c = p.graph, p.cluster
        times = p.op_times
        out += [Violation("schedule", f"op {g.names[i]!r} cannot run on device {c.names[p.assign[i]]!r} "
                                      f"(kind {c.devices[p.assign[i]].kind!r})")
                for i in np.flatnonzero(~np.isfinite(times))[:10]]  # no schedule exists, as in the general case
        return latency, finish, subgraphs, out
    latency, problems = schedule_makespan(p, model.congestion)
    out = [Violation("schedule", msg) for msg in problems]
    q = model.max_subgraphs
    if q is not None:
        levels = subgraph_levels(p)
        for d in np.flatnonzero(~p.cluster.host):
            k = int(levels[p.assign == d].max(initial=0))
            if k > q:
                out.append(Violation("contiguous", f"device {p.cluster.names[d]!r} needs {k} contiguous subgraphs, "
                                                   f"more than the {q} per accelerator allowed (max_subgraphs)",
                                     essential=True))
    return latency, {}, {}, out


def _rank_order_memory(p: Placement, model: CostModel, in_fw_bytes: np.ndarray) -> np.ndarray:
    """Memory per schedule under torch's interleaved / zero-bubble orders: each virtual stage's micro-batches in
    flight along its rank's order (:func:`placement_dsl.stage_schedules.stage_memory`); a placement those orders
    cannot run keeps the spec's own count (its objective reports why)."""
    try:
        return stage_memory(p, str(model.name), int(model.microbatches), model.training_memory)
    except SpecError:
        return training_memory(p, model.training_memory, p.replica_sets, in_fw_bytes)


def _rank_order_objective(p: Placement, model: CostModel, violations: list[Violation]) -> float:
    """``interleaved-1f1b`` / ``zb-h1``: the time per sample of the ranks' orders over ``microbatches``
    (:func:`placement_dsl.pipeline_orders.order_makespan`), or the steady state ``max_d (FW_d + BW_d)`` without;
    a placement whose virtual stages the schedule cannot run (not round-robin, a cycle) has none."""
    try:
        times = stage_times(p, device_costs, model, schedule=str(model.name))
        ranks = max(times.rank) + 1
        check_round_robin(times, ranks, str(model.name), model.virtual)
        if model.microbatches is None:  # the orders' limit: a rank's stages' tasks (two devices under ZBV's fold)
            return steady_state(times)
        orders = rank_orders(model.name, ranks, times.stages // ranks, int(model.microbatches))
    except SpecError as err:
        violations.append(Violation("schedule", f"{model.name}: {err}", essential=True))
        return math.inf
    return order_makespan(times, orders) / model.microbatches


# ---------------------------------------------------------------------------- entry point
def evaluate(placement: Placement, model: CostModel | str | None = None) -> Evaluation:
    """Score a placement: objective, validity (each violation named) and the per-device table.

    Examples
    --------
    >>> from placement_dsl.graph import Graph, Op
    >>> from placement_dsl.cluster import Cluster
    >>> g = Graph([Op(name="a", work=1, out_bytes=2), Op(name="b", work=3)], [("a", "b")])
    >>> p = Placement(g, Cluster.stages(2), [0, 1])
    >>> evaluate(p).objective  # stage1: reads a's tensor (2) + works 3
    5.0
    """
    if model is None:
        model = CostModel()
    elif isinstance(model, str):
        model = CostModel.named(model)
    rows = device_costs(placement, model)
    violations = _violations(placement, model, rows)
    latency, finish, subgraphs = None, {}, {}
    pipelined = model.objective in (Objective.MAX_LOAD, Objective.GPIPE)
    links = link_loads(placement) if pipelined else ()
    violations += unrouted(placement) if pipelined else []  # the single-sample schedules name them themselves
    if model.objective is Objective.MAX_LOAD and model.chained_stages:
        objective = _rank_order_objective(placement, model, violations)
    elif model.objective is Objective.MAX_LOAD:
        objective = max([r.load for r in rows] + [lk.load for lk in links])
    elif model.chained_stages:  # GPipe's fill and drain
        cycle = pass_cycle(placement)
        if cycle:
            objective = math.inf
            violations.append(Violation("acyclic", "GPipe fill and drain: no schedule exists, the device passes "
                                                   f"form the cycle {' -> '.join(cycle)}", essential=True))
        else:
            objective = gpipe_time_per_sample(placement, np.array([r.load_fw for r in rows]),
                                              np.array([r.load_bw for r in rows]), model.microbatches, links)
    elif model.objective is Objective.GPIPE:
        objective = max([r.load_fw for r in rows] + [lk.load_fw for lk in links]) + \
            max([r.load_bw for r in rows] + [lk.load_bw for lk in links])
    else:  # latency and makespan: one single-sample schedule model, one referee
        latency, finish, subgraphs, problems = single_sample(placement, model)
        objective = latency
        violations.extend(problems)
    valid = not any(v.counts(model.require) for v in violations)
    return Evaluation(objective=float(objective), valid=valid, model=model, devices=rows,
                      violations=tuple(violations), latency=latency, finish_times=finish, subgraphs=subgraphs,
                      links=links)
