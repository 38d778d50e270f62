"""Argument types and option groups shared by the subcommands' parsers (numbers in range, ``--json``, the cluster
options); :mod:`.parser` and the commands that add their own subparsers (export, import, show) import them here."""
from __future__ import annotations

import argparse
import math
from typing import Any

from ..io import formats
from ..limits import MAX_DEVICES, MAX_TOTAL
from .training import add_cluster_args

MAX_INT = 10**9  # an integer option beyond this is a typo (no budget, count or size here is that large)


def number(kind: type, low: float, name: str, inclusive: bool = True, *, high: float | None = None,
            unlimited: bool = False) -> Any:
    """An argparse type: a ``kind`` number ``>= low`` (``> low`` unless ``inclusive``) and ``<= high``, with a
    clear message. An ``int`` must be written as one (``1e9`` and ``2.5`` are refused) and stays below
    :data:`MAX_INT` unless ``high`` says otherwise; a ``float`` is finite and at most
    :data:`~placement_dsl.limits.MAX_TOTAL`, or ``inf`` where ``unlimited``."""
    top = high if high is not None else MAX_INT if kind is int else MAX_TOTAL

    def parse(text: str) -> Any:
        """``text`` as a number in range, else an argparse error naming the option."""
        try:
            value = kind(text)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{name} must be {what}, got {text!r}") from None
        if math.isinf(value) and value > 0 and unlimited:
            return value
        if math.isinf(value):
            raise argparse.ArgumentTypeError(f"{name} must be a finite number{' or inf' if unlimited else ''}, "
                                             f"got {text!r}")
        if math.isnan(value) or value < low or (value == low and not inclusive):
            raise argparse.ArgumentTypeError(f"{name} must be {'>=' if inclusive else '>'} {low:g}, got {text!r}")
        if value > top:
            raise argparse.ArgumentTypeError(f"{name} must be at most {top:g}{' (or inf)' if unlimited else ''}, "
                                             f"got {text!r}")
        return value
    return parse


def common(sp: argparse.ArgumentParser, json_help: str = "print one standard JSON object on stdout") -> None:
    """``--json``, ``--debug`` and ``--quiet``, which every command takes (a script passes them to all alike)."""
    sp.add_argument("--json", action="store_true", help=json_help)
    sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                    help="re-raise unexpected errors with their traceback instead of a one-line message")
    sp.add_argument("--quiet", action="store_true",
                    help="no progress on stderr (else a status line while stderr is a terminal, and plain timed "
                         "lines of long runs when it is redirected to a file or pipe)")


def cluster_args(sp: argparse.ArgumentParser) -> None:
    """The options that read and reshape a workload's cluster (``--format``, ``--stages``, ``--memory``, ...)."""
    sp.add_argument("--format", choices=formats.names(), help="input format (default: detected from the file)")
    sp.add_argument("--training", action="store_true",
                    help="use the training graph: the zoo's -train model, a PipeDream profile's backward pass, "
                         "or a derived one (backward work = 2x forward)")
    sp.add_argument("--stages", type=number(int, 1, "--stages", high=MAX_DEVICES), metavar="K",
                    help="number of accelerators / pipeline stages (copies of the first accelerator)")
    sp.add_argument("--memory", type=number(float, 0, "--memory", inclusive=False, unlimited=True), metavar="BYTES",
                    help="memory of each accelerator in bytes (inf = unlimited)")
    sp.add_argument("--bandwidth", type=number(float, 0, "--bandwidth", inclusive=False), metavar="BYTES_PER_MS",
                    help="bandwidth of every device to the interconnect, in bytes per ms")
    sp.add_argument("--cpus", type=number(int, 0, "--cpus", high=MAX_DEVICES), metavar="N",
                    help="number of host CPUs (kept or added; they pay no transfers)")
    add_cluster_args(sp, number)
