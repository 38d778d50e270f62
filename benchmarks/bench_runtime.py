"""A real pipeline run: our split against torch's even split and DeepSpeed's ``parameters`` split.

For the example models of ``examples/run_pipeline.py`` (a small GPT and a ResNet-style CNN, and two
uneven ones as real models are: ``gpt-vocab``, whose vocabulary makes the LM head as heavy as a few
blocks and the embedding and head hold most parameters, and ``cnn-mobile``, whose width grows 1.5x a
halving of the resolution so that the early blocks cost most of the compute and the late ones hold
most parameters) on 2 stages on the CPU (gloo, one process and one thread per stage), three splits
run by the same runtime (``torch.distributed.pipelining``, GPipe and 1F1B):

* **ours**: the DP over ideals on the training graph with the profiled forward and backward times
  (objective ``pipedream``, stage boundaries between depth-2 modules);
* **even**: torch's default even split, the same number of repeated blocks (``h.N``, ``blocks.N``)
  on each stage;
* **parameters**: DeepSpeed's ``partition_method="parameters"``: the depth-2 modules in execution
  order as the layer list, cut where the larger part holds the fewest parameters.

For each: the cost model's time per micro-batch of each stage (forward + backward, from the profile of the
modules, ``run_pipeline.PIPELINED``) against the stage's measured time (its rank's CPU time per micro-batch in
the steps, less the idle stages' beside them), each schedule's step time per micro-batch (the simulator's
against torch's, wall clock, medians over the steps), the residuals, and the measured throughput in samples
per second. Three numbers are fitted, on the stages of the ``ours`` rows and, at one sample per micro-batch, on
those of our split and of a lopsided one (the first module alone on a stage): the compute factor (the machine's CPU time against
the profile's), a stage's fixed time per op it runs and its fixed time per micro-batch (what the stage module
and the runtime pay per chunk whatever the stage's modules cost; :func:`placement_dsl.profile.stage_costs_of`).
The rest is measured: the link (ping-pong), and beside
every step the same schedule on stages that do no work (the runtime's own cost, read through the simulator as
a time per task) and the ranks' compute run at once (the wall-clock slowdown of a loaded machine). Every job (each
model's three splits, and the calibration's splits at one sample per micro-batch) steps in turn, one step of each per
round in alternating order (``pipeline_ranks.turns``), so that the load of a shared machine, which changes over the
minutes a run takes, falls on every split alike rather than on the split that happened to run first.

Then one row per schedule with virtual stages (``--virtual``, on by default): interleaved 1F1B,
ZB-H1 and ZBV from the exported schedule CSV over 4 virtual stages on the 2 ranks
(``examples/run_interleaved.py``, its modules profiled as torch's pipeline runs them), the simulator's
step time per micro-batch (the compute factor above, the overhead and slowdown measured beside its own
steps) against the measured one; then each schedule's own factor (fitted on the ranks' CPU time) written into the
calibration file beside GPipe's and 1F1B's (``--calibration-dir``/calibration.json) and read back, and the step
predicted from the file against the measured one.

    python benchmarks/bench_runtime.py            # the full example sizes
    python benchmarks/bench_runtime.py --quick    # the test's sizes
    python benchmarks/bench_runtime.py --fair 20  # only ours against even and parameters, 20 interleaved rounds

``--fair ROUNDS`` measures the three splits so that the machine's load cannot favour one: per model their
stages, and our split's a second time, are built once in one process group and each round runs one step of
each split and schedule in turn (the order reversed every other round), with a step of idle stages; per model
and schedule it prints the per-round throughput ratios ours / even and ours / parameters (median, quartiles,
range), the ratios of the splits' fastest steps and of their trimmed means (:class:`Compared`), the same of our
split against itself (the noise floor: a verdict needs both ratios beyond it), the ratio of the busiest rank's
CPU time per micro-batch (which the machine's load hardly moves), and two predictions: the profile's (the
simulator on the profiled times) and the calibrated one (each schedule's factor and the fixed times fitted on the
three splits' stages at two micro-batch sizes and the lopsided split's at the second, written to
``--calibration-dir``/MODEL.json and read back as ``import --calibration`` reads it; the idle stages' cost per task, the measured link; :func:`fair_costs`). Then
the DP places the model again on those calibrated costs; a split that is none of the three runs against ours
and ``parameters`` in rounds of its own. Out of sample: the calibration fitted on our split and the lopsided one
(whose stages of few and many ops tell the time per stage from the time per op where our split's stages run
alike counts) with its residuals on the other splits, stage by stage (:func:`out_of_sample`).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import run_interleaved as ri
import run_pipeline as rp
from common import fmt, markdown_head, markdown_row

from placement_dsl.export.layers import layer_prefix
from placement_dsl.profile import (
    RunCosts,
    affine_of,
    calibrated,
    calibration,
    ping_pong,
    read_calibration,
    runtime_overhead,
    scale_of,
    schedule_scales,
    stage_costs_of,
    write_calibration,
)

blocks = rp.modules_in_order  # the depth-2 modules of a graph in execution order


def even_point(graph) -> str:
    """The first block of the second half of the repeated blocks (``h.N``, ``blocks.N``: the layer list)."""
    prefix = layer_prefix(blocks(graph))
    repeated = [m for m in blocks(graph) if m.rsplit(".", 1)[0] == prefix]
    return repeated[len(repeated) // 2]


def parameters_point(name: str, graph, quick: bool) -> str:
    """DeepSpeed's ``parameters`` method for 2 parts: the cut of the layer list whose larger side holds the fewest
    parameters (trainable parameters of each depth-2 module)."""
    model, _, _ = rp.build(name, 1, quick)
    modules = dict(model.named_modules())
    layers = blocks(graph)
    weights = [sum(p.numel() for p in modules[m].parameters()) for m in layers]
    total, best, cut, prefix = sum(weights), None, 1, 0
    for b in range(1, len(layers)):
        prefix += weights[b - 1]
        worst = max(prefix, total - prefix)
        if best is None or worst < best:
            best, cut = worst, b
    return layers[cut]


def plans(name: str, microbatch: int, microbatches: int, quick: bool, imported=None) -> list[tuple[str, rp.Plan]]:
    """Ours, even and ``parameters`` of model ``name`` (``imported``: its profile rows and graph, else made here)."""
    rows, graph = imported or imports(name, microbatch, quick)
    out = [("ours", rp.plan_for(rp.place(graph, rows), rows, microbatches, microbatch))]
    for label, point in (("even", even_point(graph)), ("parameters", parameters_point(name, graph, quick))):
        out.append((label, rp.plan_for(rp.placement_of(graph, [point]), rows, microbatches, microbatch)))
    return out


def imports(name: str, microbatch: int, quick: bool) -> tuple[list, object]:
    """Model ``name``'s profile rows at ``microbatch`` samples and its graph imported with them."""
    rows = rp.profiled(name, microbatch, quick)
    return rows, rp.workload_graph(name, microbatch, quick, rows)


