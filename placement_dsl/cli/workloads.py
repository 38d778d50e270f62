"""Command-line helpers: messages, reading and reconfiguring workloads, the cost model, memory feasibility."""
from __future__ import annotations

import argparse
import gc
import sys
from dataclasses import replace
from typing import Any

import numpy as np

from .. import presets
from ..boundaries import Boundaries
from ..cluster import CPU, Cluster, Device
from ..errors import InfeasibleError, SpecError
from ..evaluate import REL_TOL, CostModel, MemoryMode
from ..heuristics import jit
from ..io import Workload
from ..io.common import dumps_strict
from ..io.module_calls import check_recorded
from ..pipeline_orders import ORDERS
from ..presets import resize
from ..report import human_bytes
from .common import EXIT_ERROR, TRAINING_OBJECTIVES, note
from .schedules import congestion_fields, objective_name
from .training import SCHEDULE_OBJECTIVE, hierarchical, schedule_objective, training_model


# ---------------------------------------------------------------------------- messages
def one_line(text: str) -> str:
    """``text`` on one line: line breaks become ``; ``."""
    return "; ".join(part.strip() for part in str(text).splitlines() if part.strip())


def emit(args: argparse.Namespace, payload: dict[str, Any], text: str) -> None:
    """Print the command's answer: one strict JSON object with ``--json``, else ``text``."""
    print(dumps_strict(payload) if getattr(args, "json", False) else text)


def emit_unsaved(payload: dict[str, Any], err: Exception) -> int:
    """A computed answer whose file could not be written: the answer as JSON on stdout (so that it is
    not lost), the error on stderr, exit status 2."""
    print(dumps_strict(payload))
    print(f"error: {one_line(str(err))}; the answer is on standard output", file=sys.stderr)
    return EXIT_ERROR


# ---------------------------------------------------------------------------- workloads
def read_workload(spec: str, fmt: str | None = None, stages: int | None = None, training: bool = False) -> Workload:
    """:func:`placement_dsl.presets.read_workload` with its notes on stderr."""
    return presets.read_workload(spec, fmt, stages, training, note=note)


def check_stages(k: int, ops: int, replicated: bool = False) -> None:
    """Refuse ``--stages K`` with more stages than ops: the extra stages stay empty, and the formulations
    and the DP would only grow with them. Replicated stages (``--replicate``) may use the extra devices."""
    if k > ops and not replicated:
        raise SpecError(f"--stages {k}: the graph has only {ops} op{'s' if ops != 1 else ''}, so at most {ops} "
                        f"stages can hold one; give --stages {ops} or fewer (or --replicate R to run a stage on "
                        "several devices)")


def reconfigure(cluster: Cluster, memory: float | None = None, bandwidth: float | None = None,
                cpus: int | None = None) -> Cluster:
    """The cluster with accelerator ``memory``, every device's ``bandwidth`` and ``cpus`` host CPUs, where given.

    Existing host devices are kept up to ``cpus`` and new ones named ``cpu0, cpu1, ...``;
    links whose ends remain are kept, and so are declared routes whose devices all remain.
    """
    devices = [_updated(d, memory, bandwidth) for d in cluster.devices]
    if cpus is not None:
        accs, hosts = [d for d in devices if not d.host], [d for d in devices if d.host][:cpus]
        taken = {d.name for d in accs + hosts}
        names = (f"cpu{i}" for i in range(len(devices) + cpus + 1) if f"cpu{i}" not in taken)
        template = {"bandwidth": devices[0].bandwidth}
        hosts += [Device(name=next(names), kind=CPU, **template) for _ in range(cpus - len(hosts))]
        devices = accs + hosts
    kept = {d.name for d in devices}
    return Cluster(devices, [lk for lk in cluster.links if lk.src in kept and lk.dst in kept],
                   [r for r in cluster.routes if set(r.path) <= kept])


def _updated(device: Device, memory: float | None, bandwidth: float | None) -> Device:
    """``device`` with the given memory (accelerators only) and bandwidth, validated."""
    update: dict[str, float] = {}
    if memory is not None and not device.host:
        update["memory"] = memory
    if bandwidth is not None:
        update["bandwidth"] = bandwidth
    return Device(**{**device.model_dump(), **update}) if update else device


