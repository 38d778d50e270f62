"""``placement-dsl import``: an ONNX model or a PyTorch module as a workload file, with measured costs."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..files import check_writable
from ..io import Workload, formats, save_workload
from ..io.costs import GRANULARITIES, apply_costs, read_costs
from ..limits import MAX_DEVICES
from ..report import human_bytes
from ..simulate import RUN_SCHEDULES
from .arguments import common, number
from .common import EPILOG, EXIT_OK
from .workloads import emit, resize


def _dims(items: list[str]) -> dict[str, int]:
    """``NAME=N`` options as a mapping, refusing anything else."""
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        if not name or not value.strip().isdigit() or int(value) < 1:
            raise SpecError(f"--dim {item!r}: expected NAME=N with an integer N >= 1, e.g. --dim seq=512")
        out[name.strip()] = int(value)
    return out


def _read_model(args: argparse.Namespace) -> Workload:
    options: dict[str, Any] = {"seq": args.seq, "granularity": args.granularity, "depth": args.depth,
                               **({} if args.batch is None else {"batch": args.batch})}
    path = Path(args.model)
    files, specs = formats.models(spec=False), formats.models(spec=True)
    if files and (formats.by_suffix(path, model=True) is not None or path.exists()):
        reader = formats.by_suffix(path, model=True) or files[0]  # an existing file of no model suffix: the first
        return reader.read(path, dims=_dims(args.dim), **options)
    if args.dim:
        raise SpecError("--dim applies to ONNX models; a PyTorch factory takes --batch and --seq")
    return specs[0].read(args.model, **options)


def _with_costs(w: Workload, args: argparse.Namespace) -> tuple[Workload, list[str]]:
    """The workload with the profile's measured times (and the calibrated roofline for the rest)."""
    if not args.costs:
        return w, []
    from ..profile import read_profile, with_measured_backward  # the profiler and the simulator: this command's

    graph, fits = apply_costs(w.graph, read_costs(args.costs), calibrate_rest=not args.no_calibrate,
                              source=str(args.costs))
    for kind, rows in read_profile(args.costs).items():  # a 'placement-dsl profile' file's backward times
        graph = with_measured_backward(graph, rows, kind)
    calibration = {k: {"compute_scale": f.compute_scale, "memory_scale": f.memory_scale, "samples": f.samples}
                   for k, f in fits.items()}
    lines = [f"calibrated {k}: compute x{f.compute_scale:.3g}, memory x{f.memory_scale:.3g} from {f.samples} "
             "measured ops" for k, f in fits.items()]
    meta = {**w.meta, "costs": str(args.costs), "calibration": calibration}
    return Workload(graph, w.cluster, w.format, meta), lines


def _with_calibration(w: Workload, args: argparse.Namespace) -> tuple[Workload, list[str]]:
    """The workload at what a pipeline run measured (``--calibration``) under the schedule ``--schedule`` names:
    every op's time on the calibration's kind ``scale x time + op_ms`` (``scale``: the schedule's compute factor, or
    the one of schedules the file holds none apart for), forward and backward, and the fixed time per stage pass in
    ``meta["task_overhead"]``, which ``solve`` and ``evaluate`` add to every stage."""
    if not args.calibration:
        if args.schedule:
            raise SpecError(f"--schedule {args.schedule} picks a calibration's compute factor; pass --calibration")
        return w, []
    from ..profile import calibration_dict, read_calibration  # the profiler's stack: this option's

    costs, kind = read_calibration(args.calibration)
    if not any(op.time_on(kind) < float("inf") for op in w.graph.ops):
        raise SpecError(f"--calibration {args.calibration}: its times are for device kind {kind!r}, on which no op of "
                        f"{w.graph.name!r} runs")
    run = costs.under(args.schedule)
    meta = {**w.meta, "calibration_file": str(args.calibration), "run_costs": calibration_dict(costs, kind),
            "task_overhead": run.task_ms, **({"calibration_schedule": args.schedule} if args.schedule else {})}
    apart = dict(costs.scales)
    which = (f" ({args.schedule}'s factor)" if args.schedule in apart else
             f" (one factor for every schedule; the file has {', '.join(apart)}'s apart: --schedule)" if apart else "")
    line = (f"calibrated by {args.calibration} on {kind}: x{run.scale:.4g}{which} + {run.op_ms:.4g} ms per op; "
            f"{run.task_ms:.4g} ms per stage pass (added to every stage by solve and evaluate)")
    return Workload(run.measured_graph(w.graph, kind), w.cluster, w.format, meta), [line]