def load() -> str:
    """The machine's load averages (1, 5, 15 min)."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def medians(repeats: list[list[list[dict]]]) -> tuple[list[list[dict]], list[list[dict]]]:
    """Per job and rank, the median of every measured number over the repeats, and its spread ((max - min) / median)."""
    med, spread = [], []
    for job in range(len(repeats[0])):
        med.append([]), spread.append([])
        for rank in range(len(repeats[0][job])):
            runs = [rep[job][rank] for rep in repeats]
            row, wide = dict(runs[0]), {}
            for key, value in runs[0].items():
                if isinstance(value, float):
                    xs = [r[key] for r in runs]
                    row[key] = statistics.median(xs)
                    wide[key] = (max(xs) - min(xs)) / row[key] if row[key] else 0.0
                elif isinstance(value, bool):
                    row[key] = all(r[key] for r in runs)
            med[-1].append(row), spread[-1].append(wide)
    return med, spread


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    """The 25th, 50th and 75th percentiles of ``xs``."""
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return q[0], q[1], q[2]


def verdict(ratios: list[float]) -> str:
    """Ours against a split from per-round throughput ratios (ours / theirs): faster, slower, or equal within the
    spread (the middle half of the rounds holds 1)."""
    low, mid, high = quartiles(ratios)
    if low > 1.0:
        return "ours faster"
    if high < 1.0:
        return "ours slower"
    return "equal within the spread" + (" (median >= 1)" if mid >= 1.0 else " (median < 1)")


def trimmed(xs: list[float], cut: float = 0.25) -> float:
    """The mean of ``xs`` without its lowest and highest ``cut`` share (the interquartile mean at 0.25; all of ``xs``
    when that leaves none).

    >>> trimmed([1.0, 2.0, 3.0, 100.0]), trimmed([5.0])
    (2.5, 5.0)
    """
    ys = sorted(xs)
    k = int(cut * len(ys))
    middle = ys[k:len(ys) - k] or ys
    return sum(middle) / len(middle)


@dataclass(frozen=True)
class Compared:
    """Ours against one split over interleaved rounds (throughput ratios ours / theirs: their step time over ours):
    per round (``rounds``), of the fastest steps (``fastest``: the least disturbed by load) and of the trimmed means
    (``middle``); of the busiest rank's CPU time per micro-batch (``cpu``: the step of ranks that compute at once), and
    of the ranks' CPU times summed (``serial``: the step of ranks that take turns on a core, as on a loaded machine)."""

    rounds: list[float]
    fastest: float
    middle: float
    cpu: float
    serial: float = 1.0

    @staticmethod
    def of(mine: list[float], theirs: list[float], mine_cpu: list[float], theirs_cpu: list[float]) -> Compared:
        return Compared([t / m for m, t in zip(mine, theirs)], min(theirs) / min(mine), trimmed(theirs) / trimmed(mine),
                        max(theirs_cpu) / max(mine_cpu), sum(theirs_cpu) / sum(mine_cpu))

    @property
    def noise(self) -> float:
        """As a self-comparison (one split run twice): the largest distance from 1 of its fastest and trimmed ratios,
        the floor under which two splits' wall clocks do not differ."""
        return max(abs(self.fastest - 1.0), abs(self.middle - 1.0))

    def verdict(self, noise: float) -> str:
        """Faster or slower where the fastest steps' and the trimmed means' ratios both lie beyond ``noise`` (the
        self-comparison's) on one side of 1, else within it.

        >>> Compared([1.2], 1.15, 1.2, 1.3).verdict(0.05), Compared([1.2], 1.15, 0.98, 1.3).verdict(0.05)
        ('ours faster', 'within the noise (5.0%)')
        """
        if min(self.fastest, self.middle) > 1.0 + noise:
            return "ours faster"
        if max(self.fastest, self.middle) < 1.0 - noise:
            return "ours slower"
        return f"within the noise ({noise:.1%})"

    def cells(self) -> list[str]:
        low, mid, high = quartiles(self.rounds)
        return [f"{mid:.3f} [{low:.3f}, {high:.3f}] ({min(self.rounds):.3f}-{max(self.rounds):.3f})",
                f"{self.fastest:.3f}", f"{self.middle:.3f}", f"{self.cpu:.3f}", f"{self.serial:.3f}"]


