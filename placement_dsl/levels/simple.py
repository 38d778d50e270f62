"""Lemma 3.3 (Archer et al.): ``max(max_v work, sum_v work / k)``; for max load also the packing bound
(:mod:`placement_dsl.bounds.packing`); with replicated stages :func:`~placement_dsl.bounds.simple.replicated_lower_bound`."""
from __future__ import annotations

from ..bounds import simple_lower_bound
from ..bounds.max_load import replicas
from ..bounds.packing import SECONDS as PACKING_SECONDS
from ..bounds.packing import packing_bound
from ..bounds.simple import replicated_lower_bound
from ..certificate import LevelStatus
from ..evaluate import Objective
from .base import ALL, VECTOR_PER_EDGE, Family, Outcome, Run, level, not_latency

MAX_LOAD = {Family.MTPP, Family.ROUTED_MTPP, Family.THROUGHPUT, Family.NONCONTIGUOUS}
PACKING_SHARE = 0.25  # of the level's share, the most the packing bound's searches take: this level runs first and
# even once the budget is spent, and its searches took their whole 2 s of a 5 s ``bounds`` on GPT-3 of 20,111 ops
# onto 4 stages (245.81), leaving none to the cut stages, which prove 250.59 in 0.2 s


@level("simple", rank=10, defaults=MAX_LOAD, accepts=not_latency, closed_form=True, free=True, per_edge=VECTOR_PER_EDGE, replicates=True,
       doc="Lemma 3.3, max(max_v work, sum_v work / k)")
def _simple(run: Run, seconds: float) -> Outcome:
    p = run.problem
    R = replicas(p)
    if R > 1:
        bound = replicated_lower_bound(p.graph, p.cluster, R, run.model.overlap.value)
        return bound, LevelStatus.OPTIMAL, f"Lemma 3.3 with up to {R} replicas per stage", ALL
    bound = simple_lower_bound(p.graph, p.cluster)
    if run.model.objective is Objective.MAX_LOAD:  # one device's compute bounds max load, not GPipe's sum of maxima
        hole = packing_bound(p.graph, p.cluster, seconds=min(PACKING_SECONDS, PACKING_SHARE * seconds))  # at least
        # the pigeonhole bound, cut short
        if hole > bound:
            return hole, LevelStatus.OPTIMAL, "packing: units too slow for a host are packed on the accelerators", ALL
    return bound, LevelStatus.OPTIMAL, "Lemma 3.3", ALL
