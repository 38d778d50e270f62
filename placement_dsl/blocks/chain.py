"""Chain templates: DAG-ordered accelerators with CPUs in the gaps, ancestor cuts and position windows.

The class of placements is that of Tarnawski et al.'s DP over ideals (NeurIPS 2020, §5.1.1,
App. B): the accelerators ``b = 1..k`` (identical, in cluster order) hold the differences of
a chain of ideals of the forward group graph, and each CPU ``j`` sits in a *gap* ``b = 1..k+1``
of that sequence (gap ``b`` is just before accelerator ``b``). Colocation groups ``g`` move as
one (shared assignment units). Notation as in :mod:`placement_dsl.bounds.combinatorial`.

Variables (Archer et al. ICML 2024, Fig. 3, cumulative ``y`` over the accelerator sequence)

* ``Y[g, b]`` binary, ``b = 1..k``: ``g`` lies in *slot* ``<= b`` (slot ``b`` = CPUs in gap ``b``,
  then accelerator ``b``); ``Y[g, 0] = 0`` and ``Y[g, k+1] = 1`` are constants;
* ``xc[g, j, b]`` binary: ``g`` on CPU ``j`` sitting in gap ``b``; ``gamma[j, b]``: CPU ``j`` is in gap ``b``;
* ``xa[g, b] = Y[g, b] - Y[g, b-1] - sum_j xc[g, j, b]`` (an expression): ``g`` on accelerator ``b``.

``ctx.x(v, acc_b) = xa[g(v), b]`` and ``ctx.x(v, cpu_j) = sum_b xc[g(v), j, b]``, so the load,
memory, pin and objective templates apply unchanged.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..constraints import DagOrder
from ..errors import SpecError
from ..structure import ChainData, chain_data
from .base import AssignmentLink, BlockTemplate, BottleneckLink, Context, Link, Stage, Warm, register
from .lazy import pyo
from .transfer import TensorCut

if TYPE_CHECKING:
    from ..problem import Problem


@dataclass(frozen=True)
class CpuGapsLink(Link):
    """The CPU-gap variables of :class:`CpuGaps`: ``xc[g, j, b]`` and ``gamma[j, b]`` over ``groups``, ``cpus``, ``gaps``."""

    xc: Any
    gamma: Any
    groups: Any
    cpus: Any
    gaps: Any


@dataclass(frozen=True)
class ChainLink(Link):
    """The cumulative slots of :class:`ChainAssignment`: ``Y[g, b]`` and ``xa[g, b]`` over ``positions``."""

    Y: Any
    xa: Any
    positions: Any


@dataclass(frozen=True)
class ChainView:
    """The chain data of a context: groups, accelerator positions, CPUs, and the ``tau`` floors.

    ``group_of_unit[u]`` is the group index of assignment unit ``u``; ``acc[b-1]`` is the
    device index of accelerator ``b``; ``cpu[j]`` of CPU ``j``. ``tau`` / ``tau_cpu`` are in
    model units (divided by ``scale.time``).
    """

    data: ChainData
    names: list[str]
    acc: np.ndarray
    cpu: np.ndarray
    tau: np.ndarray
    tau_cpu: np.ndarray

    @property
    def k(self) -> int:
        return len(self.acc)

    @property
    def l(self) -> int:
        return len(self.cpu)


def chain_view(ctx: Context) -> ChainView:
    """The :class:`ChainView` of ``ctx`` (computed once per model); raises when the chain class does not apply."""
    return ctx.view("chain", lambda: _chain_view(ctx))


def _chain_view(ctx: Context) -> ChainView:
    if not ctx.shared:
        raise SpecError("chain formulation: colocation groups must share variables; use Colocate(..., shared=True)")
    data = chain_data(ctx.graph, ctx.cluster)
    tau, tau_cpu = data.tau()
    names = [ctx.ops[u] for u in ctx.units]
    host = ctx.cluster.host
    return ChainView(data, names, np.flatnonzero(~host), np.flatnonzero(host),
                     tau / ctx.scale.time, tau_cpu / ctx.scale.time)


def warm_slots(ctx: Context, assign: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(slot[g], gap[j])`` of a placement: accelerator ``b`` is slot ``b``, CPU ``j`` its gap.

    Each CPU takes the earliest gap after every accelerator (and CPU of a higher index)
    holding a forward predecessor of one of its groups, and no earlier gap than a lower-index CPU feeding it; an empty CPU takes gap 1. The placement is in the class
    iff the resulting values satisfy the model (check with ``varmap.residual``).
    """
    view = chain_view(ctx)
    pos = np.full(ctx.D, -1, dtype=np.int64)
    pos[view.acc] = np.arange(1, view.k + 1)
    cpu_of = np.full(ctx.D, -1, dtype=np.int64)
    cpu_of[view.cpu] = np.arange(view.l)
    device = np.asarray(assign, dtype=np.int64)[ctx.units]
    ordered = ctx.problem.has(DagOrder)
    gap = index_gaps(view) if ordered else np.ones(view.l, dtype=np.int64)
    edges = view.data.chain_edges
    for _ in range(0 if ordered else view.l + 1):
        slot = np.where(pos[device] > 0, pos[device], gap[np.maximum(cpu_of[device], 0)] if view.l else 0)
        if not len(edges):
            break
        u, v = edges[:, 0], edges[:, 1]
        onto_cpu = cpu_of[device[v]] >= 0
        later = (cpu_of[device[u]] > cpu_of[device[v]]).astype(np.int64)  # CPUs sharing a gap run in index order
        need = np.where(pos[device[u]] > 0, pos[device[u]] + 1, slot[u] + later)
        new = gap.copy()
        np.maximum.at(new, cpu_of[device[v[onto_cpu]]], need[onto_cpu])
        if (new == gap).all():
            break
        gap = new
    slot = np.where(pos[device] > 0, pos[device], gap[np.maximum(cpu_of[device], 0)] if view.l else 0)
    return slot, gap


