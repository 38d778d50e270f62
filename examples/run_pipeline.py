"""Place a small GPT and a small ResNet-style CNN (or a ViT) on 2 pipeline stages, export the split, and run it.

For each model (:mod:`pipeline_models`): profile its modules on the CPU (:mod:`placement_dsl.profile`), import
it through ``torch.export`` with the measured costs, place it on 2 accelerators (the throughput of a training
step, 1F1B's ``max (FW + BW)``; stage boundaries between depth-2 modules; no CPU stage) with the DP over
ideals, export the split to ``torch.distributed.pipelining`` and execute it there (:mod:`pipeline_ranks`):
GPipe and 1F1B, gloo backend, one process per stage on the CPU, and the exported schedule CSV (1F1B and
GPipe) run by torch's schedule runtime (``_PipelineScheduleRuntime._load_csv``). The script checks that torch
accepts the split, that every split point names a module of the model, and that the pipeline's output equals
the unsplit model's; then it prints the predicted and measured time per micro-batch of each stage (forward
and backward, ms) and of each schedule's training step.

Three numbers are fitted, on the stages' CPU time in the steps of each schedule: the compute factor (one per
schedule: a stage under GPipe holds every micro-batch's activations and costs more CPU than under 1F1B;
:meth:`~placement_dsl.profile.RunCosts.fitted`), a stage's fixed time per op and micro-batch and its fixed time
per micro-batch (what a profile of the modules does not see: the stage module
runs its ops one by one through interpreted ``torch.export`` submodules and the autograd engine, about 0.02 ms
per op of the training graph, and the runtime handles each micro-batch's chunk; a split's gain over another is
smaller than the profile's ratio of their stages). The split and a lopsided one (the first module alone on a
stage) also run at ``SMALL`` samples per micro-batch, where the compute shrinks and the op counts do not, so that
the fit tells them apart. Beside every step the same schedule runs on
stages that do no work (``IdleNet``: the runtime's own cost per task,
:func:`placement_dsl.profile.runtime_overhead`) and the ranks' compute runs at once (the machine's wall-clock
slowdown), so no step is fitted on. The jobs (each model's split at both sizes and the lopsided one) step in turn,
one step of each per round (:func:`pipeline_ranks.turns`), so that a load that changes during the run falls on them
alike.

Last, each model is placed again on the calibrated costs (every op's time times the factor plus the time per op, and
the fixed time per stage, which the DP prices; ``--calibration-out FILE`` writes them for ``placement-dsl import
--calibration``), and the line says whether the split moved.

Run: python examples/run_pipeline.py [--quick] [--calibration-out FILE]   (needs torch==2.13.0; about a minute)
"""
from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its helper modules, also when loaded as a factory file

import torch
from pipeline_models import FACTORIES, IDLE_FEATURES, build, loss_fn, make_cnn, make_gpt, make_vit  # noqa: F401
from pipeline_ranks import CLOCK, SCHEDULES, busy_slowdown, execute, interleaved_rounds, keep, prepare  # noqa: F401

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
    training_graph,
    write_calibration,
)
from placement_dsl.simulate import simulate

