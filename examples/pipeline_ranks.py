"""The ranks of ``examples/run_pipeline.py``: a split run by ``torch.distributed.pipelining`` on CPU processes.

:func:`prepare` lets torch split a model at the exported points; :func:`execute` runs each job's schedules on one gloo
process per stage and measures, beside every step, the same schedule on :class:`~pipeline_models.Idle` stages (the
runtime's own cost) and the ranks' compute at once (the machine's slowdown); :func:`interleaved_rounds` steps several
splits in turn so that the machine's load cannot favour one. Every step is timed twice: its wall clock and the CPU
time of the rank's main thread (``time.thread_time``: the stage's compute and the runtime's work on it, not the
time the machine's other work took the core, nor the waits for a message), per micro-batch.
"""
from __future__ import annotations

import json
import os
import socket
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from pipeline_models import build, idle_batch, idle_pipe, loss_fn
from torch import nn
from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe, SplitPoint, pipeline
from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

from placement_dsl.profile import CLOCKS

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
CLOCK = "cpu"  # compute timed in the process's CPU time (profile and stages): the machine's other work does not count

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fastest_ms(fn: Any, repeat: int) -> float:
    times, clock = [], CLOCKS[CLOCK]
    for _ in range(repeat + 1):
        start = clock()
        fn()
        times.append(1e3 * (clock() - start))
    return min(times[1:])


def _stage_pass(pipe: Any, rank: int, x: torch.Tensor, target: torch.Tensor) -> tuple[Any, Any]:
    """``(forward, backward)`` of this rank's stage module on one micro-batch: ``forward()`` returns what
    ``backward(out)`` differentiates (the loss on the last stage)."""
    h = x
    for k in range(rank):
        h = pipe.get_stage_module(k)(h)
        h = h[0] if isinstance(h, tuple) else h
    stage = pipe.get_stage_module(rank)
    last = rank == pipe.num_stages - 1
    h = h.detach().requires_grad_(h.is_floating_point())

    def forward() -> torch.Tensor:
        out = stage(h)
        out = out[0] if isinstance(out, tuple) else out
        return loss_fn(out, target) if last else out

    def backward(out: torch.Tensor) -> None:
        out.backward(None if last else torch.ones_like(out))

    return forward, backward


def _stage_times(pipe: Any, rank: int, x: torch.Tensor, target: torch.Tensor, repeat: int) -> tuple[float, float]:
    """Forward and backward ms of this rank's stage module on one micro-batch, timed alone (the fastest run)."""
    forward, backward = _stage_pass(pipe, rank, x, target)
    fw = _fastest_ms(forward, repeat)
    spent = []
    for _ in range(repeat + 1):
        out = forward()
        start = CLOCKS[CLOCK]()
        backward(out)
        spent.append(1e3 * (CLOCKS[CLOCK]() - start))
    return fw, min(spent[1:])


def busy_slowdown(work: Any, times: int) -> float:
    """Wall clock over CPU time of ``work()`` run ``times`` times: the share of a core the machine leaves a busy
    process (1 on an idle core). Every rank runs it at once, as they compute at once in a step."""
    wall = cpu = 0.0
    for _ in range(times):
        w, c = time.perf_counter(), time.process_time()
        work()
        wall, cpu = wall + time.perf_counter() - w, cpu + time.process_time() - c
    return wall / cpu if cpu > 0 else 1.0


@dataclass
class Prepared:
    """One job split by torch in the parent process (the ranks are forked from it and share it)."""

    job: dict
    model: nn.Module
    x: torch.Tensor
    target: torch.Tensor
    pipe: Any
    idle: Any = None  # :func:`idle_pipe` of as many stages


KEPT: dict[tuple, Prepared] = {}  # splits :func:`keep` made ahead of their job, each taken once by :func:`prepare`


def _key(job: dict, quick: bool, world: int) -> tuple:
    return job["model"], tuple(job["split_spec"]), job["microbatch"], job["microbatches"], quick, world


def keep(job: dict, quick: bool, world: int) -> Prepared:
    """:func:`prepare` ahead of :func:`execute` (to learn whether torch accepts the split), kept for the job's run."""
    KEPT[_key(job, quick, world)] = done = prepare(job, quick, world)
    return done


