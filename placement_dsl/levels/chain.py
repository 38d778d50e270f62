"""The windowed chain MIP (``docs/strengthening.md``): a solver's proof of the DP over its class."""
from __future__ import annotations

from ..certificate import MIP_GAP, LevelStatus, solve_level
from ..constraints import DagOrder
from ..errors import SpecError
from ..problem import Problem
from .base import DP_CLASS, Family, Outcome, Run, dp_class_is_dag_order, level, placement_mip_needs


def _chain_accepts(problem: Problem) -> str | None:
    """Tarnawski's problems, and DAG-ordered ones on identical stages (where the chain's class is the problem's)."""
    if problem.has(DagOrder) and not dp_class_is_dag_order(problem):
        return "bounds Tarnawski's problems, or DAG-ordered ones on identical stages; use 'exact'"
    return None


@level("chain", rank=40, defaults={Family.THROUGHPUT}, accepts=_chain_accepts, always=True, precision=MIP_GAP,
       needs=placement_mip_needs, doc="windowed chain MIP: a solver's proof of the DP")
def _chain(run: Run, seconds: float) -> Outcome:
    """The chain MIP windowed at ``DP / (1 + gap)``; on identical stages under DagOrder (its class) without a DP,
    at targets bisected between the known bound and the best placement (``search.chain.target_level``)."""
    ordered = dp_class_is_dag_order(run.problem)
    scope = run.scope if ordered else DP_CLASS
    if run.dp is None and ordered and run.best[1] is not None:  # targets bisected below the best placement
        from ..search.chain import target_level
        bound, done, note, found = target_level(run.problem, run.best[0], run.bound[0], seconds, run.solver,
                                                start=run.best[1])
        for placement in found:
            run.offer(placement, "chain")
        return bound, LevelStatus.OPTIMAL if done else LevelStatus.TIME_LIMIT, note, scope
    if run.dp is None:
        return None, LevelStatus.NOT_APPLICABLE, "needs the DP's placement as incumbent; run level 'dp'", scope
    try:
        res, status = solve_level(run, "chain", seconds, run.dp, options={"windows": True})
    except SpecError as err:
        return None, LevelStatus.NOT_APPLICABLE, str(err), scope
    if res.placement is not None and res.found_by == "solver":
        run.offer(res.placement, "chain")
    return res.bound, status, "min(T*, bound) of the windowed chain MIP", scope
