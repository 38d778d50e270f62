"""Place a small GPT and a small ResNet-style CNN (or a ViT) on 2 pipeline stages, export the split, and run it.

For each model: profile its modules on the CPU as torch's pipeline runs them (:mod:`placement_dsl.profile`,
``pipelined=True``), import it through
``torch.export`` with the measured costs, place it on 2 accelerators (the throughput of a training
step, 1F1B's ``max (FW + BW)``; stage boundaries between depth-2 modules; no CPU stage) with the DP
over ideals, export the split to ``torch.distributed.pipelining`` and execute it there: GPipe and
1F1B, gloo backend, one process per stage on the CPU, and the exported schedule CSV (1F1B and GPipe)
run by torch's schedule runtime (``_PipelineScheduleRuntime._load_csv``). The script checks that torch accepts the split, that every split
point names a module of the model, and that the pipeline's output equals the unsplit model's;
then it prints the predicted and measured time per micro-batch of each stage (forward and
backward, ms) and of each schedule's training step. One number is fitted, the compute factor (on the
stages); beside every step the same schedule runs on stages that do no work (``IdleNet``: the
runtime's own cost per task, :func:`placement_dsl.profile.runtime_overhead`) and the ranks' compute
runs at once (the machine's wall-clock slowdown), so no step is fitted on.

Run: python examples/run_pipeline.py [--quick]   (needs torch==2.13.0; about a minute)
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe, SplitPoint, pipeline
from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

from placement_dsl import Cluster, Placement, evaluate
from placement_dsl.boundaries import Boundaries
from placement_dsl.evaluate import CostModel
from placement_dsl.export import export
from placement_dsl.heuristics import run
from placement_dsl.io.costs import apply_costs
from placement_dsl.io.torch_export import from_module
from placement_dsl.profile import (
    CLOCKS,
    LinkTime,
    ModuleTime,
    RunCosts,
    StageFit,
    calibrated,
    calibration,
    calibration_table,
    ping_pong,
    profile_module,
    runtime_overhead,
    scale_of,
    training_graph,
)
from placement_dsl.simulate import simulate

KIND = "accelerator"  # the kind of the pipeline's stage devices; here each is a one-thread CPU process
BANDWIDTH = 1e6  # bytes per ms between two ranks (gloo over the loopback moves about 1 GB/s)
DEPTH = 2  # stage boundaries between modules of two dotted parts: h.N of the GPT, blocks.N of the CNN
CLOCK = "cpu"  # compute timed in the process's CPU time (profile and stages): the machine's other work does not count
PIPELINED = False  # True: profile the modules as torch's pipeline() runs them (its stage module's interpreted
# submodules). Eager by default: at the bench's full sizes (load 4-8, two repeats each) the eager profile predicted the
# stages within 8 % (22 of 24 within 15 %) and the steps within 12 % (19 of 24), the pipelined one 20 % (9) and 25 % (7)
SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
CSV = {"csv-1f1b": "1f1b", "csv-gpipe": "gpipe"}  # the exported schedule CSV of a schedule, run by torch's runtime


# ---------------------------------------------------------------------------- the models
class Block(nn.Module):
    """A pre-norm transformer block: self-attention (causal for the GPT) and an MLP, each with a residual connection."""

    def __init__(self, d: int, heads: int, causal: bool = True):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.ln_1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln_2, self.fc, self.out = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    """Token and position embeddings, ``layers`` blocks ``h.N``, a final norm and the LM head."""

    def __init__(self, vocab: int, seq: int, d: int, heads: int, layers: int):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        return self.head(self.ln_f(x))


class ResBlock(nn.Module):
    """A basic residual block: two 3x3 convolutions with group norms; a strided 1x1 shortcut when the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1, self.norm1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.GroupNorm(4, cout)
        self.conv2, self.norm2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.GroupNorm(4, cout)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride, bias=False) if stride != 1 or cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.norm1(self.conv1(x)))
        y = self.norm2(self.conv2(y))
        return F.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class CNN(nn.Module):
    """A ResNet-style network: a stem, residual blocks ``blocks.N`` over three widths, pooling and a classifier.
    (Group norms instead of batch norms keep each sample's output independent of its micro-batch.)

    ``growth``: the width's factor at each halving of the resolution: 2 as in ResNet (each block about the same
    work, the late ones with 4x the parameters), 1.5 as in the mobile networks, whose early high-resolution blocks
    cost most of the compute and the late ones most of the parameters."""

    def __init__(self, width: int, per_stage: int, classes: int = 10, growth: float = 2.0):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.GroupNorm(4, width), nn.ReLU())
        blocks, cin = [], width
        widths = [4 * round(width * growth ** i / 4) for i in range(3)]  # group norms of 4 groups
        for i, cout in enumerate(widths):
            for j in range(per_stage):
                blocks.append(ResBlock(cin, cout, 2 if j == 0 and i > 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


class ViT(nn.Module):
    """A vision transformer: a patch embedding, a position embedding, ``layers`` blocks ``blocks.N`` (full attention),
    a final norm and a classifier over the mean of the tokens."""

    def __init__(self, image: int, patch: int, d: int, heads: int, layers: int, classes: int = 10):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, patch)
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2, d))
        self.blocks = nn.ModuleList(Block(d, heads, causal=False) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2).contiguous() + self.pos  # gloo sends contiguous tensors
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x).mean(dim=1))