def prepare(job: dict, quick: bool, world: int) -> Prepared:
    """Build the job's model and let torch split it at the exported points, refusing a name that is no module."""
    kept = KEPT.pop(_key(job, quick, world), None)
    if kept is not None:
        return replace(kept, job=job)
    model, x, target = build(job["model"], job["microbatches"] * job["microbatch"], quick)
    modules = dict(model.named_modules())
    missing = [fqn for fqn in job["split_spec"] if fqn not in modules]
    if missing:
        raise SystemExit(f"{job['model']}: the exported split names no module of the model: {missing}")
    split = {fqn: SplitPoint[str(where).upper()] for fqn, where in job["split_spec"].items()}  # "beginning" / "end"
    pipe = pipeline(model, (x[:job["microbatch"]],), split_spec=split)
    if pipe.num_stages != world:
        raise SystemExit(f"{job['model']}: torch split it into {pipe.num_stages} stages, not {world}")
    return Prepared(job, model, x, target, pipe, idle_pipe(world, job["microbatch"]))


def worker(rank: int, world: int, port: int, prepared: list[Prepared], out_dir: str) -> None:
    """One pipeline rank: the jobs' steps in turn (:func:`_run_jobs`), each output checked, each stage timed."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        results = _run_jobs(rank, prepared)
    finally:
        dist.destroy_process_group()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(results))


def turns(steps: list[int]) -> list[tuple[int, int]]:
    """``(round, job)`` in the order the jobs step: round ``r`` steps every job that has a step ``r`` (job ``j`` has
    ``steps[j]``), in order in even rounds and in reverse in odd ones, so that load which drifts over a run (a machine
    shared with other work) falls alike on every job, as in :func:`interleaved_rounds`.

    >>> turns([2, 3])
    [(0, 0), (0, 1), (1, 1), (1, 0), (2, 1)]
    """
    return [(r, j) for r in range(max(steps, default=0)) for j in _in_turn(r, len(steps)) if r < steps[j]]


def _in_turn(r: int, jobs: int) -> range:
    """The jobs of round ``r`` in the order they step: forward in even rounds, reversed in odd ones."""
    return range(jobs) if r % 2 == 0 else range(jobs - 1, -1, -1)


def _schedule(name: str, stage: Any, job: dict) -> Any:
    """Torch's schedule ``name``, or torch's schedule runtime reading the exported CSV (``csv-...``)."""
    if name in SCHEDULES:
        return SCHEDULES[name](stage, job["microbatches"], loss_fn=loss_fn)
    runtime = _PipelineScheduleRuntime([stage], job["microbatches"], loss_fn=loss_fn)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "schedule.csv")
        path.write_text(job["csv"][name])
        runtime._load_csv(str(path), format="compute_only")
    return runtime


def _timed_step(schedule: Any, rank: int, x: torch.Tensor, target: torch.Tensor, m: int) -> tuple[float, float, Any]:
    """One step of ``schedule``: its wall-clock ms per micro-batch, the CPU ms per micro-batch of this rank's main
    thread (its stage's compute and the runtime's work on it; a blocked receive spends none), the last stage's
    output."""
    dist.barrier()
    start, cpu = time.perf_counter(), time.thread_time()
    y = schedule.step(x) if rank == 0 else schedule.step(target=target, losses=[])
    return 1e3 * (time.perf_counter() - start) / m, 1e3 * (time.thread_time() - cpu) / m, y


@dataclass
class _Running:
    """One job on one rank: its stage's and the idle stages' schedules, the steps' times so far, its results."""

    prepared: Prepared
    schedules: dict[str, tuple[Any, Any]]  # per schedule name: the stage's and the idle stages' schedule
    forward: Any  # the stage's pass on one micro-batch (:func:`_stage_pass`), for the slowdown and the stage alone
    backward: Any
    idle_batch: tuple[torch.Tensor, torch.Tensor]  # the idle stages' input and target
    times: dict[str, list[float]]
    out: dict[str, Any]

    @staticmethod
    def of(rank: int, p: Prepared) -> _Running:
        stage = p.pipe.build_stage(rank, torch.device("cpu"))
        idle = p.idle.build_stage(rank, torch.device("cpu"))
        mb = p.job["microbatch"]
        forward, backward = _stage_pass(p.pipe, rank, p.x[:mb], p.target[:mb])
        schedules = {name: (_schedule(name, stage, p.job), _schedule(name, idle, p.job)) for name in p.job["schedules"]}
        times = {f"{name}_{what}": [] for name in schedules for what in ("step", "idle", "cpu", "idle_cpu", "slowdown")}
        return _Running(p, schedules, forward, backward, idle_batch(len(p.x)), times,
                        {"model": p.job["model"], "rank": rank})

    def step(self, i: int, rank: int) -> None:
        """Step ``i`` of each of the job's schedules: the job's step, then a step of the same schedule on
        :class:`Idle` stages (the runtime's own cost) and the ranks' compute at once (the machine's slowdown), so that
        all three see the same load; on the last rank the first step's output is checked against the unsplit
        model's."""
        p, m = self.prepared, self.prepared.job["microbatches"]
        idle_x, idle_target = self.idle_batch
        for name, (schedule, idle_schedule) in self.schedules.items():
            ms, ms_cpu, y = _timed_step(schedule, rank, p.x, p.target, m)
            self.times[f"{name}_step"].append(ms), self.times[f"{name}_cpu"].append(ms_cpu)
            ms, ms_cpu, _ = _timed_step(idle_schedule, rank, idle_x, idle_target, m)
            self.times[f"{name}_idle"].append(ms), self.times[f"{name}_idle_cpu"].append(ms_cpu)
            if p.job.get("slowdown", True):
                dist.barrier()  # every rank at once, as in a step
                self.times[f"{name}_slowdown"].append(busy_slowdown(lambda: self.backward(self.forward()), m))
            if i == 0 and rank == dist.get_world_size() - 1:
                with torch.no_grad():
                    want = p.model(p.x)
                self.out[f"{name}_max_abs_diff"] = float((y.detach() - want).abs().max())
                self.out[f"{name}_allclose"] = bool(torch.allclose(y.detach(), want, rtol=1e-4, atol=1e-5))

    def result(self, rank: int) -> dict:
        """Medians over the steps after the first, of the wall clock (``_ms``) and of the rank's CPU time
        (``_cpu_ms``); the slowdown unless the job says ``"slowdown": False``. Then the stage times alone (the fastest
        of the job's ``repeat`` runs; none without), one rank at a time: the ranks share the machine's cores."""
        out, job = self.out, self.prepared.job
        for name in self.schedules:
            for key, what in (("step_ms", "step"), ("idle_ms", "idle"), ("cpu_ms", "cpu"), ("idle_cpu_ms", "idle_cpu"),
                              ("slowdown", "slowdown")):
                if self.times[f"{name}_{what}"]:
                    out[f"{name}_{key}"] = statistics.median(self.times[f"{name}_{what}"][1:])
        if not job.get("repeat"):  # a job without ``repeat`` is not timed alone
            return out
        p, mb = self.prepared, job["microbatch"]
        for turn in range(dist.get_world_size()):
            dist.barrier()
            if turn == rank:
                fw, bw = _stage_times(p.pipe, rank, p.x[:mb], p.target[:mb], job["repeat"])
        dist.barrier()
        out.update(forward_ms=fw, backward_ms=bw)
        return out


