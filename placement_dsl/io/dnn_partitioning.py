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
    size = data.get("maxSizePerFPGA")  # absent or null: unlimited
    memory = math.inf if size is None else amount(size, "maxSizePerFPGA", unlimited=True)
    if memory <= 0:
        raise SpecError(f"maxSizePerFPGA: {data['maxSizePerFPGA']!r} must be > 0 (bytes per accelerator)")
    if k + cpus == 0:
        raise SpecError("maxFPGAs and maxCPUs are both 0; the input needs at least one device")
    return Cluster.accelerators(k, memory=memory, cpus=cpus)


def graph_to_dict(graph: Graph, cluster: Cluster | None = None) -> dict[str, Any]:
    """The dnn-partitioning mapping of a graph (artificial split nodes are kept as nodes) and of its cluster.

    With a cluster the mapping reads back (:func:`graph_from_dict`, :func:`cluster_from_dict`) to the same
    problem: the accelerators' one kind becomes ``accelerator``, a speed shared by all accelerators (or all
    CPUs) divides their times, a bandwidth shared by all accelerators divides the edge costs (of an inference
    graph: a training graph's output bytes are also memory). Anything else the format cannot express is a
    one-line :class:`SpecError` naming it: ops without a CPU time, devices of several kinds, unequal speeds or
    bandwidths, links, accelerators of unequal memory, a CPU of bounded memory, a training graph's activation
    memory told apart from its weights, MOIRAI's ``transfer_time``, out-edges of unequal cost.
    """
    fit = _Fit.of(graph, cluster)
    colors: dict[str, int] = {}
    nodes = []
    for i, op in enumerate(graph.ops):
        key = op.group if op.group is not None else f"#{op.name}"
        color = colors.setdefault(key, len(colors) + 1)
        acc, cpu = fit.times(op)
        nodes.append({
            "id": _int_id(op.name, i), "name": op.attrs.get("name", op.name),
            "supportedOnFpga": int(math.isfinite(acc)), "cpuLatency": cpu,
            "fpgaLatency": acc if math.isfinite(acc) else 0.0, "isBackwardNode": int(op.backward),
            "colorClass": color, "size": op.param_bytes + op.activation_bytes,
        })
    ids = {op.name: node["id"] for op, node in zip(graph.ops, nodes)}
    edges = [{"sourceId": ids[u], "destId": ids[v], "cost": graph.ops[graph.index[u]].out_bytes / fit.bandwidth}
             for u, v in graph.edges]
    out: dict[str, Any] = {}
    if cluster is not None:
        accs = [d for d in cluster.devices if not d.host]
        if accs and math.isfinite(accs[0].memory):  # unlimited memory is the field left out
            out["maxSizePerFPGA"] = accs[0].memory
        out["maxFPGAs"] = len(accs)
        out["maxCPUs"] = len(cluster.devices) - len(accs)
    out.update(nodes=nodes, edges=edges)
    if cluster is not None:
        fit.check_round_trip(graph, cluster, out)
    return out


def _cannot(what: str) -> SpecError:
    return SpecError(f"the dnn-partitioning format cannot express {what}; convert to native JSON instead")


def _shared(devices: list[Any], field_name: str, role: str) -> float:
    """The one value of ``field_name`` over ``devices`` (1 without devices), else a :func:`_cannot`."""
    values = sorted({getattr(d, field_name) for d in devices})
    if len(values) > 1:
        raise _cannot(f"{role} of unequal {field_name} ({', '.join(f'{v:g}' for v in values[:4])}"
                      f"{', ...' if len(values) > 4 else ''}): one value serves all of them")
    return values[0] if values else 1.0


