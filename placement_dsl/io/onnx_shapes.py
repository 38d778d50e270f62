"""Shapes of an ONNX model whose reshapes are computed at run time from other tensors' shapes.

Exporters compute a reshape's target from the input's shape: TorchScript writes
``Shape -> Gather -> Unsqueeze -> Concat -> Reshape`` chains with ``Constant`` nodes (PyTorch's
``nn.MultiheadAttention`` splitting heads), the ``torch.export`` exporter ``Shape``/``Concat``
on symbolic sizes. ONNX shape inference propagates some of these values but not all (no
arithmetic on them, no ``Cast``), and a reshape whose target it does not know leaves every
tensor after it without a shape.

Once the symbolic dimensions are fixed every such value is a constant. :func:`infer` runs shape
inference, evaluates with numpy each node whose inputs are known small values (``Constant``, a
``Shape`` of a tensor whose shape is known, inline initializers, and what follows from them),
substitutes the values into a copy of the model as initializers, and infers again until nothing
new is learnt. The copy only gives shapes: the graph that is imported stays the original one.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np

MAX_ELEMENTS = 4096  # values larger than this (masks, position tables) are not needed for shapes
ROUNDS = 8


def _attr(node: Any, name: str, default: Any = None) -> Any:
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _np_dtype(elem_type: int) -> np.dtype:
    from onnx import helper

    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))


def _constant(node: Any, ins: list[np.ndarray]) -> np.ndarray | None:
    from onnx import numpy_helper

    for a in node.attribute:
        if a.name == "value":
            return numpy_helper.to_array(a.t)
        if a.name in ("value_int", "value_float"):
            return np.array(a.i if a.name == "value_int" else a.f)
        if a.name in ("value_ints", "value_floats"):
            return np.array(list(a.ints) if a.name == "value_ints" else list(a.floats))
    return None


def _axes(node: Any, ins: list[np.ndarray]) -> list[int] | None:
    axes = ins[1] if len(ins) > 1 else _attr(node, "axes")
    return None if axes is None else [int(a) for a in np.asarray(axes).ravel()]


def _unsqueeze(node: Any, ins: list[np.ndarray]) -> np.ndarray:
    axes = _axes(node, ins) or []
    rank = ins[0].ndim + len(axes)
    out = ins[0]
    for a in sorted(a % rank for a in axes):
        out = np.expand_dims(out, a)
    return out


def _squeeze(node: Any, ins: list[np.ndarray]) -> np.ndarray:
    axes = _axes(node, ins)
    return np.squeeze(ins[0], axis=None if axes is None else tuple(a % ins[0].ndim for a in axes))


def _slice(node: Any, ins: list[np.ndarray]) -> np.ndarray:
    data = ins[0]
    if len(ins) >= 3:
        starts, ends = ins[1].ravel(), ins[2].ravel()
        axes = ins[3].ravel() if len(ins) > 3 and ins[3] is not None else np.arange(len(starts))
        steps = ins[4].ravel() if len(ins) > 4 and ins[4] is not None else np.ones(len(starts), dtype=np.int64)
    else:  # opset < 10: attributes
        starts, ends = _attr(node, "starts"), _attr(node, "ends")
        axes, steps = _attr(node, "axes", list(range(len(starts)))), [1] * len(starts)
    index = [slice(None)] * data.ndim
    for s, e, a, k in zip(starts, ends, axes, steps):
        index[int(a) % data.ndim] = slice(int(s), int(e), int(k))
    return data[tuple(index)]


def _reshape(node: Any, ins: list[np.ndarray]) -> np.ndarray:
    shape = [int(d) for d in ins[1].ravel()]
    if not _attr(node, "allowzero", 0):
        shape = [ins[0].shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return ins[0].reshape(shape)


def _divide(node: Any, ins: list[np.ndarray]) -> np.ndarray:
    a, b = ins
    if np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer):
        return (np.trunc(a / b)).astype(np.result_type(a, b))  # ONNX integer division truncates
    return a / b


def _constant_of_shape(node: Any, ins: list[np.ndarray]) -> np.ndarray | None:
    fill = _constant(node, ins) if _attr(node, "value") is not None else np.zeros(1, np.float32)
    shape = [int(d) for d in ins[0].ravel()]
    return None if math.prod(shape) > MAX_ELEMENTS else np.full(shape, fill.ravel()[0], dtype=fill.dtype)


def _shape(node: Any, shape: tuple[int, ...]) -> np.ndarray:
    start, end = _attr(node, "start", 0), _attr(node, "end", None)
    return np.array(shape[start:end], dtype=np.int64)


_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Mod": np.mod, "Pow": np.power, "Equal": np.equal,
    "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal, "GreaterOrEqual": np.greater_equal,
    "And": np.logical_and, "Or": np.logical_or, "Max": np.maximum, "Min": np.minimum,
}
_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Identity": lambda x: x, "Neg": np.negative, "Abs": np.abs, "Not": np.logical_not, "Sqrt": np.sqrt,
    "Floor": np.floor, "Ceil": np.ceil, "Reciprocal": lambda x: 1 / x,
}
_OTHER: dict[str, Callable[[Any, list[np.ndarray]], np.ndarray | None]] = {
    "Constant": _constant, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Slice": _slice, "Reshape": _reshape,
    "Div": _divide,
    "Gather": lambda n, i: np.take(i[0], i[1], axis=_attr(n, "axis", 0)),
    "Concat": lambda n, i: np.concatenate([np.atleast_1d(x) for x in i], axis=_attr(n, "axis", 0)),
    "Cast": lambda n, i: i[0].astype(_np_dtype(_attr(n, "to"))),
    "Range": lambda n, i: np.arange(i[0].item(), i[1].item(), i[2].item(), dtype=i[0].dtype),
    "ConstantOfShape": lambda n, i: _constant_of_shape(n, i),
    "Expand": lambda n, i: np.broadcast_to(i[0], np.broadcast_shapes(i[0].shape, tuple(int(d) for d in i[1]))),
    "Where": lambda n, i: np.where(i[0], i[1], i[2]),
    "Transpose": lambda n, i: np.transpose(i[0], _attr(n, "perm")),
    "Size": lambda n, i: np.array(i[0].size, dtype=np.int64),
}
_FOLDABLE = {"Shape", *_BINARY, *_UNARY, *_OTHER}


def _evaluate(node: Any, ins: list[np.ndarray]) -> np.ndarray | None:
    op = node.op_type
    if op in _BINARY:
        return np.asarray(_BINARY[op](ins[0], ins[1]))
    if op in _UNARY:
        return np.asarray(_UNARY[op](ins[0]))
    return _OTHER[op](node, ins)


def _inline(model: Any) -> dict[str, np.ndarray]:
    """Small initializers stored in the file (not external data)."""
    from onnx import TensorProto, numpy_helper

    out = {}
    for init in model.graph.initializer:
        if init.data_location != TensorProto.EXTERNAL and math.prod(init.dims) <= MAX_ELEMENTS:
            value = _attempt(numpy_helper.to_array, init)
            if value is not None:
                out[init.name] = value
    return out


def _attempt(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)``, or ``None`` when it fails: a value numpy cannot compute stays unknown."""
    try:
        return function(*args)
    except Exception:  # noqa: BLE001 - any failure (bad axes, odd dtypes) leaves the value to shape inference
        return None


