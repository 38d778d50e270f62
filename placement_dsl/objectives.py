"""Objective terms: what a placement's cost is.

With ``load_d = compute_d + in_d + out_d + overflow_d`` the cost of device ``d`` (Archer
et al. eq. (3); Tarnawski et al. Fig. 6 eq. (20)-(21)), training graphs split into a
forward part ``FW_d`` and a backward part ``BW_d`` (a transfer belongs to the pass of the
tensor's producer):

* :class:`Bottleneck` — Archer's MTPP, ``min max_d load_d`` (eq. (4)-(6)); with
  :class:`~placement_dsl.constraints.Overflow` the overflow term is charged;
* :class:`Throughput` — Tarnawski's max device load over accelerators and CPUs (Fig. 6);
* :class:`PipeDream` — ``max_d (FW_d + BW_d)`` (Tarnawski §5.3), the same max load;
* :class:`GPipe` — ``max_d FW_d + max_d BW_d`` (Tarnawski §5.3 and App. A), exact;
* :class:`Interleaved1F1B`, :class:`ZeroBubbleH1`, :class:`ZeroBubbleV` — torch's interleaved and zero-bubble
  orders over virtual stages, their steady state the max load (per rank under ZBV's V).

``overlap`` replaces each sum by a maximum (Tarnawski App. C.1): ``"half"``:
``max(compute, in + out + overflow)``; ``"full"``: ``max(compute, in, out + overflow)``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from dataclasses import fields as dataclass_fields
from typing import Any, ClassVar

from .constraints import Term
from .errors import SpecError
from .evaluate import CostModel, Overlap
from .evaluate import Objective as CostObjective
from .pipeline_orders import whole

OVERLAPS = tuple(o.value for o in Overlap)

# the one table of objective names: name -> term class (filled by ObjectiveTerm subclasses' ``names``);
# the cost model of a name is the term's (``CostModel.named`` for the evaluator's side of the same names)
OBJECTIVES: dict[str, type[ObjectiveTerm]] = {}


@dataclass(frozen=True)
class ObjectiveTerm(Term):
    """Base of the objective terms: a cost-model objective and a communication overlap mode.

    Subclasses list the command-line ``names`` they answer to; :func:`objective_named` finds
    them there, and :meth:`cost_model` is the evaluator's view of the term.
    """

    overlap: Overlap = Overlap.NONE
    kind: ClassVar[str] = "objective"
    names: ClassVar[tuple[str, ...]] = ()
    cost_objective: ClassVar[CostObjective] = CostObjective.MAX_LOAD

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in cls.names:
            if name in OBJECTIVES:
                raise SpecError(f"objective name {name!r} is taken by {OBJECTIVES[name].__name__}")
            OBJECTIVES[name] = cls

    def __post_init__(self) -> None:
        if self.overlap not in OVERLAPS:
            raise SpecError(f"{type(self).__name__}(overlap={self.overlap!r}): choose overlap from {list(OVERLAPS)}")
        object.__setattr__(self, "overlap", Overlap(self.overlap))  # given as a name or the enum; kept as the enum

    @property
    def bounds_max_load(self) -> bool:
        """The objective is the max device load (the relaxations and the chain cuts bound that)."""
        return self.cost_objective is CostObjective.MAX_LOAD

    def cost_model(self) -> CostModel:
        """The evaluator's cost model of this objective (memory mode and checks from its first name)."""
        return CostModel.named(self.names[0], overlap=self.overlap)


@dataclass(frozen=True)
class Bottleneck(ObjectiveTerm):
    """Archer et al. MTPP: ``minimize bottleneck >= block_b`` for every block ``b`` (eq. (5)-(7))."""

    names: ClassVar[tuple[str, ...]] = ("bottleneck",)


@dataclass(frozen=True)
class Throughput(ObjectiveTerm):
    """Tarnawski et al. Fig. 6: ``minimize MaxLoad >= Load_i`` over accelerators (eq. 20) and CPUs (eq. 21)."""

    names: ClassVar[tuple[str, ...]] = ("throughput", "max_load")


@dataclass(frozen=True)
class PipeDream(ObjectiveTerm):
    """Tarnawski et al. §5.3, PipeDream schedule: ``minimize max_d (FW_d + BW_d)``."""

    names: ClassVar[tuple[str, ...]] = ("pipedream",)


