"""Command line: ``placement-dsl evaluate|solve|bounds|convert|zoo``.

WORKLOAD is a file in any supported format (detected from content/extension, or given by
``--format``) or ``zoo:NAME`` for a model of the built-in zoo.

With ``--json`` a command prints exactly one standard JSON object on stdout (no ``NaN`` or
``Infinity``: non-finite numbers are ``null``); notes and errors go to stderr. Errors are one
line; see :data:`EPILOG` for the exit statuses.
"""
from __future__ import annotations

import argparse
import inspect
import math
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import numpy as np

from .cluster import CPU, Cluster, Device
from .errors import InfeasibleError, PlacementError, SpecError
from .evaluate import NAMED, REL_TOL, CostModel, Evaluation, MemoryMode, evaluate
from .heuristics.base import METHODS
from .io import Workload, load_placement, load_workload, save_placement, save_workload
from .io.common import dumps_strict
from .io.report import human_bytes, stage_lines, stage_ranges
from .io.workload import FORMATS
from .result import placement_report, relative_gap

HEURISTIC_METHODS = tuple(METHODS)  # the heuristics' registry: a new heuristic is a new --method
IP_METHODS = ("ip", "ip-noncontig", "exact")
TRAINING_OBJECTIVES = ("gpipe", "pipedream")  # score forward and backward passes separately
MIP_DEFAULTS = {"solver": "highs", "time_limit": 60.0, "gap": 1e-4}
MIP_FLAGS = {"solver": "--solver", "time_limit": "--time-limit", "gap": "--gap", "warm_start": "--warm-start"}
HEURISTIC_FLAGS = {"evaluations": "--evaluations", "seed": "--seed"}  # heuristic keyword -> flag

EXIT_OK, EXIT_ERROR, EXIT_INFEASIBLE, EXIT_INTERNAL, EXIT_PIPE = 0, 2, 3, 70, 141
DESCRIPTION = "Place DNN computation graphs onto devices: evaluate a split, solve, bound, convert workloads."
EPILOG = """exit status:
  0    success
  2    invalid input or usage; the message names the offending item
  3    infeasible: no placement fits (the message names the op and the
       devices), or the method found no valid placement
  70   internal error (rerun with --debug for the traceback)
  141  standard output was closed early (e.g. piped into head)"""


# ---------------------------------------------------------------------------- messages
def note(text: str) -> None:
    """A one-line note on stderr (stdout stays clean for ``--json``)."""
    print(f"note: {text}", file=sys.stderr)


def one_line(text: str) -> str:
    """``text`` on one line: line breaks become ``; ``."""
    return "; ".join(part.strip() for part in str(text).splitlines() if part.strip())


def emit(args: argparse.Namespace, payload: dict[str, Any], text: str) -> None:
    """Print the command's answer: one strict JSON object with ``--json``, else ``text``."""
    print(dumps_strict(payload) if getattr(args, "json", False) else text)


# ---------------------------------------------------------------------------- workloads
def read_workload(spec: str, fmt: str | None = None, stages: int | None = None, training: bool = False) -> Workload:
    """A workload from a path or ``zoo:NAME``, with ``stages`` accelerators if given.

    ``training`` gives the training graph: the zoo's ``-train`` variant, a PipeDream profile's
    measured backward pass, or a derived one (:func:`placement_dsl.io.workload.with_training`).
    """
    if spec.startswith("zoo:"):
        from . import zoo

        name = spec[4:]
        if training and not name.endswith(zoo.TRAIN_SUFFIX):
            name += zoo.TRAIN_SUFFIX
        w = zoo.get(name)
    else:
        w = load_workload(spec, fmt, **({"training": True} if training else {}))
        if str(w.meta.get("backward", "")).startswith("derived"):
            note(f"--training: graph {w.graph.name!r} had no backward pass; derived one "
                 "(each op's backward work is twice its forward work)")
    if stages is not None:
        w = Workload(w.graph, resize(w.cluster, stages), w.format, w.meta)
    return w