def boundaries_arg(text: str) -> int:
    """``--boundaries module[:DEPTH]`` as the module depth (1 for ``module``), else an argparse error."""
    kind, _, depth = text.partition(":")
    if kind != "module" or (depth and (not depth.isdigit() or int(depth) < 1)):
        raise argparse.ArgumentTypeError(f"--boundaries must be module or module:DEPTH with DEPTH >= 1, got {text!r}")
    return int(depth) if depth else 1


def with_boundaries(args: argparse.Namespace, w: Workload) -> Workload:
    """The workload with ``--boundaries`` folded into its colocation groups (unchanged without it)."""
    depth = getattr(args, "boundaries", None)
    if depth is None:
        return w
    recorded(w, getattr(args, "workload", "workload"))
    term = Boundaries.modules(depth)
    term.validate(w.graph, w.cluster)
    return Workload(term.apply(w.graph, w.cluster), w.cluster, w.format, {**w.meta, "boundaries": depth})


def recorded(w: Workload, spec: str) -> None:
    """Refuse a workload imported before the record of modules called several times, which module boundaries and
    exports read (:func:`placement_dsl.io.module_calls.check_recorded`)."""
    check_recorded(w.graph.ops, w.meta, spec)


def workload_from_args(args: argparse.Namespace, spec: str | None = None) -> Workload:
    """The command's workload: read (``--format``, ``--training``), resized (``--stages``) and
    with the cluster options (``--memory``, ``--bandwidth``, ``--cpus``) applied; refused, naming the op, when one
    runs on no device of the resulting cluster (:meth:`Workload.check_runnable`), whatever the command and method."""
    stages = getattr(args, "stages", None)
    spec = spec or args.workload
    w = read_workload(spec, args.format, None, getattr(args, "training", False))
    read = w.cluster
    if getattr(args, "own_process", False):  # the workload lives as long as the process: later collections (a forked
        gc.freeze()  # child's too, copying every page they touch) no longer walk its records (20,000 ops: 0.09 s of a
        # host-share bound's 0.46); not in a caller's process (a test's), whose collector is its own
    jit.note_workload(w.graph.n)  # a small graph's kernels run in Python: loading numba would cost more
    if stages is not None:
        check_stages(stages, w.graph.n, replicated=getattr(args, "replicate", None) is not None)
        w = Workload(w.graph, resize(w.cluster, stages), w.format, w.meta)
    options = {k: getattr(args, k, None) for k in ("memory", "bandwidth", "cpus")}
    if any(v is not None for v in options.values()):
        given = {k: v for k, v in options.items() if v is not None}
        w = Workload(w.graph, reconfigure(w.cluster, **options), w.format, {**w.meta, **given})
    servers = hierarchical(args, w.cluster)
    w = w if servers is None else Workload(w.graph, servers, w.format, {**w.meta, "servers": args.servers})
    changed = [f"--{k}" for k in ("stages", "cpus", "servers") if getattr(args, k, None) is not None]
    presets.timed_devices(w, read, "/".join(changed) or "the cluster options")
    try:
        w.check_runnable()
    except SpecError as err:
        raise SpecError(f"{spec!r}: {err}") from None
    return with_boundaries(args, w)


def cost_model(args: argparse.Namespace, workload: Workload) -> CostModel:
    """The cost model of ``--objective`` (default: the workload's), refusing a training objective
    on a forward-only graph."""
    name = objective_name(workload, schedule_objective(args, args.objective) or workload.meta.get("objective",
                                                                                                   "throughput"))
    if name in TRAINING_OBJECTIVES and not workload.graph.is_training:
        raise SpecError(f"objective {name!r} scores the forward and backward passes of a training graph, but "
                        f"graph {workload.graph.name!r} is forward-only; pass --training to add its backward pass, "
                        "or use --objective throughput or latency")
    model = training_model(args, CostModel.named(name, overlap=getattr(args, "overlap", "none") or "none",
                                                 **congestion_fields(args, name)))
    q = getattr(args, "subgraphs", None)
    if q is not None:
        if model.objective.value != "latency":
            raise SpecError(f"--subgraphs {q} limits the subgraphs per accelerator of a latency split; the objective "
                            f"is {name!r} (use --objective latency)")
        model = replace(model, max_subgraphs=q)
    return with_stage_time(model, workload)


