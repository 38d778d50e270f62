"""Sweep tasks: the testbed, the grid of (graph, k, level or method), and running one task.

A task is the smallest unit a sweep stores: one graph, one number of stages ``k``, and either
one level of the bound hierarchy or one heuristic, with a time limit. :func:`execute` runs a
task in a worker process (a pool process or a Dask worker) and returns a JSON-ready record;
it never raises for a task's own error (the record says ``failed``), so that only a crash of
the process (a segfault, ``os._exit``, the OOM killer) reaches the executor, which retries it.

The problem of every task is the one ``benchmarks/bench_bounds.py`` certifies: the workload
resized to ``k`` copies of its first accelerator (PipeDream profiles: 12.5e6 bytes/ms and
16 GiB per stage, :mod:`placement_dsl.io.pipedream`), Archer's MTPP with DAG order and
streamed parameter overflow (cost model ``bottleneck``).
"""
from __future__ import annotations

import functools
import glob
import os
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..bounds import simple_lower_bound
from ..constraints import DagOrder
from ..deadline import Deadline
from ..errors import PlacementError, SpecError
from ..evaluate import CostModel
from ..graph import Graph, Op
from ..heuristics import jit, run
from ..heuristics.registry import names
from ..objectives import Bottleneck
from ..presets import dag_problem, read_workload, resized
from ..problem import Problem, Stages

LEVEL, METHOD = "level", "method"
KINDS = (LEVEL, METHOD)
COST_MODEL = "bottleneck"
TESTING_ENV = "PLACEMENT_DSL_SWEEP_TESTING"  # "1": the fake methods below exist (tests only)
DELAY_ENV = "PLACEMENT_DSL_SWEEP_TEST_DELAY"  # seconds a worker sleeps before each task (tests only)
HOOK_ENVS = (TESTING_ENV, DELAY_ENV)
# Test-only methods, available when TESTING_ENV is set: each one ends its process the way a
# broken solver would, or raises.
FAKE_METHODS = ("test-exit", "test-segfault", "test-error")
SKIPPED_FILES = ("license", "readme", "notice")  # stems a testbed directory may hold beside the workloads


# ---------------------------------------------------------------------------- tasks
@dataclass(frozen=True, order=True)
class Task:
    """One cell of the grid: ``graph`` (an id unique in the sweep) read from ``source``, on ``k``
    stages, running the level or heuristic ``name`` (``kind``) within ``time_limit`` seconds."""

    k: int
    graph: str
    kind: str
    name: str
    source: str
    time_limit: float

    @property
    def key(self) -> str:
        """The store's key: what the task computes (its ``source`` may move without changing it)."""
        return f"{self.graph}|k={self.k}|{self.kind}={self.name}|limit={self.time_limit:g}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Task:
        return cls(**{f: data[f] for f in cls.__dataclass_fields__})


def plan(graphs: list[tuple[str, str]], ks: list[int], levels: list[str], methods: list[str],
         time_limit: float) -> list[Task]:
    """Every task of the grid, ``k`` first so that a partial sweep covers all graphs at small ``k``.

    Parameters
    ----------
    graphs
        ``(id, source)`` pairs from :func:`expand_testbed`.
    ks, levels, methods
        Numbers of stages, levels of :data:`placement_dsl.certify.LEVELS`, heuristics of
        the heuristics' registry (:func:`placement_dsl.heuristics.registry.names`) (checked here).
    time_limit
        Seconds per task, its start-up included (:func:`execute`): a level's ``certify`` budget and its heuristics',
        a method's time limit.
    """
    check_names(levels, methods)
    if not ks or any(int(k) != k or k < 1 for k in ks):
        raise SpecError(f"sweep: stages must be integers >= 1, got {ks!r}; write e.g. --stages 2,4,8")
    if not time_limit > 0:
        raise SpecError(f"sweep: the time limit must be > 0 seconds, got {time_limit!r}")
    cells = [(LEVEL, lv) for lv in levels] + [(METHOD, m) for m in methods]
    return sorted(Task(int(k), gid, kind, name, src, float(time_limit))
                  for k in ks for gid, src in graphs for kind, name in cells)


def check_names(levels: list[str], methods: list[str]) -> None:
    """Refuse unknown levels or methods, naming them and the choices."""
    from ..certify import LEVELS

    bad_levels = [lv for lv in levels if lv not in LEVELS]
    if bad_levels:
        raise SpecError(f"sweep: unknown level(s) {bad_levels}; choose from {list(LEVELS)}")
    methods_known = names()
    known = methods_known + (list(FAKE_METHODS) if testing() else [])
    bad = [m for m in methods if m not in known]
    if bad:
        raise SpecError(f"sweep: unknown method(s) {bad}; choose from {methods_known}")
    if not levels and not methods:
        raise SpecError("sweep: nothing to run; give --levels and/or --methods")


