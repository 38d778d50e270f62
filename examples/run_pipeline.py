"""Place a small GPT and a small ResNet-style CNN (or a ViT) on 2 pipeline stages, export the split, and run it.

For each model: profile its modules on the CPU (:mod:`placement_dsl.profile`), import it through
``torch.export`` with the measured costs, place it on 2 accelerators (the throughput of a training
step, 1F1B's ``max (FW + BW)``; stage boundaries between depth-2 modules; no CPU stage) with the DP
over ideals, export the split to ``torch.distributed.pipelining`` and execute it there: GPipe and
1F1B, gloo backend, one process per stage on the CPU, and the exported schedule CSV (1F1B and GPipe)
run by torch's schedule runtime (``_PipelineScheduleRuntime._load_csv``). The script checks that torch accepts the split, that every split
point names a module of the model, and that the pipeline's output equals the unsplit model's;
then it prints the predicted and measured time per micro-batch of each stage (forward and
backward, ms) and of each schedule's training step.

Run: python examples/run_pipeline.py [--quick]   (needs torch==2.13.0; about a minute)
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
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
    fit_overhead,
    fit_slowdown_and_overhead,
    ping_pong,
    profile_module,
    scale_of,
    training_graph,
)
from placement_dsl.simulate import simulate

KIND = "accelerator"  # the kind of the pipeline's stage devices; here each is a one-thread CPU process
BANDWIDTH = 1e6  # bytes per ms between two ranks (gloo over the loopback moves about 1 GB/s)
DEPTH = 2  # stage boundaries between modules of two dotted parts: h.N of the GPT, blocks.N of the CNN
CLOCK = "cpu"  # compute timed in the process's CPU time (profile and stages): the machine's other work does not count
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
    (Group norms instead of batch norms keep each sample's output independent of its micro-batch.)"""

    def __init__(self, width: int, per_stage: int, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.GroupNorm(4, width), nn.ReLU())
        blocks, cin = [], width
        for i, cout in enumerate((width, 2 * width, 4 * width)):
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


SIZES = {  # (full, --quick)
    "gpt": ({"vocab": 512, "seq": 64, "d": 128, "heads": 4, "layers": 6},
            {"vocab": 256, "seq": 32, "d": 64, "heads": 4, "layers": 4}),
    "cnn": ({"width": 32, "per_stage": 2, "image": 32}, {"width": 16, "per_stage": 2, "image": 16}),
    "vit": ({"image": 32, "patch": 4, "d": 128, "heads": 4, "layers": 6},
            {"image": 16, "patch": 4, "d": 64, "heads": 4, "layers": 4}),
}


def make_gpt(batch: int = 4, quick: bool = False) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The GPT and a batch of token ids (a factory for ``placement-dsl import|profile``)."""
    s = SIZES["gpt"][quick]
    return GPT(**s), (torch.randint(0, s["vocab"], (batch, s["seq"])),)


def make_cnn(batch: int = 4, quick: bool = False) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The CNN and a batch of images."""
    s = SIZES["cnn"][quick]
    return CNN(s["width"], s["per_stage"]), (torch.randn(batch, 3, s["image"], s["image"]),)


def make_vit(batch: int = 4, quick: bool = False) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """The ViT and a batch of images."""
    s = SIZES["vit"][quick]
    return ViT(**s), (torch.randn(batch, 3, s["image"], s["image"]),)


def make_gpt_quick(batch: int = 4) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return make_gpt(batch, quick=True)


def make_cnn_quick(batch: int = 4) -> tuple[nn.Module, tuple[torch.Tensor]]:
    return make_cnn(batch, quick=True)


FACTORIES = {"gpt": make_gpt, "cnn": make_cnn, "vit": make_vit}


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

    def step_with(self, costs: RunCosts, schedule: str) -> float:
        """The simulator's step time per micro-batch of ``schedule`` (a CSV schedule runs its own) under the run's
        costs: the profiled compute times ``costs.scale``, the link's bandwidth and latency, the per-task overhead."""
        return simulate(costs.placement(self.train), CSV.get(schedule, schedule), self.microbatches,
                        costs.model()).time_per_sample


def profiled(name: str, microbatch: int, quick: bool) -> list[ModuleTime]:
    """Each depth-2 module's measured forward and backward time on one CPU thread."""
    model, x, _ = build(name, microbatch, quick)
    return profile_module(model, (x[:microbatch],), depth=DEPTH, repeat=10 if quick else 20, warmup=3, clock=CLOCK)


def workload_graph(name: str, microbatch: int, quick: bool, rows: list[ModuleTime]) -> Any:
    """The model imported through torch.export (on the meta device) with the measured forward times."""
    with torch.device("meta"):
        model, (x,) = FACTORIES[name](microbatch, quick)
    w = from_module(model, (x,), name=name)
    graph, _ = apply_costs(w.graph, {r.module: {KIND: r.forward_ms} for r in rows})
    return graph


def predicted(placement: Placement, rows: list[ModuleTime], microbatches: int) -> Plan:
    """The cost model's forward and backward time of each stage, and the simulator's step time per micro-batch."""
    train = training_graph(placement.graph, rows, KIND)
    device = {op.name: int(placement.assign[i]) for i, op in enumerate(placement.graph.ops)}
    assign = [device[op.name[:-5] if op.backward else op.name] for op in train.ops]
    tp = Placement(train, placement.cluster, assign)
    rows_ = evaluate(tp, "gpipe").devices
    plan = Plan(placement.graph.name, {}, [r.compute_fw for r in rows_], [r.compute_bw for r in rows_], train=tp,
                microbatches=microbatches)
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


def plan_for(placement: Placement, rows: list[ModuleTime], microbatches: int) -> Plan:
    """The exported split of ``placement`` with its predicted times."""
    plan = predicted(placement, rows, microbatches)
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


