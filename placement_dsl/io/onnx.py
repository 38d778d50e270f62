"""ONNX models as workloads: one op per node (or per layer), costs from tensor shapes.

The model is read without its external weight data (only the shapes of the weights are
needed), its symbolic dimensions are fixed (``batch``, ``seq`` and any others by name), and
ONNX shape inference gives every tensor's shape and element type. Then:

* an edge joins the node producing a tensor to each node consuming it;
* a node's ``out_bytes`` are the bytes of its outputs that other nodes (or the graph's
  outputs) consume, ``activation_bytes`` those of all its outputs;
* ``param_bytes`` come from the initializers a node reads, an initializer read by several
  nodes counted once (at its first reader), an initializer the exporter folded from a parameter
  (a tied weight's transpose, or a weight's transpose once per call of its module) counted as that
  parameter where the graph shows it is one (:mod:`.onnx_params`); nodes computing only from initializers and
  shapes (``Constant``, ``Shape``, a weight's ``Transpose``) are folded away;
* FLOPs and bytes moved come from the shapes for the common ops (``MatMul``/``Gemm``,
  ``Conv``, pooling, attention, normalizations, elementwise, reductions, data movement) and
  the roofline of each device kind turns them into times (:func:`.costs.roofline_work`);
  other ops count one FLOP per output element and are listed in ``meta["estimated"]``;
* the module path of a node (PyTorch's ``pkg.torch.onnx.name_scopes`` metadata, a
  ``module`` metadata entry, or a ``/scope/scope/Op`` node name) is kept in
  ``op.attrs["module"]``, a TorchScript name of a repeated call (``block.0_1``) mapped back to the
  module (:class:`.onnx_modules.Scopes`); ``granularity="layer"`` merges the ops of each module (cut to
  ``depth`` dotted parts) into one op, ``"group"`` keeps the ops but colocates each module's;
* ``op.attrs["shared_modules"]`` records the modules of the op's stack that the program calls more than
  once (runs of the program order apart, a repeated call's name, a module reading its weight again or a
  ``Sequential`` entering a child again with no op between the calls) or that are one object under several
  names (the dynamo exporter's scopes ``enc`` and ``dec`` reading one ``dec.weight`` alike,
  :func:`.module_calls.aliases_in_order`), in the torch importer's format (:mod:`.module_calls`): torch's
  ``pipeline()`` cuts at each call of a split point's module object.

Needs the ``onnx`` package (``pip install 'placement_dsl[onnx]'``).
"""
from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cluster import Cluster
from ..errors import SpecError
from ..graph import Graph, Op
from ..limits import MAX_TOTAL
from ..workload import Workload
from ..zoo.build import default_cluster
from ..zoo.costs import ROOFLINES, Roofline
from .costs import by_granularity, roofline_work
from .formats import importer
from .module_calls import RECORD_VERSION, aliases_in_order, calls_in_order, on_op, record
from .onnx_file import read, weightless
from .onnx_modules import Scopes, called_stack, module_path, module_stack  # noqa: F401 - module_path: this module's API
from .onnx_params import PARAMETER, call_copies, folded_copies, one_value
from .onnx_shapes import MAX_ELEMENTS, infer

BATCH_NAMES = ("batch", "batch_size", "n", "b", "bs", "n_batch")
SEQ_NAMES = ("seq", "sequence", "seq_len", "seqlen", "sequence_length", "s", "t", "tokens", "length", "len")
_FOLD = {"Constant", "Shape", "Size", "ConstantOfShape"}
_VIEWS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"}
_COPIES = {"Transpose", "Concat", "Split", "Slice", "GatherElements", "GatherND", "Pad", "Expand", "Tile", "Cast",
           "Resize", "Upsample", "DepthToSpace", "SpaceToDepth", "ScatterND", "ScatterElements", "CastLike", "Trilu"}
