"""PyTorch modules as workloads through ``torch.export``, on the meta device (no weights are made).

``MODULE:FACTORY`` (or ``path/to/file.py:FACTORY``) names a function building the model; it is called under
``torch.device("meta")`` with the keyword arguments it takes among ``batch`` and ``seq`` and
returns ``(module, args)`` or ``(module, args, kwargs)``: the example inputs fix every shape.
The exported graph gives one op per ATen call:

* shapes and element types from each node's ``meta["val"]``, so ``out_bytes`` and activation bytes;
* ``param_bytes`` from the parameter and buffer placeholders, a tensor shared by several
  modules (tied weights) counted once, at its first reader;
* FLOPs and bytes moved from an analytic table over ATen ops (matrix products, convolutions,
  attention, normalizations, elementwise, reductions; views cost nothing), turned into times by
  the roofline of each device kind; ops missing from the table count one FLOP per output
  element and are listed in ``meta["estimated"]``;
* ``op.attrs["nn_module_stack"]`` keeps the module stack of every op and ``op.attrs["module"]``
  its innermost module path, so layers and split points have PyTorch's names;
* ``op.attrs["shared_modules"]`` (only where there is one) maps each module of the op's stack that is one
  ``nn.Module`` object under several names (a tied encoder and decoder, ``self.dec = self.enc``), or that
  the model calls more than once, to ``{"fqns": [every name of the object], "calls": n}``, ``n`` the
  calls of the object under all its names: torch's ``pipeline()`` cuts at each call of a split point's
  object (:func:`placement_dsl.boundaries.reused_modules`);
* ``op.attrs["root_container"]`` (only on an op inside a child of the root that the model never calls) says whether
  that child is an ``nn.ModuleList`` or ``nn.ModuleDict`` (``"list"``) or another module (``"module"``: an
  ``nn.Sequential`` the forward iterates, a module whose children it calls directly), which torchtitan's splitter
  tells apart (:mod:`placement_dsl.export.titan`).

Needs ``torch`` (``pip install 'placement_dsl[torch]'``).
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..cluster import Cluster
from ..errors import SpecError
from ..graph import Graph, Op
from ..workload import Workload
from ..zoo.build import default_cluster
from ..zoo.costs import ROOFLINES, Roofline
from .costs import GRANULARITIES, by_granularity, roofline_work
from .formats import importer
from .module_calls import RECORD_VERSION, on_op, record

_VIEWS = {"view", "_unsafe_view", "reshape", "permute", "transpose", "t", "expand", "unsqueeze", "squeeze",
          "select", "slice", "alias", "detach", "unflatten", "flatten", "split", "chunk", "unbind", "as_strided",
          "dropout", "lift_fresh_copy", "_assert_tensor_metadata", "sym_size", "sym_numel"}
_COPIES = {"contiguous", "clone", "cat", "stack", "_to_copy", "to", "copy", "index_select", "gather", "pad",
           "constant_pad_nd", "repeat", "roll", "index", "masked_fill", "where", "zeros_like", "ones_like", "full",
           "arange", "zeros", "ones", "empty", "scatter", "tril", "triu", "flip"}
_PER_ELEMENT = {"add": 1, "sub": 1, "mul": 1, "div": 1, "neg": 1, "pow": 1, "rsqrt": 2, "sqrt": 1, "exp": 1,
                "log": 1, "abs": 1, "relu": 1, "relu_": 1, "leaky_relu": 2, "hardtanh": 2, "clamp": 2,
                "sigmoid": 4, "tanh": 4, "gelu": 8, "silu": 5, "mish": 8, "hardswish": 4, "softplus": 3,
                "softmax": 5, "_softmax": 5, "log_softmax": 6, "_log_softmax": 6, "layer_norm": 8,
                "native_layer_norm": 8, "group_norm": 8, "native_group_norm": 8, "rms_norm": 6, "batch_norm": 2,
                "_native_batch_norm_legit_no_training": 2, "_native_batch_norm_legit": 4, "native_batch_norm": 4,
                "instance_norm": 8, "eq": 1, "ne": 1, "lt": 1, "gt": 1, "le": 1, "ge": 1, "maximum": 1,
                "minimum": 1, "erf": 4, "cos": 4, "sin": 4, "logical_not": 1, "bitwise_not": 1, "fill": 0}
_REDUCE = {"mean", "sum", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std", "prod", "cumsum",
           "adaptive_avg_pool2d", "adaptive_avg_pool1d", "norm", "linalg_vector_norm", "topk"}


def import_torch() -> Any:
    """The ``torch`` module, imported now; a :class:`SpecError` saying how to install it when it is missing."""
    try:
        import torch
    except ImportError:
        raise SpecError("importing a PyTorch module needs torch; install it with pip install 'placement_dsl[torch]' "
                        "(or export the model to ONNX and import the .onnx file)") from None
    return torch


_torch = import_torch  # the former name, kept for one release


# ---------------------------------------------------------------------------- shapes and FLOPs
def _shape(node: Any) -> tuple[tuple[int, ...], int] | None:
    """The (shape, element size) of a node's tensor value, ``None`` for anything else."""
    val = node.meta.get("val") if hasattr(node, "meta") else None
    if val is None or not hasattr(val, "shape") or not hasattr(val, "element_size"):
        return None
    try:
        return tuple(int(d) for d in val.shape), int(val.element_size())
    except (TypeError, ValueError):  # a symbolic size left open
        return None


