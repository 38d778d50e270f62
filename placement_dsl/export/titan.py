"""torchtitan's model parts: per stage, the module names its pipeline splitter keeps.

torchtitan builds each stage from a copy of the whole model (``pipeline_module_split`` in
``torchtitan/distributed/pipeline_parallel.py``; the rule read here is that of pytorch/torchtitan at commit
02ef790, the same since ``parallelism.module_fqns_per_model_part`` came in with torchtitan 0.1). Of the model's
own children it keeps

* a child named in the stage's list, whole;
* of a child that is an ``nn.ModuleList`` (or ``nn.ModuleDict``), the entries named ``child.N`` (``layers.3``),
  and no other: the list keeps no entry if none is named, even if the list itself is;

and sets every other child to ``None``. A deeper name keeps nothing ("does not support nested moduledict and
modulelist structures"; earlier versions assert that no name has more than one dot). So a plan is exported only
where each stage is a run of whole top-level modules and whole entries of top-level lists: a split inside a wrapper
module (a Llama's ``model`` holding ``model.layers.N``, GPT-2's ``transformer.h.N``) or inside a list entry (a
block's ``h.0.attn``) is refused in one line naming the module, where an export would give stages silently
missing their modules.

Which children are lists comes from the importers' record of the module calls (``op.attrs["nn_module_stack"]``):
a ``ModuleList`` or ``ModuleDict`` has no ``forward`` of its own, so the model only iterates or indexes it and
never calls it; a child the model calls (a ``Sequential``, a ``LlamaModel``) is kept whole. Of a child the model
never calls the ``torch.export`` importer records the type (``op.attrs["root_container"]``: ``"list"`` for a
``ModuleList`` or ``ModuleDict``, ``"module"`` for an ``nn.Sequential`` the forward iterates or a module whose
children it calls directly). Without that record (an ONNX import) a never-called child whose entries are numbered
is read as a ``ModuleList`` (torchtitan's own models hold their layers in a ``ModuleList`` or a ``ModuleDict`` keyed
by number; an iterated ``nn.Sequential`` would read the same), and one whose entries are named is refused, since a
``ModuleDict`` and a plain module split differently.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import boundaries
from ..errors import SpecError
from ..placement import Placement
from .plan import Stage, check_program_order, need_modules, op_name

RULE = "torchtitan's pipeline_module_split (pytorch/torchtitan 02ef790)"


@dataclass(frozen=True)
class Child:
    """A child of the model's root as torchtitan's splitter sees it: kept whole, or a list split by its entries."""

    name: str
    is_list: bool


def children(placement: Placement, runtime: str = "torchtitan") -> dict[str, Child]:
    """The model's own children that hold ops, each a list or not (see the module), refused where the record is
    missing or cannot tell."""
    need_modules(placement, runtime)
    g = placement.graph
    called = boundaries.called_modules(g)
    if called is None:
        raise SpecError(f"{runtime}: graph {g.name!r} records no module calls (op.attrs['nn_module_stack']), which "
                        f"tell a top-level ModuleList, whose entries torchtitan splits, from a module it keeps whole; "
                        f"import the model with 'placement-dsl import' (torch.export or ONNX)")
    entries: dict[str, set[str]] = {}
    kinds: dict[str, str] = {}
    for op in g.ops:
        parts = str(op.attrs.get("module") or "").split(".")
        if parts[0]:
            entries.setdefault(parts[0], set()).update(parts[1:2])
            if op.attrs.get("root_container"):
                kinds[parts[0]] = str(op.attrs["root_container"])
    out = {}
    for name, inner in entries.items():
        if name in kinds:
            out[name] = Child(name, name not in called and kinds[name] == "list")
            continue
        if name not in called and not all(e.isdigit() for e in inner):
            named = ", ".join(repr(f"{name}.{e}") for e in sorted(inner)[:3])
            raise SpecError(f"{runtime}: module {name!r} is never called and holds named entries ({named}): a "
                            f"ModuleDict, whose entries torchtitan splits, or a module whose children the model calls "
                            f"directly, which it keeps whole, and the module record does not tell which; import the "
                            f"model through torch.export, which records it, or export to torch-pipelining")
        out[name] = Child(name, name not in called)
    return out


def unit_of(path: str, kids: dict[str, Child]) -> str | None:
    """The name torchtitan keeps an op of module ``path`` by: its top-level module, or its entry ``list.N`` of a
    top-level list (``None``: an op of the list itself, glue between its entries)."""
    parts = path.split(".")
    if not kids[parts[0]].is_list:
        return parts[0]
    return ".".join(parts[:2]) if len(parts) > 1 else None


def model_parts(placement: Placement, stages: list[Stage], runtime: str = "torchtitan") -> list[list[str]]:
    """Each stage's names in torchtitan's grammar (top-level modules, entries ``list.N`` of top-level lists), in
    execution order; a stage that begins inside one such unit is refused, naming the module that is cut and why."""
    kids = children(placement, runtime)
    g = placement.graph
    check_program_order(placement, stages, {v: s.index for s in stages for v in s.ops}, runtime)
    seen: dict[str, int] = {}
    parts: list[list[str]] = []
    for s in stages:
        names: list[str] = []
        for v in s.ops:
            path = str(g.ops[v].attrs.get("module") or "")
            unit = unit_of(path, kids) if path else None
            if unit is None:
                continue
            if seen.get(unit, s.index) != s.index:
                raise SpecError(_cut_message(runtime, kids, unit, path, op_name(g.ops[v]), seen[unit], s.index))
            if unit not in seen:
                seen[unit] = s.index
                names.append(unit)
        parts.append(names)
    return parts


def _cut_message(runtime: str, kids: dict[str, Child], unit: str, path: str, op: str, before: int, k: int) -> str:
    top = unit.split(".")[0]
    where = f"module {unit!r} runs on stages {before} and {k} (op {op!r} of {path!r})"
    if kids[top].is_list:
        return (f"{runtime}: {where}, an entry of the top-level list {top!r}; {RULE} keeps each entry of a "
                f"top-level ModuleList whole (nested lists are unsupported): split between entries, or export to "
                f"torch-pipelining")
    inner = [p for p in (".".join(path.split(".")[:2]),) if p != top]
    nested = f", which holds {inner[0]!r}" if inner else ""
    return (f"{runtime}: {where}, a top-level module the model calls{nested}; {RULE} keeps such a module whole or "
            f"drops it, and splits only between the model's own children and between the entries of a top-level "
            f"ModuleList ('layers.N'): hold the split layers as a list of the model's own (as torchtitan's Llama "
            f"does), or export to torch-pipelining")


__all__ = ["RULE", "Child", "children", "model_parts", "unit_of"]
