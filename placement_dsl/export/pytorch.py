"""PyTorch runtimes: ``torch.distributed.pipelining`` split points, torchtitan's module lists, a schedule CSV.

* ``torch-pipelining`` (torch >= 2.4): ``{"split_spec": {FQN: "beginning" | "end"}, ...}``; pass it as
  ``pipeline(model, mb_args, split_spec={k: SplitPoint[v.upper()] for k, v in spec.items()})``. A stage
  begins at a module (``"beginning"``), or, where it begins with the model's own functional calls (a
  ``torch.flatten`` between ``features`` and ``classifier``), after the module before them (``"end"``).
* ``torchtitan`` (0.1, ``parallelism.module_fqns_per_model_part``; the splitting rule of pytorch/torchtitan at
  02ef790): one list per stage, in execution order, of the names torchtitan's splitter keeps: the model's own
  children and the entries ``list.N`` of its top-level lists, ``ModuleList`` or ``ModuleDict`` (:mod:`.titan`).
* ``schedule-csv`` (torch >= 2.5, ``_PipelineScheduleRuntime._load_csv(path, format="compute_only")``):
  one row per rank, one cell per time step, each an action ``{stage}{F|B|I|W}{microbatch}`` (``0F3``:
  stage 0's forward of microbatch 3; ``I``/``W`` the input and weight gradients of a split
  backward), empty while the rank waits. ``gpipe`` and ``1f1b`` run one stage per rank;
  ``interleaved-1f1b``, ``zb-h1`` and ``zbv`` write torch's ``ScheduleInterleaved1F1B``,
  ``ScheduleInterleavedZeroBubble`` and ``ScheduleZBVZeroBubble`` orders
  (:mod:`placement_dsl.pipeline_orders`) over the placement's stages, ``v`` per rank round-robin or
  two per rank in ZBV's V, and refuse ``m`` that torch refuses.

Split points and module lists take virtual stages too: a placement whose devices hold ``v``
stages round-robin (stage ``k`` on the ``(k mod p)``-th device) splits into ``p v`` stages, and
``stage_ranks`` says which rank builds each (``pipeline(...).build_stage(k, ...)`` on rank ``k mod p``);
under ``zbv`` each of the ``2p`` devices holds one stage and rank ``k`` builds stages ``k`` and
``2p - 1 - k`` (the rank map, :func:`placement_dsl.stage_schedules.stage_ranks`). The split points
also name the schedule's torch class (``schedule_class``) and each rank's stage indices
(``stage_index_per_rank``), the stages a rank passes to that class.

A module object called under several names on several stages (a tied encoder and decoder) is listed in
``tied_modules`` with its names and stages: each stage builds its own copy of its weights (torch's
``pipeline()`` replicates a parameter used by several stages), and a training step must sum the copies'
gradients across those stages before the optimizer steps.
"""
from __future__ import annotations

from typing import Any

from ..errors import SpecError
from ..pipeline_orders import FOLDS, ORDERS, rank_orders, unit_rows
from ..placement import Placement
from ..stage_schedules import stage_ranks as folded_ranks
from .plan import Stage, forward_view, module_of, pipeline_stages, split_places, stage_ranks, tied_modules
from .titan import RULE, model_parts

SCHEDULES = ("1f1b", "gpipe", *ORDERS)
TORCH_CLASSES = {"1f1b": "Schedule1F1B", "gpipe": "ScheduleGPipe", "interleaved-1f1b": "ScheduleInterleaved1F1B",
                 "zb-h1": "ScheduleInterleavedZeroBubble", "zbv": "ScheduleZBVZeroBubble"}  # torch 2.13's names


SINGLE = ("1f1b", "gpipe")  # torch's PipelineScheduleSingle: one stage per rank


def rank_map(stages: list[Stage], schedule: str) -> list[int]:
    """The rank of each stage: its device's, or ZBV's V over one device per stage."""
    if schedule in FOLDS:
        return list(folded_ranks([s.device for s in stages], schedule))
    return stage_ranks(stages)


def ranks_under(stages: list[Stage], schedule: str, runtime: str) -> list[list[int]]:
    """The stage indices of each rank under ``schedule`` (:func:`rank_map`, the one rank order of every torch
    runtime's export), refused where ``schedule``'s torch class cannot run them: ``gpipe`` and ``1f1b`` are
    ``ScheduleGPipe`` and ``Schedule1F1B``, single-stage schedules, and a rank holding several stages needs a
    multi-stage class."""
    ranks = rank_map(stages, schedule)
    per_rank = [[k for k, r in enumerate(ranks) if r == rank] for rank in range(max(ranks) + 1)]
    several = next((ks for ks in per_rank if len(ks) > 1), None)
    if schedule in SINGLE and several is not None:
        raise SpecError(f"{runtime}: --schedule {schedule} is torch's {TORCH_CLASSES[schedule]}, which runs one stage "
                        f"per rank, and rank {ranks[several[0]]} holds stages {several}; export with --schedule "
                        f"interleaved-1f1b ({TORCH_CLASSES['interleaved-1f1b']}) or zb-h1 "
                        f"({TORCH_CLASSES['zb-h1']}), which run several stages per rank")
    return per_rank