def resize(cluster: Cluster, k: int) -> Cluster:
    """The cluster with ``k`` copies of its first non-host device, host devices kept."""
    if k < 1:
        raise SpecError(f"--stages must be >= 1, got {k}")
    accs = [d for d in cluster.devices if not d.host]
    template = accs[0] if accs else cluster.devices[0]
    prefix = template.name.rstrip("0123456789") or "dev"
    copies = [template.model_copy(update={"name": f"{prefix}{i}"}) for i in range(k)]
    hosts = [d for d in cluster.devices if d.host]
    return Cluster(copies + hosts, ())


def reconfigure(cluster: Cluster, memory: float | None = None, bandwidth: float | None = None,
                cpus: int | None = None) -> Cluster:
    """The cluster with accelerator ``memory``, every device's ``bandwidth`` and ``cpus`` host CPUs, where given.

    Existing host devices are kept up to ``cpus`` and new ones named ``cpu0, cpu1, ...``;
    links whose ends remain are kept.
    """
    devices = [_updated(d, memory, bandwidth) for d in cluster.devices]
    if cpus is not None:
        accs, hosts = [d for d in devices if not d.host], [d for d in devices if d.host][:cpus]
        taken = {d.name for d in accs + hosts}
        names = (f"cpu{i}" for i in range(len(devices) + cpus + 1) if f"cpu{i}" not in taken)
        template = {"bandwidth": devices[0].bandwidth}
        hosts += [Device(name=next(names), kind=CPU, **template) for _ in range(cpus - len(hosts))]
        devices = accs + hosts
    kept = {d.name for d in devices}
    return Cluster(devices, [lk for lk in cluster.links if lk.src in kept and lk.dst in kept])


def _updated(device: Device, memory: float | None, bandwidth: float | None) -> Device:
    """``device`` with the given memory (accelerators only) and bandwidth, validated."""
    update: dict[str, float] = {}
    if memory is not None and not device.host:
        update["memory"] = memory
    if bandwidth is not None:
        update["bandwidth"] = bandwidth
    return Device(**{**device.model_dump(), **update}) if update else device


def workload_from_args(args: argparse.Namespace, spec: str | None = None) -> Workload:
    """The command's workload: read (``--format``, ``--training``), resized (``--stages``) and
    with the cluster options (``--memory``, ``--bandwidth``, ``--cpus``) applied."""
    w = read_workload(spec or args.workload, args.format, getattr(args, "stages", None),
                      getattr(args, "training", False))
    options = {k: getattr(args, k, None) for k in ("memory", "bandwidth", "cpus")}
    if all(v is None for v in options.values()):
        return w
    given = {k: v for k, v in options.items() if v is not None}
    return Workload(w.graph, reconfigure(w.cluster, **options), w.format, {**w.meta, **given})


def cost_model(args: argparse.Namespace, workload: Workload) -> CostModel:
    """The cost model of ``--objective`` (default: the workload's), refusing a training objective
    on a forward-only graph."""
    name = args.objective or workload.meta.get("objective", "throughput")
    if name in TRAINING_OBJECTIVES and not workload.graph.is_training:
        raise SpecError(f"objective {name!r} scores the forward and backward passes of a training graph, but "
                        f"graph {workload.graph.name!r} is forward-only; pass --training to add its backward pass, "
                        "or use --objective throughput or latency")
    return CostModel.named(name, overlap=getattr(args, "overlap", "none") or "none")


# ---------------------------------------------------------------------------- memory feasibility
def _unit_needs(w: Workload) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per colocation unit (an op, or a group that must share a device): bytes, largest capacity
    of a device every member may run on, and that device's index (-1 if none)."""
    g, c = w.graph, w.cluster
    _, unit = np.unique(g.group_id, return_inverse=True)
    need = np.bincount(unit, weights=g.param_bytes + g.activation_bytes)
    blocked = np.zeros((need.size, c.size), dtype=bool)
    np.logical_or.at(blocked, unit, ~np.isfinite(c.times(g)))
    capacity = np.where(blocked, -np.inf, c.memory[None, :])
    best = np.argmax(capacity, axis=1)
    has = ~blocked.all(axis=1)
    return need, np.where(has, capacity[np.arange(need.size), best], np.nan), np.where(has, best, -1)