class Idle(nn.Module):
    """A stage that does no work: it scales its input by one parameter (so its backward has a weight gradient too)."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.w


class IdleNet(nn.Module):
    """``parts`` :class:`Idle` modules ``h.N`` in a chain. Split by torch between them and run by the same schedule
    as a model, it times the runtime's own cost: its actions, their messages and the call of a traced stage."""

    def __init__(self, parts: int):
        super().__init__()
        self.h = nn.ModuleList(Idle() for _ in range(parts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for part in self.h:
            x = part(x)
        return x


IDLE_FEATURES = 16  # floats per sample of an idle stage's messages: the link's latency, hardly its bandwidth


def idle_batch(samples: int) -> tuple[torch.Tensor, torch.Tensor]:
    """An input and a target batch of ``samples`` for a pipeline of :class:`Idle` stages."""
    return torch.randn(samples, IDLE_FEATURES), torch.randint(0, IDLE_FEATURES, (samples,))


def idle_pipe(stages: int, microbatch: int) -> Any:
    """:class:`IdleNet` split by torch into ``stages`` stages of one :class:`Idle` each."""
    x, _ = idle_batch(microbatch)
    return pipeline(IdleNet(stages), (x,), split_spec={f"h.{k}": SplitPoint.BEGINNING for k in range(1, stages)})


SIZES = {  # (full, --quick)
    "gpt": ({"vocab": 512, "seq": 64, "d": 128, "heads": 4, "layers": 6},
            {"vocab": 256, "seq": 32, "d": 64, "heads": 4, "layers": 4}),
    "cnn": ({"width": 32, "per_stage": 2, "image": 32}, {"width": 16, "per_stage": 2, "image": 16}),
    # GPT-2's vocabulary makes its LM head as heavy as ~5 blocks (50257 / (12 x 768)); here 4096 / (12 x 128) ~ 2.7
    "gpt-vocab": ({"vocab": 4096, "seq": 64, "d": 128, "heads": 4, "layers": 6},
                  {"vocab": 1024, "seq": 32, "d": 64, "heads": 4, "layers": 4}),
    "cnn-mobile": ({"width": 32, "per_stage": 2, "image": 32, "growth": 1.5},
                   {"width": 16, "per_stage": 2, "image": 16, "growth": 1.5}),
    "vit": ({"image": 32, "patch": 4, "d": 128, "heads": 4, "layers": 6},
            {"image": 16, "patch": 4, "d": 64, "heads": 4, "layers": 4}),
}


def make_gpt(batch: int = 4, quick: bool = False) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The GPT and a batch of token ids (a factory for ``placement-dsl import|profile``)."""
    s = SIZES["gpt"][quick]
    return GPT(**s), (torch.randint(0, s["vocab"], (batch, s["seq"])),)


def make_cnn(batch: int = 4, quick: bool = False, family: str = "cnn") -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The CNN and a batch of images."""
    s = SIZES[family][quick]
    return CNN(s["width"], s["per_stage"], growth=s.get("growth", 2.0)), (torch.randn(batch, 3, s["image"], s["image"]),)


def make_gpt_vocab(batch: int = 4, quick: bool = False) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The GPT with a large vocabulary: its embedding and LM head hold most parameters, the head much compute."""
    s = SIZES["gpt-vocab"][quick]
    return GPT(**s), (torch.randint(0, s["vocab"], (batch, s["seq"])),)


def make_cnn_mobile(batch: int = 4, quick: bool = False) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The CNN whose width grows 1.5x a halving: the early blocks are the costly ones."""
    return make_cnn(batch, quick, "cnn-mobile")


def make_vit(batch: int = 4, quick: bool = False) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The ViT and a batch of images."""
    s = SIZES["vit"][quick]
    return ViT(**s), (torch.randn(batch, 3, s["image"], s["image"]),)


def make_gpt_quick(batch: int = 4) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return make_gpt(batch, quick=True)


def make_cnn_quick(batch: int = 4) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return make_cnn(batch, quick=True)


FACTORIES = {"gpt": make_gpt, "cnn": make_cnn, "vit": make_vit, "gpt-vocab": make_gpt_vocab,
             "cnn-mobile": make_cnn_mobile}


def build(name: str, batch: int, quick: bool, seed: int = 0) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    """Model ``name`` with the weights of ``seed``, an input batch and a target batch (the same in every process)."""
    torch.manual_seed(seed)
    model, (x,) = FACTORIES[name](batch, quick)
    out = model(x[:1])
    target = torch.randint(0, out.shape[-1], (batch, *out.shape[1:-1]))
    return model, x, target


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the last dimension (the GPT's tokens or the CNN's classes)."""
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))


