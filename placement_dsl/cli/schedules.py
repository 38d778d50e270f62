"""Schedules on heterogeneous devices from the command line (MOIRAI, Zhang et al.).

* ``--objective latency`` on a MOIRAI sheet is the makespan of its schedule (MOIRAI eq. 4: one
  inference's latency on heterogeneous devices), which is also a sheet's default objective;
* ``--congestion port|channel|link|none`` says which transfers exclude each other (MOIRAI eq. 8);
* ``--method ip`` on a makespan problem is the ``schedule`` formulation (``--solver cpsat`` for
  CP-SAT), started from the best of the makespan heuristics within a small share of the budget (``auto``:
  list scheduling, GETF, m-SCT, CPOP, ..., then improved) unless ``--warm-start`` names one;
* ``--out`` on a MOIRAI sheet writes the schedule file of :mod:`placement_dsl.io.moirai`
  (the sheet's task and flow ids, devices numbered as its columns).
"""
from __future__ import annotations

import argparse
from typing import Any

from ..errors import SpecError
from ..evaluate import CostModel, Objective
from ..io import Workload, save_placement
from ..io.common import jsonable
from .common import note

CONGESTION = ("port", "channel", "link", "none")


def add_congestion_arg(sp: argparse.ArgumentParser) -> None:
    """``--congestion``: which transfers exclude each other in a schedule (makespan objectives)."""
    sp.add_argument("--congestion", choices=CONGESTION,
                    help="makespan (MOIRAI sheets) and latency over a cluster's links: transfers leaving or "
                         "entering one device never overlap (port, the default of both names), or on one ordered "
                         "device pair (channel), or on one physical link of their routes (link), or never "
                         "contend (none)")


def objective_name(workload: Workload, name: str) -> str:
    """``latency`` on a MOIRAI sheet is its schedule's makespan; other names are kept."""
    return "makespan" if name == "latency" and workload.format == "moirai" else name


def congestion_fields(args: argparse.Namespace, name: str) -> dict[str, Any]:
    """The cost model's congestion from ``--congestion`` (noted and ignored for throughput objectives, whose
    link loads are already resources)."""
    mode = getattr(args, "congestion", None)
    if mode is None:
        return {}
    if name not in ("makespan", "latency"):
        note(f"--congestion applies to single-sample objectives (makespan, latency); objective {name!r} already "
             f"counts every link's load as a resource, so it is ignored")
        return {}
    return {"congestion": mode}


def solve_makespan(args: argparse.Namespace, workload: Workload, model: CostModel) -> Any:
    """``--method ip`` on a makespan problem: the family's formulation for the way the cluster runs ops (``"auto"``:
    the schedule MILP, or CP-SAT, where devices run one op at a time; the latency IP where they run invocations).
    The makespan problem places any op on any device (MOIRAI eq. 4-8), so ``ip-noncontig`` is the same problem;
    ``exact`` (a DAG-ordered pipeline) is refused, saying why."""
    from ..search.lns import makespan_problem
    from ..solve import solve

    if args.method not in ("ip", "ip-noncontig"):
        raise SpecError(f"method {args.method} solves a DAG-ordered pipeline (Archer Fig. 3), which has no makespan "
                        "formulation: a single sample's schedule sends tensors back and forth between devices, and "
                        "the makespan problem places any op on any device; use --method ip or ip-noncontig (that "
                        "problem: the schedule MILP, or CP-SAT with --solver cpsat) or a schedule heuristic (list, "
                        "one-device-best, schedule-lns)")
    from .common import command_deadline

    problem = makespan_problem(workload.graph, workload.cluster, model)
    deadline = command_deadline(args)
    return solve(problem, "auto", solver=args.solver, time_limit=args.time_limit, gap=args.gap,
                 warm_start=args.warm_start, deadline=deadline)


def is_makespan(model: CostModel) -> bool:
    return model.objective is Objective.MAKESPAN


def save_answer(placement: Any, path: str, workload: Workload, model: CostModel, objective: float | None) -> None:
    """``--out``: a MOIRAI sheet's schedule file, else the placement file of the workload's format."""
    if workload.format != "moirai":
        save_placement(placement, path, workload, objective)
        return
    import json

    from ..files import write_atomic
    from ..io.moirai import schedule_to_dict

    data = schedule_to_dict(placement, model.congestion.value)
    write_atomic(path, json.dumps(jsonable(data), indent=1) + "\n")
