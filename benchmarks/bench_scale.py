"""Every method and ``bounds`` from 200 to 20,000 ops, each a separate command-line process against its budget.

    python benchmarks/bench_scale.py [--sizes 2000,20000] [--methods dp,slicegraph,bounds | --main] [--k 4,16]
                                     [--families gpt3,cnn,wide,shared] [--time-limit 60] [--busy] [--quick]
    python benchmarks/bench_scale.py --onnx vit-b16 gpt2-small [MODEL.onnx ...]

Graphs (written once to ``--folder``): the zoo's GPT-3 operator graphs
(``gpt3(layers=L, hidden=1024, heads=16, vocab=8192)``, ~203 ops per layer, L chosen for the size), CNNs (copies
of the zoo's ResNet-152 chained output to input), wide DAGs (the zoo's REGAL-style random graphs of n ops), and
copies of the shared operator graphs of ``../shared/data/dnn-partitioning`` chained together (skipped when the
data is absent). Every row is one process, ``python -m placement_dsl.cli solve FILE --method M --stages K
--objective O --time-limit S --json`` (``bounds FILE ...`` for the ``bounds`` method), with ``O`` the objective
the method searches (throughput, latency or makespan). A row: the wall seconds from the process's start to its
exit, the peak resident memory of that process (``os.wait4``), the objective, the bound and the gap, the status,
and the seconds of each phase the command reports (a solve's in-process seconds; each ``bounds`` level's). A run
more than :data:`OVERRUN` seconds past its budget is flagged ``OVER``; a throughput run at ``k <=``
:data:`GAP_K` whose proven gap is above :data:`GAP_GOAL` is flagged ``GAP``. ``--busy`` runs a CPU-bound loop
beside. The one-minute load average is printed before and after the table.

The whole grid (every method, size, family and ``k``) is days of runs at 60 s each; the issue's coverage is two
runs of about an hour each on two cores: every method at the large sizes (``--sizes 5000,20000 --k 16
--families gpt3 --busy``), and the main methods (``--main``: :data:`MAIN`) at every size and ``k``
(``--families gpt3 --busy``, sizes as the hour allows).

``--onnx`` imports ONNX files instead (``vit-b16``: a ViT-B/16-sized transformer, 86M float32 weights inline;
``gpt2-small``: a GPT-2-small-sized decoder, 124M, its embedding read by a ``Gather`` and, transposed, by the head;
both written with ``onnx.helper`` to ``--folder``), each with ``python -m placement_dsl.cli import FILE --out ...`` in
its own process: the weights' size (read from the initializers' dims), the process's peak resident memory, their
ratio (anchor: :data:`ONNX_RATIO`) and the wall seconds.
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
ONNX_RATIO = 2.0  # the import's peak memory may be at most this many times the weights in the file
VIT_B16 = {"hidden": 768, "layers": 12, "mlp": 3072, "tokens": 197, "patch": 16, "classes": 1000}
GPT2_SMALL = {"hidden": 768, "layers": 12, "heads": 12, "vocab": 50257, "context": 1024, "seq": 128}
GAP_GOAL, GAP_K = 0.05, 16  # the goal: a proven gap of at most 5 % for throughput at k <= 16
MAIN = ("dp", "dpl", "slicegraph", "brkga", "ip", "bounds")  # the methods run at every size and k (--main)
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


# ---------------------------------------------------------------------------- ONNX import
class OnnxBuilder:
    """Nodes and initializers of a generated ONNX graph: random weights (seed 0), integer constants, and nodes named
    by their scope, op and position."""

    def __init__(self) -> None:
        import numpy as np

        self.rng = np.random.default_rng(0)
        self.nodes: list = []
        self.inits: list = []

    def weight(self, name: str, *shape: int) -> str:
        import numpy as np
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(self.rng.standard_normal(shape, dtype=np.float32) * 0.02, name))
        return name

    def node(self, op: str, inputs: list[str], scope: str, **attrs) -> str:
        from onnx import helper

        out = f"{scope}/{op}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def ints(self, name: str, values: list[int]) -> str:
        import numpy as np
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        return name


def write_vit(path: Path, hidden: int, layers: int, mlp: int, tokens: int, patch: int, classes: int) -> None:
    """A ViT-shaped ONNX model (patch convolution, pre-norm encoder layers, head), its weights inline and random."""
    from onnx import TensorProto, helper, save

    b = OnnxBuilder()
    nodes, inits, weight, node, ints = b.nodes, b.inits, b.weight, b.node, b.ints

    x = node("Conv", ["image", weight("patch.w", hidden, 3, patch, patch), weight("patch.b", hidden)], "/patch",
             strides=[patch, patch])
    x = node("Transpose", [node("Reshape", [x, ints("flat", [1, hidden, tokens - 1])], "/patch")], "/patch",
             perm=[0, 2, 1])
    x = node("Add", [node("Concat", [weight("cls", 1, 1, hidden), x], "/embed", axis=1),
                     weight("pos", 1, tokens, hidden)], "/embed")
    heads = ints("heads", [1, tokens, 12, hidden // 12])
    for i in range(layers):
        s = f"/encoder/layers.{i}"
        h = node("LayerNormalization", [x, weight(f"{s}.ln1.w", hidden), weight(f"{s}.ln1.b", hidden)], s)
        qkv = node("MatMul", [h, weight(f"{s}.qkv.w", hidden, 3 * hidden)], s)
        q, k, v = (node("Transpose", [node("Reshape", [node("Slice", [qkv, ints(f"{s}.{j}.a", [j * hidden]),
                                                                       ints(f"{s}.{j}.b", [(j + 1) * hidden]),
                                                                       ints(f"{s}.{j}.ax", [2])], s), heads], s)],
                        s, perm=[0, 2, 3, 1] if j == 1 else [0, 2, 1, 3]) for j in range(3))
        a = node("MatMul", [node("Softmax", [node("MatMul", [q, k], s)], s, axis=-1), v], s)
        a = node("Reshape", [node("Transpose", [a], s, perm=[0, 2, 1, 3]), ints(f"{s}.m", [1, tokens, hidden])], s)
        x = node("Add", [x, node("MatMul", [a, weight(f"{s}.out.w", hidden, hidden)], s)], s)
        h = node("LayerNormalization", [x, weight(f"{s}.ln2.w", hidden), weight(f"{s}.ln2.b", hidden)], s)
        h = node("Gelu", [node("MatMul", [h, weight(f"{s}.fc1.w", hidden, mlp)], s)], s)
        x = node("Add", [x, node("MatMul", [h, weight(f"{s}.fc2.w", mlp, hidden)], s)], s)
    y = node("MatMul", [node("Gather", [x, ints("first", 0)], "/head", axis=1), weight("head.w", hidden, classes)],
             "/head")
    graph = helper.make_graph(nodes, "vit", [helper.make_tensor_value_info("image", TensorProto.FLOAT,
                                                                           [1, 3, 224, 224])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], initializer=inits)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), str(path))


def write_gpt2(path: Path, hidden: int, layers: int, heads: int, vocab: int, context: int, seq: int) -> None:
    """A GPT-2-shaped ONNX model (token and position embeddings, pre-norm decoder layers with a causal mask, the head
    tied to the token embedding), its weights inline and random, reading ``seq`` tokens of symbolic batch."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    b = OnnxBuilder()
    nodes, inits, weight, node, ints = b.nodes, b.inits, b.weight, b.node, b.ints

    wte = weight("wte", vocab, hidden)
    positions = ints("positions", list(range(seq)))
    x = node("Add", [node("Gather", [wte, "input_ids"], "/embed"),
                     node("Gather", [weight("wpe", context, hidden), positions], "/embed")], "/embed")
    inits.append(numpy_helper.from_array(np.tril(np.ones((1, 1, context, context), dtype=bool)), "causal"))
    mask = node("Slice", ["causal", ints("m.a", [0, 0]), ints("m.b", [seq, seq]), ints("m.ax", [2, 3])], "/embed")
    split = ints("heads", [1, seq, heads, hidden // heads])
    scale = weight("scale", 1)
    for i in range(layers):
        s = f"/h.{i}"
        h = node("LayerNormalization", [x, weight(f"{s}.ln1.w", hidden), weight(f"{s}.ln1.b", hidden)], s)
        qkv = node("Add", [node("MatMul", [h, weight(f"{s}.attn.w", hidden, 3 * hidden)], s),
                           weight(f"{s}.attn.b", 3 * hidden)], s)
        q, k, v = (node("Transpose", [node("Reshape", [node("Slice", [qkv, ints(f"{s}.{j}.a", [j * hidden]),
                                                                       ints(f"{s}.{j}.b", [(j + 1) * hidden]),
                                                                       ints(f"{s}.{j}.ax", [2])], s), split], s)],
                        s, perm=[0, 2, 3, 1] if j == 1 else [0, 2, 1, 3]) for j in range(3))
        scores = node("Mul", [node("MatMul", [q, k], s), scale], s)
        scores = node("Where", [mask, scores, weight(f"{s}.masked", 1)], s)
        a = node("MatMul", [node("Softmax", [scores], s, axis=-1), v], s)
        a = node("Reshape", [node("Transpose", [a], s, perm=[0, 2, 1, 3]), ints(f"{s}.m", [1, seq, hidden])], s)
        a = node("Add", [node("MatMul", [a, weight(f"{s}.proj.w", hidden, hidden)], s), weight(f"{s}.proj.b", hidden)],
                 s)
        x = node("Add", [x, a], s)
        h = node("LayerNormalization", [x, weight(f"{s}.ln2.w", hidden), weight(f"{s}.ln2.b", hidden)], s)
        h = node("Gelu", [node("Add", [node("MatMul", [h, weight(f"{s}.fc.w", hidden, 4 * hidden)], s),
                                       weight(f"{s}.fc.b", 4 * hidden)], s)], s)
        h = node("Add", [node("MatMul", [h, weight(f"{s}.out.w", 4 * hidden, hidden)], s),
                         weight(f"{s}.out.b", hidden)], s)
        x = node("Add", [x, h], s)
    x = node("LayerNormalization", [x, weight("lnf.w", hidden), weight("lnf.b", hidden)], "/head")
    y = node("MatMul", [x, node("Transpose", [wte], "/head", perm=[1, 0])], "/head")
    graph = helper.make_graph(nodes, "gpt2", [helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                                                            ["batch", seq])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], initializer=inits)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), str(path))