def _outputs(node: Any) -> list[tuple[tuple[int, ...], int]]:
    val = node.meta.get("val")
    vals = val if isinstance(val, (tuple, list)) else [val]
    out = []
    for v in vals:
        if hasattr(v, "shape") and hasattr(v, "element_size"):
            out.append((tuple(int(d) for d in v.shape), int(v.element_size())))
    return out


def _elems(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def _aten_flops(name: str, ins: list[tuple[int, ...]], out: int) -> float | None:
    """FLOPs of the ATen op ``name`` from its input shapes and output elements (``None``: not in the table)."""
    if name in ("mm", "bmm", "matmul", "baddbmm") and ins:
        k = ins[1][-2] if name == "baddbmm" and len(ins) > 1 else ins[0][-1]
        return 2.0 * out * k
    if name in ("addmm", "linear") and ins:
        a = ins[1] if name == "addmm" else ins[0]
        return 2.0 * out * a[-1] + (out if len(ins) > 2 else 0)
    if name in ("convolution", "conv1d", "conv2d", "conv3d", "_convolution") and len(ins) > 1:
        return 2.0 * out * _elems(ins[1][1:]) + (out if len(ins) > 2 else 0)
    if "scaled_dot_product" in name and len(ins) > 1:
        q, k = ins[0], ins[1]
        heads_rows = _elems(q[:-1])
        return 4.0 * heads_rows * k[-2] * q[-1] + 5.0 * heads_rows * k[-2]
    if name in ("max_pool2d", "avg_pool2d", "max_pool2d_with_indices", "max_pool1d", "avg_pool1d"):
        return 9.0 * out  # a 3 x 3 window: the kernel size is not kept in the node's shapes
    if name in _PER_ELEMENT:
        return float(_PER_ELEMENT[name] * out)
    if name in _REDUCE and ins:
        return float(_elems(ins[0]))
    return None


def _packet(node: Any) -> str:
    target = node.target
    packet = getattr(target, "_overloadpacket", None)
    name = getattr(packet, "__name__", None) or getattr(target, "__name__", str(target))
    return name.split(".")[-1]


def _cost(node: Any, name: str, ins: list[tuple[tuple[int, ...], int]]) -> tuple[float, float, bool]:
    outs = _outputs(node)
    out_elems = sum(_elems(s) for s, _ in outs)
    moved = float(sum(_elems(s) * e for s, e in ins) + sum(_elems(s) * e for s, e in outs))
    if name in _VIEWS:
        return 0.0, 0.0, True
    if name in _COPIES:
        return 0.0, moved, True
    if name == "embedding":
        return 0.0, float(sum(_elems(s) * e for s, e in ins[1:]) + 2 * sum(_elems(s) * e for s, e in outs)), True
    flops = _aten_flops(name, [s for s, _ in ins], out_elems)
    return (float(out_elems), moved, False) if flops is None else (flops, moved, True)


# ---------------------------------------------------------------------------- graph
def _stack(node: Any) -> list[str]:
    stack = node.meta.get("nn_module_stack") or {}
    return [str(path) for path, _ in stack.values() if path]


def shared_modules(module: Any, ep: Any) -> dict[str, dict[str, Any]]:
    """The modules of ``module`` that one object holds under several names or the exported program calls more than
    once: each such name to ``{"fqns": [all the object's names], "calls": its calls under all of them}``.

    A call is one entry of a node's ``nn_module_stack`` (``torch.export`` keys a module's second call ``path@1``);
    a module with no ATen call counts none.
    """
    names: dict[int, list[str]] = {}
    for fqn, sub in module.named_modules(remove_duplicate=False):
        if fqn:
            names.setdefault(id(sub), []).append(fqn)
    object_of = {fqn: key for key, fqns in names.items() for fqn in fqns}
    calls: dict[int, set[str]] = {}
    for node in ep.graph.nodes:
        for key, value in (node.meta.get("nn_module_stack") or {}).items():
            if value and value[0] in object_of:
                calls.setdefault(object_of[value[0]], set()).add(str(key))
    return record({fqn: len(calls.get(key, ())) for key, fqns in names.items() for fqn in fqns},
                  {fqn: fqns for fqns in names.values() for fqn in fqns})


class _Walk:
    """The exported graph's nodes turned into ops and edges."""

    def __init__(self, ep: Any, rooflines: tuple[Roofline, ...], shared: dict[str, dict[str, Any]] | None = None,
                 containers: dict[str, str] | None = None):
        sig = ep.graph_signature
        self.shared = shared or {}
        self.containers = containers or {}
        owned = {**sig.inputs_to_parameters, **sig.inputs_to_buffers}
        self.param_of = {ph: id(ep.state_dict.get(fqn, fqn)) for ph, fqn in owned.items()}
        self.rooflines = rooflines
        self.producer: dict[str, str] = {}
        self.charged: set[int] = set()
        self.ops: list[Op] = []
        self.edges: list[tuple[str, str]] = []
        self.estimated: dict[str, int] = {}
        self.users = {n.name: len(n.users) for n in ep.graph.nodes}

    def node(self, node: Any) -> None:
        if node.op != "call_function":
            return
        inputs = list(node.all_input_nodes)
        if getattr(node.target, "__name__", "") == "getitem":  # a tuple output's part: the producing op's
            self.producer[node.name] = self.producer.get(inputs[0].name, "") if inputs else ""
            return
        name = _packet(node)
        ins = [s for s in (_shape(n) for n in inputs) if s is not None]
        flops, moved, known = _cost(node, name, ins)
        if not known:
            self.estimated[name] = self.estimated.get(name, 0) + 1
        self._add(node, name, inputs, flops, moved)

    def _params(self, inputs: list[Any]) -> float:
        total = 0.0
        for n in inputs:
            key = self.param_of.get(n.name)
            if key is not None and key not in self.charged and _shape(n) is not None:
                self.charged.add(key)
                shape, size = _shape(n)
                total += _elems(shape) * size
        return total

    def _add(self, node: Any, name: str, inputs: list[Any], flops: float, moved: float) -> None:
        outs = _outputs(node)
        out_bytes = float(sum(_elems(s) * e for s, e in outs))
        stack = _stack(node)
        attrs: dict[str, Any] = {"type": name, "flops": flops, "bytes_moved": moved, "nn_module_stack": stack}
        if stack:
            attrs["module"] = stack[-1]
        if shared := on_op(stack, self.shared):
            attrs["shared_modules"] = shared
        top = stack[0].split(".")[0] if stack else ""
        if top and stack[0] != top and top in self.containers:  # inside a child of the root never called
            attrs["root_container"] = self.containers[top]
        if outs:
            attrs["shape"] = list(outs[0][0])
        self.ops.append(Op(name=node.name, work=roofline_work(flops, moved, self.rooflines),
                           param_bytes=self._params(inputs), out_bytes=out_bytes if self.users[node.name] else 0.0,
                           activation_bytes=out_bytes, attrs=attrs))
        for src in dict.fromkeys(self.producer.get(n.name) for n in inputs):
            if src:
                self.edges.append((src, node.name))
        self.producer[node.name] = node.name


def from_module(module: Any, args: tuple, kwargs: Mapping[str, Any] | None = None, *, name: str = "module",
                granularity: str = "op", depth: int | None = None, cluster: Cluster | None = None,
                rooflines: tuple[Roofline, ...] = ROOFLINES) -> Workload:
    """A workload from ``torch.export.export(module, args, kwargs)`` (options as in :func:`.onnx.from_model`)."""
    torch = import_torch()
    if granularity not in GRANULARITIES:
        raise SpecError(f"torch import: granularity {granularity!r} is not one of {list(GRANULARITIES)}")
    try:
        ep = torch.export.export(module, tuple(args), dict(kwargs or {}), strict=False)
    except Exception as err:  # noqa: BLE001 - export failures come in many types
        raise SpecError(f"torch.export could not trace {name!r}: {type(err).__name__}: {str(err)[:200]}; check "
                        "that the factory's example inputs match the module's forward") from None
    lists = (torch.nn.ModuleList, torch.nn.ModuleDict)
    containers = {name: "list" if isinstance(child, lists) else "module" for name, child in module.named_children()}
    walk = _Walk(ep, tuple(rooflines), shared_modules(module, ep), containers)
    for node in ep.graph.nodes:
        walk.node(node)
    if not walk.ops:
        raise SpecError(f"module {name!r} exported no ATen calls; check the factory's module")
    graph = by_granularity(Graph(walk.ops, walk.edges, name=name), granularity, depth)
    meta = {"source": "torch.export", "torch": torch.__version__, "granularity": granularity, "depth": depth,
            "estimated": walk.estimated, "units": {"time": "ms", "size": "bytes", "bandwidth": "bytes/ms"},
            "module_calls": RECORD_VERSION}
    return Workload(graph, cluster or default_cluster(), "torch", meta)


# ---------------------------------------------------------------------------- factories
def factory(spec: str) -> Callable[..., Any]:
    """The function ``FACTORY`` of module ``MODULE`` named by ``MODULE:FACTORY``."""
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise SpecError(f"{spec!r} is not MODULE:FACTORY (e.g. mypkg.models:make_gpt) nor an .onnx file")
    try:
        module = _from_file(mod_name) if mod_name.endswith(".py") else importlib.import_module(mod_name)
    except ImportError as err:
        raise SpecError(f"cannot import module {mod_name!r} of {spec!r}: {err}; check the name and PYTHONPATH") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise SpecError(f"module {mod_name!r} has no function {attr!r}; name the factory returning (module, args)")
    return fn


def _from_file(path: str) -> Any:
    """The Python file ``path`` as a module named after it, kept in ``sys.modules`` (so a spawned process finds
    what the file defines); a missing file is an ImportError."""
    file = Path(path)
    if not file.is_file():
        raise ImportError(f"no file {path!r}")
    name = file.stem
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(file.resolve()):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file.resolve())
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - a model file may fail in many ways
        del sys.modules[name]
        raise ImportError(f"{type(err).__name__}: {str(err)[:200]}") from None
    return module