_PER_ELEMENT = {
    "Add": 1, "Sub": 1, "Mul": 1, "Div": 1, "Pow": 1, "Max": 1, "Min": 1, "Sum": 1, "Mean": 1, "Where": 1, "Mod": 1,
    "Equal": 1, "Less": 1, "Greater": 1, "LessOrEqual": 1, "GreaterOrEqual": 1, "And": 1, "Or": 1, "Not": 1,
    "Relu": 1, "LeakyRelu": 2, "PRelu": 2, "Clip": 2, "Neg": 1, "Abs": 1, "Sqrt": 1, "Reciprocal": 1, "Exp": 1,
    "Log": 1, "Floor": 1, "Ceil": 1, "Round": 1, "Sign": 1, "Sigmoid": 4, "HardSigmoid": 3, "HardSwish": 4,
    "Tanh": 4, "Erf": 4, "Sin": 4, "Cos": 4, "Elu": 3, "Selu": 4, "Celu": 4, "Softplus": 3, "Softsign": 3,
    "Gelu": 8, "FastGelu": 8, "BiasGelu": 9, "QuickGelu": 5, "Mish": 8, "Swish": 5, "BiasAdd": 1,
    "Softmax": 5, "LogSoftmax": 6, "BatchNormalization": 2, "InstanceNormalization": 8, "LayerNormalization": 8,
    "SkipLayerNormalization": 9, "SimplifiedLayerNormalization": 6, "SkipSimplifiedLayerNormalization": 7,
    "RMSNormalization": 6, "GroupNormalization": 8, "LpNormalization": 3, "MeanVarianceNormalization": 8,
    "LRN": 6,
}
_REDUCE = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ArgMax", "ArgMin", "GlobalAveragePool",
           "GlobalMaxPool", "GlobalLpPool", "CumSum", "TopK"}


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise SpecError("reading ONNX models needs the onnx package; install it with "
                        "pip install 'placement_dsl[onnx]'") from None
    return onnx


# ---------------------------------------------------------------------------- tensors
@dataclass(frozen=True)
class Tensor:
    """A tensor's shape (``None`` when unknown) and element size in bytes."""

    shape: tuple[int, ...] | None
    itemsize: int

    @property
    def elems(self) -> int:
        """Number of elements (0 when the shape is unknown)."""
        return math.prod(self.shape) if self.shape is not None else 0

    @property
    def bytes(self) -> int:
        return self.elems * self.itemsize


def _itemsize(elem_type: int) -> int:
    from onnx import helper

    try:
        return int(helper.tensor_dtype_to_np_dtype(elem_type).itemsize) or 4
    except (KeyError, ValueError, TypeError):
        return 4


def _from_value_info(vi: Any) -> Tensor:
    tt = vi.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    known = tt.HasField("shape") and all(d is not None for d in dims)
    return Tensor(tuple(int(d) for d in dims) if known else None, _itemsize(tt.elem_type))


def _tensor_table(graph: Any) -> dict[str, Tensor]:
    table = {vi.name: _from_value_info(vi) for vi in (*graph.input, *graph.value_info, *graph.output)}
    for init in graph.initializer:
        table[init.name] = Tensor(tuple(int(d) for d in init.dims), _itemsize(init.data_type))
    return table


# ---------------------------------------------------------------------------- symbolic dimensions
def _dim_value(name: str, batch: int, seq: int | None, dims: Mapping[str, int]) -> int | None:
    """The value of a symbolic dimension: a name, or an expression of names (``seq*batch``, ``s0 + 1``)."""
    if name in dims:
        return int(dims[name])
    if name.isidentifier():
        low = name.lower()
        if low in BATCH_NAMES or "batch" in low:
            return batch
        if seq is not None and (low in SEQ_NAMES or "seq" in low or "sequence" in low):
            return seq
        return None
    try:
        tree = ast.parse(name, mode="eval")
    except SyntaxError:
        return None
    value = _evaluate(tree.body, lambda n: _dim_value(n, batch, seq, dims))
    return value if isinstance(value, int) and value > 0 else None


_ARITHMETIC = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
               ast.FloorDiv: lambda a, b: a // b, ast.Div: lambda a, b: a // b if b and a % b == 0 else None,
               ast.Mod: lambda a, b: a % b if b else None}


