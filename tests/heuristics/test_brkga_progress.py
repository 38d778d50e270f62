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


@pytest.mark.parametrize("method", ["mla", "mla-weighted"])
def test_the_linear_arrangements_report_their_arrangement_under_their_own_name(method):
    """The arrangements' BRKGA minimizes a sum of edge lengths (bytes times positions for ``mla-weighted``), no
    objective: a ``brkga`` line with ``best`` 1.8e11 after another method's 12.9 read as the race's best split."""
    w = zoo.get("transformer-small")
    with reporting(Recorder()) as rec:
        run(method, w.graph, w.cluster, evaluations=100, population=20)
    assert not rec.of("brkga")
    shown = rec.of(method)
    assert shown and all("arrangement" in e.fields and "best" not in e.fields for e in shown)
