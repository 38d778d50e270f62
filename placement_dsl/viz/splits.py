"""A partition as the frameworks take it: stages by module or layer name, and their split points.

For ``torch.distributed.pipelining`` the split points are the ``split_spec`` that the
``torch-pipelining`` exporter writes (:func:`placement_dsl.export.export`, the one place they are
made): each stage after the first begins at a module (``SplitPoint.BEGINNING``) or after the module
before it (``SplitPoint.END``, where the stage begins with the model's own calls). For DeepSpeed's
``PipelineModule`` they are the layer-index boundaries ``parts`` over its layer list ``parts_layers``,
the ``deepspeed`` exporter's (empty where it refuses the plan).
Names are module paths (``op.attrs["module"]``) cut to ``depth`` dotted parts, or the ops' names for
people where an op has none (a dnn-partitioning node's ``name``, else its id).

This is the view for people: where the exporter refuses the plan, ``split_spec`` is empty and the
reason is among the ``warnings``, beside the layers cut between stages.
"""
from __future__ import annotations

from itertools import pairwise
from typing import Any

from ..errors import SpecError
from ..export import export
from ..export.plan import forward_view, module_of, op_name, stages_of
from ..placement import Placement


def _layer(op: Any, depth: int | None) -> str:
    return module_of(op, depth) or op_name(op)


def _stage(k: int, device: str, ops: tuple[int, ...], placement: Placement, depth: int | None) -> dict[str, Any]:
    g = placement.graph
    names = [_layer(g.ops[v], depth) for v in ops]
    first, last = g.ops[ops[0]], g.ops[ops[-1]]
    return {"stage": k, "device": device, "ops": len(ops), "first": op_name(first), "last": op_name(last),
            "layers": list(dict.fromkeys(names)), "begins_at": first.attrs.get("module") or op_name(first)}


def split_points(placement: Placement, depth: int | None = None) -> dict[str, Any]:
    """Stages with their layers, the ``split_spec`` of ``torch.distributed.pipelining`` and DeepSpeed's ``parts``.

    A stage is a run of ops on one device in the device-major order, so a contiguous pipeline
    has one stage per device. ``split_spec`` is the ``torch-pipelining`` exporter's, at ``depth``
    (``{module: "beginning" | "end"}``); where it refuses the plan, ``split_spec`` is empty and
    ``warnings`` hold its reason. ``parts`` and ``parts_layers`` are the ``deepspeed`` exporter's
    (its layer list: embedding, layers, head), empty with the reason among the ``warnings`` where it
    refuses. ``warnings`` also name a layer cut between stages. A training placement shows its forward
    stages (:func:`~placement_dsl.export.plan.forward_view`).
    """
    placement = forward_view(placement)
    names = placement.cluster.names
    stages = [_stage(s.index, names[s.device], s.ops, placement, depth) for s in stages_of(placement)]
    order = list(dict.fromkeys(layer for s in stages for layer in s["layers"]))
    warnings = [f"layer {s['layers'][0]!r} is cut between stages {prev['stage']} and {s['stage']}"
                for prev, s in pairwise(stages) if s["layers"][0] == prev["layers"][-1]]
    try:
        spec = export(placement, "torch-pipelining", depth=depth).data["split_spec"]
    except SpecError as err:
        spec = {}
        warnings.append(str(err))
    try:
        ds = export(placement, "deepspeed").data
        parts, entries = ds["parts"], ds["layers"]
    except SpecError as err:
        parts, entries = [], []
        if str(err).split(":", 1)[1] not in {w.split(":", 1)[-1] for w in warnings}:
            warnings.append(str(err))
    return {"depth": depth, "layers": order, "stages": stages, "split_spec": spec, "parts": parts,
            "parts_layers": entries, "warnings": warnings}


def split_lines(points: dict[str, Any]) -> list[str]:
    """Text: one line per stage (device, ops, layers), then the ``split_spec`` and DeepSpeed ``parts``."""
    lines = ["stages by layer:"]
    for s in points["stages"]:
        shown = s["layers"] if len(s["layers"]) <= 5 else [*s["layers"][:4], "...", s["layers"][-1]]
        lines.append(f"  stage {s['stage']} on {s['device']}: {s['ops']} ops, {len(s['layers'])} layers "
                     f"[{', '.join(shown)}]")
    if points["split_spec"] or len(points["stages"]) < 2:
        spec = ", ".join(f"{k!r}: SplitPoint.{v.upper()}" for k, v in points["split_spec"].items())
        lines.append(f"torch.distributed.pipelining split_spec = {{{spec}}}")
    else:
        lines.append("torch.distributed.pipelining split_spec: none, the exporter refuses this plan (see the warning)")
    if points["parts"]:
        lines.append(f"DeepSpeed PipelineModule parts = {points['parts']} over {len(points['parts_layers'])} layers")
    else:
        lines.append("DeepSpeed PipelineModule parts: none, the exporter refuses this plan (see the warning)")
    lines += [f"warning: {w}" for w in points["warnings"]]
    return lines
