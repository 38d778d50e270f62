"""Boundaries.modules: stage boundaries only between modules, with every formulation and heuristic."""
from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from placement_dsl import Boundaries
from placement_dsl.cluster import Cluster, Device
from placement_dsl.constraints import Colocate, Contiguous, DagOrder, Memory, term_from_dict
from placement_dsl.errors import SpecError
from placement_dsl.export import export
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.objectives import Bottleneck
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.solve import solve


def blocks(n: int = 4) -> Graph:
    """``n`` blocks ``h.i`` of two ops each (heavy then light, so the best cut of 3 stages falls inside one),
    a container's glue op at each end."""
    rows = [("in", "model", 0.1)]
    for i in range(n):
        rows += [(f"h{i}.a", f"model.h.{i}.a", 5.0), (f"h{i}.b", f"model.h.{i}.b", 1.0)]
    rows += [("out", "model", 0.1)]
    ops = [Op(name=n, work=w, out_bytes=1.0, param_bytes=1.0, attrs={"module": m}) for n, m, w in rows]
    return Graph(ops, [(a[0], b[0]) for a, b in pairwise(rows)], name="blocks")


def _modules_whole(p: Placement, depth: int) -> bool:
    dev: dict[str, int] = {}
    for op, d in zip(p.graph.ops, p.assign.tolist()):
        key = ".".join(op.attrs["module"].split(".")[:depth])
        if op.attrs["module"] != "model" and dev.setdefault(key, d) != d:
            return False
    return True


def test_groups_are_the_modules_at_depth():
    g = blocks(2)
    # the container's last glue op runs in its forward after its last child's call: it stays with that child
    assert Boundaries.modules(depth=3).resolve(g) == [["h0.a", "h0.b"], ["h1.a", "h1.b", "out"]]
    assert Boundaries.modules().resolve(g) == [["in", "h0.a", "h0.b", "h1.a", "h1.b", "out"]]
    assert Boundaries.modules(depth=4).resolve(g) == [["h1.b", "out"]]  # every module holds one op
    assert term_from_dict(Boundaries.modules(3).to_dict()) == Boundaries.modules(3)
    with pytest.raises(SpecError, match=r"depth must be an integer >= 1, got 0"):
        Boundaries.modules(0)


def test_dp_and_slicegraph_cut_between_modules_only():
    g = blocks()
    cluster = Cluster.stages(3, bandwidth=100.0)
    free = run("dp", g, cluster).placement
    assert not _modules_whole(free, 3)  # the term matters: without it the best split cuts a block
    with pytest.raises(SpecError, match=r"inside module"):
        export(free, "torch-pipelining", depth=3)
    problem = Problem(g, cluster, Bottleneck(), [DagOrder(), Boundaries.modules(depth=3)])
    for method in ("dp", "slicegraph"):
        p = run(method, problem.graph, cluster).placement
        assert _modules_whole(p, 3), method
        assert export(Placement(g, cluster, p.assign), "torch-pipelining", depth=3).data["split_spec"]


def test_ip_with_memory_keeps_modules_whole():
    g = blocks()
    cluster = Cluster.stages(3, memory=4.0, bandwidth=100.0)
    problem = Problem(g, cluster, Bottleneck(), [DagOrder(), Contiguous(), Memory(), Boundaries.modules(depth=3)])
    result = solve(problem, time_limit=5, method="ip")
    p = result.placement
    assert _modules_whole(p, 3) and np.bincount(p.assign, weights=g.param_bytes, minlength=3).max() <= 4.0
    # memory 4 holds at most two blocks (2 params each): the busiest stage runs two blocks of work 6 and
    # receives and sends one tensor of 1 byte at 100 bytes/ms
    assert result.objective == pytest.approx(12.0 + 0.02)


def test_graph_without_modules_is_refused():
    g = Graph([Op(name="a", work=1.0), Op(name="b", work=1.0)], [("a", "b")], name="plain")
    with pytest.raises(SpecError, match=r"graph 'plain' has no module paths"):
        Problem(g, Cluster.stages(2), Bottleneck(), [Boundaries.modules()])


