"""``min(one device's load, busiest work + cheapest tensor)``: a placement keeps the graph on one device or cuts a
tensor on every device it uses (:mod:`placement_dsl.bounds.one_or_cut`); it bounds every placement, in O(n + m)."""
from __future__ import annotations

from ..bounds import one_or_cut
from ..certificate import LevelStatus
from .base import ALL, VECTOR_PER_EDGE, Family, Outcome, Run, level

MAX_LOAD = {Family.MTPP, Family.THROUGHPUT, Family.NONCONTIGUOUS}  # a routed cluster's devices are not identical


@level("one-or-cut", rank=12, defaults=MAX_LOAD, accepts=one_or_cut.problem_applies, closed_form=True, free=True, per_edge=VECTOR_PER_EDGE,
       doc="one device's load, or the busiest device's work plus the cheapest tensor it must cut")
def _one_or_cut(run: Run, seconds: float) -> Outcome:
    del seconds  # O(n + m)
    bound = one_or_cut.problem_bound(run.problem)
    return bound, LevelStatus.OPTIMAL, "one device, or a cut tensor on every device in use", ALL
