"""Op costs for imported models: roofline times, layers, measured times and a calibrated roofline.

Imported ops (:mod:`.onnx`, :mod:`.torch_export`) keep their analytic FLOPs and bytes moved in
``op.attrs["flops"]`` and ``op.attrs["bytes_moved"]``; their ``work`` comes from the roofline
of each device kind (:mod:`placement_dsl.zoo.costs`)::

    work[kind] = 1e3 * max(flops / peak_flops[kind], bytes_moved / mem_bandwidth[kind])   # ms

Measured times replace that where a profile has them (:func:`read_costs`, :func:`apply_costs`),
and a few measured ops calibrate the roofline for the others (:func:`calibrate`): compute-bound
ops scale the peak FLOP rate, memory-bound ops the bandwidth.

Profile files
-------------
CSV, one row per op (or per module) and device kind::

    op,kind,ms                    op,accelerator,cpu
    layer1.0.conv1,accelerator,0.21     layer1.0.conv1,0.21,3.4

``op`` (or ``name``/``module``) names an op of the workload or a module path in
``op.attrs["module"]`` (its time is shared over the module's ops in proportion to their
roofline times). The time column is ``ms``/``time_ms`` (or ``us``/``time_us``, ``s``/``seconds``);
without a ``kind`` column every time is for ``default_kind``. JSON: ``{"op": ms}``,
``{"op": {"kind": ms}}``, or a list of ``{"op", "kind", "ms"}`` records (also under ``"ops"``). A row of a
submodule below the workload's ops (``layers.0.ln`` where a layer import made one op ``layers.0``) adds its time
to the op enclosing it; an op (or module) timed twice on one kind is refused, naming both rows.
"""
from __future__ import annotations

import csv
import difflib
import json
import statistics
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..cluster import ACCELERATOR
from ..errors import SpecError
from ..graph import DEFAULT_KIND, Graph, Op
from ..zoo.costs import ROOFLINES, SIGNIFICANT_DIGITS, Roofline

Profile = dict[str, dict[str, float]]
"""Measured times: op or module name -> device kind -> ms."""

_NAME_COLUMNS = ("op", "name", "module", "layer")
_TIME_COLUMNS = {"ms": 1.0, "time_ms": 1.0, "us": 1e-3, "time_us": 1e-3, "s": 1e3, "seconds": 1e3}


# ---------------------------------------------------------------------------- roofline times
def rounded(value: float) -> float:
    """``value`` to :data:`~placement_dsl.zoo.costs.SIGNIFICANT_DIGITS` significant digits."""
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def roofline_work(flops: float, bytes_moved: float, rooflines: Iterable[Roofline] = ROOFLINES) -> dict[str, float]:
    """Running time in ms per device kind of a kernel doing ``flops`` and moving ``bytes_moved``.

    >>> roofline_work(15.7e9, 0.0)["accelerator"]
    1.0
    """
    return {r.kind: rounded(r.time_ms(flops, bytes_moved)) for r in rooflines}


# ---------------------------------------------------------------------------- layers
def module_prefix(module: str | None, depth: int | None) -> str | None:
    """The first ``depth`` dotted parts of a module path (all of it for ``None``).

    >>> module_prefix("h.3.attn.q_proj", 2), module_prefix("h.3.attn", None), module_prefix("", 1)
    ('h.3', 'h.3.attn', None)
    """
    if not module:
        return None
    return module if depth is None else ".".join(module.split(".")[:depth])


def _merged_work(members: list[Op]) -> dict[str, float]:
    kinds = {k for op in members for k in op.work if k != DEFAULT_KIND}
    if not kinds:
        return {DEFAULT_KIND: rounded(sum(op.work[DEFAULT_KIND] for op in members))}
    times = {k: sum(op.time_on(k) for op in members) for k in kinds}
    return {k: rounded(t) for k, t in times.items() if t != float("inf")} or {DEFAULT_KIND: 0.0}


