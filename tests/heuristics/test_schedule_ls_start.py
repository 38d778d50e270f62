"""``schedule-ls`` never answers worse than its start, scored by the cost model: the start's own schedule counts, and on
invocation devices (Tarnawski's restriction) a move its list schedules liked may score worse there."""
from __future__ import annotations

import numpy as np

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.heuristics.schedule_ls import schedule_local_search
from placement_dsl.placement import Placement
from placement_dsl.schedule import list_schedule
from placement_dsl.testing import random_graph


def test_schedule_ls_is_never_worse_than_its_start():
    model = CostModel.named("makespan")
    for seed in range(24):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(3, 7))
        g = random_graph(rng, n, 0.5)
        c = Cluster.accelerators(2 + seed % 2, bandwidth=1.0)  # invocation devices
        a = rng.integers(0, c.size, n)
        start = Placement(g, c, a, "start", schedule=list_schedule(Placement(g, c, a), "port"))
        before = evaluate(start, model)
        if not before.valid:  # invocations that form a cycle: no start to keep
            continue
        r = schedule_local_search(g, c, model=model, start=start, time_limit=1.0, seed=seed)
        after = evaluate(r.placement, model)
        assert after.valid and after.objective <= before.objective * (1 + 1e-9), (seed, before.objective, r.info)
        assert r.objective == after.objective
