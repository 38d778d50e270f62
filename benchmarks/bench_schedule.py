"""MOIRAI (Zhang et al.) sample sheets: makespan of list scheduling vs the best single device.

    python benchmarks/bench_schedule.py [--congestion port|channel|none] [--data ../shared/data/moirai]

For every ``.xls`` sheet: operators and data flows (MOIRAI's augmented DAG, eq. 3), the best
single device that may hold every op ("one device"; "—" when none can, with the makespan
ignoring memory beside it), HEFT list scheduling with memory-aware device choice ("list",
:mod:`placement_dsl.heuristics.listsched`) and its running time. The paper's anchor:
example-1's optimum is 30 (MOIRAI's MILP).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from common import SHARED_DATA, fmt, markdown_head, markdown_row, require

from placement_dsl.errors import InfeasibleError
from placement_dsl.evaluate import CostModel, MemoryMode, evaluate
from placement_dsl.heuristics import run
from placement_dsl.io import moirai

PAPER_OPTIMUM = {"example-1": 30.0}  # MOIRAI's MILP optimum for its example sheet


def one_device(workload, model: CostModel) -> tuple[float | None, float]:
    """Best single device's makespan within memory (``None`` if no device holds everything), and ignoring memory."""
    roomy = run("one-device-best", workload.graph, workload.cluster,
                model=CostModel.named("makespan", memory=MemoryMode.OVERFLOW, congestion=model.congestion))
    try:
        within = run("one-device-best", workload.graph, workload.cluster, model=model).objective
    except InfeasibleError:
        within = None
    return within, roomy.objective


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=SHARED_DATA / "moirai")
    ap.add_argument("--congestion", default="port", choices=["port", "channel", "none"])
    args = ap.parse_args()
    model = CostModel.named("makespan", congestion=args.congestion)
    markdown_head(["sheet", "ops", "flows", "devices", "one device", "one device (no memory)", "list", "valid",
                   "list s", "paper optimum"])
    for path in sorted(require(args.data).glob("*.xls")):
        w = moirai.load(path)
        ops = sum(1 for op in w.graph.ops if op.attrs.get("moirai") == "operator")
        within, roomy = one_device(w, model)
        start = time.perf_counter()
        r = run("list", w.graph, w.cluster, model=model)
        seconds = time.perf_counter() - start
        valid = evaluate(r.placement, model).valid
        markdown_row([path.stem, ops, w.meta["flows"], w.cluster.size, fmt(within, ".4g"), fmt(roomy, ".4g"),
                      fmt(r.objective, ".4g"), valid, fmt(seconds, ".3f"), fmt(PAPER_OPTIMUM.get(path.stem), ".4g")])


if __name__ == "__main__":
    main()