def testing() -> bool:
    """Whether the test-only hooks are on (:data:`TESTING_ENV` set and not 0)."""
    return os.environ.get(TESTING_ENV, "").strip() not in ("", "0")


def hooks() -> dict[str, str]:
    """The driver's test-hook variables, handed to every task (workers may not share its environment)."""
    return {name: os.environ[name] for name in HOOK_ENVS if name in os.environ}


# ---------------------------------------------------------------------------- the testbed
def expand_testbed(spec: str) -> list[tuple[str, str]]:
    """``(id, source)`` of every graph of a testbed, in a stable order.

    ``spec`` is a comma-separated list of items, each ``zoo:NAME``, a workload file, a
    directory (every file in it but licences and read-mes) or a glob. The id is the zoo name
    or the file's stem, and must be unique.
    """
    found: list[tuple[str, str]] = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        if item.startswith("zoo:"):
            found.append((item[4:], item))
        else:
            found.extend((Path(p).stem, str(Path(p).resolve())) for p in _files(item))
    if not found:
        raise SpecError(f"sweep: testbed {spec!r} names no graph; give a directory, a glob or zoo:NAME,...")
    _check_unique(found)
    return found


def _files(item: str) -> list[str]:
    """The workload files an item of the testbed names."""
    path = Path(item)
    if path.is_dir():
        files = sorted(str(p) for p in path.iterdir() if p.is_file() and not p.name.startswith(".")
                       and p.stem.lower() not in SKIPPED_FILES)
        if not files:
            raise SpecError(f"sweep: testbed directory {item!r} holds no workload file")
        return files
    if path.is_file():
        return [item]
    if any(ch in item for ch in "*?["):
        files = sorted(p for p in glob.glob(item) if Path(p).is_file())
        if not files:
            raise SpecError(f"sweep: testbed glob {item!r} matches no file; check the pattern (quote it in the shell)")
        return files
    raise SpecError(f"sweep: testbed item {item!r} is not a file, a directory, a glob or zoo:NAME")


def _check_unique(found: list[tuple[str, str]]) -> None:
    seen: dict[str, str] = {}
    for gid, src in found:
        if gid in seen and seen[gid] != src:
            raise SpecError(f"sweep: graph id {gid!r} names both {seen[gid]!r} and {src!r}; rename one of the files "
                            "(the id is the file's stem)")
        seen[gid] = src


def check_graphs(graphs: list[tuple[str, str]]) -> None:
    """Read every graph once, so that an unreadable file (or one with an op no device of its cluster runs) stops
    the sweep before it starts."""
    for gid, src in graphs:
        try:
            _workload(src, None).check_runnable()
        except SpecError as err:
            raise SpecError(f"sweep: graph {gid!r} ({src}) cannot be read: {err}; fix or remove it") from None


# ---------------------------------------------------------------------------- running a task
@functools.lru_cache(maxsize=8)
def _base_workload(source: str) -> Any:
    return read_workload(source)


def _workload(source: str, k: int | None) -> Any:
    """The workload of ``source`` on ``k`` stages (as ``bench_bounds`` builds it)."""
    w = _base_workload(source)
    return w if k is None else resized(w, k)


def family(workload: Any) -> str:
    """The testbed family of a workload: ``regal`` for REGAL graphs, else its file format (``pipedream``...)."""
    generator = str(workload.meta.get("generator", ""))
    return generator.rsplit(".", 1)[-1] if generator else str(workload.format)


def execute(payload: dict[str, Any]) -> dict[str, Any]:
    """Run one task (``Task.to_dict()`` plus ``hooks``) and return its record; task errors become ``failed``.

    The record holds ``status`` (``done`` or ``failed``), ``value`` (the level's bound or the
    method's objective), ``ub`` (the best placement the task saw), ``simple`` (Lemma 3.3),
    ``seconds`` (the level's or heuristic's own time), the graph's size and family, ``detail``,
    ``start_seconds`` (of the task's clock, what was spent before its work began) and ``code_version``.

    The task's time limit is a clock from ``payload["clock"]`` (a :func:`time.monotonic` reading on this host: when
    the local executor's worker slot was free, the sweep's start for the first tasks), else from this call; the
    process's start, its loads (:func:`warm`), reading the graph, the heuristics and the level all come out of it.
    """
    clock = Deadline(float(payload["time_limit"]), start=payload.get("clock"))  # before the process's loads
    os.environ.update(payload.get("hooks", {}))
    warm()
    start = time.perf_counter()
    record: dict[str, Any] = {"code_version": code_version(), "host": socket.gethostname(), "pid": os.getpid(),
                              "start_seconds": clock.elapsed()}
    try:
        task = Task.from_dict(payload)
        _test_hooks(task)
        record.update(_run(task, clock))
        record["status"] = "done"
    except Exception as err:  # noqa: BLE001 - a task's own error is its result; the sweep goes on
        record.update(status="failed", error=f"{type(err).__name__}: {err}")
    record["wall_seconds"] = time.perf_counter() - start
    return record