# ---------------------------------------------------------------------------- the plan
@dataclass
class Plan:
    """A split of one model: its split points and the cost model's stage times (ms per micro-batch)."""

    name: str
    split_spec: dict[str, str]
    forward_ms: list[float]
    backward_ms: list[float]
    step_ms: dict[str, float] = field(default_factory=dict)  # predicted time per micro-batch of a schedule's step
    csv: dict[str, str] = field(default_factory=dict)  # the exported schedule CSV of each CSV schedule
    train: Placement | None = None  # the training graph on the stages, with the profiled times
    microbatches: int = 1
    microbatch: int = 1  # samples per micro-batch

    def step_with(self, costs: RunCosts, schedule: str) -> float:
        """The simulator's step time per micro-batch of ``schedule`` (a CSV schedule runs its own) under the run's
        costs: the profiled compute times ``costs.scale``, the link's bandwidth and latency, the per-task overhead."""
        return simulate(costs.placement(self.train), CSV.get(schedule, schedule), self.microbatches,
                        costs.model()).time_per_sample


def profiled(name: str, microbatch: int, quick: bool) -> list[ModuleTime]:
    """Each depth-2 module's measured forward and backward time on one CPU thread, the backward whole as GPipe and
    1F1B run it: eager, or with ``PIPELINED`` through the stage module ``pipeline()`` builds (its submodules are
    interpreted ``torch.export`` graphs)."""
    model, x, _ = build(name, microbatch, quick)
    return profile_module(model, (x[:microbatch],), depth=DEPTH, repeat=10 if quick else 20, warmup=3, clock=CLOCK,
                          pipelined=PIPELINED)


def workload_graph(name: str, microbatch: int, quick: bool, rows: list[ModuleTime]) -> Any:
    """The model imported through torch.export (on the meta device) with the measured forward times."""
    with torch.device("meta"):
        model, (x,) = FACTORIES[name](microbatch, quick)
    w = from_module(model, (x,), name=name)
    graph, _ = apply_costs(w.graph, {r.module: {KIND: r.forward_ms} for r in rows})
    return graph


def predicted(placement: Placement, rows: list[ModuleTime], microbatches: int, microbatch: int = 1) -> Plan:
    """The cost model's forward and backward time of each stage, and the simulator's step time per micro-batch."""
    train = training_graph(placement.graph, rows, KIND)
    device = {op.name: int(placement.assign[i]) for i, op in enumerate(placement.graph.ops)}
    assign = [device[op.name[:-5] if op.backward else op.name] for op in train.ops]
    tp = Placement(train, placement.cluster, assign)
    rows_ = evaluate(tp, "gpipe").devices
    plan = Plan(placement.graph.name, {}, [r.compute_fw for r in rows_], [r.compute_bw for r in rows_], train=tp,
                microbatches=microbatches, microbatch=microbatch)
    plan.step_ms = {s: simulate(tp, s, microbatches).makespan / microbatches for s in SCHEDULES}
    return plan


