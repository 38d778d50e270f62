"""``placement-dsl show``: the partition as a picture, the pipeline's Gantt chart, the bounds over time, split points."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..deadline import contention
from ..errors import SpecError
from ..evaluate import NAMED, Objective
from ..files import check_writable, write_atomic
from ..io import Workload, load_placement
from ..io.common import jsonable
from ..placement import Placement
from ..presets import certified_problem
from ..simulate import Schedule
from .arguments import cluster_args, common, number
from .common import EPILOG, EXIT_OK, command_deadline
from .workloads import cost_model, emit, emit_unsaved, note, recorded, workload_from_args

KINDS = ("graph", "gantt", "bounds", "splits")
NOT_TEXT = (".svg", ".png", ".dot", ".pdf", ".jpg", ".jpeg", ".gif")  # suffixes a text file of splits must not take


PICTURE_SECONDS = 10.0  # what a picture (or split points) without --split spends on its placement
DRAWN = {"latency": "latency-best", "makespan": "list", "gpipe": "gpipe-split"}
"""Per goal (:func:`~placement_dsl.heuristics.registry.goal`), the heuristic whose placement is drawn without ``--split``:
for the single-sample latency the best of greedy's, the DPs' and a local search's splits (Tarnawski §4-5), for the
makespan of one op at a time HEFT's list schedule, for GPipe its own split; every other objective (throughput and
the pipeline schedules priced as a max-load) the exact DP over ideals."""
FALLBACK = "slicegraph"  # what is drawn where the heuristic refuses the graph (the DP: too many ideals)


def _drawn_placement(args: argparse.Namespace, w: Workload) -> Placement:
    """The ``--split`` file's placement, else one that is always there to draw (noted on stderr, with the heuristic
    and the objective it searched for): the objective's heuristic's (:data:`DRAWN`, the dp heuristic's for
    throughput) within :data:`PICTURE_SECONDS`, or where it refuses the graph (the exact DP: too many ideals) the
    slicegraph heuristic's within that time (a stopped heuristic returns the splits its fallback builds in
    ``O(n + m)``)."""
    if args.split:
        return load_placement(args.split, w)
    from ..heuristics import registry, run

    model = cost_model(args, w)
    method = DRAWN.get(registry.goal(model, w.cluster), "dp")
    try:
        placement = run(method, w.graph, w.cluster, model=model, time_limit=PICTURE_SECONDS).placement
    except SpecError as refused:
        note(f"no --split given: showing the {FALLBACK} heuristic's placement for objective {model.name or model.objective.value!r} "
             f"({method} refuses: {refused})")
        return run(FALLBACK, w.graph, w.cluster, model=model, time_limit=PICTURE_SECONDS).placement
    note(f"no --split given: showing the {method} heuristic's placement for objective {model.name or model.objective.value!r}")
    return placement


def _out(args: argparse.Namespace) -> Path:
    from ..viz.common import picture_path, pictures_or_dot

    if not args.out:
        raise SpecError(f"show --kind {args.kind} draws a picture: give --out FILE (.svg or .png"
                        f"{', or .dot' if args.kind == 'graph' else ''})")
    return pictures_or_dot(args.out) if args.kind == "graph" else picture_path(args.out)


class _Unsaved(Exception):
    """A picture that could not be written, with the answer computed for it (printed instead)."""

    def __init__(self, payload: dict[str, Any], err: SpecError):
        super().__init__(str(err))
        self.payload, self.err = payload, err


def _draw(payload: dict[str, Any], draw: Any, *args: Any, **options: Any) -> None:
    """``draw(*args, **options)``; a file it cannot write raises :class:`_Unsaved` with ``payload``."""
    try:
        draw(*args, **options)
    except SpecError as err:
        raise _Unsaved(payload, err) from None


def _graph(args: argparse.Namespace, w: Workload) -> tuple[dict[str, Any], str]:
    from ..viz import graph

    placement = _drawn_placement(args, w)
    out = _out(args)
    view = graph.build_view(placement, args.max_nodes, args.depth)
    drawn_by = graph.render(placement, out, args.max_nodes, args.depth)
    payload = {"kind": "graph", "output": str(out), "drawn_by": drawn_by, "nodes": len(view.nodes),
               "grouped_by": view.grouped_by, "devices": sorted({view.devices[n.device] for n in view.nodes})}
    collapsed = graph.collapse_note(view)
    if collapsed:
        payload["note"] = collapsed
    return payload, (f"wrote {out} ({len(view.nodes)} boxes, grouped by {view.grouped_by}; drawn by {drawn_by})"
                     + (f"\n{collapsed}" if collapsed else ""))


def _gantt(args: argparse.Namespace, w: Workload) -> tuple[dict[str, Any], str]:
    from ..viz import gantt

    placement = _drawn_placement(args, w)
    out = _out(args)
    model = cost_model(args, w)
    if model.objective in (Objective.LATENCY, Objective.MAKESPAN):
        return _single_sample_gantt(placement, model, out)
    result = gantt.simulated(placement, args.gantt_schedule, args.gantt_microbatches)
    payload = {"kind": "gantt", "output": str(out), "schedule": result.schedule.value,
               "microbatches": result.microbatches, "makespan_ms": result.makespan,
               "time_per_sample_ms": result.time_per_sample, "tasks": len(result.trace)}
    _draw(payload, gantt.draw, result, out, placement.cluster.names)
    return payload, (f"wrote {out}: {result.schedule.value}, {len(result.trace)} tasks, makespan "
                     f"{result.makespan:.4g} ms ({result.time_per_sample:.4g} ms per sample)")


def _single_sample_gantt(placement: Placement, model: Any, out: Path) -> tuple[dict[str, Any], str]:
    """The schedule of one sample (latency's invocations, makespan's ops and transfers), not a pipeline."""
    from ..viz import single_sample

    rows = single_sample.bars(placement, model)
    end = single_sample.span(rows)
    payload = {"kind": "gantt", "output": str(out), "schedule": "single-sample", "objective": model.objective.value,
               "makespan": end, "tasks": len(rows), "transfers": sum(b.transfer for b in rows)}
    _draw(payload, single_sample.draw, rows, out, placement.cluster.names)
    return payload, f"wrote {out}: single-sample {model.objective.value} schedule, {len(rows)} tasks, ends at {end:.6g}"


DRAW_SECONDS = 1.0  # CPU seconds to load matplotlib and draw the bounds over time (0.47 s measured, idle), kept
# from the certificate's time by the machine's contention


def _bounds(args: argparse.Namespace, w: Workload) -> tuple[dict[str, Any], str]:
    from ..viz import bounds

    out = _out(args)
    problem = certified_problem(w, cost_model(args, w), objective=args.objective)
    clock = command_deadline(args)  # from the command's start (reading the workload took some), less the drawing
    clock = clock.within(max(clock.left() - DRAW_SECONDS * contention(), 0.0))
    cert, points = bounds.certify_over_time(problem, budget=args.time_limit, gap=0.0, deadline=clock)
    payload = {"kind": "bounds", "output": str(out), "points": [p.to_dict() for p in points], **cert.to_dict()}
    _draw(payload, bounds.draw, points, out, title=f"{w.graph.name}: lower and upper bounds over time")
    return payload, f"wrote {out}: {len(points)} points; best {cert.objective:.6g}, bound {cert.bound:.6g}"


def _splits(args: argparse.Namespace, w: Workload) -> tuple[dict[str, Any], str]:
    from ..viz import split_lines, split_points

    recorded(w, args.workload)
    points = split_points(_drawn_placement(args, w), args.depth)
    return {"kind": "splits", **points}, "\n".join(split_lines(points))


def _save_splits(out: Path, payload: dict[str, Any], text: str) -> None:
    """``show --kind splits --out FILE``: the split points as JSON (``.json``) or as the printed text."""
    points = {k: v for k, v in payload.items() if k != "kind"}
    write_atomic(out, json.dumps(jsonable(points), indent=1) + "\n" if out.suffix.lower() == ".json" else text + "\n")


def cmd_show(args: argparse.Namespace) -> int:
    """``show``: draw or list the partition of a workload (see :data:`KINDS`).

    ``--out`` is checked before the work; when writing fails all the same, the answer (the split
    points, the Gantt chart's simulation, the bounds over time) is printed as JSON and the exit
    status is 2.
    """
    out = check_writable(args.out) if args.out else None
    if args.kind != "splits":
        _out(args)
    elif out is not None and out.suffix.lower() in NOT_TEXT:
        raise SpecError(f"show --kind splits writes text or JSON, not a picture: {str(out)!r} ends in "
                        f"{out.suffix!r}; give --out FILE.txt or FILE.json (pictures: --kind graph)")
    w = workload_from_args(args)
    try:
        payload, text = {"graph": _graph, "gantt": _gantt, "bounds": _bounds, "splits": _splits}[args.kind](args, w)
    except _Unsaved as unsaved:
        return emit_unsaved(unsaved.payload, unsaved.err)
    if args.kind == "splits" and out is not None:
        try:
            _save_splits(out, payload, text)
        except SpecError as err:
            return emit_unsaved(payload, err)
    emit(args, payload, text)
    return EXIT_OK


def add_show_parser(sub: Any) -> None:
    """Register ``show`` on the subparsers ``sub``."""
    sh = sub.add_parser("show", help="draw the partition, the pipeline's Gantt chart or the bounds over time",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sh.add_argument("workload", help="workload file or zoo:NAME (see 'placement-dsl zoo')")
    cluster_args(sh)
    sh.add_argument("--split", metavar="SPLIT.json", help="placement or split file (default: the objective's heuristic's: dp for "
                         "throughput, latency-best for latency, list for makespan, gpipe-split for gpipe; "
                         "slicegraph's where it refuses the graph)")
    sh.add_argument("--kind", choices=KINDS, default="graph",
                    help="graph: ops coloured by device; gantt: simulated pipeline schedule (latency and makespan: "
                         "the single sample's schedule); bounds: certificate "
                         "over time; splits: stages by layer and split points (default: graph)")
    sh.add_argument("--out", metavar="FILE", help="picture to write: .svg or .png (graph also .dot); for splits "
                                                  "an optional .json or text file")
    sh.add_argument("--objective", choices=sorted(NAMED), help="objective (default: the workload's, else throughput)")
    sh.add_argument("--schedule", dest="gantt_schedule", choices=[s.value for s in Schedule],
                    help="gantt: pipeline (inference), 1f1b or gpipe (training); default by the graph")
    sh.add_argument("--microbatches", dest="gantt_microbatches", type=number(int, 1, "--microbatches"), default=8,
                    metavar="N",
                    help="gantt: microbatches simulated (default: 8)")
    sh.add_argument("--depth", type=number(int, 1, "--depth"), metavar="D",
                    help="graph and splits: group ops by module path cut to D dotted parts")
    sh.add_argument("--max-nodes", type=number(int, 2, "--max-nodes"), default=150, metavar="N",
                    help="graph: collapse layers until at most N boxes remain (default: 150)")
    sh.add_argument("--time-limit", type=number(float, 0, "--time-limit", inclusive=False), default=30.0,
                    metavar="SECONDS", help="bounds: seconds for the certificate (default: 30)")
    common(sh)
    sh.set_defaults(func=cmd_show)