def split_spec(placement: Placement, depth: int | None = None, schedule: str = "1f1b") -> dict[str, Any]:
    """The ``torch.distributed.pipelining`` split points: each later stage's first module, ``"beginning"``, or the
    module before it, ``"end"`` (:func:`~.plan.split_places`); with the ranks that build the stages under
    ``schedule`` and its torch class."""
    runtime = "torch-pipelining"
    placement = forward_view(placement)
    stages = pipeline_stages(placement, runtime, virtual=True)
    points = split_places(placement, stages, depth, runtime)
    names = placement.cluster.names
    per_rank = ranks_under(stages, schedule, runtime)
    return {"split_spec": dict(points), "num_stages": len(stages),
            "stage_devices": [names[s.device] for s in stages], "depth": depth, "stage_ranks": rank_map(stages, schedule),
            "virtual_stages_per_rank": len(stages) // len(per_rank), "schedule": schedule,
            "schedule_class": TORCH_CLASSES[schedule], "stage_index_per_rank": per_rank,
            "tied_modules": tied_modules(placement, stages)}


def module_fqns(placement: Placement, depth: int | None = None, schedule: str = "1f1b") -> dict[str, Any]:
    """torchtitan's ``module_fqns_per_model_part``: each stage's top-level modules and entries ``list.N`` of top-level
    lists, the names torchtitan's splitter keeps (:func:`~.titan.model_parts`; a plan it cannot express is refused);
    with the ranks that build the stages under ``schedule`` (:func:`ranks_under`, as for torch-pipelining).
    ``depth`` does not apply: the splitter's grammar fixes the names."""
    runtime = "torchtitan"
    if depth is not None:
        raise SpecError(f"torchtitan: --depth {depth} does not apply; {RULE} keeps the model's own children and the "
                        f"entries 'list.N' of its top-level lists, which fix the names (drop --depth)")
    placement = forward_view(placement)
    stages = pipeline_stages(placement, runtime, virtual=True)
    per_rank = ranks_under(stages, schedule, runtime)
    parts = model_parts(placement, stages, runtime)
    unnamed = [s.index for s in stages if not parts[s.index]]
    if unnamed:
        raise SpecError(f"torchtitan: stage {unnamed[0]} holds ops of no module; a model part is a list of modules")
    return {"module_fqns_per_model_part": parts, "rule": RULE, "stage_ranks": rank_map(stages, schedule),
            "virtual_stages_per_rank": len(stages) // len(per_rank), "schedule": schedule,
            "schedule_class": TORCH_CLASSES[schedule], "stage_index_per_rank": per_rank,
            "tied_modules": tied_modules(placement, stages)}


def _orders(stages: int, microbatches: int, schedule: str) -> list[list[tuple[str, int]]]:
    """Each rank's compute actions in order: GPipe (all forwards, then all backwards) or 1F1B."""
    out = []
    for r in range(stages):
        fw = [("F", m) for m in range(microbatches)]
        bw = [("B", m) for m in range(microbatches)]
        if schedule == "gpipe":
            out.append(fw + bw)
            continue
        warm = min(stages - r - 1, microbatches)
        seq = fw[:warm]
        for m in range(warm, microbatches):
            seq += [fw[m], bw[m - warm]]
        out.append(seq + bw[microbatches - warm:])
    return out


def schedule_rows(stages: int, microbatches: int, schedule: str = "1f1b") -> list[list[str]]:
    """One row per rank of time steps (unit-time actions, dependencies respected); ``""`` while idle.

    >>> schedule_rows(2, 2, "gpipe")
    [['0F0', '0F1', '', '', '0B0', '0B1'], ['', '1F0', '1F1', '1B0', '1B1']]
    """
    orders = _orders(stages, microbatches, schedule)
    done: dict[tuple[str, int, int], int] = {}  # (kind, stage, microbatch) -> finishing step
    pos, free = [0] * stages, [0] * stages
    rows: list[list[str]] = [[] for _ in range(stages)]
    while any(pos[r] < len(orders[r]) for r in range(stages)):
        for r in range(stages):
            if pos[r] == len(orders[r]):
                continue
            kind, m = orders[r][pos[r]]
            need = ("F", r - 1, m) if kind == "F" else ("B", r + 1, m) if r + 1 < stages else ("F", r, m)
            if kind == "F" and r == 0:
                ready = 0
            elif need in done:
                ready = done[need]
            else:
                continue
            start = max(free[r], ready)
            rows[r] += [""] * (start - len(rows[r])) + [f"{r}{kind}{m}"]
            done[(kind, r, m)] = free[r] = start + 1
            pos[r] += 1
    return rows


def schedule_csv(placement: Placement, microbatches: int = 4, schedule: str = "1f1b") -> list[list[str]]:
    """The schedule CSV rows of ``placement``'s stages (one stage per rank; ``v`` round-robin for the
    interleaved and zero-bubble schedules, two in a V for ``zbv``)."""
    placement = forward_view(placement)
    stages = pipeline_stages(placement, "schedule-csv", virtual=True)
    p = len(ranks_under(stages, schedule, "schedule-csv"))
    if schedule not in ORDERS:
        return schedule_rows(len(stages), microbatches, schedule)
    return unit_rows(rank_orders(schedule, p, len(stages) // p, microbatches), len(stages))


__all__ = ["SCHEDULES", "SINGLE", "TORCH_CLASSES", "module_fqns", "module_of", "rank_map", "ranks_under", "schedule_csv",
           "schedule_rows", "split_spec"]