@dataclass(frozen=True)
class GPipe(ObjectiveTerm):
    """Tarnawski et al. §5.3 / App. A, GPipe schedule: ``minimize max_d FW_d + max_d BW_d`` (two epigraphs).

    ``microbatches=m`` scores one mini-batch of ``m`` micro-batches with its fill and drain,
    ``(F_m + B_m) / m`` (a bubble of ``(k-1)/(m+k-1)`` on ``k`` equal stages;
    :func:`placement_dsl.training.gpipe_time_per_sample`); ``None`` is the steady state ``m -> inf``.
    """

    microbatches: int | None = None
    names: ClassVar[tuple[str, ...]] = ("gpipe",)
    cost_objective: ClassVar[CostObjective] = CostObjective.GPIPE

    def __post_init__(self) -> None:
        super().__post_init__()
        m = self.microbatches
        if m is not None and not whole(m, int):
            raise SpecError(f"GPipe(microbatches={m!r}): give a whole number of micro-batches >= 1, or None")

    def cost_model_fields(self) -> dict[str, Any]:
        """The fill-and-drain option the cost model reads (:meth:`Problem.cost_model`)."""
        return {} if self.microbatches is None else {"microbatches": self.microbatches}

    def cost_model(self) -> CostModel:
        return CostModel.named(self.names[0], overlap=self.overlap, **self.cost_model_fields())


@dataclass(frozen=True)
class Interleaved1F1B(ObjectiveTerm):
    """Interleaved 1F1B (Narayanan et al. 2021; torch's ``ScheduleInterleaved1F1B``) over the placement's virtual stages.

    A device may hold ``v`` non-adjacent stages, stage ``s`` on the ``(s mod p)``-th device in pipeline
    order (:mod:`placement_dsl.pipeline_orders`). ``microbatches=m`` scores the time per sample of one
    step of ``m`` micro-batches in torch's order, fill and drain included (Megatron's bubble ``(p - 1)/(v m)``
    on equal stages); ``None`` is the steady state ``max_d (FW_d + BW_d)``, PipeDream's max load.

    ``virtual=v`` asks for ``v`` virtual stages per rank (Megatron's virtual pipeline stages, torch's
    ``ScheduleInterleaved1F1B`` with ``v`` stages per rank): the cost model holds a placement of another count
    invalid, and the heuristics' answers are made ``p v``-stage splits, stage ``s`` on rank ``s mod p``
    (:func:`placement_dsl.heuristics.fold_ranks.interleave`); ``None`` takes the placement's stages as they are.
    Whatever ``v``, the time per sample is at least the most work of a rank, at least the least total work over
    the ranks (the ``simple`` bound of max load), which holds for every ``v``.

    The IPs refuse it (:attr:`bounds_max_load` is False): no formulation writes the bubble, which
    depends on the stage order, nor restricts placements to round-robin stages (the cost model marks
    the others invalid). Where it is exact, it is :class:`PipeDream`'s: the steady state over
    contiguous placements (``v = 1``), which the DP and the IPs solve under ``pipedream`` with
    ``Contiguous``; here the DP and the other heuristics answer and the cost model scores them.
    """

    microbatches: int | None = None
    virtual: int | None = None
    names: ClassVar[tuple[str, ...]] = ("interleaved-1f1b",)

    def __post_init__(self) -> None:
        super().__post_init__()
        m, v = self.microbatches, self.virtual
        if m is not None and not whole(m, int):
            raise SpecError(f"{type(self).__name__}(microbatches={m!r}): give a whole number of micro-batches >= 1, "
                            "or None")
        if v is not None and not whole(v, int):
            raise SpecError(f"{type(self).__name__}(virtual={v!r}): give a whole number of stages per rank >= 1, "
                            "or None")

    @property
    def bounds_max_load(self) -> bool:
        """Not a max load: the bubble and the round-robin stages are the schedule's (see the class docstring)."""
        return False

    def cost_model_fields(self) -> dict[str, Any]:
        """The step and the stages per rank the cost model reads (:meth:`Problem.cost_model`)."""
        return {k: v for k, v in (("microbatches", self.microbatches), ("virtual", self.virtual)) if v is not None}

    def cost_model(self) -> CostModel:
        return CostModel.named(self.names[0], overlap=self.overlap, **self.cost_model_fields())


@dataclass(frozen=True)
class ZeroBubbleH1(Interleaved1F1B):
    """ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism"; torch's ``ScheduleInterleavedZeroBubble``): the
    backward split into input and weight gradients, the weight gradients filling 1F1B's bubbles
    (``(p - 1)(F + I - W)`` on equal stages). Same exactness as :class:`Interleaved1F1B`."""

    names: ClassVar[tuple[str, ...]] = ("zb-h1",)