def test_cpsat_takes_the_term_as_colocation():
    from placement_dsl import cpsat
    from placement_dsl.objectives import Makespan

    g = blocks(2)
    stages = Cluster([Device(name=f"stage{i}", bandwidth=100.0, invocations=False) for i in range(2)])  # one op at a time
    problem = Problem(g, stages, Makespan(), [Boundaries.modules(depth=3)])
    cpsat.check_terms(problem)  # a Colocate by another name: modelled, not refused
    if not cpsat.available():
        pytest.skip("ortools is not installed")
    from placement_dsl.solve import solve

    p = solve(problem, solver="cpsat", time_limit=5, warm_start="list").placement
    assert _modules_whole(p, 3)


def test_cli_boundaries_option_gives_an_exportable_plan(tmp_path, capsys):
    from placement_dsl.cli import main
    from placement_dsl.io import Workload, save_workload

    work = tmp_path / "blocks.json"
    save_workload(Workload(blocks(), Cluster.stages(3, bandwidth=100.0), "native"), work)
    split, out = tmp_path / "split.json", tmp_path / "spec.json"
    export_args = ["export", str(work), "--split", str(split), "--to", "torch-pipelining", "--depth", "3",
                   "--out", str(out)]
    assert main(["solve", str(work), "--method", "dp", "--quiet", "--out", str(split)]) == 0
    assert main(export_args) == 2 and "inside module" in capsys.readouterr().err
    assert main(["solve", str(work), "--method", "dp", "--quiet", "--boundaries", "module:3", "--out", str(split)]) == 0
    assert main(export_args) == 0 and out.exists()
    with pytest.raises(SystemExit) as exit_:
        main(["solve", str(work), "--method", "dp", "--boundaries", "layer:3"])
    assert exit_.value.code == 2
    assert "--boundaries must be module or module:DEPTH" in capsys.readouterr().err


def two_towers() -> Graph:
    """A stem, two parallel towers and a head (module paths at depth 1). The left tower, which the program calls
    first, writes a large tensor: without an order, the best split of 2 stages puts the stem and the right tower
    first and the left tower after it, which the program, calling the left tower first, cannot be cut into."""
    rows = [("s0", "stem", 1.0, 1.0), ("s1", "stem", 1.0, 1.0), ("a0", "left", 3.0, 1.0), ("a1", "left", 1.0, 100.0),
            ("b0", "right", 3.0, 1.0), ("b1", "right", 1.0, 1.0), ("h0", "head", 1.0, 1.0), ("h1", "head", 1.0, 1.0)]
    ops = [Op(name=n, work=w, out_bytes=b, attrs={"module": m}) for n, m, w, b in rows]
    edges = [("s0", "s1"), ("s1", "a0"), ("a0", "a1"), ("s1", "b0"), ("b0", "b1"), ("a1", "h0"), ("b1", "h0"),
             ("h0", "h1")]
    return Graph(ops, edges, name="towers")


def test_the_units_run_in_program_order_so_a_plan_over_parallel_towers_is_cuttable():
    g = two_towers()
    cluster = Cluster.stages(2)
    assert Boundaries.modules().order(g) == [("a1", "b0")]  # the right tower after the left, as the program calls
    unordered = Problem(g, cluster, Bottleneck(), [DagOrder(), Colocate.by("module")])
    free = run("dp", unordered.graph, cluster).placement
    assert free.assign.tolist() == [0, 0, 1, 1, 0, 0, 1, 1]  # the right tower on the first stage: 8, not cuttable
    with pytest.raises(SpecError, match=r"execution order"):
        export(Placement(g, cluster, free.assign), "torch-pipelining")
    problem = Problem(g, cluster, Bottleneck(), [DagOrder(), Boundaries.modules()])
    for method in ("dp", "slicegraph"):
        p = run(method, problem.graph, cluster).placement
        assert export(Placement(g, cluster, p.assign), "torch-pipelining").data["split_spec"] == {"left": "beginning"}
    result = solve(problem, time_limit=10, method="ip")
    assert export(Placement(g, cluster, result.placement.assign), "torch-pipelining").data["split_spec"] == \
        {"left": "beginning"}
    assert result.objective == pytest.approx(11.0)  # the stem alone (2 + 1) | the towers and head (10 + 1)


def test_the_order_follows_the_program_and_skips_what_is_joined_or_one_unit():
    g = blocks(2)  # in -> h0.a -> h0.b -> h1.a -> h1.b -> out: a chain already
    assert Boundaries.modules(depth=3).order(g) == []
    ops = [Op(name=n, work=1.0, attrs={"module": m} if m else {}) for n, m in
           [("x", "stem"), ("f", None), ("a", "left"), ("b", "right"), ("c", "right")]]
    g = Graph(ops, [("x", "a"), ("x", "b"), ("x", "f"), ("b", "c")])  # f: an op of no module, a unit of its own
    assert Boundaries.modules().order(g) == [("f", "a"), ("a", "b")]
    assert Boundaries.modules().apply(g, Cluster.stages(2)).m == g.m + 2