KIND = "accelerator"  # the kind of the pipeline's stage devices; here each is a one-thread CPU process
BANDWIDTH = 1e6  # bytes per ms between two ranks (gloo over the loopback moves about 1 GB/s)
DEPTH = 2  # stage boundaries between modules of two dotted parts: h.N of the GPT, blocks.N of the CNN
PIPELINED = False  # True: profile the modules as torch's pipeline() runs them (its stage module's interpreted
# submodules). Eager by default: at the bench's full sizes (load 4-8, two repeats each) the eager profile predicted the
# stages within 8 % (22 of 24 within 15 %) and the steps within 12 % (19 of 24), the pipelined one 20 % (9) and 25 % (7)
CSV = {"csv-1f1b": "1f1b", "csv-gpipe": "gpipe"}  # the exported schedule CSV of a schedule, run by torch's runtime
SMALL = 1  # samples per micro-batch of the calibration's second size (the compute shrinks, a stage's ops do not)


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
    ops: list[int] = field(default_factory=list)  # ops (forward and backward) of the training graph on each stage

    def link_ms(self, link: LinkTime | None) -> list[float]:
        """Each stage's tensors to and from the other stage at ``link`` (the cost model's ``in`` + ``out``, ms per
        micro-batch; 0 without a link or a training placement): a part of the stage's measured CPU time that the
        calibration takes as measured (:func:`placement_dsl.profile.stage_costs_of`)."""
        if link is None or self.train is None:
            return [0.0] * len(self.ops or self.forward_ms)
        costs = RunCosts(link=link)
        rows = evaluate(costs.placement(self.train), costs.model()).devices
        return [r.in_fw + r.in_bw + r.out_fw + r.out_bw for r in rows]

    def step_with(self, costs: RunCosts, schedule: str) -> float:
        """The simulator's step time per micro-batch of ``schedule`` (a CSV schedule runs its own) under the run's
        costs: the profiled compute times the schedule's factor (:meth:`RunCosts.under`), the link's bandwidth and
        latency, the per-task overhead."""
        run = costs.under(CSV.get(schedule, schedule))
        return simulate(run.placement(self.train), CSV.get(schedule, schedule), self.microbatches,
                        run.model()).time_per_sample


def profiled(name: str, microbatch: int, quick: bool) -> list[ModuleTime]:
    """Each depth-2 module's measured forward and backward time on one CPU thread, the backward whole as GPipe and
    1F1B run it: eager, or with ``PIPELINED`` through the stage module ``pipeline()`` builds (its submodules are
    interpreted ``torch.export`` graphs). The last stage also computes the loss on the model's output, forward and
    backward (:func:`loss_ms`): its times are the last module's, whose output the loss reads."""
    model, x, target = build(name, microbatch, quick)
    repeat = 10 if quick else 20
    rows = profile_module(model, (x[:microbatch],), depth=DEPTH, repeat=repeat, warmup=3, clock=CLOCK,
                          pipelined=PIPELINED)
    if not rows:
        return rows
    forward, backward = loss_ms(model, x[:microbatch], target[:microbatch], repeat)
    last = rows[-1]
    return [*rows[:-1], replace(last, forward_ms=last.forward_ms + forward, backward_ms=last.backward_ms + backward)]


def loss_ms(model: Any, x: torch.Tensor, target: torch.Tensor, repeat: int) -> tuple[float, float]:
    """The forward and the backward ms of :func:`loss_fn` on ``model``'s output for ``x`` (the fastest of ``repeat``
    runs after one, in CPU time): on a large vocabulary's logits a few ms per micro-batch, which a profile of the
    modules does not hold."""
    clock = CLOCKS[CLOCK]
    with torch.no_grad():
        out = model(x)
    spent: list[tuple[float, float]] = []
    for _ in range(repeat + 1):
        given = out.detach().requires_grad_(True)
        start = clock()
        loss = loss_fn(given, target)
        middle = clock()
        loss.backward()
        spent.append((1e3 * (middle - start), 1e3 * (clock() - middle)))
    return min(f for f, _ in spent[1:]), min(b for _, b in spent[1:])


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
                microbatches=microbatches, microbatch=microbatch,
                ops=[assign.count(k) for k in range(placement.cluster.size)])
    plan.step_ms = {s: simulate(tp, s, microbatches).makespan / microbatches for s in SCHEDULES}
    return plan


def place(graph: Any, rows: list[ModuleTime], stages: int = 2, costs: RunCosts | None = None) -> Placement:
    """The best contiguous split of ``graph`` over ``stages`` accelerators for a training step, boundaries between
    depth-2 modules: the DP over ideals on the training graph with the measured backward times, objective
    ``pipedream`` (the throughput of 1F1B: ``max (FW + BW)`` over the stages); its forward part. With ``costs`` (a
    run's calibration), on the costs the run measured under 1F1B: every op's time ``x scale + op_ms`` (1F1B's
    factor, :meth:`RunCosts.under`; :meth:`RunCosts.measured_graph`) and each stage's fixed time per pass
    (:meth:`RunCosts.search_model`)."""
    cluster = Cluster.accelerators(stages, bandwidth=BANDWIDTH)
    train = training_graph(graph, rows, KIND)
    model = CostModel.named("pipedream")
    if costs is not None:  # CPU time: the machine's slowdown during the run is no cost of the runtime
        cpu = replace(costs.under("1f1b"), slowdown=1.0)
        train, model = cpu.measured_graph(train, KIND), cpu.search_model("pipedream")
    term = Boundaries.modules(DEPTH)
    term.validate(train, cluster)
    result = run("dp", term.apply(train, cluster), cluster, model=model)
    verdict = evaluate(result.placement, model)
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


