"""Run interleaved 1F1B, ZB-H1 and ZBV from the exported schedule CSV: 4 virtual stages on 2 CPU ranks.

A small residual MLP (``embed``, blocks ``h.0`` .. ``h.3``, ``head``) is imported through
``torch.export``, placed one block per stage with stage ``k`` on rank ``k mod 2`` (each rank holds
two non-adjacent stages; for ZBV, stage ``k`` on device ``k`` of 4, which ZBV's V folds onto rank
``k`` and ``3 - k``), exported as ``torch.distributed.pipelining`` split points and as torch's
schedule CSV of each schedule, and run by torch's schedule runtime
(``_PipelineScheduleRuntime._load_csv``; for ZBV, ``ScheduleZBVZeroBubble``, whose V maps the
stages to ranks, with the CSV loaded into it) on 2 gloo processes. The script checks that the output of
the last stage and the gradients of every stage equal the unsplit model's (ZB-H1 computes the weight
gradients in separate ``W`` actions), and prints the simulator's time per micro-batch of each
schedule beside the measured one: the modules' forward, input-gradient and weight-gradient times are
profiled on one CPU thread first, as torch's pipeline runs them (:func:`placement_dsl.profile.profile_module`
with ``pipelined=True``: the stage module's interpreted submodules, torch's split backward), each
backward op's weight-gradient share taken from its module's ``W / (B + W)``.

Run: python examples/run_interleaved.py [--width W --microbatch B] [--calibration CAL.json] [--calibration-out OUT.json]
(needs torch==2.13.0; about 60 s)

Each schedule's compute factor is fitted apart from the ranks' CPU time (less the idle stages') over their
stages' profiled compute (``rank_fits``); at the default width the runtime's per-action work is most of a rank's
CPU time and the factor is noise: ``--width 2048 --microbatch 64`` makes the compute the larger part.
``--calibration-out`` writes the three factors into a calibration file beside ``--calibration``'s terms (its GPipe and
1F1B factors, time per op and per stage, link), which ``placement-dsl import --calibration FILE --schedule zbv`` and a
later run's ``--calibration`` then price each schedule with.

The model is tiny: the schedule runtime's per-action work (a gloo send or receive, Python bookkeeping, and on a
loaded machine the wait to be scheduled again) dwarfs its stages' compute, which is why that work is measured.
"""
from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from pipeline_models import IDLE_FEATURES, idle_pipe
from pipeline_ranks import busy_slowdown
from torch import nn
from torch.distributed.pipelining import PipelineStage, SplitPoint, pipeline
from torch.distributed.pipelining.schedules import ScheduleZBVZeroBubble, _PipelineScheduleRuntime

from placement_dsl import Cluster, Placement
from placement_dsl.evaluate import evaluate
from placement_dsl.export import export
from placement_dsl.export.plan import module_of
from placement_dsl.io.costs import apply_costs
from placement_dsl.io.torch_export import from_module
from placement_dsl.pipeline_orders import SPLIT
from placement_dsl.profile import (
    LinkTime,
    RunCosts,
    StageFit,
    profile_module,
    read_calibration,
    runtime_overhead,
    schedule_scales,
    split_backward,
    training_graph,
    write_calibration,
)
from placement_dsl.simulate import simulate

SCHEDULES = ("interleaved-1f1b", "zb-h1", "zbv")
RANKS, LAYERS, WIDTH, MICROBATCH, MICROBATCHES = 2, 4, 32, 2, 4
KIND, BANDWIDTH, STEPS = "accelerator", 1e6, 3  # stage devices are one-thread CPU ranks; gloo moves ~1 GB/s
PIPELINED = True  # profile the modules as torch's pipeline() and split backward run them (profile_module)


class Net(nn.Module):
    """An input projection, ``LAYERS`` residual blocks ``h.N`` and an output projection."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(16, WIDTH)
        self.h = nn.ModuleList(nn.Sequential(nn.LayerNorm(WIDTH), nn.Linear(WIDTH, WIDTH)) for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.h:
            x = x + F.gelu(block(x))
        return self.head(x)


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(output, target)


def stages_of_rank(schedule: str, rank: int) -> list[int]:
    """The stages ``rank`` builds: ``k mod 2`` round-robin, or ZBV's V (``rank`` and ``2 RANKS - 1 - rank``)."""
    return [rank, 2 * RANKS - 1 - rank] if schedule == "zbv" else list(range(rank, RANKS * 2, RANKS))


