"""What a pipeline runtime costs beyond the modules' own time, measured and fitted: stage times predicted
against measured (:func:`calibration`), the link's latency and bandwidth (:func:`ping_pong`, :func:`fit_link`),
the runtime's cost per task measured on stages that compute nothing (:func:`idle_pipeline`,
:func:`runtime_overhead`), and the fits of what cannot be measured apart (:func:`fit_overhead`,
:func:`fit_slowdown_and_overhead`), gathered in :class:`RunCosts`.

The modules' own times are :mod:`placement_dsl.profile`'s. :func:`ping_pong` needs ``torch``.
"""
from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .cluster import ACCELERATOR, Cluster, Device
from .errors import SpecError
from .evaluate import CostModel
from .graph import Graph, Op
from .io.costs import rounded
from .io.torch_export import import_torch
from .pipeline_orders import FOLDS
from .placement import Placement
from .simulate import RUN_SCHEDULES, simulate
from .zoo.training import with_backward


@dataclass(frozen=True)
class StageFit:
    """Predicted against measured time of one stage (ms per micro-batch) and the residual; ``ops``: how many ops of
    its graph the stage runs (forward and backward ops of a training graph), for :func:`stage_costs_of`;
    ``comm_ms``: what its tensors to and from the other stages cost at the measured link (the cost model's ``in`` and
    ``out``), part of the measured time, never fitted; ``schedule``: the schedule it ran (:func:`schedule_scales`)."""

    stage: int
    predicted_ms: float
    measured_ms: float
    ops: int = 0
    comm_ms: float = 0.0
    schedule: str = ""

    @property
    def residual(self) -> float:
        """``(measured - predicted) / measured`` (0 when both are 0)."""
        return (self.measured_ms - self.predicted_ms) / self.measured_ms if self.measured_ms else 0.0


def calibration(predicted: Sequence[float], measured: Sequence[float], ops: Sequence[int] | None = None,
                comm: Sequence[float] | None = None, schedule: str = "") -> list[StageFit]:
    """Stage by stage fits of ``predicted`` against ``measured`` times (``ops``: each stage's op count; ``comm``: its
    tensors' time at the link; ``schedule``: the schedule run), refused if the lengths differ."""
    counts = [0] * len(predicted) if ops is None else list(ops)
    links = [0.0] * len(predicted) if comm is None else list(comm)
    if not len(predicted) == len(measured) == len(counts) == len(links):
        raise SpecError(f"calibration: {len(predicted)} predicted stage times but {len(measured)} measured, "
                        f"{len(counts)} op counts and {len(links)} link times")
    return [StageFit(k, float(p), float(m), int(n), float(c), schedule)
            for k, (p, m, n, c) in enumerate(zip(predicted, measured, counts, links))]


def scale_of(fits: Sequence[StageFit]) -> float:
    """The one factor ``c`` minimizing ``sum (measured - c * predicted)^2`` over ``fits`` (1 without a prediction).

    >>> scale_of(calibration([1.0, 2.0], [2.0, 4.0]))
    2.0
    """
    num = sum(f.predicted_ms * f.measured_ms for f in fits)
    den = sum(f.predicted_ms ** 2 for f in fits)
    return num / den if den > 0 else 1.0


def affine_of(fits: Sequence[StageFit]) -> tuple[float, float]:
    """``(c, b)`` minimizing ``sum (measured - c * predicted - b)^2`` over ``fits``, ``b >= 0``: the compute factor and
    a stage's fixed time per micro-batch, not proportional to its modules' cost (the calls into the stage module and
    the runtime's handling of each micro-batch's chunk). ``b`` is 0 (and ``c`` :func:`scale_of`'s) when the stages'
    predictions do not differ, or when the line through them would start below 0.

    >>> affine_of(calibration([1.0, 3.0], [4.0, 8.0]))
    (2.0, 2.0)
    >>> affine_of(calibration([2.0, 2.0], [4.0, 5.0]))[1]
    0.0
    """
    xs = [f.predicted_ms for f in fits]
    ys = [f.measured_ms for f in fits]
    if len(fits) < 2 or max(xs) - min(xs) <= 1e-12 * max(1.0, max(xs)):
        return scale_of(fits), 0.0
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    fixed = my - slope * mx
    if fixed < 0 or slope <= 0:
        return scale_of(fits), 0.0
    return slope, fixed