MODELS = {"vit-b16": (write_vit, VIT_B16), "gpt2-small": (write_gpt2, GPT2_SMALL)}


def weight_bytes(path: Path) -> int:
    """Bytes of the initializers in the ONNX file ``path`` (from their dims, without reading their values)."""
    import math

    from onnx import helper

    sys.path.insert(0, str(ROOT))
    from placement_dsl.io.onnx_file import read

    model, _ = read(path)
    return sum(math.prod(t.dims) * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
               for t in model.graph.initializer)


def onnx_rows(names: list[str], folder: Path) -> None:
    """One row per ONNX file: the import's weights, peak memory, ratio against :data:`ONNX_RATIO`, wall seconds."""
    markdown_head(["model", "weights MiB", "peak MiB", "ratio", "anchor", "wall s", "ops", "status"])
    for name in names:
        path = Path(name)
        if name in MODELS:
            path = folder / f"{name}.onnx"
            if not path.exists():  # in a child: the parent's peak is where a child's starts from (fork, exec)
                subprocess.run([sys.executable, __file__, "--write-model", name, str(path)], check=True)
        out = folder / f"{path.stem}-imported.json"
        wall, rss, code, data = run([sys.executable, "-m", "placement_dsl.cli", "import", str(path), "--out", str(out),
                                     "--json"], 600.0)
        weights = weight_bytes(path) / 2**20
        markdown_row([path.name, fmt(weights, ".1f"), fmt(rss, ".0f"), fmt(rss / weights if weights else None, ".2f"),
                      f"{ONNX_RATIO:g}x", fmt(wall, ".1f"), data.get("ops"), "ok" if code == 0 else status(code, data)])
        sys.stdout.flush()