def plan() -> tuple[dict[str, str], dict[str, str], dict[str, Placement], list[float]]:
    """The split points of the placement (one block per stage, stage k on rank k mod 2), each schedule's CSV and
    training placement (ZBV's on 4 stage devices) with the profiled module times, and each op's weight-gradient
    share."""
    model, x, _ = data()
    rows = profile_module(model, (x[:MICROBATCH],), depth=2, repeat=10, warmup=3, clock="cpu", pipelined=PIPELINED)
    with torch.device("meta"):
        w = from_module(Net(), (torch.randn(MICROBATCH, 16),), name="net")
    g, _ = apply_costs(w.graph, {r.module: {KIND: r.forward_ms} for r in rows})
    stage = []
    for op in g.ops:
        path = str(op.attrs.get("module") or "")
        block = int(path.split(".")[1]) if path.startswith("h.") else (LAYERS - 1 if path.startswith("head") else 0)
        stage.append(max(block, stage[-1] if stage else 0))
    placements = {s: Placement(g, Cluster.accelerators(4, bandwidth=BANDWIDTH), stage) if s == "zbv" else
                  Placement(g, Cluster.accelerators(RANKS, bandwidth=BANDWIDTH), [k % RANKS for k in stage])
                  for s in SCHEDULES}
    split = export(placements["zbv"], "torch-pipelining", schedule="zbv").data["split_spec"]
    csvs = {s: export(p, "schedule-csv", microbatches=MICROBATCHES, schedule=s).text for s, p in placements.items()}
    whole, split_graph = training_graph(g, rows, KIND), training_graph(g, split_backward(rows), KIND)
    share = {r.module: r.weight_grad_ms / (r.input_grad_ms + r.weight_grad_ms or 1.0) for r in rows}
    tps = {}
    for s, p in placements.items():
        device = dict(zip(g.names, p.assign.tolist()))
        train = split_graph if s in SPLIT else whole  # ZB-H1, ZBV: the backward as torch splits it, B then W
        tps[s] = Placement(train, p.cluster, [device[op.name[:-5] if op.backward else op.name] for op in train.ops])
    shares = [share.get(str(module_of(op, 2)), 0.0) if op.backward else 0.0 for op in train.ops]
    return split, csvs, tps, shares


def predict(tp: Placement, shares: list[float], schedule: str, costs: RunCosts) -> float:
    """The simulator's step per micro-batch of ``schedule`` under ``costs`` (ms)."""
    return simulate(costs.placement(tp), schedule, MICROBATCHES, costs.model(), weight_share=shares).time_per_sample


def run_costs(base: RunCosts, measured: dict) -> RunCosts:
    """``base``'s compute factor of the schedule (:meth:`RunCosts.under`) and link with the per-task overhead of the
    idle stages' step and the slowdown measured beside the run of one schedule (none fitted on it)."""
    o = runtime_overhead(measured["idle_ms"], measured["schedule"], MICROBATCHES, stages=RANKS * 2, ranks=RANKS,
                         message_bytes=4.0 * IDLE_FEATURES * MICROBATCH, link=base.link)
    return replace(base.under(measured["schedule"]), overhead_ms=o, slowdown=measured["slowdown"])


def data() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return Net(), torch.randn(MICROBATCH * MICROBATCHES, 16), torch.randn(MICROBATCH * MICROBATCHES, 8)


def reference_grads(model: nn.Module, x: torch.Tensor, target: torch.Tensor) -> dict[str, torch.Tensor]:
    """The unsplit model's gradients of the mean micro-batch loss (torch's schedules average over micro-batches)."""
    model.zero_grad()
    loss = sum(loss_fn(model(xs), ts) for xs, ts in zip(x.chunk(MICROBATCHES), target.chunk(MICROBATCHES)))
    (loss / MICROBATCHES).backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def _stage_inputs(pipe, x: torch.Tensor) -> list[torch.Tensor]:
    """The input of every stage on micro-batch ``x`` (the unsplit forward, stage by stage)."""
    out = [x]
    with torch.no_grad():
        for k in range(pipe.num_stages - 1):
            h = pipe.get_stage_module(k)(out[-1])
            out.append(h[0] if isinstance(h, tuple) else h)
    return out