def compared(rounds, mine: int, theirs: int, schedule: str) -> Compared:
    """:class:`Compared` of job ``mine`` against job ``theirs`` of ``rounds`` under ``schedule``."""
    return Compared.of(rounds.wall[(mine, schedule)], rounds.wall[(theirs, schedule)], rounds.cpu[(mine, schedule)],
                       rounds.cpu[(theirs, schedule)])


def round_fits(labelled, rounds, schedules, first: int = 0, link=None) -> list:
    """Each split's stages in the rounds (``labelled[k]`` is job ``first + k``): profiled (forward + backward) against
    measured (a rank's CPU ms per micro-batch less the idle stages'), with their op counts, their tensors' time at
    ``link`` (none without) and the schedule run."""
    return [f for j, (_, plan) in enumerate(labelled, start=first) for s in schedules
            for f in calibration([a + b for a, b in zip(plan.forward_ms, plan.backward_ms)],
                                 [c - i for c, i in zip(rounds.cpu[(j, s)], rounds.idle_cpu[s])], plan.ops,
                                 plan.link_ms(link), s)]


def fitted(fits, link, path: Path | None = None) -> RunCosts:
    """The calibration of ``fits``: the compute factor and the time per op and per stage (:func:`stage_costs_of`; after
    the stages' tensors at the ``link``, which are measured), each schedule's factor (:func:`schedule_scales`); with
    ``path``, as :func:`read_calibration` reads it back from the file :func:`write_calibration` wrote there (what
    ``import --calibration`` applies)."""
    costs = RunCosts.fitted(fits, link)
    if path is None:
        return costs
    write_calibration(costs, path, rp.KIND, note="bench_runtime.py --fair: CPU time per micro-batch")
    return read_calibration(path)[0]


def factors(costs: RunCosts) -> str:
    """Each schedule's compute factor, as one cell (``x1.234 / 1.111 (gpipe / 1f1b)``)."""
    return f"x{' / '.join(f'{c:.3f}' for _, c in costs.scales)} ({' / '.join(s for s, _ in costs.scales)})"


def out_of_sample(labelled, rounds, schedules, small, small_rounds, link) -> str:
    """The calibration fitted on our split's stages alone (at both sizes) and on the lopsided split's at the second
    (the first module alone on a stage, the last of ``small``: the calibration :mod:`run_pipeline` fits, whose stages
    of few and of many ops tell the time per stage from the time per op), and the largest residual it leaves on each
    other split's stages, which the fit did not see; beside it, on the same stages, the same fit on our split's
    stages alone (whose like op counts leave the two times apart unknown), the factors fitted after one factor, the
    time per op and per stage (:func:`sequential`) and the former calibration (one compute factor for every schedule,
    the stages' tensors left to the fit); then every stage of the other splits: its measured time and residual with
    and without the lopsided split, and what it holds (profiled ms, ops, ms at the link)."""
    cells, fits_of = [], {}
    for way in ("joint", "ours alone", "sequential", "one"):
        with_link = None if way == "one" else link
        mine = [*round_fits(labelled[:1], rounds, schedules, link=with_link),
                *round_fits(small[:1], small_rounds, ["1f1b"], link=with_link)]
        if way != "ours alone":
            mine += round_fits(small[-1:], small_rounds, ["1f1b"], len(small) - 1, with_link)
        if way in ("joint", "ours alone"):
            costs = fitted(mine, link)
        elif way == "sequential":
            costs = sequential(mine, link)
        else:
            c, op_ms, fixed = stage_costs_of(mine)
            costs = RunCosts(c, stage_ms=fixed, op_ms=op_ms)
        fits_of[way] = costs
        cells.append(", ".join(
            f"{label} {worst(round_fits([(label, plan)], rounds, schedules, j, with_link), costs):.1%}"
            + (" (the same split)" if plan.split_spec == labelled[0][1].split_spec else "")
            for j, (label, plan) in enumerate(labelled[1:], start=1)))
    joint, alone = fits_of["joint"], fits_of["ours alone"]
    terms = f"{factors(joint)} + {joint.op_ms:.4f} ms per op + {joint.stage_ms:.3f} ms + the link"
    stages = []
    for j, (label, plan) in enumerate(labelled[1:], start=1):
        fits = round_fits([(label, plan)], rounds, schedules, j, link)
        stages += [f"{label} {f.schedule} s{f.stage} {f.measured_ms:.2f} ms: {a.residual:+.1%} / {b.residual:+.1%} "
                   f"({f.predicted_ms:.2f} ms, {f.ops} ops, {f.comm_ms:.2f} ms)"
                   for f, a, b in zip(fits, calibrated(fits, joint), calibrated(fits, alone))]
    ops = "/".join(str(p.ops[k]) for p in (small[0][1], small[-1][1]) for k in range(len(p.ops)))
    return (f"fitted on ours' stages and the lopsided split's ({terms}; ops per stage, ours then lopsided: {ops}), the "
            f"largest residual out of sample: {cells[0]} (on ours' stages alone, {alone.op_ms:.4f} ms per op + "
            f"{alone.stage_ms:.3f} ms: {cells[1]}; the factors fitted after one: {cells[2]}; one factor, the link "
            f"fitted in: {cells[3]}); per stage, measured: residual with / without the lopsided split (profiled, "
            f"ops, link): {'; '.join(stages)}")