def _merged_op(name: str, members: list[Op], leaving: set[str]) -> Op:
    """One op doing the work of ``members``; its output is what leaves the layer (or ends the graph)."""
    types: dict[str, int] = {}
    for op in members:
        kind = str(op.attrs.get("type", "op"))
        types[kind] = types.get(kind, 0) + 1
    attrs = {"module": name, "ops": len(members), "types": types,
             "flops": sum(float(op.attrs.get("flops", 0.0)) for op in members),
             "bytes_moved": sum(float(op.attrs.get("bytes_moved", 0.0)) for op in members)}
    shared = {path: obj for op in members for path, obj in (op.attrs.get("shared_modules") or {}).items()}
    if shared:  # the modules of the layer that are one object under several names, or called more than once
        attrs["shared_modules"] = shared
    return Op(name=name, work=_merged_work(members), param_bytes=sum(op.param_bytes for op in members),
              out_bytes=sum(op.out_bytes for op in members if op.name in leaving),
              activation_bytes=sum(op.activation_bytes for op in members), attrs=attrs)


def collapse(graph: Graph, key: Callable[[Op], str | None], name: str | None = None) -> Graph:
    """One op per value of ``key`` (ops with key ``None`` stay as they are), edges between them.

    Work per kind, parameter and activation bytes add up; the merged op's output bytes are
    those of its ops with an edge leaving the group or no successor at all. A grouping that
    is not convex (a path leaves a group and comes back) is refused, naming the groups.
    """
    label = [key(op) or op.name for op in graph.ops]
    groups: dict[str, list[Op]] = {}
    for op, lab in zip(graph.ops, label):
        groups.setdefault(lab, []).append(op)
    edges = {(label[u], label[v]) for u, v in zip(graph.src.tolist(), graph.dst.tolist()) if label[u] != label[v]}
    leaving = {graph.names[u] for u, v in zip(graph.src.tolist(), graph.dst.tolist()) if label[u] != label[v]}
    leaving |= {graph.names[i] for i in range(graph.n) if not len(graph.successors(i))}
    ops = [members[0] if len(members) == 1 and members[0].name == lab else _merged_op(lab, members, leaving)
           for lab, members in groups.items()]
    try:
        return Graph(ops, sorted(edges), name=name or graph.name)
    except SpecError as err:
        raise SpecError(f"grouping the ops of {graph.name!r} into layers makes a cycle ({err}); the layers are not "
                        "contiguous at this depth: choose another layer depth or keep op granularity") from None


def layers(graph: Graph, depth: int | None = None) -> Graph:
    """:func:`collapse` by module path (``op.attrs["module"]``) cut to ``depth`` dotted parts.

    Exporters leave ops outside any layer: glue in a parent module (the sum of token and
    position embeddings in ``transformer`` beside ``transformer.h.0``, a residual sum in
    ``h.0`` beside ``h.0.attn``) and ops with no module at all (rewriter outputs). Such an op
    joins the layer of its latest producer, or of its earliest consumer when it has no producer
    in a layer, so that the layers stay contiguous; an op with neither stays on its own. Where one
    layer per module would make a cycle (a module called several times, with other layers between its
    calls), each later call is a layer of its own (:func:`_calls_apart`).
    """
    key = [module_prefix(op.attrs.get("module"), depth) for op in graph.ops]
    nested = {k.rsplit(".", i)[0] for k in key if k for i in range(1, k.count(".") + 1)}
    glue = [k is None or k in nested for k in key]
    order = [int(v) for v in graph.topo]
    label = [None if g else k for k, g in zip(key, glue)]
    for v in order:
        if label[v] is None:
            preds = [int(u) for u in graph.predecessors(v) if label[int(u)] is not None]
            label[v] = label[max(preds, key=lambda u: graph.rank[u])] if preds else None
    for v in reversed(order):
        if label[v] is None:
            succs = [int(w) for w in graph.successors(v) if label[int(w)] is not None]
            label[v] = label[min(succs, key=lambda w: graph.rank[w])] if succs else None
    final = [lab or k for lab, k in zip(label, key)]
    try:
        return collapse(graph, lambda op: final[graph.index[op.name]])
    except SpecError:
        if not (calls := _calls_apart(graph, final)):
            raise
    apart = collapse(graph, lambda op: calls[graph.index[op.name]])
    of = {new: old for new, old in zip(calls, final) if new != old}  # each later call's layer: the module it calls
    return apart.replace(ops=[op.model_copy(update={"attrs": {**op.attrs, "call_of": of[op.name]}}) if op.name in of
                              else op for op in apart.ops])


