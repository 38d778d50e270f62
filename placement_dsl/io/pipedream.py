"""PipeDream profiler graphs (``graph.txt``, Narayanan et al., SOSP 2019).

A profile lists one node per line and then its edges, tab-indented::

    node4 -- Conv2d(3, 64) -- forward_compute_time=1.5, backward_compute_time=2.0, activation_size=4096.0, parameter_size=1792.0
    \tnode3 -- node4

``activation_size`` is sometimes a list ``[a; b; c]`` (an op with several outputs); its total
is the size of what the op sends on.

Mapping (Archer et al. §2, the MTPP model on real profiles): ``work`` = forward time (ms),
``out_bytes`` = activation size, ``param_bytes`` = parameter size; the cluster is
``Cluster.stages(stages, memory, bandwidth)`` so that a stage pays
``out_bytes / bandwidth`` ms for every tensor crossing its boundary (Archer eq. 1).

Defaults (stated, importable):

* :data:`DEFAULT_BANDWIDTH` = 12.5e6 bytes/ms, i.e. 100 Gbit/s (an InfiniBand-class
  interconnect between pipeline stages);
* :data:`DEFAULT_MEMORY` = 16 GiB of fast memory per stage (a V100-class accelerator).

With ``training=True`` every op ``v`` gets a backward twin ``v~bw`` (work = backward time,
``out_bytes`` = the gradient of v's input, taken as the activation size of v's producers'
outputs, i.e. each mirrored edge ``v~bw -> u~bw`` carries a tensor of size activation(u);
parameters are counted once, on the forward op), colocated with ``v`` through
``Op.group``; the last forward ops feed their backward twins (the loss), so the
PipeDream (``max_d FW_d + BW_d``) and GPipe (``max FW + max BW``) objectives of
Tarnawski et al. §5.3 apply.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from ..cluster import Cluster
from ..errors import SpecError
from ..graph import Graph, Op
from ..workload import Workload
from .formats import importer

DEFAULT_BANDWIDTH = 12.5e6  # bytes per ms = 100 Gbit/s
DEFAULT_MEMORY = 16 * 2**30  # bytes of fast memory per stage
BACKWARD_SUFFIX = "~bw"

_NODE = re.compile(r"^(\S+) -- (.*) -- (forward_compute_time=.*)$")
_EDGE = re.compile(r"^\s+(\S+) -- (\S+)\s*$")
_FIELDS = ("forward_compute_time", "backward_compute_time", "activation_size", "parameter_size")


def _number(text: str, key: str, where: str) -> float:
    text = text.strip()
    parts = text[1:-1].split(";") if text.startswith("[") and text.endswith("]") else [text]
    try:
        value = sum(float(p) for p in parts)
    except ValueError:
        raise SpecError(f"{where}: {key}={text!r} is not a number") from None
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise SpecError(f"{where}: {key}={text!r} must be a finite number >= 0")
    return value


def _stats(text: str, where: str) -> dict[str, float]:
    items = {}
    for part in re.split(r",\s*(?=[a-z_]+=)", text.strip()):
        key, sep, value = part.partition("=")
        if not sep:
            raise SpecError(f"{where}: expected key=value, got {part!r}")
        items[key.strip()] = value
    missing = [k for k in _FIELDS if k not in items]
    if missing:
        raise SpecError(f"{where}: missing {missing}; a node line needs {list(_FIELDS)}")
    return {k: _number(items[k], k, where) for k in _FIELDS}


def parse(text: str, source: str = "<string>") -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Parse profile text into node records (``name``, ``desc``, the four numbers) and edges.

    Blank lines are skipped; any other line that is neither a node nor an edge raises
    :class:`SpecError` with its line number.
    """
    nodes: list[dict[str, Any]] = []
    edges: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}, line {number}"
        edge = _EDGE.match(line)
        if edge:
            edges.append((edge.group(1), edge.group(2)))
            continue
        node = _NODE.match(line)
        if not node:
            raise SpecError(f"{where}: expected 'nodeN -- desc -- forward_compute_time=...' "
                            f"or a tab-indented 'nodeA -- nodeB', got {line[:80]!r}")
        nodes.append({"name": node.group(1), "desc": node.group(2).strip(), "line": number,
                      **_stats(node.group(3), where)})
    if not nodes:
        raise SpecError(f"{source}: no node lines; is this a PipeDream graph.txt?")
    return nodes, edges