def _evaluate(node: ast.AST, name: Any) -> int | None:
    """An integer expression of exporters' symbolic dimensions (``+ - * // / %``), ``None`` if a name is open."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        return name(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        a, b = _evaluate(node.left, name), _evaluate(node.right, name)
        return None if a is None or b is None else _ARITHMETIC[type(node.op)](a, b)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        a = _evaluate(node.operand, name)
        return None if a is None else -a
    return None


def fix_dimensions(model: Any, batch: int = 1, seq: int | None = None,
                   dims: Mapping[str, int] | None = None) -> dict[str, int]:
    """Replace the symbolic dimensions of the graph's tensors by numbers; returns the names fixed.

    ``batch`` fixes names like ``batch``/``N``, ``seq`` names like ``seq``/``sequence_length``,
    ``dims`` any name. A symbolic dimension of a graph input left open is refused, and so is a name in ``dims`` that
    no symbolic dimension has.
    """
    dims, fixed, named = dict(dims or {}), {}, set()
    g = model.graph
    inits = {i.name for i in g.initializer}
    for vi in (*g.input, *g.value_info, *g.output):
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_value") or not d.dim_param:
                continue
            named |= {d.dim_param, *re.findall(r"[A-Za-z_]\w*", d.dim_param)}  # a name, or those of an expression
            value = _dim_value(d.dim_param, batch, seq, dims)
            if value is None and vi.name not in inits and any(vi is x for x in g.input):
                raise SpecError(f"ONNX input {vi.name!r} has the symbolic dimension {d.dim_param!r}; fix it with "
                                f"'placement-dsl import --dim {d.dim_param}=N' (dims={{{d.dim_param!r}: N}} in "
                                "Python), or --batch/--seq when it is a batch or sequence length")
            if value is not None:
                fixed[d.dim_param] = value
                d.dim_value = value
    if unknown := sorted(set(dims) - named):  # a misspelt name fixed nothing, and an open dimension stays open
        raise SpecError(f"--dim {unknown[0]} (dims= in Python): the model has no symbolic dimension {unknown[0]!r} (its symbolic "
                        f"dimensions: {sorted(n for n in named if n.isidentifier())[:8] or 'none'})")
    return fixed


# ---------------------------------------------------------------------------- FLOPs
def _attr(node: Any, name: str, default: Any = None) -> Any:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _matmul(node: Any, ins: list[Tensor], outs: list[Tensor]) -> float | None:
    a = ins[0].shape
    return None if not a else 2.0 * outs[0].elems * a[-1]


def _gemm(node: Any, ins: list[Tensor], outs: list[Tensor]) -> float | None:
    a = ins[0].shape
    if not a or len(a) != 2:
        return None
    k = a[0] if _attr(node, "transA", 0) else a[1]
    return 2.0 * outs[0].elems * k + (outs[0].elems if len(ins) > 2 else 0)


def _conv(node: Any, ins: list[Tensor], outs: list[Tensor]) -> float | None:
    w = ins[1].shape if len(ins) > 1 else None
    if not w:
        return None
    per_out = math.prod(w[1:])
    if node.op_type == "ConvTranspose":
        return 2.0 * ins[0].elems * per_out
    return 2.0 * outs[0].elems * per_out + (outs[0].elems if len(ins) > 2 else 0)


def _pool(node: Any, ins: list[Tensor], outs: list[Tensor]) -> float | None:
    return float(outs[0].elems * math.prod(_attr(node, "kernel_shape", [1])))


def _attention(node: Any, ins: list[Tensor], outs: list[Tensor]) -> float | None:
    """Scores ``Q K^T``, softmax and ``A V``; com.microsoft ``Attention`` adds its QKV projection."""
    q = ins[0].shape
    heads = int(_attr(node, "num_heads", 0) or _attr(node, "q_num_heads", 0) or 1)
    if not q:
        return None
    if node.op_type == "Attention" and node.domain == "com.microsoft":
        w = ins[1].shape if len(ins) > 1 else None
        b, s, hidden = q[0], q[1], (w[1] // 3 if w else q[2])
        return 2.0 * b * s * q[2] * 3 * hidden + 4.0 * b * s * s * hidden + 5.0 * b * heads * s * s
    k = ins[1].shape if len(ins) > 1 and ins[1].shape else q
    if len(q) == 4:  # (B, H, S, D)
        b, h, s, d = q
        return 4.0 * b * h * s * k[2] * d + 5.0 * b * h * s * k[2]
    b, s, hidden = q[0], q[1], q[-1]
    return 4.0 * b * s * k[1] * hidden + 5.0 * b * heads * s * k[1]


def _einsum(node: Any, ins: list[Tensor], outs: list[Tensor]) -> float | None:
    eq = _attr(node, "equation", b"")
    eq = eq.decode() if isinstance(eq, bytes) else str(eq)
    terms = eq.replace(" ", "").split("->")[0].split(",")
    sizes: dict[str, int] = {}
    for term, t in zip(terms, ins):
        if "." in term or t.shape is None or len(term) != len(t.shape):
            return None
        sizes.update(zip(term, t.shape))
    return 2.0 * math.prod(sizes.values())


def _recurrent(node: Any, ins: list[Tensor], outs: list[Tensor]) -> float | None:
    x, w, r = (ins[i].shape if len(ins) > i else None for i in range(3))
    if not (x and w and r):
        return None
    steps, b, dirs, gates_h, hidden = x[0], x[1], w[0], w[1], r[2]
    return 2.0 * steps * b * dirs * gates_h * (x[2] + hidden) + 10.0 * steps * b * dirs * hidden


_SPECIAL = {"MatMul": _matmul, "FusedMatMul": _matmul, "MatMulInteger": _matmul, "Gemm": _gemm, "Conv": _conv,
            "ConvTranspose": _conv, "FusedConv": _conv, "MaxPool": _pool, "AveragePool": _pool, "LpPool": _pool,
            "Attention": _attention, "MultiHeadAttention": _attention, "GroupQueryAttention": _attention,
            "Einsum": _einsum, "LSTM": _recurrent, "GRU": _recurrent, "RNN": _recurrent}


def node_cost(node: Any, ins: list[Tensor], outs: list[Tensor]) -> tuple[float, float, bool]:
    """``(flops, bytes_moved, known)`` of one node from its input and output tensors.

    ``known`` is false when the op type (or a shape it needs) is missing from the table and the
    FLOPs are the one-per-output-element estimate.
    """
    op = node.op_type
    moved = float(sum(t.bytes for t in ins) + sum(t.bytes for t in outs))
    out_elems = sum(t.elems for t in outs)
    if op in _VIEWS:
        return 0.0, 0.0, True
    if op in _COPIES:
        return 0.0, moved, True
    if op == "Gather":  # an embedding lookup reads the rows it returns, not the whole table
        return 0.0, float(sum(t.bytes for t in ins[1:]) + 2 * sum(t.bytes for t in outs)), True
    if op in _SPECIAL:
        flops = _SPECIAL[op](node, ins, outs)
        return (float(out_elems), moved, False) if flops is None else (flops, moved, True)
    if op in _PER_ELEMENT:
        return float(_PER_ELEMENT[op] * out_elems), moved, True
    if op in _REDUCE:
        return float(ins[0].elems if ins else out_elems), moved, True
    return float(out_elems), moved, False


# ---------------------------------------------------------------------------- graph
@dataclass
class _Build:
    """What the node walk collects: ops, edges, and the notes for the workload's meta."""

    table: dict[str, Tensor]
    consumed: set[str]
    static: dict[str, frozenset[str]]
    ops: list[Op]
    edges: list[tuple[str, str]]
    producer: dict[str, str]
    charged: set[str]
    estimated: dict[str, int]
    unshaped: int = 0
    resized: list[str] = field(default_factory=list)  # reshapes whose element count changes
    calls: dict[int, list[tuple[str, int | None]] | None] = field(default_factory=dict)  # each kept node's modules and calls
    shared: dict[str, dict[str, Any]] = field(default_factory=dict)  # modules called more than once