def _calls_apart(graph: Graph, label: list[str | None]) -> list[str | None] | None:
    """``label`` with each later run of one layer in program order (another call of a module called several times:
    torchvision's one ``relu`` per block, called before and after ``conv2``) named apart, ``relu_1``, ``relu_2``
    as the TorchScript exporter names the calls; ``None`` if every layer is one run."""
    out, runs, last = list(label), {}, None
    taken = {lab for lab in label if lab}
    for v in graph.program_order.tolist():
        lab = label[v]
        if lab is None:
            continue
        if lab != last and lab in runs:
            runs[lab] += 1
            while f"{lab}_{runs[lab]}" in taken:
                runs[lab] += 1
        runs.setdefault(lab, 0)
        if runs[lab]:
            out[v] = f"{lab}_{runs[lab]}"
        last = lab
    return out if any(runs.values()) else None


GRANULARITIES = ("op", "layer", "group")
"""One op per node; one op per module (:func:`layers`); or op granularity with each module's ops colocated."""


def by_granularity(graph: Graph, granularity: str, depth: int | None = None) -> Graph:
    """``graph`` at one of :data:`GRANULARITIES`, modules cut to ``depth`` dotted parts."""
    if granularity not in GRANULARITIES:
        raise SpecError(f"granularity {granularity!r} is not one of {list(GRANULARITIES)}")
    if granularity == "layer":
        return layers(graph, depth)
    if granularity == "group":
        return graph.replace(ops=[op.model_copy(update={"group": module_prefix(op.attrs.get("module"), depth)})
                                  for op in graph.ops])
    return graph


# ---------------------------------------------------------------------------- profiles
def read_costs(path: str | Path, default_kind: str = ACCELERATOR) -> Profile:
    """Measured times from a CSV or JSON profile (see the module's documentation), in ms."""
    path = Path(path)
    text = profile_text(path)
    if path.suffix.lower() == ".json" or text.lstrip().startswith(("{", "[")):
        try:
            return _profile_json(json.loads(text), default_kind, str(path))
        except json.JSONDecodeError as err:
            raise SpecError(f"cost profile {str(path)!r} is not valid JSON: {err}") from None
    return _profile_csv(text.splitlines(), default_kind, str(path))


