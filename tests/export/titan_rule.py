"""torchtitan's splitting rule, re-stated to check our exports against: which parameters a stage keeps for its names.

torchtitan (``pipeline_module_split`` in ``torchtitan/distributed/pipeline_parallel.py``, pytorch/torchtitan at
02ef790) copies the whole model per stage; of the root's children it keeps one named in the stage's list, and of a
child that is an ``nn.ModuleList`` or ``nn.ModuleDict`` the entries named ``child.KEY``; every other child is
dropped. Earlier versions assert that no name has more than one dot.
"""
from __future__ import annotations

from placement_dsl.boundaries import scopes
from placement_dsl.graph import Graph, Op
from placement_dsl.placement import Placement


def kept_parameters(model, names: list[str]) -> set[str]:
    """The parameter names of ``model`` a torchtitan stage listing ``names`` keeps."""
    from torch import nn

    keep, out = set(names), set()
    for child, module in model.named_children():
        if isinstance(module, (nn.ModuleList, nn.ModuleDict)):
            entries = {n.split(".", 1)[1] for n in keep if n.startswith(child + ".")}
            for key, entry in module.named_children():
                if key in entries:
                    out |= {f"{child}.{key}.{p}" for p, _ in entry.named_parameters()}
        elif child in keep:
            out |= {f"{child}.{p}" for p, _ in module.named_parameters()}
    return out


def planned_parameters(model, placement: Placement, stage_device: int) -> set[str]:
    """The parameters of the modules whose ops the plan runs on ``stage_device``."""
    on = {str(op.attrs.get("module") or "") for op, d in zip(placement.graph.ops, placement.assign.tolist())
          if d == stage_device}
    return {p for p, _ in model.named_parameters()
            if any(m == p.rsplit(".", 1)[0] or m.startswith(p.rsplit(".", 1)[0] + ".") for m in on if m)}


def split_as_planned(model, placement: Placement, parts: list[list[str]]) -> None:
    """Each exported part keeps, by torchtitan's rule, exactly the parameters of its stage (one stage per device, in
    order), and no name has more than one dot."""
    assert all(name.count(".") <= 1 for part in parts for name in part), parts
    for k, part in enumerate(parts):
        assert kept_parameters(model, part) == planned_parameters(model, placement, k), (k, parts)


def recorded(graph: Graph, lists: tuple[str, ...] = ()) -> Graph:
    """``graph`` with the module calls an importer records and no container types (as an ONNX import leaves it):
    every scope of each op's module path is called, but the ``lists`` (ModuleLists the model iterates)."""
    ops = [Op(name=op.name, work=op.work, out_bytes=op.out_bytes,
              attrs={**{k: v for k, v in op.attrs.items() if k != "root_container"},
                     "nn_module_stack": [s for s in scopes(str(op.attrs.get("module") or "")) if s not in lists]})
           for op in graph.ops]
    return Graph(ops, list(zip((graph.names[u] for u in graph.src.tolist()),
                               (graph.names[v] for v in graph.dst.tolist()))), name=graph.name)


def flattened(graph: Graph, wrapper: str, lists: tuple[str, ...]) -> Graph:
    """:func:`recorded` of ``graph`` with the children of the module ``wrapper`` made the model's own (GPT-2's
    ``transformer.h.N`` as torchtitan's ``h.N``; the wrapper's own ops become the root's)."""
    ops = []
    for op in graph.ops:
        path = str(op.attrs.get("module") or "")
        attrs = {k: v for k, v in op.attrs.items() if k != "module"}
        if path.startswith(wrapper + "."):
            attrs["module"] = path[len(wrapper) + 1:]
        elif path and path != wrapper:
            attrs["module"] = path
        ops.append(Op(name=op.name, work=op.work, out_bytes=op.out_bytes, attrs=attrs))
    edges = list(zip((graph.names[u] for u in graph.src.tolist()), (graph.names[v] for v in graph.dst.tolist())))
    return recorded(Graph(ops, edges, name=graph.name), lists)
