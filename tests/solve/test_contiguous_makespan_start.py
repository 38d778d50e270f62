"""The "auto" start of a latency solve over contiguous splits on a cluster whose devices run one op at a time.

The goal is then the makespan, whose passes (HEFT, CPOP, GETF, m-SCT) and schedule search place and move ops
freely: under contiguity their splits are refused, and the race kept greedy's split or every op on one device
while the latency search, which searches contiguous splits under the cost model it is given, was never raced
nor used to improve the start (a generated DAG of 2,000 ops: 2798.16 or 5715.96 where it finds 2179.99).
"""
from __future__ import annotations

from placement_dsl import Cluster, Device, Link, Route, Workload, starts
from placement_dsl.deadline import Deadline
from placement_dsl.heuristics.base import TimeLimitReached
from placement_dsl.presets import problem_for_method
from placement_dsl.starts import PASSES, auto_methods, goal, improving, leads, race, resolve

from .sheets import recent_dag


def _workload(n: int = 60, seed: int = 1) -> Workload:
    """A random layered DAG on four accelerators of different speeds joined by links, and a host CPU."""
    graph = recent_dag(n, seed, "op", (1e6, 5e7), (1e5, 4e6), f"rand{n}")
    memory = sum(o.param_bytes for o in graph.ops) / 3.0
    devices = [Device(name=f"gpu{k}", memory=memory, speed=s, bandwidth=8e6) for k, s in enumerate((1, 1.5, 0.7, 1.2))]
    links = []
    for a, b, bw in (("gpu0", "gpu1", 8e6), ("gpu1", "gpu2", 4e6), ("gpu2", "gpu3", 8e6), ("gpu0", "host", 1e6)):
        links += [Link(src=a, dst=b, bandwidth=bw, latency=0.01), Link(src=b, dst=a, bandwidth=bw, latency=0.01)]
    order = ["host", "gpu0", "gpu1", "gpu2", "gpu3"]
    routes = [Route(src=order[i], dst=order[j], path=tuple(order[i:j + 1])) for i in range(5) for j in range(i + 2, 5)]
    routes += [Route(src=order[j], dst=order[i], path=tuple(reversed(order[i:j + 1])))
               for i in range(5) for j in range(i + 2, 5)]
    return Workload(graph, Cluster([*devices, Device(name="host", kind="cpu")], links, routes))


def test_contiguous_makespan_races_and_continues_the_latency_search():
    problem = problem_for_method(_workload(), objective="latency", method="ip")
    assert goal(problem) == "makespan"
    assert improving(problem) == "latency-best"
    assert "latency-best" in auto_methods(problem) and leads(problem) == ("latency-best",)


def test_free_makespan_keeps_the_schedule_search():
    problem = problem_for_method(_workload(), objective="latency", method="ip-noncontig")
    assert goal(problem) == "makespan" and improving(problem) == "schedule-ls"
    assert "latency-best" not in auto_methods(problem)


def test_auto_start_is_no_worse_than_the_latency_search_alone():
    problem = problem_for_method(_workload(), objective="latency", method="ip")
    alone = resolve(problem, "latency-best", deadline=Deadline(5.0), keep=0.0)
    auto = resolve(problem, "auto", deadline=Deadline(6.0), share=1.0, cap=float("inf"))
    assert alone.usable and auto.usable
    assert auto.objective <= alone.objective * (1 + 1e-9)


def test_the_latency_search_runs_before_the_passes(monkeypatch):
    """The passes' splits are refused under contiguity: run first, they took the race's time (at load 4 on 2,000
    ops, 1.7 s of a 3.4 s race) and the latency search was stopped before it sent the 2590.16 it had found."""
    seen: list[str] = []
    real = starts.run

    def recording(method, *args, **kwargs):
        seen.append(method)
        return real(method, *args, **kwargs)
    monkeypatch.setattr(starts, "run", recording)
    monkeypatch.setattr(starts, "FORK", False)
    problem = problem_for_method(_workload(), objective="latency", method="ip")
    race(problem, auto_methods(problem), 30.0, Deadline(60.0))
    assert "latency-best" in seen and "list" in seen
    assert seen.index("latency-best") < min(seen.index(m) for m in PASSES if m in seen)


