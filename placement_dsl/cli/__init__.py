"""Command line: ``placement-dsl evaluate|solve|bounds|convert|zoo``.

WORKLOAD is a file in any supported format (detected from content/extension, or given by
``--format``) or ``zoo:NAME`` for a model of the built-in zoo.

With ``--json`` a command prints exactly one standard JSON object on stdout (no ``NaN`` or
``Infinity``: non-finite numbers are ``null``); notes and errors go to stderr. Errors are one
line; see :data:`EPILOG` for the exit statuses.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import NoReturn

from .. import progress
from ..deadline import process_start
from ..errors import EvaluationMismatchError, InfeasibleError, PlacementError
from ..heuristics import jit
from .commands import cmd_bounds, cmd_convert, cmd_evaluate, cmd_solve, cmd_zoo
from .common import EXIT_ERROR, EXIT_INFEASIBLE, EXIT_INTERNAL, EXIT_PIPE, HEURISTIC_METHODS, IP_METHODS
from .options import heuristic_options, kernels_cold
from .parser import CORE, build_parser
from .workloads import one_line, read_workload, resize

__all__ = ["HEURISTIC_METHODS", "IP_METHODS", "build_parser", "cmd_bounds", "cmd_convert", "cmd_evaluate", "cmd_solve",
           "cmd_zoo", "heuristic_options", "kernels_cold", "main", "read_workload", "resize", "run_command"]


# ---------------------------------------------------------------------------- entry point
def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command; every error becomes one line on stderr and an exit status."""
    try:
        with progress.reporting(progress.for_terminal(quiet=getattr(args, "quiet", False))), jit.scope():
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
    if isinstance(err, PlacementError) and not isinstance(err, EvaluationMismatchError):  # the package's defect,
        print(f"error: {one_line(err)}", file=sys.stderr)  # not the input's: an internal error below
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


def _exit_now(code: int) -> NoReturn:
    """End the process with ``code`` once its output is written, without the interpreter's teardown.

    Tearing down a large model's millions of objects one by one took 12 s after a 60 s solve on a loaded
    machine, all of it past the time limit. Child processes still running are stopped first (the
    interpreter's exit would do that for daemonic ones), multiprocessing's semaphores are unlinked, and logging's
    handlers are flushed."""
    multiprocessing = sys.modules.get("multiprocessing")  # no children without it
    if multiprocessing is not None:
        for child in multiprocessing.active_children():
            child.terminate()
            child.join(1.0)
        # the finalizers the interpreter's exit runs first (multiprocessing.util's exit function): they unlink the
        # semaphores of a spawned pool or lock still held, which the resource tracker otherwise reports as leaked
        util = sys.modules.get("multiprocessing.util")
        if util is not None:
            util._run_finalizers(0)
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """``placement-dsl``: parse ``argv``, run the command, return the exit status (see :data:`EPILOG`).

    A ``--time-limit`` counts from the start of the process when the command line is the process's own
    (``argv`` is ``None``), else from this call; the process's own command line ends the process when the
    command is done (:func:`_exit_now`), so that its teardown does not run past the limit."""
    started = process_start() if argv is None else time.monotonic()
    try:
        line = sys.argv[1:] if argv is None else argv
        args = build_parser(line[0] if line and line[0] in CORE else None).parse_args(argv)
        args.started = started
        args.own_process = argv is None  # the process is the command's alone (its workload may be frozen in memory)
        code = run_command(args)
        sys.stdout.flush()
    except BrokenPipeError:
        return _quiet_closed_stdout()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    if argv is None:
        _exit_now(code)
    return code

