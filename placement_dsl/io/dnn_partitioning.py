"""The dnn-partitioning JSON format (Tarnawski et al., NeurIPS 2020) and its split files.

Input: ``maxSizePerFPGA`` (bytes per accelerator), ``maxFPGAs`` (k), ``maxCPUs`` (l),
``nodes[]`` {id, supportedOnFpga, cpuLatency, fpgaLatency, isBackwardNode, colorClass, size}
and ``edges[]`` {sourceId, destId, cost}. ``cost`` is the *time* to move the source's
output between an accelerator and host memory, so it is stored as the op's ``out_bytes``
on a cluster of unit bandwidth. ``size`` is the node's memory (weights and activations).

A node whose out-edges carry different costs is handled by subdividing each edge with a
zero-cost node colocated with the source (Tarnawski App. B); the artificial nodes are named
``"<u>><v>"`` and disappear again when a split is written.

Split files: ``{"fpgas": [{"nodes": [ids]}, ...], "cpus": [{"nodes": [ids]}], "maxLoad": x}``.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from ..cluster import ACCELERATOR, CPU, Cluster
from ..errors import SpecError
from ..evaluate import evaluate
from ..graph import Graph, Op
from ..limits import MAX_DEVICES, amount, count
from ..placement import Placement

SPLIT_MARK = ">"


def _num(node: Mapping[str, Any], key: str, default: float | None = None) -> float:
    if key not in node:
        if default is None:
            raise SpecError(f"node {node.get('id')!r}: missing field {key!r}")
        return default
    return amount(node[key], f"node {node.get('id')!r}: {key}")


def _flag(node: Mapping[str, Any], key: str, default: int) -> bool:
    """A 0/1 (or true/false) field; a string such as ``"no"`` is refused rather than read as true."""
    value = node.get(key, default)
    if value not in (0, 1) or not isinstance(value, (bool, int, float)):
        raise SpecError(f"node {node.get('id')!r}: {key} must be 0 or 1 (or true/false), got {value!r:.40}")
    return bool(value)


def _id(value: Any, where: str) -> str:
    """A node id (an integer or a string) as the op name."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise SpecError(f"{where} must be an integer or a string id, got {value!r:.40}")
    return str(value)