def _stage_times(pipe: Any, rank: int, x: torch.Tensor, target: torch.Tensor, repeat: int) -> tuple[float, float]:
    """Forward and backward ms of this rank's stage module on one micro-batch, timed alone (the fastest run)."""
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

    fw = _fastest_ms(forward, repeat)
    spent = []
    for _ in range(repeat + 1):
        out = forward()
        start = CLOCKS[CLOCK]()
        out.backward(None if last else torch.ones_like(out))
        spent.append(1e3 * (CLOCKS[CLOCK]() - start))
    return fw, min(spent[1:])


@dataclass
class Prepared:
    """One job split by torch in the parent process (the ranks are forked from it and share it)."""

    job: dict
    model: nn.Module
    x: torch.Tensor
    target: torch.Tensor
    pipe: Any


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
    return Prepared(job, model, x, target, pipe)


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


def _run_job(rank: int, p: Prepared) -> dict:
    job, m = p.job, p.job["microbatches"]
    stage = p.pipe.build_stage(rank, torch.device("cpu"))
    last = rank == dist.get_world_size() - 1
    out: dict[str, Any] = {"model": job["model"], "rank": rank}
    for name in job["schedules"]:
        schedule = _schedule(name, stage, job)
        steps = []
        for i in range(job["steps"] + 1):
            dist.barrier()
            start = time.perf_counter()
            y = schedule.step(p.x) if rank == 0 else schedule.step(target=p.target, losses=[])
            steps.append(1e3 * (time.perf_counter() - start) / m)
            if i == 0 and last:
                with torch.no_grad():
                    want = p.model(p.x)
                out[f"{name}_max_abs_diff"] = float((y.detach() - want).abs().max())
                out[f"{name}_allclose"] = bool(torch.allclose(y.detach(), want, rtol=1e-4, atol=1e-5))
        out[f"{name}_step_ms"] = min(steps[1:])
    mb = job["microbatch"]
    for turn in range(dist.get_world_size()):  # one rank at a time: the ranks share the machine's cores
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


# ---------------------------------------------------------------------------- main
def stage_fits(plan: Plan, ranks: list[dict]) -> list[StageFit]:
    """Predicted against measured forward + backward time per micro-batch of each stage."""
    return calibration([f + b for f, b in zip(plan.forward_ms, plan.backward_ms)],
                       [r["forward_ms"] + r["backward_ms"] for r in ranks])


def report(plan: Plan, ranks: list[dict], schedules: list[str], costs: RunCosts) -> list[str]:
    """Predicted against measured stage and step times of one run, as lines (``costs``: the calibration)."""
    scale = costs.scale
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
        want = plan.step_with(costs, s)
        lines.append(f"{plan.name} {s}: step per micro-batch predicted {want:.4f} ms (calibrated), measured "
                     f"{measured:.4f} ms, residual {(measured - want) / measured:.1%}")
    return lines


def calibrate(plans: list[Plan], runs: list[list[dict]], link: LinkTime, fit_on: str = "1f1b") -> RunCosts:
    """The run's costs: one compute factor fitted on every stage of ``runs`` (measured over profiled, both in CPU
    time), the measured ``link``, and the wall-clock slowdown and per-task overhead that fit the ``fit_on`` steps
    of ``runs`` best given them (the steps are wall clock: on a shared CPU the ranks get a share of it)."""
    scale = scale_of([f for plan, ranks in zip(plans, runs) for f in stage_fits(plan, ranks)])
    measured = [max(r[f"{fit_on}_step_ms"] for r in ranks) for ranks in runs]

    def predict(slowdown: float, o: float) -> list[float]:
        return [plan.step_with(RunCosts(scale, link, o, slowdown), fit_on) for plan in plans]

    if CLOCK == "wall":  # the stages' factor is already the run's
        return RunCosts(scale, link, fit_overhead(lambda o: predict(1.0, o), measured, max(measured)))
    slowdown, o = fit_slowdown_and_overhead(predict, measured, max(measured))
    return RunCosts(scale, link, o, slowdown)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small models and few steps (the test's sizes)")
    ap.add_argument("--models", default="gpt,cnn", help="comma-separated: gpt, cnn, vit")
    args = ap.parse_args(argv)
    microbatch, microbatches = (2, 4) if args.quick else (4, 8)
    schedules = [*SCHEDULES, *CSV]
    plans, jobs = [], []
    torch.set_num_threads(1)
    for name in args.models.split(","):
        rows = profiled(name, microbatch, args.quick)
        plan = plan_for(place(workload_graph(name, microbatch, args.quick, rows), rows), rows, microbatches)
        plans.append(plan)
        jobs.append({"model": name, "split_spec": plan.split_spec, "schedules": schedules, "csv": plan.csv,
                     "microbatch": microbatch,
                     "microbatches": microbatches, "steps": 3 if args.quick else 6, "repeat": 10 if args.quick else 20})
    ok = True
    runs = execute(jobs, args.quick)
    costs = calibrate(plans, runs, ping_pong(repeat=5 if args.quick else 20))
    print(f"calibration: compute x{costs.scale:.3f} (fitted on the stages), link {costs.link.latency_ms:.3f} ms + "
          f"bytes / {costs.link.bandwidth:.4g} per ms (measured), wall-clock slowdown x{costs.slowdown:.3f} and "
          f"{costs.overhead_ms:.3f} ms per task (fitted on the 1f1b steps)")
    for plan, ranks in zip(plans, runs):
        print("\n".join(report(plan, ranks, schedules, costs)))
        ok &= all(ranks[-1][f"{s}_allclose"] for s in schedules)
    print("all outputs match the unsplit models" if ok else "an output differs from the unsplit model")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
