"""GPU models and the two clusters of MOIRAI's Table III (Zhang et al., §IV).

Each GPU model is a device kind with a roofline (:class:`~placement_dsl.zoo.costs.Roofline`),
from the vendors' data sheets, fp32 without tensor cores (PyTorch inference in fp32):

==============  =========  ==========  ===========  ============
kind            GPU        fp32 TFLOP/s  memory GB/s  memory (GB)
==============  =========  ==========  ===========  ============
``2080ti``      RTX 2080 Ti    13.45        616          11
``t4``          Tesla T4        8.1         320          16
``p4``          Tesla P4        5.5         192           8
``3060ti``      RTX 3060 Ti    16.2         448           8
``v100``        Tesla V100     15.7         900          32
``p100``        Tesla P100     10.6         732          16
==============  =========  ==========  ===========  ============

Table III's average bandwidths (Gbps, measured over 100 s) are read row = sending device,
column = receiving device, and become directed links ``a -> b`` in bytes per ms
(``Gbps * 1e9 / 8 / 1e3``). Memories are the table's GB (``2**30`` bytes).
"""
from __future__ import annotations

from ..cluster import Cluster, Device, Link, port_bandwidths
from ..errors import SpecError
from .costs import Roofline

GB = 2**30
GPU_ROOFLINES: dict[str, Roofline] = {
    "2080ti": Roofline("2080ti", peak_flops=13.45e12, mem_bandwidth=616e9),
    "t4": Roofline("t4", peak_flops=8.1e12, mem_bandwidth=320e9),
    "p4": Roofline("p4", peak_flops=5.5e12, mem_bandwidth=192e9),
    "3060ti": Roofline("3060ti", peak_flops=16.2e12, mem_bandwidth=448e9),
    "v100": Roofline("v100", peak_flops=15.7e12, mem_bandwidth=900e9),
    "p100": Roofline("p100", peak_flops=10.6e12, mem_bandwidth=732e9),
}
"""fp32 peak FLOP/s and memory bandwidth (bytes/s) per GPU model (the table above)."""

TABLE_III: dict[str, tuple[tuple[tuple[str, str, float], ...], tuple[tuple[float, ...], ...]]] = {
    "inter-server": (  # InfiniBand, 100 Gbps nominal
        (("A", "2080ti", 11), ("B", "t4", 16), ("C", "p4", 8), ("D", "3060ti", 8)),
        ((0.0, 44.26, 32.92, 44.28),
         (42.39, 0.0, 35.32, 44.51),
         (33.2, 35.31, 0.0, 32.95),
         (42.08, 43.22, 33.28, 0.0))),
    "intra-server": (  # NVLink + NVSwitch
        (("A", "v100", 32), ("B", "v100", 32), ("C", "p100", 16), ("D", "p100", 16)),
        ((0.0, 1170.04, 626.10, 610.56),
         (1148.16, 0.0, 618.98, 581.09),
         (630.43, 609.82, 0.0, 571.96),
         (622.67, 575.08, 581.35, 0.0))),
}
"""MOIRAI Table III: devices (name, kind, memory GB) and average bandwidth in Gbps, row -> column."""

GBPS = 1e9 / 8 / 1e3  # bytes per ms in one Gbps


def moirai_cluster(scenario: str) -> Cluster:
    """The four GPUs of one Table III scenario (``"inter-server"`` or ``"intra-server"``) with directed links.

    >>> c = moirai_cluster("intra-server")
    >>> c.names, [d.kind for d in c.devices]
    (('A', 'B', 'C', 'D'), ['v100', 'v100', 'p100', 'p100'])
    """
    if scenario not in TABLE_III:
        raise SpecError(f"moirai_cluster: unknown scenario {scenario!r}; choose from {sorted(TABLE_III)}")
    devices, gbps = TABLE_III[scenario]
    out = [Device(name=name, kind=kind, memory=memory * GB) for name, kind, memory in devices]
    links = [Link(src=a[0], dst=b[0], bandwidth=gbps[i][j] * GBPS)
             for i, a in enumerate(devices) for j, b in enumerate(devices) if i != j]
    return Cluster(port_bandwidths(out, links), links)