def _node_name(node: Any, i: int, taken: set[str]) -> str:
    name = node.name or f"{node.op_type}_{i}"
    if name in taken:
        name = f"{name}_{i}"
    taken.add(name)
    return name


def _fold(node: Any, b: _Build) -> bool:
    """Fold a node computing only from initializers and shapes; its outputs become static."""
    inputs = [i for i in node.input if i]
    if node.op_type not in _FOLD and not (inputs and all(i in b.static for i in inputs)):
        return False
    reads = [] if node.op_type in ("Shape", "Size") else inputs  # a shape is known, whatever the tensor holds
    derived = frozenset().union(*(b.static.get(i, frozenset()) for i in reads))
    for out in node.output:
        b.static[out] = derived
    return True


def _params(node: Any, b: _Build) -> float:
    """Bytes of the initializers the node reads that no earlier node was charged with."""
    total = 0.0
    for name in node.input:
        for init in sorted(b.static.get(name, ())):
            if init not in b.charged:
                b.charged.add(init)
                total += b.table[init].bytes
    return total


def _add_op(node: Any, name: str, b: _Build, rooflines: tuple[Roofline, ...]) -> None:
    ins = [b.table.get(i, Tensor(None, 4)) for i in node.input if i]
    outs = [b.table.get(o, Tensor(None, 4)) for o in node.output if o]
    b.unshaped += any(t.shape is None for t in outs)
    if node.op_type == "Reshape" and ins and outs and None not in (ins[0].shape, outs[0].shape) and \
            ins[0].elems != outs[0].elems:
        b.resized.append(name)
    flops, moved, known = node_cost(node, ins, outs)
    if not known:
        b.estimated[node.op_type] = b.estimated.get(node.op_type, 0) + 1
    attrs: dict[str, Any] = {"type": node.op_type, "flops": flops, "bytes_moved": moved}
    if node.domain not in ("", "ai.onnx"):
        attrs["domain"] = node.domain
    calls = b.calls.get(id(node)) or []
    if calls:
        attrs["module"] = calls[-1][0]
    stack = called_stack(node, calls)
    if stack:
        attrs["nn_module_stack"] = stack
    if shared := on_op([path for path, _ in calls], b.shared):
        attrs["shared_modules"] = shared
    if outs and outs[0].shape is not None:
        attrs["shape"] = list(outs[0].shape)
    out_bytes = sum(b.table[o].bytes for o in node.output if o in b.consumed and o in b.table)
    b.ops.append(Op(name=name, work=roofline_work(flops, moved, rooflines), param_bytes=_params(node, b),
                    out_bytes=out_bytes, activation_bytes=sum(t.bytes for t in outs), attrs=attrs))
    b.edges.extend((b.producer[i], name) for i in dict.fromkeys(node.input) if i in b.producer)
    b.producer.update({o: name for o in node.output if o})


