"""Stages counted in repeated layers, the unit of Megatron-LM, vLLM and DeepSpeed pipelines.

The layer list is found from the module names: the dotted prefix followed by the most distinct
integers (``transformer.h`` of ``transformer.h.N``, ``model.layers`` of ``model.layers.N``,
``encoder.layer`` of ``encoder.layer.N``). Ops before the first layer are the *embedding*, ops
after the last the *head* (final norm, LM head, loss); both must sit on the end stages, where
these runtimes put them, and no stage boundary may cut a layer. Ops of no module (an exporter's
helpers, like the dynamo exporter's ``Split`` of a fused QKV output) go with their neighbours.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import SpecError
from ..placement import Placement
from .plan import Stage, op_name, pipeline_stages


@dataclass(frozen=True)
class LayerStages:
    """A pipeline counted in layers: ``counts[k]`` layers on stage ``k`` of ``len(counts)``."""

    prefix: str
    layers: int
    counts: tuple[int, ...]
    embedding: bool
    head: bool

    @property
    def parts(self) -> list[int]:
        """Layer-index boundaries: stage ``k`` holds layers ``parts[k]`` to ``parts[k + 1] - 1``."""
        out = [0]
        for c in self.counts:
            out.append(out[-1] + c)
        return out


def layer_prefix(paths: list[str]) -> str | None:
    """The prefix of the repeated layer list among module ``paths``: the one with most distinct indices (>= 2)."""
    found: dict[str, set[int]] = {}
    for path in paths:
        parts = path.split(".")
        for i, part in enumerate(parts):
            if part.isdigit() and i:
                found.setdefault(".".join(parts[:i]), set()).add(int(part))
    best = max(found.items(), key=lambda kv: (len(kv[1]), -len(kv[0])), default=None)
    return best[0] if best and len(best[1]) >= 2 else None


def _layer_index(path: str | None, prefix: str) -> int | None:
    if not path or not path.startswith(prefix + "."):
        return None
    head = path[len(prefix) + 1:].split(".")[0]
    return int(head) if head.isdigit() else None


def layer_stages(placement: Placement, runtime: str, virtual: bool = False) -> LayerStages:
    """The layers per stage of ``placement`` for ``runtime``, refusing what it cannot run (see the module);
    ``virtual``: stages round-robin over the ranks (:func:`~placement_dsl.export.plan.pipeline_stages`)."""
    stages = pipeline_stages(placement, runtime, virtual)
    g = placement.graph
    paths = [str(op.attrs.get("module") or "") for op in g.ops]
    prefix = layer_prefix([p for p in paths if p])
    if prefix is None:
        raise SpecError(f"{runtime}: graph {g.name!r} has no repeated layer list in its module paths (like "
                        f"transformer.h.N or model.layers.N); import it with module paths, or export to torch-pipelining")
    stage_of: dict[int, Stage] = {}
    first_layer_of: dict[int, int] = {}
    counts = [0] * len(stages)
    embedding = head = False
    seen_layer = False
    for s in stages:
        for v in s.ops:
            if not paths[v]:  # an op of no module (an exporter's helper) goes with its neighbours
                continue
            i = _layer_index(paths[v], prefix)
            if i is None:
                where = "head" if seen_layer else "embedding"
                end = len(stages) - 1 if seen_layer else 0
                if s.index != end:
                    raise SpecError(f"{runtime}: op {op_name(g.ops[v])!r} of the {where} runs on stage {s.index}; "
                                    f"{runtime} keeps the {where} on stage {end}")
                head, embedding = head or seen_layer, embedding or not seen_layer
                continue
            seen_layer = True
            if i in stage_of and stage_of[i].index != s.index:
                raise SpecError(f"{runtime}: layer '{prefix}.{i}' is cut between stages {stage_of[i].index} and "
                                f"{s.index} (at op {op_name(g.ops[v])!r}); {runtime} splits only between layers")
            if i not in stage_of:
                stage_of[i] = s
                first_layer_of[i] = v
                counts[s.index] += 1
    order = list(stage_of)
    if order != sorted(order) or order != list(range(len(order))):
        raise SpecError(f"{runtime}: the layers of {prefix!r} run in the order {order[:8]}...; expected 0..{len(order) - 1}")
    return LayerStages(prefix, len(order), tuple(counts), embedding, head)
