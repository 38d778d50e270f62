"""What the passes a race runs to their end cost (the baselines MOIRAI compares against and the list schedulers): their
CPU seconds estimated from the graph's ops, edges, devices and mean width, and the wall seconds on this machine as
loaded now, by which :mod:`placement_dsl.starts` orders and sizes its races."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..deadline import contention

PASSES = {"list": (0.0073, 0.0, 1.57e-7, 8.5e-7, 0.0, 0.0), "cpop": (0.0175, 0.0, 1.99e-7, 7.4e-7, 0.0, 0.0),
          "one-device-best": (0.00898, 3.31e-7, 0.0, 0.0, 5.83e-7, 0.0), "getf": (0.0, 0.0, 5.71e-6, 0.0, 8.05e-7, 0.0),
          "m-sct": (0.0, 0.0, 0.0, 3.09e-5, 0.0, 0.0)}
"""Constructions that run one pass and stop (the baselines MOIRAI compares against and the list schedulers), with
their CPU seconds on one core as a sum of terms (:func:`pass_seconds`): a start-up, then per op or edge and device
(each op tries every device, each tensor is booked on its route), the same times ``log2 n`` (the ready queue), per op
or edge times ``log2 n`` (m-SCT's favourite children), per op, device and op of the graph's mean width
(:func:`mean_width`: ETF compares every ready pair at each step), per op and op of the width. Fitted to their CPU
time on generated MOIRAI sheets of 600 to 15,000 tasks (1,847 to 47,698 ops with their flows, 3 to 8 devices, mean
widths 10 to 49), MOIRAI's GoogLeNet and GPT-3 decoders of 1,638 and 4,886 ops on Table III's clusters: within 0.4
to 1.5 times each run (HEFT and CPOP 0.88 to 1.2). A race runs them before any search, cheapest first by
:func:`pass_estimates`, each with all the time left, and a share too small for them is widened to hold them: a
baseline that is cheap always gets its run, and the answer is never worse than it. The former rates, per op, device
and op of the width alone, were 20 times HEFT's run on a wide sheet (the best single device: 38 s estimated on
15,838 ops, done in under 1.8 s), and ``bounds``, which ran them cheapest first by those, ran the best single device
before HEFT: on a 15,000-task sheet it answered the work-balanced split's 1,078.51 where HEFT finds 319.5 in 3 s of
CPU."""
# (GETF's and m-SCT's terms were refitted on GPT-3 decoders of 217 to 2,450 ops on both Table III clusters and layered
# sheets of 2,107 to 9,424 ops, within 0.5 to 1.9 of each; a 18,949-op sheet, not fitted, ran 0.89 and 1.24 of them,
# where the former terms were 3.4 to 5.8 times low on every one of them)
# (one-device-best's terms are 0.67 of their fit since each graph builds its exact transfer table once: its k + 1 list
# schedules ran 3.5-5.5 times under the fit on 700- to 1,500-task sheets and a GPT-3 graph, idle; not refitted whole)
PASS_MARGIN = 1.25  # the estimate's safety factor (the fit's spread between graphs)


def mean_width(graph: Any) -> float:
    """The graph's ops per level of its longest paths in edges (at least 1): how many ops a list scheduler's ready set
    holds, on the average."""
    if graph.n == 0:
        return 1.0
    level = np.zeros(graph.n, dtype=np.int64)
    for v in graph.topo.tolist():
        succ = graph.successors(v)
        if succ.size:
            level[succ] = np.maximum(level[succ], level[v] + 1)
    return graph.n / (int(level.max()) + 1)


def pass_estimates(problem: Any, methods: list[str]) -> dict[str, float]:
    """The passes (:data:`PASSES`) among ``methods``, cheapest first, with the wall seconds each is estimated to take
    on ``problem`` on this machine as loaded now (:func:`pass_wall`)."""
    return pass_wall(problem.graph, problem.cluster, methods)


def pass_wall(graph: Any, cluster: Any, methods: list[str]) -> dict[str, float]:
    """The passes (:data:`PASSES`) among ``methods``, cheapest first, with the wall seconds each is estimated to take
    on ``graph`` onto ``cluster`` on this machine as loaded now: its CPU seconds (:func:`cpu_seconds`) times
    :data:`PASS_MARGIN` and the machine's :func:`~placement_dsl.deadline.contention` (the load average per core, at
    least 1), the one reading of the load every estimate of wall seconds takes. The one estimate of a pass, for a
    race's order and sizing (:class:`Sizes` corrects it by what the race's passes took) and for latency-best's
    list-scheduling candidates alike."""
    found = [m for m in dict.fromkeys(methods) if m in PASSES]  # (the O(n + m) baselines are none of them)
    if not found:
        return {}
    width = mean_width(graph)
    factor = PASS_MARGIN * contention()
    cpu = {m: cpu_seconds(graph, cluster.size, m, width) for m in found}
    return {m: cpu[m] * factor for m in sorted(found, key=lambda m: cpu[m])}


def pass_seconds(problem: Any, method: str, width: float | None = None) -> float:
    """The CPU seconds of pass ``method`` on ``problem`` on one idle core (:func:`cpu_seconds`)."""
    return cpu_seconds(problem.graph, problem.cluster.size, method, width)


def cpu_seconds(g: Any, devices: int, method: str, width: float | None = None) -> float:
    """The CPU seconds of pass ``method`` on graph ``g`` onto ``devices`` devices on one idle core: its terms
    (:data:`PASSES`) on the graph's ops ``n``, edges ``m``, devices ``D`` and mean width ``w`` (``width``; computed
    when ``None``): ``1``, ``(n + m) D``, ``(n + m) D log2 n``, ``(n + m) log2 n``, ``n D w``, ``n w``."""
    w = mean_width(g) if width is None else width
    size, log = g.n + g.m, math.log2(max(g.n, 2))
    terms = (1.0, size * devices, size * devices * log, size * log, g.n * devices * w, g.n * w)
    return float(sum(c * t for c, t in zip(PASSES[method], terms, strict=True)))


class Sizes:
    """What a race's methods need before they can answer anything, corrected by what its passes took so far: a pass's
    estimated wall seconds (``passes``, :func:`pass_wall`) times the passes' overrun in this race (their wall
    seconds over their estimates, at least 1: the fit's spread, a slower CPU, a load that rose), and a method's
    own set-up seconds (``set_up``: an improving search's state built before its first look at its clock); 0 for
    any other method. On a GPT of 5,057 ops onto MOIRAI's inter-server cluster at load 5 the passes ran 1.5 times
    their estimates, and m-SCT, started with 1.5 s of its 3.9 s, was cut short for nothing. ``held``: the race's
    caller holds a start already (none of its methods is needed for one)."""

    def __init__(self, passes: dict[str, float], set_up: dict[str, float] | None = None, held: bool = False) -> None:
        self.passes, self.set_up, self.held = passes, set_up or {}, held
        self.spent = self.estimated = 0.0

    def overrun(self) -> float:
        """The passes' wall seconds so far over their estimates, at least 1 (1 before any pass ran)."""
        return max(1.0, self.spent / self.estimated) if self.estimated > 0 else 1.0

    def need(self, method: str) -> float:
        """The seconds ``method`` is expected to take before it answers (its set-up, or the corrected estimate)."""
        return max(self.set_up.get(method, 0.0), self.passes.get(method, 0.0) * self.overrun())

    def ran(self, method: str, seconds: float) -> None:
        """``method`` took ``seconds`` of wall clock: a pass's time corrects the estimates of the passes after it."""
        if method in self.passes:
            self.spent, self.estimated = self.spent + seconds, self.estimated + self.passes[method]