def _walk(graph: Any, rooflines: tuple[Roofline, ...], shapes: Any = None, folder: Path | None = None) -> _Build:
    """The ops of ``graph``; tensor shapes from ``shapes`` (an inferred copy of it), its own initializers first;
    an initializer folded from a parameter (:mod:`.onnx_params`, external data under ``folder``) charged as it."""
    static = {init.name: frozenset({init.name}) for init in graph.initializer}
    static.update({copy: frozenset({param}) for copy, param in folded_copies(graph, folder).items()})
    table = _tensor_table(shapes if shapes is not None else graph)
    table.update({init.name: Tensor(tuple(int(d) for d in init.dims), _itemsize(init.data_type))
                  for init in graph.initializer})
    _check_sources(graph)
    b = _Build(table, set(), static, [], [], {}, set(), {})
    kept = [(i, node) for i, node in enumerate(graph.node) if not _fold(node, b)]
    b.consumed = {t for _, n in kept for t in n.input} | {o.name for o in graph.output}
    taken: set[str] = set()
    named = [(node, _node_name(node, i, taken)) for i, node in kept]
    scopes = Scopes(graph)
    b.calls = {id(node): scopes.stack(node) for node, _ in named}
    params = {init.name for init in graph.initializer if PARAMETER.match(init.name)}
    known = [node for node, _ in named if b.calls[id(node)] is not None]  # program order, known ops
    calls = calls_in_order([b.calls[id(node)] for node in known],
                           [{p for i in node.input for p in b.static.get(i, ()) if p in params} for node in known])
    varied = {init.name for init in graph.initializer if init.name in params and not one_value(init)}
    names = aliases_in_order([[path for path, _ in b.calls[id(node)]] for node in known],
                             [(node.op_type, {i for i in node.input if i in varied}) for node in known])
    b.shared = record({path: sum(calls.get(q, 0) for q in names.get(path, [path])) for path in calls}, names)
    reads = [((b.calls[id(node)] or [(None, None)])[-1][0], frozenset(p for i in node.input for p in b.static.get(i, ())))
             for node, _ in named]
    one = call_copies(graph, reads, calls, folder)  # a weight the exporter folded once per call of its module
    b.static = {t: frozenset(one.get(p, p) for p in derived) for t, derived in b.static.items()}
    # every producer is known before the first edge: a node reading a later node's output (a cycle, or an
    # unsorted file) keeps its edge, and the graph names the cycle instead of losing the edge
    b.producer = {o: name for node, name in named for o in node.output if o}
    for node, name in named:
        _add_op(node, name, b, rooflines)
    return b