def sequential(fits, link) -> RunCosts:
    """The calibration as fitted before the factors were fitted with the time per op and per stage: one factor, the
    time per op and per stage first (:func:`stage_costs_of`), then each schedule's factor with those held."""
    c, op_ms, fixed = stage_costs_of(fits)
    return RunCosts(c, link, stage_ms=fixed, op_ms=op_ms, scales=tuple(schedule_scales(fits, op_ms, fixed).items()))


def fair_costs(labelled, rounds, schedules, link, microbatch: int, microbatches: int, extra=(),
               path: Path | None = None, stage_link=None) -> dict[str, object]:
    """Per schedule, the costs that predict a step from the CPU time the ranks spent in the rounds: the compute factor,
    a stage's fixed time per op and per micro-batch fitted over the three splits' stages (:func:`round_fits`, with
    ``extra`` fits: the splits at a second micro-batch size; :func:`placement_dsl.profile.stage_costs_of`), the
    per-task overhead read from the idle stages' CPU time, the measured link, no slowdown (a prediction of the CPU's
    step, as on an idle machine); and ``(schedule, "wall")``: the same with the per-task overhead read from the idle
    stages' wall clock (on a loaded machine, a rank's wait to run again after each blocking receive) and the ranks'
    measured slowdown; the stages' tensors at ``stage_link`` (the link in the ranks' CPU time; default ``link``).
    ``"file"``: the calibration, each schedule's factor apart, as read back from ``path``
    (:func:`fitted`); every schedule's costs are its (:meth:`RunCosts.under`)."""
    fits = round_fits(labelled, rounds, schedules, link=stage_link or link)
    cal = fitted([*fits, *extra], link, path)
    out: dict[str, object] = {"fits": fits, "extra": list(extra), "file": cal}
    for s in schedules:
        o = runtime_overhead(max(rounds.idle_cpu[s]), s, microbatches, stages=2, ranks=2,
                             message_bytes=4.0 * rp.IDLE_FEATURES * microbatch, link=link)
        out[s] = replace(cal.under(s), overhead_ms=o)
        o = runtime_overhead(statistics.median(rounds.idle_wall[s]), s, microbatches, stages=2, ranks=2,
                             message_bytes=4.0 * rp.IDLE_FEATURES * microbatch, link=link)
        out[(s, "wall")] = replace(cal.under(s), overhead_ms=o, slowdown=statistics.mean(rounds.slowdown))
    return out


def worst(fits, scale: float | dict[str, float] | RunCosts, fixed: float = 0.0, op_ms: float = 0.0) -> float:
    """The largest residual of ``fits`` calibrated so."""
    return max(abs(f.residual) for f in calibrated(fits, scale, fixed, op_ms))