def _run(task: Task, clock: Deadline) -> dict[str, Any]:

    w = _workload(task.source, task.k)
    problem = dag_problem(w, CostModel.named(COST_MODEL))
    out = {"n": w.graph.n, "m": w.graph.m, "family": family(w),
           "simple": float(simple_lower_bound(problem.graph, problem.cluster))}
    out.update(_level(problem, task, clock) if task.kind == LEVEL else _method(problem, task, clock))
    return out


def _level(problem: Any, task: Task, clock: Deadline) -> dict[str, Any]:
    """``certify`` with this level only (``stop_at_gap=False``), within what is left of the task's ``clock``.

    ``certify``'s budget also pays for the heuristics it runs first (:data:`~placement_dsl.certify.UPPER`);
    on a large graph with a short limit they would leave the level nothing (even ``simple``
    would read "budget spent"). So they are timed here first, within :data:`UPPER_SHARE` of the task's limit, and
    the level gets the rest of the clock (the task ends within its limit; the heuristics' time was added to it, so
    a task took up to 1.25 times its limit past its own start-up).
    """
    from ..certify import certify
    heuristics = _upper_seconds(problem, clock.within(UPPER_SHARE * task.time_limit))
    cert = certify(problem, budget=task.time_limit, deadline=clock, levels=(task.name,), gap=0.0, workers=1,
                   stop_at_gap=False)
    row = cert.levels[0]
    return {"value": row.bound, "ub": cert.objective, "seconds": row.seconds,
            "detail": {"status": row.status.value, "message": row.message, "scope": str(row.scope),
                       "ub_by": cert.found_by, "upper_bound_seconds": heuristics}}


UPPER_SHARE = 0.25  # of a level task's limit, what its upper-bound heuristics are timed within (certify's own share)


def _upper_seconds(problem: Any, clock: Deadline) -> float:
    """Seconds the upper-bound heuristics of ``certify`` take on ``problem`` (0 unless it has ``DagOrder``), each
    with what is left of ``clock`` as its time limit, none started once it is spent: without one, BRKGA and
    slicegraph on GPT-3's 18,164 ops held a 10 s task for 150 s."""
    from ..certify import UPPER
    if not problem.has(DagOrder):
        return 0.0
    start = time.perf_counter()
    for method in UPPER:
        if clock.expired():
            break
        try:
            run(method, problem.graph, problem.cluster, model=problem.cost_model(), time_limit=clock.left())
        except PlacementError:
            continue
    return time.perf_counter() - start


def _method(problem: Any, task: Task, clock: Deadline) -> dict[str, Any]:
    """The heuristic's objective under the problem's cost model (seed 0), its time limit what is left of the task's
    ``clock`` (without one, BRKGA and slicegraph ran as long as their searches took, the watchdog's 3 times the limit
    and 5 minutes their only bound)."""

    res = run(task.name, problem.graph, problem.cluster, model=problem.cost_model(), seed=0,
              time_limit=clock.left())
    return {"value": res.objective, "ub": res.objective, "seconds": res.seconds,
            "detail": {"evaluations": res.evaluations, "valid": bool(problem.is_valid(res.placement))}}


def _test_hooks(task: Task) -> None:
    """Test-only behaviour (with :data:`TESTING_ENV`): a delay before each task, and the fake methods."""
    if not testing():
        return
    time.sleep(float(os.environ.get(DELAY_ENV, "0") or 0))
    if task.name == "test-exit":
        os._exit(86)
    if task.name == "test-segfault":
        import ctypes

        ctypes.string_at(0)  # reads address 0: SIGSEGV, like a solver's crash
    if task.name == "test-error":
        raise RuntimeError("test-error: a task that raises")


# ---------------------------------------------------------------------------- process set-up
_WARM = False


def warm() -> None:
    """Load what every task needs once per process: the package, the compiled heuristic kernels
    (from numba's cache) and the MIP stack, so that only the first tasks' time limits pay for them (their clocks
    start with the sweep: :class:`~placement_dsl.sweep.executors.LocalExecutor`).

    In the local executor's fork server this also fixes the code every task runs: the modules
    are in memory before the first fork, whatever happens to the files afterwards.
    """
    global _WARM
    if _WARM:
        return
    _WARM = True
    from ..certify import WARM_METHODS, certify

    jit.load_kernels(WARM_METHODS)  # the warm-up chain below is small enough for Python kernels: loaded here
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=1, out_bytes=1), Op(name="c", work=2)],
              [("a", "b"), ("b", "c")], name="warm-up")
    certify(Problem(g, Stages(2), Bottleneck(), [DagOrder()]), budget=30, levels=("simple", "superblock"), gap=0.0,
            stop_at_gap=False)
    code_version()


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """``placement_dsl`` version, with ``git describe --always --dirty`` of its checkout when there is one."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return __version__
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty", "--tags"], cwd=root, capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{__version__}+{out}" if out else __version__