def _check_text(graph: Any) -> None:
    """Refuse names that are not text: protobuf hands a string field with invalid UTF-8 over as bytes."""
    for i, node in enumerate(graph.node):
        for text in (node.name, node.op_type, node.domain, *node.input, *node.output):
            if not isinstance(text, str):
                raise SpecError(f"ONNX node #{i} has the name or tensor {text!r:.40}, which is not UTF-8 text; "
                                "the file is damaged")
    for vi in (*graph.input, *graph.value_info, *graph.output):
        if any(not isinstance(d.dim_param, str) for d in vi.type.tensor_type.shape.dim):
            raise SpecError(f"ONNX tensor {vi.name!r:.40} has a symbolic dimension that is not UTF-8 text; the file "
                            "is damaged")
    for vi in (*graph.input, *graph.value_info, *graph.output, *graph.initializer):
        if not isinstance(vi.name, str):
            raise SpecError(f"ONNX tensor {vi.name!r:.40} has a name that is not UTF-8 text; the file is damaged")


def _check_sources(graph: Any) -> None:
    """Refuse a node input that no node, graph input or initializer provides (a dangling input)."""
    known = {vi.name for vi in graph.input} | {init.name for init in graph.initializer}
    known |= {o for node in graph.node for o in node.output if o}
    for i, node in enumerate(graph.node):
        missing = next((t for t in node.input if t and t not in known), None)
        if missing is not None:
            raise SpecError(f"ONNX node {node.name or f'{node.op_type}_{i}'!r} reads tensor {missing!r}, which no "
                            "node, graph input or initializer provides (a dangling input)")


def _check_dims(graph: Any) -> None:
    """Refuse a declared tensor with a negative dimension, or more bytes than the sane range holds."""
    declared = [(vi.name, [d.dim_value for d in vi.type.tensor_type.shape.dim if d.HasField("dim_value")],
                 vi.type.tensor_type.elem_type) for vi in (*graph.input, *graph.value_info, *graph.output)]
    declared += [(init.name, list(init.dims), init.data_type) for init in graph.initializer]
    for name, dims, elem_type in declared:
        bad = next((d for d in dims if d < 0), None)
        if bad is not None:
            raise SpecError(f"ONNX tensor {name!r} has the dimension {bad} in its shape {dims}; dimensions are >= 0")
        size = math.prod(dims) * _itemsize(elem_type)
        if size > MAX_TOTAL:
            raise SpecError(f"ONNX tensor {name!r} of shape {dims} holds {float(size):.3g} bytes, beyond "
                            f"{MAX_TOTAL:g}; check its dimensions")


def _data_prop(graph: Any) -> bool:
    """Whether ONNX shape inference may propagate values: it treats every 1-D tensor as a shape and spends
    time and memory per element (a 1-D input of 2**20 floats took 0.75 s, one of 2**26 ran out of 6 GB), so
    only while the declared 1-D tensors are shape-sized (:data:`.onnx_shapes.MAX_ELEMENTS`)."""
    for vi in (*graph.input, *graph.value_info, *graph.output):
        dims = vi.type.tensor_type.shape.dim
        if len(dims) == 1 and dims[0].HasField("dim_value") and dims[0].dim_value > MAX_ELEMENTS:
            return False
    return True


