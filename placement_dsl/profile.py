"""Measured module costs of a PyTorch model: forward, backward, input-gradient B and weight-gradient W.

:func:`profile_module` runs the model once with forward hooks to record every call of the
modules it times (with its inputs), then times each call alone on the device, in turns (each of
``warmup + repeat`` rounds runs every call once, so that a burst of other work on the machine slows
one round of every call, not every run of one), and keeps each call's fastest of the last ``repeat``
rounds (the one least disturbed by other work on the machine; a median would measure the machine's
load as much as the module):

* ``forward_ms``: the module's forward with autograd recording, as a training step runs it;
* ``backward_ms``: the gradients of the call's outputs with respect to its floating-point
  inputs and its parameters together (one backward pass);
* ``input_grad_ms`` (B) and ``weight_grad_ms`` (W): the gradients with respect to the inputs
  alone and to the parameters alone. Torch's autograd computes each as its own backward pass
  through the module, so the work shared by both (a weight's gradient needs the gradient of
  the layer after it) is paid in each: ``B + W >= backward``. A call with no floating-point
  input (an embedding's token ids) has B = 0, a module without parameters W = 0.

With ``pipelined=True`` the modules are timed as ``torch.distributed.pipelining`` runs them: the
forward through the stage module ``pipeline()`` builds (interpreted ``torch.export`` submodules), B
and W through torch's split backward (``stage_backward_input`` then ``stage_backward_weight``, as
its zero-bubble schedules run them; the backward stays whole, as 1F1B and GPipe run it), which is
what its stages pay; an eager profile misses both (a small MLP's blocks: 2-6x the eager forward,
and B + W 2-3x the eager backward). :func:`split_backward` gives rows whose backward is B + W, for
a training graph of a zero-bubble run.

A module called several times (one ``relu`` per block) is timed for every call, summed.
Which modules: those the forward calls, at most ``depth`` dotted parts deep, that call no
other such module (``depth=None``: the innermost modules called). Ops outside them (a
container's own glue) are left to the calibrated roofline (:func:`placement_dsl.io.costs.apply_costs`).

:func:`write_profile` writes the rows as the CSV ``import --costs`` reads (``op,kind,ms``, the
forward, plus the backward columns, which it keeps for ``--training`` through
:func:`with_measured_backward`); :func:`training_graph` gives a workload's training graph whose
backward ops carry the measured backward times, and
:func:`calibration` (:mod:`placement_dsl.calibrate`, whose names this module gives too) compares predicted
with measured stage times.

Needs ``torch`` (``pip install 'placement_dsl[torch]'``).
"""
from __future__ import annotations

import csv
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from .calibrate import (
    LinkTime,
    RunCosts,
    StageFit,
    affine_of,
    calibrated,
    calibration,
    calibration_table,
    fit_link,
    fit_overhead,
    fit_slowdown_and_overhead,
    idle_pipeline,
    ping_pong,
    runtime_overhead,
    scale_of,
    schedule_scales,
    stage_costs_of,
)
from .calibration_file import calibration_dict, read_calibration, write_calibration
from .errors import SpecError
from .files import write_atomic
from .graph import Graph
from .io.costs import enclosing, leaves, profile_text, rounded
from .io.torch_export import factory, factory_dims, import_torch
from .zoo.training import with_backward

DEVICES = ("cpu", "cuda")
COLUMNS = ("op", "kind", "ms", "backward_ms", "input_grad_ms", "weight_grad_ms", "calls")
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}  # elapsed time; the process's CPU time


@dataclass(frozen=True)
class ModuleTime:
    """One module's measured times per call of the forward it is timed in, in ms (summed over its calls)."""

    module: str
    forward_ms: float
    backward_ms: float
    input_grad_ms: float
    weight_grad_ms: float
    calls: int