def index_gaps(view: ChainView) -> np.ndarray:
    """Each CPU's gap in the cluster's device order: ``1 +`` the accelerators listed before it."""
    return 1 + np.searchsorted(view.acc, view.cpu).astype(np.int64)


# ---------------------------------------------------------------------------- CPU gaps
@register
class IndexGaps(BlockTemplate):
    """Under :class:`~placement_dsl.constraints.DagOrder` the devices run in the cluster's order, CPUs included:
    ``gamma[j, b_j] = 1`` with ``b_j`` CPU ``j``'s place among the accelerators (:func:`index_gaps`).

    Without it a CPU may sit in any gap (Tarnawski's DP class), and an edge from a CPU listed after an
    accelerator into that accelerator would go back in the cluster's order.
    """

    name = "index_gaps"
    needs = (CpuGapsLink,)

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        view, gaps = chain_view(ctx), ctx.link(CpuGapsLink)
        fixed = dict(zip((ctx.devices[d] for d in view.cpu), index_gaps(view).tolist()))
        blk.listed_gap = pyo.Constraint(gaps.cpus, rule=lambda b, j: gaps.gamma[j, fixed[j]] == 1,
                                        doc="CPU j sits in the gap where the cluster lists it")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        return iter(())


@register
class CpuGaps(BlockTemplate):
    """CPUs in gaps of the accelerator sequence (recipe row 2).

    ``gamma[j, b] in {0, 1}``, ``sum_b gamma[j, b] = 1`` (every CPU in one gap, ``b = 1..k+1``);
    ``xc[g, j, b] <= gamma[j, b]`` (a group is on CPU ``j`` in gap ``b`` only if ``j`` sits there).
    Valid: any placement in the class numbers its CPUs' gaps; the rows only say so.
    Groups that may not run on CPUs get ``xc`` fixed to 0 by bounds.
    """

    name = "cpu_gaps"
    stage = Stage.ASSIGN
    provides = (CpuGapsLink,)
    needs = ()

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        view = chain_view(ctx)
        cpus = [ctx.devices[d] for d in view.cpu]
        blk.cpus = pyo.Set(initialize=cpus, ordered=True, doc="host devices (CPUs)")
        blk.gaps = pyo.RangeSet(1, view.k + 1, doc="gap b: just before accelerator b (k+1: after the last)")
        blk.groups = pyo.Set(initialize=view.names, ordered=True, doc="colocation groups (unit names)")
        unit_of = dict(zip(view.names, ctx.units.tolist()))
        dev = ctx.cluster.index
        blk.gamma = pyo.Var(blk.cpus, blk.gaps, domain=pyo.Binary, doc="gamma[j, b] = 1 iff CPU j sits in gap b")
        blk.xc = pyo.Var(blk.groups, blk.cpus, blk.gaps, domain=pyo.Binary,
                         bounds=lambda b, g, j, gap: (0, 1 if ctx.unit_allowed[unit_of[g], dev[j]] else 0),
                         doc="xc[g, j, b] = 1 iff group g runs on CPU j sitting in gap b")
        blk.one_gap = pyo.Constraint(blk.cpus, rule=lambda b, j: sum(b.gamma[j, t] for t in b.gaps) == 1,
                                     doc="every CPU sits in exactly one gap")
        blk.in_gap = pyo.Constraint(blk.groups, blk.cpus, blk.gaps,
                                    rule=lambda b, g, j, t: b.xc[g, j, t] <= b.gamma[j, t],
                                    doc="a group is on CPU j in gap b only if CPU j sits in gap b")
        ctx.provide(CpuGapsLink(blk.xc, blk.gamma, blk.groups, blk.cpus, blk.gaps), by=repr(self))

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        view = chain_view(ctx)
        _slot, gap = warm_slots(ctx, warm.assign)
        device = warm.assign[ctx.units]
        for j, name in enumerate(blk.cpus):
            for t in blk.gaps:
                yield blk.gamma[name, t], float(gap[j] == t)
            on = device == view.cpu[j]
            for g, gname in enumerate(view.names):
                for t in blk.gaps:
                    yield blk.xc[gname, name, t], float(on[g] and gap[j] == t)