def _unit_name(w: Workload, unit: int) -> str:
    g = w.graph
    _, inverse = np.unique(g.group_id, return_inverse=True)
    members = np.flatnonzero(inverse == unit)
    if members.size == 1:
        return f"op {g.names[members[0]]!r}"
    shown = ", ".join(repr(g.names[i]) for i in members[:3]) + (", ..." if members.size > 3 else "")
    return f"colocation group {g.ops[members[0]].group!r} ({members.size} ops: {shown})"


def check_memory(w: Workload, model: CostModel) -> None:
    """Raise :class:`InfeasibleError` when hard memory cannot hold the ops, naming the op (or group).

    Two necessary conditions: every op (colocation group) fits on some device it may run on,
    and the ops' total bytes fit in the devices' total capacity.
    """
    if model.memory is not MemoryMode.HARD:
        return
    need, capacity, device = _unit_needs(w)
    over = np.flatnonzero((device >= 0) & (need > capacity * (1 + REL_TOL)))
    fix = "give more memory (--memory BYTES) or let memory overflow (--objective bottleneck)"
    if over.size:
        u = over[np.argmax(need[over])]
        more = f" ({over.size - 1} more do not fit either)" if over.size > 1 else ""
        raise InfeasibleError(
            f"{_unit_name(w, u)} needs {need[u]:.6g} bytes ({human_bytes(need[u])}) but the largest device it can "
            f"run on, {w.cluster.names[device[u]]!r}, holds {capacity[u]:.6g} bytes ({human_bytes(capacity[u])})"
            f"{more}; {fix}")
    total, room = float(need.sum()), float(w.cluster.memory.sum())
    if total > room * (1 + REL_TOL):
        raise InfeasibleError(f"the ops need {total:.6g} bytes ({human_bytes(total)}) in total but the "
                              f"{w.cluster.size} devices hold {room:.6g} bytes ({human_bytes(room)}); "
                              f"add devices (--stages) or {fix}")


def memory_summary(w: Workload) -> str:
    """Largest op (unit) bytes against largest device capacity, for messages about infeasibility."""
    need, _, _ = _unit_needs(w)
    if not need.size:
        return "the graph has no ops"
    u = int(np.argmax(need))
    d = int(np.argmax(w.cluster.memory))
    return (f"largest: {_unit_name(w, u)} with {human_bytes(need[u])}, device {w.cluster.names[d]!r} with "
            f"{human_bytes(w.cluster.memory[d])}; total {human_bytes(need.sum())} of {human_bytes(w.cluster.memory.sum())}")


# ---------------------------------------------------------------------------- options per method
def accepted_options(method: str) -> set[str]:
    """Keyword options the heuristic ``method``'s function takes (from its signature)."""
    from .heuristics.base import resolve

    params = inspect.signature(resolve(method)).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return set(HEURISTIC_FLAGS)
    return {p.name for p in params if p.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                 inspect.Parameter.POSITIONAL_OR_KEYWORD)}


def methods_taking(option: str) -> list[str]:
    """The heuristic methods whose function takes ``option``."""
    out = []
    for method in HEURISTIC_METHODS:
        try:
            if option in accepted_options(method):
                out.append(method)
        except PlacementError:  # a heuristic whose module is unavailable takes nothing
            continue
    return out


def heuristic_options(args: argparse.Namespace) -> dict[str, Any]:
    """The heuristic options given that ``args.method`` takes; the others are noted and ignored."""
    given = {k: getattr(args, k) for k in HEURISTIC_FLAGS if getattr(args, k, None) is not None}
    if not given:
        return {}
    accepted = accepted_options(args.method) if args.method in HEURISTIC_METHODS else set()
    for name in sorted(set(given) - accepted):
        note(f"{HEURISTIC_FLAGS[name]} does not apply to method {args.method} and is ignored; "
             f"it is taken by {', '.join(methods_taking(name))}")
    return {k: v for k, v in given.items() if k in accepted}