def cmd_import(args: argparse.Namespace) -> int:
    """``import``: read the model, apply measured costs, write a native workload, print a summary."""
    out = check_writable(args.out)
    w, lines = _with_costs(_read_model(args), args)
    w, more = _with_calibration(w, args)
    lines += more
    if args.stages is not None:
        w = Workload(w.graph, resize(w.cluster, args.stages), w.format, w.meta)
    save_workload(w, out, "native")
    g = w.graph
    payload = {"output": str(out), "source": w.meta.get("source"), "ops": g.n, "edges": g.m,
               "devices": w.cluster.size, "param_bytes": float(g.param_bytes.sum()), "dims": w.meta.get("dims", {}),
               "estimated": w.meta.get("estimated", {}), "calibration": w.meta.get("calibration", {})}
    head = (f"wrote {out}: {g.n} ops, {g.m} edges, parameters {human_bytes(g.param_bytes.sum())}, "
            f"{w.cluster.size} devices")
    text = [head, *lines]
    if payload["estimated"]:
        text.append(f"estimated (one FLOP per output element): {payload['estimated']}")
    if w.meta.get("factory") and args.batch is None and "batch" in payload["dims"]:
        text.append(f"traced at batch {payload['dims']['batch']}, the factory's own (--batch N to change)")
    if w.meta.get("note"):
        payload["note"] = w.meta["note"]
        text.append(f"note: {w.meta['note']}")
    emit(args, payload, "\n".join(text))
    return EXIT_OK


def add_import_parser(sub: Any) -> None:
    """Register ``import`` on the subparsers ``sub``."""
    im = sub.add_parser("import", help="import an ONNX model or a PyTorch module as a workload", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    im.add_argument("model", help="MODEL.onnx, or MODULE:FACTORY: a function building a torch module (run on the "
                                  "meta device) and returning (module, args)")
    im.add_argument("--out", required=True, metavar="WORKLOAD.json", help="workload file to write (native JSON)")
    im.add_argument("--batch", type=number(int, 1, "--batch"),
                    help="batch size (default: 1 for an ONNX model; a factory's own default batch)")
    im.add_argument("--seq", type=number(int, 1, "--seq"), help="sequence length of symbolic sequence dimensions")
    im.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                    help="value of another symbolic dimension of an ONNX model (repeatable)")
    im.add_argument("--granularity", choices=GRANULARITIES, default="op",
                    help="op: one op per node; layer: one op per module; group: ops, each module's colocated")
    im.add_argument("--depth", type=number(int, 1, "--depth"), metavar="D",
                    help="cut module paths to D dotted parts for layers and groups (default: the full path)")
    im.add_argument("--costs", metavar="PROFILE.csv", help="measured times per op or module (CSV or JSON, ms)")
    im.add_argument("--calibration", metavar="CALIBRATION.json",
                    help="a pipeline run's fitted costs (placement_dsl.calibrate.write_calibration): every op's time "
                         "x factor + time per op, and the fixed time per stage that solve and evaluate add")
    im.add_argument("--schedule", choices=RUN_SCHEDULES,
                    help="with --calibration: the pipeline schedule the plan will run, whose compute factor applies "
                         "(default: the calibration's factor of schedules not measured apart)")
    im.add_argument("--no-calibrate", action="store_true",
                    help="keep the roofline times of ops the profile does not measure")
    im.add_argument("--stages", type=number(int, 1, "--stages", high=MAX_DEVICES), metavar="K",
                    help="accelerators of the workload's cluster (default: 4 and a CPU)")
    common(im, "print a JSON summary of what was written")
    im.set_defaults(func=cmd_import)