# ---------------------------------------------------------------------------- building the model
def build(spec: str, *, batch: int | None = None, seq: int | None = None, device: str = "cpu", seed: int = 0
          ) -> tuple[Any, tuple, dict[str, Any]]:
    """The model of ``MODULE:FACTORY`` (or ``path/to/file.py:FACTORY``) built on ``device`` with seed ``seed``,
    at ``batch`` and ``seq`` where given and else at the factory's own defaults, as the import builds it
    (:func:`placement_dsl.io.torch_export.factory_dims`)."""
    torch = import_torch()
    dev = _device(torch, device)
    fn = factory(spec)
    given, _ = factory_dims(fn, batch, seq)
    torch.manual_seed(seed)
    with dev:
        built = fn(**given)
    if not isinstance(built, tuple) or len(built) not in (2, 3):
        raise SpecError(f"factory {spec!r} must return (module, args) or (module, args, kwargs), "
                        f"got {type(built).__name__}")
    module, args, kwargs = (*built, {}) if len(built) == 2 else built
    return module, (args if isinstance(args, tuple) else (args,)), dict(kwargs)


def _device(torch: Any, device: str) -> Any:
    if device not in DEVICES:
        raise SpecError(f"profile: --device {device!r} is not one of {list(DEVICES)}")
    if device == "cuda" and not torch.cuda.is_available():
        raise SpecError("profile: --device cuda, but torch sees no CUDA device; profile with --device cpu")
    return torch.device(device)


# ---------------------------------------------------------------------------- recording the calls
def _chosen(calls: Mapping[str, list], depth: int | None) -> list[str]:
    """The called modules at most ``depth`` parts deep that call no other such module, in call order."""
    within = [m for m in calls if m and (depth is None or m.count(".") + 1 <= depth)]
    return [m for m in within if not any(o != m and o.startswith(m + ".") for o in within)]