def factory_dims(fn: Callable[..., Any], batch: int | None, seq: int | None) -> tuple[dict[str, int], dict[str, Any]]:
    """The keyword arguments ``fn`` is called with, and the dimensions it builds the model at.

    A dimension given (``batch``, ``seq`` not ``None``) is passed where the factory takes it; one not given is
    left to the factory's own default (its example input's batch: a model whose forward branches on
    ``x.shape[0]`` is traced as its author built it), and a ``batch`` the factory requires without a default is
    1. The second mapping names each dimension the factory takes at the value it is built at (its default, where
    that is a number)."""
    wanted = inspect.signature(fn).parameters
    given = {k: v for k, v in (("batch", batch), ("seq", seq)) if k in wanted and v is not None}
    if batch is None and "batch" in wanted and wanted["batch"].default is inspect.Parameter.empty:
        given["batch"] = 1
    built_at = {k: given.get(k, wanted[k].default) for k in ("batch", "seq") if k in wanted}
    return given, {k: v for k, v in built_at.items() if isinstance(v, int) and not isinstance(v, bool)}


@importer("torch", model=True, spec=True)
def load(spec: str, *, batch: int | None = None, seq: int | None = None, **options: Any) -> Workload:
    """Build the model of ``MODULE:FACTORY`` on the meta device and import it (see the module's documentation).

    ``batch`` and ``seq`` (``None``: the factory's own defaults, :func:`factory_dims`) are passed where the
    factory takes them; ``meta["dims"]`` records the dimensions the model was built at."""
    fn = factory(spec)
    torch = import_torch()
    given, dims = factory_dims(fn, batch, seq)
    built, note = _build(torch, fn, given, spec)
    if not isinstance(built, tuple) or len(built) not in (2, 3):
        raise SpecError(f"factory {spec!r} must return (module, args) or (module, args, kwargs), "
                        f"got {type(built).__name__}")
    module, args, kwargs = (*built, {}) if len(built) == 2 else built
    args = args if isinstance(args, tuple) else (args,)
    w = from_module(module, args, kwargs, name=options.pop("name", None) or spec.partition(":")[2], **options)
    meta = {**w.meta, "factory": spec, "dims": dims, **({"note": note} if note else {})}
    return Workload(w.graph, w.cluster, w.format, meta)


def _build(torch: Any, fn: Callable[..., Any], given: dict[str, int], spec: str) -> tuple[Any, str | None]:
    """``fn(**given)`` on the meta device, else (a factory that computes with tensor data, e.g. torchvision's
    RegNet widths) on the default device, with a note saying so; a factory failing on both is a
    :class:`SpecError` naming it and what it raised."""
    try:
        with torch.device("meta"):
            return fn(**given), None
    except Exception as err:  # noqa: BLE001 - a user's factory may fail in many ways
        on_meta = " ".join(f"{type(err).__name__}: {err}".split())[:160]
    try:
        built = fn(**given)
    except Exception as err:  # noqa: BLE001
        detail = " ".join(f"{type(err).__name__}: {err}".split())[:160]
        raise SpecError(f"factory {spec!r} failed ({detail}); on the meta device it raised {on_meta}; fix the "
                        "factory so that it returns (module, args)") from None
    return built, (f"built with weights on {torch.get_default_device()}: on the meta device the factory raised "
                   f"{on_meta}")