def mip_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--solver``/``--time-limit``/``--gap``/``--warm-start`` with defaults for a MIP method; for a
    heuristic method the given ones are noted as ignored."""
    given = {k: getattr(args, k) for k in MIP_FLAGS if getattr(args, k, None) is not None}
    if args.method in IP_METHODS:
        return {**MIP_DEFAULTS, "warm_start": None, **given}
    if given:
        flags = ", ".join(MIP_FLAGS[k] for k in given)
        note(f"{flags} appl{'ies' if len(given) == 1 else 'y'} only to the MIP methods "
             f"({', '.join(IP_METHODS)}); ignored for method {args.method}")
    return {}


# ---------------------------------------------------------------------------- numba kernels
def kernels_cold(method: str | None) -> bool:
    """Whether running heuristic ``method`` first compiles numba kernels (their on-disk cache is
    missing or stale). Unknown methods, MIP methods and any failure to tell give ``False``."""
    if method not in HEURISTIC_METHODS:
        return False
    try:
        from .heuristics.base import resolve

        return any(not _cached(k) for k in _kernels_reached(resolve(method)))
    except Exception:  # noqa: BLE001 - a note is never worth a crash
        return False


def _cached(kernel: Any) -> bool:
    """A cached kernel (``njit(cache=True)``) whose on-disk index matches its source."""
    cache_file = getattr(getattr(kernel, "_cache", None), "_cache_file", None)
    return cache_file is None or bool(cache_file._load_index())


def _kernels_reached(fn: Any) -> list[Any]:
    """The numba kernels a heuristic can call: a walk over the names its code (and the code of the
    heuristics functions, classes and modules it names) refers to."""
    from numba.core.dispatcher import Dispatcher

    package = __package__ + ".heuristics"
    found: dict[int, Any] = {}
    seen: set[int] = set()
    stack = [fn]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, Dispatcher):
            found[id(obj)] = obj
            continue
        stack.extend(_referenced(obj, package))
    return list(found.values())


def _referenced(obj: Any, package: str) -> list[Any]:
    """Objects of ``package`` that a function's or class's code names."""
    if isinstance(obj, type):
        return [v for v in vars(obj).values() if callable(v) or isinstance(v, (property, staticmethod, classmethod))]
    obj = getattr(obj.fget if isinstance(obj, property) else obj, "__func__", obj)
    code = getattr(obj, "__code__", None)
    if code is None:
        return []
    names = set(_code_names(code))
    spaces: list[dict[str, Any]] = [getattr(obj, "__globals__", {})]
    spaces += [vars(m) for m in spaces[0].values() if isinstance(m, ModuleType) and m.__name__.startswith(package)]
    found = [space[n] for space in spaces for n in names if n in space]
    return [v for v in found if getattr(v, "__module__", None) and str(v.__module__).startswith(package)]


def _code_names(code: Any) -> list[str]:
    names = list(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names += _code_names(const)
    return names


def note_cold_kernels(*methods: str | None) -> None:
    """Say once on stderr that the first run compiles kernels, when one of ``methods`` will."""
    if any(kernels_cold(m) for m in methods if m):
        note("compiling kernels once; later runs are fast")


# ---------------------------------------------------------------------------- commands
def cmd_evaluate(args: argparse.Namespace) -> int:
    """``evaluate``: the cost model's verdict on a split, with the device rows and stage ranges."""
    w = workload_from_args(args)
    placement = load_placement(args.split, w)
    ev = evaluate(placement, cost_model(args, w))
    payload = {**ev.to_dict(), "stages": stage_ranges(placement)}
    text = "\n".join([f"{w.graph!r} on {w.cluster!r}", ev.table(), *stage_lines(payload["stages"])])
    emit(args, payload, text)
    return EXIT_OK


def cmd_convert(args: argparse.Namespace) -> int:
    """``convert``: write the workload (with any cluster options applied) as native or dnn-partitioning JSON."""
    w = workload_from_args(args, args.input)
    out = Path(args.output)
    fmt = args.to or ("native" if out.suffix == ".json" else None)
    try:
        save_workload(w, out, fmt)
    except OSError as err:
        raise SpecError(f"cannot write {str(out)!r}: {err.strerror}") from None
    payload = {"output": str(out), "format": fmt, "ops": w.graph.n, "edges": w.graph.m, "devices": w.cluster.size}
    emit(args, payload, f"wrote {out} ({w.graph.n} ops, {w.graph.m} edges, {w.cluster.size} devices)")
    return EXIT_OK


