"""``placement-dsl export``: a split as the file a pipeline runtime reads (see :mod:`placement_dsl.export`)."""
from __future__ import annotations

import argparse
from typing import Any

from ..deprecated import moved
from ..errors import SpecError
from ..files import check_writable
from ..io import load_placement
from . import workloads
from .arguments import cluster_args, common, number
from .common import EPILOG, EXIT_OK
from .workloads import emit, emit_unsaved, recorded, workload_from_args

__getattr__ = moved(__name__, dict.fromkeys(("boundaries_arg", "with_boundaries"), workloads))


def split_of_model(args: argparse.Namespace, w: Any) -> Any:
    """``--split`` on the workload's graph, or on the model's other view (``--training`` or not) when it is a split
    of that one: a runtime runs the forward stages, which both views share (a training split's gradients go with
    their forward ops, :func:`~placement_dsl.export.plan.forward_view`). The split is read once, the other view
    only when needed; a split of neither is the error of the view asked for."""
    return load_placement(args.split, w, lambda: workload_from_args(
        argparse.Namespace(**{**vars(args), "training": not args.training})))


def cmd_export(args: argparse.Namespace) -> int:
    """``export``: check that the split is a pipeline the runtime runs, then write its file.

    A plan the runtime cannot express is refused (exit 2) with the reason and nothing is
    written; ``--out`` is checked before the work.
    """
    from ..export import EXPORTERS, export, write

    out = check_writable(args.out)
    w = workload_from_args(args)
    recorded(w, args.workload)
    placement = split_of_model(args, w)
    result = export(placement, args.to, depth=args.depth, microbatches=args.microbatches, schedule=args.schedule)
    payload = {"format": result.format, "runtime": EXPORTERS[result.format].runtime, "out": str(out),
               "data": result.data}
    try:
        write(result, out)
    except SpecError as err:
        return emit_unsaved(payload, err)
    emit(args, payload, f"wrote {result.format} ({EXPORTERS[result.format].runtime}) to {out}:\n{result.text.rstrip()}")
    return EXIT_OK


def add_export_parser(sub: Any) -> None:
    """Register ``export`` on the subparsers ``sub``."""
    from ..export import EXPORTERS
    from ..export.pytorch import SCHEDULES
    ex = sub.add_parser("export", help="write a split as a pipeline runtime's input (torch, Megatron, vLLM, ...)",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ex.add_argument("workload", help="workload file or zoo:NAME (see 'placement-dsl zoo')")
    cluster_args(ex)
    ex.add_argument("--split", required=True, metavar="SPLIT.json", help="placement or split file to export")
    ex.add_argument("--to", required=True, choices=list(EXPORTERS),
                    help="; ".join(f"{e.name}: {e.runtime}" for e in EXPORTERS.values()))
    ex.add_argument("--out", required=True, metavar="FILE", help="file to write")
    ex.add_argument("--depth", type=number(int, 1, "--depth"), metavar="D",
                    help="torch-pipelining: name modules by their path cut to D dotted parts (default: the "
                         "shallowest module where each stage begins); torchtitan refuses it: its splitter's names "
                         "are the model's children and the entries of its top-level lists")
    ex.add_argument("--microbatches", type=number(int, 1, "--microbatches"), default=4, metavar="M",
                    help="schedule-csv: microbatches per step (default: 4)")
    ex.add_argument("--schedule", choices=SCHEDULES, default="1f1b", help="torch-pipelining, torchtitan, schedule-csv: the schedule, which sets the ranks and torch's class "
                         "(default: 1f1b)")
    common(ex, "print what was written as a JSON object")
    ex.set_defaults(func=cmd_export)
