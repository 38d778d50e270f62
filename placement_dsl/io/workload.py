"""Workloads (a graph and the cluster it is meant for) and placements, in every supported format.

Formats
-------
``native``
    The project's own versioned JSON: ``{"format": "placement_dsl.workload", "version": 1,
    "graph": {...}, "cluster": {...}}`` (also a bare ``placement_dsl.graph``).
``dnn-partitioning``
    Tarnawski et al.'s JSON inputs and split files (:mod:`.dnn_partitioning`).
``pipedream``
    PipeDream profiler ``graph.txt`` (:mod:`.pipedream`).
``moirai``
    MOIRAI ``.xls`` sheets (:mod:`.moirai`, needs the ``xlrd`` extra).
``onnx``
    ONNX models (:mod:`.onnx`, needs the ``onnx`` extra); costs from shapes and a roofline.

Each format registers its reader where it is defined (:func:`.formats.importer`); detection and
:func:`load_workload` read the registry, so a new format is one module of this package.
"""
from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..cluster import Cluster
from ..errors import SpecError
from ..files import write_atomic
from ..graph import Graph
from ..placement import PLACEMENT_FORMAT, Placement
from ..workload import GRAPH_FORMAT, VERSION, Workload, graph_from_dict, graph_to_dict
from ..workload import check_header as _check_header
from ..zoo.training import with_backward
from . import dnn_partitioning as dp
from . import formats, moirai
from .common import collector_paused, dumps_strict
from .formats import importer

WORKLOAD_FORMAT = "placement_dsl.workload"


# ---------------------------------------------------------------------------- native
def workload_to_dict(w: Workload) -> dict[str, Any]:
    return {"format": WORKLOAD_FORMAT, "version": VERSION, "graph": graph_to_dict(w.graph),
            "cluster": w.cluster.to_dict(), "meta": w.meta}


EXPECTED_KEYS = {
    "native": "'graph' (with optional 'cluster' and 'meta'), or a bare graph with 'ops' and 'edges'",
    "dnn-partitioning": "'nodes' and 'edges' (with optional 'maxFPGAs', 'maxCPUs' and 'maxSizePerFPGA')",
}


def missing_keys_message(data: dict[str, Any], source: str = "workload") -> str:
    """What a JSON workload lacks: the keys found, the keys each format expects, and ``--format``."""
    found = sorted(map(str, data))[:8]
    wanted = "; ".join(f"{fmt} needs {keys}" for fmt, keys in EXPECTED_KEYS.items())
    return (f"{source}: found keys {found}, which match no workload format ({wanted}); "
            f"fix the file, or pass --format with one of {formats.names()} if the format was detected wrongly")


def workload_from_dict(data: dict[str, Any], source: str = "workload") -> Workload:
    """A workload from the native mapping (or a bare graph, on one stage); ``source`` names it in errors."""
    fmt = data.get("format")
    if fmt == GRAPH_FORMAT or (fmt is None and "ops" in data and "graph" not in data):
        graph = graph_from_dict(data)
        return Workload(graph, Cluster.stages(1), "native")
    _check_header(data, WORKLOAD_FORMAT)
    if "graph" not in data:
        raise SpecError(missing_keys_message(data, source))
    graph = graph_from_dict(data["graph"])
    cluster = Cluster.from_dict(data["cluster"]) if "cluster" in data else Cluster.stages(1)
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        raise SpecError(f"{source}: 'meta' must be a mapping, got {type(meta).__name__}")
    return Workload(graph, cluster, "native", dict(meta))


def with_training(w: Workload) -> Workload:
    """The workload with the backward pass of its graph, unchanged if it already has one.

    Each forward op ``v`` gets a colocated backward op ``v.grad`` with twice its work
    (:func:`placement_dsl.zoo.training.with_backward`); ``meta["training"]`` says how the
    backward pass was made. PipeDream profiles have measured backward times: read them with
    ``load_workload(path, training=True)`` instead.
    """
    if w.graph.is_training:
        return w
    ops, edges = with_backward(w.graph.ops, w.graph.edges)
    meta = {**w.meta, "training": True, "backward": "derived: each op's backward work is twice its forward work"}
    return Workload(Graph(ops, edges, name=w.graph.name), w.cluster, w.format, meta)