def _run_jobs(rank: int, prepared: list[Prepared]) -> list[dict]:
    """Every job's schedules stepped in turn (:func:`turns`: one step of each job per round, the jobs in order and
    then in reverse), each step beside a step of idle stages and the slowdown (:meth:`_Running.step`); per job its
    medians over the steps after the first and its stage timed alone (:meth:`_Running.result`). A job's steps spread
    over the whole run, so a load that changes while the jobs run moves every split's CPU time alike: run one job
    after the other, the example CNN's ``parameters`` split, measured last as the ranks' slowdown fell from 6.8 to
    1.5, had its first stage priced 26 % over its CPU time per micro-batch (of that time) by the calibration fitted
    on our split, measured first."""
    running = [_Running.of(rank, p) for p in prepared]
    for i, j in turns([p.job["steps"] + 1 for p in prepared]):
        running[j].step(i, rank)
    return [r.result(rank) for r in running]


def execute(jobs: list[dict], quick: bool, world: int = 2) -> list[list[dict]]:
    """Run ``jobs`` on ``world`` CPU processes (gloo, forked after torch split each model); results per job, rank."""
    prepared = [prepare(job, quick, world) for job in jobs]
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(worker, args=(world, _free_port(), prepared, tmp), nprocs=world, join=True,
                           start_method="fork")
        per_rank = [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(world)]
    return [list(res) for res in zip(*per_rank)]