def cmd_solve(args: argparse.Namespace) -> int:
    """``solve``: a placement by a heuristic or a MIP, its certificate, rows and stage ranges; exit 3 if infeasible."""
    w = workload_from_args(args)
    model = cost_model(args, w)
    check_memory(w, model)
    if args.method in IP_METHODS:
        placement, payload, text = _run_ip(args, w, model)
    else:
        placement, payload, text = _run_heuristic(args, w, model)
    if args.out and placement is not None:
        save_placement(placement, args.out, w, payload.get("objective"))
    emit(args, payload, text)
    return _solve_status(args, w, payload)


def _run_heuristic(args: argparse.Namespace, w: Workload, model: CostModel) -> tuple[Any, dict[str, Any], str]:
    from .heuristics import run

    mip_options(args)
    options = heuristic_options(args)
    note_cold_kernels(args.method)
    start = time.perf_counter()
    res = run(args.method, w.graph, w.cluster, model=model, **options)
    ev = evaluate(res.placement, model)
    seconds = time.perf_counter() - start
    payload = _heuristic_payload(args.method, res, ev, seconds)
    lines = [f"{w.graph!r} on {w.cluster!r}: method {args.method} in {seconds:.2f}s", ev.table(),
             *stage_lines(payload["stages"])]
    if res.exact_among and ev.valid:
        lines.append(f"proven optimal among {res.exact_among} placements")
    return res.placement, payload, "\n".join(lines)


def _heuristic_payload(method: str, res: Any, ev: Evaluation, seconds: float) -> dict[str, Any]:
    """The JSON answer of a heuristic: the same certificate fields as a MIP result, and the rows."""
    status = "invalid" if not ev.valid else "optimal" if res.exact_among else "heuristic"
    return {
        "objective": ev.objective, "bound": res.bound, "gap": relative_gap(ev.objective, res.bound),
        "status": status, "exact_among": res.exact_among, "method": method, "solver": None,
        "seconds": seconds, "valid": ev.valid, "evaluations": res.evaluations,
        "violations": [{"check": v.check, "message": v.message, "required": v.check in ev.model.require}
                       for v in ev.violations],
        "info": res.info, **placement_report(res.placement, ev),
    }


def _run_ip(args: argparse.Namespace, w: Workload, model: CostModel) -> tuple[Any, dict[str, Any], str]:
    heuristic_options(args)
    for key, value in mip_options(args).items():
        setattr(args, key, value)
    start = args.warm_start if args.warm_start in HEURISTIC_METHODS else None
    note_cold_kernels(start)
    result = _solve_ip(args, w, model)
    return result.placement, result.to_dict(), result.summary()


def _solve_ip(args: argparse.Namespace, w: Workload, model: CostModel) -> Any:
    from .problem import Problem
    from .solve import solve

    problem = Problem.for_workload(w, objective=args.objective, method=args.method, overlap=args.overlap)
    return solve(problem, solver=args.solver, time_limit=args.time_limit, gap=args.gap,
                 warm_start=args.warm_start, method=args.method)


def _solve_status(args: argparse.Namespace, w: Workload, payload: dict[str, Any]) -> int:
    """Exit 3 (with the reason on stderr) when the solve proved infeasibility or found no valid placement."""
    if payload.get("status") == "infeasible":
        reason = f"no {args.method} placement satisfies the constraints (status infeasible)"
    elif payload.get("valid") is False:
        broken = "; ".join([v["message"] for v in payload.get("violations", []) if v.get("required")][:2])
        reason = f"method {args.method} found no valid placement: {broken or 'see the violations'}"
    else:
        return EXIT_OK
    print(f"error: infeasible: {one_line(reason)}; {memory_summary(w)}", file=sys.stderr)
    return EXIT_INFEASIBLE


