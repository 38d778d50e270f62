"""Plans a pipeline runtime can execute: one exporter per runtime, all behind one registry.

:data:`EXPORTERS` maps a format name to an :class:`Exporter`: the runtime and version it targets,
what it can express, and its writer. A training placement exports as its forward stages
(:func:`~.plan.forward_view`: each gradient on its forward op's stage). :func:`export` checks that the placement is a pipeline the
runtime runs (one contiguous stage per accelerator, or ``v`` round-robin for the runtimes with
interleaved schedules — torch-pipelining, torchtitan, megatron, schedule-csv —, no replication,
boundaries between modules or layers; see :mod:`.plan` and :mod:`.layers`) and returns an :class:`Export` with the file's
text; a plan the runtime cannot express raises :class:`~placement_dsl.errors.SpecError` with the
reason.

>>> from placement_dsl.graph import Graph, Op
>>> from placement_dsl.cluster import Cluster
>>> from placement_dsl.placement import Placement
>>> ops = [Op(name=n, work=1, attrs={"module": m}) for n, m in [("a", "embed"), ("b", "h.0"), ("c", "h.1")]]
>>> p = Placement(Graph(ops, [("a", "b"), ("b", "c")]), Cluster.stages(2), [0, 0, 1])
>>> export(p, "torch-pipelining").data["split_spec"], export(p, "vllm").text
({'h.1': 'beginning'}, '1,1\\n')
"""
from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from ..errors import SpecError
from ..files import write_atomic
from ..placement import Placement
from . import deepspeed as _deepspeed
from . import megatron as _megatron
from . import pytorch as _torch
from . import vllm as _vllm
from .layers import LayerStages, layer_stages
from .plan import (
    Stage,
    forward_view,
    pipeline_stages,
    reused_modules,
    split_modules,
    split_places,
    stages_of,
    whole_modules,
)


@dataclass(frozen=True)
class Export:
    """What an exporter wrote: the format, the file's ``text`` and the same as ``data``."""

    format: str
    text: str
    data: Any


@dataclass(frozen=True)
class Exporter:
    """One runtime's exporter: ``write(placement, depth, microbatches, schedule) -> (data, text)``."""

    name: str
    runtime: str
    unit: str
    expresses: str
    write: Callable[[Placement, int | None, int, str], tuple[Any, str]]


def _json(data: Any) -> str:
    return json.dumps(data, indent=1) + "\n"


def _csv(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _pipelining(p: Placement, depth: int | None, m: int, s: str) -> tuple[Any, str]:
    data = _torch.split_spec(p, depth, s)
    return data, _json(data)


def _titan(p: Placement, depth: int | None, m: int, s: str) -> tuple[Any, str]:
    data = _torch.module_fqns(p, depth, s)
    return data, _json(data)


def _schedule(p: Placement, depth: int | None, m: int, s: str) -> tuple[Any, str]:
    rows = _torch.schedule_csv(p, m, s)
    return {"schedule": s, "microbatches": m, "ranks": rows}, _csv(rows)


def _megatron_args(p: Placement, depth: int | None, m: int, s: str) -> tuple[Any, str]:
    data = _megatron.megatron(p)
    return data, " ".join(data["args"]) + "\n"


def _deepspeed_parts(p: Placement, depth: int | None, m: int, s: str) -> tuple[Any, str]:
    data = _deepspeed.deepspeed(p)
    return data, _json(data)


def _vllm_env(p: Placement, depth: int | None, m: int, s: str) -> tuple[Any, str]:
    data = _vllm.vllm(p)
    return data, data["VLLM_PP_LAYER_PARTITION"] + "\n"


EXPORTERS: dict[str, Exporter] = {e.name: e for e in (
    Exporter("torch-pipelining", "torch.distributed.pipelining (torch >= 2.4)", "module",
             "split points at module beginnings (any depth)", _pipelining),
    Exporter("torchtitan", "torchtitan 0.1 (module_fqns_per_model_part; pipeline_module_split's rule at "
             "pytorch/torchtitan 02ef790)", "module",
             "top-level modules and entries list.N of top-level ModuleLists per stage", _titan),
    Exporter("megatron", "Megatron-LM core >= 0.13 (--pipeline-model-parallel-layout; parsed by 0.16.1)", "layer",
             "transformer layers per stage, embedding first, loss last", _megatron_args),
    Exporter("deepspeed", "DeepSpeed >= 0.14 (PipelineModule parts)", "layer",
             "layer-index boundaries over [embedding, layers, head]", _deepspeed_parts),
    Exporter("vllm", "vLLM >= 0.6 (VLLM_PP_LAYER_PARTITION)", "layer",
             "decoder layers per rank, embedding first, head last", _vllm_env),
    Exporter("schedule-csv", "torch >= 2.5 (_PipelineScheduleRuntime._load_csv, compute_only)", "stage",
             "GPipe or 1F1B action rows, one stage per rank; interleaved 1F1B, ZB-H1 and ZBV rows (torch 2.13's "
             "orders), v stages per rank round-robin or 2 in a V", _schedule),
)}


def export(placement: Placement, to: str, *, depth: int | None = None, microbatches: int = 4,
           schedule: str = "1f1b") -> Export:
    """``placement`` in the format ``to`` (a key of :data:`EXPORTERS`), refused with the reason if it cannot be run."""
    exporter = EXPORTERS.get(to)
    if exporter is None:
        raise SpecError(f"export format {to!r} is unknown; choose one of {', '.join(EXPORTERS)}")
    if schedule not in _torch.SCHEDULES:
        raise SpecError(f"schedule {schedule!r} is unknown; choose one of {', '.join(_torch.SCHEDULES)}")
    if microbatches < 1 or (depth is not None and depth < 1):
        raise SpecError(f"export: microbatches ({microbatches}) and depth ({depth}) must be >= 1")
    data, text = exporter.write(forward_view(placement), depth, microbatches, schedule)
    return Export(to, text, data)


def write(result: Export, path: str | PurePath) -> None:
    """Write the export's text to ``path`` whole (atomically) or not at all."""
    write_atomic(path, result.text)


__all__ = ["EXPORTERS", "Export", "Exporter", "LayerStages", "Stage", "export", "forward_view", "layer_stages", "pipeline_stages",
           "reused_modules", "split_modules", "split_places", "stages_of", "whole_modules", "write"]