def _record(torch: Any, module: Any, args: tuple, kwargs: Mapping[str, Any]) -> dict[str, list]:
    """Every module call of one forward: FQN -> [(args, kwargs), ...] (tensors detached)."""
    calls: dict[str, list] = {}
    handles = []

    def keep(name: str) -> Any:
        def hook(_mod: Any, a: tuple, kw: dict) -> None:
            det = torch.utils._pytree.tree_map(lambda t: t.detach() if torch.is_tensor(t) else t, (a, kw))
            calls.setdefault(name, []).append(det)
        return hook

    for name, sub in module.named_modules():
        if name:
            handles.append(sub.register_forward_pre_hook(keep(name), with_kwargs=True))
    try:
        with torch.no_grad():
            module(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return calls


# ---------------------------------------------------------------------------- timing the calls in turns
def _sampler(torch: Any, device: Any, sub: Any, call: tuple, clock: Any = time.perf_counter, pipelined: bool = False
             ) -> Callable[[], tuple[float, float, float, float]]:
    """One run of each of the (forward, backward, B, W) timings of one recorded call of ``sub``, in ms (B and W as
    torch's split backward runs them when ``pipelined``); 0 for a gradient the call does not have."""
    a, kw = call
    params = [p for p in sub.parameters() if p.requires_grad]

    def inputs() -> tuple[tuple, dict, list]:
        def fresh(t: Any) -> Any:
            if torch.is_tensor(t) and t.is_floating_point():
                return t.clone().requires_grad_(True)
            return t
        a2, kw2 = torch.utils._pytree.tree_map(fresh, (a, kw))
        return a2, kw2, [t for t in _tensors(torch, (a2, kw2)) if t.requires_grad]

    def timed(fn: Callable[[], Any]) -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = clock()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return 1e3 * (clock() - start)

    def forward() -> float:
        a2, kw2, _ = inputs()
        return timed(lambda: sub(*a2, **kw2))

    def grads(which: str) -> float:
        a2, kw2, ins = inputs()
        outs = [t for t in _tensors(torch, sub(*a2, **kw2)) if t.requires_grad]
        wrt = (ins if which != "W" else []) + (params if which != "B" else [])
        if not outs or not wrt:
            return 0.0
        seeds = [torch.ones_like(t) for t in outs]
        return timed(lambda: torch.autograd.grad(outs, wrt, seeds, allow_unused=True))

    def once() -> tuple[float, float, float, float]:
        if pipelined:  # the whole backward as 1F1B and GPipe run it; B and W as the zero-bubble schedules split it
            return (forward(), grads("BW"), *_split_backward_once(torch, device, sub, inputs, params, clock))
        return forward(), grads("BW"), grads("B"), grads("W")

    return once


def _tensors(torch: Any, value: Any) -> list:
    return [t for t in torch.utils._pytree.tree_leaves(value) if torch.is_tensor(t)]


def _split_backward_once(torch: Any, device: Any, sub: Any, inputs: Any, params: list, clock: Any
                         ) -> tuple[float, float]:
    """(B, W) ms of one run of ``sub``'s backward through torch's split backward (``stage_backward_input``, then
    ``stage_backward_weight`` over the parameter groups the first found), as a zero-bubble stage runs them. A call
    whose inputs need no gradient (token ids), or without parameters, has nothing to split: its one gradient is timed
    by autograd."""
    from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight

    a2, kw2, ins = inputs()
    outs = [t for t in _tensors(torch, sub(*a2, **kw2)) if t.requires_grad]
    if not outs:
        return 0.0, 0.0
    outs = [t.clone() if t._is_view() else t for t in outs]  # torch detaches a stage's outputs in place
    seeds = [torch.ones_like(t) for t in outs]
    start = clock()
    if ins and params:
        _, groups = stage_backward_input(outs, seeds, ins, iter(params))
    elif ins:  # nothing to split: the input gradient is the backward
        torch.autograd.grad(outs, ins, seeds, allow_unused=True)
    middle = clock()
    if ins and params:
        stage_backward_weight(iter(params), groups, retain_graph=False)
    elif params:
        torch.autograd.grad(outs, params, seeds, allow_unused=True)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    end = clock()
    return (1e3 * (middle - start) if ins else 0.0), (1e3 * (end - middle) if params else 0.0)


def _fastest_in_turns(samplers: Sequence[Callable[[], tuple[float, ...]]], repeat: int, warmup: int
                      ) -> list[tuple[float, ...]]:
    """Each sampler's fastest run of each timing over ``repeat`` rounds after ``warmup``, every round running every
    sampler once, in order. A burst of other work on a shared machine then slows one round of every call, which the
    other rounds outrun, rather than every run of the call timed while it lasted: timed one call after the other,
    the last residual block of the example CNN (``blocks.5``) was once profiled at about 11 ms where 13 other
    profiles read 6.9-8.6 ms, and the split whose last stage it is was priced 23-45 % over what its rank measured.

    >>> runs = iter([(1.0, 2.0), (5.0, 5.0), (3.0, 1.0), (4.0, 6.0), (2.0, 9.0), (6.0, 3.0)])
    >>> _fastest_in_turns([lambda: next(runs), lambda: next(runs)], repeat=2, warmup=1)
    [(2.0, 1.0), (4.0, 3.0)]
    """
    fastest: list[tuple[float, ...] | None] = [None] * len(samplers)
    for i in range(warmup + repeat):
        for k, sample in enumerate(samplers):
            times = sample()
            if i >= warmup:
                was = fastest[k]
                fastest[k] = times if was is None else tuple(map(min, was, times))
    return [t for t in fastest if t is not None]


def split_backward(rows: Sequence[ModuleTime]) -> list[ModuleTime]:
    """``rows`` with each backward the sum of its B and W: the backward a zero-bubble schedule runs, in two actions.

    >>> split_backward([ModuleTime("h.0", 1.0, 2.0, 1.5, 1.25, 1)])[0].backward_ms
    2.75
    """
    return [ModuleTime(r.module, r.forward_ms, r.input_grad_ms + r.weight_grad_ms, r.input_grad_ms, r.weight_grad_ms,
                       r.calls) for r in rows]


def _merge_calls(rows: list[ModuleTime]) -> list[ModuleTime]:
    """Rows of one module's later calls (``act@1``: ``torch.export`` unflattens each call as a module of its own)
    added to the module's own row, as an eager profile counts them."""
    merged: dict[str, ModuleTime] = {}
    for r in rows:
        name = re.sub(r"@\d+", "", r.module)
        was = merged.get(name)
        merged[name] = ModuleTime(name, r.forward_ms, r.backward_ms, r.input_grad_ms, r.weight_grad_ms, r.calls) \
            if was is None else ModuleTime(name, was.forward_ms + r.forward_ms, was.backward_ms + r.backward_ms,
                                           was.input_grad_ms + r.input_grad_ms, was.weight_grad_ms + r.weight_grad_ms,
                                           was.calls + r.calls)
    return list(merged.values())


def _pipelined(torch: Any, module: Any, args: tuple, kwargs: Mapping[str, Any]) -> Any:
    """``module`` as ``torch.distributed.pipelining.pipeline`` runs it: the one stage module of an unsplit pipe, whose
    submodules (interpreted ``torch.export`` modules, named as in ``module``) cost more per op than eager ones."""
    if kwargs:
        raise SpecError(f"profile: a pipelined profile takes positional inputs only, got keyword inputs {sorted(kwargs)}")
    from torch.distributed.pipelining import pipeline

    return pipeline(module, tuple(args)).get_stage_module(0)


def profile_module(module: Any, args: tuple, kwargs: Mapping[str, Any] | None = None, *, depth: int | None = None,
                   device: str = "cpu", repeat: int = 5, warmup: int = 2, threads: int | None = 1,
                   clock: str = "wall", pipelined: bool = False) -> list[ModuleTime]:
    """Time the modules of ``module`` called by ``module(*args, **kwargs)`` (see the module's documentation).

    ``clock``: ``"wall"`` (elapsed time) or ``"cpu"`` (the process's CPU time: on a CPU shared with other work, what
    the module costs rather than how long the machine let it run; ``device="cpu"`` only). ``pipelined``: the modules
    as ``torch.distributed.pipelining`` runs them: the forward through ``pipeline()``'s stage module (its submodules
    are interpreted ``torch.export`` graphs, 2-6x an eager module's time on small layers), the backward whole (as
    1F1B and GPipe run it) and B and W through its split backward (``stage_backward_input`` walks the stage's
    autograd graph in Python for ``stage_backward_weight``; ZB-H1 and ZBV): the costs its stages pay and an eager
    profile misses."""
    torch = import_torch()
    dev = _device(torch, device)
    if clock not in CLOCKS or (clock == "cpu" and device != "cpu"):
        raise SpecError(f"profile: clock {clock!r} is not one of {list(CLOCKS)} (cpu only with --device cpu)")
    if repeat < 1 or warmup < 0 or (depth is not None and depth < 1) or (threads is not None and threads < 1):
        raise SpecError(f"profile: repeat ({repeat}) and threads ({threads}) must be >= 1, warmup ({warmup}) >= 0, "
                        f"depth ({depth}) >= 1")
    if threads is not None:
        torch.set_num_threads(threads)
    module = module.to(dev).train()
    args, kwargs = torch.utils._pytree.tree_map(lambda t: t.to(dev) if torch.is_tensor(t) else t,
                                                (tuple(args), dict(kwargs or {})))
    if pipelined:
        module = _pipelined(torch, module, args, kwargs)
    calls = _record(torch, module, args, kwargs)
    subs = dict(module.named_modules())
    timed = [(name, _sampler(torch, dev, subs[name], call, CLOCKS[clock], pipelined))
             for name in _chosen(calls, depth) for call in calls[name]]
    fastest = _fastest_in_turns([sample for _, sample in timed], repeat, warmup)
    rows = []
    for name in dict.fromkeys(name for name, _ in timed):
        times = [t for (n, _), t in zip(timed, fastest) if n == name]
        f, b, bi, bw = (sum(t[i] for t in times) for i in range(4))
        rows.append(ModuleTime(name, f, b, bi, bw, len(times)))
    if pipelined:
        rows = _merge_calls(rows)
    if not rows:
        raise SpecError("profile: the model's forward calls no submodule; profile a model built of modules")
    return rows


# ---------------------------------------------------------------------------- files
def profile_csv(rows: Sequence[ModuleTime], kind: str, note: str = "") -> str:
    """The rows as the CSV ``placement-dsl import --costs`` reads (one ``# note`` line first)."""
    lines = [f"# {note}"] if note else []
    lines.append(",".join(COLUMNS))
    for r in rows:
        lines.append(",".join([r.module, kind, *(f"{rounded(v)}" for v in (r.forward_ms, r.backward_ms,
                                                                            r.input_grad_ms, r.weight_grad_ms)),
                               str(r.calls)]))
    return "\n".join(lines) + "\n"


def write_profile(rows: Sequence[ModuleTime], path: str | PurePath, kind: str, note: str = "") -> None:
    """Write :func:`profile_csv` to ``path`` whole (atomically)."""
    write_atomic(path, profile_csv(rows, kind, note))


# ---------------------------------------------------------------------------- backward times and calibration
def _shares(graph: Graph, module: str, kind: str) -> dict[int, float]:
    """The forward ops of ``module`` (and its submodules) with their share of its time, by their ``kind`` time."""
    def under(outer: str) -> list[int]:  # a later call's layer (``relu_1``) is the module it calls
        return [i for i, op in enumerate(graph.ops) if not op.backward
                and (p := op.attrs.get("call_of") or op.attrs.get("module")) and (p == outer or p.startswith(outer + "."))]

    members = under(module)
    if not members:  # a submodule below the workload's ops (a layer imported with --depth): the op enclosing it
        outer = enclosing(module, leaves(graph))
        members = under(outer) if outer else []
    times = [graph.ops[i].time_on(kind) for i in members]
    times = [t if t < float("inf") else 0.0 for t in times]
    total = sum(times)
    return {i: (t / total if total > 0 else 1.0 / len(members)) for i, t in zip(members, times)}


def with_measured_backward(graph: Graph, rows: Sequence[ModuleTime], kind: str) -> Graph:
    """``graph`` whose forward ops carry the measured backward time in ``attrs["backward_work"][kind]``.

    Each module's ``backward_ms`` is shared over its forward ops in proportion to their forward
    times on ``kind``; :func:`placement_dsl.zoo.training.with_backward` (``--training``) gives their
    backward ops these times, and the other backward ops twice their forward time.
    """
    backward: dict[int, float] = {}
    for r in rows:
        shares = _shares(graph, r.module, kind)
        if not shares:
            raise SpecError(f"profile: module {r.module!r} has no op in graph {graph.name!r}; profile the model "
                            f"the workload was imported from")
        for i, share in shares.items():
            backward[i] = backward.get(i, 0.0) + r.backward_ms * share
    ops = []
    for i, op in enumerate(graph.ops):
        if i in backward:
            work = {**op.attrs.get("backward_work", {}), kind: rounded(backward[i])}
            op = op.model_copy(update={"attrs": {**op.attrs, "backward_work": work}})
        ops.append(op)
    return graph.replace(ops=ops)


def training_graph(graph: Graph, rows: Sequence[ModuleTime], kind: str) -> Graph:
    """The training graph of a forward ``graph`` whose backward ops take the measured backward times
    (:func:`with_measured_backward`)."""
    if graph.is_training:
        raise SpecError(f"training_graph: graph {graph.name!r} already has a backward pass")
    measured = with_measured_backward(graph, rows, kind)
    ops, edges = with_backward(measured.ops, measured.edges)
    return Graph(ops, edges, name=graph.name)


def read_profile(path: str | PurePath) -> dict[str, list[ModuleTime]]:
    """The rows of a CSV :func:`write_profile` wrote, per device kind; ``{}`` for a profile without backward times
    (a plain ``op,kind,ms`` file, whose forward times :func:`placement_dsl.io.costs.read_costs` reads)."""
    lines = [line for line in profile_text(path).splitlines() if line.strip() and not line.startswith("#")]
    reader = csv.DictReader(lines)
    if "backward_ms" not in (reader.fieldnames or []):
        return {}
    out: dict[str, list[ModuleTime]] = {}
    for line, row in enumerate(reader, start=2):
        try:
            times = [float(row[c]) for c in ("ms", "backward_ms", "input_grad_ms", "weight_grad_ms")]
            calls = int(row.get("calls") or 1)
        except (TypeError, ValueError, KeyError):
            raise SpecError(f"cost profile {str(path)!r} row {line}: times {[row.get(c) for c in COLUMNS[2:]]} "
                            f"must be numbers of ms") from None
        if not all(0 <= t < float("inf") for t in times):
            raise SpecError(f"cost profile {str(path)!r} row {line}: times {times} must be finite and >= 0")
        out.setdefault(row.get("kind") or "accelerator", []).append(ModuleTime(str(row["op"]), *times, calls))
    return out


__all__ = ["COLUMNS", "DEVICES", "LinkTime", "ModuleTime", "RunCosts", "StageFit", "affine_of", "build", "calibrated",
           "calibration", "calibration_dict", "calibration_table", "fit_link", "fit_overhead",
           "fit_slowdown_and_overhead", "idle_pipeline", "ping_pong", "profile_csv", "profile_module",
           "read_calibration", "read_profile", "runtime_overhead", "scale_of", "schedule_scales", "split_backward",
           "stage_costs_of", "training_graph", "with_measured_backward", "write_calibration", "write_profile"]
