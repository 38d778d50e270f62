"""The exported split runs in torch.distributed.pipelining: two CPU ranks, GPipe and 1F1B, and the exported
schedule CSV run by torch's schedule runtime; outputs as unsplit.

``examples/run_pipeline.py --quick`` profiles, imports (torch.export), places and exports a small
GPT and a small ResNet-style CNN, then runs each split on 2 gloo processes; it exits non-zero when
torch refuses the split, when a split point names no module or when an output differs.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "run_pipeline.py"


@pytest.fixture(scope="module")
def run_pipeline():
    """The example as a module (its models, plan and runtime)."""
    pytest.importorskip("torch")
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        import run_pipeline as module
        yield module
    finally:
        sys.path.remove(str(EXAMPLE.parent))


def test_example_runs_both_models_and_schedules(tmp_path):
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(EXAMPLE), "--quick", "--calibration-out", "cal.json"], cwd=tmp_path, env=env, capture_output=True, check=False,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"^gpt: split_spec \{'h\.\d': 'beginning'\}$", out, flags=re.MULTILINE), out
    assert re.search(r"^cnn: split_spec \{'blocks\.\d': 'beginning'\}$", out, flags=re.MULTILINE), out
    for model in ("gpt", "cnn"):
        for schedule in ("gpipe", "1f1b", "csv-1f1b", "csv-gpipe"):
            assert f"{model} {schedule}: output matches the unsplit model: True" in out, out
            assert re.search(rf"^{model} {schedule}: step per micro-batch predicted \d+\.\d+ ms .*; idle stages "
                             r"\d+\.\d+ ms: \d+\.\d+ ms per task, slowdown x\d+\.\d+ \(measured\)$", out, flags=re.MULTILINE)
        assert len(re.findall(rf"(?s){model}: time per micro-batch per stage.*?stage 1 ", out)) == 1
    assert re.search(r"^calibration: compute x\d+\.\d+ \(gpipe x\d+\.\d+, 1f1b x\d+\.\d+\) \+ \d+\.\d+ ms per op \+ \d+\.\d+ ms per stage and micro-batch "
                     r"\(fitted on the stages at 2 and 1 samples per micro-batch\)", out, flags=re.MULTILINE), out
    for model in ("gpt", "cnn"):  # the second placement, on the calibrated costs
        assert re.search(rf"^{model}: re-placed on the calibrated costs: split_spec \{{'\w+\.\d': 'beginning'\}} "
                         r"\((the same split|moved from \[.*\])\); slower stage predicted \d+\.\d+ ms", out,
                         flags=re.MULTILINE), out
    from placement_dsl.profile import read_calibration

    costs, kind = read_calibration(tmp_path / "cal.json")  # what import --calibration reads
    assert kind == "accelerator" and costs.scale > 0 and costs.overhead_ms > 0
    assert [s for s, _ in costs.scales] == ["gpipe", "1f1b"] and all(c > 0 for _, c in costs.scales)
    assert out.rstrip().endswith("all outputs match the unsplit models")


def test_plan_is_two_stages_between_blocks(run_pipeline):
    rows = run_pipeline.profiled("gpt", 2, True)
    graph = run_pipeline.workload_graph("gpt", 2, True, rows)
    plan = run_pipeline.plan_for(run_pipeline.place(graph, rows), rows, 4)
    (point,) = plan.split_spec
    assert re.fullmatch(r"h\.[1-3]", point)
    assert len(plan.forward_ms) == len(plan.backward_ms) == 2 and min(plan.forward_ms) > 0
    assert plan.step_ms["gpipe"] >= plan.step_ms["1f1b"] * (1 - 1e-9) > 0  # GPipe's flush: never faster
    from placement_dsl.profile import LinkTime, RunCosts

    same = RunCosts(1.0, LinkTime(0.0, run_pipeline.BANDWIDTH), 0.0)  # the plan's own devices and cost model
    assert plan.step_with(same, "1f1b") == pytest.approx(plan.step_ms["1f1b"])
    slower = RunCosts(2.0, LinkTime(0.1, run_pipeline.BANDWIDTH), 1.0)
    assert plan.step_with(slower, "csv-gpipe") == plan.step_with(slower, "gpipe") > 2 * plan.step_ms["gpipe"] + 1.0


def test_split_naming_no_module_is_refused(run_pipeline):
    job = {"model": "gpt", "split_spec": {"h.9": "beginning"}, "microbatches": 2, "microbatch": 1}
    with pytest.raises(SystemExit, match=r"names no module of the model: \['h\.9'\]"):
        run_pipeline.prepare(job, True, 2)


def test_split_torch_cannot_make_two_stages_of_is_refused(run_pipeline):
    job = {"model": "cnn", "split_spec": {}, "microbatches": 2, "microbatch": 1}
    with pytest.raises(SystemExit, match="torch split it into 1 stages, not 2"):
        run_pipeline.prepare(job, True, 2)


def test_example_runs_a_vision_transformer(tmp_path):
    """The ViT family: patch embedding, full-attention blocks ``blocks.N``, split between blocks, every schedule."""
    pytest.importorskip("torch")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(EXAMPLE), "--quick", "--models", "vit"], cwd=tmp_path, env=env,
                          capture_output=True, check=False, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert re.search(r"^vit: split_spec \{'blocks\.\d': 'beginning'\}$", out, flags=re.MULTILINE), out
    for schedule in ("gpipe", "1f1b", "csv-1f1b", "csv-gpipe"):
        assert f"vit {schedule}: output matches the unsplit model: True" in out, out
    assert out.rstrip().endswith("all outputs match the unsplit models")


def test_busy_slowdown_is_wall_clock_over_cpu_time(run_pipeline):
    """Work that sleeps half its time runs at about half a core: a slowdown near 2 (at least 1.5 on a loaded
    machine, where the spin's own wall clock only grows)."""
    import time

    def half_asleep():
        start = time.process_time()
        while time.process_time() - start < 0.005:
            pass
        time.sleep(0.005)

    assert run_pipeline.busy_slowdown(half_asleep, 4) >= 1.5


def test_run_costs_read_the_overhead_from_the_idle_step_and_fit_nothing(run_pipeline):
    """A run's costs: the base's compute factor and link, the overhead at which the simulator's idle pipeline
    gives the idle step measured, and the mean of the ranks' slowdowns; the model's own step is not read."""
    from placement_dsl.profile import LinkTime, RunCosts, runtime_overhead

    rows = run_pipeline.profiled("gpt", 2, True)
    plan = run_pipeline.plan_for(run_pipeline.place(run_pipeline.workload_graph("gpt", 2, True, rows), rows), rows,
                                 4, 2)
    base = RunCosts(1.5, LinkTime(0.1, 1e6), stage_ms=0.75)
    ranks = [{"1f1b_idle_ms": 3.0, "1f1b_slowdown": 2.0, "1f1b_step_ms": 1e9},
             {"1f1b_idle_ms": 4.0, "1f1b_slowdown": 3.0, "1f1b_step_ms": 1e9}]
    costs = run_pipeline.run_costs(base, ranks, "1f1b", plan)
    want = runtime_overhead(4.0, "1f1b", 4, stages=2, ranks=2, message_bytes=4.0 * run_pipeline.IDLE_FEATURES * 2,
                            link=base.link)
    assert (costs.scale, costs.link, costs.slowdown, costs.stage_ms) == (1.5, base.link, 2.5, 0.75)
    assert costs.overhead_ms == pytest.approx(want) and 0 < want < 4.0 / 2


@pytest.mark.parametrize("pipelined", [False, True])
def test_modules_are_profiled_as_the_switch_says(run_pipeline, monkeypatch, pipelined):
    """The stage times are predicted from a profile on one thread in CPU time, of the eager modules or (``PIPELINED``)
    of the modules inside ``pipeline()``'s stage module (interpreted ``torch.export`` submodules, as the ranks run
    them)."""
    seen = {}

    def fake(model, args, **options):
        seen.update(options, batch=len(args[0]))
        return []

    monkeypatch.setattr(run_pipeline, "profile_module", fake)
    monkeypatch.setattr(run_pipeline, "PIPELINED", pipelined)
    run_pipeline.profiled("gpt", 2, True)
    assert seen["pipelined"] is pipelined and seen["clock"] == "cpu" and seen["depth"] == run_pipeline.DEPTH
    assert seen["batch"] == 2


def test_the_split_is_calibrated_at_a_second_microbatch_size(run_pipeline, monkeypatch):
    """The calibration's second size: the same split points, profiled at ``SMALL`` samples per micro-batch (less
    compute per stage, as many ops), run under 1F1B alone without the slowdown or the stages timed alone. The
    profile is checked by the inputs it was given (a CPU time of a few ms per module is no witness on a busy
    machine: a one-sample profile measured above the two-sample one under load)."""
    seen: list[int] = []
    profile = run_pipeline.profile_module
    monkeypatch.setattr(run_pipeline, "profile_module",
                        lambda model, args, **options: seen.append(len(args[0])) or profile(model, args, **options))
    rows = run_pipeline.profiled("gpt", 2, True)
    plan = run_pipeline.plan_for(run_pipeline.place(run_pipeline.workload_graph("gpt", 2, True, rows), rows), rows, 4, 2)
    small, job = run_pipeline.small_plan("gpt", plan, True)
    assert seen == [2, run_pipeline.SMALL]
    assert small.split_spec == plan.split_spec and small.microbatch == run_pipeline.SMALL < plan.microbatch
    assert small.ops == plan.ops and sum(plan.ops) == plan.train.graph.n
    assert len(small.forward_ms) == len(plan.forward_ms) and min(small.forward_ms + small.backward_ms) > 0
    assert job["schedules"] == ["1f1b"] and job["microbatch"] == run_pipeline.SMALL and not job["slowdown"]
    assert "repeat" not in job
    both = run_pipeline.small_plans("gpt", plan, True)  # the example's: its split and the lopsided one
    assert [list(p.split_spec) for p, _ in both] == [list(plan.split_spec), ["wpe"]]


def test_the_lopsided_split_puts_the_first_module_torch_cuts_after_alone(run_pipeline):
    """The calibration's lopsided split: the first module alone on the first stage, or (where torch cannot cut
    before the second module) the modules before the first cut torch makes two stages of; torch's split is kept
    for the job's run. Torch cuts the ViT before ``blocks.0`` since split points name the modules the program
    calls (a ModuleList's first block, not the list)."""
    for name, point, first in (("gpt", "wpe", 1), ("vit", "blocks.0", 1)):
        rows = run_pipeline.profiled(name, 2, True)
        graph = run_pipeline.workload_graph(name, 2, True, rows)
        plan = run_pipeline.plan_for(run_pipeline.place(graph, rows), rows, 4, 2)
        small, job = run_pipeline.small_plan(name, plan, True, lopsided=True)
        assert list(small.split_spec) == [point] == list(job["split_spec"])
        assert run_pipeline.modules_in_order(graph)[first] == point and small.ops[0] < small.ops[1]
        assert run_pipeline.prepare(job, True, 2).pipe.num_stages == 2


def test_the_loss_is_profiled_with_the_last_module(run_pipeline, monkeypatch):
    """The last stage computes the loss on the model's output: its forward and backward times are added to the last
    module's row (whose output the loss reads), the other rows as profiled."""
    from placement_dsl.profile import ModuleTime

    rows = [ModuleTime("h.0", 1.0, 2.0, 1.0, 1.0, 1), ModuleTime("head", 0.5, 1.0, 0.5, 0.5, 1)]
    monkeypatch.setattr(run_pipeline, "profile_module", lambda model, args, **options: list(rows))
    monkeypatch.setattr(run_pipeline, "loss_ms", lambda model, x, target, repeat: (0.25, 0.125))
    got = run_pipeline.profiled("gpt", 2, True)
    assert got[0] == rows[0] and (got[1].module, got[1].forward_ms, got[1].backward_ms) == ("head", 0.75, 1.125)
    monkeypatch.undo()
    model, x, target = run_pipeline.build("gpt-vocab", 2, True)
    forward, backward = run_pipeline.loss_ms(model, x, target, 3)
    assert forward > 0 and backward > 0


def test_stages_are_calibrated_on_their_cpu_time_in_the_steps_less_the_idle_stages(run_pipeline):
    """A stage's measured time is its rank's CPU ms per micro-batch in the steps less the idle stages' (median over
    the schedules); the calibration fits the compute factor and a stage's fixed time on them (here 1.25 x profiled
    + 2 ms) and prints both."""
    plans = [run_pipeline.Plan("a", {}, [1.0, 2.0], [2.0, 4.0]), run_pipeline.Plan("b", {}, [3.0, 0.5], [6.0, 1.0])]

    def rank(profiled: float) -> dict:
        mine = 1.25 * profiled + 2.0
        return {"gpipe_cpu_ms": mine + 1.0, "gpipe_idle_cpu_ms": 1.0, "1f1b_cpu_ms": mine + 0.5,
                "1f1b_idle_cpu_ms": 0.5, "1f1b_step_ms": 9.0}

    from placement_dsl.profile import LinkTime

    link = LinkTime(0.05, 1e6)
    runs = [[rank(f + b) for f, b in zip(p.forward_ms, p.backward_ms)] for p in plans]
    assert run_pipeline.stage_ms(runs[0][1]) == pytest.approx(1.25 * 6.0 + 2.0)
    costs = run_pipeline.calibrate(plans, runs, link)
    assert (costs.scale, costs.stage_ms, costs.link) == (pytest.approx(1.25), pytest.approx(2.0), link)


def test_the_calibration_fits_each_schedules_factor_and_the_report_prices_each_stage_with_it(run_pipeline):
    """The same stages measured at 1.4 x profiled under GPipe and 1.2 x under 1F1B (+ 2 ms), the exported CSVs run
    as their schedules: the calibration holds both factors and its pooled one, and each schedule's stages priced
    with its factor leave no residual (the pooled factor for both: 7 % and more)."""
    from placement_dsl.profile import LinkTime

    plans = [run_pipeline.Plan("a", {}, [1.0, 2.0], [2.0, 4.0]), run_pipeline.Plan("b", {}, [3.0, 0.5], [6.0, 1.0])]
    factor = {"gpipe": 1.4, "1f1b": 1.2, "csv-1f1b": 1.2, "csv-gpipe": 1.4}

    def rank(profiled: float) -> dict:
        out = {}
        for s, c in factor.items():
            out |= {f"{s}_cpu_ms": c * profiled + 2.0 + 1.0, f"{s}_idle_cpu_ms": 1.0, f"{s}_allclose": True,
                    f"{s}_max_abs_diff": 0.0}
        return out

    runs = [[rank(f + b) for f, b in zip(p.forward_ms, p.backward_ms)] for p in plans]
    costs = run_pipeline.calibrate(plans, runs, LinkTime(0.0, float("inf")))
    assert dict(costs.scales) == pytest.approx({"gpipe": 1.4, "1f1b": 1.2}) and costs.scale == pytest.approx(1.3)
    assert costs.stage_ms == pytest.approx(2.0)
    from placement_dsl.profile import calibrated

    for s in factor:
        fits = run_pipeline.stage_fits(plans[1], runs[1], schedule=s)
        assert {f.schedule for f in fits} == {s.removeprefix("csv-")}
        assert max(abs(f.residual) for f in calibrated(fits, costs)) < 1e-9
        assert max(abs(f.residual) for f in calibrated(fits, costs.scale, costs.stage_ms)) > 0.05


def test_the_calibration_fits_a_time_per_op_over_two_microbatch_sizes(run_pipeline):
    """Stages at two micro-batch sizes (the compute halves, the ops stay) measured at 1.25 x profiled + 0.05 ms per op
    + 0.5 ms: the calibration gives all three back, and ``RunCosts.op_ms`` carries the time per op."""
    from placement_dsl.profile import LinkTime

    big = [run_pipeline.Plan("a", {}, [1.0, 2.0], [2.0, 4.0], ops=[40, 20]),
           run_pipeline.Plan("b", {}, [3.0, 0.5], [6.0, 1.0], ops=[56, 4])]
    small = [run_pipeline.Plan(p.name, {}, [f / 2 for f in p.forward_ms], [b / 2 for b in p.backward_ms], ops=p.ops)
             for p in big]

    def rank(profiled: float, ops: int) -> dict:
        return {"1f1b_cpu_ms": 1.25 * profiled + 0.05 * ops + 0.5 + 1.0, "1f1b_idle_cpu_ms": 1.0}

    plans = big + small
    runs = [[rank(f + b, n) for f, b, n in zip(p.forward_ms, p.backward_ms, p.ops)] for p in plans]
    costs = run_pipeline.calibrate(plans, runs, LinkTime(0.05, 1e6))
    assert (costs.scale, costs.op_ms, costs.stage_ms) == (pytest.approx(1.25), pytest.approx(0.05), pytest.approx(0.5))


def test_the_calibrated_costs_move_the_split_of_the_example(run_pipeline):
    """Synthetic module times (no timing): the GPT's head costs as much as four blocks of 19 ops, so the profile puts
    every block on the first stage; at 0.1 ms per op the blocks' ops cost the runtime more than their profile says,
    and the search on the calibrated costs (``place(..., costs=...)``) moves the cut before the last block."""
    from placement_dsl.profile import ModuleTime, RunCosts

    rp = run_pipeline
    times = {"wte": 0.1, "wpe": 0.1, "h.0": 1.0, "h.1": 1.0, "h.2": 1.0, "h.3": 1.0, "ln_f": 0.1, "head": 4.0}
    rows = [ModuleTime(m, f, 2 * f, f, f, 1) for m, f in times.items()]
    import torch

    with torch.device("meta"):
        model, (x,) = rp.FACTORIES["gpt"](2, True)
    graph, _ = rp.apply_costs(rp.from_module(model, (x,), name="gpt").graph, {m: {rp.KIND: f} for m, f in times.items()})
    raw = rp.plan_for(rp.place(graph, rows), rows, 4)
    costs = RunCosts(1.0, op_ms=0.1, stage_ms=1.0)
    moved = rp.plan_for(rp.place(graph, rows, costs=costs), rows, 4)
    assert list(raw.split_spec) == ["ln_f"] and list(moved.split_spec) == ["h.3"]
    assert rp.replaced(raw, graph, rows, costs).startswith("gpt: re-placed on the calibrated costs: split_spec "
                                                           "{'h.3': 'beginning'} (moved from ['ln_f'])")