# ---------------------------------------------------------------------------- main
def ran(rank: dict) -> list[str]:
    """The schedules a rank's results hold (CSV ones by their own names)."""
    return [k[:-len("_idle_cpu_ms")] for k in rank if k.endswith("_idle_cpu_ms")]


def stage_ms(rank: dict, schedule: str | None = None) -> float:
    """A stage's measured time per micro-batch in the steps of ``schedule``: its rank's CPU time per micro-batch less
    that of the idle stages' step beside it (the runtime's own work, which the per-task overhead holds); without
    ``schedule`` the median over the schedules run."""
    return statistics.median(rank[f"{s}_cpu_ms"] - rank[f"{s}_idle_cpu_ms"]
                             for s in ran(rank) if schedule in (None, s))


def stage_fits(plan: Plan, ranks: list[dict], link: LinkTime | None = None, schedule: str | None = None
               ) -> list[StageFit]:
    """Predicted (the profiled forward + backward) against measured (:func:`stage_ms`) time per micro-batch of each
    stage under ``schedule`` (the fits name the schedule a CSV runs; none: the median over the schedules run), with
    its op count and its tensors' time at ``link``."""
    return calibration([f + b for f, b in zip(plan.forward_ms, plan.backward_ms)],
                       [stage_ms(r, schedule) for r in ranks], plan.ops or None, plan.link_ms(link),
                       CSV.get(schedule, schedule or ""))


def small_plan(name: str, plan: Plan, quick: bool, lopsided: bool = False) -> tuple[Plan, dict]:
    """``plan``'s split of model ``name`` (``lopsided``: the model's first module alone on the first stage, the rest
    on the second) at :data:`SMALL` samples per micro-batch, profiled at that size, and the job that runs it (1F1B
    only; no slowdown, no stage timed alone): the calibration's second micro-batch size, at which the compute
    shrinks and the op counts do not, so that the fit tells a stage's time per op from its compute. The lopsided
    split adds stages of a few ops and of all of them, which pin the time per stage and per op where a split's
    two stages of like op counts cannot."""
    return small_plans(name, plan, quick, (lopsided,))[0]


def small_plans(name: str, plan: Plan, quick: bool, which: tuple[bool, ...] = (False, True)) -> list[tuple[Plan, dict]]:
    """:func:`small_plan` of each ``lopsided`` in ``which`` (by default ``plan``'s split and the lopsided one), on one
    profile and import at :data:`SMALL` samples per micro-batch."""
    rows = profiled(name, SMALL, quick)
    graph = workload_graph(name, SMALL, quick, rows)
    return [_small(name, plan, quick, rows, graph, lopsided) for lopsided in which]


def _small(name: str, plan: Plan, quick: bool, rows: list[ModuleTime], graph: Any, lopsided: bool) -> tuple[Plan, dict]:
    for point in modules_in_order(graph)[1:] if lopsided else [None]:  # the first cut torch makes two stages of
        small = plan_for(placement_of(graph, [point] if point else list(plan.split_spec)), rows, plan.microbatches,
                         SMALL)
        job = {"model": name, "split_spec": small.split_spec, "schedules": ["1f1b"], "microbatch": SMALL,
               "microbatches": plan.microbatches, "steps": 2 if quick else 6, "slowdown": False}
        try:
            if lopsided:
                keep(job, quick, plan.train.cluster.size)
            return small, job
        except SystemExit:  # torch cannot split there (the first module of a list, in torch 2.13)
            continue
    raise SystemExit(f"{name}: torch splits the model before none of its modules")


