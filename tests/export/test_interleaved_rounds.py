"""Splits measured against each other in interleaved rounds (``run_pipeline.interleaved_rounds``, ``bench_runtime
--fair``): every split's step in every round, and the verdict read from the spread of the per-round ratios."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def modules():
    pytest.importorskip("torch")
    paths = [str(ROOT / "examples"), str(ROOT / "benchmarks")]
    sys.path[:0] = paths
    try:
        import bench_runtime
        import run_pipeline
        yield run_pipeline, bench_runtime
    finally:
        for p in paths:
            sys.path.remove(p)


def test_the_verdict_reads_the_middle_half_of_the_rounds(modules):
    _, bench = modules
    assert bench.verdict([1.1, 1.2, 1.15, 1.3]) == "ours faster"
    assert bench.verdict([0.8, 0.9, 0.85, 0.95]) == "ours slower"
    assert bench.verdict([0.9, 1.1, 1.05, 0.95, 1.2]) == "equal within the spread (median >= 1)"
    assert bench.quartiles([3.0]) == (3.0, 3.0, 3.0)


def test_a_comparison_reads_the_fastest_and_trimmed_steps_against_the_self_comparison(modules):
    """Per split the fastest step and the interquartile mean of the rounds; a verdict only beyond the noise floor
    that one split measured against itself sets (the larger distance from 1 of its two ratios)."""
    _, bench = modules
    mine, theirs = [10.0, 11.0, 30.0, 12.0], [13.0, 12.0, 14.0, 40.0]
    pair = bench.Compared.of(mine, theirs, [5.0, 6.0], [7.0, 6.0])
    assert pair.rounds == [1.3, 12 / 11, 14 / 30, 40 / 12]
    assert pair.fastest == 1.2 and pair.middle == pytest.approx(13.5 / 11.5) and pair.cpu == pytest.approx(7 / 6)
    assert pair.serial == pytest.approx(13 / 11)  # both ranks: 7 + 6 against 5 + 6
    again = bench.Compared.of(mine, [10.5, 10.0, 12.0, 11.0], [5.0, 6.0], [5.0, 6.0])
    assert again.noise == pytest.approx(abs(10.75 / 11.5 - 1.0))  # the fastest steps are equal: 10 and 10
    assert pair.verdict(again.noise) == "ours faster" and pair.verdict(0.2) == "within the noise (20.0%)"
    assert bench.Compared.of(theirs, mine, [1.0], [1.0]).verdict(again.noise) == "ours slower"
    assert bench.trimmed([3.0, 1.0, 2.0, 100.0, -50.0]) == 2.0


def test_every_split_steps_in_every_round(modules):
    """Two splits of the quick GPT, two schedules, three rounds: each split and schedule has one step time (ms per
    micro-batch, the slower rank's) per round after the warm-up round, and each rank's CPU time per micro-batch;
    the idle stages step in every round too, and spend less CPU time than a stage of the model; each rank measures
    its slowdown."""
    rp, _ = modules
    jobs = [{"model": "gpt", "split_spec": {point: "beginning"}, "schedules": ["gpipe", "1f1b"], "microbatch": 2,
             "microbatches": 4} for point in ("h.1", "h.2")]
    rounds = rp.interleaved_rounds(jobs, True, 3)
    assert sorted(rounds.wall) == sorted(rounds.cpu) == [(0, "1f1b"), (0, "gpipe"), (1, "1f1b"), (1, "gpipe")]
    assert all(len(ms) == 3 and min(ms) > 0 for ms in rounds.wall.values())
    assert all(len(ms) == 3 and min(ms) > 0 for ms in rounds.idle_wall.values()) and sorted(rounds.idle_cpu) == ["1f1b", "gpipe"]
    assert all(len(c) == 2 and min(c) > 0 for c in rounds.cpu.values())
    assert all(max(rounds.idle_cpu[s]) < min(rounds.cpu[(j, s)]) for j, s in rounds.cpu)
    assert len(rounds.slowdown) == 2 and min(rounds.slowdown) >= 0.9  # wall clock over CPU time: about 1 or more


def test_the_out_of_sample_calibration_takes_the_lopsided_split_that_tells_a_stage_from_its_ops(modules):
    """Our split's two stages run the same number of ops (the example CNN's: 50 and 50) at both sizes, so its stages
    alone cannot tell a stage's fixed time from its time per op: fitted on them, the time went all to the ops and a
    stage of 20 ops (``parameters``' last stage) was priced 18 % under what it measured. The lopsided split's
    stages (the first module alone, few ops beside many) pin both, as in the example's calibration."""
    from types import SimpleNamespace

    rp, bench = modules

    def measured(profiled: float, ops: int) -> float:  # the run: x1.1 the profile + 0.02 ms per op + 1.5 ms per stage
        return 1.1 * profiled + 0.02 * ops + 1.5

    def plan(split: str, profiled: list[float], ops: list[int]):
        return rp.Plan("cnn", {split: "beginning"}, [p / 3 for p in profiled], [2 * p / 3 for p in profiled],
                       ops=ops)

    labelled = [("ours", plan("blocks.3", [9.0, 7.0], [50, 50])), ("even", plan("blocks.4", [11.0, 5.0], [60, 40])),
                ("parameters", plan("blocks.5", [14.0, 2.6], [80, 20]))]
    small = [("ours", plan("blocks.3", [3.0, 2.3], [50, 50])), ("lopsided", plan("blocks.0", [0.4, 5.0], [6, 94]))]

    def rounds_of(plans, schedules):
        cpu = {(j, s): [measured(f + b, n) for f, b, n in zip(p.forward_ms, p.backward_ms, p.ops)]
               for j, (_, p) in enumerate(plans) for s in schedules}
        return SimpleNamespace(cpu=cpu, idle_cpu={s: [0.0, 0.0] for s in schedules})

    line = bench.out_of_sample(labelled, rounds_of(labelled, ["gpipe", "1f1b"]), ["gpipe", "1f1b"], small,
                               rounds_of(small, ["1f1b"]), None)
    assert "largest residual out of sample: even 0.0%, parameters 0.0% (on ours' stages alone, " in line
    alone = line.split("(on ours' stages alone, ")[1].split(";")[0]
    assert float(alone.split("parameters ")[1].rstrip("%")) > 5.0


def test_jobs_take_turns_round_by_round_in_alternating_order(modules):
    import pipeline_ranks

    assert pipeline_ranks.turns([3, 2, 1]) == [(0, 0), (0, 1), (0, 2), (1, 1), (1, 0), (2, 0)]
    assert pipeline_ranks.turns([]) == []


def test_a_run_of_several_jobs_steps_them_in_turn(modules, tmp_path, monkeypatch):
    """Run one job after the other, a load that fell during the run made the splits measured later look cheaper than
    the split the calibration was fitted on (the example CNN's ``parameters`` stages priced 26 % over their measured
    CPU time); the jobs of one run step in turns, so that each sees the run's load alike."""
    import pipeline_ranks

    log = tmp_path / "steps.txt"
    real = pipeline_ranks._timed_step

    def logged(schedule, rank, x, target, m):
        if rank == 0 and not x.is_floating_point():  # the GPT's token ids; the idle stages' input is floats
            with log.open("a") as f:
                f.write(f"{len(x) // m}\n")  # the job's samples per micro-batch
        return real(schedule, rank, x, target, m)

    monkeypatch.setattr(pipeline_ranks, "_timed_step", logged)  # the forked ranks inherit it
    jobs = [{"model": "gpt", "split_spec": {"h.2": "beginning"}, "schedules": ["1f1b"], "microbatch": mb,
             "microbatches": 2, "steps": steps, "slowdown": False} for mb, steps in ((1, 2), (2, 1))]
    runs = pipeline_ranks.execute(jobs, True)
    assert [int(x) for x in log.read_text().split()] == [1, 2, 2, 1, 1]  # turns([3, 2]): rounds 0, 1 both, 2 the first
    assert all(len(ranks) == 2 and ranks[-1]["1f1b_allclose"] and ranks[0]["1f1b_cpu_ms"] > 0 for ranks in runs)