# ---------------------------------------------------------------------------- detection
def __getattr__(name: str) -> Any:
    """``FORMATS``, the old tuple of format names, read from the registry (deprecated)."""
    if name == "FORMATS":
        warnings.warn("placement_dsl.io.workload.FORMATS is deprecated; use placement_dsl.io.formats.names()",
                      DeprecationWarning, stacklevel=2)
        return tuple(formats.names())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def detect_format(path: str | Path) -> str:
    """Guess a workload file's format from its extension (:func:`.formats.by_suffix`) and content
    (:func:`.formats.by_content`)."""
    path = Path(path)
    claimed = formats.by_suffix(path)
    if claimed is not None:
        return claimed.name
    try:
        with path.open(encoding="utf-8-sig", errors="replace") as fh:  # a byte-order mark is not content
            head = fh.read(4096)
    except OSError as err:
        raise SpecError(f"cannot read workload {str(path)!r}: {err.strerror}") from None
    if not head.lstrip():
        raise SpecError(f"workload {str(path)!r} is empty; give a workload file (formats: {formats.names()})")
    sniffed = formats.by_content(head)
    if sniffed is None:
        kind = _json_top(path) if head.lstrip()[:1] in ('[', '"') else None
        if kind is not None:  # JSON, but no format's: say what it holds rather than ask for --format
            raise SpecError(f"{str(path)!r}: expected a JSON object at the top level, got {kind}")
        raise SpecError(f"cannot tell the format of {str(path)!r}; pass --format with one of {formats.names()}")
    return sniffed.name


def _json_top(path: Path) -> str | None:
    """What the top level of the JSON file ``path`` holds (``a list``...), ``None`` if it is no JSON."""
    try:
        with path.open(encoding="utf-8-sig") as fh:
            return _kind(json.load(fh))
    except (OSError, RecursionError, ValueError):  # ValueError: JSONDecodeError and UnicodeDecodeError
        return None


def _kind(value: Any) -> str:
    """A JSON value's kind in words: ``an object``, ``a list``, ``a string``, ``a number``, ``true``..."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    words = {dict: "an object", list: "a list", str: "a string"}
    return next((w for t, w in words.items() if isinstance(value, t)), "a number")


def load_workload(path: str | Path, format: str | None = None, **options: Any) -> Workload:
    """Read a workload file of any registered format (detected unless ``format`` is given).

    ``options`` go to the format's reader (e.g. ``bandwidth=``/``memory=``/``stages=`` for PipeDream).
    ``training=True`` gives the training graph: PipeDream profiles mirror their ops with the
    profiled backward times; other forward-only graphs get :func:`with_training`.
    """
    path = Path(path)
    with naming(path), collector_paused():
        reader = formats.get(format or detect_format(path))
        if reader.training:
            return reader.read(path, **options)
        training = bool(options.pop("training", False))
        w = reader.read(path, **options)
        return with_training(w) if training else w


@contextmanager
def naming(path: Path) -> Iterator[None]:
    """Errors raised while reading ``path`` name it: a :class:`SpecError` whose message lacks the path
    gets it as a prefix, so that an op's or a field's error says which file it is in."""
    try:
        yield
    except SpecError as err:
        if str(path) in str(err):
            raise
        raise SpecError(f"{str(path)!r}: {err}") from None


def _native_sniff(head: str) -> float:
    """Sure of JSON naming a ``placement_dsl.`` format; JSON of no other format is read as native last."""
    if not head.lstrip().startswith("{"):
        return 0.0
    return 3.0 if '"format"' in head and "placement_dsl." in head else 1.0


def _dnn_partitioning_sniff(head: str) -> float:
    """JSON with Tarnawski et al.'s ``nodes`` or cluster keys."""
    keys = ('"nodes"', "maxFPGAs", "maxSizePerFPGA")
    return 2.0 if head.lstrip().startswith("{") and any(k in head for k in keys) else 0.0


def _no_options(fmt: str, options: dict[str, Any]) -> None:
    if options:
        raise SpecError(f"format {fmt!r} takes no reader options, got {sorted(options)}")


@importer("native", sniff=_native_sniff)
def read_native(path: Path, **options: Any) -> Workload:
    """The project's own versioned JSON (a workload, or a bare graph on one stage)."""
    _no_options("native", options)
    return workload_from_dict(_read_json(path), source=repr(str(path)))


@importer("dnn-partitioning", sniff=_dnn_partitioning_sniff)
def read_dnn_partitioning(path: Path, **options: Any) -> Workload:
    """Tarnawski et al.'s JSON inputs (:mod:`.dnn_partitioning`)."""
    _no_options("dnn-partitioning", options)
    data = _read_json(path)
    graph = dp.graph_from_dict(data, name=path.stem)
    return Workload(graph, dp.cluster_from_dict(data), "dnn-partitioning", {"path": str(path)})


