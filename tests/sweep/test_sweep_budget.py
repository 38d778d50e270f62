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


def method_task(tmp_path, limit: float) -> dict:
    return {**level_task(tmp_path, limit), "kind": tasks.METHOD, "name": "slicegraph"}


def test_a_method_task_is_given_what_is_left_of_its_clock(tmp_path, monkeypatch):
    """A method task ran without a time limit (slicegraph and BRKGA as long as their searches took: the watchdog's
    3 times the limit and 5 minutes was their only bound), and its clock started after the process's own start-up.
    Its clock now starts where the executor says (its worker slot free; the sweep's start for the first tasks), and
    the method is given what is left of it."""
    given = []
    real = tasks.run

    def spy(method, *args, **kwargs):
        given.append(kwargs.get("time_limit"))
        return real(method, *args, **kwargs)

    monkeypatch.setattr(tasks, "run", spy)
    record = tasks.execute({**method_task(tmp_path, 10.0), "clock": time.monotonic() - 8.0})  # 8 s spent starting
    assert record["status"] == "done", record
    assert given and given[0] is not None and 0 < given[0] <= 2.0
    assert record["start_seconds"] >= 8.0


def test_the_first_tasks_clocks_start_with_the_sweep(tmp_path):
    """A sweep's own start (reading the testbed, the fork server's loads: ~13 s beside a CPU-bound job) was outside
    every task's clock. The local executor starts the first tasks' clocks where the sweep started."""
    from placement_dsl.sweep import LocalExecutor, Task

    executor = LocalExecutor(workers=1, started=time.monotonic() - 100.0)
    try:
        executor.submit(Task.from_dict(method_task(tmp_path, 5.0)), 1)
        done = []
        deadline = time.monotonic() + 120
        while not done and time.monotonic() < deadline:
            done = executor.wait(0.5)
    finally:
        executor.close()
    assert done and done[0].record["status"] == "done", done
    assert done[0].record["start_seconds"] >= 100.0