# ---------------------------------------------------------------------------- assignment
@register
class ChainAssignment(BlockTemplate):
    """Cumulative slots over the accelerator sequence (recipe row 1).

    ``Y[g, b]`` binary for ``b = 1..k``; with ``Y[g, 0] = 0``:

    * ``acc_slot[g, b]``: ``xa[g, b] = Y[g, b] - Y[g, b-1] - sum_j xc[g, j, b] >= 0``;
    * ``last_slot[g]``: ``Y[g, k] + sum_j xc[g, j, k+1] = 1`` (after accelerator ``k`` only CPUs).

    Monotonicity of ``Y`` follows from ``xa >= 0``. Exactly one of ``xa[g, b]``, ``xc[g, j, b]``
    is 1 in an integer point, so ``ctx.x`` is one-hot. Groups not allowed on accelerators get
    ``xa = 0`` (``forbidden``). Needs :class:`CpuGaps`.
    """

    name = "assignment"
    stage = Stage.ASSIGN
    provides = (AssignmentLink, ChainLink)
    needs = (CpuGapsLink,)

    def check(self, problem: Problem) -> None:
        """Problems whose DP class the slots cannot hold: a backward op feeding a forward one (the class mirrors
        the backward ops on the forward chain), or a pin to one of several interchangeable devices (the slots
        number them in cluster order, so the optimum would restrict the class, not bound it)."""
        g = problem.graph
        back = g.backward[g.src] & ~g.backward[g.dst]
        if back.any():
            e = int(back.argmax())
            raise SpecError(f"forward op {g.names[g.dst[e]]!r} reads backward op "
                            f"{g.names[g.src[e]]!r}, which the DP class (backward ops mirror the forward chain) "
                            "cannot place; use formulation='throughput'")
        host = problem.cluster.host
        for op, device in problem.pins.items():
            twins = int((host == host[problem.cluster.index[device]]).sum())
            if twins > 1:
                what = "CPUs" if host[problem.cluster.index[device]] else "accelerators"
                raise SpecError(f"Pin({op!r}, {device!r}) ties an op to one of {twins} "
                                f"interchangeable {what}, which the chain's slots number in cluster order; its "
                                "optimum would restrict the DP class, not bound it; use formulation='throughput'")

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        view, gaps = chain_view(ctx), ctx.link(CpuGapsLink)
        k = view.k
        blk.positions = pyo.RangeSet(1, k, doc="accelerator positions b = 1..k (cluster order)")
        blk.Y = pyo.Var(gaps.groups, blk.positions, domain=pyo.Binary,
                        doc="Y[g, b] = 1 iff group g lies in a slot <= b (on accelerators 1..b or a CPU in gaps 1..b)")

        def xc_sum(g: str, t: int) -> Any:
            return sum(gaps.xc[g, j, t] for j in gaps.cpus)

        blk.xa = pyo.Expression(
            gaps.groups, blk.positions,
            rule=lambda b, g, t: b.Y[g, t] - (b.Y[g, t - 1] if t > 1 else 0) - xc_sum(g, t),
            doc="xa[g, b] = 1 iff group g runs on accelerator b")
        blk.acc_slot = pyo.Constraint(gaps.groups, blk.positions, rule=lambda b, g, t: b.xa[g, t] >= 0,
                                      doc="slot b holds g on a CPU in gap b or on accelerator b, not both (row 1)")
        blk.last_slot = pyo.Constraint(gaps.groups, rule=lambda b, g: b.Y[g, k] + xc_sum(g, k + 1) == 1,
                                       doc="a group past accelerator k is on a CPU in gap k+1 (row 1)")
        unit_of = dict(zip(view.names, ctx.units.tolist()))
        forbidden = [(g, t) for g in view.names for t in range(1, k + 1)
                     if not ctx.unit_allowed[unit_of[g], view.acc[t - 1]]]
        blk.forbidden = pyo.Constraint(pyo.Set(dimen=2, initialize=forbidden), rule=lambda b, g, t: b.xa[g, t] == 0,
                                       doc="xa[g, b] = 0 where group g may not run on accelerator b (allowed kinds)")
        self._link(blk, gaps, ctx, view)

    @staticmethod
    def _link(blk: pyo.Block, gaps: CpuGapsLink, ctx: Context, view: ChainView) -> None:
        where = {int(d): ("acc", b + 1) for b, d in enumerate(view.acc)}
        where.update({int(d): ("cpu", ctx.devices[d]) for d in view.cpu})
        group_of = {u: view.names[i] for i, u in enumerate(ctx.units.tolist())}

        def x(v: int, d: int) -> Any:
            g = group_of[int(ctx.unit[v])]
            kind, key = where[d]
            if kind == "acc":
                return blk.xa[g, key]
            return sum(gaps.xc[g, key, t] for t in gaps.gaps)

        def y(v: int, b: int) -> Any:
            raise SpecError("chain formulation: y (device b or earlier in cluster order) is undefined; the chain's "
                            "order is over slots (Y), so templates of cluster order (dag_order, Archer's cut) "
                            "do not apply")

        ctx.provide(AssignmentLink(x=x, y=y), by="ChainAssignment()")
        ctx.provide(ChainLink(blk.Y, blk.xa, blk.positions), by="ChainAssignment()")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        view = chain_view(ctx)
        slot, _ = warm_slots(ctx, warm.assign)
        for g, name in enumerate(view.names):
            for t in blk.positions:
                yield blk.Y[name, t], float(slot[g] <= t)