def save_workload(w: Workload, path: str | Path, format: str | None = None) -> None:
    """Write a workload (``native`` or ``dnn-partitioning``; by extension/format), whole or not at all.

    A file that cannot be written is a :class:`SpecError` naming it (see :mod:`placement_dsl.files`).
    """
    path = Path(path)
    fmt = format or ("native" if path.suffix == ".json" else None)
    if fmt == "native":
        data = workload_to_dict(w)
    elif fmt == "dnn-partitioning":
        data = dp.graph_to_dict(w.graph, w.cluster)
    else:
        raise SpecError(f"cannot write format {fmt!r}; writable formats are 'native' and 'dnn-partitioning'")
    _write_json(path, data)


def load_placement(path: str | Path, workload: Workload, other: Callable[[], Workload] | None = None) -> Placement:
    """Read a placement: native JSON, a dnn-partitioning split file, or (for a MOIRAI sheet) its schedule file.

    ``other``: where the file is not a placement of ``workload``, the workload it may be one of instead (another
    view of the model, read only then); the file is read once, and a placement of neither is ``workload``'s error."""
    path = Path(path)
    with naming(path):
        data = _read_json(path)
        try:
            return _placement(data, path, workload)
        except SpecError as err:
            if other is None:
                raise
            asked = err
        try:
            return _placement(data, path, other())
        except SpecError:
            raise asked from None


def _placement(data: dict[str, Any], path: Path, workload: Workload) -> Placement:
    if data.get("format") == PLACEMENT_FORMAT:
        return Placement.from_dict(workload.graph, workload.cluster, data)
    if "fpgas" in data or "cpus" in data:
        return dp.placement_from_split(workload.graph, workload.cluster, data, source=str(path))
    if workload.format == "moirai" and "assignment" in data and "start" in data:
        return moirai.schedule_from_dict(workload.graph, workload.cluster, data)  # what solve --out writes for a sheet
    if "assignment" in data:  # a native placement but for its format line: name the field that is missing or wrong
        found = f"has 'format': {data['format']!r}" if "format" in data else "has no 'format' field"
        raise SpecError(f"{str(path)!r} has a native 'assignment' but {found}; a native placement file needs "
                        f"'format': {PLACEMENT_FORMAT!r}")
    raise SpecError(f"{str(path)!r} is not a placement file (native 'assignment', a split with 'fpgas'/'cpus', "
                    "or a MOIRAI sheet's schedule with 'assignment' and 'start')")


def save_placement(placement: Placement, path: str | Path, workload: Workload | None = None,
                   objective: float | None = None) -> None:
    """Write a placement in the workload's native split format (dnn-partitioning) or the project's JSON,
    whole or not at all; a file that cannot be written is a :class:`SpecError` naming it."""
    if workload is not None and workload.format == "dnn-partitioning":
        data = dp.placement_to_split(placement, objective)
    else:
        data = placement.to_dict()
        if objective is not None:
            data["objective"] = objective
    _write_json(Path(path), data)


MAX_DEPTH = 64  # nesting of a JSON input; the formats need five levels


def _read_json(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8-sig") as fh:  # a byte-order mark is not content
            data = json.load(fh)
    except OSError as err:
        raise SpecError(f"cannot read {str(path)!r}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise SpecError(f"{str(path)!r} is not valid JSON: {err}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{str(path)!r} is not a text file; expected JSON") from None
    except (RecursionError, ValueError) as err:  # nesting beyond the parser's stack; integers of > 4300 digits
        detail = " ".join(str(err).split())[:80]
        raise SpecError(f"{str(path)!r}: JSON the reader cannot hold ({detail})") from None
    if not isinstance(data, dict):
        raise SpecError(f"{str(path)!r}: expected a JSON object at the top level, got {_kind(data)}")
    _check_depth(data, str(path))
    return data


def _check_depth(data: Any, source: str) -> None:
    """Refuse JSON nested deeper than :data:`MAX_DEPTH` (walked without recursion)."""
    level: list[Any] = [data]
    for depth in range(MAX_DEPTH + 1):
        level = [v for item in level if isinstance(item, (dict, list))
                 for v in (item.values() if isinstance(item, dict) else item) if isinstance(v, (dict, list))]
        if not level:
            return
    raise SpecError(f"{source!r}: JSON nested more than {MAX_DEPTH} levels deep; no workload format nests so deep")


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Write standard JSON atomically (:func:`placement_dsl.files.write_atomic`): nothing half-written on error.

    An unlimited amount (a device's memory, a link's bandwidth) is written ``null``, which the readers take as
    unlimited; Python's ``Infinity``, which files written before held, is read as well but no strict parser takes it."""
    write_atomic(path, dumps_strict(data, indent=1) + "\n")