def modules_in_order(graph: Any, depth: int = DEPTH) -> list[str]:
    """The depth-``depth`` modules of ``graph`` in execution order."""
    out: dict[str, None] = {}
    for op in graph.ops:
        path = str(op.attrs.get("module") or "")
        if path:
            out.setdefault(".".join(path.split(".")[:depth]), None)
    return list(out)


def report(plan: Plan, ranks: list[dict], schedules: list[str], base: RunCosts, stage_link: LinkTime | None = None
           ) -> list[str]:
    """Predicted against measured stage and step times of one run, as lines (``base``: the compute factor and link;
    each schedule's overhead and the slowdown are the run's own, :func:`run_costs`; the stages' tensors at
    ``stage_link``, default ``base``'s)."""
    link = stage_link or base.link
    lines = [f"{plan.name}: split_spec {plan.split_spec}"]
    last = ranks[-1]
    for s in schedules:
        lines.append(f"{plan.name} {s}: output matches the unsplit model: {last[f'{s}_allclose']} "
                     f"(max abs diff {last[f'{s}_max_abs_diff']:.2e})")
    fits = stage_fits(plan, ranks, link)
    lines.append(f"{plan.name}: time per micro-batch per stage, forward + backward, as profiled (measured: CPU time in "
                 "the steps, less the idle stages')")
    lines += calibration_table(fits).splitlines()
    for s in dict.fromkeys(CSV.get(s, s) for s in schedules):
        lines.append(f"{plan.name}: the same under {s} after calibration (predictions x{base.scale_for(s):.3f} + "
                     f"{base.op_ms:.4f} ms per op + {base.stage_ms:.3f} ms + the stage's tensors at the link)")
        lines += calibration_table(calibrated(stage_fits(plan, ranks, link, s), base)).splitlines()
    for s in schedules:
        measured = max(r[f"{s}_step_ms"] for r in ranks)
        costs = run_costs(base, ranks, s, plan)
        want = plan.step_with(costs, s)
        lines.append(f"{plan.name} {s}: step per micro-batch predicted {want:.4f} ms (calibrated), measured "
                     f"{measured:.4f} ms, residual {(measured - want) / measured:.1%}; idle stages "
                     f"{max(r[f'{s}_idle_ms'] for r in ranks):.3f} ms: {costs.overhead_ms:.3f} ms per task, "
                     f"slowdown x{costs.slowdown:.3f} (measured)")
    return lines


def calibrate(plans: list[Plan], runs: list[list[dict]], link: LinkTime, stage_link: LinkTime | None = None,
              relative: bool = True) -> RunCosts:
    """The fitted costs, over every stage of ``runs`` under each schedule run (in CPU time): the compute factor, a
    stage's fixed time per op and per micro-batch (:func:`placement_dsl.profile.stage_costs_of`: measured - the
    stage's tensors at ``stage_link`` = factor x profiled + per op x ops + fixed; the plans at two micro-batch
    sizes tell them apart), and each schedule's own factor with those held (:meth:`RunCosts.fitted`); with the
    ``link`` (the wall clock's, which a step pays). ``stage_link``: the link as the stages are timed, in the ranks'
    CPU time (``ping_pong(clock="cpu")``; default ``link``); ``relative``: the stages' relative residuals fitted
    (else their ms). The per-task overhead and the slowdown are measured in each run (:func:`run_costs`)."""
    return RunCosts.fitted([f for plan, ranks in zip(plans, runs) for s in ran(ranks[0])
                            for f in stage_fits(plan, ranks, stage_link or link, s)], link, relative)


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
    return replace(base.under(CSV.get(schedule, schedule)), overhead_ms=o, slowdown=slowdown)