def load() -> str:
    """The one-minute load average per core, as ``load L on C cores``."""
    return f"load {os.getloadavg()[0]:.1f} on {len(os.sched_getaffinity(0))} cores"


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
    ap.add_argument("--main", action="store_true", help=f"the main methods: {','.join(MAIN)}")
    ap.add_argument("--k", default=",".join(map(str, KS)), help="comma-separated stage counts")
    ap.add_argument("--families", default=",".join(FAMILIES), help=f"comma-separated, of {', '.join(FAMILIES)}")
    ap.add_argument("--time-limit", type=float, default=60.0, help="budget of every run (seconds)")
    ap.add_argument("--busy", action="store_true", help="run a CPU-bound loop beside the runs")
    ap.add_argument("--quick", action="store_true",
                    help=f"sizes {QUICK['sizes']}, k {QUICK['k']}, {QUICK['families']}, a handful of methods, "
                         f"{QUICK['time_limit']:g} s (flags given explicitly still win)")
    ap.add_argument("--folder", default=str(Path(tempfile.gettempdir()) / "placement_dsl_bench_scale"),
                    help="where the generated graphs are written")
    ap.add_argument("--onnx", nargs="+", metavar="MODEL",
                    help="import these ONNX files instead ('vit-b16', 'gpt2-small': generated models of that size)")
    ap.add_argument("--write-model", nargs=2, metavar=("NAME", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    folder = Path(args.folder)
    folder.mkdir(parents=True, exist_ok=True)
    if args.write_model:
        write, sizes = MODELS[args.write_model[0]]
        return write(Path(args.write_model[1]), **sizes)
    if args.onnx:
        print(load())
        onnx_rows(args.onnx, folder)
        print(load())
        return None
    given = {a.split("=")[0] for a in sys.argv[1:]}
    if args.quick:
        for key, value in QUICK.items():
            if f"--{key.replace('_', '-')}" not in given:
                setattr(args, key, value)
    methods = args.methods.split(",") if args.methods else list(MAIN) if args.main else all_methods()
    busy = busy_loop() if args.busy else None
    worst: tuple[float, str] = (-float("inf"), "")
    overruns, gaps = [], []
    print(load())
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
                            if objective_for(method) == "throughput" and k <= GAP_K and gap is not None \
                                    and gap > GAP_GOAL:
                                flag = f"{flag} GAP".strip()
                                gaps.append(f"{label} k={k} {method}: {100 * gap:.1f} %")
                            markdown_row([label, ops, k, method, fmt(wall, ".1f"), fmt(args.time_limit, ".0f"),
                                          fmt(rss, ".0f"), fmt(data.get("objective"), ".5g"),
                                          fmt(data.get("bound"), ".5g"), fmt(None if gap is None else 100 * gap, ".1f"),
                                          status(code, data), phases(data), flag])
                            sys.stdout.flush()
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    print(f"\n{load()}")
    print(f"largest overrun: {worst[0]:+.1f} s ({worst[1]}); runs more than {OVERRUN:g} s over: {len(overruns)}")
    for line in overruns:
        print(f"- {line}")
    print(f"throughput gaps above {100 * GAP_GOAL:g} % at k <= {GAP_K}: {len(gaps)}")
    for line in gaps:
        print(f"- {line}")


if __name__ == "__main__":
    main()
