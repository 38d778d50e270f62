"""The papers' tables as assertions (slow; ``python -m pytest -m slow tests/test_paper_tables.py``).

Tarnawski et al. Table 1, non-contiguous column: the Fig. 6 IP without contiguity, warm-started
from the DP, reaches the paper's value within 1 % in 60 s on every throughput input. ResNet50
training misses it on 2 shared cores (77.72 against 76.65; Gurobi took 15 s on 4 cores); its row
is an expected failure so that reaching it turns the test red until the expectation is updated.
"""
from __future__ import annotations

import csv

import pytest

from placement_dsl.cli.problems import problem_for_method
from placement_dsl.io import load_workload
from placement_dsl.solve import solve

pytestmark = [pytest.mark.slow, pytest.mark.shared]
KNOWN_SHORT = {"throughput-inputs/LayerGraphs/resnet50_training.json"}


def _rows(dnn: object) -> list[dict[str, str]]:
    with (dnn / "paper_throughput.csv").open() as fh:  # type: ignore[operator]
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def _files() -> list[str]:
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "shared" / "data" / "dnn-partitioning"
    return [r["file"] for r in _rows(path)] if path.exists() else []


@pytest.mark.parametrize("file", [pytest.param(f, marks=pytest.mark.xfail(strict=True, reason="77.72 vs 76.65 in 60 s"))
                                  if f in KNOWN_SHORT else f for f in _files()])
def test_table1_noncontiguous_within_one_percent(dnn_partitioning, file):
    row = next(r for r in _rows(dnn_partitioning) if r["file"] == file)
    problem = problem_for_method(load_workload(dnn_partitioning / file), method="ip-noncontig")
    result = solve(problem, warm_start="dp", gap=0.01, time_limit=60)
    assert problem.is_valid(result.placement)
    assert result.objective <= float(row["ip_noncontig_tps"]) * 1.01
