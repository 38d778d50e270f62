"""Command line: ``placement-dsl evaluate|solve|bounds|convert|zoo``.

WORKLOAD is a file in any supported format (detected from content/extension, or given by
``--format``) or ``zoo:NAME`` for a model of the built-in zoo.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from .cluster import Cluster
from .errors import PlacementError
from .evaluate import NAMED, CostModel, evaluate
from .io import Workload, load_placement, load_workload, save_placement, save_workload
from .io.workload import FORMATS

HEURISTIC_METHODS = ("dp", "dpl", "slicegraph", "random", "brkga", "mla", "mla-weighted", "greedy",
                     "local-search", "pipedream", "one-device")
IP_METHODS = ("ip", "ip-noncontig", "exact")


# ---------------------------------------------------------------------------- helpers
def read_workload(spec: str, fmt: str | None = None, stages: int | None = None) -> Workload:
    """A workload from a path or ``zoo:NAME``, with ``stages`` accelerators if given."""
    if spec.startswith("zoo:"):
        from . import zoo

        w = zoo.get(spec[4:])
    else:
        w = load_workload(spec, fmt)
    if stages is not None:
        w = Workload(w.graph, resize(w.cluster, stages), w.format, w.meta)
    return w


def resize(cluster: Cluster, k: int) -> Cluster:
    """The cluster with ``k`` copies of its first non-host device, host devices kept."""
    if k < 1:
        raise PlacementError(f"--stages must be >= 1, got {k}")
    accs = [d for d in cluster.devices if not d.host]
    template = accs[0] if accs else cluster.devices[0]
    prefix = template.name.rstrip("0123456789") or "dev"
    copies = [template.model_copy(update={"name": f"{prefix}{i}"}) for i in range(k)]
    hosts = [d for d in cluster.devices if d.host]
    return Cluster(copies + hosts, ())


def cost_model(args: argparse.Namespace, workload: Workload) -> CostModel:
    name = args.objective or workload.meta.get("objective", "throughput")
    return CostModel.named(name, overlap=getattr(args, "overlap", "none") or "none")


def emit(args: argparse.Namespace, payload: dict[str, Any], text: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps(payload, default=_json_default))
    else:
        print(text)


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "value"):
        return value.value
    return str(value)


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


# ---------------------------------------------------------------------------- commands
def cmd_evaluate(args: argparse.Namespace) -> int:
    w = read_workload(args.workload, args.format, args.stages)
    placement = load_placement(args.split, w)
    ev = evaluate(placement, cost_model(args, w))
    payload = {"objective": _finite(ev.objective), **{k: v for k, v in ev.to_dict().items() if k != "objective"}}
    emit(args, payload, f"{w.graph!r} on {w.cluster!r}\n{ev.table()}")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    w = read_workload(args.input, args.format)
    out = Path(args.output)
    save_workload(w, out, args.to or ("native" if out.suffix == ".json" else None))
    print(f"wrote {out} ({w.graph.n} ops, {w.graph.m} edges, {w.cluster.size} devices)")
    return 0


def cmd_solve(args: argparse.Namespace) -> int:
    w = read_workload(args.workload, args.format, args.stages)
    model = cost_model(args, w)
    start = time.perf_counter()
    if args.method in IP_METHODS:
        result = _solve_ip(args, w, model)
        payload = result.to_dict()
        placement, text = result.placement, result.summary() if hasattr(result, "summary") else str(result)
    else:
        from .heuristics import run

        options: dict[str, Any] = {}
        if args.evaluations is not None:
            options["evaluations"] = args.evaluations
        res = run(args.method, w.graph, w.cluster, model=model, seed=args.seed, **options)
        placement = res.placement
        ev = evaluate(placement, model)
        seconds = time.perf_counter() - start
        bound = res.bound
        payload = {
            "objective": _finite(ev.objective), "bound": _finite(bound),
            "gap": (ev.objective - bound) / ev.objective if bound is not None and ev.objective > 0 else None,
            "status": "optimal" if res.exact_among else "heuristic", "exact_among": res.exact_among,
            "method": args.method, "solver": None, "seconds": seconds, "valid": ev.valid,
            "evaluations": res.evaluations, "info": res.info,
        }
        text = (f"{w.graph!r} on {w.cluster!r}: method {args.method} in {seconds:.2f}s\n{ev.table()}"
                + (f"\nproven optimal among {res.exact_among} placements" if res.exact_among else ""))
    if args.out:
        save_placement(placement, args.out, w, payload.get("objective"))
    emit(args, payload, text)
    return 0


def _solve_ip(args: argparse.Namespace, w: Workload, model: CostModel) -> Any:
    from .problem import Problem
    from .solve import solve

    problem = Problem.for_workload(w, objective=args.objective, method=args.method, overlap=args.overlap)
    return solve(problem, solver=args.solver, time_limit=args.time_limit, gap=args.gap,
                 warm_start=args.warm_start, method=args.method)


def cmd_bounds(args: argparse.Namespace) -> int:
    from .certify import bounds_command

    w = read_workload(args.workload, args.format, args.stages)
    problem = None
    if args.method:
        from .problem import Problem

        problem = Problem.for_workload(w, objective=args.objective, method=args.method, overlap=args.overlap)
    levels = args.levels.split(",") if args.levels else None
    payload, text = bounds_command(w, cost_model(args, w), levels=levels, time_limit=args.time_limit,
                                   workers=args.workers, solver=args.solver, problem=problem)
    emit(args, payload, text)
    return 0


def cmd_zoo(args: argparse.Namespace) -> int:
    from . import zoo

    for name in zoo.names():
        print(name)
    return 0


# ---------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="placement-dsl", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)

    def workload_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("workload", help="workload file or zoo:NAME")
        sp.add_argument("--format", choices=FORMATS, help="input format (default: detected)")
        sp.add_argument("--stages", type=int, help="number of accelerators / pipeline stages")
        sp.add_argument("--objective", choices=sorted(NAMED), help="objective (default: the workload's)")
        sp.add_argument("--overlap", choices=("none", "half", "full"), default="none",
                        help="overlap communication with computation (Tarnawski App. C.1)")
        sp.add_argument("--json", action="store_true", help="print one JSON object")

    ev = sub.add_parser("evaluate", help="score a split with the cost model")
    workload_args(ev)
    ev.add_argument("--split", required=True, help="placement or split file")
    ev.set_defaults(func=cmd_evaluate)

    so = sub.add_parser("solve", help="find a placement (heuristic or MIP)")
    workload_args(so)
    so.add_argument("--method", required=True, choices=HEURISTIC_METHODS + IP_METHODS)
    so.add_argument("--solver", default="highs", help="highs, scip or any Pyomo solver name")
    so.add_argument("--time-limit", type=float, default=60.0, help="seconds (enforced by the project)")
    so.add_argument("--gap", type=float, default=1e-4, help="relative MIP gap target")
    so.add_argument("--evaluations", type=int, help="evaluation budget of ordering searches")
    so.add_argument("--seed", type=int, default=0)
    so.add_argument("--warm-start", help="heuristic METHOD or placement FILE to start the MIP from")
    so.add_argument("--out", help="write the placement (a split file for dnn-partitioning inputs)")
    so.set_defaults(func=cmd_solve)

    bo = sub.add_parser("bounds", help="lower-bound hierarchy and certificate")
    workload_args(bo)
    bo.add_argument("--levels", help="comma-separated levels (default: the problem's hierarchy, e.g. "
                                     "simple,no-dag,no-cut-io,superblock,guess,exact for pipelines)")
    bo.add_argument("--method", choices=IP_METHODS, help="problem class: exact = DAG-ordered pipeline (default), "
                                                         "ip = contiguous, ip-noncontig = any split")
    bo.add_argument("--time-limit", type=float, default=60.0)
    bo.add_argument("--workers", type=int, default=1)
    bo.add_argument("--solver", default="highs")
    bo.set_defaults(func=cmd_bounds)

    cv = sub.add_parser("convert", help="convert a workload between formats")
    cv.add_argument("input")
    cv.add_argument("output")
    cv.add_argument("--format", choices=FORMATS, help="input format (default: detected)")
    cv.add_argument("--to", choices=("native", "dnn-partitioning"), help="output format (default: native)")
    cv.set_defaults(func=cmd_convert)

    zo = sub.add_parser("zoo", help="list the built-in models")
    zo.set_defaults(func=cmd_zoo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PlacementError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