def fairness(args) -> None:
    """Ours against even and ``parameters`` measured in interleaved rounds: per model, the splits' steps of each
    schedule run in turn (A B C A', A' C B A, ...) in one process group, A' our split again (a stage of its own),
    so load that changes over minutes moves every split alike. Per pair, the per-round throughput ratios ours /
    theirs, the ratio of the splits' fastest steps (the least disturbed by load) and of their trimmed means, and
    the same of ours against A' (the self-comparison): how far apart one split measures against itself, the noise
    floor a verdict must clear. Beside the wall clock, the ratio of the busiest rank's CPU time per micro-batch
    (what the load does not change), and two predictions: the profile's (the simulator on the profiled times
    alone) and the calibrated one (:func:`fair_costs`). Then the split the search chooses on the calibrated costs
    (:func:`run_pipeline.place` with them); where it is none of the three, it runs against ours and
    ``parameters`` in rounds of its own, with its own self-comparison."""
    microbatch, microbatches = (2, 4) if args.quick else (4, 8)
    schedules = list(rp.SCHEDULES)
    rp.torch.set_num_threads(1)
    link, stage_link = ping_pong(repeat=5), ping_pong(repeat=5, clock="cpu")
    print(f"load at start: {load()}; {args.fair} rounds per model, micro-batch {microbatch}, {microbatches} "
          "micro-batches, 2 CPU ranks (gloo, 1 thread each); ratio = ours' throughput / theirs (their step time over "
          f"ours); link {link.latency_ms:.3f} ms + bytes / {link.bandwidth:.4g} per ms (wall clock), "
          f"{stage_link.latency_ms:.3f} ms + bytes / {stage_link.bandwidth:.4g} per ms (a rank's CPU time: the stages')")
    rows, moved = [], []
    for name in args.models.split(","):
        imported = imports(name, microbatch, args.quick)
        labelled = plans(name, microbatch, microbatches, args.quick, imported)
        before = load()
        rounds = measure([*labelled, ("ours again", labelled[0][1])], schedules, microbatch, microbatches, args)
        mine, lopsided = rp.small_plans(name, labelled[0][1], args.quick)  # ours and the lopsided split, one profile
        small = [mine, *(rp.small_plan(name, plan, args.quick) for _, plan in labelled[1:]), lopsided]
        small_rounds = rp.interleaved_rounds([job for _, job in small], args.quick, max(2, args.fair // 2))  # 1F1B
        after = load()
        smalls = [(label, plan) for label, (plan, _) in zip([*(label for label, _ in labelled), "lopsided"], small)]
        extra = round_fits(smalls, small_rounds, ["1f1b"], link=stage_link)
        costs = fair_costs(labelled, rounds, schedules, link, microbatch, microbatches, extra,
                           Path(args.calibration_dir, f"{name}.json"), stage_link)
        print(fit_line(name, labelled, costs, extra, microbatch), flush=True)
        print(f"{name}: {out_of_sample(labelled, rounds, schedules, smalls, small_rounds, stage_link)}", flush=True)
        rows += pair_rows(name, labelled, rounds, costs, schedules, f"{before.split()[0]}-{after.split()[0]}")
        again = rp.plan_for(rp.place(imported[1], imported[0], costs=costs["file"]), imported[0], microbatches,
                            microbatch)
        same = [label for label, plan in labelled if plan.split_spec == again.split_spec]
        one = costs["1f1b"]
        print(f"{name}: the search on the calibrated costs (1F1B's x{one.scale:.3f} + {one.op_ms:.4f} "
              f"ms per op, {costs['1f1b'].task_ms:.3f} ms per stage pass) cuts at {','.join(again.split_spec)}: "
              f"{'the same split as ' + ' = '.join(same) if same else 'a split of its own, measured below'}", flush=True)
        if not same:
            mine = [("calibrated", again), labelled[0], labelled[2], ("calibrated again", again)]
            before = load()
            second = measure(mine, schedules, microbatch, microbatches, args)
            moved += pair_rows(name, mine[:3], second, costs, schedules, f"{before.split()[0]}-{load().split()[0]}",
                               mine="calibrated")
    head = ["model", "schedule"]
    for label in ("even", "parameters"):
        head += [f"ours/{label} wall per round median [IQR] (range)", "fastest", "trimmed", "CPU busiest rank",
                 "CPU both ranks",
                 "predicted as profiled", "predicted calibrated CPU / wall", "verdict"]
    head += ["ours/ours per round median [IQR] (range)", "fastest", "trimmed", "noise floor",
             "ours step ms/mb measured", "predicted (wall)", "ms per task (idle, wall)", "slowdown", "rounds",
             "load (1 min) before-after"]
    print()
    markdown_head(head)
    for row in rows:
        markdown_row(row)
    if moved:
        print("\nthe split chosen on the calibrated costs against ours and parameters (the same columns)\n")
        markdown_head([h.replace("ours/even", "calibrated/ours").replace("ours/parameters", "calibrated/parameters")
                       .replace("ours/ours", "calibrated/calibrated").replace("ours step", "calibrated step")
                       for h in head])
        for row in moved:
            markdown_row(row)


def measure(labelled, schedules, microbatch: int, microbatches: int, args):
    """The interleaved rounds of ``labelled``'s splits (:func:`run_pipeline.interleaved_rounds`)."""
    jobs = [{"model": plan.name, "split_spec": plan.split_spec, "schedules": schedules, "microbatch": microbatch,
             "microbatches": microbatches} for _, plan in labelled]
    return rp.interleaved_rounds(jobs, args.quick, args.fair)


def fit_line(name: str, labelled, costs, extra, microbatch: int) -> str:
    """The calibration fitted on the three splits' stages at two sizes, and its residuals, as one line; beside it the
    former calibration (one compute factor, the stages' tensors at the link left to the fit) and simpler ones, on the
    same stages."""
    cal, fits = costs["file"], costs["fits"]
    bare, bare_extra = ([replace(f, comm_ms=0.0) for f in xs] for xs in (fits, extra))
    both = [*bare, *bare_extra]
    c, op_ms, fixed = stage_costs_of(both)
    first = sequential([*fits, *extra], cal.link)
    return (f"{name}: ours {','.join(labelled[0][1].split_spec)}; even {','.join(labelled[1][1].split_spec)}; "
            f"parameters {','.join(labelled[2][1].split_spec)}; stages (CPU ms per micro-batch in the steps, less "
            f"the idle stages', at {microbatch} and {rp.SMALL} samples per micro-batch) = {factors(cal)} "
            f"profiled + {cal.op_ms:.4f} ms per op + {cal.stage_ms:.3f} ms + the stage's "
            f"tensors at the link (read back from the calibration file): largest residual at {microbatch} "
            f"{worst(fits, cal):.1%}, at {rp.SMALL} {worst(extra[:-2], cal):.1%} (the lopsided split's stages, the "
            f"first module alone, {worst(extra[-2:], cal):.1%}); the factors fitted after one "
            f"{worst(fits, first):.1%} and {worst(extra, first):.1%}; the former calibration (x{c:.3f} + "
            f"{op_ms:.4f} ms per op + {fixed:.3f} ms, the link fitted in) {worst(bare, c, fixed, op_ms):.1%} and "
            f"{worst(bare_extra, c, fixed, op_ms):.1%}; with a factor and a time per stage "
            f"{worst(bare, *affine_of(bare)):.1%} (fitted at {microbatch} alone), "
            f"{worst(both, *affine_of(both)):.1%} and {worst(bare_extra, *affine_of(both)):.1%} (at both); the factor "
            f"alone {worst(bare, scale_of(bare)):.1%}, as profiled {worst(bare, 1.0):.1%}; over {len(fits)} + "
            f"{len(extra)} stages")


def pair_rows(name: str, labelled, rounds, costs, schedules, loads: str, mine: str = "ours") -> list[list[str]]:
    """Per schedule, job 0 (``mine``) against jobs 1 and 2 and against job 3 (itself again: the noise floor)."""
    rows = []
    for s in schedules:
        ours, row = labelled[0][1], [name, s]
        self_ = compared(rounds, 0, 3, s)
        for j, (label, plan) in enumerate(labelled[1:3], start=1):
            pair = compared(rounds, 0, j, s)
            tuned, wall = (plan.step_with(c, s) / ours.step_with(c, s) for c in (costs[s], costs[(s, "wall")]))
            row += [*pair.cells(), f"{plan.step_ms[s] / ours.step_ms[s]:.3f}", f"{tuned:.3f} / {wall:.3f}",
                    f"the same split ({label} = {mine})" if plan.split_spec == ours.split_spec
                    else pair.verdict(self_.noise)]
        wall_costs = costs[(s, "wall")]
        row += [*self_.cells()[:3], f"{self_.noise:.1%}", f"{statistics.median(rounds.wall[(0, s)]):.2f}",
                f"{ours.step_with(wall_costs, s):.2f}", f"{wall_costs.overhead_ms:.2f}", f"{wall_costs.slowdown:.2f}",
                str(len(rounds.wall[(0, s)])), loads]
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the test's small models and few steps")
    ap.add_argument("--models", default="gpt,cnn,gpt-vocab,cnn-mobile")
    ap.add_argument("--repeats", type=int, default=3, help="runs of every job; medians and spread over them")
    ap.add_argument("--no-virtual", dest="virtual", action="store_false",
                    help="skip the interleaved 1F1B, ZB-H1 and ZBV rows")
    ap.add_argument("--virtual-width", type=int, default=1024, help="the interleaved run's block width (not --quick)")
    ap.add_argument("--virtual-microbatch", type=int, default=32,
                    help="the interleaved run's samples per micro-batch (not --quick)")
    ap.add_argument("--fair", type=int, default=0, metavar="ROUNDS",
                    help="only ours against even and parameters, in ROUNDS interleaved rounds per model")
    ap.add_argument("--calibration-dir", metavar="DIR",
                    help="--fair: write each model's calibration there as MODEL.json; else the calibration with the "
                         "interleaved schedules' factors as calibration.json (default: a temporary directory); the "
                         "predictions read it back")
    args = ap.parse_args()
    if args.fair:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            args.calibration_dir = args.calibration_dir or tmp
            Path(args.calibration_dir).mkdir(parents=True, exist_ok=True)
            fairness(args)
        print(f"\n{time.perf_counter() - start:.0f} s, load at end: {load()}")
        return
    microbatch, microbatches = (2, 4) if args.quick else (4, 8)
    schedules = list(rp.SCHEDULES)
    start = time.perf_counter()
    print(f"load at start: {load()}")
    rp.torch.set_num_threads(1)
    link = ping_pong(repeat=5 if args.quick else 20)
    stage_link = ping_pong(repeat=5 if args.quick else 20, clock="cpu")
    print(f"link (gloo ping-pong, 2 processes), wall clock: {link.latency_ms:.3f} ms + bytes / {link.bandwidth:.4g} per "
          f"ms; one-way ms by bytes: {', '.join(f'{b}: {t:.3f}' for b, t in link.samples)}; in a rank's CPU time (as "
          f"the stages are timed): {stage_link.latency_ms:.3f} ms + bytes / {stage_link.bandwidth:.4g} per ms; by bytes: "
          f"{', '.join(f'{b}: {t:.3f}' for b, t in stage_link.samples)}")
    runs = [(name, label, plan) for name in args.models.split(",")
            for label, plan in plans(name, microbatch, microbatches, args.quick)]
    jobs = [{"model": name, "split_spec": plan.split_spec, "schedules": schedules, "microbatch": microbatch,
             "microbatches": microbatches, "steps": 3 if args.quick else 6, "repeat": 10 if args.quick else 20}
            for name, _, plan in runs]
    fitted = [i for i, (_, label, _) in enumerate(runs) if label == "ours"]
    small = [x for i in fitted for x in rp.small_plans(runs[i][0], runs[i][2], args.quick)]  # at a second size
    repeats = []
    for k in range(args.repeats):
        repeats.append(rp.execute(jobs + [job for _, job in small], args.quick))
        print(f"repeat {k + 1} of {args.repeats} done, load {load()}")
    results, spread = medians(repeats)
    small_results, results = results[len(runs):], results[:len(runs)]
    fitted_plans = [runs[i][2] for i in fitted] + [p for p, _ in small]
    fitted_runs = [results[i] for i in fitted] + small_results
    costs = rp.calibrate(fitted_plans, fitted_runs, link, stage_link)  # one over the models (the virtual rows')
    models = list(dict.fromkeys(name for name, _, _ in runs))
    own = {m: rp.calibrate(*zip(*[(p, r) for p, r in zip(fitted_plans, fitted_runs) if p.name == m]), link, stage_link)
           for m in models}  # each model's: their factors differ by a third (cnn-mobile's against gpt-vocab's)
    before = rp.calibrate(fitted_plans, fitted_runs, link, relative=False)  # one, absolute ms, the wall-clock link
    if args.calibration_dir:  # every stage measured, for refitting apart from the run
        stages = {f"{name} {label}": [asdict(f) for s in rp.ran(ranks[0]) for f in rp.stage_fits(plan, ranks, stage_link, s)]
                  for (name, label, plan), ranks in zip(runs, results)}
        stages.update({f"{plan.name} {what} at {rp.SMALL}": [asdict(f) for f in rp.stage_fits(plan, ranks, stage_link, "1f1b")]
                       for ((plan, _), ranks), what in zip(zip(small, small_results), ["ours", "lopsided"] * len(fitted))})
        Path(args.calibration_dir).mkdir(parents=True, exist_ok=True)
        Path(args.calibration_dir, "stages.json").write_text(json.dumps(stages, indent=1))
    affine = affine_of([f for i in fitted for f in rp.stage_fits(runs[i][2], results[i])])
    print(f"\nmicro-batch {microbatch}, {microbatches} micro-batches per step, 2 CPU ranks (gloo, 1 thread each); "
          f"medians of {args.repeats} runs (spread: (max - min) / median, largest over ranks)\n"
          f"fitted, on the 'ours' rows' stages, and at {rp.SMALL} samples per micro-batch ours' and a lopsided "
          f"split's (the first module alone; CPU time in the steps, less the idle stages'), each model's own "
          f"(below), their relative residuals: compute, a time per op and per stage and micro-batch; measured: the link, and "
          "per row and schedule the step of idle stages beside each step (-> ms per task) and the ranks' wall-clock "
          "slowdown; every step is a prediction\n")
    markdown_head(["model", "split", "split point", "stage ms predicted (cal.)", "stage ms measured",
                   "stage residual", "stage spread", "schedule", "idle step ms/mb", "ms per task", "slowdown",
                   "step ms/mb predicted", "step ms/mb measured", "step residual", "step spread",
                   "samples/s measured"])
    for (name, label, plan), ranks, wide in zip(runs, results, spread):
        stage_spread = max(max(w.get("forward_ms", 0.0), w.get("backward_ms", 0.0)) for w in wide)
        for s in schedules:
            cal = calibrated(rp.stage_fits(plan, ranks, stage_link, s), own[name])
            measured = max(r[f"{s}_step_ms"] for r in ranks)
            mine = rp.run_costs(own[name], ranks, s, plan)
            want = plan.step_with(mine, s)
            markdown_row([name, label, ",".join(plan.split_spec), " / ".join(fmt(f.predicted_ms) for f in cal),
                          " / ".join(fmt(f.measured_ms) for f in cal),
                          " / ".join(fmt(100 * f.residual, ".1f") + "%" for f in cal),
                          fmt(100 * stage_spread, ".0f") + "%", s,
                          fmt(max(r[f"{s}_idle_ms"] for r in ranks)), fmt(mine.overhead_ms), fmt(mine.slowdown, ".2f"),
                          fmt(want), fmt(measured), fmt(100 * (measured - want) / measured, ".1f") + "%",
                          fmt(100 * max(w[f"{s}_step_ms"] for w in wide), ".0f") + "%",
                          fmt(1e3 * microbatch / measured, ".1f")])
            assert ranks[-1][f"{s}_allclose"], f"{name} {label} {s}: the output differs from the unsplit model"
    print()
    print("each model's own calibration (the stages' relative residuals fitted, their tensors at the link in the "
          "ranks' CPU time): " + "; ".join(f"{m} {factors(c)} + {c.op_ms:.4f} ms per op + {c.stage_ms:.3f} ms"
                                            for m, c in own.items()))
    for line in residuals(runs, results, own, affine, small, small_results, stage_link):
        print(line)
    one = (f"one calibration over the models, so ({factors(costs)} + {costs.op_ms:.4f} ms per op + "
           f"{costs.stage_ms:.3f} ms)")
    old = (f"the calibration before: one over the models, their absolute ms fitted, their tensors at the wall-clock "
           f"link ({factors(before)} + {before.op_ms:.4f} ms per op + {before.stage_ms:.3f} ms)")
    for title, cal, at in ((one, costs, stage_link), (old, before, link)):
        print(f"{title}:")
        for line in residuals(runs, results, cal, affine, small, small_results, at):
            print(line)
    for line in rankings(runs, results, own, schedules):
        print(line)
    if args.virtual:
        if not args.quick:  # compute beyond the runtime's work per action, so that each schedule's factor is measured
            ri.WIDTH, ri.MICROBATCH = args.virtual_width, args.virtual_microbatch
        with tempfile.TemporaryDirectory() as tmp:
            virtual_rows(costs, Path(args.calibration_dir or tmp, "calibration.json"))
    print(f"\n{time.perf_counter() - start:.0f} s, load at end: {load()}")


def residuals(runs, results, costs, affine, small, small_results, link) -> list[str]:
    """Per model, the largest stage residual of our split and of the lopsided one at ``SMALL`` (in sample: fitted on)
    and of the others (out of sample), calibrated with the time per op and with a factor and a time per stage fitted
    on our split at one size alone (``affine``); the stages' tensors at ``link``; the lopsided split's stages one by
    one (its first, the first module alone, sends the model's largest tensor)."""
    lines, every = [], costs
    for name in dict.fromkeys(n for n, _, _ in runs):
        costs = every[name] if isinstance(every, dict) else every  # each model's calibration, or one for all
        cells = []
        for label in dict.fromkeys(lb for _, lb, _ in runs):
            mine = [(plan, ranks) for (n, lb, plan), ranks in zip(runs, results) if (n, lb) == (name, label)]
            fits = [f for plan, ranks in mine for s in rp.ran(ranks[0])
                    for f in rp.stage_fits(plan, ranks, link, s)]
            bare = [f for plan, ranks in mine for f in rp.stage_fits(plan, ranks)]
            cells.append(f"{label} {worst(fits, costs):.1%} "
                         f"({worst(bare, *affine):.1%})")
        mine = [(plan, ranks) for (plan, _), ranks in zip(small, small_results) if plan.name == name]
        for what, (plan, ranks) in zip(("ours", "lopsided"), mine):
            fits, bare = rp.stage_fits(plan, ranks, link, "1f1b"), rp.stage_fits(plan, ranks)
            each = " / ".join(f"{f.residual:+.1%}" for f in calibrated(fits, costs))
            cells.append(f"{what} (cut at {','.join(plan.split_spec)}) at {rp.SMALL} per micro-batch "
                         f"{worst(fits, costs):.1%} ({worst(bare, *affine):.1%}; stages {each}, at the link "
                         f"{' / '.join(f'{f.comm_ms:.3f}' for f in fits)} ms)")
        lines.append(f"{name}: largest stage residual, calibrated with the time per op (with a factor and a time per "
                     f"stage fitted on ours at one size): {'; '.join(cells)}")
    return lines


def rankings(runs, results, costs, schedules) -> list[str]:
    """Per model and schedule: the splits ranked by predicted and by measured step (the faster first), naming the
    splits that cut at the same point (one split run more than once: their differences are the machine's). The
    predictions share one overhead and slowdown per model and schedule (the medians of its rows), so that they rank
    the splits as the cost model does, not as the load varied between their runs."""
    lines, every = [], costs
    for name in dict.fromkeys(n for n, _, _ in runs):
        costs = every[name] if isinstance(every, dict) else every  # each model's calibration, or one for all
        mine = [(label, plan, ranks) for (n, label, plan), ranks in zip(runs, results) if n == name]
        points: dict[str, list[str]] = {}
        for label, plan, _ in mine:
            points.setdefault(",".join(plan.split_spec), []).append(label)
        same = [f"{' = '.join(labels)} (cut at {point})" for point, labels in points.items() if len(labels) > 1]
        if same:
            lines.append(f"{name}: the same split: {'; '.join(same)}")
        for s in schedules:
            each = [rp.run_costs(costs, ranks, s, plan) for _, plan, ranks in mine]
            shared = replace(costs, overhead_ms=statistics.median(c.overhead_ms for c in each),
                             slowdown=statistics.median(c.slowdown for c in each))
            pred = sorted(mine, key=lambda x: x[1].step_with(shared, s))
            meas = sorted(mine, key=lambda x: max(r[f"{s}_step_ms"] for r in x[2]))
            lines.append(f"{name} {s}: predicted fastest first {' < '.join(x[0] for x in pred)} "
                         f"({', '.join(f'{x[0]} {x[1].step_with(shared, s):.2f}' for x in pred)} ms/mb); measured "
                         f"{' < '.join(x[0] for x in meas)}")
    return lines


def virtual_rows(costs, path: Path) -> None:
    """Interleaved 1F1B, ZB-H1 and ZBV over 4 virtual stages on 2 ranks, run from the exported CSV: the compute factor
    fitted above, the link, and the overhead and slowdown measured beside the run itself (none fitted here); then
    each schedule's own factor, written with the calibration above to ``path`` and read back, and the step predicted
    from that file against the measured one."""
    if path.parent:
        path.parent.mkdir(parents=True, exist_ok=True)
    split, results = ri.run(costs, path, "bench_runtime.py: the GPipe and 1F1B calibration of the example models, "
                                         "the interleaved schedules' factors of run_interleaved's MLP")
    print(f"\nvirtual stages: {ri.__name__}'s MLP of width {ri.WIDTH}, micro-batch {ri.MICROBATCH}, "
          f"{ri.MICROBATCHES} micro-batches, "
          f"split {','.join(split)}, stage k on rank k mod {ri.RANKS} (zbv: k and 3 - k); compute x{costs.scale:.3f} "
          "(fitted above over the schedules; each of these runs its own factor where the calibration holds one), "
          "overhead and slowdown measured beside each step\n")
    markdown_head(["schedule", "output and gradients as unsplit", "step ms/mb as profiled (no runtime cost)",
                   "idle step ms/mb", "ms per task", "slowdown", "step ms/mb predicted", "step ms/mb measured",
                   "step residual", "its own compute factor (ranks' CPU)", "rank residuals at it",
                   "step ms/mb predicted at it", "step residual at it", "factor in the file",
                   "step ms/mb predicted from the file", "step residual from the file"])
    for name, r in results.items():
        residual = (r["measured_ms"] - r["predicted_ms"]) / r["measured_ms"]
        own = (r["measured_ms"] - r["predicted_own_ms"]) / r["measured_ms"]
        ranks = calibrated(r["fits"], {name: r["factor"] or r["file_factor"]}, costs.stage_ms, costs.op_ms)
        markdown_row([name, str(r["output"] and r["grads"]), fmt(r["profiled_ms"]), fmt(r["idle_ms"]),
                      fmt(r["overhead_ms"]), fmt(r["slowdown"], ".2f"), fmt(r["predicted_ms"]),
                      fmt(r["measured_ms"]), fmt(100 * residual, ".1f") + "%", ri.factor_text(r),
                      " / ".join(fmt(100 * f.residual, ".1f") + "%" for f in ranks), fmt(r["predicted_own_ms"]),
                      fmt(100 * own, ".1f") + "%", f"x{r['file_factor']:.3f}", fmt(r["predicted_file_ms"]),
                      fmt(100 * (r["measured_ms"] - r["predicted_file_ms"]) / r["measured_ms"], ".1f") + "%"])
    print(f"\nwrote {path}: the calibration above with {', '.join(results)}'s factors (read back: "
          f"{factors(read_calibration(path)[0])})")


if __name__ == "__main__":
    main()
