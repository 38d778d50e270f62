"""MOIRAI sample workloads (Zhang et al., heterogeneous devices), read from ``.xls`` sheets.

Sheet layout (row 0 = headers): ``task, c_task, dir_succ, dir_succ_add, p0..p{K-1},
pc00..pc{K-1}{K-1}, mi, m0..m{K-1}``. A row is an operator ``task`` with running time
``p_k`` on device ``k`` and memory footprint ``mi``; ``dir_succ`` lists its direct
successors and ``c_task`` the communication tasks (data flows) carrying its output to
them, aligned by position; ``pc_ab`` lists, aligned with ``c_task``, the time to move each
flow from device ``a`` to device ``b``. The device memories ``m_k`` are on the first data
row. Rows end at the first row with an empty ``task`` (notes may follow).

Representation — the augmented DAG of MOIRAI eq. (3): every data flow ``q`` of operator
``i`` to ``j`` becomes its own zero-work op ``q`` (named after the flow's id) with edges
``i -> q -> j``, colocated with ``i`` (``Op.group``), so the flow crosses a device boundary
exactly when ``i`` and ``j`` are apart (MOIRAI's ``z_q``) and then travels on channel
``dev(i) -> dev(j)`` (``u_{q k' k''}``). Successors listed without a flow (the source
task 0) get a plain zero-cost edge.

Transfer times: the sheets give a full ``K x K`` time matrix per flow, and in general
(e.g. ``example-1``) these matrices are *not* multiples of one matrix, so one bandwidth
per channel cannot express them. The exact matrix is therefore stored on each flow op as
``attrs["transfer_time"]`` (read it back with :func:`transfer_time`). For the generic,
size-based cost model each flow also gets ``out_bytes = s_q = max_{a != b} pc_qab`` and
the cluster gets directed :class:`~placement_dsl.cluster.Link` s ``a -> b`` of bandwidth
``1 / t_ab`` with ``t_ab`` the median of ``pc_qab / s_q`` over flows; the largest
deviation ``|s_q t_ab - pc_qab|`` relative to ``max pc`` is reported as
``meta["transfer_fit_error"]`` (about 1e-4 on GoogLeNet, whose times are size /
bandwidth up to rounding; large on the hand-made example-1).

Devices: one device and one device *kind* per column, named ``"d0" .. "dK-1"``; an
operator's ``work`` is keyed by those kinds and its ``mi`` is its ``param_bytes``
(MOIRAI eq. 5). A sheet's objective is the makespan of its schedule (MOIRAI eq. 4).

Schedule files (:func:`schedule_to_dict`, :func:`schedule_from_dict`) speak the sheet's own
integer ids and device columns::

    {"assignment": {task: device index}, "start": {task: time},
     "transfer_start": {flow (c_task id): time}}

with every task, and every flow whose two ends run on different devices.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..cluster import Cluster, Device, Link, port_bandwidths
from ..errors import SpecError
from ..graph import Graph, Op
from ..limits import MAX_TOTAL, amount
from ..placement import Placement
from ..schedule import Schedule, list_schedule, transfer_tasks
from ..workload import Workload
from .formats import importer

KIND_PREFIX = "d"


def _xlrd() -> Any:
    try:
        import xlrd
    except ImportError:
        raise SpecError("reading MOIRAI .xls sheets needs xlrd: pip install placement_dsl[moirai]") from None
    return xlrd


def _cells(text: Any) -> list[str]:
    if isinstance(text, float):
        return [_name(text)]
    return [part.strip() for part in str(text).split(",") if part.strip()]


def _name(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def read_rows(path: str | Path) -> tuple[list[str], list[list[Any]]]:
    """Headers and data rows of the sheet holding the operators (see :func:`sheet_rows`).

    A file xlrd cannot decode (truncated, corrupted) raises :class:`SpecError` naming it, whatever xlrd raised.
    """
    return read_sheet(path)[1:]


def read_sheet(path: str | Path) -> tuple[str, list[str], list[list[Any]]]:
    """:func:`read_rows` with the name of the sheet they were read from (first in what a bad cell's error names)."""
    xlrd = _xlrd()
    try:
        book = xlrd.open_workbook(str(path))
        tables = [[sheet.row_values(r) for r in range(sheet.nrows)] for sheet in book.sheets()]
        names = [sheet.name for sheet in book.sheets()]
    except OSError as err:
        raise SpecError(f"cannot read MOIRAI sheet {str(path)!r}: {err.strerror}") from None
    except Exception as err:  # noqa: BLE001 - xlrd raises anything from CompDocError to IndexError on a damaged file
        detail = " ".join(f"{type(err).__name__}: {err}".split())[:120]
        raise SpecError(f"{str(path)!r} is not a readable .xls sheet ({detail})") from None
    headers, rows = sheet_rows(tables, repr(str(path)))
    chosen = _operators(tables)
    return next((n for n, t in zip(names, tables) if t is chosen), ""), headers, rows


def sheet_rows(tables: list[list[list[Any]]], source: str = "<sheet>") -> tuple[list[str], list[list[Any]]]:
    """Headers and data rows of the first of ``tables`` (a workbook's sheets, each a list of rows) whose header
    row names a ``task`` column, else of the first; rows end at the first row whose ``task`` cell is empty.

    Columns are found by their headers, in any order; every row is padded with empty cells to the headers' width.
    """
    table = _operators(tables)
    if len(table) < 2:
        raise SpecError(f"{source}: the first sheet has no data rows")
    headers = [str(h).strip() for h in table[0]]
    task = headers.index("task") if "task" in headers else 0
    rows = []
    for row in table[1:]:
        row = list(row) + [""] * (len(headers) - len(row))
        if not row or row[task] == "":
            break
        rows.append(row)
    if not rows:
        raise SpecError(f"{source}: the sheet's first data row has no task")
    return headers, rows


def _operators(tables: list[list[list[Any]]]) -> list[list[Any]]:
    """The first table whose header row names a ``task`` column, else the first (``[]`` without tables)."""
    named = [t for t in tables if t and "task" in [str(h).strip() for h in t[0]]]
    return (named or tables or [[]])[0]


def _devices(headers: list[str], source: str) -> int:
    K = sum(1 for h in headers if h.startswith("p") and h[1:].isdigit())
    need = ["task", "c_task", "dir_succ", "mi"] + [f"p{k}" for k in range(K)] + [f"m{k}" for k in range(K)]
    need += [f"pc{a}{b}" for a in range(K) for b in range(K)]
    missing = [h for h in need if h not in headers]
    if K == 0 or missing:
        raise SpecError(f"{source}: MOIRAI sheet needs columns task, c_task, dir_succ, p0.., pc00.., mi, m0..; "
                        f"missing {missing or ['p0']}")
    return K


def build(headers: list[str], rows: list[list[Any]], name: str, source: str = "<sheet>") -> tuple[Graph, Cluster, float]:
    """Graph, cluster and transfer-fit error from the sheet's headers and rows (see the module docstring)."""
    K = _devices(headers, source)
    col = {h: i for i, h in enumerate(headers)}
    kinds = [f"{KIND_PREFIX}{k}" for k in range(K)]
    ops: list[Op] = []
    edges: list[tuple[str, str]] = []
    flows: list[tuple[int, np.ndarray]] = []  # (op position, K x K times)
    for r, row in enumerate(rows, start=2):
        where = f"{source}, row {r}"
        task = _name(row[col["task"]])
        if isinstance(row[col["task"]], str) and not task.replace(".", "", 1).isdigit():
            raise SpecError(f"{where}: task id {task!r} is not a number")
        work = {kinds[k]: amount(row[col[f"p{k}"]], f"{where}, p{k}") for k in range(K)}
        comm, succ = _cells(row[col["c_task"]]), _cells(row[col["dir_succ"]])
        group = task if comm else None
        ops.append(Op(name=task, work=work, param_bytes=amount(row[col["mi"]] or 0.0, f"{where}, mi"),
                      group=group, attrs={"moirai": "operator"}))
        if comm and len(comm) != len(succ):
            raise SpecError(f"{where}: task {task}: {len(comm)} communication tasks {comm} but "
                            f"{len(succ)} successors {succ}; they must align")
        if not comm:
            edges += [(task, j) for j in succ]
            continue
        times = _flow_times(row, col, K, len(comm), where)
        for q, j, t in zip(comm, succ, times):
            flows.append((len(ops), t))
            ops.append(Op(name=q, work=0.0, group=task, attrs={"moirai": "communication",
                                                                "transfer_time": t.tolist()}))
            edges += [(task, q), (q, j)]
    memory = [amount(rows[0][col[f"m{k}"]], f"{source}, row 2, m{k}") for k in range(K)]
    for k, m in enumerate(memory):
        if m <= 0:
            raise SpecError(f"{source}: device d{k} has memory m{k}={m}; give every device a memory > 0")
    ops, links, error = _fit_links(ops, flows, K)
    graph = Graph(ops, edges, name=name)
    # MOIRAI's devices run one op at a time, also where no link is left to say so (one device, no transfer times)
    devices = [Device(name=kinds[k], kind=kinds[k], memory=memory[k], invocations=False) for k in range(K)]
    return graph, Cluster(port_bandwidths(devices, links), links), error


def _flow_times(row: list[Any], col: dict[str, int], K: int, count: int, where: str) -> list[np.ndarray]:
    out = np.zeros((count, K, K))
    cells, pairs = [], []
    for a in range(K):
        for b in range(K):
            found = _cells(row[col[f"pc{a}{b}"]])
            if a == b and not found:  # a device to itself moves nothing: an empty cell is no time
                continue
            if len(found) != count:
                raise SpecError(f"{where}, pc{a}{b}: {len(found)} times {found} for {count} communication tasks")
            cells += found
            pairs.append((a, b))
    values = _amounts(cells)
    if values is None:  # one by one: the first bad cell named
        values = np.array([amount(c, f"{where}, pc{a}{b}") for k, (a, b) in enumerate(pairs)
                           for c in cells[k * count:(k + 1) * count]])
    for k, (a, b) in enumerate(pairs):
        out[:, a, b] = values[k * count:(k + 1) * count]
    return list(out)


def _amounts(cells: list[str]) -> np.ndarray | None:
    """A row's cells as numbers, each as :func:`~placement_dsl.limits.amount` takes it, parsed at once; ``None``
    where one is no number in range (the caller names it). One by one, the flows' 800,000 cells of a 20,000-task
    sheet were half of its reading (1 s of CPU)."""
    try:
        values = np.array(cells, dtype=float)
    except ValueError:
        return None
    return values if bool(np.all((values >= 0) & (values <= MAX_TOTAL))) else None  # NaN and inf fail


def _fit_links(ops: list[Op], flows: list[tuple[int, np.ndarray]], K: int) -> tuple[list[Op], list[Link], float]:
    """Sizes ``s_q`` and channel bandwidths ``1 / t_ab`` with ``s_q t_ab ~ pc_qab`` (see the module docstring)."""
    if not flows or K < 2:
        return ops, [], 0.0
    off = ~np.eye(K, dtype=bool)
    pc = np.stack([t for _, t in flows])  # (flows, K, K)
    size = pc[:, off].max(axis=1)
    used = size > 0
    if not used.any():
        return ops, [], 0.0
    t = np.zeros((K, K))
    t[off] = np.median(pc[used][:, off] / size[used, None], axis=0)
    error = float(np.abs(size[:, None, None] * t - pc)[:, off].max() / pc.max())
    ops = list(ops)
    for (pos, _), s in zip(flows, size):
        ops[pos] = ops[pos].model_copy(update={"out_bytes": float(s)})
    links = [Link(src=f"{KIND_PREFIX}{a}", dst=f"{KIND_PREFIX}{b}", bandwidth=1.0 / t[a, b] if t[a, b] > 0 else math.inf)
             for a in range(K) for b in range(K) if a != b]
    return ops, links, error


def transfer_time(graph: Graph, cluster: Cluster) -> np.ndarray:
    """``(n, D, D)`` time to move each op's output from device ``a`` to device ``b`` (0 on the diagonal).

    The exact per-flow matrix where an op carries ``attrs["transfer_time"]`` (MOIRAI
    ``p^comm_{q a b}``), else ``out_bytes / route_bandwidth[a, b]``.
    """
    D = cluster.size
    with np.errstate(divide="ignore"):
        per_byte = np.where(np.eye(D, dtype=bool), 0.0, 1.0 / cluster.route_bandwidth)
    out = graph.out_bytes[:, None, None] * per_byte[None]
    for i, op in enumerate(graph.ops):
        exact = op.attrs.get("transfer_time")
        if exact is not None:
            exact = np.asarray(exact, dtype=float)
            if exact.shape != (D, D):
                raise SpecError(f"op {op.name!r}: transfer_time has shape {exact.shape}, the cluster has {D} devices")
            out[i] = exact
    return out


@importer("moirai", suffixes=(".xls", ".xlsx"))
def load(path: str | Path, **options: Any) -> Workload:
    """Read a MOIRAI ``.xls`` sheet as a workload on its heterogeneous devices.

    No options are accepted (the devices come from the sheet); an unknown option raises
    :class:`SpecError`.
    """
    if options:
        raise SpecError(f"moirai.load takes no options, got {sorted(options)}")
    path = Path(path)
    sheet, headers, rows = read_sheet(path)
    graph, cluster, error = build(headers, rows, name=path.stem, source=f"{path}, sheet {sheet!r}")
    meta = {"path": str(path), "transfer_fit_error": error, "objective": "makespan",
            "flows": sum(1 for op in graph.ops if op.attrs.get("moirai") == "communication")}
    return Workload(graph, cluster, "moirai", meta)


# ---------------------------------------------------------------------------- schedule files
def _kinds(graph: Graph) -> tuple[list[int], list[tuple[int, int, int]]]:
    """Task ops and ``(flow, producer, consumer)`` of a sheet's graph; a graph not read from a sheet is refused."""
    tasks = [i for i, op in enumerate(graph.ops) if op.attrs.get("moirai") == "operator"]
    flows = [(q, int(graph.predecessors(q)[0]), int(graph.successors(q)[0])) for q, op in enumerate(graph.ops)
             if op.attrs.get("moirai") == "communication"]
    if not tasks:
        raise SpecError(f"graph {graph.name!r} was not read from a MOIRAI sheet (no task ops); a schedule file "
                        "needs the sheet's task and flow ids")
    return tasks, flows


def schedule_to_dict(placement: Placement, congestion: str = "port") -> dict[str, Any]:
    """The placement's schedule as a MOIRAI schedule file (see the module docstring).

    The placement's own schedule, else its list schedule under ``congestion`` (the one the cost
    model scores); times in the sheet's units.
    """
    g, a = placement.graph, placement.assign
    tasks, flows = _kinds(g)
    schedule = placement.schedule if placement.schedule is not None else list_schedule(placement, congestion)
    moves = schedule.transfer_start
    return {"assignment": {g.names[i]: int(a[i]) for i in tasks},
            "start": {g.names[i]: float(schedule.start[i]) for i in tasks},
            "transfer_start": {g.names[q]: float(moves[(q, int(a[j]))]) for q, _, j in flows if a[q] != a[j]}}


def schedule_from_dict(graph: Graph, cluster: Cluster, data: Any) -> Placement:
    """The placement and schedule a MOIRAI schedule file gives (inverse of :func:`schedule_to_dict`).

    Flows run on their producer's device and take their instant when it ends; edges without a
    flow move nothing and start then too. A missing or unknown id, or a device index outside
    the sheet's columns, raises :class:`SpecError` naming it.
    """
    tasks, flows = _kinds(graph)
    if not isinstance(data, dict) or not all(isinstance(data.get(k), dict) for k in ("assignment", "start")):
        raise SpecError('a MOIRAI schedule file needs {"assignment": {task: device}, "start": {task: time}, '
                        '"transfer_start": {flow: time}}')
    assign = np.zeros(graph.n, dtype=np.int64)
    start = np.zeros(graph.n)
    for key, field in (("assignment", assign), ("start", start)):
        table = _ids(data[key], graph, {graph.names[i] for i in tasks}, key)
        for i in tasks:
            if graph.names[i] not in table:
                raise SpecError(f"schedule file: {key} has no entry for task {graph.names[i]}")
            field[i] = table[graph.names[i]]
    bad = [graph.names[i] for i in tasks if not 0 <= assign[i] < cluster.size or assign[i] != float(assign[i])]
    if bad:
        raise SpecError(f"schedule file: task {bad[0]} is on device {assign[graph.index[bad[0]]]}; the sheet has "
                        f"devices 0..{cluster.size - 1}")
    times = cluster.times(graph)
    for q, i, _ in flows:
        assign[q], start[q] = assign[i], start[i] + times[i, assign[i]]
    given = _ids(data.get("transfer_start", {}), graph, {graph.names[q] for q, _, _ in flows}, "transfer_start")
    placement = Placement(graph, cluster, assign)
    moves = {}
    for u, d in zip(*(x.tolist() for x in transfer_tasks(placement)[:2])):
        name = graph.names[u]
        if graph.ops[u].attrs.get("moirai") == "communication" and name not in given:
            raise SpecError(f"schedule file: transfer_start has no entry for flow {name}, whose ends run on devices "
                            f"{assign[u]} and {d}")
        moves[(u, d)] = given.get(name, start[u] + times[u, assign[u]])
    return Placement(graph, cluster, assign, source="schedule file", schedule=Schedule(start, moves))


def _ids(table: Any, graph: Graph, known: set[str], key: str) -> dict[str, float]:
    """``{id: number}`` of a schedule file's section, every id one of ``known``."""
    if not isinstance(table, dict):
        raise SpecError(f"schedule file: {key} must map ids to numbers, got {type(table).__name__}")
    out = {}
    for name, value in table.items():
        if str(name) not in known:
            raise SpecError(f"schedule file: {key} names {name!r}, which is not a "
                            f"{'flow' if key == 'transfer_start' else 'task'} of sheet {graph.name!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SpecError(f"schedule file: {key}[{name}] = {value!r}; give a finite number")
        out[str(name)] = float(value)
    return out
