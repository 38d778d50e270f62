"""An op only the host runs: the methods that leave hosts out say so."""
from __future__ import annotations

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.errors import InfeasibleError
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run


def _host_first() -> tuple[Graph, Cluster]:
    ops = [Op(name="x", work={"cpu": 1.0}), Op(name="y", work={"accelerator": 1.0, "cpu": 10.0}, out_bytes=1e6)]
    return Graph(ops, [("x", "y")]), Cluster.accelerators(3, cpus=1, bandwidth=1.6e7)


def test_pipedream_names_the_devices_it_slices_onto_and_the_host_it_leaves_out():
    """It said 'op 'x' may run on none of the devices' while the CPU runs it."""
    g, c = _host_first()
    with pytest.raises(InfeasibleError, match=r"none of the devices this method slices onto \['acc0', 'acc1', "
                                              r"'acc2'\]; it runs on \['cpu0'\], which this method leaves out"):
        run("pipedream", g, c, model=CostModel())
