"""The partition as a graph coloured by device: Graphviz DOT text, rendered by ``dot`` or drawn by matplotlib.

Large graphs are shown at layer granularity: ops are grouped by module path (``op.attrs["module"]``)
cut to the deepest depth that keeps at most ``max_nodes`` groups, each group split by device;
without module paths, runs of consecutive ops on one device are grouped, and the picture says so.
The matplotlib drawing is layered (:mod:`.layout`): a layer per row, a labelled box per node, the
canvas grown with the graph's width and depth, deep graphs folded into bands side by side.
"""
from __future__ import annotations

import math
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..files import write_atomic
from ..io.costs import module_prefix
from ..placement import Placement
from ..report import device_major_order, display_names, human_bytes
from .common import device_colour, pictures_or_dot, pyplot, save
from .layout import layered

MAX_NODES = 150


@dataclass(frozen=True)
class Node:
    """One box of the picture: a label, its device (index), how many ops, and their time there in ms."""

    label: str
    device: int
    ops: int
    ms: float
    order: int  # position of its first op in the device-major order


@dataclass(frozen=True)
class View:
    """What is drawn: the boxes, the edges between them with the bytes they carry, the device names."""

    title: str
    nodes: tuple[Node, ...]
    edges: tuple[tuple[int, int, float], ...]
    devices: tuple[str, ...]
    kinds: tuple[str, ...]
    grouped_by: str


def _module_keys(p: Placement, depth: int) -> list[str] | None:
    modules = [op.attrs.get("module") for op in p.graph.ops]
    if not any(modules):
        return None
    return [f"{module_prefix(m, depth) or op.name}@{d}" for m, op, d in zip(modules, p.graph.ops, p.assign.tolist())]


def _run_keys(p: Placement, order: np.ndarray, max_nodes: int) -> list[str]:
    """Runs of at most ``size`` consecutive ops (device-major order) on one device."""
    size = math.ceil(p.graph.n / max_nodes) + 1
    keys = [""] * p.graph.n
    run, count, previous = 0, 0, -1
    for v in order.tolist():
        d = int(p.assign[v])
        if d != previous or count >= size:
            run, count, previous = run + 1, 0, d
        keys[v] = f"run{run}"
        count += 1
    return keys


def _keys(p: Placement, order: np.ndarray, max_nodes: int, depth: int | None) -> tuple[list[str], str]:
    if depth is None and p.graph.n <= max_nodes:
        return list(p.graph.names), "op"
    deepest = max((len(str(op.attrs.get("module", "")).split(".")) for op in p.graph.ops), default=0)
    for d in ([depth] if depth is not None else range(deepest, 0, -1)):
        keys = _module_keys(p, d)
        if keys is not None and (depth is not None or len(set(keys)) <= max_nodes):
            return keys, f"module depth {d}"
    return _run_keys(p, order, max_nodes), "runs of ops"


def _label(members: list[int], names: list[str], key: str, grouped_by: str) -> str:
    if grouped_by == "op":
        return names[members[0]]
    if grouped_by.startswith("module"):
        return key.rpartition("@")[0]
    return names[members[0]] if len(members) == 1 else f"{names[members[0]]} .. {names[members[-1]]}"


def build_view(placement: Placement, max_nodes: int = MAX_NODES, depth: int | None = None) -> View:
    """The boxes and edges to draw for ``placement`` (ops, or groups of ops when there are too many)."""
    p, g = placement, placement.graph
    order = device_major_order(p)
    keys, grouped_by = _keys(p, order, max_nodes, depth)
    members: dict[str, list[int]] = {}
    for v in order.tolist():
        members.setdefault(keys[v], []).append(v)
    index = {k: i for i, k in enumerate(members)}
    rank = {v: i for i, v in enumerate(order.tolist())}
    times = p.cluster.times(g)
    names = display_names(g)
    nodes = tuple(Node(_label(vs, names, k, grouped_by), int(p.assign[vs[0]]), len(vs),
                       float(sum(times[v, p.assign[v]] for v in vs)), rank[vs[0]]) for k, vs in members.items())
    carried: dict[tuple[int, int], float] = {}
    for u, v in zip(g.src.tolist(), g.dst.tolist()):
        a, b = index[keys[u]], index[keys[v]]
        if a != b:
            carried[(a, b)] = carried.get((a, b), 0.0) + float(g.out_bytes[u])
    kinds = tuple(d.kind for d in p.cluster.devices)
    return View(g.name, nodes, tuple((a, b, w) for (a, b), w in carried.items()), p.cluster.names, kinds, grouped_by)