def place(graph: Any, rows: list[ModuleTime], stages: int = 2) -> Placement:
    """The best contiguous split of ``graph`` over ``stages`` accelerators for a training step, boundaries between
    depth-2 modules: the DP over ideals on the training graph with the measured backward times, objective
    ``pipedream`` (the throughput of 1F1B: ``max (FW + BW)`` over the stages); its forward part."""
    cluster = Cluster.accelerators(stages, bandwidth=BANDWIDTH)
    train = training_graph(graph, rows, KIND)
    term = Boundaries.modules(DEPTH)
    term.validate(train, cluster)
    result = run("dp", term.apply(train, cluster), cluster, model=CostModel.named("pipedream"))
    verdict = evaluate(result.placement, CostModel.named("pipedream"))
    assert verdict.valid and abs(verdict.objective - result.objective) <= 1e-9 * max(1.0, verdict.objective)
    return Placement(graph, cluster, result.placement.assign[:graph.n])


def placement_of(graph: Any, first_of_stage: list[str], stages: int = 2) -> Placement:
    """The split whose stage ``k > 0`` begins at module ``first_of_stage[k - 1]`` (ops in graph order)."""
    assign, k = [], 0
    for op in graph.ops:
        path = str(op.attrs.get("module") or "")
        if k < len(first_of_stage) and (path == first_of_stage[k] or path.startswith(first_of_stage[k] + ".")):
            k += 1
        assign.append(k)
    return Placement(graph, Cluster.accelerators(stages, bandwidth=BANDWIDTH), assign)


def plan_for(placement: Placement, rows: list[ModuleTime], microbatches: int, microbatch: int = 1) -> Plan:
    """The exported split of ``placement`` with its predicted times (``microbatch`` samples per micro-batch)."""
    plan = predicted(placement, rows, microbatches, microbatch)
    plan.split_spec = export(placement, "torch-pipelining").data["split_spec"]
    for name, schedule in CSV.items():
        plan.csv[name] = export(placement, "schedule-csv", microbatches=microbatches, schedule=schedule).text
        plan.step_ms[name] = plan.step_ms[schedule]
    return plan


# ---------------------------------------------------------------------------- the run
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


def prepare(job: dict, quick: bool, world: int) -> Prepared:
    """Build the job's model and let torch split it at the exported points, refusing a name that is no module."""
    model, x, target = build(job["model"], job["microbatches"] * job["microbatch"], quick)
    modules = dict(model.named_modules())
    missing = [fqn for fqn in job["split_spec"] if fqn not in modules]
    if missing:
        raise SystemExit(f"{job['model']}: the exported split names no module of the model: {missing}")
    split = {fqn: SplitPoint.BEGINNING for fqn in job["split_spec"]}
    pipe = pipeline(model, (x[:job["microbatch"]],), split_spec=split)
    if pipe.num_stages != world:
        raise SystemExit(f"{job['model']}: torch split it into {pipe.num_stages} stages, not {world}")
    return Prepared(job, model, x, target, pipe, idle_pipe(world, job["microbatch"]))


def worker(rank: int, world: int, port: int, prepared: list[Prepared], out_dir: str) -> None:
    """One pipeline rank: for each job run its schedules' steps, check the output, time the stage."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        results = [_run_job(rank, p) for p in prepared]
    finally:
        dist.destroy_process_group()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(results))


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


def _timed_step(schedule: Any, rank: int, x: torch.Tensor, target: torch.Tensor, m: int) -> tuple[float, Any]:
    """One step of ``schedule``: its wall-clock ms per micro-batch and the last stage's output."""
    dist.barrier()
    start = time.perf_counter()
    y = schedule.step(x) if rank == 0 else schedule.step(target=target, losses=[])
    return 1e3 * (time.perf_counter() - start) / m, y


