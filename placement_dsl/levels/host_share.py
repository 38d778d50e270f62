"""The one host's share of a contiguous placement when the accelerators' memory binds: the accelerators hold an ideal
and a filter within their summed memory, the host runs the rest (:mod:`placement_dsl.heuristics.host_share`).

It bounds every contiguous placement (Tarnawski Def. 3.1), so the problems under ``Contiguous`` and those under
``DagOrder`` (a DAG-ordered placement is contiguous: a device's ops are the difference of two ideals), the host
anywhere in the pipeline. Under ``DagOrder`` with the hosts at one end, ``ordered-memory`` (the filter empty, or the
ideal) bounds the same placements at least as tightly, and this level declines. It declines in ``O(n + D)``
where no host's work is forced (no single host, memory that does not bind, a backward pass, soft memory); it
walks the graph's ideals otherwise (:mod:`~placement_dsl.heuristics.ideal_walk`, no compiled kernel), refusing
beyond :data:`~placement_dsl.heuristics.host_share.MAX_IDEALS` and stopped at its share.
"""
from __future__ import annotations

from ..certificate import LevelStatus
from ..constraints import Contiguous, DagOrder
from ..deadline import BudgetSpent
from ..errors import SpecError
from ..heuristics.base import TimeLimitReached
from ..heuristics.host_share import applies, host_share_bound
from ..heuristics.ordered_memory import host_side
from ..problem import Problem
from .base import Family, Outcome, Run, level


def _accepts(problem: Problem) -> str | None:
    if not (problem.has(Contiguous) or problem.has(DagOrder)):
        return "bounds contiguous placements (Contiguous or DagOrder)"
    if problem.has(DagOrder) and not problem.has(Contiguous) and host_side(problem.cluster) is not None:
        return "the hosts sit at one end of the DAG order: ordered-memory bounds these placements as tightly"
    if not applies(problem):
        return ("needs a max load under hard memory, one host device, accelerators of finite memory that cannot "
                "hold every op, and no backward pass")
    return None


@level("host-share", rank=13.5, defaults={Family.MTPP, Family.THROUGHPUT}, accepts=_accepts, closed_form=True,
       doc="the one host runs what a prefix and a suffix within the accelerators' memory leave (contiguous)")
def _host_share(run: Run, seconds: float) -> Outcome:
    """``t(V) - max {t(I) + t(F) : I an ideal, F a filter, mem(I) + mem(F) <= C}`` with ``t`` the host's times and
    ``C`` the accelerators' summed memory: a bound on every contiguous placement."""
    scope = run.scope  # Contiguous's, or DagOrder's: without a backward pass (applies) those are contiguous
    try:
        bound = host_share_bound(run.problem, deadline=run.clock.within(seconds).at)
    except TimeLimitReached as err:
        raise BudgetSpent(f"budget spent: {err}") from None
    except SpecError as err:  # too many ideals
        return None, LevelStatus.NOT_APPLICABLE, str(err).split(";")[0], scope
    if bound is None:
        return None, LevelStatus.NOT_APPLICABLE, "no host's work is forced", scope
    note = "the host runs what an ideal and a filter within the accelerators' memory leave"
    return bound, LevelStatus.OPTIMAL, note, scope
