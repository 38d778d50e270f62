"""The module path and the module calls of an ONNX node, from PyTorch's exporters' names for them.

The ``torch.export``-based exporter writes each node's module stack (``pkg.torch.onnx.name_scopes``), the
modules' own names, but not which call of a module a node belongs to. The TorchScript exporter names a node
``/scope/scope/Op`` and gives the later calls of one scope a suffix: the ``k``-th repeated call of ``block.0``
is ``block.0_k`` (``/block/block.0_1/Gemm``), a name no module of the model has. :class:`Scopes` maps such a
name back to the module and keeps the call apart, so an op's module is the name torch knows and the calls of
each module can be counted (:func:`.module_calls.calls_in_order`).
"""
from __future__ import annotations

import ast
import re
from typing import Any

_CALL = re.compile(r"^(.*)_(\d+)$")


def _chain(parts: list[str]) -> str | None:
    """Scope names joined into a dotted path.

    A part that extends the path so far replaces it (``a``, ``a.b``); one that extends the
    previous part replaces that part (TorchScript's ``/layer1/layer1.0/conv1``: ``layer1.0.conv1``).
    """
    path, last = "", ""
    for part in parts:
        if not part:
            continue
        if path and part.startswith(path + "."):
            path = part
        elif last and part.startswith(last + "."):
            path = path[:len(path) - len(last)] + part
        else:
            path = f"{path}.{part}" if path else part
        last = part
    return path or None


def module_stack(node: Any) -> list[str]:
    """The modules whose calls a node runs in, outermost first, from PyTorch's name-scope metadata (``[]`` without):
    the modules called, so a container that is only iterated (a ``ModuleList``) is none of them."""
    meta = {p.key: p.value for p in node.metadata_props}
    if "pkg.torch.onnx.name_scopes" not in meta:
        return []
    try:
        scopes = [str(s) for s in ast.literal_eval(meta["pkg.torch.onnx.name_scopes"])]
    except (ValueError, SyntaxError):
        scopes = []
    stack: list[str] = []
    for s in scopes[:-1]:  # the module scopes, outermost first, then the node's own name
        if not s or s.startswith("_"):  # the root module; exporter hooks (_empty_nn_module_stack...)
            continue
        if stack and not s.startswith(stack[-1] + "."):
            break
        stack.append(s)
    return stack


def called_stack(node: Any, calls: list[tuple[str, int | None]] | None) -> list[str]:
    """The modules whose calls a node runs in (its ``nn_module_stack``), outermost first, given its
    :meth:`Scopes.stack` ``calls``: PyTorch's name scopes, else one module per scope level of TorchScript's
    ``/scope/scope/Op`` name, a later call ``X_k`` read as ``X``. So a ``ModuleList`` the model iterates
    (``/h.0/ln_1/...``, no ``/h/`` level) is none of them and a ``Sequential`` it calls (``/blocks/blocks.0/...``)
    is; ``[]`` where neither says (a ``module`` entry names one module, not the calls around it)."""
    named = module_stack(node)
    if named or any(p.key == "module" and p.value for p in node.metadata_props):
        return named
    return [path for path, _ in calls or []]


def module_path(node: Any) -> str | None:
    """The module a node comes from: PyTorch's name-scope metadata, a ``module`` entry, or its ``/a/b/Op`` name."""
    meta = {p.key: p.value for p in node.metadata_props}
    stack = module_stack(node)
    if stack:
        return stack[-1]
    if meta.get("module"):
        return str(meta["module"])
    if "/" in node.name:
        return _chain([p for p in node.name.split("/")][:-1])
    return None


class Scopes:
    """The module stacks of a graph's nodes with the call of each module, TorchScript's call names mapped back.

    A TorchScript scope ``X_k`` is the ``k``-th repeated call of ``X`` when the scope ``X`` exists under the same
    parents and no initializer is named after ``X_k`` (a module really named ``conv_1`` beside ``conv`` has its
    own weights, ``conv_1.weight``). A module without weights really named ``X_k`` beside ``X`` reads as a
    repeated call: the exporters then avoid a split point there, which is the safe side.

    >>> from onnx import helper
    >>> nodes = [helper.make_node("Relu", ["a"], ["b"], name="/block/block.0/Relu"),
    ...          helper.make_node("Relu", ["b"], ["c"], name="/block/block.0_1/Relu")]
    >>> Scopes(helper.make_graph(nodes, "g", [], [])).stack(nodes[1])
    [('block', None), ('block.0', 1)]
    """

    def __init__(self, graph: Any) -> None:
        self.scopes = {node.name.rsplit("/", 1)[0] for node in graph.node if "/" in node.name}
        self.owned = {init.name.rsplit(".", k)[0] for init in graph.initializer for k in range(1, init.name.count(".") + 1)}

    def stack(self, node: Any) -> list[tuple[str, int | None]] | None:
        """The modules ``node`` runs in, outermost first, each with the call it belongs to (TorchScript names the
        call of a node's own scope: 0 the first; ``None`` where the exporter does not say); ``[]`` for a node of the
        root module, ``None`` for a node the exporter says nothing about (a rewriter's output, a shape hook's)."""
        named = module_stack(node)
        if named:
            return [(path, None) for path in named]
        meta = {p.key: p.value for p in node.metadata_props}
        if meta.get("module"):
            return [(str(meta["module"]), None)]
        if "/" not in node.name:
            return [] if str(meta.get("pkg.torch.onnx.name_scopes", "")).startswith(("['',", '["",')) else None
        scope = node.name.split("/")[:-1]
        parts, key = [p for p in scope if p], 0
        call = _CALL.match(parts[-1]) if parts else None
        if call and "/".join([*scope[:-1], call.group(1)]) in self.scopes and _chain(parts) not in self.owned:
            parts[-1], key = call.group(1), int(call.group(2))
        out: list[tuple[str, int | None]] = []
        for i in range(1, len(parts) + 1):
            path = _chain(parts[:i])
            if path and (not out or out[-1][0] != path):
                out.append((path, None))
        if out:
            out[-1] = (out[-1][0], key)
        return out