@dataclass
class Rounds:
    """Per job and schedule ``(j, name)``: ``wall`` the step per micro-batch of each round (ms, the slower rank's),
    ``cpu`` each rank's CPU ms per micro-batch (median over the rounds); per schedule, ``idle_wall`` and ``idle_cpu``
    the same of a step on :class:`~pipeline_models.Idle` stages run in every round beside them."""

    wall: dict[tuple[int, str], list[float]]
    cpu: dict[tuple[int, str], list[float]]
    idle_wall: dict[str, list[float]]
    idle_cpu: dict[str, list[float]]
    slowdown: list[float]  # each rank's wall clock over CPU time of its compute with every rank at once (median)


def _rounds_worker(rank: int, world: int, port: int, prepared: list[Prepared], rounds: int, out_dir: str) -> None:
    """One rank of :func:`interleaved_rounds`: every job's stage and schedules built once, then per round one step of
    each schedule of each job in turn (the jobs in order, then in reverse: drift in load cancels) and one of the
    idle stages, wall clock and CPU time; then the first job's stage computing on every rank at once
    (:func:`busy_slowdown`)."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        stages = [p.pipe.build_stage(rank, torch.device("cpu")) for p in prepared]
        names = prepared[0].job["schedules"]
        steps = {(j, s): _schedule(s, stage, p.job) for j, (p, stage) in enumerate(zip(prepared, stages)) for s in names}
        idle = prepared[0].idle.build_stage(rank, torch.device("cpu"))
        idle_x, idle_target = idle_batch(len(prepared[0].x))
        for s in names:
            steps[(-1, s)] = _schedule(s, idle, prepared[0].job)
        times: dict[str, list[list[float]]] = {f"{j}:{s}": [] for j, s in steps}
        first, mb, slowdown = prepared[0], prepared[0].job["microbatch"], []
        forward, backward = _stage_pass(first.pipe, rank, first.x[:mb], first.target[:mb])
        for r in range(rounds + 1):  # round 0 warms up and is dropped
            order = _in_turn(r, len(prepared))
            for s in names:
                for j in (*order, -1):
                    x, target = (idle_x, idle_target) if j < 0 else (prepared[j].x, prepared[j].target)
                    ms, cpu, _ = _timed_step(steps[(j, s)], rank, x, target, prepared[max(j, 0)].job["microbatches"])
                    if r:
                        times[f"{j}:{s}"].append([ms, cpu])
            dist.barrier()  # every rank at once, as in a step
            slowdown.append(busy_slowdown(lambda: backward(forward()), first.job["microbatches"]))
    finally:
        dist.destroy_process_group()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps({"times": times, "slowdown": slowdown[1:]}))


def interleaved_rounds(jobs: list[dict], quick: bool, rounds: int, world: int = 2) -> Rounds:
    """Step time per micro-batch (ms, wall clock, the slower rank's) of every job and schedule in each of ``rounds``
    rounds, the jobs' steps interleaved (A B C, C B A, ...) so that each round sees them under the same load, with
    each rank's CPU time per micro-batch and the same of idle stages stepped in every round."""
    prepared = [prepare(job, quick, world) for job in jobs]
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(_rounds_worker, args=(world, _free_port(), prepared, rounds, tmp), nprocs=world, join=True,
                           start_method="fork")
        per_rank = [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(world)]
    out = Rounds({}, {}, {}, {}, [statistics.median(ranks["slowdown"]) for ranks in per_rank])
    per_rank = [ranks["times"] for ranks in per_rank]
    for key in per_rank[0]:
        j, s = int(key.split(":", 1)[0]), key.split(":", 1)[1]
        wall = [max(xs) for xs in zip(*([ms for ms, _ in ranks[key]] for ranks in per_rank))]
        cpu = [statistics.median(c for _, c in ranks[key]) for ranks in per_rank]
        if j < 0:
            out.idle_wall[s], out.idle_cpu[s] = wall, cpu
        else:
            out.wall[(j, s)], out.cpu[(j, s)] = wall, cpu
    return out