def stage_costs_of(fits: Sequence[StageFit]) -> tuple[float, float, float]:
    """``(c, op_ms, b)`` minimizing ``sum ((measured - c * predicted - op_ms * ops - b) / measured)^2``, ``op_ms >= 0``
    and ``b >= 0``: the compute factor, a fixed time per op the stage runs and a fixed time per stage, per
    micro-batch. A stage module runs its ops one by one (``torch.distributed.pipelining``'s stage submodules are
    interpreted graphs, and the autograd engine walks the backward op by op), each at a cost that does not grow
    with the micro-batch and that a profile of the eager modules hardly sees; so a stage of few ops has a smaller
    fixed time than one of many, which one constant per stage (:func:`affine_of`) cannot follow.

    ``ops`` and ``predicted`` move together over the splits of one model at one micro-batch size (a stage of more
    layers has more ops and more compute); stages measured at two or more micro-batch sizes separate them (the
    compute grows with the micro-batch, the ops do not). A stage's ``comm_ms`` (its tensors at the measured link,
    as the rank's CPU time pays them: :func:`ping_pong` with ``clock="cpu"``) is taken off its measured time first: fitted into ``c`` and
    ``b`` it charged a split whose boundary tensors are small (a late cut of a CNN) with the early cut's traffic.
    Of the fits with ``op_ms`` or ``b`` held at 0 or free, the
    best whose terms are >= 0 (and ``c > 0``); a term whose column the stages cannot tell apart from the others'
    stays 0.

    >>> fits = calibration([2.0, 4.0, 1.0, 2.0], [3.6, 7.0, 2.4, 4.6], ops=[10, 20, 10, 20])
    >>> [round(x, 6) for x in stage_costs_of(fits)]
    [1.2, 0.1, 0.2]
    >>> [round(x, 6) for x in stage_costs_of(calibration([1.0, 3.0], [4.0, 8.0]))]  # no op counts: affine_of's
    [2.0, 0.0, 2.0]
    """
    factors, op_ms, fixed = schedule_costs_of([replace(f, schedule="") for f in fits])
    return factors.get("", 1.0), op_ms, fixed


def schedule_costs_of(fits: Sequence[StageFit], relative: bool = True) -> tuple[dict[str, float], float, float]:
    """``({schedule: c}, op_ms, b)``: :func:`stage_costs_of`'s fit with a compute factor per schedule the ``fits`` ran,
    minimizing ``sum ((measured - comm - c[schedule] * predicted - op_ms * ops - b) / measured)^2`` (the relative
    residuals: :func:`_relative_weights`). A stage under GPipe keeps every
    micro-batch's activations until its backward, 1F1B a few, so the same modules compute on memory of another size
    (5-12 % more CPU under GPipe on the example CNNs). The terms are fitted together: where a second micro-batch size
    runs under one schedule alone, one factor fitted first left the other schedule's difference in the time per op
    and per stage.

    >>> fits = [*calibration([2.0, 4.0], [4.2, 8.2], ops=[10, 20], schedule="gpipe"),
    ...         *calibration([2.0, 4.0, 1.0, 2.0], [3.6, 7.0, 2.4, 4.6], ops=[10, 20, 10, 20], schedule="1f1b")]
    >>> c, op_ms, b = schedule_costs_of(fits)
    >>> {s: round(x, 6) for s, x in c.items()}, round(op_ms, 6), round(b, 6)
    ({'gpipe': 1.5, '1f1b': 1.2}, 0.1, 0.2)
    """
    names = list(dict.fromkeys(f.schedule for f in fits))
    w = _relative_weights(fits) if relative else np.ones(len(fits))  # not relative: the absolute ms, as before
    xs = [[w[i] * f.predicted_ms if f.schedule == s else 0.0 for i, f in enumerate(fits)] for s in names]
    ys = w * np.array([f.measured_ms - f.comm_ms for f in fits], dtype=float)  # the link's share is measured
    columns = {"ops": (w * np.array([float(f.ops) for f in fits])).tolist(), "fixed": w.tolist()}
    x, ops = np.array(xs, dtype=float).reshape(len(names), len(fits)).T, np.array(columns["ops"])

    def loss(c: Sequence[float], op_ms: float, b: float) -> float:
        return float(np.sum((ys - x @ np.asarray(c, dtype=float) - op_ms * ops - b * w) ** 2))

    alone = [scale_of([f for f in fits if f.schedule == s]) for s in names]
    best = (loss(alone, 0.0, 0.0), (alone, 0.0, 0.0))
    k = len(names)
    for free in (("ops", "fixed"), ("ops",), ("fixed",)):
        solved = _least_squares([*xs, *(columns[t] for t in free)], ys.tolist())
        if solved is None or min(solved[:k]) <= 0 or min(solved[k:]) < 0:
            continue
        terms = dict(zip(free, solved[k:]))
        coef = (solved[:k], terms.get("ops", 0.0), terms.get("fixed", 0.0))
        if loss(*coef) < best[0] - 1e-12 * max(1.0, best[0]):
            best = (loss(*coef), coef)
    c, op_ms, fixed = best[1]
    return dict(zip(names, map(float, c))), float(op_ms), float(fixed)