@dataclass(frozen=True)
class ZeroBubbleV(Interleaved1F1B):
    """ZBV (Qi et al., "Zero Bubble Pipeline Parallelism" §6; torch's ``ScheduleZBVZeroBubble``): two stages per
    rank in a V, rank ``k`` running stages ``k`` and ``2p - 1 - k``, the backward split as in ZB-H1.

    The placement gives each of its ``2p`` stages a device of its own (the V's turn, stages ``p - 1`` and
    ``p``, sits on one rank back to back, which one device would hold as one stage), and the rank map
    folds them onto ``p`` ranks (:func:`placement_dsl.stage_schedules.stage_ranks`): a rank's time is
    its two stages' tasks, each device's memory its own stage's. ``microbatches=None`` is the steady
    state, the most work of a rank, ``max_k sum_{s on k} (F_s + B_s)``. Same exactness as
    :class:`Interleaved1F1B`: the heuristics answer and the cost model scores them."""

    names: ClassVar[tuple[str, ...]] = ("zbv",)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.virtual not in (None, 2):
            raise SpecError(f"ZeroBubbleV(virtual={self.virtual!r}): the V runs 2 stages per rank; give 2 or None")


def objective_named(name: str, overlap: str | Overlap = Overlap.NONE) -> ObjectiveTerm:
    """An objective term by name (``throughput``, ``bottleneck``, ``pipedream``, ``gpipe``, ...)."""
    if name not in OBJECTIVES:
        raise SpecError(f"objective {name!r} has no formulation; choose from {sorted(OBJECTIVES)}")
    return OBJECTIVES[name](overlap=overlap)


def objective_of(model: CostModel) -> ObjectiveTerm:
    """The objective term whose cost model is ``model`` (the one it names first): its objective, memory mode and overlap, and the step and
    stages per rank it reads (``microbatches``, ``virtual``: the term's own :meth:`cost_model_fields`)."""
    named = [OBJECTIVES[model.name]] if model.name in OBJECTIVES else []
    for cls in dict.fromkeys([*named, *OBJECTIVES.values()]):
        term = cls(overlap=model.overlap)
        mine = term.cost_model()
        if (mine.objective, mine.memory) == (model.objective, model.memory):
            fields = {f.name: getattr(model, f.name) for f in dataclass_fields(cls)
                      if f.name in ("microbatches", "virtual") and getattr(model, f.name) is not None}
            return replace(term, **fields) if fields else term
    raise SpecError(f"objective {model.objective.value!r} with {model.memory.value} memory has no objective term; "
                    f"choose from {sorted(OBJECTIVES)}")


@dataclass(frozen=True)
class Latency(ObjectiveTerm):
    """Single-sample latency of one input: ``minimize max_v C_v``, the last finish of a schedule (one family).

    One schedule model scores it (:func:`~placement_dsl.evaluate.single_sample`): ops get devices and start
    times, a tensor crossing devices is a transfer task after its producer (over its route on a cluster with
    links, under :class:`~placement_dsl.constraints.Congestion`; through host memory otherwise), and a device
    runs one thing at a time unless it is parallel (a host CPU, Tarnawski §4). MOIRAI's makespan (eq. 4-8) is
    the general case, where devices run one op at a time; Tarnawski's invocation model (§4, Fig. 3-4) is the
    restriction where accelerators run whole contiguous subgraphs as invocations (reads, compute, writes), the
    default on a cluster without links (:attr:`Cluster.invocation <placement_dsl.cluster.Cluster.invocation>`);
    :class:`~placement_dsl.constraints.Subgraphs` bounds their number. ``overlap`` changes nothing.
    """

    names: ClassVar[tuple[str, ...]] = ("latency",)
    cost_objective: ClassVar[CostObjective] = CostObjective.LATENCY

    def require(self) -> frozenset[str]:
        return frozenset({"schedule"})


@dataclass(frozen=True)
class Makespan(Latency):
    """MOIRAI eq. (4), ``minimize max_i C_i``: the same objective as :class:`Latency` under its paper's name.

    Kept for compatibility: it answers to ``"makespan"`` and scores every placement exactly as ``Latency`` does
    (one referee, the same schedule model); the formulations, bounds and heuristics of the family take both.
    """

    names: ClassVar[tuple[str, ...]] = ("makespan",)
    cost_objective: ClassVar[CostObjective] = CostObjective.MAKESPAN