# ---------------------------------------------------------------------------- DOT
def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(view: View) -> str:
    """Graphviz DOT text: one cluster per device (named, in its colour), boxes filled with it."""
    lines = [f"digraph {_quote(view.title)} {{",
             f"  graph [rankdir=TB, fontname=Helvetica, labelloc=t, label={_quote(view.title)}];",
             '  node [shape=box, style="rounded,filled", fontname=Helvetica, fontsize=10, fontcolor=white];',
             "  edge [color=\"#555555\", arrowsize=0.6];"]
    for d, name in enumerate(view.devices):
        mine = [i for i, n in enumerate(view.nodes) if n.device == d]
        if not mine:
            continue
        lines += [f"  subgraph {_quote(f'cluster_{d}')} {{",
                  f"    label={_quote(f'{name} ({view.kinds[d]})')}; color={_quote(device_colour(d))};"]
        for i in mine:
            n = view.nodes[i]
            text = n.label + (f"\n{n.ops} ops" if n.ops > 1 else "") + f"\n{n.ms:.3g} ms"
            lines.append(f"    n{i} [label={_quote(text)}, fillcolor={_quote(device_colour(d))}];")
        lines.append("  }")
    for a, b, w in view.edges:
        lines.append(f"  n{a} -> n{b} [tooltip={_quote(human_bytes(w))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- drawing
BOX_INCHES = (1.9, 0.62)
"""Inches across and down per slot of the layout (a box and the gap around it)."""
MAX_ROWS = 40
"""Layers per band: deeper graphs fold into bands side by side rather than a picture metres tall."""
LABEL_CHARS = 26


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` cut to its last ``limit`` characters behind an ellipsis: a module path keeps its most
    specific parts (``…h.0.attn.c_attn``), where its shared prefix says little."""
    return text if len(text) <= limit else "…" + text[len(text) - limit + 1:]


def box_text(node: Node) -> str:
    """A box's label: its name (shortened), and how many ops it holds when more than one."""
    return _short(node.label) + (f"\n{node.ops} ops" if node.ops > 1 else "")


def collapse_note(view: View) -> str:
    """The note under a collapsed picture: how many ops became how many boxes, and how to change it."""
    if view.grouped_by == "op":
        return ""
    ops = sum(n.ops for n in view.nodes)
    return (f"collapsed: {ops} ops drawn as {len(view.nodes)} boxes, grouped by {view.grouped_by} on each device "
            "(--max-nodes N for more boxes, --depth D for another module depth)")


def figure(view: View, max_rows: int = MAX_ROWS) -> Any:
    """The matplotlib figure of ``view``: a layered drawing (a layer per row, deep graphs folded into
    bands) with one rounded box per node in its device's colour, its label on it, an arrow per edge,
    a legend of the devices and, when ops were grouped, a note saying so."""
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

    plt = pyplot()
    across, down = BOX_INCHES
    lay = layered(len(view.nodes), [(a, b) for a, b, _ in view.edges], [n.order for n in view.nodes], max_rows,
                  aspect=across / down)
    fig, ax = plt.subplots(figsize=(across * (lay.width + 1.2), down * (lay.rows + 1) + 1.6))
    for a, b, _ in view.edges:
        same_band = lay.layer[b] // lay.rows == lay.layer[a] // lay.rows
        ax.add_artist(FancyArrowPatch((lay.x[a], -lay.y[a] - 0.3), (lay.x[b], -lay.y[b] + 0.3),
                                      arrowstyle="-|>", mutation_scale=7, lw=0.6, zorder=1,
                                      color="#777777" if same_band else "#bbbbbb",
                                      linestyle="-" if same_band else ":"))
    for i, n in enumerate(view.nodes):
        ax.add_patch(FancyBboxPatch((lay.x[i] - 0.43, -lay.y[i] - 0.29), 0.86, 0.58, zorder=2,
                                    boxstyle="round,pad=0,rounding_size=0.08", facecolor=device_colour(n.device),
                                    edgecolor="white", linewidth=0.5))
        ax.text(lay.x[i], -lay.y[i], box_text(n), ha="center", va="center", fontsize=6.5, color="white", zorder=3,
                linespacing=1.0)
    used = sorted({n.device for n in view.nodes})
    ax.legend(handles=[Patch(color=device_colour(d), label=f"{view.devices[d]} ({view.kinds[d]})") for d in used],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    ax.set_xlim(-0.6, lay.width - 0.4 if lay.width else 0.6)
    ax.set_ylim(-lay.rows + 0.4, 0.6)
    ax.axis("off")
    ax.set_title(f"{view.title}: {sum(n.ops for n in view.nodes)} ops on {len(used)} devices, "
                 f"{len(view.nodes)} boxes ({view.grouped_by})", fontsize=10)
    note = collapse_note(view)
    if note:
        fig.text(0.01, 0.005, note, fontsize=8, ha="left", va="bottom", color="#444444")
    return fig


def draw(view: View, path: str | Path) -> Path:
    """Draw ``view`` with matplotlib (PNG or SVG by the suffix): see :func:`figure`."""
    return save(figure(view), path)


def render(placement: Placement, path: str | Path, max_nodes: int = MAX_NODES, depth: int | None = None) -> str:
    """Write the partition picture to ``path`` (.dot, .svg, .png); returns what drew it.

    ``.dot`` is the DOT text; ``.svg``/``.png`` are rendered by Graphviz ``dot`` when it is
    installed, else drawn by matplotlib.
    """
    path = pictures_or_dot(path)
    view = build_view(placement, max_nodes, depth)
    text = to_dot(view)
    if path.suffix.lower() == ".dot":
        write_atomic(path, text)
        return "dot text"
    exe = shutil.which("dot")
    if exe:
        try:
            drawn = subprocess.run([exe, f"-T{path.suffix[1:].lower()}"], input=text.encode(), check=True,
                                   capture_output=True, timeout=120).stdout
            write_atomic(path, drawn)
            return "graphviz"
        except (subprocess.SubprocessError, OSError):
            pass  # a failing dot leaves the matplotlib drawing
    draw(view, path)
    return "matplotlib"