# ---------------------------------------------------------------------------- order
@register
class ChainOrder(BlockTemplate):
    """DAG order over forward group edges with CPUs in gaps (recipe rows 3 and 4).

    For every forward edge ``(u, v)`` between groups (``ChainData.chain_edges``):

    * ``precedes[u, v, b]``: ``Y[v, b] <= Y[u, b]``, ``b = 1..k`` (the slots form ideals, Archer eq. (8));
    * ``cpu_after_acc[u, v, j, b]``: ``xc[v, j, b] + xa[u, b] <= 1`` (a CPU in gap ``b`` runs
      before accelerator ``b``, so it cannot consume from it);
    * ``cpu_order[u, v, i, j, b]`` for CPUs ``i < j``: ``xc[u, j, b] + xc[v, i, b] <= 1``
      (CPUs sharing a gap run in index order; identical CPUs make the order free).

    Valid: in a DAG-ordered placement an edge never goes to an earlier device of the sequence.
    """

    name = "dag_order"
    needs = (ChainLink, CpuGapsLink)

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        view, gaps, asg = chain_view(ctx), ctx.link(CpuGapsLink), ctx.link(ChainLink)
        names = view.names
        edges = [(names[u], names[v]) for u, v in view.data.chain_edges.tolist()]
        blk.forward_edges = pyo.Set(dimen=2, initialize=edges, doc="forward edges between groups (u, v)")
        blk.precedes = pyo.Constraint(blk.forward_edges, asg.positions,
                                      rule=lambda b, u, v, t: asg.Y[v, t] <= asg.Y[u, t],
                                      doc="v in a slot <= b implies u in a slot <= b (row 3)")
        blk.cpu_after_acc = pyo.Constraint(
            blk.forward_edges, gaps.cpus, asg.positions,
            rule=lambda b, u, v, j, t: gaps.xc[v, j, t] + asg.xa[u, t] <= 1,
            doc="v on a CPU in gap b cannot consume from u on accelerator b (row 4)")
        cpus = list(gaps.cpus)
        pairs = [(cpus[i], cpus[j]) for i in range(len(cpus)) for j in range(i + 1, len(cpus))]
        rows = [(u, v, i, j, t) for u, v in edges for i, j in pairs for t in gaps.gaps]
        blk.cpu_order = pyo.Constraint(
            pyo.Set(dimen=5, initialize=rows),
            rule=lambda b, u, v, i, j, t: gaps.xc[u, j, t] + gaps.xc[v, i, t] <= 1,
            doc="CPUs sharing a gap run in index order: no edge from a later CPU to an earlier one")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        return iter(())