def _relative_weights(fits: Sequence[StageFit]) -> np.ndarray:
    """Each stage's weight in the calibration's least squares, ``1 / measured``: the fit minimizes the stages' relative
    residuals, which the calibration is judged by, and a stage's timing noise grows with its time. In absolute terms
    a stage of 0.5 ms (a lopsided split's stem alone) weighed nothing beside stages of 20 ms, whose spread the time per
    stage then took up (1.2-1.8 ms, where the stem measured 0.4-0.6 ms in all: predicted 150-350 % off). A time at or
    below 0 (noise, the idle stages' time taken off) counts as a twentieth of the median stage's."""
    measured = np.array([f.measured_ms for f in fits], dtype=float)
    floor = 0.05 * float(np.median(np.abs(measured))) if len(measured) else 1.0
    return 1.0 / np.maximum(measured, floor if floor > 0 else 1.0)


def _least_squares(columns: Sequence[Sequence[float]], ys: Sequence[float]) -> list[float] | None:
    """The coefficients of ``columns`` minimizing the squared error to ``ys``; None when fewer rows than columns or
    when the columns are (nearly) dependent."""
    a = np.asarray(columns, dtype=float).T
    if a.shape[0] < a.shape[1] or np.linalg.matrix_rank(a, tol=1e-9 * max(1.0, float(np.abs(a).max()))) < a.shape[1]:
        return None
    return np.linalg.lstsq(a, np.asarray(ys, dtype=float), rcond=None)[0].tolist()


def schedule_scales(fits: Sequence[StageFit], op_ms: float = 0.0, fixed_ms: float = 0.0) -> dict[str, float]:
    """The compute factor of each schedule the ``fits`` ran, with the time per op and per stage held (as
    :func:`stage_costs_of` fitted them over all): a stage under GPipe keeps every micro-batch's activations until its
    backward, 1F1B a few, so the same modules compute on memory of another size and the factors differ (by 5-12 %
    on the example CNNs, which one factor leaves as residuals of opposite signs on one stage). A schedule whose stages
    measured no more than those held times, nor a positive time at all, has no factor and is left out (a model so
    small that the runtime's work per action is all of a rank's time: ``examples/run_interleaved.py`` at its
    default width).

    >>> fits = [*calibration([2.0], [4.4], schedule="gpipe"), *calibration([2.0], [4.0], schedule="1f1b")]
    >>> {s: round(c, 6) for s, c in schedule_scales(fits).items()}
    {'gpipe': 2.2, '1f1b': 2.0}
    >>> schedule_scales(calibration([2.0], [-0.1], schedule="zbv"))
    {}
    """
    out: dict[str, float] = {}
    for s in dict.fromkeys(f.schedule for f in fits):
        mine = [f for f in fits if f.schedule == s]
        den = sum(f.predicted_ms ** 2 for f in mine)
        num = sum(f.predicted_ms * (f.measured_ms - f.comm_ms - op_ms * f.ops - fixed_ms) for f in mine)
        factor = num / den if den > 0 and num > 0 else scale_of(mine)
        if factor > 0:
            out[s] = factor
    return out


