"""``placement-dsl bounds --time-limit S`` is a total wall-clock budget that stops at the gap target.

For every workload in ``../shared/data`` (Tarnawski's throughput and latency inputs, the PipeDream
profiles) run the command as a user would, in a subprocess, and print the wall-clock time next to
the budget ``S``, the levels that ran, and the gap. The anchor: a run may exceed ``S`` only by
teardown (a few seconds), and no level runs after the gap is closed.

Usage::

    python benchmarks/bench_budget.py --time-limit 60 --stages 8
    python benchmarks/bench_budget.py --time-limit 20 --only resnet50
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from common import DNN, SHARED_DATA, fmt, markdown_head, markdown_row, require


def workloads(only: str | None) -> list[Path]:
    paths = sorted(require(DNN).glob("*-inputs/*/*.json")) + sorted((SHARED_DATA / "pipedream-profiles").glob("*.txt"))
    paths = [p for p in paths if p.name != "LICENSE.txt"]
    return [p for p in paths if only is None or only in p.name]


def run(path: Path, stages: int, limit: float) -> tuple[float, dict]:
    argv = [sys.executable, "-m", "placement_dsl.cli", "bounds", str(path), "--stages", str(stages),
            "--time-limit", str(limit), "--json"]
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=limit * 5 + 120, check=False)
    wall = time.perf_counter() - t0
    try:
        return wall, json.loads(done.stdout)
    except json.JSONDecodeError:
        return wall, {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0, help="the budget S of each run (seconds)")
    ap.add_argument("--stages", type=int, default=8, help="accelerators / pipeline stages")
    ap.add_argument("--only", help="only workloads whose file name contains this")
    args = ap.parse_args()
    markdown_head(["workload", "budget s", "wall s", "over s", "levels run", "gap", "status"])
    worst = 0.0
    for path in workloads(args.only):
        wall, out = run(path, args.stages, args.time_limit)
        ran = [r["level"] for r in out.get("levels", []) if r["status"] not in ("skipped", "not_applicable")]
        skipped = {r["message"]: [] for r in out.get("levels", []) if r["status"] == "skipped"}
        for r in out.get("levels", []):
            if r["status"] == "skipped":
                skipped[r["message"]].append(r["level"])
        gap = out.get("gap")
        worst = max(worst, wall - args.time_limit)
        status = out.get("error") or ("; ".join(f"{why}: {', '.join(lv)} skipped" for why, lv in skipped.items())
                                      or "all levels ran")
        markdown_row([path.stem, fmt(args.time_limit, ".0f"), fmt(wall, ".1f"), fmt(wall - args.time_limit, "+.1f"),
                      ",".join(ran), fmt(None if gap is None else 100 * gap, ".2f") + " %", status])
    print(f"\nlargest overrun of the budget: {worst:+.1f} s (anchor: a few seconds of teardown)")


if __name__ == "__main__":
    main()