def build(pipe, k: int, schedule: str):
    """Stage ``k`` of ``pipe`` on this rank. For ZBV a ``PipelineStage`` of torch's stage module: the stages
    ``pipe.build_stage`` makes send their first messages to the next stage's rank even at the V's turn, where it is
    their own, which gloo refuses ("Pair is not connected"); ``PipelineStage`` skips a same-rank neighbour."""
    if schedule != "zbv":
        return pipe.build_stage(k, torch.device("cpu"))
    return PipelineStage(pipe.get_stage_module(k), k, pipe.num_stages, torch.device("cpu"))


def run_step(runtime, x: torch.Tensor, target: torch.Tensor):
    """One step of ``runtime``: the input to the rank holding the first stage, the target to the last stage's (one
    rank holds both under ZBV)."""
    first, last = (any(getattr(s, attr) for s in runtime._stages) for attr in ("is_first", "is_last"))
    return runtime.step(*([x] if first else []), **({"target": target, "losses": []} if last else {}))


def worker(rank: int, port: int, pipe, idle_stages, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=RANKS)
    model, x, target = data()
    want_grads = reference_grads(model, x, target)
    with torch.no_grad():
        want = model(x)
    idle_x, idle_target = torch.randn(len(x), IDLE_FEATURES), torch.randn(len(x), IDLE_FEATURES)
    inputs = _stage_inputs(pipe, x[:MICROBATCH])
    mine: list[int] = []

    def compute() -> None:  # this rank's stages' forward and backward of one micro-batch, as a step runs them
        for k in mine:
            h = inputs[k].detach().requires_grad_(True)
            y = pipe.get_stage_module(k)(h)
            y = y[0] if isinstance(y, tuple) else y
            (loss_fn(y, target[:MICROBATCH]) if k == pipe.num_stages - 1 else y.sum()).backward()

    result: dict[str, dict] = {}
    try:
        for name in SCHEDULES:
            mine[:] = stages_of_rank(name, rank)
            stages = [build(pipe, k, name) for k in mine]
            idle = [build(idle_stages, k, name) for k in mine]
            kind = ScheduleZBVZeroBubble if name == "zbv" else _PipelineScheduleRuntime  # ZBV's class maps the V
            runtime = kind(stages, MICROBATCHES, loss_fn=loss_fn)
            idle_runtime = kind(idle, MICROBATCHES, loss_fn=loss_fn)
            path = Path(out, f"{name}.csv")
            runtime._load_csv(str(path), format="compute_only")
            idle_runtime._load_csv(str(path), format="compute_only")
            times, idle_times, slowdown, cpu, idle_cpu = [], [], [], [], []
            for step in range(STEPS + 1):
                for s in stages:
                    s.submod.zero_grad()
                dist.barrier()
                start, on_cpu = time.perf_counter(), time.thread_time()
                y = run_step(runtime, x, target)
                times.append(1e3 * (time.perf_counter() - start) / MICROBATCHES)
                cpu.append(1e3 * (time.thread_time() - on_cpu) / MICROBATCHES)
                if step == 0:
                    checked = [p.grad is not None and torch.allclose(p.grad, want_grads[pname], rtol=1e-4, atol=1e-6)
                               for s in stages for pname, p in s.submod.named_parameters()]  # the stage keeps FQNs
                    output = any(s.is_last for s in stages) and bool(torch.allclose(y.detach(), want, rtol=1e-4,
                                                                                    atol=1e-5))
                dist.barrier()
                start, on_cpu = time.perf_counter(), time.thread_time()
                run_step(idle_runtime, idle_x, idle_target)
                idle_times.append(1e3 * (time.perf_counter() - start) / MICROBATCHES)
                idle_cpu.append(1e3 * (time.thread_time() - on_cpu) / MICROBATCHES)
                dist.barrier()  # every rank at once, as in a step
                slowdown.append(busy_slowdown(compute, MICROBATCHES))
            entry = {"grads": bool(checked) and all(checked), "ms": statistics.median(times[1:]),
                     "idle_ms": statistics.median(idle_times[1:]), "slowdown": statistics.median(slowdown[1:]),
                     "cpu_ms": statistics.median(cpu[1:]), "idle_cpu_ms": statistics.median(idle_cpu[1:]),
                     "stages": list(mine)}
            if any(s.is_last for s in stages):
                entry["output"] = output
            result[name] = entry
    finally:
        dist.destroy_process_group()
    Path(out, f"rank{rank}.json").write_text(json.dumps(result))


