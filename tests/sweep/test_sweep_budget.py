"""A level task times certify's upper-bound heuristics within a share of its limit: each is given what is left of
that share as its time limit, and none starts once it is spent (unbounded, BRKGA and slicegraph on GPT-3's 18,164 ops
held a 10 s task for 150 s)."""
from __future__ import annotations

import time

import numpy as np

from placement_dsl.cluster import Cluster
from placement_dsl.io import Workload, save_workload
from placement_dsl.sweep import Task, tasks
from placement_dsl.testing import random_graph


def level_task(tmp_path, limit: float) -> dict:
    graph = random_graph(np.random.default_rng(2), 8, density=0.3, name="tiny2")
    save_workload(Workload(graph, Cluster.stages(2), "native", {}), tmp_path / "tiny2.json")
    return Task(2, "tiny2", tasks.LEVEL, "simple", str(tmp_path / "tiny2.json"), limit).to_dict()


def test_the_upper_bound_heuristics_run_within_a_share_of_the_tasks_limit(tmp_path, monkeypatch):
    limit, given = 2.0, []
    real = tasks.run

    def spy(method, *args, **kwargs):
        given.append((method, kwargs.get("time_limit")))
        if len(given) == 1:  # the first heuristic spends the whole share: no other starts
            time.sleep(tasks.UPPER_SHARE * limit * 1.5)
        return real(method, *args, **kwargs)

    monkeypatch.setattr(tasks, "run", spy)
    record = tasks.execute(level_task(tmp_path, limit))
    assert record["status"] == "done", record
    assert len(given) == 1
    assert given[0][1] is not None and 0 < given[0][1] <= tasks.UPPER_SHARE * limit