def profile_text(path: str | Path) -> str:
    """The text of a cost profile (UTF-8, with or without a byte-order mark); a file that cannot be read, or is not
    UTF-8 text, is a :class:`SpecError` naming it (and the first byte that is not)."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except OSError as err:
        raise SpecError(f"cannot read cost profile {str(path)!r}: {err.strerror}") from None
    except UnicodeDecodeError as err:
        raise SpecError(f"cost profile {str(path)!r} is not UTF-8 text (byte {err.start}: "
                        f"{err.object[err.start:err.start + 1]!r}); save it as a UTF-8 CSV or JSON file") from None


def _number(value: Any, where: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise SpecError(f"{where}: {value!r} is not a time; give a number of ms") from None
    if not out >= 0 or out == float("inf"):
        raise SpecError(f"{where}: time {value!r} must be a finite number >= 0")
    return out


def _profile_csv(lines: list[str], default_kind: str, source: str) -> Profile:
    rows = list(csv.DictReader(line for line in lines if line.strip() and not line.lstrip().startswith("#")))
    if not rows:
        raise SpecError(f"cost profile {source!r} has no rows; give a header (op,kind,ms) and one row per op")
    head = {c.strip().lower(): c for c in rows[0] if c is not None}
    name_col = next((head[c] for c in _NAME_COLUMNS if c in head), None)
    if name_col is None:
        raise SpecError(f"cost profile {source!r}: no op column in {sorted(head)}; name it one of {_NAME_COLUMNS}")
    time_col = next((c for c in _TIME_COLUMNS if c in head), None)
    profile: Profile = {}
    seen: dict[tuple[str, str], str] = {}
    for i, row in enumerate(rows, start=2):
        op = str(row[name_col]).strip()
        if time_col is not None:
            kind = str(row.get(head.get("kind", ""), "") or default_kind).strip()
            ms = _number(row[head[time_col]], f"{source} line {i}") * _TIME_COLUMNS[time_col]
            _once(seen, op, kind, f"line {i}", source)
            profile.setdefault(op, {})[kind] = ms
            continue
        for low, col in head.items():  # wide: one column per device kind
            if col != name_col and str(row.get(col, "")).strip():
                _once(seen, op, low, f"line {i}", source)
                profile.setdefault(op, {})[low] = _number(row[col], f"{source} line {i}, column {col!r}")
    return profile


def _once(seen: dict[tuple[str, str], str], op: str, kind: str, row: str, source: str) -> None:
    """Refuse a second time for one op (or module) and kind, naming both rows (``row``: ``"line 3"``, ``"record
    #2"``): which of the two should win would be a guess."""
    first = seen.setdefault((op, kind), row)
    if first != row:
        raise SpecError(f"cost profile {source!r} {row}: {op!r} on kind {kind!r} is timed twice (first at {first}); "
                        "keep one row per op (or module) and kind")


def _profile_json(data: Any, default_kind: str, source: str) -> Profile:
    if isinstance(data, Mapping) and isinstance(data.get("ops"), list):
        data = data["ops"]
    profile: Profile = {}
    seen: dict[tuple[str, str], str] = {}
    if isinstance(data, list):
        for i, rec in enumerate(data):
            if not isinstance(rec, Mapping) or not any(c in rec for c in _NAME_COLUMNS):
                raise SpecError(f"cost profile {source!r}: record #{i} needs an 'op' and a time ('ms'), got {rec!r}")
            op = str(next(rec[c] for c in _NAME_COLUMNS if c in rec))
            col = next((c for c in _TIME_COLUMNS if c in rec), None)
            if col is None:
                raise SpecError(f"cost profile {source!r}: record {op!r} has no time; add 'ms'")
            kind = str(rec.get("kind", default_kind))
            _once(seen, op, kind, f"record #{i}", source)
            profile.setdefault(op, {})[kind] = _number(rec[col], f"{source}: {op!r}") * _TIME_COLUMNS[col]
        return profile
    if not isinstance(data, Mapping):
        raise SpecError(f"cost profile {source!r}: expected an object or a list of records")
    for op, value in data.items():
        times = value if isinstance(value, Mapping) else {default_kind: value}
        profile[str(op)] = {str(k): _number(v, f"{source}: {op!r}[{k!r}]") for k, v in times.items()}
    return profile


# ---------------------------------------------------------------------------- calibration
@dataclass(frozen=True)
class Calibration:
    """Measured over predicted time on one device kind, for compute-bound and memory-bound ops.

    A roofline calibrated this way has ``peak_flops / compute_scale`` and
    ``mem_bandwidth / memory_scale``; ops without FLOPs and bytes scale by ``compute_scale``.
    """

    kind: str
    compute_scale: float
    memory_scale: float
    samples: int

    def roofline(self, base: Roofline) -> Roofline:
        """``base`` with the measured efficiency (a scale of 0, measured ops of no time, is an endless rate)."""
        return Roofline(self.kind, _rate(base.peak_flops, self.compute_scale),
                        _rate(base.mem_bandwidth, self.memory_scale))

    def time_ms(self, op: Op, base: Roofline | None) -> float:
        """The calibrated running time of ``op`` on this kind."""
        flops, moved = op.attrs.get("flops"), op.attrs.get("bytes_moved")
        if base is None or flops is None or moved is None:
            return op.time_on(self.kind) * self.compute_scale
        return self.roofline(base).time_ms(float(flops), float(moved))


def _rate(base: float, scale: float) -> float:
    return base / scale if scale > 0 else float("inf")


def _roofline_for(kind: str, rooflines: Iterable[Roofline]) -> Roofline | None:
    return next((r for r in rooflines if r.kind == kind), None)


def calibrate(graph: Graph, measured: Mapping[str, float], kind: str,
              rooflines: Iterable[Roofline] = ROOFLINES) -> Calibration:
    """Fit the roofline of ``kind`` to measured times (op name -> ms) of some ops of ``graph``.

    Each measured op is compute-bound or memory-bound under the roofline; the median ratio
    measured / predicted of each class scales that class (one class alone scales both).
    """
    base = _roofline_for(kind, rooflines)
    compute, memory = [], []
    for name, ms in measured.items():
        op = graph.ops[graph.index[name]]
        flops, moved = op.attrs.get("flops"), op.attrs.get("bytes_moved")
        if base is None or flops is None or moved is None:
            predicted = op.time_on(kind)
            if 0 < predicted < float("inf"):
                compute.append(ms / predicted)
            continue
        c, m = float(flops) / base.peak_flops * 1e3, float(moved) / base.mem_bandwidth * 1e3
        if c > 0 and c >= m:
            compute.append(ms / c)
        elif m > c:
            memory.append(ms / m)
    if not compute and not memory:
        raise SpecError(f"calibrate: none of the {len(measured)} measured ops has a predicted time on kind {kind!r}; "
                        "measure ops with nonzero work there")
    cs = statistics.median(compute) if compute else statistics.median(memory)
    ms_ = statistics.median(memory) if memory else cs
    if not any(compute) and not any(memory):
        raise SpecError(f"calibrate: every one of the {len(measured)} measured ops takes 0 ms on kind {kind!r}, "
                        "which would make the unmeasured ops take no time; measure nonzero times, or keep the "
                        "roofline for the rest (calibrate_rest=False, import --no-calibrate)")
    return Calibration(kind, cs, ms_, len(compute) + len(memory))


def enclosing(key: str, known: Container[str]) -> str | None:
    """``key`` or its nearest dotted prefix in ``known`` (a profiled submodule's enclosing layer, ``known`` the
    graph's :func:`leaves`), else ``None``.

    >>> enclosing("layers.0.ln", {"layers.0", "layers"}), enclosing("head", {"layers.0"})
    ('layers.0', None)
    """
    parts = key.split(".")
    return next((p for p in (".".join(parts[:i]) for i in range(len(parts), 0, -1)) if p in known), None)


def leaves(graph: Graph) -> set[str]:
    """The op names and module paths of ``graph``'s ops with no op in a submodule of them: the layers an import cut
    at a depth, under which a profile's deeper rows belong (:func:`enclosing`)."""
    paths = {str(m) for op in graph.ops if (m := op.attrs.get("module"))}
    inner = {p.rsplit(".", k)[0] for p in paths for k in range(1, p.count(".") + 1)}
    return (paths | set(graph.names)) - inner


def call_members(graph: Graph, name: str) -> list[int]:
    """The ops that run ``name``'s calls: the op of that name and the layers of its later calls (``relu_1``,
    ``attrs["call_of"]``, :func:`layers`), so a module's profiled time (the sum over its calls) reaches every call;
    ``[]`` where no op has the name."""
    if name not in graph.index:
        return []
    return [graph.index[name], *(i for i, op in enumerate(graph.ops) if op.attrs.get("call_of") == name)]


def _resolve(graph: Graph, profile: Profile, where: str = "cost profile") -> dict[str, dict[str, float]]:
    """Profile entries per op: op names as they are (with the later calls of a module that layer names,
    :func:`call_members`), module paths shared by roofline time; a submodule deeper than
    the workload's ops (a layer imported with ``--depth``) adds its time to the op or module that encloses it."""
    modules: dict[str, list[Op]] = {}
    for op in graph.ops:
        mod = op.attrs.get("module")
        while mod:
            modules.setdefault(mod, []).append(op)
            mod = mod.rpartition(".")[0]
    known, layer = set(graph.index) | set(modules), leaves(graph)
    target = {key: key if key in known else enclosing(key, layer) for key in profile}
    unknown = [key for key, t in target.items() if t is None]
    if unknown:
        hint = difflib.get_close_matches(unknown[0], list(dict.fromkeys([*graph.index, *modules])), n=3)
        raise SpecError(f"{where} names {len(unknown)} unknown op(s) or module(s), e.g. {unknown[:3]}"
                        f"{f' (close: {hint})' if hint else ''}; name them as the workload does (op names or "
                        "module paths)")
    summed: dict[str, dict[str, float]] = {}
    for key, times in profile.items():
        t = target[key]
        if t != key and t in profile and set(profile[t]) & set(times):
            raise SpecError(f"{where} times {t!r} and its submodule {key!r} on kind "
                            f"{min(set(profile[t]) & set(times))!r}; the submodule's time is part of "
                            f"{t!r}'s: keep one of them")
        for kind, ms in times.items():
            summed.setdefault(str(t), {})[kind] = summed.get(str(t), {}).get(kind, 0.0) + ms
    out: dict[str, dict[str, float]] = {}
    for key, times in summed.items():
        members = [graph.ops[i] for i in call_members(graph, key)] or modules[key]
        for kind, ms in times.items():
            share = [op.time_on(kind) if op.time_on(kind) < float("inf") else 0.0 for op in members]
            total = sum(share)
            for op, part in zip(members, share):
                out.setdefault(op.name, {})[kind] = ms * (part / total if total > 0 else 1.0 / len(members))
    return out


def apply_costs(graph: Graph, profile: Profile, calibrate_rest: bool = True,
                rooflines: Iterable[Roofline] = ROOFLINES, source: str | None = None) -> tuple[Graph, dict[str, Calibration]]:
    """``graph`` with measured times, and the other ops' times from the calibrated roofline.

    Returns the new graph and the calibration of each measured kind (empty without
    ``calibrate_rest``). Unknown names in the profile are refused with the closest matches; rows of submodules
    below the graph's ops add up into the op that encloses them (:func:`enclosing`). ``source``: the profile's
    file, which the errors name.
    """
    rooflines = tuple(rooflines)
    where = "cost profile" if source is None else f"cost profile {source!r}"
    per_op = _resolve(graph, profile, where)
    kinds = sorted({k for times in per_op.values() for k in times})
    try:
        fits = {k: calibrate(graph, {op: t[k] for op, t in per_op.items() if k in t}, k, rooflines)
                for k in kinds} if calibrate_rest else {}
    except SpecError as err:
        raise SpecError(f"{where}: {err}" if source is not None else str(err)) from None
    ops = []
    for op in graph.ops:
        work = dict(op.work)
        for kind, fit in fits.items():
            if kind not in per_op.get(op.name, {}) and op.time_on(kind) < float("inf"):
                work[kind] = rounded(fit.time_ms(op, _roofline_for(kind, rooflines)))
        work.update({k: rounded(v) for k, v in per_op.get(op.name, {}).items()})
        attrs = {**op.attrs, "measured": sorted(per_op[op.name])} if op.name in per_op else op.attrs
        ops.append(op.model_copy(update={"work": work, "attrs": attrs}))
    return graph.replace(ops=ops), fits
