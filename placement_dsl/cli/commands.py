"""The ``placement-dsl`` subcommands."""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from typing import Any

from ..deadline import answer_seconds
from ..errors import SpecError
from ..evaluate import CostModel, Evaluation, evaluate
from ..files import check_writable
from ..heuristics.base import TimeLimitReached
from ..io import Workload, load_placement, save_workload
from ..presets import certified_problem, problem_for_method
from ..report import stage_lines, stage_ranges
from ..task_shift import TaskShift, task_shift
from .common import EXIT_INFEASIBLE, EXIT_OK, HEURISTIC_METHODS, IP_METHODS, command_deadline
from .options import (
    declared_options,
    describe_methods,
    heuristic_options,
    mip_options,
    note_cold_kernels,
    taken_mip_options,
)
from .problems import bounds_payload
from .schedules import is_makespan, save_answer, solve_makespan
from .training import schedule_objective, training_problem
from .workloads import check_memory, cost_model, emit, emit_unsaved, memory_summary, note, one_line, workload_from_args


# ---------------------------------------------------------------------------- commands
def cmd_evaluate(args: argparse.Namespace) -> int:
    """``evaluate``: the cost model's verdict on a split, with the device rows and stage ranges."""
    w = workload_from_args(args)
    placement = load_placement(args.split, w)
    ev = evaluate(placement, cost_model(args, w))
    payload = {**ev.to_dict(), "stages": stage_ranges(placement)}
    text = "\n".join([f"{w.graph!r} on {w.cluster!r}", ev.table(), *stage_lines(payload["stages"])])
    if getattr(args, "replicate", None) is not None:  # the split's replicas against --replicate R
        from ..training_terms import Replicate

        broken = Replicate(args.replicate).check(placement)
        payload["violations"] += [{"check": "replicate", "message": m, "required": True} for m in broken]
        payload["valid"] = payload["valid"] and not broken
        text += "".join(f"\n  violation [replicate] {m}" for m in broken)
    emit(args, payload, text)
    return EXIT_OK


def cmd_convert(args: argparse.Namespace) -> int:
    """``convert``: write the workload (with any cluster options applied) as native or dnn-partitioning JSON."""
    out = check_writable(args.output)
    w = workload_from_args(args, args.input)
    fmt = args.to or ("native" if out.suffix == ".json" else None)
    save_workload(w, out, fmt)
    payload = {"output": str(out), "format": fmt, "ops": w.graph.n, "edges": w.graph.m, "devices": w.cluster.size}
    emit(args, payload, f"wrote {out} ({w.graph.n} ops, {w.graph.m} edges, {w.cluster.size} devices)")
    return EXIT_OK


def cmd_solve(args: argparse.Namespace) -> int:
    """``solve``: a placement by a heuristic or a MIP, its certificate, rows and stage ranges; exit 3 if infeasible.

    ``--out`` is checked before solving; when writing it fails all the same (a full disk), the
    answer is printed as JSON and the exit status is 2.
    """
    if args.out:
        check_writable(args.out)
    w = workload_from_args(args)
    model = cost_model(args, w)
    check_memory(w, model)
    if args.method in IP_METHODS:
        placement, payload, text = _run_ip(args, w, model)
    else:
        placement, payload, text = _run_heuristic(args, w, model)
    if getattr(args, "started", None) is not None:  # `seconds` counts from the solve's call, this from the command's
        payload["wall_seconds"] = time.monotonic() - args.started  # start (the process's): what --time-limit bounds
    if args.out and placement is not None and _holds(payload):
        try:
            save_answer(placement, args.out, w, model, payload.get("objective"))
        except SpecError as err:
            return emit_unsaved(payload, err)
    elif args.out:
        note(f"--out {args.out!r} not written: the solve has no valid placement to write")
    emit(args, payload, text)
    return _solve_status(args, w, payload)


def _holds(payload: dict[str, Any]) -> bool:
    """Whether the answer is a placement the cost model accepts, with a finite objective: the only kind ``--out``
    writes (an invalid one would read back as a split the solve itself refused)."""
    objective = payload.get("objective")
    finite = objective is not None and math.isfinite(objective)
    return payload.get("status") != "infeasible" and payload.get("valid") is not False and finite