def test_the_latency_search_is_given_its_time_sized_from_the_graph(monkeypatch):
    """Half of a short race's time was the latency search's share: a 10 s solve of 2,000 ops at load 4.5 answered
    greedy's split (2,884.8) where its chain split is 2,266.6. It now takes at least its estimated time (but for the
    scoring of its answer), and the race is widened to hold it."""
    problem = problem_for_method(_workload(), objective="latency", method="ip")
    small = problem_for_method(_workload(30), objective="latency", method="ip")
    assert 0 < starts.lead_seconds(small, "latency-best") < starts.lead_seconds(problem, "latency-best")
    assert starts.lead_seconds(problem, "list") == 0.0
    free = problem_for_method(_workload(), objective="latency", method="ip-noncontig")
    assert starts.lead_seconds(free, "latency-best") == 0.0
    given: dict[str, float] = {}
    real = starts.run

    def recording(method, *args, **kwargs):
        given.setdefault(method, kwargs.get("time_limit"))
        return real(method, *args, **kwargs)
    monkeypatch.setattr(starts, "run", recording)
    monkeypatch.setattr(starts, "FORK", False)
    monkeypatch.setattr(starts, "lead_seconds", lambda p, m: 4.0 if m == "latency-best" else 0.0)
    race(problem, auto_methods(problem), 1.0, Deadline(60.0))
    assert given["latency-best"] >= 3.0  # a 1 s race: 0.5 s at most before


def test_the_later_rounds_start_from_chain_splits_in_other_orders(monkeypatch):
    """Under contiguity the critical-chain moves and the kicks of a local optimum are refused: a fresh round of the
    latency search from latency-best's answer starts from chain splits with the accelerators in other orders, and
    does not build the baselines again."""
    problem = problem_for_method(_workload(), objective="latency", method="ip")
    start = resolve(problem, "latency-best", deadline=Deadline(10.0), keep=0.0)
    assert start.usable and start.method == "latency-best"
    calls: list[tuple[str, dict]] = []
    real = starts.run

    def recording(method, *args, **kwargs):
        calls.append((method, kwargs))
        return real(method, *args, **kwargs)
    monkeypatch.setattr(starts, "run", recording)
    found = starts.improve(problem, start, 3.0, seed=5)
    assert found.usable and found.objective <= start.objective * (1 + 1e-9)
    assert calls and all(method == "latency-local-search" for method, _ in calls)
    labels = [label for label, _ in calls[0][1]["starts"]]
    assert labels and all(label.startswith("chain[") for label in labels) and len(set(labels)) == len(labels)


def test_passes_cut_short_are_not_left_to_run_again_under_contiguity(monkeypatch):
    """A solve runs the searches its start's race cut short again in the time left: under contiguity the passes'
    splits are refused, and that time went to them."""
    real = starts.run

    def cut(method, *args, **kwargs):
        if method in PASSES:
            raise TimeLimitReached(f"{method}: cut short")
        return real(method, *args, **kwargs)
    monkeypatch.setattr(starts, "run", cut)
    monkeypatch.setattr(starts, "FORK", False)
    problem = problem_for_method(_workload(), objective="latency", method="ip")
    _, _, unfinished = race(problem, auto_methods(problem), 10.0, Deadline(60.0))
    assert not set(unfinished) & set(PASSES)
    free = problem_for_method(_workload(), objective="latency", method="ip-noncontig")
    _, _, unfinished = race(free, auto_methods(free), 10.0, Deadline(60.0))
    assert set(unfinished) & set(PASSES)  # where their splits count, they run again