def _run_job(rank: int, p: Prepared) -> dict:
    """Each schedule's steps on the job's stages; after each, a step of the same schedule on :class:`Idle` stages
    (the runtime's own cost) and the ranks' compute at once (the machine's slowdown), so that all three see the
    same load; medians over the steps after the first. Then the stage times alone."""
    job, m = p.job, p.job["microbatches"]
    stage = p.pipe.build_stage(rank, torch.device("cpu"))
    world = dist.get_world_size()
    idle = p.idle.build_stage(rank, torch.device("cpu"))
    idle_x, idle_target = idle_batch(len(p.x))
    mb = job["microbatch"]
    forward, backward = _stage_pass(p.pipe, rank, p.x[:mb], p.target[:mb])
    last = rank == world - 1
    out: dict[str, Any] = {"model": job["model"], "rank": rank}
    for name in job["schedules"]:
        schedule, idle_schedule = _schedule(name, stage, job), _schedule(name, idle, job)
        steps, idle_steps, slowdown = [], [], []
        for i in range(job["steps"] + 1):
            ms, y = _timed_step(schedule, rank, p.x, p.target, m)
            steps.append(ms)
            idle_steps.append(_timed_step(idle_schedule, rank, idle_x, idle_target, m)[0])
            dist.barrier()  # every rank at once, as in a step
            slowdown.append(busy_slowdown(lambda: backward(forward()), m))
            if i == 0 and last:
                with torch.no_grad():
                    want = p.model(p.x)
                out[f"{name}_max_abs_diff"] = float((y.detach() - want).abs().max())
                out[f"{name}_allclose"] = bool(torch.allclose(y.detach(), want, rtol=1e-4, atol=1e-5))
        out[f"{name}_step_ms"] = statistics.median(steps[1:])
        out[f"{name}_idle_ms"] = statistics.median(idle_steps[1:])
        out[f"{name}_slowdown"] = statistics.median(slowdown[1:])
    for turn in range(world):  # one rank at a time: the ranks share the machine's cores
        dist.barrier()
        if turn == rank:
            fw, bw = _stage_times(p.pipe, rank, p.x[:mb], p.target[:mb], job["repeat"])
    dist.barrier()
    out.update(forward_ms=fw, backward_ms=bw)
    return out


def execute(jobs: list[dict], quick: bool, world: int = 2) -> list[list[dict]]:
    """Run ``jobs`` on ``world`` CPU processes (gloo, forked after torch split each model); results per job, rank."""
    prepared = [prepare(job, quick, world) for job in jobs]
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(worker, args=(world, _free_port(), prepared, tmp), nprocs=world, join=True,
                           start_method="fork")
        per_rank = [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(world)]
    return [list(res) for res in zip(*per_rank)]