def _run_heuristic(args: argparse.Namespace, w: Workload, model: CostModel) -> tuple[Any, dict[str, Any], str]:
    from ..heuristics import run

    mip_options(args)
    options = {**heuristic_options(args), **_replication(args), **taken_mip_options(args), **declared_options(args)}
    if options.get("time_limit") is not None:  # what is left of the command's budget (reading the workload took some),
        reserve = max(min(0.1 * args.time_limit, 2.0), answer_seconds(w.graph.n))  # less the re-check and the answer
        options["time_limit"] = max(command_deadline(args).left() - reserve, 0.0)  # (sized: 63,874 ops took 4-5 s at load 8)
    note_cold_kernels(args.method, limited=options.get("time_limit") is not None)
    start = time.perf_counter()
    try:
        res = run(args.method, w.graph, w.cluster, model=model, **options)
    except TimeLimitReached as err:  # a spent budget is no bad input: the answer says it found no placement in it
        return None, _no_placement(args.method, err, time.perf_counter() - start), f"{args.method}: {one_line(err)}"
    ev = evaluate(res.placement, model)
    seconds = time.perf_counter() - start
    payload = _heuristic_payload(args.method, res, ev, seconds)
    lines = [f"{w.graph!r} on {w.cluster!r}: method {args.method} in {seconds:.2f}s", ev.table(),
             *stage_lines(payload["stages"])]
    if res.exact_among and ev.valid:
        scope = "" if res.bound is None else f": bound {res.bound:.6g} over {res.exact_among} placements only"
        lines.append(f"proven optimal among {res.exact_among} placements{scope} (one outside them may be better)")
    if payload.get("no_bound"):
        lines.append(payload["no_bound"])
    optimizes = res.info.get("optimizes")
    if optimizes and optimizes != model.objective.value:
        lines.append(f"note: {args.method} optimizes {optimizes}, not {model.objective.value}; "
                     f"the {model.objective.value} of its split is {ev.objective:.6g}")
    return res.placement, payload, "\n".join(lines)


def _heuristic_payload(method: str, res: Any, ev: Evaluation, seconds: float) -> dict[str, Any]:
    """The JSON answer of a heuristic: the same certificate fields as a MIP result, and the rows. ``bound_scope``
    names the placements the bound holds over (the method's class, e.g. ``contiguous``: a placement outside it may
    be better), as a MIP result's does; ``status`` ``optimal`` is among them."""
    from ..result import placement_report, relative_gap  # the solver stack: loaded when a command runs

    status = ("invalid" if not ev.valid else "optimal" if res.exact_among
              else "time_limit" if res.info.get("stopped") == "time limit" else "heuristic")
    return {
        "objective": ev.objective, "bound": res.bound, "gap": relative_gap(ev.objective, res.bound),
        "bound_scope": res.exact_among if res.bound is not None else None, "status": status, "exact_among": res.exact_among, "method": method, "solver": None,
        "seconds": seconds, "valid": ev.valid, "evaluations": res.evaluations, "info": res.info, **placement_report(res.placement, ev),
        **({} if res.bound is not None else {"no_bound": heuristic_no_bound(method, res, ev.model.objective.value)}),
    }


def _no_placement(method: str, err: Exception, seconds: float) -> dict[str, Any]:
    """The JSON answer of a heuristic whose time limit passed before it held any placement (as a MIP's
    ``time_limit_no_solution``): no objective, the reason in ``message``."""
    return {"objective": None, "bound": None, "gap": None, "bound_scope": None, "status": "time_limit_no_solution",
            "exact_among": None, "method": method, "solver": None, "seconds": seconds, "valid": None,
            "message": one_line(err)}


def heuristic_no_bound(method: str, res: Any, objective: str) -> str:
    """Why a heuristic's answer carries no lower bound: the method's own reason (``info["no_bound"]``), else that it
    proves none here (a search), with what it optimized and whether its time limit stopped it."""
    if res.info.get("no_bound"):
        return str(res.info["no_bound"])
    why = [f"no bound: {method} proves no lower bound for this problem"]
    if res.info.get("optimizes") not in (None, objective):  # the method searched another objective than the model's
        why.append(f"it optimizes {res.info['optimizes']}")
    if res.info.get("stopped") == "time limit":
        why.append("it stopped at its time limit")
    return "; ".join(why) + " (placement-dsl bounds proves one)"


def _replication(args: argparse.Namespace) -> dict[str, Any]:
    """``--replicate R`` for a heuristic that replicates; for one that does not, a note naming those that do."""
    from .options import accepted_options, methods_taking
    from .training import replication_options

    if getattr(args, "replicate", None) is None:
        return {}
    options = replication_options(args, accepted_options(args.method))
    if not options:
        note(f"--replicate does not apply to method {args.method}, which places one device per stage; it is "
             f"taken by {', '.join(methods_taking('replication'))} and the MIP methods")
    return options


def _run_ip(args: argparse.Namespace, w: Workload, model: CostModel) -> tuple[Any, dict[str, Any], str]:
    heuristic_options(args)
    declared_options(args)
    for key, value in mip_options(args).items():
        setattr(args, key, value)
    start = args.warm_start if args.warm_start in HEURISTIC_METHODS else None
    note_cold_kernels(start, limited=True)
    shift = _stage_time_shift(args, w, model)
    result = solve_makespan(args, w, model) if is_makespan(model) else _solve_ip(args, w, model)
    if shift is not None:
        result = _with_stage_time(model, result, shift)
    return result.placement, result.to_dict(), result.summary()