def _shapes(graph: Any) -> dict[str, tuple[int, ...]]:
    out = {}
    for vi in (*graph.input, *graph.value_info, *graph.output):
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if tt.HasField("shape") and all(d is not None for d in dims):
            out[vi.name] = tuple(int(d) for d in dims)
    for init in graph.initializer:
        out[init.name] = tuple(int(d) for d in init.dims)
    return out


def _fold(model: Any, shapes: dict[str, tuple[int, ...]], known: dict[str, np.ndarray]) -> bool:
    """Evaluate what can be evaluated (in node order, which is topological); whether anything new was learnt."""
    learnt = False
    for node in model.graph.node:
        if node.op_type not in _FOLDABLE or not node.output or all(o in known for o in node.output if o):
            continue
        inputs = list(node.input)
        if node.op_type == "Shape":
            shape = shapes.get(inputs[0]) or (known[inputs[0]].shape if inputs[0] in known else None)
            value = None if shape is None else _shape(node, shape)
        elif all(not i or i in known for i in inputs):
            value = _attempt(_evaluate, node, [known[i] if i else None for i in inputs])
        else:
            continue
        if value is None or np.asarray(value).size > MAX_ELEMENTS:
            continue
        known[node.output[0]] = np.asarray(value)
        learnt = True
    return learnt


def _substituted(model: Any, known: dict[str, np.ndarray], shape_inputs_only: bool) -> Any:
    """A copy of ``model`` with the known values that nodes still computed read as initializers.

    The nodes computing known values are dropped. With ``shape_inputs_only`` only the values read
    as a shape argument (a reshape's target, an expansion's shape, ...) are substituted.
    """
    from onnx import numpy_helper

    out = copy.deepcopy(model)
    g = out.graph
    inits = {i.name for i in g.initializer}
    computed = [bool(n.output) and all(o in known for o in n.output if o) for n in g.node]
    keep = [n for n, done in zip(g.node, computed) if not done]
    dropped = {o for n, done in zip(g.node, computed) if done for o in n.output}
    read = {i for n in keep for k, i in enumerate(n.input)
            if not shape_inputs_only or k in _SHAPE_INPUTS.get(n.op_type, ())}
    del g.node[:]
    g.node.extend(keep)
    for name, value in known.items():
        if name not in inits and name in read:
            g.initializer.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
    unread = [vi for vi in g.value_info if vi.name not in dropped]
    del g.value_info[:]
    g.value_info.extend(unread)
    return out


_SHAPE_INPUTS = {"Reshape": (1,), "Expand": (1,), "ConstantOfShape": (0,), "Tile": (1,), "Slice": (1, 2, 3, 4),
                 "Unsqueeze": (1,), "Squeeze": (1,), "Pad": (1,), "Split": (1,), "Range": (0, 1, 2), "TopK": (1,),
                 "Resize": (1, 2, 3), "OneHot": (1,), "ReduceMean": (1,), "ReduceSum": (1,), "ReduceMax": (1,)}


def infer(model: Any, run: Callable[[Any], Any]) -> Any:
    """Shapes of ``model`` with its shape computations evaluated; ``run`` is ONNX shape inference.

    Returns the inferred copy: read its ``value_info`` (and initializers) for shapes only. A
    substitution shape inference rejects is retried with the shape arguments alone, then given up
    (the shapes known so far stand).
    """
    inferred = run(model)
    known = _inline(model)
    for _ in range(ROUNDS):
        if not _fold(model, _shapes(inferred.graph), known):
            break
        better = _attempt(run, _substituted(model, known, False)) or _attempt(run, _substituted(model, known, True))
        if better is None:
            break
        inferred = better
    return inferred