def _rounds_worker(rank: int, world: int, port: int, prepared: list[Prepared], rounds: int, out_dir: str) -> None:
    """One rank of :func:`interleaved_rounds`: every job's stage and schedules built once, then per round one step of
    each schedule of each job in turn (the jobs in order, then in reverse: drift in load cancels), wall clock."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        stages = [p.pipe.build_stage(rank, torch.device("cpu")) for p in prepared]
        names = prepared[0].job["schedules"]
        steps = {(j, s): _schedule(s, stage, p.job) for j, (p, stage) in enumerate(zip(prepared, stages)) for s in names}
        times: dict[str, list[float]] = {f"{j}:{s}": [] for j, s in steps}
        for r in range(rounds + 1):  # round 0 warms up and is dropped
            order = range(len(prepared)) if r % 2 == 0 else range(len(prepared) - 1, -1, -1)
            for s in names:
                for j in order:
                    p = prepared[j]
                    ms, _ = _timed_step(steps[(j, s)], rank, p.x, p.target, p.job["microbatches"])
                    if r:
                        times[f"{j}:{s}"].append(ms)
    finally:
        dist.destroy_process_group()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(times))


def interleaved_rounds(jobs: list[dict], quick: bool, rounds: int, world: int = 2) -> dict[tuple[int, str], list[float]]:
    """Step time per micro-batch (ms, wall clock, the slower rank's) of every job and schedule in each of ``rounds``
    rounds, the jobs' steps interleaved (A B C, C B A, ...) so that each round sees them under the same load."""
    prepared = [prepare(job, quick, world) for job in jobs]
    with tempfile.TemporaryDirectory() as tmp:
        mp.start_processes(_rounds_worker, args=(world, _free_port(), prepared, rounds, tmp), nprocs=world, join=True,
                           start_method="fork")
        per_rank = [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(world)]
    out = {}
    for key in per_rank[0]:
        j, s = key.split(":", 1)
        out[(int(j), s)] = [max(xs) for xs in zip(*(ranks[key] for ranks in per_rank))]
    return out


# ---------------------------------------------------------------------------- main
def stage_fits(plan: Plan, ranks: list[dict]) -> list[StageFit]:
    """Predicted against measured forward + backward time per micro-batch of each stage."""
    return calibration([f + b for f, b in zip(plan.forward_ms, plan.backward_ms)],
                       [r["forward_ms"] + r["backward_ms"] for r in ranks])


def report(plan: Plan, ranks: list[dict], schedules: list[str], base: RunCosts) -> list[str]:
    """Predicted against measured stage and step times of one run, as lines (``base``: the compute factor and link;
    each schedule's overhead and the slowdown are the run's own, :func:`run_costs`)."""
    scale = base.scale
    lines = [f"{plan.name}: split_spec {plan.split_spec}"]
    last = ranks[-1]
    for s in schedules:
        lines.append(f"{plan.name} {s}: output matches the unsplit model: {last[f'{s}_allclose']} "
                     f"(max abs diff {last[f'{s}_max_abs_diff']:.2e})")
    fits = stage_fits(plan, ranks)
    lines.append(f"{plan.name}: time per micro-batch per stage, forward + backward, as profiled")
    lines += calibration_table(fits).splitlines()
    lines.append(f"{plan.name}: the same after calibration (predictions x{scale:.3f})")
    lines += calibration_table(calibrated(fits, scale)).splitlines()
    for s in schedules:
        measured = max(r[f"{s}_step_ms"] for r in ranks)
        costs = run_costs(base, ranks, s, plan)
        want = plan.step_with(costs, s)
        lines.append(f"{plan.name} {s}: step per micro-batch predicted {want:.4f} ms (calibrated), measured "
                     f"{measured:.4f} ms, residual {(measured - want) / measured:.1%}; idle stages "
                     f"{max(r[f'{s}_idle_ms'] for r in ranks):.3f} ms: {costs.overhead_ms:.3f} ms per task, "
                     f"slowdown x{costs.slowdown:.3f} (measured)")
    return lines


def calibrate(plans: list[Plan], runs: list[list[dict]], link: LinkTime) -> RunCosts:
    """The one fitted cost: the compute factor over every stage of ``runs`` (measured over profiled, both in CPU
    time); with the measured ``link``. The per-task overhead and the slowdown are measured in each run
    (:func:`run_costs`)."""
    return RunCosts(scale_of([f for plan, ranks in zip(plans, runs) for f in stage_fits(plan, ranks)]), link)


def run_costs(base: RunCosts, ranks: list[dict], schedule: str, plan: Plan) -> RunCosts:
    """The costs of one run of ``plan`` under ``schedule``, none fitted on it: ``base``'s compute factor and link, the
    per-task overhead at which the simulator gives the step measured on :class:`Idle` stages beside it
    (:func:`placement_dsl.profile.runtime_overhead`), and the wall-clock slowdown its ranks measured at once
    (:func:`busy_slowdown`: the compute is profiled in CPU time, the steps are wall clock)."""
    stages = plan.train.cluster.size
    idle = max(r[f"{schedule}_idle_ms"] for r in ranks)
    message = 4.0 * IDLE_FEATURES * plan.microbatch
    o = runtime_overhead(idle, CSV.get(schedule, schedule), plan.microbatches, stages=stages, ranks=stages,
                         message_bytes=message, link=base.link)
    slowdown = sum(r[f"{schedule}_slowdown"] for r in ranks) / len(ranks) if CLOCK == "cpu" else 1.0
    return replace(base, overhead_ms=o, slowdown=slowdown)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small models and few steps (the test's sizes)")
    ap.add_argument("--models", default="gpt,cnn", help=f"comma-separated: {', '.join(FACTORIES)}")
    args = ap.parse_args(argv)
    microbatch, microbatches = (2, 4) if args.quick else (4, 8)
    schedules = [*SCHEDULES, *CSV]
    plans, jobs = [], []
    torch.set_num_threads(1)
    for name in args.models.split(","):
        rows = profiled(name, microbatch, args.quick)
        plan = plan_for(place(workload_graph(name, microbatch, args.quick, rows), rows), rows, microbatches, microbatch)
        plans.append(plan)
        jobs.append({"model": name, "split_spec": plan.split_spec, "schedules": schedules, "csv": plan.csv,
                     "microbatch": microbatch,
                     "microbatches": microbatches, "steps": 3 if args.quick else 6, "repeat": 10 if args.quick else 20})
    ok = True
    runs = execute(jobs, args.quick)
    costs = calibrate(plans, runs, ping_pong(repeat=5 if args.quick else 20))
    print(f"calibration: compute x{costs.scale:.3f} (fitted on the stages), link {costs.link.latency_ms:.3f} ms + "
          f"bytes / {costs.link.bandwidth:.4g} per ms (measured); per run, the per-task overhead (measured on idle "
          "stages beside each step) and the wall-clock slowdown (measured by the ranks at once)")
    for plan, ranks in zip(plans, runs):
        print("\n".join(report(plan, ranks, schedules, costs)))
        ok &= all(ranks[-1][f"{s}_allclose"] for s in schedules)
    print("all outputs match the unsplit models" if ok else "an output differs from the unsplit model")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
