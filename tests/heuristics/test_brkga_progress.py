"""BRKGA's progress line shows the cost model's objective of its best split, not the decoder's max load."""
from __future__ import annotations

import pytest

from placement_dsl import zoo
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.heuristics import run
from placement_dsl.progress import Recorder, reporting


def test_brkga_reports_the_objective_of_its_best_split():
    w, model = zoo.get("transformer-small"), CostModel.named("latency")
    with reporting(Recorder()) as rec:
        result = run("brkga", w.graph, w.cluster, model=model, evaluations=100, population=20)
    best = [e.fields["best"] for e in rec.of("brkga")]
    objective = evaluate(result.placement, model).objective
    assert best and best[-1] == pytest.approx(objective)
    assert objective > 1.5 * evaluate(result.placement, CostModel()).objective  # the max load, which it was