def test_a_stage_splits_at_the_module_the_program_calls_first():
    # the graph's topological order takes the right tower first; the program calls the left one first, where torch
    # must cut to put both towers on the second stage
    p = Placement(two_towers(), Cluster.stages(2), [0, 0, 1, 1, 1, 1, 1, 1])
    assert export(p, "torch-pipelining").data["split_spec"] == {"left": "beginning"}


@pytest.mark.parametrize("name, options", [("resnet18.onnx", {}), ("gpt2.onnx", {"seq": 32})])
def test_every_plan_under_the_term_is_exported_at_every_depth(name, options):
    """GPT-2 and ResNet-18 at op granularity, 2 and 4 stages, depths 1-4: the DP's and SliceGraph's plans under the
    term are all accepted. Before, at depth 2 GPT-2's boundary fell at 'transformer.h' (a ModuleList the model never
    calls; the point is its first block), and at depth 4 inside a block, between its residual adds (the spans)."""
    pytest.importorskip("onnx")
    from pathlib import Path

    from placement_dsl.io import onnx as onnx_io

    g = onnx_io.load(Path(__file__).parents[1] / "data" / name, batch=2, **options).graph
    for depth in (1, 2, 3, 4):
        for k in (2, 4):
            cluster = Cluster.stages(k, bandwidth=1e10)  # transfers cheap beside the ops: the plans use the stages
            for method in ("dp", "slicegraph"):
                p = Placement(g, cluster, run(method, Boundaries.modules(depth).apply(g, cluster), cluster).placement.assign)
                assert len(export(p, "torch-pipelining", depth=depth).data["split_spec"]) == len(set(p.assign)) - 1


def test_a_residual_add_keeps_its_span_on_one_stage():
    rows = [("x", "b.0"), ("f", "b.0.f"), ("g", "b.0.g"), ("add", "b.0"), ("h", "b.1")]  # add = x + g(f(x)) in b.0
    g = Graph([Op(name=n, work=1.0, attrs={"module": m}) for n, m in rows],
              [("x", "f"), ("f", "g"), ("g", "add"), ("x", "add"), ("add", "h")])
    assert Boundaries.modules(depth=3).spans(g) == [["x", "f", "g", "add"]]  # no boundary between f and g
    assert Boundaries.modules(depth=2).spans(g) == []  # b.0 is one unit: its add is its own op


def mean_before_head() -> Graph:
    """An embedding, three blocks, the root's own mean (no module: a functional call between the blocks and the
    head) and a head; the mean is cheap, so without the term's care the best 3 stages put it first on the head's."""
    rows = [("embed", "embed", 1.0)] + [(f"b{i}", f"blocks.{i}", 2.0) for i in range(3)]
    rows += [("mean", None, 0.1), ("head", "head", 1.0)]
    ops = [Op(name=n, work=w, out_bytes=1.0, attrs={"module": m} if m else {}) for n, m, w in rows]
    return Graph(ops, [(a[0], b[0]) for a, b in pairwise(rows)], name="mean")


def test_an_op_of_no_module_runs_with_the_module_call_before_it():
    """The root's mean never begins a stage (torch splits only at a child's call): at depth 1 the stage of the
    blocks keeps it, and 3 stages export as the beginnings of 'blocks' and 'head'. Before, the mean began the last
    stage, and the blocks' stage was cut at both ends of 'blocks' (refused)."""
    g = mean_before_head()
    assert Boundaries.modules().cut_points(g) == [True, True, False, False, False, True]
    assert Boundaries.modules().resolve(g) == [["b0", "b1", "b2", "mean"]]
    cluster = Cluster.stages(3, bandwidth=1e6)
    problem = Problem(g, cluster, Bottleneck(), [DagOrder(), Boundaries.modules()])
    plans = [run(method, problem.graph, cluster).placement for method in ("dp", "slicegraph")]
    plans.append(solve(problem, time_limit=10, method="ip").placement)
    for p in plans:
        spec = export(Placement(g, cluster, p.assign), "torch-pipelining").data["split_spec"]
        assert spec == {"blocks": "beginning", "head": "beginning"}