def cmd_bounds(args: argparse.Namespace) -> int:
    """``bounds``: the lower-bound hierarchy and the certificate of the best placement found."""
    from .certify import bounds_command

    w = workload_from_args(args)
    model = cost_model(args, w)
    check_memory(w, model)
    problem = None
    if args.method:
        from .problem import Problem

        problem = Problem.for_workload(w, objective=args.objective, method=args.method, overlap=args.overlap)
    levels = args.levels.split(",") if args.levels else None
    payload, text = bounds_command(w, model, levels=levels, time_limit=args.time_limit,
                                   workers=args.workers, solver=args.solver, problem=problem)
    emit(args, payload, text)
    return EXIT_OK


def cmd_zoo(args: argparse.Namespace) -> int:
    """``zoo``: the names of the built-in models."""
    from . import zoo

    names = zoo.names()
    emit(args, {"models": names}, "\n".join(names))
    return EXIT_OK


# ---------------------------------------------------------------------------- parser
class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (``prog: error: ...``), exit 2."""

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message (see prog --help)`` on one line and exit 2."""
        self.exit(EXIT_ERROR, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def _number(kind: type, low: float, name: str, inclusive: bool = True) -> Any:
    """An argparse type: a ``kind`` number ``>= low`` (``> low`` unless ``inclusive``), with a clear message."""
    def parse(text: str) -> Any:
        """``text`` as a number in range, else an argparse error naming the option."""
        try:
            value = kind(float(text)) if kind is int and "e" in text.lower() else kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if math.isnan(value) or value < low or (value == low and not inclusive):
            raise argparse.ArgumentTypeError(f"{name} must be {'>=' if inclusive else '>'} {low:g}, got {text!r}")
        return value
    return parse


def _common(sp: argparse.ArgumentParser, json_help: str = "print one standard JSON object on stdout") -> None:
    sp.add_argument("--json", action="store_true", help=json_help)
    sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                    help="re-raise unexpected errors with their traceback instead of a one-line message")


def _cluster_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--format", choices=FORMATS, help="input format (default: detected from the file)")
    sp.add_argument("--training", action="store_true",
                    help="use the training graph: the zoo's -train model, a PipeDream profile's backward pass, "
                         "or a derived one (backward work = 2x forward)")
    sp.add_argument("--stages", type=_number(int, 1, "--stages"), metavar="K",
                    help="number of accelerators / pipeline stages (copies of the first accelerator)")
    sp.add_argument("--memory", type=_number(float, 0, "--memory", inclusive=False), metavar="BYTES",
                    help="memory of each accelerator in bytes (inf = unlimited)")
    sp.add_argument("--bandwidth", type=_number(float, 0, "--bandwidth", inclusive=False), metavar="BYTES_PER_MS",
                    help="bandwidth of every device to the interconnect, in bytes per ms")
    sp.add_argument("--cpus", type=_number(int, 0, "--cpus"), metavar="N",
                    help="number of host CPUs (kept or added; they pay no transfers)")


def _workload_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("workload", help="workload file or zoo:NAME (see 'placement-dsl zoo')")
    _cluster_args(sp)
    sp.add_argument("--objective", choices=sorted(NAMED),
                    help="objective (default: the workload's, else throughput); gpipe and pipedream need a "
                         "training graph")
    sp.add_argument("--overlap", choices=("none", "half", "full"), default="none",
                    help="overlap communication with computation (Tarnawski App. C.1; default: none)")
    _common(sp)


