"""The argument parser of ``placement-dsl``: one subparser per command, every option with help."""
from __future__ import annotations

import argparse
import sys
from typing import Any, NoReturn

from ..evaluate import NAMED
from ..levels import MANIFEST
from .arguments import cluster_args as _cluster_args
from .arguments import common as _common
from .arguments import number as _number
from .commands import cmd_bounds, cmd_convert, cmd_evaluate, cmd_methods, cmd_solve, cmd_zoo
from .common import DESCRIPTION, EPILOG, EXIT_ERROR, HEURISTIC_METHODS, IP_METHODS
from .options import options_epilog
from .schedules import add_congestion_arg
from .training import add_training_args
from .workloads import boundaries_arg, one_line


def level_choices() -> str:
    """The certificate's levels, from the levels' manifest (the levels themselves load Pyomo)."""
    return "; ".join(f"{name} ({doc})" for name, doc in MANIFEST.items())


def levels_arg(text: str) -> list[str]:
    """``--levels a,b``: the names, each non-empty (certify refuses one it does not know, naming the choices)."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"--levels {text!r}: give comma-separated level names, e.g. simple,dp")
    return names


# ---------------------------------------------------------------------------- parser
class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (``prog: error: ...``), exit 2."""

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message (see prog --help)`` on one line and exit 2."""
        self.exit(EXIT_ERROR, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """As argparse's, with an option's value that reads as a negative number argparse does not know
        (``-inf``, ``-nan``, ``-1e308``) joined to its option (``--time-limit=-inf``): argparse takes it for an
        option and says "expected one argument", where the option's own check names the range."""
        return super().parse_known_args(signed_values(sys.argv[1:] if args is None else list(args)), namespace)


