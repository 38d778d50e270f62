"""Superblock templates: Archer et al. §3.2-3.3 (ICML 2024), models whose size does not grow with ``k``.

A DAG-ordered partition of ``V`` into ``k`` identical stages is viewed as three
*superblocks* in pipeline order: ``first`` (the blocks before a chosen block), ``middle``
(the chosen block) and ``last`` (the blocks after it). :class:`Superblocks` narrows the
context to these three devices and builds Archer's ``y`` variables over them (Fig. 3 with
``k = 3``); the tensor-cut, overflow and load templates then cost each superblock as if it
were one block: node work, tensors entering it from an earlier superblock or leaving it
for a later one (each tensor once), and overflow beyond the superblock's combined capacity.
:class:`SuperblockLoad` is the objective.

Only identical stages qualify (every device of the same kind, speed, bandwidth and memory,
no host devices), as in the paper; pins name devices that no longer exist and are refused (``check``).

Tarnawski et al.'s throughput setting (NeurIPS 2020, §5.1: ``k`` identical accelerators and
``l`` CPUs, which pay no transfers) uses :class:`HostSuperblocks`: the three superblocks
merge the accelerators only, and every CPU stays a device of its own. Its assignment is
one-hot with no order, so it relaxes *every* placement (see the class).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cluster import Cluster, Device
from ..errors import SpecError
from .assignment import Assignment, OrderedAssignment
from .base import BlockTemplate, BottleneckLink, Context, LoadLink, Stage, TransferLink, Warm, register
from .lazy import pyo

if TYPE_CHECKING:
    from ..problem import Problem

NAMES = ("first", "middle", "last")


def _mixed(devices: list[Device]) -> dict[str, list[str]]:
    """The fields in which ``devices`` differ, each with its values."""
    fields = {name: {getattr(d, name) for d in devices} for name in ("kind", "speed", "memory", "bandwidth")}
    return {k: sorted(map(str, v)) for k, v in fields.items() if len(v) > 1}


def stages_of(cluster: Cluster) -> int:
    """``k`` when ``cluster`` is ``k`` identical stages, else :class:`SpecError` saying why."""
    devs = cluster.devices
    if any(d.host for d in devs):
        raise SpecError(f"superblock relaxations need identical pipeline stages; {cluster!r} has host devices "
                        "(drop them, or use the exact formulation)")
    mixed = _mixed(devs)
    if mixed:
        raise SpecError(f"superblock relaxations need identical pipeline stages; {cluster!r} mixes {mixed} "
                        "(use Cluster.stages(k, ...), or the exact formulation)")
    return cluster.size


def accelerators_of(cluster: Cluster) -> tuple[list[int], list[int]]:
    """``(accelerators, hosts)`` device indices when the non-host devices are identical, else :class:`SpecError`.

    Host devices (CPUs) may differ from one another: each keeps its own column.
    """
    devs = cluster.devices
    acc = [i for i, d in enumerate(devs) if not d.host]
    hosts = [i for i, d in enumerate(devs) if d.host]
    if not acc:
        raise SpecError(f"superblock relaxations merge accelerators; {cluster!r} has none")
    mixed = _mixed([devs[i] for i in acc])
    if mixed:
        raise SpecError(f"superblock relaxations need identical accelerators; {cluster!r} mixes {mixed} "
                        "(use Cluster.accelerators(k, cpus=l), or the exact formulation)")
    return acc, hosts


def lemma33(ctx: Context) -> float:
    """Lemma 3.3 in model units: ``L = max(max_v work(v), sum_v work(v) / k)`` (identical stages)."""
    w = ctx.work[:, 0]
    return float(max(w.max(initial=0.0), w.sum() / ctx.cluster.size))


def _no_pins(problem: Problem, merged: str) -> None:
    pinned = sorted(problem.pins)
    if pinned:
        raise SpecError(f"superblock relaxations cannot keep Pin terms (pins name {merged} that are merged; pinned: "
                        f"{', '.join(map(repr, pinned))}); drop the pins or use the exact formulation")


def _narrow(ctx: Context, capacity: tuple[float, float, float]) -> None:
    """Make ``ctx`` describe the three superblocks (columns of stage 0; ``capacity`` in model units)."""
    template = ctx.cluster.devices[0]
    ctx.cluster = Cluster([template.model_copy(update={"name": n}) for n in NAMES], ())
    ctx.D, ctx.devices = 3, NAMES
    for attr in ("allowed", "work", "comm", "unit_allowed"):
        setattr(ctx, attr, np.repeat(getattr(ctx, attr)[:, :1], 3, axis=1))
    ctx.overflow_rate = np.repeat(ctx.overflow_rate[:1], 3)
    ctx.capacity = np.asarray(capacity, dtype=float)


@register
class Superblocks(OrderedAssignment):
    """Three superblocks in DAG order with ``sum_v work(v) x_{v,middle} >= L`` (Archer eq. 14).

    ``blocks = (before, after)`` are the numbers of stages merged into ``first`` and ``last``
    (``None``: any number, §3.2). A superblock of ``s`` stages has ``s`` times a stage's memory;
    a superblock of 0 stages is empty (§3.3: ``j = 1`` forces ``x_{v1} = 0``, ``j = k`` forces
    ``x_{v3} = 0``).
    """

    name = "superblocks"

    def __init__(self, blocks: tuple[int | None, int | None] = (None, None)):
        self.blocks = blocks

    def __repr__(self) -> str:
        return f"Superblocks(blocks={self.blocks})"

    def check(self, problem: Problem) -> None:
        _no_pins(problem, "stages")

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        k = stages_of(ctx.cluster)
        if any(s is not None and s >= k for s in self.blocks):
            raise SpecError(f"Superblocks(blocks={self.blocks}): at most k - 1 = {k - 1} stages fit beside the "
                            "middle block")
        floor = lemma33(ctx)
        stage = float(ctx.capacity[0])
        _narrow(ctx, tuple(np.inf if s is None or (s and np.isinf(stage)) else s * stage
                           for s in (self.blocks[0], 1, self.blocks[1])))
        super().build(blk, ctx)
        busy = [v for v in range(ctx.n) if ctx.work[v, 1] > 0]  # none: L = 0 and the row is void
        blk.work_floor = pyo.Constraint(
            expr=sum(float(ctx.work[v, 1]) * ctx.x(v, 1) for v in busy) >= floor if busy else pyo.Constraint.Skip,
            doc="the middle block holds at least Lemma 3.3's L units of work (eq. 14)")
        empty = [NAMES[0]] * (self.blocks[0] == 0) + [NAMES[1]] * (self.blocks[1] == 0)
        rows = [(u, b) for u in blk.units for b in empty]
        blk.empty = pyo.Constraint(pyo.Set(dimen=2, initialize=rows),
                                   rule=lambda b, u, d: b.y[u, d] == (0 if d == NAMES[0] else 1),
                                   doc="a superblock of zero stages holds no op (j = 1 or j = k)")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        raise SpecError("superblock models are relaxations: a placement of the k stages does not determine "
                        "their variables; solve them without a warm start")


@register
class HostSuperblocks(Assignment):
    """Three accelerator superblocks and the CPUs, one-hot and unordered (Tarnawski's throughput setting).

    Devices ``first, middle, last`` (each with the accelerators' columns) followed by the
    cluster's host devices, each as itself. ``x_{v,d}`` one-hot over these ``3 + l``
    devices, and, with ``A(v) = x_{v,first} + x_{v,middle} + x_{v,last}`` and ``w`` the
    accelerator work,

    * ``k * sum_v w(v) x_{v,middle} >= sum_v w(v) A(v)`` (the middle holds at least the
      accelerators' average work) and ``sum_u w(u) x_{u,middle} >= w(v) A(v)`` for every ``v``
      (at least any op the accelerators run): Lemma 3.3 restricted to the accelerators; the middle's
      work is one variable, ``middle_work``, so these are ``n`` rows of ``4`` terms, not of ``n``;
    * with ``blocks = (a, b)`` (guess ``j``: ``a = j - 1``, ``b = k - j``): ``first`` and ``last``
      have ``a`` and ``b`` accelerators' memory, each holds at most ``a`` (``b``) times the
      middle's work, and a superblock of zero accelerators is empty. ``blocks = (None, None)``
      (§3.2): sizes free (``0`` when ``k = 1``), memory unbounded.

    Valid for **all** placements: given one, let ``middle`` be its accelerator with the most
    work, put any ``a`` of the other accelerators into ``first`` and the remaining ``b`` into
    ``last``, and leave every CPU's ops on that CPU. Every row above holds (the maximum of
    ``k`` numbers is at least their average, at least each of them, and a sum of ``a`` of them
    is at most ``a`` times the maximum); memory holds device by device, hence for the sums.
    No DAG order is needed, so the order of the accelerators is irrelevant.
    """

    def __init__(self, blocks: tuple[int | None, int | None] = (None, None)):
        self.blocks = blocks

    def __repr__(self) -> str:
        return f"HostSuperblocks(blocks={self.blocks})"

    def check(self, problem: Problem) -> None:
        _no_pins(problem, "accelerators")

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        acc, hosts = accelerators_of(ctx.cluster)
        k = len(acc)
        blocks = (0, 0) if k == 1 and self.blocks == (None, None) else self.blocks
        if any(s is not None and s >= k for s in blocks) or (None not in blocks and sum(blocks) != k - 1):
            raise SpecError(f"HostSuperblocks(blocks={blocks}): first and last hold k - 1 = {k - 1} accelerators")
        stage = float(ctx.capacity[acc[0]])
        cap = [np.inf if s is None or (s and np.isinf(stage)) else s * stage for s in (blocks[0], 1, blocks[1])]
        cols = [acc[0]] * 3 + hosts
        template = ctx.cluster.devices[acc[0]]
        ctx.cluster = Cluster([template.model_copy(update={"name": n}) for n in NAMES]
                              + [ctx.cluster.devices[h] for h in hosts], ())
        ctx.D, ctx.devices = len(cols), ctx.cluster.names
        for attr in ("allowed", "work", "comm", "unit_allowed"):
            setattr(ctx, attr, getattr(ctx, attr)[:, cols])
        ctx.overflow_rate = ctx.overflow_rate[cols]
        ctx.capacity = np.concatenate([cap, ctx.capacity[hosts]]).astype(float)
        super().build(blk, ctx)
        w = ctx.work[:, 0]
        ops = [v for v in range(ctx.n) if w[v] > 0]

        def work(b: int) -> Any:
            return sum(float(w[v]) * ctx.x(v, b) for v in ops)

        # the middle's work once, as a variable: every op's floor reads it (n rows of one term each, not of n terms)
        blk.middle_work = pyo.Var(domain=pyo.NonNegativeReals, doc="sum_v w(v) x_{v,middle}: the middle's work")
        blk.middle_sum = pyo.Constraint(expr=blk.middle_work == work(1) if ops else pyo.Constraint.Skip,
                                        doc="the middle's work is the work of the ops it holds")
        mid = blk.middle_work
        blk.work_floor = pyo.Constraint(expr=k * mid >= work(0) + mid + work(2) if ops else pyo.Constraint.Skip,
                                        doc="the middle holds at least the accelerators' average work")
        blk.op_floor = pyo.Constraint(
            [ctx.ops[v] for v in ops],
            rule=lambda b, v: mid >= float(w[ctx.graph.index[v]]) * sum(ctx.x(ctx.graph.index[v], d) for d in range(3)),
            doc="the middle holds at least the work of any op on an accelerator")
        sized = [(d, s) for d, s in ((0, blocks[0]), (2, blocks[1])) if s is not None]
        blk.work_cap = pyo.Constraint([NAMES[d] for d, s in sized if s > 0 and ops],
                                      rule=lambda b, name: work(NAMES.index(name)) <= dict(sized)[NAMES.index(name)] * mid,
                                      doc="a superblock of s accelerators holds at most s times the middle's work")
        rows = [(ctx.ops[u], NAMES[d]) for u in ctx.units for d, s in sized if s == 0 and ctx.unit_allowed[u, d]]
        blk.empty = pyo.Constraint(pyo.Set(dimen=2, initialize=rows), rule=lambda b, u, d: b.x[u, d] == 0,
                                   doc="a superblock of zero accelerators holds no op")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        raise SpecError("superblock models are relaxations: a placement does not determine their variables; "
                        "solve them without a warm start")


@register
class NoTransfer(BlockTemplate):
    """No tensor-cut cost: ``in = out = 0`` on every device (the "no-cut-io" relaxation of Archer et al.)."""

    name = "tensor_cut"
    stage = Stage.CUT
    provides = (TransferLink,)

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        ctx.provide(TransferLink(lambda d, p, which: 0.0), by=repr(self))

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        return iter(())

    def __repr__(self) -> str:
        return "NoTransfer()"


@register
class SuperblockLoad(BlockTemplate):
    """``minimize bottleneck`` with ``bottleneck >= weight_s * device_cost[s, total, part]`` per superblock ``s``.

    §3.2 uses ``weights = (0, 1, 0)`` (only the middle block is costed); §3.3 with guess ``j``
    uses ``(1/(j-1), 1, 1/(k-j))`` (a zero where the superblock is empty): the worst block of
    a superblock is at least its average, part by part. Any other device (a CPU of
    :class:`HostSuperblocks`) has weight 1: its load is a load of the placement.
    """

    name = "max_load"
    stage = Stage.OBJECTIVE
    provides = (BottleneckLink,)
    needs = (LoadLink,)

    def __init__(self, weights: tuple[float, float, float] = (0.0, 1.0, 0.0)):
        self.weights = weights

    def __repr__(self) -> str:
        return f"SuperblockLoad(weights={self.weights})"

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        load = ctx.link(LoadLink)
        blk.bottleneck = pyo.Var(domain=pyo.NonNegativeReals, doc="the bottleneck the superblocks imply (scaled)")
        weight = {d: 1.0 for d in ctx.devices} | dict(zip(NAMES, self.weights))
        rows = [(s, part) for s in ctx.devices if weight[s] > 0 for part in load.parts]
        blk.bottleneck_bound = pyo.Constraint(
            pyo.Set(dimen=2, initialize=rows),
            rule=lambda b, s, part: b.bottleneck >= weight[s] * load.device_cost[s, "total", part],
            doc="bottleneck is at least the middle block's load and the superblocks' average loads")
        blk.goal = pyo.Objective(expr=blk.bottleneck, sense=pyo.minimize, doc="minimize the implied bottleneck")
        ctx.provide(BottleneckLink(blk.bottleneck), by=repr(self))

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        raise SpecError("superblock models are relaxations; solve them without a warm start")
