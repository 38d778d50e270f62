"""Every method and ``bounds`` from 200 to 20,000 ops, each a separate command-line process against its budget.

    python benchmarks/bench_scale.py [--sizes 2000,20000] [--methods dp,slicegraph,bounds] [--k 4,16]
                                     [--families gpt3,cnn,wide,shared] [--time-limit 60] [--busy] [--quick]

Graphs (written once to ``--folder``): the zoo's GPT-3 operator graphs
(``gpt3(layers=L, hidden=1024, heads=16, vocab=8192)``, ~203 ops per layer, L chosen for the size), CNNs (copies
of the zoo's ResNet-152 chained output to input), wide DAGs (the zoo's REGAL-style random graphs of n ops), and
copies of the shared operator graphs of ``../shared/data/dnn-partitioning`` chained together (skipped when the
data is absent). Every row is one process, ``python -m placement_dsl.cli solve FILE --method M --stages K
--objective O --time-limit S --json`` (``bounds FILE ...`` for the ``bounds`` method), with ``O`` the objective
the method searches (throughput, latency or makespan). A row: the wall seconds from the process's start to its
exit, the peak resident memory of that process (``os.wait4``), the objective, the bound and the gap, the status,
and the seconds of each phase the command reports (a solve's in-process seconds; each ``bounds`` level's). A run
more than :data:`OVERRUN` seconds past its budget is flagged ``OVER``. ``--busy`` runs a CPU-bound loop beside.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import DNN, fmt, markdown_head, markdown_row

ROOT = Path(__file__).resolve().parents[1]
OVERRUN = 5.0  # seconds a run may exceed its budget
SIZES = (200, 1_000, 2_000, 5_000, 10_000, 20_000)
KS = (2, 4, 8, 16, 32, 64)
FAMILIES = ("gpt3", "cnn", "wide", "shared")
GPT3_OPS_PER_LAYER = 203  # zoo.gpt3 at hidden 1024, 16 heads: 2,044 ops at 10 layers, 20,314 at 100
QUICK = {"sizes": "2000,20000", "k": "4", "families": "gpt3", "time_limit": 20.0,
         "methods": "dp,dpl,slicegraph,latency-best,latency-local-search,list,schedule-lns,bounds"}


def objective_for(method: str) -> str:
    """The objective a method searches, as ``--objective`` names it (``bounds``: throughput)."""
    sys.path.insert(0, str(ROOT))
    from placement_dsl.heuristics.registry import optimizes

    goal = optimizes(method)  # read from the declarations: no heuristic module is imported
    return {"latency": "latency", "makespan": "makespan", "gpipe": "gpipe"}.get(goal, "throughput")


def all_methods() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from placement_dsl.cli.common import HEURISTIC_METHODS, IP_METHODS

    return [*HEURISTIC_METHODS, *IP_METHODS, "bounds", "bounds-latency"]


# ---------------------------------------------------------------------------- graphs
def chained(graphs: list, name: str):
    """The graphs one after another: copy ``i``'s sinks feed copy ``i + 1``'s sources (ops renamed ``c{i}/...``)."""
    from placement_dsl.graph import Graph

    ops, edges, prev_sinks = [], [], []
    for i, g in enumerate(graphs):
        names = [f"c{i}/{op.name}" for op in g.ops]
        ops += [op.model_copy(update={"name": names[j]}) for j, op in enumerate(g.ops)]
        edges += [(names[a], names[b]) for a, b in zip(g.src.tolist(), g.dst.tolist())]
        indeg = [g.pred_ptr[v + 1] - g.pred_ptr[v] for v in range(g.n)]
        outdeg = [g.succ_ptr[v + 1] - g.succ_ptr[v] for v in range(g.n)]
        sources = [names[v] for v in range(g.n) if indeg[v] == 0]
        edges += [(s, t) for s in prev_sinks for t in sources]
        prev_sinks = [names[v] for v in range(g.n) if outdeg[v] == 0]
    return Graph(ops, edges, name=name)


def copies_to(graph, size: int, name: str):
    """Enough copies of ``graph`` chained together to hold about ``size`` ops (at least one)."""
    return chained([graph] * max(1, round(size / graph.n)), name)


def workload(family: str, size: int, folder: Path) -> list[tuple[str, Path]]:
    """``(label, file)`` of ``family``'s graphs near ``size`` ops, written once to ``folder``."""
    sys.path.insert(0, str(ROOT))
    from placement_dsl import zoo
    from placement_dsl.io import Workload, load_workload, save_workload

    if family == "shared":
        paths = sorted((DNN / "throughput-inputs" / "OperatorGraphs").glob("*.json")) if DNN.exists() else []
        out = []
        for src in paths:
            label = f"{src.stem}x{size}"
            path = folder / f"shared-{label}.json"
            if not path.exists():
                w = load_workload(src)
                save_workload(Workload(copies_to(w.graph, size, label), w.cluster), path)
            out.append((f"shared/{label}", path))
        return out
    path = folder / f"{family}-{size}.json"
    if not path.exists():
        if family == "gpt3":
            w = zoo.gpt3(layers=max(1, round(size / GPT3_OPS_PER_LAYER)), hidden=1024, heads=16, vocab=8192)
        elif family == "cnn":
            base = zoo.resnet(152)
            w = Workload(copies_to(base.graph, size, f"resnet152x{size}"), base.cluster)
        elif family == "wide":
            w = zoo.regal(seed=0, n=size)
        else:
            raise SystemExit(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
        save_workload(w, path)
    return [(f"{family}-{size}", path)]


# ---------------------------------------------------------------------------- runs
def argv(method: str, path: Path, k: int, limit: float) -> list[str]:
    if method in ("bounds", "bounds-latency"):
        cmd = ["bounds", str(path), "--objective", "latency" if method == "bounds-latency" else "throughput"]
    else:
        cmd = ["solve", str(path), "--method", method, "--objective", objective_for(method)]
    return [sys.executable, "-m", "placement_dsl.cli", *cmd, "--stages", str(k), "--time-limit", f"{limit:g}", "--json"]


def run(cmd: list[str], limit: float) -> tuple[float, float, int, dict]:
    """Wall seconds from the process's start, its peak RSS in MiB, its exit code and its JSON (or an ``error``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, text=True)
        cap = limit * 5 + 120
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > cap:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = {"error": (errors.strip().splitlines() or [f"no output (exit {proc.returncode})"])[-1][:90]}
    if wall > cap:
        data = {"error": f"killed after {cap:.0f} s"}
    return wall, usage.ru_maxrss / 1024, proc.returncode, data


def phases(data: dict) -> str:
    """Seconds per phase: each ``bounds`` level that ran, or a solve's in-process seconds and its stop."""
    if "levels" in data:
        return " ".join(f"{r['level']}:{'skipped' if r.get('status') == 'skipped' else fmt(r.get('seconds'), '.1f')}"
                        for r in data["levels"] if r.get("status") != "not_applicable")
    info = data.get("info") or {}
    extra = [f"stopped in {info['stopped_in']}"] if info.get("stopped_in") else []
    extra += [f"fallback {info['fallback']}"] if info.get("fallback") else []
    return "; ".join([f"run:{fmt(data.get('seconds'), '.1f')}", *extra])


def status(code: int, data: dict) -> str:
    if "error" in data:
        return f"exit {code}: {data['error']}"
    if "levels" in data:
        return "certificate"
    return str(data.get("status"))


def busy_loop() -> subprocess.Popen:
    """Another CPU-bound job beside the runs, as on a shared machine."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated op counts")
    ap.add_argument("--methods", help="comma-separated methods, 'bounds' and 'bounds-latency' (default: all)")
    ap.add_argument("--k", default=",".join(map(str, KS)), help="comma-separated stage counts")
    ap.add_argument("--families", default=",".join(FAMILIES), help=f"comma-separated, of {', '.join(FAMILIES)}")
    ap.add_argument("--time-limit", type=float, default=60.0, help="budget of every run (seconds)")
    ap.add_argument("--busy", action="store_true", help="run a CPU-bound loop beside the runs")
    ap.add_argument("--quick", action="store_true",
                    help=f"sizes {QUICK['sizes']}, k {QUICK['k']}, {QUICK['families']}, a handful of methods, "
                         f"{QUICK['time_limit']:g} s (flags given explicitly still win)")
    ap.add_argument("--folder", default=str(Path(tempfile.gettempdir()) / "placement_dsl_bench_scale"),
                    help="where the generated graphs are written")
    args = ap.parse_args()
    given = {a.split("=")[0] for a in sys.argv[1:]}
    if args.quick:
        for key, value in QUICK.items():
            if f"--{key.replace('_', '-')}" not in given:
                setattr(args, key, value)
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    methods = args.methods.split(",") if args.methods else all_methods()
    busy = busy_loop() if args.busy else None
    worst: tuple[float, str] = (-float("inf"), "")
    overruns = []
    try:
        markdown_head(["graph", "ops", "k", "method", "wall s", "limit s", "peak MiB", "objective", "bound", "gap",
                       "status", "phases s", ""])
        for size in (int(s) for s in args.sizes.split(",")):
            for family in args.families.split(","):
                for label, path in workload(family, size, folder):
                    ops = len(json.loads(path.read_text()).get("graph", {}).get("ops", []))
                    for k in (int(s) for s in args.k.split(",")):
                        for method in methods:
                            wall, rss, code, data = run(argv(method, path, k, args.time_limit), args.time_limit)
                            over = wall - args.time_limit
                            worst = max(worst, (over, f"{label} k={k} {method}"))
                            flag = "OVER" if over > OVERRUN else ""
                            if flag:
                                overruns.append(f"{label} k={k} {method}: {wall:.1f} s")
                            gap = data.get("gap")
                            markdown_row([label, ops, k, method, fmt(wall, ".1f"), fmt(args.time_limit, ".0f"),
                                          fmt(rss, ".0f"), fmt(data.get("objective"), ".5g"),
                                          fmt(data.get("bound"), ".5g"), fmt(None if gap is None else 100 * gap, ".1f"),
                                          status(code, data), phases(data), flag])
                            sys.stdout.flush()
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    print(f"\nlargest overrun: {worst[0]:+.1f} s ({worst[1]}); runs more than {OVERRUN:g} s over: {len(overruns)}")
    for line in overruns:
        print(f"- {line}")


if __name__ == "__main__":
    main()
