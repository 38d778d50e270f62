"""The problems the command line means: ``--method`` and ``--objective`` turned into problem terms.

This mapping belongs to the command line; the model layers know terms, not method names.
"""
from __future__ import annotations

from typing import Any

from ..certify import certify
from ..constraints import Contiguous, DagOrder, Memory, Overflow, Subgraphs, Term
from ..errors import SpecError
from ..evaluate import CostModel, MemoryMode
from ..objectives import Latency, objective_named, objective_of
from ..problem import Problem

STRUCTURE: dict[str, list[Term]] = {"ip": [Contiguous()], "ip-noncontig": [], "exact": [DagOrder()]}


def problem_for_method(workload: Any, objective: str | None = None, method: str = "ip",
                       overlap: str = "none", subgraphs: int | None = None) -> Problem:
    """The problem a command-line ``--method`` means for a workload.

    ``ip``: contiguous (Tarnawski Fig. 6; Fig. 3 for latency); ``ip-noncontig``: the same
    without contiguity (§5.2); ``exact``: Archer's Fig. 3 with DAG order. Memory is hard,
    except for ``bottleneck`` which streams the overflow (Archer eq. (2)). ``subgraphs``
    (latency only, ``--subgraphs Q``): at most ``Q`` contiguous subgraphs per accelerator
    (Fig. 4) in place of contiguity.
    """
    name = objective or workload.meta.get("objective", "throughput")
    term = objective_named(name, overlap)
    if method not in STRUCTURE:
        raise SpecError(f"method {method!r} has no formulation; choose from {sorted(STRUCTURE)}")
    memory: Term = Overflow() if term.cost_model().memory is MemoryMode.OVERFLOW else Memory()
    structure = STRUCTURE[method]
    if subgraphs is not None:
        if not isinstance(term, Latency):
            raise SpecError(f"--subgraphs {subgraphs} limits the subgraphs per accelerator of a latency split; "
                            f"the objective is {name!r} (use --objective latency)")
        if method == "exact":
            raise SpecError("--subgraphs applies to methods ip and ip-noncontig, not exact (a DAG-ordered pipeline)")
        structure = [Subgraphs(subgraphs)]
    return Problem(workload.graph, workload.cluster, term, [memory, *structure])


def dag_problem(workload: Any, model: CostModel) -> Problem:
    """The DAG-ordered problem the ``bounds`` command certifies by default for a cost model."""
    memory = Overflow() if model.memory is MemoryMode.OVERFLOW else Memory()
    return Problem(workload.graph, workload.cluster, objective_of(model), [memory, DagOrder()])


def bounds_payload(problem: Problem, levels: list[str] | tuple[str, ...] | None = None, time_limit: float = 60.0,
                   workers: int = 1, solver: str = "highs", deadline: Any = None) -> tuple[dict[str, Any], str]:
    """Every requested level's bound and status, the best upper bound, and bound/UB (``placement-dsl bounds``).

    ``levels`` default to the problem's hierarchy. ``time_limit`` is the total wall-clock budget (ending by
    ``deadline`` too, the command's :class:`~placement_dsl.deadline.Deadline`); the run stops once the bound
    meets the best placement (gap 0). The payload is JSON-ready.
    """
    cert = certify(problem, budget=time_limit, levels=levels, gap=0.0, solver=solver, workers=workers,
                   deadline=deadline)
    ub = cert.objective
    payload = cert.to_dict()
    payload.update(graph=problem.graph.name, stages=problem.cluster.size, upper_bound=ub,
                   upper_bound_by=cert.found_by,
                   ratios={r.level: (None if r.bound is None or not ub else r.bound / ub) for r in cert.levels})
    return payload, cert.table()