def calibrated(fits: Sequence[StageFit], scale: float | dict[str, float] | RunCosts, fixed_ms: float = 0.0,
               op_ms: float = 0.0) -> list[StageFit]:
    """``fits`` with every prediction multiplied by ``scale`` (the machine's speed against the profile's; or each
    schedule's, :func:`schedule_scales`), ``fixed_ms`` added (a stage's fixed time per micro-batch, :func:`affine_of`),
    ``op_ms`` per op of the stage (:func:`stage_costs_of`) and the stage's time at the link (``comm_ms``); or as a
    run's :class:`RunCosts` price them (its factor of each fit's schedule, its time per stage and per op)."""
    if isinstance(scale, RunCosts):
        return calibrated(fits, {f.schedule: scale.scale_for(f.schedule) for f in fits}, scale.stage_ms, scale.op_ms)

    def factor(f: StageFit) -> float:
        return scale.get(f.schedule, 1.0) if isinstance(scale, dict) else scale

    return [replace(f, predicted_ms=f.predicted_ms * factor(f) + fixed_ms + op_ms * f.ops + f.comm_ms) for f in fits]


# ---------------------------------------------------------------------------- the link between two ranks
@dataclass(frozen=True)
class LinkTime:
    """One-way time of a point-to-point message: ``latency_ms + bytes / bandwidth`` (``bandwidth`` in bytes per ms),
    fitted on ``samples`` (bytes, one-way ms)."""

    latency_ms: float
    bandwidth: float
    samples: tuple[tuple[int, float], ...] = ()

    def ms(self, size: float) -> float:
        """The fitted one-way ms of a message of ``size`` bytes."""
        return self.latency_ms + size / self.bandwidth


def fit_link(samples: Sequence[tuple[float, float]], grows: bool = True) -> LinkTime:
    """The least-squares line ``ms = latency + bytes / bandwidth`` through ``samples`` (bytes, ms), latency
    clipped at 0; refused without two sizes or, unless ``grows`` is false, when the time does not grow with the
    size (then: the mean time per message, bandwidth unbounded: a rank's CPU time, which gloo's own threads'
    copies are not part of).

    >>> t = fit_link([(0, 0.05), (1000, 0.06), (2000, 0.07)])
    >>> round(t.latency_ms, 6), round(t.bandwidth, 3)
    (0.05, 100000.0)
    >>> flat = fit_link([(4, 0.03), (1 << 22, 0.02)], grows=False)
    >>> flat.latency_ms, flat.bandwidth
    (0.025, inf)
    """
    xs = [float(x) for x, _ in samples]
    ys = [float(y) for _, y in samples]
    if len(set(xs)) < 2:
        raise SpecError(f"fit_link: needs messages of at least two sizes, got sizes {sorted(set(xs))}")
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    if not slope > 0 and not grows:
        return LinkTime(max(0.0, my), math.inf, tuple((int(x), y) for x, y in zip(xs, ys)))
    if not slope > 0:
        raise SpecError(f"fit_link: the one-way time does not grow with the message size (slope {slope!r} ms per "
                        "byte); measure larger messages")
    latency = max(0.0, my - slope * mx)
    return LinkTime(latency, 1.0 / slope, tuple((int(x), y) for x, y in zip(xs, ys)))