def _lists(data: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The ``nodes`` and ``edges`` lists, every item a mapping."""
    nodes, edges = data.get("nodes"), data.get("edges", [])
    if not isinstance(nodes, list):
        raise SpecError(f"dnn-partitioning input needs a 'nodes' list (found keys {sorted(map(str, data))[:8]}); "
                        "pass --format native if this is a placement_dsl workload")
    if not isinstance(edges, list):
        raise SpecError(f"dnn-partitioning input: 'edges' is malformed; it must be a list of mappings, got "
                        f"{type(edges).__name__}")
    for key, items in (("nodes", nodes), ("edges", edges)):
        bad = next((i for i, n in enumerate(items) if not isinstance(n, Mapping)), None)
        if bad is not None:
            raise SpecError(f"dnn-partitioning input: {key}[{bad}] = {items[bad]!r:.40} is malformed; "
                            f"'{key}' is a list of mappings")
    return nodes, edges


def graph_from_dict(data: Mapping[str, Any], name: str = "graph") -> Graph:
    """Build a :class:`Graph` from the dnn-partitioning input mapping."""
    nodes, edge_list = _lists(data)
    out_costs: dict[str, dict[str, float]] = defaultdict(dict)
    ids = {_id(n.get("id"), f"nodes[{i}].id") for i, n in enumerate(nodes)}
    for i, e in enumerate(edge_list):
        u, v = _id(e.get("sourceId"), f"edges[{i}].sourceId"), _id(e.get("destId"), f"edges[{i}].destId")
        for end in (u, v):
            if end not in ids:
                raise SpecError(f"edge {u} -> {v} names unknown node {end!r} (dangling edge)")
        cost = _num({"id": f"{u}->{v}", **e}, "cost", 0.0)
        out_costs[u][v] = cost
    ops: list[Op] = []
    edges: list[tuple[str, str]] = []
    labels = {str(n.get("id")): n.get("name") for n in nodes}  # what reports show for an id
    for n in nodes:
        nid = str(n.get("id"))
        work = {CPU: _num(n, "cpuLatency")}
        if _flag(n, "supportedOnFpga", 1):
            work[ACCELERATOR] = _num(n, "fpgaLatency")
        costs = out_costs.get(nid, {})
        uniform = len(set(costs.values())) <= 1
        if "colorClass" in n:
            _id(n["colorClass"], f"node {nid!r}: colorClass")
        group = f"color{n['colorClass']}" if "colorClass" in n else None
        if not uniform and group is None:
            group = f"split{nid}"
        attrs = {k: n[k] for k in ("name", "colorClass", "layerId") if k in n}
        ops.append(Op(
            name=nid, work=work, param_bytes=_num(n, "size", 0.0),
            out_bytes=next(iter(costs.values()), 0.0) if uniform else 0.0,
            backward=_flag(n, "isBackwardNode", 0), group=group, attrs=attrs,
        ))
        for v, cost in costs.items():
            if uniform:
                edges.append((nid, v))
            else:  # subdivide (Tarnawski App. B): w colocated with the source carries the edge's cost
                w = f"{nid}{SPLIT_MARK}{v}"
                named = {"name": f"{n['name']}{SPLIT_MARK}{labels.get(v) or v}"} if n.get("name") else {}
                ops.append(Op(name=w, work=0.0, out_bytes=cost, backward=_flag(n, "isBackwardNode", 0),
                              group=group, attrs={"artificial": True, **named}))
                edges += [(nid, w), (w, v)]
    return Graph(ops, edges, name=name)


def cluster_from_dict(data: Mapping[str, Any]) -> Cluster:
    """``maxFPGAs`` accelerators of ``maxSizePerFPGA`` bytes and ``maxCPUs`` CPUs, unit bandwidth."""
    k = count(data.get("maxFPGAs", 1), "maxFPGAs", 0, MAX_DEVICES)
    cpus = count(data.get("maxCPUs", 0), "maxCPUs", 0, MAX_DEVICES - k)
    memory = amount(data.get("maxSizePerFPGA", math.inf), "maxSizePerFPGA", unlimited=True)
    if memory <= 0:
        raise SpecError(f"maxSizePerFPGA: {data['maxSizePerFPGA']!r} must be > 0 (bytes per accelerator)")
    if k + cpus == 0:
        raise SpecError("maxFPGAs and maxCPUs are both 0; the input needs at least one device")
    return Cluster.accelerators(k, memory=memory, cpus=cpus)


def graph_to_dict(graph: Graph, cluster: Cluster | None = None) -> dict[str, Any]:
    """The dnn-partitioning mapping of a graph (artificial split nodes are kept as nodes)."""
    colors: dict[str, int] = {}
    nodes = []
    for i, op in enumerate(graph.ops):
        key = op.group if op.group is not None else f"#{op.name}"
        color = colors.setdefault(key, len(colors) + 1)
        acc = op.time_on(ACCELERATOR)
        nodes.append({
            "id": _int_id(op.name, i), "name": op.attrs.get("name", op.name),
            "supportedOnFpga": int(math.isfinite(acc)), "cpuLatency": op.time_on(CPU),
            "fpgaLatency": acc if math.isfinite(acc) else 0.0, "isBackwardNode": int(op.backward),
            "colorClass": color, "size": op.param_bytes + op.activation_bytes,
        })
    ids = {op.name: node["id"] for op, node in zip(graph.ops, nodes)}
    edges = [{"sourceId": ids[u], "destId": ids[v], "cost": graph.ops[graph.index[u]].out_bytes}
             for u, v in graph.edges]
    out: dict[str, Any] = {}
    if cluster is not None:
        accs = [d for d in cluster.devices if not d.host]
        out["maxSizePerFPGA"] = accs[0].memory if accs else 0.0
        out["maxFPGAs"] = len(accs)
        out["maxCPUs"] = len(cluster.devices) - len(accs)
    out.update(nodes=nodes, edges=edges)
    return out


def _int_id(name: str, position: int) -> int | str:
    try:
        return int(name)
    except ValueError:
        return name


def _device_lists(cluster: Cluster) -> tuple[list[str], list[str]]:
    accs = [d.name for d in cluster.devices if not d.host]
    cpus = [d.name for d in cluster.devices if d.host]
    return accs, cpus


def _split_groups(split: Mapping[str, Any], key: str) -> list[list[Any]]:
    """The node lists of a split's ``fpgas`` or ``cpus``: a list of ``{"nodes": [ids]}``."""
    groups = split.get(key, [])
    if not isinstance(groups, list):
        raise SpecError(f"split: {key!r} must be a list of {{'nodes': [ids]}}, got {type(groups).__name__}")
    out = []
    for i, grp in enumerate(groups):
        if not isinstance(grp, Mapping):
            raise SpecError(f"split: {key}[{i}] = {grp!r:.40} must be a mapping {{'nodes': [ids]}}")
        nodes = grp.get("nodes", [])
        if not isinstance(nodes, list):
            raise SpecError(f"split: {key}[{i}].nodes must be a list of node ids, got {nodes!r:.40}")
        out.append([_id(v, f"split: {key}[{i}].nodes") for v in nodes])
    return out


def placement_from_split(graph: Graph, cluster: Cluster, split: Mapping[str, Any], source: str = "") -> Placement:
    """Read a split file; artificial subdivision nodes follow their source node."""
    accs, cpus = _device_lists(cluster)
    mapping: dict[str, str] = {}
    for key, devices in (("fpgas", accs), ("cpus", cpus)):
        groups = _split_groups(split, key)
        used = [i for i, grp in enumerate(groups) if grp]
        if used and used[-1] >= len(devices):
            raise SpecError(f"split lists {len(groups)} {key} with nodes but the cluster has {len(devices)}")
        for i in used:
            for name in groups[i]:
                if name in mapping:
                    raise SpecError(f"split places node {name!r} twice")
                mapping[name] = devices[i]
    for op in graph.names:
        if SPLIT_MARK in op and op not in mapping:
            mapping[op] = mapping.get(op.split(SPLIT_MARK)[0], "")
    return Placement.from_mapping(graph, cluster, mapping, source=source)


def placement_to_split(placement: Placement, max_load: float | None = None) -> dict[str, Any]:
    """Write a placement as a split file (loads per device from the cost model)."""
    ev = evaluate(placement)
    loads = {r.device: r.load for r in ev.devices}
    accs, cpus = _device_lists(placement.cluster)
    members = {name: [] for name in accs + cpus}
    for op, dev in placement.mapping().items():
        if SPLIT_MARK not in op:
            members[dev].append(_int_id(op, 0))
    return {
        "fpgas": [{"nodes": members[d], "load": loads[d]} for d in accs],
        "cpus": [{"nodes": members[d], "load": loads[d]} for d in cpus],
        "maxLoad": ev.objective if max_load is None else max_load,
    }