def _solve_parser(sub: Any) -> None:
    so = sub.add_parser("solve", help="find a placement (heuristic or MIP)", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    _workload_args(so)
    so.add_argument("--method", required=True, choices=HEURISTIC_METHODS + IP_METHODS,
                    help=f"heuristic ({', '.join(HEURISTIC_METHODS)}) or MIP ({', '.join(IP_METHODS)})")
    so.add_argument("--solver", help="MIP methods: highs, scip or any Pyomo solver name (default: highs)")
    so.add_argument("--time-limit", type=_number(float, 0, "--time-limit", inclusive=False), metavar="SECONDS",
                    help="MIP methods: seconds, enforced by the project (default: 60)")
    so.add_argument("--gap", type=_number(float, 0, "--gap"), help="MIP methods: relative gap target (default: 1e-4)")
    so.add_argument("--warm-start", metavar="METHOD|FILE",
                    help="MIP methods: heuristic METHOD or placement FILE to start from")
    so.add_argument("--evaluations", type=_number(int, 1, "--evaluations"), metavar="N",
                    help="evaluation budget of the ordering searches (methods whose function takes it)")
    so.add_argument("--seed", type=int, metavar="N", help="random seed of the heuristics that draw (default: 0)")
    so.add_argument("--out", metavar="FILE", help="write the placement (a split file for dnn-partitioning inputs)")
    so.set_defaults(func=cmd_solve)


def _bounds_parser(sub: Any) -> None:
    bo = sub.add_parser("bounds", help="lower-bound hierarchy and certificate", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    _workload_args(bo)
    bo.add_argument("--levels", help="comma-separated levels (default: the problem's hierarchy, e.g. "
                                     "simple,no-dag,no-cut-io,superblock,guess,exact for pipelines)")
    bo.add_argument("--method", choices=IP_METHODS, help="problem class: exact = DAG-ordered pipeline (default), "
                                                         "ip = contiguous, ip-noncontig = any split")
    bo.add_argument("--time-limit", type=_number(float, 0, "--time-limit", inclusive=False), default=60.0,
                    metavar="SECONDS",
                    help="seconds per MIP level (default: 60)")
    bo.add_argument("--workers", type=_number(int, 1, "--workers"), default=1, metavar="N",
                    help="levels solved in parallel (default: 1)")
    bo.add_argument("--solver", default="highs", help="MIP solver of the MIP levels: highs, scip or any Pyomo "
                                                      "solver name (default: highs)")
    bo.set_defaults(func=cmd_bounds)


def build_parser() -> argparse.ArgumentParser:
    """The ``placement-dsl`` parser: every option of every command has help; exit statuses in the epilog."""
    p = Parser(prog="placement-dsl", description=DESCRIPTION, epilog=EPILOG,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="re-raise unexpected errors with their traceback instead of a one-line message")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", help="one of the commands below")
    ev = sub.add_parser("evaluate", help="score a split with the cost model", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    _workload_args(ev)
    ev.add_argument("--split", required=True, help="placement or split file")
    ev.set_defaults(func=cmd_evaluate)
    _solve_parser(sub)
    _bounds_parser(sub)
    cv = sub.add_parser("convert", help="convert a workload between formats", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    cv.add_argument("input", help="workload file or zoo:NAME to read")
    cv.add_argument("output", help="file to write (.json: native unless --to says otherwise)")
    _cluster_args(cv)
    cv.add_argument("--to", choices=("native", "dnn-partitioning"), help="output format (default: native)")
    _common(cv, "print a JSON summary of what was written")
    cv.set_defaults(func=cmd_convert)
    zo = sub.add_parser("zoo", help="list the built-in models", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(zo, "print the names as a JSON object")
    zo.set_defaults(func=cmd_zoo)
    return p


# ---------------------------------------------------------------------------- entry point
def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command; every error becomes one line on stderr and an exit status."""
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        raise
    except Exception as err:
        if getattr(args, "debug", False):
            raise
        return _report(err)


def _report(err: Exception) -> int:
    if isinstance(err, InfeasibleError):
        print(f"error: infeasible: {one_line(err)}", file=sys.stderr)
        return EXIT_INFEASIBLE
    if isinstance(err, PlacementError):
        print(f"error: {one_line(err)}", file=sys.stderr)
        return EXIT_ERROR
    print(f"internal error: {type(err).__name__}: {one_line(err)}", file=sys.stderr)
    return EXIT_INTERNAL


def _quiet_closed_stdout() -> int:
    """The reader of stdout went away: point stdout at /dev/null so that the interpreter's final
    flush stays silent, and exit like a process killed by SIGPIPE."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (e.g. captured)
        pass
    return EXIT_PIPE


def main(argv: list[str] | None = None) -> int:
    """``placement-dsl``: parse ``argv``, run the command, return the exit status (see :data:`EPILOG`)."""
    try:
        args = build_parser().parse_args(argv)
        code = run_command(args)
        sys.stdout.flush()
    except BrokenPipeError:
        return _quiet_closed_stdout()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
