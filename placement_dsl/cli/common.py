"""Names the command line's modules share: method lists, exit statuses, help texts."""
from __future__ import annotations

import sys
from typing import Any

from ..deadline import Deadline
from ..heuristics.registry import names

HEURISTIC_METHODS = tuple(names())  # the heuristics' registry: a new heuristic is a new --method
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
       (an output file that cannot be written: checked before the work;
       if writing fails after it, the answer is printed as JSON)
  3    infeasible: no placement fits (the message names the op and the
       devices), or the method found no valid placement
  70   internal error (rerun with --debug for the traceback)
  141  standard output was closed early (e.g. piped into head)"""


def command_deadline(args: Any) -> Deadline:
    """A command's ``--time-limit``: seconds of wall clock from the command's start (``args.started``, set by
    :func:`~placement_dsl.cli.main`: the process's start for the command line itself; else now), reading the workload,
    heuristics, model builds and searches included."""
    return Deadline(args.time_limit, start=getattr(args, "started", None))


def note(text: str) -> None:
    """A one-line note on stderr (stdout stays clean for ``--json``)."""
    print(f"note: {text}", file=sys.stderr)