def signed_values(line: list[str]) -> list[str]:
    """``line`` with each ``--option VALUE`` whose value starts with ``-`` and reads as a float written ``--option=VALUE``.

    >>> signed_values(["solve", "w.json", "--time-limit", "-inf", "--gap", "0.1"])
    ['solve', 'w.json', '--time-limit=-inf', '--gap', '0.1']
    """
    out: list[str] = []
    i = 0
    while i < len(line):
        token = line[i]
        value = line[i + 1] if i + 1 < len(line) else ""
        if token.startswith("--") and "=" not in token and value.startswith("-") and _reads_as_float(value):
            out.append(f"{token}={value}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def _reads_as_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _workload_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("workload", help="workload file or zoo:NAME (see 'placement-dsl zoo')")
    _cluster_args(sp)
    sp.add_argument("--objective", choices=sorted(NAMED),
                    help="objective (default: the workload's, else throughput); gpipe and pipedream need a "
                         "training graph")
    sp.add_argument("--overlap", choices=("none", "half", "full"), default="none",
                    help="overlap communication with computation (Tarnawski App. C.1; default: none)")
    sp.add_argument("--subgraphs", type=_number(int, 1, "--subgraphs"), metavar="Q",
                    help="latency: at most Q contiguous subgraphs per accelerator (Tarnawski Fig. 4); default: "
                         "1 for --method ip, any number for ip-noncontig and the heuristics")
    add_training_args(sp, _number)
    sp.add_argument("--boundaries", type=boundaries_arg, metavar="module[:DEPTH]",
                    help="stage boundaries only between modules (cut to DEPTH dotted parts, default 1): each "
                         "module's ops share a device, so a pipeline runtime can cut the plan")
    add_congestion_arg(sp)  # part of the problem: solve, bounds and evaluate must price a schedule alike
    _common(sp)


def _solve_parser(sub: Any) -> None:
    so = sub.add_parser("solve", help="find a placement (heuristic or MIP)", epilog=f"{options_epilog()}\n\n{EPILOG}",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    _workload_args(so)
    so.add_argument("--method", required=True, choices=HEURISTIC_METHODS + IP_METHODS,
                    help=f"heuristic ({', '.join(HEURISTIC_METHODS)}) or MIP ({', '.join(IP_METHODS)})")
    so.add_argument("--solver", help="MIP methods: highs, scip or any Pyomo solver name (default: highs)")
    so.add_argument("--time-limit", type=_number(float, 0, "--time-limit", inclusive=False), metavar="SECONDS",
                    help="MIP methods: wall-clock seconds for the whole command from its start (reading, warm "
                         "start, model build and search), enforced by the project; a model that cannot be built "
                         "and searched in the time left is not built (default: 60)")
    so.add_argument("--gap", type=_number(float, 0, "--gap"), help="MIP methods: relative gap target (default: 1e-4)")
    so.add_argument("--warm-start", metavar="METHOD|FILE|auto|none",
                    help="MIP methods: heuristic METHOD or placement FILE to start from, 'auto' (the best "
                         "heuristic in a small share of the time; the default) or 'none' (no start)")
    so.add_argument("--evaluations", type=_number(int, 1, "--evaluations"), metavar="N",
                    help="evaluation budget of the ordering searches (methods whose function takes it)")
    so.add_argument("--seed", type=int, metavar="N", help="random seed of the heuristics that draw (default: 0)")
    so.add_argument("--option", action="append", metavar="NAME=VALUE",
                    help="an option the heuristic method declares (repeatable; listed below and by "
                         "'placement-dsl methods'), e.g. --option population=50")
    so.add_argument("--out", metavar="FILE", help="write the placement (a split file for dnn-partitioning inputs; "
                                                  "the schedule file for MOIRAI sheets)")
    so.set_defaults(func=cmd_solve)


def _bounds_parser(sub: Any) -> None:
    bo = sub.add_parser("bounds", help="lower-bound hierarchy and certificate", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    _workload_args(bo)
    bo.add_argument("--levels", type=levels_arg, metavar="LEVEL[,LEVEL...]",
                    help="comma-separated levels, run cheapest first (default: the problem's hierarchy, e.g. "
                         f"simple,dp,stage-cut,superblock,guess,exact for pipelines); the levels: {level_choices()}")
    bo.add_argument("--method", choices=IP_METHODS, help="problem class: exact = DAG-ordered pipeline (the default "
                                                         "on identical devices), ip = contiguous (the default on "
                                                         "others, for latency and for training graphs), "
                                                         "ip-noncontig = any split")
    bo.add_argument("--time-limit", type=_number(float, 0, "--time-limit", inclusive=False), default=60.0,
                    metavar="SECONDS",
                    help="wall-clock seconds for the whole command from its start, model builds included; "
                         "each level gets its share of what is left, and a level that cannot fit is skipped "
                         "with the reason (default: 60)")
    bo.add_argument("--workers", type=_number(int, 1, "--workers"), default=1, metavar="N",
                    help="levels solved in parallel (default: 1)")
    bo.add_argument("--solver", default="highs", help="MIP solver of the MIP levels: highs, scip or any Pyomo "
                                                      "solver name (default: highs)")
    bo.set_defaults(func=cmd_bounds)


def _evaluate_parser(sub: Any) -> None:
    ev = sub.add_parser("evaluate", help="score a split with the cost model", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    _workload_args(ev)
    ev.add_argument("--split", required=True, help="placement or split file")
    ev.set_defaults(func=cmd_evaluate)


def _convert_parser(sub: Any) -> None:
    cv = sub.add_parser("convert", help="convert a workload between formats", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    cv.add_argument("input", help="workload file or zoo:NAME to read")
    cv.add_argument("output", help="file to write (.json: native unless --to says otherwise)")
    _cluster_args(cv)
    cv.add_argument("--to", choices=("native", "dnn-partitioning"), help="output format (default: native)")
    _common(cv, "print a JSON summary of what was written")
    cv.set_defaults(func=cmd_convert)


def _zoo_parser(sub: Any) -> None:
    zo = sub.add_parser("zoo", help="list the built-in models", epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(zo, "print the names as a JSON object")
    zo.set_defaults(func=cmd_zoo)


def _methods_parser(sub: Any) -> None:
    me = sub.add_parser("methods", help="list the heuristic methods, what they optimize and their options",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    _common(me, "print the methods as a JSON object")
    me.set_defaults(func=cmd_methods)


CORE = {"evaluate": _evaluate_parser, "solve": _solve_parser, "bounds": _bounds_parser, "convert": _convert_parser,
        "zoo": _zoo_parser, "methods": _methods_parser}
"""The commands whose subparsers :func:`build_parser` can build alone, in the order of ``--help``."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``placement-dsl`` parser: every option of every command has help; exit statuses in the epilog.

    ``command``: the command a line names first, when it is one of :data:`CORE`: only its subparser is built,
    which parses that line alike (the same options, help and one-line errors) without building the other
    commands' parsers or importing their modules (sweeps, pictures, importers, exporters, the profiler: about
    0.1 s of every command's start-up). Any other value builds them all."""
    p = Parser(prog="placement-dsl", description=DESCRIPTION, epilog=EPILOG,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="re-raise unexpected errors with their traceback instead of a one-line message")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", help="one of the commands below")
    if command in CORE:
        CORE[command](sub)
        return p
    for add in CORE.values():
        add(sub)
    from .export import add_export_parser
    from .importer import add_import_parser
    from .profile import add_profile_parser
    from .show import add_show_parser
    from .sweep import add_sweep_parsers

    add_sweep_parsers(sub, _number, _common)
    add_show_parser(sub)
    add_import_parser(sub)
    add_export_parser(sub)
    add_profile_parser(sub)
    return p