class _Fit:
    """How a graph and cluster map onto the format: the kinds and the shared speeds and bandwidth folded into
    the times and costs, or a :class:`SpecError` naming the first thing it has no place for."""

    def __init__(self, acc_kind: str = ACCELERATOR, cpu_kind: str = CPU, acc_speed: float = 1.0,
                 cpu_speed: float = 1.0, bandwidth: float = 1.0) -> None:
        self.acc_kind, self.cpu_kind = acc_kind, cpu_kind
        self.acc_speed, self.cpu_speed, self.bandwidth = acc_speed, cpu_speed, bandwidth

    @classmethod
    def of(cls, graph: Graph, cluster: Cluster | None) -> _Fit:
        if cluster is None:
            return cls()
        accs = [d for d in cluster.devices if not d.host]
        cpus = [d for d in cluster.devices if d.host]
        kinds = [sorted({d.kind for d in accs}), sorted({d.kind for d in cpus})]
        several = next((k for k in kinds if len(k) > 1), None)
        if several:
            raise _cannot(f"devices of {len(several)} kinds ({', '.join(map(repr, several[:4]))}"
                          f"{', ...' if len(several) > 4 else ''}): it has one accelerator kind and the CPU")
        if cluster.links or cluster.routed:
            raise _cannot(f"the cluster's {len(cluster.links)} links: every transfer goes through host memory")
        fit = cls((kinds[0] or [ACCELERATOR])[0], (kinds[1] or [CPU])[0], _shared(accs, "speed", "accelerators"),
                  _shared(cpus, "speed", "CPUs"), _shared(accs, "bandwidth", "accelerators"))
        if fit.bandwidth != 1.0 and graph.is_training:
            raise _cannot(f"bandwidth {fit.bandwidth:g} of a training graph (edge costs are times; its output "
                          "bytes are also activation memory)")
        _shared(accs, "memory", "accelerators")
        for d in cluster.devices:
            if d.invocations is not None and d.invocations != (not d.host):
                raise _cannot(f"the invocations {d.invocations} of device {d.name!r} (the default of its role)")
            if d.host and math.isfinite(d.memory):
                raise _cannot(f"the memory {d.memory:g} of CPU {d.name!r} (a CPU's is unlimited)")
        for op in graph.ops:
            if not math.isfinite(op.time_on(fit.cpu_kind)):
                raise _cannot(f"op {op.name!r}, which cannot run on a {fit.cpu_kind!r} device: every node has a "
                              "finite cpuLatency")
            if "transfer_time" in op.attrs:
                raise _cannot(f"the per-device-pair transfer times of op {op.name!r} (attrs 'transfer_time')")
            if graph.is_training and op.activation_bytes:
                raise _cannot(f"the activation memory of op {op.name!r} apart from its weights (one 'size' per node)")
        return fit

    def times(self, op: Op) -> tuple[float, float]:
        """``op``'s time on an accelerator and on a CPU of the written problem (at speed 1)."""
        return op.time_on(self.acc_kind) / self.acc_speed, op.time_on(self.cpu_kind) / self.cpu_speed

    def check_round_trip(self, graph: Graph, cluster: Cluster, data: dict[str, Any]) -> None:
        """Read ``data`` back and refuse it, naming the first difference, unless it is the same problem."""
        back, devices = graph_from_dict(data, name=graph.name), cluster_from_dict(data)
        roles = [d for d in cluster.devices if not d.host] + [d for d in cluster.devices if d.host]
        if [d.memory for d in devices.devices] != [d.memory for d in roles]:
            raise _cannot("the cluster's device memories")
        if back.n != graph.n or set(back.names) != set(graph.names):
            extra = sorted(set(back.names) - set(graph.names))
            raise _cannot(f"op {extra[0].split(SPLIT_MARK)[0]!r}, whose out-edges carry unequal costs" if extra
                          else "the graph's op names (one does not read back as itself)")
        if set(back.edges) != set(graph.edges):
            raise _cannot("the graph's edges as they are")
        groups: dict[str, set[str]] = {}
        back_groups: dict[str, set[str]] = {}
        for op in graph.ops:
            twin = back.ops[back.index[op.name]]
            sink = not len(graph.successors(graph.index[op.name]))
            same = ((twin.time_on(ACCELERATOR), twin.time_on(CPU)) == self.times(op) and twin.backward == op.backward
                    and twin.param_bytes == op.param_bytes + op.activation_bytes
                    and (sink or twin.out_bytes == op.out_bytes / self.bandwidth))
            if not same:
                raise _cannot(f"op {op.name!r} as it is (its times, size, output bytes or direction)")
            groups.setdefault(op.group or f"#{op.name}", set()).add(op.name)
            back_groups.setdefault(twin.group or f"#{op.name}", set()).add(op.name)
        if sorted(map(sorted, groups.values())) != sorted(map(sorted, back_groups.values())):
            raise _cannot("the graph's colocation groups")


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