# ---------------------------------------------------------------------------- tensor cut
@register
class ChainTensorCut(TensorCut):
    """``CommIn``/``CommOut`` over the chain's ``xa`` (recipe row 5, Tarnawski eq. (15)-(19)).

    As :class:`~.transfer.TensorCut` ``form="commio"``, except that on a forward edge between
    groups the out-row reads ``CommOut[u, b] >= xa[u, b] - Y[v, b]``: ``v`` cannot be in an
    earlier slot than ``u`` nor on a CPU of slot ``b`` (row 4), so ``Y[v, b] = 1`` with ``u`` on
    accelerator ``b`` means ``v`` is on it too. Stronger than ``- xa[v, b]`` and still valid.
    """

    needs = (AssignmentLink, ChainLink)

    def __init__(self) -> None:
        super().__init__(form="commio")

    def __repr__(self) -> str:
        return "ChainTensorCut()"

    def _constraints(self, blk: pyo.Block, ctx: Context, var_in: Any, var_out: Any) -> None:
        view, asg = chain_view(ctx), ctx.link(ChainLink)
        idx, dev, x = ctx.graph.index, ctx.cluster.index, ctx.x
        group = {u: view.names[i] for i, u in enumerate(ctx.units.tolist())}
        forward = {(view.names[u], view.names[v]) for u, v in view.data.chain_edges.tolist()}
        position = {int(d): b + 1 for b, d in enumerate(view.acc)}

        def out_rhs(u: int, v: int, d: int) -> Any:
            gu, gv = group[int(ctx.unit[u])], group[int(ctx.unit[v])]
            if (gu, gv) in forward and d in position:
                return x(u, d) - asg.Y[gv, position[d]]
            return x(u, d) - x(v, d)

        blk.tensor_in = pyo.Constraint(blk.edges, rule=lambda b, u, v, d: var_in[u, d] >= x(idx[v], dev[d])
                                       - x(idx[u], dev[d]),
                                       doc="a consumer on d of a tensor made elsewhere makes d read it")
        blk.tensor_out = pyo.Constraint(blk.edges, rule=lambda b, u, v, d: var_out[u, d] >= out_rhs(
            idx[u], idx[v], dev[d]), doc="a consumer in a later slot of a tensor made on d makes d write it")


