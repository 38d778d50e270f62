"""A pipeline run's calibration reused as costs: written, read back, applied to a workload, and searched on.

The fitted terms (``stage_costs_of``: measured = factor x profiled + per op x ops + per stage) reach the search:
:meth:`RunCosts.measured_graph` adds the time per op to every op and :meth:`RunCosts.search_model` the fixed time per
stage to every stage, which the DP prices; ``import --calibration`` applies a file of them. No timing here: the
measurements are synthetic.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from placement_dsl.cli import main
from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.io import Workload, load_workload, save_workload
from placement_dsl.placement import Placement
from placement_dsl.profile import (
    LinkTime,
    RunCosts,
    calibrated,
    calibration,
    read_calibration,
    schedule_scales,
    stage_costs_of,
    write_calibration,
)
from placement_dsl.zoo.training import with_backward

DATA = Path(__file__).resolve().parents[1] / "data"
TRUTH = (1.25, 0.5, 1.0)  # the runtime the synthetic stages are measured on: factor, ms per op, ms per stage


def forward(works: list[float]) -> Graph:
    """A chain of layers ``l0 ...``, each one op of ``works[i]`` ms."""
    ops = [Op(name=f"l{i}", work={"accelerator": w}) for i, w in enumerate(works)]
    return Graph(ops, [(f"l{i}", f"l{i + 1}") for i in range(len(works) - 1)], name="chain")


def training(g: Graph) -> Graph:
    ops, edges = with_backward(g.ops, g.edges)
    return Graph(ops, edges, name=g.name)


def measured(train: Graph, assign: list[int]) -> tuple[float, float, int]:
    """(profiled, measured, ops) of stage 0 and the same of stage 1, as a run on :data:`TRUTH` would time them."""
    p = Placement(train, Cluster.stages(2), assign)
    rows = evaluate(p, CostModel.named("pipedream")).devices
    scale, op_ms, fixed = TRUTH
    return [(r.compute, scale * r.compute + op_ms * r.ops + fixed, r.ops) for r in rows]


def synthetic_fits(works: list[float]):
    """Every two-stage cut of the chain, measured at the profile's micro-batch and at half of it (half the compute,
    the same ops): the measurements :func:`stage_costs_of` tells the three terms apart on."""
    rows = []
    for half in (1.0, 0.5):
        train = training(forward([w * half for w in works]))
        n = len(works)
        for cut in range(1, n):
            first = [0] * cut + [1] * (n - cut)
            rows += measured(train, first + first[::-1])
    return calibration([p for p, _, _ in rows], [m for _, m, _ in rows], [k for _, _, k in rows])


WORKS = [6.0, *[0.5] * 11]  # one heavy layer of one op, then many light ops


def test_the_fit_recovers_the_runtime_and_its_file_round_trips(tmp_path: Path):
    scale, op_ms, fixed = stage_costs_of(synthetic_fits(WORKS))
    assert (scale, op_ms, fixed) == pytest.approx(TRUTH)
    costs = RunCosts(scale, LinkTime(0.05, 1e6), 0.25, stage_ms=fixed, op_ms=op_ms)
    path = tmp_path / "calibration.json"
    write_calibration(costs, path, "accelerator", note="synthetic")
    back, kind = read_calibration(path)
    assert kind == "accelerator" and back == costs
    unbounded = RunCosts(scale, LinkTime(0.0, float("inf")))
    write_calibration(unbounded, path)
    assert json.loads(path.read_text())["link"]["bandwidth"] is None and read_calibration(path)[0] == unbounded


def test_the_calibrated_split_differs_from_the_raw_one_and_prices_the_stages_as_measured():
    """The profile alone puts the heavy layer alone on a stage (18 ms against 16.5); on the runtime, whose 0.5 ms per
    op makes the eleven light layers' 22 ops cost 11 ms more, that stage is the faster one (23.5 + 1 against 31.6 + 1),
    so the calibrated search moves the cut past one light layer, and its objective is the slower stage's measured
    time plus the runtime's time per task, as the cost model says."""
    scale, op_ms, fixed = stage_costs_of(synthetic_fits(WORKS))
    costs = RunCosts(scale, LinkTime(0.0, float("inf")), 0.25, stage_ms=fixed, op_ms=op_ms)
    train = training(forward(WORKS))
    raw = run("dp", train, Cluster.stages(2), model=CostModel.named("pipedream"))
    cal = run("dp", costs.measured_graph(train), Cluster.stages(2), model=costs.search_model("pipedream"))
    cut = [sum(1 for op, d in zip(train.ops, r.placement.assign) if d == 0 and not op.backward) for r in (raw, cal)]
    assert cut == [1, 2]
    stages = measured(train, cal.placement.assign.tolist())
    assert cal.objective == pytest.approx(max(m for _, m, _ in stages) + 2 * costs.overhead_ms)
    assert cal.exact_among == raw.exact_among and cal.bound == pytest.approx(cal.objective)
    on_raw = evaluate(Placement(costs.measured_graph(train), Cluster.stages(2), raw.placement.assign),
                      costs.search_model("pipedream")).objective
    assert on_raw > cal.objective  # the profile's split is slower on the runtime