def run(base: RunCosts | None = None, calibration_out: str | Path | None = None,
        note: str = "run_interleaved.py") -> tuple[dict[str, str], dict[str, dict]]:
    """Plan, export and run both schedules; per schedule: output and gradients as unsplit, the measured step, the
    idle stages' step and the slowdown beside it, and the simulator's step under ``base``'s compute factor and link
    (none: the profile's own speed and no link latency; a schedule's own factor where ``base`` holds one) with the
    overhead and slowdown measured in the run. With ``calibration_out``: ``base`` with each schedule's factor fitted
    here written there (:meth:`RunCosts.with_factors`, :func:`write_calibration`) and read back, and each schedule's
    step predicted from the file read back (``predicted_file_ms``)."""
    torch.set_num_threads(1)
    base = base or RunCosts(1.0, LinkTime(0.0, BANDWIDTH))
    split, csvs, tps, shares = plan()
    model, x, _ = data()
    pipe = pipeline(model, (x[:MICROBATCH],), split_spec={k: SplitPoint[v.upper()] for k, v in split.items()})
    if pipe.num_stages != RANKS * 2:
        raise SystemExit(f"torch split the model into {pipe.num_stages} stages, not {RANKS * 2}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in csvs.items():
            Path(tmp, f"{name}.csv").write_text(text)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.start_processes(worker, args=(port, pipe, idle_pipe(RANKS * 2, MICROBATCH), tmp), nprocs=RANKS, join=True,
                           start_method="fork")
        ranks = [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(RANKS)]
    out = {}
    for name in SCHEDULES:
        measured = {"schedule": name, "idle_ms": max(r[name]["idle_ms"] for r in ranks),
                    "slowdown": sum(r[name]["slowdown"] for r in ranks) / RANKS}
        costs = run_costs(base, measured)
        fits = rank_fits(tps[name], ranks, name, base)
        factor = schedule_scales(fits, base.op_ms, base.stage_ms).get(name)  # none: the ranks' time is all runtime
        out[name] = {"output": next(r[name]["output"] for r in ranks if "output" in r[name]), "grads": all(r[name]["grads"] for r in ranks),
                     "predicted_ms": predict(tps[name], shares, name, costs),
                     "measured_ms": max(r[name]["ms"] for r in ranks),
                     "profiled_ms": predict(tps[name], shares, name, RunCosts(1.0, LinkTime(0.0, BANDWIDTH))),
                     "idle_ms": measured["idle_ms"], "overhead_ms": costs.overhead_ms, "slowdown": costs.slowdown,
                     "factor": factor, "base_factor": costs.scale, "fits": fits,
                     "predicted_own_ms": predict(tps[name], shares, name, replace(costs, scale=factor or costs.scale))}
    if calibration_out is not None:
        write_calibration(base.with_factors({name: r["factor"] for name, r in out.items() if r["factor"]}),
                          calibration_out, KIND, note=note)
        back = read_calibration(calibration_out)[0]
        for name, r in out.items():
            measured = replace(back.under(name), overhead_ms=r["overhead_ms"], slowdown=r["slowdown"])
            r["predicted_file_ms"], r["file_factor"] = predict(tps[name], shares, name, measured), measured.scale
    return split, out


def rank_fits(tp: Placement, ranks: list[dict], schedule: str, base: RunCosts) -> list[StageFit]:
    """Each rank's stages under ``schedule``: profiled (their forward and backward compute in ``tp``, on the stage
    devices the rank holds) against measured (the rank's CPU time per micro-batch in the steps less the idle
    stages'), with their ops and tensors at ``base``'s link; the measured time less ``base``'s fixed time of each
    stage beyond the first, so that :func:`schedule_scales` (one fixed time per fit) holds them all."""
    rows = evaluate(RunCosts(link=base.link).placement(tp), RunCosts(link=base.link).model()).devices
    fits = []
    for rank, r in enumerate(ranks):
        held = stages_of_rank(schedule, rank) if tp.cluster.size > RANKS else [rank]  # its stage devices
        ops = [i for i, d in enumerate(tp.assign.tolist()) if d in held]
        fits.append(StageFit(rank, sum(rows[d].compute_fw + rows[d].compute_bw for d in held),
                             r[schedule]["cpu_ms"] - r[schedule]["idle_cpu_ms"] - base.stage_ms * (len(r[schedule]["stages"]) - 1),
                             len(ops), sum(rows[d].in_fw + rows[d].in_bw + rows[d].out_fw + rows[d].out_bw
                                           for d in held),
                             schedule))
    return fits



def factor_text(r: dict) -> str:
    """A schedule's own compute factor as printed: ``x1.234``, or why there is none."""
    return f"x{r['factor']:.3f}" if r["factor"] else "none (the ranks' CPU time less the runtime's is not above 0)"


def main(argv: list[str] | None = None) -> int:
    import argparse

    global WIDTH, MICROBATCH
    ap = argparse.ArgumentParser(description="interleaved 1F1B, ZB-H1 and ZBV from the exported CSV on 2 CPU ranks")
    ap.add_argument("--width", type=int, default=WIDTH, help="the blocks' width (wide: compute beyond the runtime's)")
    ap.add_argument("--microbatch", type=int, default=MICROBATCH, help="samples per micro-batch")
    ap.add_argument("--calibration", metavar="CALIBRATION.json",
                    help="price the steps with this calibration (run_pipeline.py --calibration-out), a schedule at its "
                         "own factor where the file holds one")
    ap.add_argument("--calibration-out", metavar="CALIBRATION.json",
                    help="write the calibration (--calibration's, or the profile's) with each schedule's factor fitted "
                         "here, for 'placement-dsl import --calibration ... --schedule zbv'")
    args = ap.parse_args(argv)
    WIDTH, MICROBATCH = args.width, args.microbatch  # read by Net and data(), in this process and the forked ranks
    base = read_calibration(args.calibration)[0] if args.calibration else None
    split, results = run(base, args.calibration_out,
                         f"run_interleaved.py --width {WIDTH} --microbatch {MICROBATCH}: CPU time per micro-batch")
    print(f"split_spec {split}; torch split it into {RANKS * 2} stages, stage k on rank k mod {RANKS} "
          f"(zbv: stages k and {2 * RANKS - 1} - k on rank k)")
    ok = True
    for name, r in results.items():
        residual = (r["measured_ms"] - r["predicted_ms"]) / r["measured_ms"]
        print(f"{name}: output matches the unsplit model: {r['output']}; gradients match: {r['grads']}; "
              f"step per micro-batch predicted {r['predicted_ms']:.3f} ms, measured {r['measured_ms']:.3f} ms, "
              f"residual {residual:.1%} (idle stages {r['idle_ms']:.3f} ms: {r['overhead_ms']:.3f} ms per task; "
              f"slowdown x{r['slowdown']:.2f}; compute as profiled); its own compute factor {factor_text(r)} "
              f"(CPU time of the ranks' stages, less the idle stages', over their profiled compute; per rank "
              f"{', '.join(f'{f.measured_ms:.2f} / {f.predicted_ms:.2f} ms' for f in r['fits'])}), predicted "
              f"{r['predicted_own_ms']:.3f} ms")
        ok &= r["output"] and r["grads"]
    if args.calibration_out:
        print(f"wrote {args.calibration_out} with the factors of "
              f"{', '.join(n for n, r in results.items() if r['factor']) or 'no schedule'}; read back, each step predicted "
              + "; ".join(f"{name} x{r['file_factor']:.3f}: {r['predicted_file_ms']:.3f} ms against "
                          f"{r['measured_ms']:.3f} ms measured" for name, r in results.items()))
    print("all outputs and gradients match the unsplit model" if ok else "a result differs from the unsplit model")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