# ---------------------------------------------------------------------------- cuts and windows
@register
class AncestorCuts(BlockTemplate):
    """Ancestor/descendant cuts (recipe row 7; proof in :mod:`placement_dsl.bounds.combinatorial`).

    One row per group: ``bottleneck >= sum_b tau[g, b] xa[g, b] + sum_{j, b} tau_cpu[g, b] xc[g, j, b]``.
    Exactly one term is 1 in an integer point and its ``tau`` is a floor on the max load of
    any placement of the class putting ``g`` there. Infinite floors (impossible positions)
    fix the variable to 0 instead (``impossible``). Needs :class:`~.objective.MaxLoad`.
    """

    name = "ancestor_cuts"
    stage = Stage.OBJECTIVE
    needs = (ChainLink, CpuGapsLink, BottleneckLink)

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        view, gaps, asg = chain_view(ctx), ctx.link(CpuGapsLink), ctx.link(ChainLink)
        T = ctx.link(BottleneckLink).bottleneck
        pos = {name: g for g, name in enumerate(view.names)}

        def floor(g: str) -> Any:
            i = pos[g]
            acc = sum(float(view.tau[i, t - 1]) * asg.xa[g, t] for t in asg.positions
                      if math.isfinite(view.tau[i, t - 1]) and view.tau[i, t - 1] > 0)
            cpu = sum(float(view.tau_cpu[i, t - 1]) * gaps.xc[g, j, t] for j in gaps.cpus for t in gaps.gaps
                      if math.isfinite(view.tau_cpu[i, t - 1]) and view.tau_cpu[i, t - 1] > 0)
            return T >= acc + cpu

        blk.ancestor_cut = pyo.Constraint(gaps.groups, rule=lambda b, g: floor(g),
                                          doc="the max load is at least the floor tau of g's position (row 7)")
        _add_windows(blk, ctx, view, math.inf, "impossible", "position whose floor tau is infinite")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        return iter(())


def _add_windows(blk: pyo.Block, ctx: Context, view: ChainView, target: float, prefix: str, why: str) -> None:
    """``xa[g, b] = 0`` where ``tau[g, b] > target`` and ``xc[g, j, b] = 0`` where ``tau_cpu[g, b] > target``;
    an infinite floor is cut at any target (``target = inf``: the impossible positions alone)."""
    gaps, asg = ctx.link(CpuGapsLink), ctx.link(ChainLink)
    slack = 1e-9 * max(1.0, abs(target)) if math.isfinite(target) else 0.0

    def over(tau: np.ndarray) -> np.ndarray:
        return (tau > target + slack) | np.isinf(tau)

    acc = [(view.names[g], t + 1) for g, t in zip(*np.nonzero(over(view.tau)))]
    cpu = [(view.names[g], j, t + 1) for g, t in zip(*np.nonzero(over(view.tau_cpu))) for j in gaps.cpus]
    blk.add_component(f"{prefix}_acc", pyo.Constraint(pyo.Set(dimen=2, initialize=acc),
                                                      rule=lambda b, g, t: asg.xa[g, t] == 0,
                                                      doc=f"xa[g, b] = 0: {why}"))
    blk.add_component(f"{prefix}_cpu", pyo.Constraint(pyo.Set(dimen=3, initialize=cpu),
                                                      rule=lambda b, g, j, t: gaps.xc[g, j, t] == 0,
                                                      doc=f"xc[g, j, b] = 0: {why}"))


@register
class PositionWindows(BlockTemplate):
    """Position windows for a target max load ``T*`` (recipe row 8, :func:`~placement_dsl.bounds.position_windows`).

    ``xa[g, b] = 0`` where ``tau[g, b] > T*`` and ``xc[g, j, b] = 0`` where ``tau_cpu[g, b] > T*``.
    Every placement of the class with max load ``<= T*`` survives (its positions have floors
    ``<= T*``), so the optimum ``OPT >= min(T*, bound of the windowed model)``. ``target`` is in
    cost-model units.
    """

    name = "position_windows"
    needs = (ChainLink, CpuGapsLink)

    def __init__(self, target: float):
        if not target > 0:
            raise SpecError(f"position_windows: target must be a positive max load, got {target!r}")
        self.target = float(target)

    def __repr__(self) -> str:
        return f"PositionWindows(target={self.target!r})"

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        view = chain_view(ctx)
        _add_windows(blk, ctx, view, self.target / ctx.scale.time, "window",
                     f"its floor tau exceeds the target {self.target:.6g}")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        return iter(())