def _ping_pong_rank(rank: int, port: int, sizes: Sequence[int], repeat: int, out: str, clock: str = "wall") -> None:
    import os

    torch = import_torch()
    dist = torch.distributed
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    rows = []
    try:
        for size in sizes:
            buf = torch.zeros(max(1, size // 4), dtype=torch.float32)
            trips = []
            now = time.perf_counter if clock == "wall" else time.thread_time
            for i in range(repeat + 2):
                dist.barrier()
                start = now()
                if rank == 0:
                    dist.send(buf, 1)
                    dist.recv(buf, 1)
                else:
                    dist.recv(buf, 0)
                    dist.send(buf, 0)
                if i >= 2:
                    trips.append(1e3 * (now() - start))
            rows.append((buf.numel() * 4, min(trips) / 2))
    finally:
        dist.destroy_process_group()
    if rank == 0:
        Path(out).write_text(json.dumps(rows))


def ping_pong(sizes: Sequence[int] = (4, 1 << 16, 1 << 18, 1 << 20, 1 << 22), repeat: int = 20,
              clock: str = "wall") -> LinkTime:
    """Measure the gloo point-to-point link between two processes on this machine (one thread each): per size, the
    fastest round trip of ``repeat`` messages sent and returned, halved (the one least disturbed by other work, as
    :func:`profile_module` keeps); then :func:`fit_link` over the sizes. ``clock="cpu"``: the main thread's CPU time
    of a send and a receive instead of the wall clock, as a rank's stage is timed (``time.thread_time``): gloo copies
    a message on threads of its own, so it costs the rank a fixed time, whatever its size (0.02-0.05 ms at 4 B to
    4 MB, where the wall clock grows 0.04 to 0.9 ms), and the line may be flat (bandwidth unbounded)."""
    import socket
    import tempfile

    torch = import_torch()
    if repeat < 1 or len(set(sizes)) < 2 or min(sizes) < 1 or clock not in ("wall", "cpu"):
        raise SpecError(f"ping_pong: needs repeat >= 1 ({repeat}), two sizes >= 1 byte or more ({list(sizes)}) and "
                        f"clock 'wall' or 'cpu' ({clock!r})")
    for attempt in range(PING_PONG_TRIES):  # a wall-clock line bent by other work is measured again, more times
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        with tempfile.TemporaryDirectory() as tmp:
            out = str(Path(tmp, "link.json"))
            torch.multiprocessing.start_processes(_ping_pong_rank, args=(port, list(sizes), repeat << attempt, out,
                                                                         clock), nprocs=2, join=True, start_method="fork")
            rows = json.loads(Path(out).read_text())
        try:
            return fit_link(rows, grows=clock == "wall")
        except SpecError:
            if attempt == PING_PONG_TRIES - 1:
                raise


PING_PONG_TRIES = 3  # tries (each doubling the round trips) before a line not growing is an error (under load: -7e-10)


# ---------------------------------------------------------------------------- a pipeline run's costs
@dataclass(frozen=True)
class RunCosts:
    """What a pipeline run costs besides the profiled compute, fed through the cost model's own terms.

    ``scale``: measured compute over profiled (the machine's speed against the profile's; the stage
    devices' ``speed`` is ``1 / scale``); ``link``: the point-to-point link between ranks (the devices'
    ``bandwidth`` and the cost model's ``message_latency``, paid per tensor on each side as bytes are);
    ``overhead_ms``: the runtime's fixed time per task, each stage's forward or backward of one
    micro-batch (the cost model's ``task_overhead``: the schedule's Python, the calls into gloo);
    ``slowdown``: wall clock over CPU time of the ranks' compute during the run (1 on an idle machine; on
    a CPU shared with other work, the share it left the ranks), which multiplies ``scale`` in the devices'
    speed when a step's wall-clock time is predicted from CPU-time profiles; ``stage_ms``: a stage's fixed CPU
    time per micro-batch beyond what ``scale`` makes of its modules' profiled times and beyond ``overhead_ms``
    (:func:`affine_of`'s ``b``: a cost per stage and micro-batch, not proportional to the stage's ops; half on each
    of the stage's forward and backward tasks, times ``slowdown`` as compute is); ``op_ms``: a stage's fixed CPU time
    per op it runs and micro-batch (:func:`stage_costs_of`), added to every op's time on the stage devices (times
    ``slowdown``), so that the cost model, the simulator and a search on :meth:`placement`'s graph price it where
    the ops are; ``scales``: the compute factor of each schedule measured apart (:func:`schedule_scales`), ``scale``
    being that of any other: :meth:`under` gives a schedule's costs, whose ``scale`` every method then reads.
    """

    scale: float = 1.0
    link: LinkTime = LinkTime(0.0, float("inf"))
    overhead_ms: float = 0.0
    slowdown: float = 1.0
    stage_ms: float = 0.0
    op_ms: float = 0.0
    scales: tuple[tuple[str, float], ...] = ()

    def scale_for(self, schedule: str | None) -> float:
        """The compute factor of ``schedule``: its own where measured apart, else ``scale``.

        >>> c = RunCosts(1.1, scales=(("gpipe", 1.2),))
        >>> c.scale_for("gpipe"), c.scale_for("1f1b"), c.scale_for(None)
        (1.2, 1.1, 1.1)
        """
        return dict(self.scales).get(schedule, self.scale) if schedule else self.scale

    def with_factors(self, factors: Mapping[str, float]) -> RunCosts:
        """These costs with each schedule of ``factors`` priced at its factor, measured apart (an interleaved run's
        beside a GPipe and 1F1B calibration: ``examples/run_interleaved.py``); a schedule already held takes the new
        factor. A schedule no runtime runs or a factor that is no finite number > 0 is refused, naming it.

        >>> c = RunCosts(1.1, scales=(("gpipe", 1.2), ("zbv", 1.0))).with_factors({"zbv": 1.3, "zb-h1": 1.25})
        >>> c.scales, c.scale_for("zb-h1")
        ((('gpipe', 1.2), ('zbv', 1.3), ('zb-h1', 1.25)), 1.25)
        """
        for schedule, factor in factors.items():
            if schedule not in RUN_SCHEDULES:
                raise SpecError(f"schedule_scales: {schedule!r} is no schedule a runtime runs ({list(RUN_SCHEDULES)})")
            if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor < math.inf:
                raise SpecError(f"schedule_scales.{schedule}: the compute factor must be a finite number > 0, got "
                                f"{factor!r}")
        merged = {**dict(self.scales), **{s: float(c) for s, c in factors.items()}}
        return replace(self, scales=tuple(merged.items()))

    def under(self, schedule: str | None) -> RunCosts:
        """The costs of a run under ``schedule``: :meth:`scale_for` as ``scale``, no other schedule's (``None``:
        these costs)."""
        return self if schedule is None else replace(self, scale=self.scale_for(schedule), scales=())

    @staticmethod
    def fitted(fits: Sequence[StageFit], link: LinkTime = LinkTime(0.0, float("inf")), relative: bool = True
               ) -> RunCosts:
        """The costs :func:`schedule_costs_of` fits on ``fits`` at ``link`` (``relative``: its weights): each
        schedule's factor, the time per op and per stage; ``scale`` the factor over all with those held."""
        factors, op_ms, fixed = schedule_costs_of(fits, relative)
        c = schedule_scales([replace(f, schedule="") for f in fits], op_ms, fixed).get("", 1.0)
        return RunCosts(c, link, stage_ms=fixed, op_ms=op_ms, scales=tuple(factors.items()))

    @property
    def task_ms(self) -> float:
        """The cost model's ``task_overhead``: the runtime's time per task and half a stage's fixed time, slowed as
        the ranks' compute is.

        >>> RunCosts(overhead_ms=0.5, slowdown=2.0, stage_ms=1.5).task_ms
        2.0
        """
        return self.overhead_ms + self.slowdown * self.stage_ms / 2

    def cluster(self, stages: int, kind: str = ACCELERATOR) -> Cluster:
        """``stages`` identical devices of ``kind`` at the run's speed and link bandwidth."""
        bandwidth = min(self.link.bandwidth, 1e15)
        return Cluster([Device(name=f"rank{k}", kind=kind, speed=1.0 / (self.scale * self.slowdown), bandwidth=bandwidth)
                        for k in range(stages)])

    def model(self) -> CostModel:
        """The simulator's default cost model (no overlap, overflow memory) with the run's fixed costs."""
        return CostModel(memory="overflow", require=frozenset(), task_overhead=self.task_ms,
                         message_latency=self.link.latency_ms)

    def placement(self, p: Placement) -> Placement:
        """``p`` on :meth:`cluster` (same assignment; its devices' kind), every op taking ``op_ms`` more there.

        >>> g = Graph([Op(name="a", work=2.0), Op(name="b", work=4.0)], [("a", "b")])
        >>> q = RunCosts(scale=2.0, op_ms=1.0).placement(Placement(g, Cluster.stages(2), [0, 1]))
        >>> [q.cluster.devices[k].speed for k in (0, 1)], [op.time_on(ACCELERATOR) for op in q.graph.ops]
        ([0.5, 0.5], [2.5, 4.5])
        """
        kind = p.cluster.devices[0].kind
        return Placement(self.graph(p.graph, kind), self.cluster(p.cluster.size, kind), p.assign)

    def search_model(self, name: str = "pipedream", **changes: object) -> CostModel:
        """The cost model of objective ``name`` with the run's fixed time per stage: :attr:`task_ms` per pass a
        device runs (``CostModel.task_overhead``), which :func:`placement_dsl.heuristics.run` prices as its
        searches' uniform shift; for a search on :meth:`measured_graph`'s graph.

        >>> RunCosts(overhead_ms=0.5, stage_ms=1.0).search_model().task_overhead
        1.0
        """
        return CostModel.named(name, task_overhead=self.task_ms, **changes)

    def measured_graph(self, graph: Graph, kind: str = ACCELERATOR) -> Graph:
        """``graph`` whose ops take on a device of ``kind`` at speed 1 the time the run measured: ``scale`` times the
        profiled time plus ``op_ms`` (times ``slowdown``), the backward ops too. A forward graph's backward times
        (``attrs["backward_work"]``, twice the forward where none was measured, as
        :func:`~placement_dsl.zoo.training.with_backward` gives them) are calibrated alike, so that its training
        graph (``--training``) is. An op that cannot run on ``kind`` stays so; other kinds keep their times.

        >>> g = Graph([Op(name="a", work={"accelerator": 2.0}), Op(name="b", work={"accelerator": 1.0, "cpu": 9.0})],
        ...           [("a", "b")])
        >>> q = RunCosts(scale=1.5, op_ms=0.25).measured_graph(g)
        >>> [op.work for op in q.ops], [op.attrs["backward_work"] for op in q.ops]
        ([{'accelerator': 3.25}, {'accelerator': 1.75, 'cpu': 9.0}], [{'accelerator': 6.25}, {'accelerator': 3.25}])
        """
        def timed(t: float) -> float:
            return rounded(self.slowdown * (self.scale * t + self.op_ms))

        ops = []
        for op in graph.ops:
            t = op.time_on(kind)
            if not t < math.inf:
                ops.append(op)
                continue
            work = {**op.work, kind: timed(t)}
            attrs = op.attrs
            if not graph.is_training:
                back = op.attrs.get("backward_work", {})
                attrs = {**attrs, "backward_work": {**back, kind: timed(float(back.get(kind, 2.0 * t)))}}
            ops.append(op.model_copy(update={"work": work, "attrs": attrs}))
        return graph.replace(ops=ops)

    def graph(self, graph: Graph, kind: str = ACCELERATOR) -> Graph:
        """``graph`` whose ops take ``op_ms`` more on a device of ``kind`` at the run's speed (``op_ms / scale`` more
        work: the devices' speed is ``1 / (scale * slowdown)``); ``graph`` itself without ``op_ms``."""
        if not self.op_ms:
            return graph
        extra = self.op_ms / self.scale
        ops = [op if not op.time_on(kind) < math.inf else
               op.model_copy(update={"work": {**op.work, kind: op.time_on(kind) + extra}}) for op in graph.ops]
        return graph.replace(ops=ops)


def fit_overhead(predict: Callable[[float], Sequence[float]], measured: Sequence[float], high: float) -> float:
    """The overhead ``o`` in ``[0, high]`` minimizing ``sum (measured - predict(o))^2`` (golden-section search;
    ``predict`` grows with ``o``, as a makespan does with each task's fixed cost).

    >>> round(fit_overhead(lambda o: [3 + 2 * o, 1 + 4 * o], [5.0, 5.0], 10.0), 4)
    1.0
    """
    def loss(o: float) -> float:
        return sum((m - q) ** 2 for m, q in zip(measured, predict(o)))

    best = _golden_min(loss, 0.0, float(high), 60)
    return 0.0 if loss(0.0) <= loss(best) else best


def fit_slowdown_and_overhead(predict: Callable[[float, float], Sequence[float]], measured: Sequence[float],
                              high: float, slowest: float = 64.0) -> tuple[float, float]:
    """``(slowdown, overhead)`` minimizing ``sum (measured - predict(slowdown, overhead))^2``: a golden-section
    search over ``log slowdown`` in ``[0, log slowest]`` around :func:`fit_overhead` in ``[0, high]``.

    >>> s, o = fit_slowdown_and_overhead(lambda s, o: [2 * s + 3 * o, 4 * s + 3 * o], [8.0, 12.0], 10.0)
    >>> round(s, 3), round(o, 3)
    (2.0, 1.333)
    """
    def inner(log_s: float) -> tuple[float, float]:
        sl = math.exp(log_s)
        o = fit_overhead(lambda x: predict(sl, x), measured, high)
        return sum((m - q) ** 2 for m, q in zip(measured, predict(sl, o))), o

    best = _golden_min(lambda log_s: inner(log_s)[0], 0.0, math.log(slowest), 40)
    return math.exp(best), inner(best)[1]


def _golden_min(loss: Callable[[float], float], lo: float, hi: float, steps: int) -> float:
    """The middle of the bracket a golden-section search for the minimum of ``loss`` on ``[lo, hi]`` keeps after
    ``steps`` steps (``loss`` unimodal there)."""
    ratio = (5 ** 0.5 - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = loss(a), loss(b)
    for _ in range(steps):
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = loss(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = loss(b)
    return (lo + hi) / 2


# ---------------------------------------------------------------------------- the runtime's own cost, measured
def idle_pipeline(stages: int, ranks: int, message_bytes: float, kind: str = ACCELERATOR,
                  schedule: str | None = None) -> Placement:
    """The training graph of a chain of ``stages`` stages that do no work, stage ``k`` on rank ``k mod ranks``, each
    passing ``message_bytes`` to the next one forward and as much back: the pipeline whose step is the schedule
    runtime's own cost (its actions and their messages), which a run of stage modules that return their input
    measures. Under a schedule whose rank map folds (``zbv``), stage ``k`` on device ``k`` of ``stages``, which the
    map puts on the ranks (:func:`placement_dsl.stage_schedules.stage_ranks`).

    >>> p = idle_pipeline(4, 2, 64.0)
    >>> p.graph.n, p.assign.tolist(), idle_pipeline(4, 2, 64.0, schedule="zbv").assign.tolist()
    (8, [0, 1, 0, 1, 1, 0, 1, 0], [0, 1, 2, 3, 3, 2, 1, 0])
    """
    if stages < 2 or ranks < 2 or stages % ranks or not 0 <= message_bytes < float("inf"):
        raise SpecError(f"idle_pipeline: needs stages ({stages}) a multiple of ranks ({ranks}) >= 2 and message "
                        f"bytes ({message_bytes}) finite and >= 0")
    ops = [Op(name=f"stage{k}", work={kind: 0.0}, param_bytes=4.0, out_bytes=message_bytes if k < stages - 1 else 0.0)
           for k in range(stages)]
    forward = [(f"stage{k}", f"stage{k + 1}") for k in range(stages - 1)]
    ops, edges = with_backward(ops, forward)
    folds = schedule in FOLDS
    cluster = Cluster([Device(name=f"rank{r}", kind=kind) for r in range(stages if folds else ranks)])
    rank = list(range(stages)) if folds else [k % ranks for k in range(stages)]
    return Placement(Graph(ops, edges), cluster, rank + rank[::-1])  # the gradients come in reverse order


def runtime_overhead(measured_ms: float, schedule: str, microbatches: int, *, stages: int, ranks: int,
                     message_bytes: float, link: LinkTime) -> float:
    """The per-task overhead (the cost model's ``task_overhead``) at which the simulator's step per micro-batch of
    :func:`idle_pipeline` equals ``measured_ms``, the step measured on stages that do no work with the same schedule,
    micro-batch count and ranks; the link (its latency per message, its bandwidth) is the measured one.

    The step of a pipeline of idle stages is the runtime's alone, so the overhead is measured as the link is,
    not fitted on a model's steps. 0 when the link alone accounts for ``measured_ms``.

    >>> link = LinkTime(0.0, float("inf"))
    >>> round(runtime_overhead(6.0, "1f1b", 4, stages=2, ranks=2, message_bytes=0.0, link=link), 4)
    2.4
    """
    p = idle_pipeline(stages, ranks, message_bytes, schedule=schedule)

    def predict(o: float) -> list[float]:
        costs = RunCosts(1.0, link, o)
        return [simulate(costs.placement(p), schedule, microbatches, costs.model()).time_per_sample]

    return fit_overhead(predict, [float(measured_ms)], max(float(measured_ms), 1e-9))


def calibration_table(fits: Sequence[StageFit], label: str = "stage") -> str:
    """Predicted, measured and residual per stage, one line each, and the largest residual."""
    lines = [f"{label:<14} {'predicted ms':>13} {'measured ms':>12} {'residual':>9}"]
    for f in fits:
        lines.append(f"{f'stage {f.stage}':<14} {f.predicted_ms:>13.4f} {f.measured_ms:>12.4f} {f.residual:>8.1%}")
    worst = max((abs(f.residual) for f in fits), default=0.0)
    lines.append(f"largest residual {worst:.1%}")
    return "\n".join(lines)


__all__ = ["LinkTime", "RunCosts", "StageFit", "affine_of", "calibrated", "calibration", "calibration_table", "fit_link",
           "fit_overhead", "fit_slowdown_and_overhead", "idle_pipeline", "ping_pong", "runtime_overhead", "scale_of",
           "schedule_costs_of", "schedule_scales", "stage_costs_of"]