def test_a_forward_graph_is_calibrated_for_its_training_graph_too():
    costs = RunCosts(2.0, op_ms=0.5)
    train = training(costs.measured_graph(forward([1.0, 3.0])))
    assert [op.work["accelerator"] for op in train.ops] == [2.5, 6.5, 12.5, 4.5]  # l1.grad, l0.grad: 2 x 2 x t + 0.5


@pytest.mark.parametrize(("content", "match"), [
    ("{", "not valid JSON"),
    ("[1]", "expected an object"),
    ('{"scale": -1}', "field 'scale' must be a finite number >= 0"),
    ('{"scale": 0}', "field 'scale' must be > 0"),
    ('{"scale": 1, "op_ms": "0.1"}', "field 'op_ms' must be a finite number"),
    ('{"scale": 1, "link": {"bandwidth": 0}}', "field 'link.bandwidth' must be > 0"),
    ('{"scale": 1, "kind": 3}', "field 'kind'"),
    ('{"version": 3, "scale": 1}', "field 'version' must be 1 to 2"),
    ('{"scale": 1, "schedule_scales": {"pipedream": 1.2}}', "field 'schedule_scales' must map schedules"),
    ('{"scale": 1, "schedule_scales": {"gpipe": 0}}', "field 'schedule_scales.gpipe' must be > 0"),
    ('{"scale": 1, "schedule_scales": {"zbv": "1"}}', "field 'schedule_scales.zbv' must be a finite number"),
    ('{"scale": 1, "op_msec": 5.0}', "unknown field 'op_msec'"),  # read as op_ms 0 before
    ('{"scale": 1, "link": {"latency": 0.1}}', "unknown field 'link.latency'"),
])
def test_a_bad_calibration_is_refused_naming_the_file_and_field(tmp_path: Path, content: str, match: str):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(SpecError, match=match) as err:
        read_calibration(path)
    assert "bad.json" in str(err.value) and "\n" not in str(err.value)