def with_stage_time(model: CostModel, workload: Workload) -> CostModel:
    """``model`` with the fixed time per stage pass a calibrated import recorded (``meta["task_overhead"]``, ms: a
    pipeline runtime's cost per stage and micro-batch beyond its ops', ``import --calibration``), under the
    throughput objectives, whose searches price it; refused naming the field when it is no finite number >= 0, and
    under an objective of another schedule than the one whose compute factor the import applied (``import
    --schedule``, ``meta["calibration_schedule"]``)."""
    ran = workload.meta.get("calibration_schedule")
    runs = {v: k for k, v in SCHEDULE_OBJECTIVE.items()}.get(model.name, model.name if model.name in ORDERS else None)
    if ran is not None and runs is not None and ran != runs:
        raise SpecError(f"workload {workload.graph.name!r} is calibrated for schedule {ran!r} (import --schedule), "
                        f"but objective {model.name!r} runs {runs!r}: import it again with --schedule {runs}")
    t = workload.meta.get("task_overhead")
    if t is None or model.objective.value in ("latency", "makespan"):
        return model
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < float("inf"):
        raise SpecError(f"workload {workload.graph.name!r}: meta field 'task_overhead' must be a finite number >= 0 "
                        f"(ms per stage pass), got {t!r}")
    return replace(model, task_overhead=float(t))


# ---------------------------------------------------------------------------- memory feasibility
def _unit_needs(w: Workload) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per colocation unit (an op, or a group that must share a device): bytes, largest capacity
    of a device every member may run on, and that device's index (-1 if none)."""
    g, c = w.graph, w.cluster
    _, unit = np.unique(g.group_id, return_inverse=True)
    need = np.bincount(unit, weights=g.param_bytes + g.activation_bytes)
    blocked = np.zeros((need.size, c.size), dtype=bool)
    np.logical_or.at(blocked, unit, ~np.isfinite(c.times(g)))
    capacity = np.where(blocked, -np.inf, c.memory[None, :])
    best = np.argmax(capacity, axis=1)
    has = ~blocked.all(axis=1)
    return need, np.where(has, capacity[np.arange(need.size), best], np.nan), np.where(has, best, -1)


def _unit_name(w: Workload, unit: int) -> str:
    g = w.graph
    _, inverse = np.unique(g.group_id, return_inverse=True)
    members = np.flatnonzero(inverse == unit)
    if members.size == 1:
        return f"op {g.names[members[0]]!r}"
    shown = ", ".join(repr(g.names[i]) for i in members[:3]) + (", ..." if members.size > 3 else "")
    return f"colocation group {g.ops[members[0]].group!r} ({members.size} ops: {shown})"


def check_memory(w: Workload, model: CostModel) -> None:
    """Raise :class:`InfeasibleError` when hard memory cannot hold the ops, naming the op (or group).

    Two necessary conditions: every op (colocation group) fits on some device it may run on,
    and the ops' total bytes fit in the devices' total capacity.
    """
    if model.memory is not MemoryMode.HARD:
        return
    need, capacity, device = _unit_needs(w)
    over = np.flatnonzero((device >= 0) & (need > capacity * (1 + REL_TOL)))
    fix = "give more memory (--memory BYTES) or let memory overflow (--objective bottleneck)"
    if over.size:
        u = over[np.argmax(need[over])]
        more = f" ({over.size - 1} more do not fit either)" if over.size > 1 else ""
        raise InfeasibleError(
            f"{_unit_name(w, u)} needs {need[u]:.6g} bytes ({human_bytes(need[u])}) but the largest device it can "
            f"run on, {w.cluster.names[device[u]]!r}, holds {capacity[u]:.6g} bytes ({human_bytes(capacity[u])})"
            f"{more}; {fix}")
    total, room = float(need.sum()), float(w.cluster.memory.sum())
    if total > room * (1 + REL_TOL):
        raise InfeasibleError(f"the ops need {total:.6g} bytes ({human_bytes(total)}) in total but the "
                              f"{w.cluster.size} devices hold {room:.6g} bytes ({human_bytes(room)}); "
                              f"add devices (--stages) or {fix}")


def memory_summary(w: Workload) -> str:
    """Largest op (unit) bytes against largest device capacity, for messages about infeasibility."""
    need, _, _ = _unit_needs(w)
    if not need.size:
        return "the graph has no ops"
    u = int(np.argmax(need))
    d = int(np.argmax(w.cluster.memory))
    return (f"largest: {_unit_name(w, u)} with {human_bytes(need[u])}, device {w.cluster.names[d]!r} with "
            f"{human_bytes(w.cluster.memory[d])}; total {human_bytes(need.sum())} of {human_bytes(w.cluster.memory.sum())}")