def build_graph(nodes: list[dict[str, Any]], edges: list[tuple[str, str]], name: str,
                training: bool = False) -> Graph:
    """The forward graph of a parsed profile, with mirrored backward ops when ``training``."""
    ops = [Op(name=n["name"], work=n["forward_compute_time"], out_bytes=n["activation_size"],
              param_bytes=n["parameter_size"], group=n["name"] if training else None,
              attrs={"desc": n["desc"]}) for n in nodes]
    if not training:
        return Graph(ops, edges, name=name)
    forward = Graph(ops, edges, name=name)  # validates names/edges and gives the sinks
    bw_edges = [(v + BACKWARD_SUFFIX, u + BACKWARD_SUFFIX) for u, v in forward.edges]
    sinks = [forward.names[i] for i in range(forward.n) if forward.successors(i).size == 0]
    loss = [(v, v + BACKWARD_SUFFIX) for v in sinks]
    grad_bytes = {u: 0.0 for u in forward.names}  # gradient w.r.t. v's inputs = sizes of its producers' outputs
    for u, v in forward.edges:
        grad_bytes[v] += forward.ops[forward.index[u]].out_bytes
    back = [Op(name=n["name"] + BACKWARD_SUFFIX, work=n["backward_compute_time"], out_bytes=grad_bytes[n["name"]],
               backward=True, group=n["name"], attrs={"desc": n["desc"]}) for n in nodes]
    return Graph(ops + back, list(forward.edges) + loss + bw_edges, name=name)



def _sniff(head: str) -> float:
    """PipeDream's ``node -- desc -- forward_compute_time=...`` lines."""
    return 2.0 if " -- " in head and "forward_compute_time" in head else 0.0


@importer("pipedream", sniff=_sniff, training=True)
def load(path: str | Path, *, stages: int = 4, bandwidth: float = DEFAULT_BANDWIDTH,
         memory: float = DEFAULT_MEMORY, training: bool = False) -> Workload:
    """Read a PipeDream ``graph.txt`` as a workload on ``stages`` identical pipeline stages.

    Parameters
    ----------
    path
        The profile file.
    stages
        Number of pipeline stages ``k`` of the cluster.
    bandwidth
        Stage bandwidth in bytes per ms (default :data:`DEFAULT_BANDWIDTH`, 100 Gbit/s).
    memory
        Fast memory per stage in bytes (default :data:`DEFAULT_MEMORY`, 16 GiB).
    training
        Add the backward pass (see the module docstring).

    Examples
    --------
    >>> import tempfile, os
    >>> text = ("node1 -- Input -- forward_compute_time=0.0, backward_compute_time=0.0, "
    ...         "activation_size=8.0, parameter_size=0.0\\n"
    ...         "node2 -- Linear -- forward_compute_time=2.0, backward_compute_time=3.0, "
    ...         "activation_size=4.0, parameter_size=16.0\\n\\tnode1 -- node2\\n")
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = os.path.join(d, "g.txt"); _ = open(f, "w").write(text)
    ...     w = load(f, stages=2, training=True)
    >>> w.graph.n, w.graph.is_training, w.cluster.size
    (4, True, 2)
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not part of the first node's name
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"cannot read PipeDream profile {str(path)!r}: {err}") from None
    nodes, edges = parse(text, source=str(path))
    graph = build_graph(nodes, edges, name=path.stem, training=training)
    cluster = Cluster.stages(stages, memory=memory, bandwidth=bandwidth)
    meta = {"path": str(path), "bandwidth": bandwidth, "memory": memory, "stages": stages,
            "training": training, "time_unit": "ms", "byte_unit": "bytes"}
    return Workload(graph, cluster, "pipedream", meta)