def test_import_applies_a_calibration_that_solve_and_evaluate_price(tmp_path: Path, capsys: pytest.CaptureFixture):
    pytest.importorskip("onnx")
    cal, plain, priced = tmp_path / "cal.json", tmp_path / "plain.json", tmp_path / "priced.json"
    write_calibration(RunCosts(1.5, LinkTime(0.0, float("inf")), 0.25, stage_ms=1.0, op_ms=0.01), cal)
    model = str(DATA / "gpt_blocks.onnx")
    assert main(["import", model, "--out", str(plain), "--stages", "2", "--seq", "16", "--quiet"]) == 0
    assert main(["import", model, "--out", str(priced), "--stages", "2", "--seq", "16", "--calibration", str(cal),
                 "--json"]) == 0
    capsys.readouterr()
    a, b = load_workload(plain), load_workload(priced)
    assert b.meta["task_overhead"] == pytest.approx(0.25 + 1.0 / 2)
    assert all(y.work["accelerator"] == pytest.approx(1.5 * x.work["accelerator"] + 0.01, rel=1e-5)
               for x, y in zip(a.graph.ops, b.graph.ops))
    assert main(["solve", str(priced), "--method", "dp", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert main(["solve", str(plain), "--method", "dp", "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    assert answer["info"]["task_overhead"].startswith("0.75 per pass")
    assert answer["status"] == before["status"]
    assert main(["import", model, "--out", str(priced), "--seq", "16", "--calibration", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "none.json" in err and "\n" not in err


@pytest.mark.parametrize(("training", "passes"), [([], 1), (["--training"], 2)])
def test_solve_prices_the_stage_time_of_a_calibrated_workload_by_search_and_mip(tmp_path: Path, capsys, training,
                                                                                passes):
    """A workload whose meta holds a fixed time per stage pass: the DP and the MIP answer the split they answer
    without it, priced with it on every busy device (one pass forward-only, two with --training), bound alike."""
    g = forward([3.0, 1.0, 1.0, 2.0, 2.0, 1.0])
    plain, priced = tmp_path / "plain.json", tmp_path / "priced.json"
    save_workload(Workload(g, Cluster.stages(2), "native", {}), plain)
    save_workload(Workload(g, Cluster.stages(2), "native", {"task_overhead": 0.75}), priced)
    answers = {}
    for path in (plain, priced):
        for method in ("dp", "ip"):
            assert main(["solve", str(path), "--method", method, *training, "--json"]) == 0
            answers[path.stem, method] = json.loads(capsys.readouterr().out)
    for method in ("dp", "ip"):
        was, now = answers["plain", method], answers["priced", method]
        assert now["objective"] == pytest.approx(was["objective"] + 0.75 * passes)
        assert now["bound"] == pytest.approx(was["bound"] + 0.75 * passes) and now["status"] == was["status"]
    assert main(["bounds", str(priced), *training, "--levels", "dp", "--json"]) == 0
    shown = capsys.readouterr()
    assert json.loads(shown.out)["task_overhead_shift"] == pytest.approx(0.75 * passes)
    assert f"every split's objective is {0.75 * passes:g} more" in shown.err
    bad = tmp_path / "bad.json"
    save_workload(Workload(g, Cluster.stages(2), "native", {"task_overhead": "x"}), bad)
    assert main(["solve", str(bad), "--method", "dp"]) == 2
    err = capsys.readouterr().err.strip()
    assert "meta field 'task_overhead'" in err and "\n" not in err


# ---------------------------------------------------------------------------- one compute factor per schedule
FACTORS = {"gpipe": 1.4, "1f1b": 1.2}  # the same stages cost more CPU under GPipe (every micro-batch's activations)


def per_schedule_fits(works: list[float]):
    """:func:`synthetic_fits`' stages measured under each schedule of :data:`FACTORS` (the ms per op and per stage of
    :data:`TRUTH`), each fit naming its schedule."""
    fits = synthetic_fits(works)
    _, op_ms, fixed = TRUTH
    return [replace(f, measured_ms=FACTORS[s] * f.predicted_ms + op_ms * f.ops + fixed, schedule=s)
            for s in FACTORS for f in fits]


def test_each_schedules_factor_is_fitted_and_round_trips_through_the_file(tmp_path: Path):
    costs = RunCosts.fitted(per_schedule_fits(WORKS), LinkTime(0.05, 1e6))
    assert dict(costs.scales) == pytest.approx(FACTORS) and (costs.op_ms, costs.stage_ms) == pytest.approx(TRUTH[1:])
    assert costs.scale == pytest.approx(sum(FACTORS.values()) / 2)  # the factor of schedules not measured apart
    path = tmp_path / "calibration.json"
    write_calibration(costs, path, note="synthetic")
    data = json.loads(path.read_text())
    assert data["version"] == 2 and data["schedule_scales"] == pytest.approx(FACTORS)
    back, _ = read_calibration(path)
    assert back == costs
    assert [back.scale_for(s) for s in ("gpipe", "1f1b", "zbv")] == pytest.approx([1.4, 1.2, costs.scale])
    assert back.under("gpipe").scale == pytest.approx(1.4) and back.under("gpipe").scales == ()
    fits = calibrated(per_schedule_fits(WORKS), back)
    assert max(abs(f.residual) for f in fits) < 1e-9  # each stage priced with its schedule's factor


def test_a_single_factor_file_reads_as_that_factor_for_every_schedule(tmp_path: Path):
    """A file written before the factors per schedule (no ``version``, no ``schedule_scales``)."""
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"kind": "accelerator", "scale": 1.3, "op_ms": 0.02, "stage_ms": 0.5,
                                "overhead_ms": 0.25, "link": {"latency_ms": 0.05, "bandwidth": 1e6}}))
    costs, kind = read_calibration(path)
    assert kind == "accelerator" and costs.scales == ()
    assert {s: costs.under(s).scale for s in ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zbv")} == {
        s: 1.3 for s in ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zbv")}
    assert (costs.op_ms, costs.stage_ms, costs.overhead_ms) == (0.02, 0.5, 0.25)


@pytest.mark.parametrize("schedule", list(FACTORS))
def test_the_search_on_a_schedules_costs_prices_that_schedules_factor(tmp_path: Path, schedule: str):
    """The DP on the costs of ``schedule`` read from the file: its objective is its split's slower stage as that
    schedule measures it (its factor) plus the runtime's time per task, as the cost model says."""
    path = tmp_path / "calibration.json"
    write_calibration(RunCosts(1.0, LinkTime(0.0, float("inf")), 0.25, stage_ms=TRUTH[2], op_ms=TRUTH[1],
                               scales=tuple(FACTORS.items())), path)
    costs = read_calibration(path)[0].under(schedule)
    train = training(forward(WORKS))
    cal = run("dp", costs.measured_graph(train), Cluster.stages(2), model=costs.search_model("pipedream"))
    rows = evaluate(Placement(train, Cluster.stages(2), cal.placement.assign), CostModel.named("pipedream")).devices
    slower = max(FACTORS[schedule] * r.compute + TRUTH[1] * r.ops + TRUTH[2] for r in rows)
    assert cal.objective == pytest.approx(slower + 2 * 0.25)


def test_import_applies_the_factor_of_the_schedule_named(tmp_path: Path, capsys: pytest.CaptureFixture):
    pytest.importorskip("onnx")
    cal = tmp_path / "cal.json"
    write_calibration(RunCosts(1.3, LinkTime(0.0, float("inf")), 0.25, stage_ms=1.0, op_ms=0.01,
                               scales=tuple(FACTORS.items())), cal)
    model = str(DATA / "gpt_blocks.onnx")
    plain = tmp_path / "plain.json"
    assert main(["import", model, "--out", str(plain), "--stages", "2", "--seq", "16", "--quiet"]) == 0
    base = load_workload(plain).graph.ops
    for schedule, factor in [*FACTORS.items(), (None, 1.3)]:
        out = tmp_path / f"{schedule}.json"
        named = ["--schedule", schedule] if schedule else []
        assert main(["import", model, "--out", str(out), "--stages", "2", "--seq", "16", "--calibration", str(cal),
                     *named]) == 0
        assert f"x{factor:.4g}" in capsys.readouterr().out
        w = load_workload(out)
        assert w.meta.get("calibration_schedule") == schedule
        assert all(y.work["accelerator"] == pytest.approx(factor * x.work["accelerator"] + 0.01, rel=1e-5)
                   for x, y in zip(base, w.graph.ops))
    assert main(["solve", str(tmp_path / "1f1b.json"), "--method", "dp", "--training", "--objective", "pipedream",
                 "--quiet"]) == 0
    assert main(["solve", str(tmp_path / "gpipe.json"), "--method", "dp", "--training", "--objective", "pipedream",
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the note on the derived backward pass
    assert err.startswith("error: ") and "calibrated for schedule 'gpipe'" in err and "--schedule 1f1b" in err
    assert main(["import", model, "--out", str(plain), "--seq", "16", "--schedule", "gpipe"]) == 2
    assert "pass --calibration" in capsys.readouterr().err


def test_the_factors_are_fitted_with_the_time_per_op_and_stage_where_one_schedule_ran_at_one_size():
    """As the example and the bench measure: GPipe at the run's micro-batch only, 1F1B at it and at a smaller one.
    One factor fitted first put GPipe's extra cost into the time per op and per stage, then each schedule's factor
    on those; fitted together, all four terms come back."""
    fits = per_schedule_fits(WORKS)
    half = len(fits) // 4  # per schedule, the stages at the run's size, then at half of it
    fits = fits[:half] + fits[2 * half:]
    costs = RunCosts.fitted(fits)
    assert dict(costs.scales) == pytest.approx(FACTORS) and (costs.op_ms, costs.stage_ms) == pytest.approx(TRUTH[1:])
    _, op_ms, fixed = stage_costs_of(fits)
    first = schedule_scales(fits, op_ms, fixed)
    assert abs(first["gpipe"] - FACTORS["gpipe"]) > 0.01 or abs(op_ms - TRUTH[1]) > 0.01


def test_an_interleaved_runs_factors_join_the_file_and_price_their_schedules(tmp_path: Path):
    """The interleaved run fits interleaved 1F1B's, ZB-H1's and ZBV's factors apart: written beside a GPipe and 1F1B
    calibration, each schedule reads back its own, and the DP on its costs prices it."""
    interleaved = {"interleaved-1f1b": 1.3, "zb-h1": 1.1, "zbv": 0.9}
    base = RunCosts(1.0, LinkTime(0.0, float("inf")), 0.25, stage_ms=TRUTH[2], op_ms=TRUTH[1],
                    scales=tuple(FACTORS.items()))
    path = tmp_path / "calibration.json"
    write_calibration(base.with_factors(interleaved), path)
    assert json.loads(path.read_text())["schedule_scales"] == {**FACTORS, **interleaved}
    back = read_calibration(path)[0]
    train = training(forward(WORKS))
    for schedule, factor in interleaved.items():
        costs = back.under(schedule)
        assert costs.scale == factor and (costs.op_ms, costs.stage_ms) == TRUTH[1:]
        cal = run("dp", costs.measured_graph(train), Cluster.stages(2), model=costs.search_model("pipedream"))
        rows = evaluate(Placement(train, Cluster.stages(2), cal.placement.assign),
                        CostModel.named("pipedream")).devices
        assert cal.objective == pytest.approx(max(factor * r.compute + TRUTH[1] * r.ops + TRUTH[2] for r in rows)
                                              + 2 * 0.25)
    with pytest.raises(SpecError, match=r"^schedule_scales\.zbv: the compute factor must be a finite number > 0"):
        base.with_factors({"zbv": float("nan")})
    with pytest.raises(SpecError, match=r"^schedule_scales: 'pipedream' is no schedule"):
        base.with_factors({"pipedream": 1.0})