def replaced(plan: Plan, graph: Any, rows: list[ModuleTime], costs: RunCosts) -> str:
    """The split the search chooses on the calibrated costs (:func:`place` with ``costs``) against ``plan``'s, chosen
    on the profile alone, with the calibrated prediction of each one's slower stage (ms per micro-batch, CPU)."""
    again = place(graph, rows, plan.train.cluster.size, costs)
    spec = export(again, "torch-pipelining").data["split_spec"]
    cpu = replace(costs.under("1f1b"), slowdown=1.0)  # the search's objective: 1F1B's
    model = cpu.search_model("pipedream")
    slower = [evaluate(Placement(cpu.measured_graph(plan.train.graph, KIND), plan.train.cluster, assign), model).objective
              for assign in (plan.train.assign, predicted(again, rows, plan.microbatches).train.assign)]
    verdict = "the same split" if spec == plan.split_spec else f"moved from {list(plan.split_spec)}"
    return (f"{plan.name}: re-placed on the calibrated costs: split_spec {spec} ({verdict}); slower stage predicted "
            f"{slower[1]:.3f} ms per micro-batch, the profile's split {slower[0]:.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small models and few steps (the test's sizes)")
    ap.add_argument("--models", default="gpt,cnn", help=f"comma-separated: {', '.join(FACTORIES)}")
    ap.add_argument("--calibration-out", metavar="CALIBRATION.json",
                    help="write the fitted costs (factor, ms per op, per stage, per task; the link) for import "
                         "--calibration")
    args = ap.parse_args(argv)
    microbatch, microbatches = (2, 4) if args.quick else (4, 8)
    schedules = [*SCHEDULES, *CSV]
    plans, jobs, smalls, imported = [], [], [], []
    torch.set_num_threads(1)
    for name in args.models.split(","):
        rows = profiled(name, microbatch, args.quick)
        graph = workload_graph(name, microbatch, args.quick, rows)
        imported.append((graph, rows))
        plan = plan_for(place(graph, rows), rows, microbatches, microbatch)
        plans.append(plan)
        jobs.append({"model": name, "split_spec": plan.split_spec, "schedules": schedules, "csv": plan.csv,
                     "microbatch": microbatch,
                     "microbatches": microbatches, "steps": 3 if args.quick else 6})  # stages not timed alone
        smalls += small_plans(name, plan, args.quick)
    ok = True
    runs = execute(jobs + [job for _, job in smalls], args.quick)
    stage_link = ping_pong(repeat=5 if args.quick else 20, clock="cpu")  # a stage's CPU time holds no gloo copy
    costs = calibrate(plans + [p for p, _ in smalls], runs, ping_pong(repeat=5 if args.quick else 20), stage_link)
    runs = runs[:len(plans)]
    factors = ", ".join(f"{s} x{c:.3f}" for s, c in costs.scales)
    print(f"calibration: compute x{costs.scale:.3f} ({factors}) + {costs.op_ms:.4f} ms per op + {costs.stage_ms:.3f} ms "
          f"per stage and micro-batch (fitted on the stages at {microbatch} and {SMALL} samples per micro-batch), link "
          f"{costs.link.latency_ms:.3f} ms + "
          f"bytes / {costs.link.bandwidth:.4g} per ms (measured; in the ranks' CPU time, which the stages are timed "
          f"in, {stage_link.latency_ms:.3f} ms + bytes / {stage_link.bandwidth:.4g} per ms); per run, the per-task overhead (measured on idle "
          "stages beside each step) and the wall-clock slowdown (measured by the ranks at once)")
    for plan, ranks in zip(plans, runs):
        print("\n".join(report(plan, ranks, schedules, costs, stage_link)))
        ok &= all(ranks[-1][f"{s}_allclose"] for s in schedules)
    per_task = statistics.median(run_costs(costs, ranks, "1f1b", plan).overhead_ms for plan, ranks in zip(plans, runs))
    costs = replace(costs, overhead_ms=per_task)
    for plan, (graph, rows) in zip(plans, imported):
        print(replaced(plan, graph, rows, costs))
    if args.calibration_out:
        write_calibration(costs, args.calibration_out, KIND, note=f"run_pipeline.py --models {args.models}"
                          f"{' --quick' if args.quick else ''}: CPU time per micro-batch of {microbatch} and {SMALL}")
        print(f"wrote {args.calibration_out}: import --calibration applies it")
    print("all outputs match the unsplit models" if ok else "an output differs from the unsplit model")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