def block_in_a_loop() -> Graph:
    """``h = h + block(h)`` three times between ``inp`` and ``out``, as the dynamo ONNX exporter names it: the same
    module path on every call, the root's add (no module) between the calls."""
    rows = [("inp", "inp")]
    edges = []
    for turn in range(3):
        h = rows[-1][0]
        rows += [(f"lin{turn}", "block.0"), (f"tanh{turn}", "block.1"), (f"add{turn}", None)]
        edges += [(h, f"lin{turn}"), (f"lin{turn}", f"tanh{turn}"), (f"tanh{turn}", f"add{turn}"), (h, f"add{turn}")]
    rows.append(("out", "out"))
    edges.append(("add2", "out"))
    ops = [Op(name=n, work=1.0, out_bytes=1.0, attrs={"module": m} if m else {}) for n, m in rows]
    return Graph(ops, edges, name="loop")


def test_a_block_called_in_a_loop_begins_no_stage():
    """The root's add between the calls closes the block: 'block' is called three times, and no stage begins
    at it or inside it (torch would split at every call). Before, the ops of no module were skipped, the block
    looked called once and a stage beginning at the first add was exported as the end of 'block'."""
    from placement_dsl.boundaries import reused_modules

    g = block_in_a_loop()
    assert {"block", "block.0", "block.1"} <= reused_modules(g)
    # lin0 begins the block's first call, which torch cuts at each call; the end of 'inp' is the same point
    assert [g.names[v] for v, cut in enumerate(Boundaries.modules(2).cut_points(g)) if cut] == ["inp", "lin0", "out"]
    cluster = Cluster.stages(2, bandwidth=1e6)
    for depth in (1, 2):
        problem = Problem(g, cluster, Bottleneck(), [DagOrder(), Boundaries.modules(depth)])
        p = run("dp", problem.graph, cluster).placement
        assert export(Placement(g, cluster, p.assign), "torch-pipelining").data["split_spec"] == {"out": "beginning"}
    assert export(Placement(g, cluster, [0] + [1] * 10), "torch-pipelining").data["split_spec"] == {"inp": "end"}
    with pytest.raises(SpecError, match=r"begins inside module 'block.0' at op 'lin1'"):
        export(Placement(g, cluster, [0] * 4 + [1] * 7), "torch-pipelining")  # at the second call


def tied_pair(record: bool) -> Graph:
    """``out(dec(enc(inp(x))))`` with ``dec`` the same module object as ``enc``, as the torch importer records it
    (``nn_module_stack``, and ``shared_modules`` on the two calls' ops) or, without ``record``, as a file of module
    paths alone."""
    shared = {name: {"fqns": ["dec", "enc"], "calls": 2} for name in ("enc", "dec")}
    ops = [Op(name=m, work=1.0, out_bytes=1.0, attrs={"module": m, "nn_module_stack": [m]} | (
        {"shared_modules": {m: shared[m]}} if record and m in shared else {})) for m in ("inp", "enc", "dec", "out")]
    if not record:
        for op in ops:
            del op.attrs["nn_module_stack"]
    return Graph(ops, [("inp", "enc"), ("enc", "dec"), ("dec", "out")], name="tied")


def test_the_importers_record_of_shared_modules_decides_the_cut_points():
    """A stage may begin where the exporter can name a split point called once: not at the tied ``dec`` (torch
    cuts at each call of the object, under either name) nor after the ``enc`` before it, but at ``enc``, as the
    end of ``inp``. Where the importer recorded the calls (``shared_modules``) the record says; before, the
    module paths alone were read and ``dec`` looked called once."""
    from placement_dsl.boundaries import reused_modules

    g = tied_pair(record=True)
    assert reused_modules(g) == {"enc", "dec"}
    assert Boundaries.modules().cut_points(g) == [True, True, False, True]
    cluster = Cluster.stages(2, bandwidth=1e6)
    assert export(Placement(g, cluster, [0, 1, 1, 1]), "torch-pipelining").data["split_spec"] == {"inp": "end"}
    with pytest.raises(SpecError, match=r"'dec', one module object also named 'enc'"):
        export(Placement(g, cluster, [0, 0, 1, 1]), "torch-pipelining")
    assert Boundaries.modules().cut_points(tied_pair(record=False)) == [True] * 4