def _stage_time_shift(args: argparse.Namespace, w: Workload, model: CostModel) -> TaskShift | None:
    """The shift a calibrated workload's fixed time per stage pass (``meta["task_overhead"]``, which the formulations
    leave out) makes of every split's objective (:func:`~placement_dsl.task_shift.task_shift`: the formulation's
    optimum is then the optimum); ``None`` without one; refused where it is not one amount, naming the field."""
    if not model.task_overhead:
        return None
    shift = task_shift(model, w.graph, w.cluster, getattr(args, "replicate", None) is not None)
    if shift.exact is None:
        raise SpecError(f"solve --method {args.method}: workload {w.graph.name!r} holds a calibrated fixed time per "
                        f"stage (meta 'task_overhead' {model.task_overhead:g} ms), which the MIP formulations price "
                        f"only as the same shift of every split; "
                        f"{shift.refusal or 'here devices may run one pass or two'}; use --method dp")
    return shift


def _with_stage_time(model: CostModel, result: Any, shift: TaskShift) -> Any:
    """``result`` (of the formulation without the fixed time per stage) priced with it: the answer re-evaluated, the
    bound and the warm start raised by the shift."""
    if result.placement is None:
        return result
    ev = evaluate(result.placement, model)
    return replace(result, objective=ev.objective, evaluation=ev, bound=shift.raised(result.bound),
                   start_objective=shift.raised(result.start_objective))


def _solve_ip(args: argparse.Namespace, w: Workload, model: CostModel) -> Any:
    from ..solve import solve

    problem = training_problem(args, problem_for_method(w, objective=schedule_objective(args, args.objective),
                                                        method=args.method, overlap=args.overlap,
                                                        subgraphs=args.subgraphs))
    return solve(problem, solver=args.solver, time_limit=args.time_limit, gap=args.gap,
                 warm_start=args.warm_start, method=args.method, deadline=command_deadline(args))


def _solve_status(args: argparse.Namespace, w: Workload, payload: dict[str, Any]) -> int:
    """Exit 3 (with the reason on stderr) when the solve proved infeasibility or found no valid placement."""
    memory = True  # the bytes against the devices' memory: a hint when memory is what is short
    if payload.get("status") == "infeasible":
        reason = f"no {args.method} placement satisfies the constraints (status infeasible)"
    elif payload.get("valid") is False:
        broken_checks = [v for v in payload.get("violations", []) if v.get("required")]
        required = [v["message"] for v in broken_checks]
        memory = any(v.get("check") == "memory" for v in broken_checks)
        shown = required and not getattr(args, "json", False)  # the report's table lists them: not twice
        broken = f"{len(required)} violation(s) listed above" if shown else "; ".join(required[:2])
        reason = f"method {args.method} found no valid placement: {broken or 'see the violations'}"
    else:
        return EXIT_OK
    print(f"error: infeasible: {one_line(reason)}" + (f"; {memory_summary(w)}" if memory else ""), file=sys.stderr)
    return EXIT_INFEASIBLE


def cmd_bounds(args: argparse.Namespace) -> int:
    """``bounds``: the lower-bound hierarchy and the certificate of the best placement found."""
    w = workload_from_args(args)
    model = cost_model(args, w)
    check_memory(w, model)
    problem = training_problem(args, certified_problem(w, model, objective=schedule_objective(args, args.objective),
                                                       method=args.method, overlap=args.overlap,
                                                       subgraphs=args.subgraphs))
    levels = args.levels or None
    payload, text = bounds_payload(problem, levels=levels, time_limit=args.time_limit, workers=args.workers,
                                   solver=args.solver, deadline=command_deadline(args))
    if model.task_overhead:
        payload["task_overhead_shift"] = _bounds_shift(w, model)
    emit(args, payload, text)
    return EXIT_OK


def _bounds_shift(w: Workload, model: CostModel) -> float | None:
    """What a calibrated workload's fixed time per stage pass adds to every split's objective, which the bound levels
    leave out (``None`` where it is not one amount), said in a note."""
    t = model.task_overhead
    shift = task_shift(model, w.graph, w.cluster).exact
    note(f"bounds are of workload {w.graph.name!r} without its calibrated fixed time per stage pass (meta "
         f"'task_overhead' {t:g} ms): with it every split's objective is "
         f"{f'{shift:g} more' if shift is not None else f'at least {t:g} more'}, as solve and evaluate report")
    return shift


def cmd_methods(args: argparse.Namespace) -> int:
    """``methods``: every heuristic with what it optimizes and its declared options, and the MIP methods."""
    methods = describe_methods()
    lines = []
    for m in methods:
        lines.append(f"{m['name']}  (optimizes {m['optimizes']}) {m['doc']}")
        lines += [f"    {o['name']} ({o['type']}, default {o['default']}{', ' + o['bounds'] if o['bounds'] else ''})"
                  f": {o['help']}{'' if o['settable'] else ' [from Python only]'}" for o in m["options"]]
    lines.append(f"MIP methods: {', '.join(IP_METHODS)} (--solver, --time-limit, --gap, --warm-start)")
    emit(args, {"heuristics": methods, "mip": list(IP_METHODS)}, "\n".join(lines))
    return EXIT_OK


def cmd_zoo(args: argparse.Namespace) -> int:
    """``zoo``: the names of the built-in models."""
    from .. import zoo

    names = zoo.names()
    emit(args, {"models": names}, "\n".join(names))
    return EXIT_OK


