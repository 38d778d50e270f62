"""``placement-dsl sweep`` and ``placement-dsl sweep-report``: testbed grids that resume, and their reports."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..levels import MANIFEST
from .common import EPILOG, EXIT_OK
from .workloads import emit, emit_unsaved, note

DEFAULT_STAGES = "2,4,8,16,32,64"
DEFAULT_LEVELS = "simple,superblock,guess,exact"
DEFAULT_METHODS = "slicegraph,brkga"


def add_sweep_parsers(sub: Any, number: Callable[..., Any], common: Callable[..., None]) -> None:
    """Register ``sweep`` and ``sweep-report`` on the subparsers ``sub`` (``number``, ``common``: parser helpers)."""
    sw = sub.add_parser("sweep", help="bound and place every graph of a testbed for every k; resumes where it stopped",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sw.add_argument("testbed", help="directory of workload files, a glob, a file, or zoo:NAME; several "
                                    "comma-separated (e.g. 'zoo:regal-0,zoo:regal-1')")
    sw.add_argument("--stages", default=DEFAULT_STAGES, metavar="K,K,...",
                    help=f"numbers of pipeline stages (default: {DEFAULT_STAGES})")
    sw.add_argument("--levels", default=DEFAULT_LEVELS, metavar="LEVEL,...",
                    help=f"bound levels, one task each (default: {DEFAULT_LEVELS}; '' for none); choose from "
                         f"{', '.join(MANIFEST)}")
    sw.add_argument("--methods", default=DEFAULT_METHODS, metavar="METHOD,...",
                    help=f"heuristics, one task each (default: {DEFAULT_METHODS}; '' for none)")
    sw.add_argument("--time-limit", type=number(float, 0, "--time-limit", inclusive=False), default=60.0,
                    metavar="SECONDS", help="seconds per task from when a worker is free for it (the first tasks: "
                                            "from the sweep's start): a level's certify budget with its heuristics, "
                                            "a method's time limit (default: 60)")
    sw.add_argument("--results", required=True, metavar="FILE",
                    help="SQLite results store; created if absent, else only its missing tasks run")
    sw.add_argument("--scheduler", metavar="ADDRESS",
                    help="run on the Dask scheduler at ADDRESS (tcp://host:8786) instead of local processes")
    sw.add_argument("--workers", type=number(int, 1, "--workers"), default=os.cpu_count() or 1, metavar="N",
                    help="local task processes at once, one solver thread each (default: the CPU count)")
    sw.add_argument("--retry-failed", action="store_true", help="run the tasks stored as failed again")
    common(sw, "print a JSON summary (counts and table rows) on stdout")
    sw.set_defaults(func=cmd_sweep)
    rp = sub.add_parser("sweep-report", help="tables, figures and a CSV from a sweep's results store",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    rp.add_argument("results", help="the results store of 'placement-dsl sweep'")
    rp.add_argument("--out", metavar="DIR", help="write instances.csv, the PNG figures and report.md here "
                                                 "(default: beside RESULTS, named after it with '-report')")
    common(rp, "print the summary as one JSON object (tasks_done, tasks_failed, the table rows, instances)")
    rp.set_defaults(func=cmd_sweep_report)


def split_names(text: str, option: str) -> list[str]:
    """``a,b,c`` as a list (empty items dropped)."""
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def split_ints(text: str, option: str) -> list[int]:
    """``2,4,8`` as integers; a SpecError naming ``option`` otherwise."""
    try:
        values = [int(part) for part in split_names(text, option)]
    except ValueError:
        raise SpecError(f"{option} {text!r} is not a comma-separated list of integers; write e.g. {option} 2,4,8") \
            from None
    if not values:
        raise SpecError(f"{option} is empty; write e.g. {option} 2,4,8")
    return values


def cmd_sweep(args: argparse.Namespace) -> int:
    """``sweep``: plan the grid, run what the store lacks, print the tables (or a JSON summary)."""
    from ..sweep import DaskExecutor, LocalExecutor, Store, check_graphs, expand_testbed, plan, run_sweep, summary
    from ..sweep import text as summary_text

    graphs = expand_testbed(args.testbed)
    check_graphs(graphs)
    tasks = plan(graphs, split_ints(args.stages, "--stages"), split_names(args.levels, "--levels"),
                 split_names(args.methods, "--methods"), args.time_limit)
    config = {k: v for k, v in vars(args).items() if k != "func"}
    with Store(args.results) as store:
        if args.scheduler and args.workers != (os.cpu_count() or 1):
            note("--workers applies to local processes; the Dask cluster's workers run the tasks")
        executor = (DaskExecutor(args.scheduler) if args.scheduler
                    else LocalExecutor(args.workers, started=getattr(args, "started", None)))
        progress = sys.stderr.isatty() and not args.quiet
        outcome = run_sweep(tasks, store, executor, retry_failed=args.retry_failed, progress=progress, config=config)
        s = summary(store)
    payload = {"planned": outcome.planned, "stored_before": outcome.stored_before, "ran": outcome.ran,
               "failed_now": outcome.failed, "retried": outcome.retried, "elsewhere": outcome.elsewhere,
               "seconds": outcome.seconds,
               **{k: v for k, v in s.items() if k != "instances"}}
    head = (f"{outcome.planned} tasks planned: {outcome.stored_before} already stored, {outcome.ran} run now "
            f"({len(outcome.failed)} failed, {len(outcome.retried)} retried after a crash) in {outcome.seconds:.0f} s"
            + (f"; {len(outcome.elsewhere)} left to another sweep on {args.results}" if outcome.elsewhere else ""))
    emit(args, payload, head + "\n" + summary_text(s))
    return EXIT_OK


def cmd_sweep_report(args: argparse.Namespace) -> int:
    """``sweep-report``: write the CSV, figures and markdown report; print the tables or the JSON summary."""
    from ..sweep import Store, summary
    from ..sweep import text as summary_text
    from ..sweep.report import check_report_dir, write_files

    results = Path(args.results)
    out = check_report_dir(Path(args.out) if args.out else results.with_name(results.stem + "-report"))
    with Store(results, readonly=True) as store:
        s = summary(store)
    try:
        files = write_files(s, out)
    except SpecError as err:
        return emit_unsaved(s, err)
    if not any(f.suffix == ".png" for f in files):
        note("matplotlib is not installed: no figures (pip install 'placement_dsl[sweep]')")
    payload = {**s, "files": [str(f) for f in files]}
    emit(args, payload, summary_text(s) + "\n\nwrote " + ", ".join(str(f) for f in files))
    return EXIT_OK