def _infer(model: Any) -> tuple[Any, str]:
    """Shapes from ONNX shape inference on a copy of ``model`` without its weights (it serializes its input)."""
    onnx = _onnx()
    model = weightless(model)
    data_prop = _data_prop(model.graph)
    try:
        return infer(model, lambda m: onnx.shape_inference.infer_shapes(m, data_prop=data_prop)), ""
    except Exception as err:  # noqa: BLE001 - a model shape inference cannot handle still imports
        return model, f"shape inference failed ({type(err).__name__}: {str(err)[:120]}); sizes only where declared"


def from_model(model: Any, *, name: str = "onnx", batch: int = 1, seq: int | None = None,
               dims: Mapping[str, int] | None = None, granularity: str = "op", depth: int | None = None,
               cluster: Cluster | None = None, rooflines: tuple[Roofline, ...] = ROOFLINES,
               folder: str | Path | None = None) -> Workload:
    """A workload from an ONNX ``ModelProto`` (changed in place: its symbolic dimensions are fixed).

    Parameters
    ----------
    model
        The model; external weight data need not be loaded.
    name
        The graph's name.
    batch, seq, dims
        Values of the symbolic dimensions (see :func:`fix_dimensions`).
    granularity, depth
        ``"op"`` (one op per node), ``"layer"`` (one op per module path cut to ``depth``
        dotted parts) or ``"group"`` (op granularity, each module's ops colocated).
    cluster
        The cluster (default: the zoo's, four accelerators and a CPU on PCIe).
    rooflines
        One roofline per device kind, turning FLOPs and bytes into ms.
    folder
        Where the model's external data lie (the model file's folder), read only to tell an initializer folded
        from a parameter (a tied weight's transpose) from a weight of its own; ``None``: external data unread.
    """
    _check_text(model.graph)
    fixed = fix_dimensions(model, batch, seq, dims)
    _check_dims(model.graph)
    inferred, problem = _infer(model)
    b = _walk(model.graph, tuple(rooflines), inferred.graph, None if folder is None else Path(folder))
    if not b.ops:
        raise SpecError(f"ONNX model {name!r} has no compute nodes (only constants and shapes); check the file")
    graph = by_granularity(Graph(b.ops, b.edges, name=name), granularity, depth)
    opset = {o.domain or "ai.onnx": int(o.version) for o in model.opset_import}
    meta = {"source": "onnx", "producer": model.producer_name, "opset": opset, "dims": fixed,
            "granularity": granularity, "depth": depth, "estimated": b.estimated, "unshaped_ops": b.unshaped,
            "units": {"time": "ms", "size": "bytes", "bandwidth": "bytes/ms"}, "module_calls": RECORD_VERSION}
    if b.resized:  # TorchScript bakes sizes it traced into constants: the model holds only at those sizes
        problem = "; ".join(filter(None, [problem, (
            f"{len(b.resized)} reshapes change the number of elements (first {b.resized[0]!r}): the model was "
            f"exported with sizes fixed at trace time; import it with the batch and sequence length it was traced "
            f"with (now {fixed})")]))
        meta["resized"] = b.resized
    if problem:
        meta["note"] = problem
    return Workload(graph, cluster or default_cluster(), "onnx", meta)


@importer("onnx", suffixes=(".onnx",), model=True)
def load(path: str | Path, **options: Any) -> Workload:
    """Read an ONNX file without its weights' values and import it (options: see :func:`from_model`).

    The weights, inline or external, are not read (only their shapes, :func:`.onnx_file.read`), except a pair that
    may be a parameter and its folded copies (:mod:`.onnx_params`).
    """
    _onnx()
    path = Path(path)
    try:
        model, _ = read(path)
    except FileNotFoundError:
        raise SpecError(f"cannot read ONNX model {str(path)!r}: no such file") from None
    except Exception as err:  # noqa: BLE001 - WireError, and protobuf's decode errors have no common base
        raise SpecError(f"{str(path)!r} is not an ONNX model ({type(err).__name__}: {str(err)[:120]})") from None
    w = from_model(model, name=options.pop("name", None) or path.stem, folder=path.parent, **options)
    return Workload(w.graph, w.cluster, w.format, {**w.meta, "path": str(path)})
