"""The DP's one stage-load step (``ideal_sweep.class_takes`` and ``stage_loads``, shared by the float64 sweep and
the feasibility run) against the cost model: a stage ``I \\ J`` with ``J`` on one device and the rest of the graph
on another scores what :func:`placement_dsl.evaluate.evaluate` says of the stage's device."""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl.cluster import Cluster, Device
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics.ideal_solve import Sweeps
from placement_dsl.heuristics.ideal_sweep import class_takes, stage_loads
from placement_dsl.heuristics.ideals import ideal_lattice, setup
from placement_dsl.placement import Placement


def _instance() -> tuple[Graph, Cluster]:
    ops = [Op(name="a", work={"accelerator": 2.0, "cpu": 9.0}, out_bytes=40.0, param_bytes=5.0),
           Op(name="b", work={"accelerator": 3.0, "cpu": 7.0}, out_bytes=10.0, activation_bytes=30.0),
           Op(name="c", work={"accelerator": 1.0, "cpu": 4.0}, out_bytes=20.0),
           Op(name="d", work={"accelerator": 4.0, "cpu": 6.0}, out_bytes=0.0, param_bytes=8.0)]
    graph = Graph(ops, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    devices = [Device(name=f"acc{i}", kind="accelerator", memory=60.0, bandwidth=10.0) for i in range(2)]
    devices.append(Device(name="cpu0", kind="cpu", bandwidth=10.0, host=True))
    return graph, Cluster(devices)


@pytest.mark.parametrize("overlap", ["none", "half", "full"])
def test_a_stage_scores_what_the_cost_model_says_of_its_device(overlap):
    graph, cluster = _instance()
    model = CostModel.named("throughput", overlap=overlap)
    su = setup(graph, cluster, model, False, False)
    lat = ideal_lattice(su.con, 1000)
    sw = Sweeps(lat, su.classes, model, False)
    i_work, i_mem, i_param, cap, scale, inv_bw, ovf_scale, soft = sw.costs
    C = len(su.classes)
    top = lat.count - 1  # the whole graph: the stage sends nothing on, so its load is compute + inputs
    device = {c.kind: c.devices[0] for c in su.classes}
    other = {"accelerator": cluster.index["acc1"], "cpu": cluster.index["acc1"]}
    checked = 0
    for J in range(top):
        alive, comp = np.zeros(C, np.bool_), np.zeros(C)
        for c in range(C):
            alive[c], comp[c], _ = class_takes(top, J, c, i_work, sw.unsup, i_mem, i_param, cap, scale, inv_bw,
                                                soft, sw.reps, sw.mode, sw.counts, 0.0)
        base, sync = np.full(C, np.nan), np.full(C, np.nan)
        stage_loads(top, J, lat.ideals[top], lat.ideals[J], alive, comp, i_mem, i_param, cap, scale, inv_bw,
                     ovf_scale, soft, sw.mode, *sw.io, base, sync)
        below = su.con.lift(np.isin(np.arange(su.con.n_nodes), lat.nodes(J)).astype(np.int64)).astype(bool)
        for c, cls in enumerate(su.classes):
            stage_mem = float((graph.param_bytes + graph.activation_bytes)[~below].sum())
            assert alive[c] == (cls.host or stage_mem <= cls.memory)
            if not alive[c]:
                assert np.isnan(base[c])  # a class that cannot take the stage is not priced
                continue
            assign = np.where(below, other[cls.kind], device[cls.kind])
            ev = evaluate(Placement(graph, cluster, assign), model)
            assert base[c] == pytest.approx(ev.devices[device[cls.kind]].load, rel=1e-12)
            assert sync[c] == pytest.approx(float(graph.param_bytes[~below].sum()) * inv_bw[c], rel=1e-12)
            checked += 1
    assert checked >= lat.count  # every ideal difference, on both classes where memory allows
