"""Schedules with virtual stages and a split backward: the order each rank runs, its time and its stash.

A pipeline of ``S = p * v`` stages runs on ``p`` ranks, stage ``s`` on rank ``s mod p`` (each rank
holds ``v`` non-adjacent *virtual* stages; Narayanan et al. 2021, §2.2). A task is one stage's pass
over one micro-batch: ``F`` (forward), ``B`` (the whole backward), or, when the backward is split
(Qi et al., "Zero Bubble Pipeline Parallelism"), ``I`` (the gradient of the stage's input, which the
stage before waits for) and ``W`` (the gradient of its weights, which nothing waits for).

Orders (:func:`rank_orders`): each rank runs its tasks in a fixed order and waits for the next one
rather than reorder, as ``torch.distributed.pipelining`` does (torch 2.13, ``schedules.py``):

``interleaved-1f1b`` (``ScheduleInterleaved1F1B``)
    micro-batches go in rounds of ``r = m / max(1, m // p)``; rank ``k`` runs
    ``min((v - 1) r + 2 (p - 1 - k), m v)`` forwards (warm-up), then one forward and one backward
    in turn, then the remaining backwards. The ``t``-th forward is for local stage
    ``(t // r) mod v``, backwards walk the local stages from the last one. ``v = 1`` is 1F1B.
``zb-h1`` (``ScheduleInterleavedZeroBubble``, ZB-H1 at ``v = 1``)
    the same with warm-up ``(v - 1) r + (p - 1 - k)`` and ``I`` for ``B``; rank ``k`` runs its
    first ``k`` steady steps without a ``W``, then each step's ``I`` is followed by the oldest
    ``W`` left, and the ``W`` still left run at the end: the ``W`` fill the bubbles 1F1B leaves.
``zbv`` (``ScheduleZBVZeroBubble``, Qi et al. §6)
    two stages per rank in a V: rank ``k`` holds stages ``k`` and ``2p - 1 - k`` (the last rank
    turns the pipeline back); warm-up ``2(p - k) - 1`` forwards of the first, ``k`` pairs of
    forwards, ``p - k`` rounds of ``F I W`` on the second, then ``F I W`` on each stage in turn,
    then the remaining ``I`` and ``W``. Built for ``max(2p - 1, m)`` micro-batches, the tasks of
    micro-batches ``>= m`` dropped, as torch does.

The rank map (:func:`layout`): stage ``s`` runs on rank ``s mod p`` (round-robin), or in ZBV's V on
rank ``s`` for ``s < p`` and ``2p - 1 - s`` after. A schedule in :data:`FOLDS` (ZBV) puts two
stages back to back on one rank at the V's turn, which one device cannot hold as two stages (its
ops would form one stage): its placements give every stage a device of its own and the map folds
those devices onto the ranks (:func:`placement_dsl.stage_schedules.stage_ranks`).

Time (the closed form, :func:`placement_dsl.order_bounds.closed_form_makespan`): with per-stage task times ``f_s``, ``b_s`` (or ``i_s + w_s``)
that include the stage's transfers (the cost model's loads), a rank ``k`` whose first stage is
``s_k`` cannot start before micro-batch 0 has passed the stages before it, runs all its tasks, and
after its last input-gradient task (stage ``s_k``, micro-batch ``m - 1``) either finishes its own
tail or waits for that gradient to reach stage 0 and rank 0's tail::

    T = max_k [ sum_{s < s_k} f_s + A_k + max(R_k, sum_{s < s_k} b_s + R_0) ]

``A_k``: rank ``k``'s work up to and including that task, ``R_k``: its work after it (``W`` tasks).
On ``p`` ranks with equal stages it is Megatron's ``m v (f + b) + (p - 1)(f + b)``, a bubble of
``(p - 1) / (v m)``, and ZB-H1's ``m (f + i + w) + (p - 1)(f + i - w)``; on unequal stages each term
is a path of the schedule's task graph, so ``T`` never exceeds the simulated makespan
(:func:`placement_dsl.simulate.simulate`), which waits also where the steady state cannot keep
the slowest rank busy. ``m -> inf``: ``T / m -> max_k sum_{s on k} (f_s + b_s)``, PipeDream's
``max_d (FW_d + BW_d)`` on the ranks.

Links (:class:`StageTransfer`): on a cluster with links the tensors a stage sends another stage of another
rank per micro-batch move as one message per pass, hop by hop over the links of their route, each hop a
task of its own holding its link for ``bytes / bandwidth`` (the cost model's link loads,
:func:`placement_dsl.evaluate.link_loads`). The message leaves when the task that made it ends, and the
task reading it starts when its last hop is done. A link carries its hops in one fixed order
(:meth:`TaskGraph.link_orders`), as a rank runs its tasks: the max-plus recurrence then adds the links as
resources, exact for those orders (:func:`order_makespan`). ``T / m`` is at least the most time per
micro-batch of a rank or a link (:func:`steady_state`), and stays above it where a message's round trip
outlasts the micro-batches a rank's order keeps in flight: two stages whose messages each hold a link 4
per micro-batch, ranks busy 1.6, run 4.11 per micro-batch at ``m = 64`` under 1F1B (two forwards of
warm-up on the first rank) and 5.39 under ZB-H1 (one).

Memory (:func:`stash_peaks`): a stage keeps a micro-batch's activations from its ``F`` to its
``B`` (or ``W``, which reads them last); along a rank's fixed order the number in flight per
stage, and the rank's peak of ``sum_s n_s(t) act_s``, follow from the order alone.
"""
from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import SpecError

ORDERS = ("interleaved-1f1b", "zb-h1", "zbv")  # the schedules run as rank orders over virtual stages
SPLIT = frozenset({"zb-h1", "zbv"})  # schedules that split the backward into I and W
FOLDS = {"zbv": 2}  # schedules whose rank map folds stage devices onto ranks: name -> stages per rank


@dataclass(frozen=True)
class Action:
    """One task of a rank's order: ``stage``, ``kind`` (F, B, I or W) and ``microbatch``; prints as torch's ``0F1``."""

    stage: int
    kind: str
    microbatch: int

    def __str__(self) -> str:
        return f"{self.stage}{self.kind}{self.microbatch}"


def rounds(ranks: int, microbatches: int) -> int:
    """Micro-batches per round (torch's ``microbatches_per_round``); refused when ``m`` does not split into rounds."""
    n = max(1, microbatches // ranks)
    if microbatches % n:
        raise SpecError(f"pipeline schedule: microbatches={microbatches} is not a multiple of its {n} rounds of "
                        f"micro-batches over {ranks} ranks; use a multiple of {ranks} (torch refuses it too)")
    return microbatches // n


def runs(schedule: str, stages: int, microbatches: int | None = None) -> bool:
    """Whether ``schedule``'s orders run a pipeline of ``stages`` stages of one device each: ZBV's V an even number,
    at least 2 (:data:`FOLDS`); the round-robin orders (``v = 1``, a rank per stage) a rank count whose rounds split
    ``microbatches`` (:func:`rounds`; any count without ``m``).

    >>> [h for h in range(1, 9) if runs("interleaved-1f1b", h, 64)], [h for h in range(1, 7) if runs("zbv", h)]
    ([1, 2, 4, 8], [2, 4, 6])
    """
    if schedule in FOLDS:
        return stages >= FOLDS[schedule] and stages % FOLDS[schedule] == 0
    return stages >= 1 and (microbatches is None or microbatches % max(1, microbatches // stages) == 0)


def whole(value: Any, kinds: type | tuple[type, ...] = (int, np.integer)) -> bool:
    """Whether ``value`` is a whole number ``>= 1`` of ``kinds`` (not a bool): a count of micro-batches, ranks or
    stages per rank."""
    return not isinstance(value, bool) and isinstance(value, kinds) and value >= 1


def _check(schedule: str, ranks: int, local: int, microbatches: int) -> None:
    if schedule not in ORDERS:
        raise SpecError(f"pipeline schedule: unknown schedule {schedule!r}; choose from {list(ORDERS)}")
    for name, value in (("ranks", ranks), ("virtual stages per rank", local), ("microbatches", microbatches)):
        if not whole(value):
            raise SpecError(f"pipeline schedule {schedule!r}: {name} must be a whole number >= 1, got {value!r}")


def layout(schedule: str, ranks: int, stages: int) -> list[int]:
    """The rank of each stage the schedule expects: round-robin ``s mod p``, or ZBV's V (``s`` then ``2p - 1 - s``)."""
    if schedule == "zbv":
        return [s if s < ranks else 2 * ranks - 1 - s for s in range(stages)]
    return [s % ranks for s in range(stages)]


def rank_orders(schedule: str, ranks: int, local: int, microbatches: int) -> list[list[Action]]:
    """Each rank's tasks in the order ``schedule`` runs them (see the module docstring).

    >>> [" ".join(map(str, o)) for o in rank_orders("zb-h1", 2, 1, 3)]
    ['0F0 0F1 0I0 0W0 0F2 0I1 0W1 0I2 0W2', '1F0 1I0 1F1 1I1 1W0 1F2 1I2 1W1 1W2']
    """
    _check(schedule, ranks, local, microbatches)
    if schedule == "zbv":
        if local != 2:
            raise SpecError(f"pipeline schedule 'zbv': needs 2 stages per rank (a V over 2p stages), got {local}")
        return [[a for a in _zbv_order(ranks, max(2 * ranks - 1, microbatches), k) if a.microbatch < microbatches]
                for k in range(ranks)]
    per_round = rounds(ranks, microbatches)
    return [_rank_order(schedule, ranks, local, microbatches, per_round, k) for k in range(ranks)]


def _rank_order(schedule: str, p: int, v: int, m: int, per_round: int, k: int) -> list[Action]:
    split = schedule in SPLIT
    total = m * v
    warm = min((v - 1) * per_round + (1 if split else 2) * (p - 1 - k), total)
    count = {"F": [0] * (p * v), "B": [0] * (p * v), "W": [0] * (p * v)}

    def take(kind: str, stage: int) -> Action:
        j = count[kind][stage]
        count[kind][stage] += 1
        return Action(stage, "I" if split and kind == "B" else kind, j)

    def fw_stage(t: int) -> int:
        return (t // per_round) % v * p + k

    def bw_stage(t: int) -> int:
        return (v - 1 - (t - warm) // per_round % v) * p + k

    out: list[Action] = []
    backs: list[int] = []  # stages of the input-gradient tasks, in order: the W follow them

    def backward(t: int) -> None:
        out.append(take("B", bw_stage(t)))
        backs.append(bw_stage(t))
        if split and t - warm >= k:  # ZB: rank k defers its first k weight gradients
            out.append(take("W", backs[count_w()]))

    def count_w() -> int:
        return sum(count["W"])

    for t in range(warm + total):
        if t < total:
            out.append(take("F", fw_stage(t)))
        if t >= warm:
            backward(t)
    while split and count_w() < len(backs):
        out.append(take("W", backs[count_w()]))
    return out


def _zbv_order(p: int, m: int, k: int) -> list[Action]:
    first, second = k, 2 * p - 1 - k
    n = {"F0": 0, "F1": 0, "I0": 0, "I1": 0, "W0": 0, "W1": 0}
    out: list[Action] = []

    def act(kind: str, chunk: int) -> None:
        key = f"{kind}{chunk}"
        out.append(Action(second if chunk else first, kind, n[key]))
        n[key] += 1

    for _ in range(2 * (p - k) - 1):
        act("F", 0)
    for _ in range(k):
        act("F", 1)
        act("F", 0)
    for _ in range(p - k):
        act("F", 1)
        act("I", 1)
        act("W", 1)
    while n["F1"] < n["F0"] or n["F0"] < m:
        if n["F0"] < m:
            act("F", 0)
        act("I", 0)
        act("W", 0)
        act("F", 1)
        act("I", 1)
        act("W", 1)
    for _ in range(k):
        act("I", 0)
        act("I", 1)
    for _ in range(p - k):
        act("I", 0)
        act("W", 0)
    while n["W1"] < n["I1"]:
        act("W", 1)
    while n["W0"] < n["I0"]:
        act("W", 0)
    return out


@dataclass(frozen=True)
class StageTransfer:
    """The tensors stage ``src`` sends stage ``dst`` per micro-batch over a cluster's links: made by its ``sent``
    task (``"F"``, or ``"B"``: the input-gradient task, ``I`` under a split backward), read by ``dst``'s ``read``
    task (same letters); hop ``h`` holds link ``links[h]`` for ``times[h]`` (bytes over that link's bandwidth),
    after the hop before it (a message moves link by link, as the simulator's link units do). ``latencies[h]``
    (none: 0): the link's latency, after which the hop's bytes reach the next hop or the reader; it delays the
    message, not the link, which carries its next hop as soon as this one's bytes are on it."""

    src: int
    dst: int
    sent: str
    read: str
    links: tuple[int, ...]
    times: tuple[float, ...]
    latencies: tuple[float, ...] = ()

    def lag(self, hop: int) -> float:
        """The latency after hop ``hop`` ends before its bytes are at the next hop or the reader."""
        return self.latencies[hop] if self.latencies else 0.0


@dataclass(frozen=True)
class StageTimes:
    """Per-stage task times (transfers included, as the cost model's loads): forward ``f``, input-gradient
    ``i`` and weight-gradient ``w`` (the whole backward is ``i + w``); ``rank[s]`` runs stage ``s``.
    ``transfers``: the messages between stages that hold a cluster's links (none without links), each hop a
    task of its own on its link (:func:`order_makespan`)."""

    rank: tuple[int, ...]
    f: tuple[float, ...]
    i: tuple[float, ...]
    w: tuple[float, ...]
    transfers: tuple[StageTransfer, ...] = ()

    def link_loads(self) -> dict[int, float]:
        """Per link a transfer holds, its time per micro-batch (every hop over it, both passes)."""
        out: dict[int, float] = {}
        for x in self.transfers:
            for k, t in zip(x.links, x.times):
                out[k] = out.get(k, 0.0) + t
        return out

    @property
    def stages(self) -> int:
        return len(self.rank)

    def duration(self, a: Action) -> float:
        """How long task ``a`` takes (``B`` is ``i + w``)."""
        s = a.stage
        return {"F": self.f[s], "B": self.i[s] + self.w[s], "I": self.i[s], "W": self.w[s]}[a.kind]


def check_step(name: str | None, microbatches: int | None, virtual: int | None) -> None:
    """A cost model's step: ``microbatches`` and ``virtual`` (stages per rank asked of the orders) whole numbers
    ``>= 1`` or ``None``, ``virtual`` only under the orders (:data:`ORDERS`; ZBV's V holds 2)."""
    m, v = microbatches, virtual
    if m is not None and not whole(m):
        raise SpecError(f"CostModel: microbatches must be a whole number >= 1 or None, got {m!r}")
    if v is not None and not whole(v):
        raise SpecError(f"CostModel: virtual must be a whole number of stages per rank >= 1 or None, got {v!r}")
    if v is not None and name not in (*ORDERS, None):
        raise SpecError(f"CostModel: virtual={v} is the stages per rank of torch's orders {list(ORDERS)}; "
                        f"objective {name!r} runs one stage per device")
    if v is not None and name in FOLDS and v != FOLDS[name]:
        raise SpecError(f"CostModel: {name} runs {FOLDS[name]} stages per rank, got virtual={v}")


def check_round_robin(times: StageTimes, ranks: int, schedule: str = "interleaved-1f1b",
                      virtual: int | None = None) -> None:
    """Stage ``s`` must run on rank ``s mod p`` with ``v`` stages per rank (the orders' layout; ZBV's V for ``zbv``),
    ``v`` the ``virtual`` asked where given."""
    if times.stages % ranks:
        raise SpecError(f"pipeline schedule: {times.stages} stages do not split into {ranks} ranks evenly; "
                        "every rank needs the same number of virtual stages")
    if virtual is not None and times.stages != ranks * virtual:
        raise SpecError(f"{times.stages} stages on {ranks} ranks are {times.stages // ranks} per rank, and "
                        f"virtual={virtual} asks for {virtual} per rank ({ranks * virtual} stages)")
    want = layout(schedule, ranks, times.stages)
    for s, k in enumerate(times.rank):
        if k != want[s]:
            where = "stages k and 2p - 1 - k on rank k" if schedule in FOLDS else f"stage s on rank s mod {ranks}"
            raise SpecError(f"pipeline schedule: stage {s} runs on rank {k}, not on rank {want[s]}; {schedule} "
                            f"places {where}")


def steady_state(times: StageTimes) -> float:
    """The most work per micro-batch of a rank (its stages' ``F + I + W``) or of a link (its hops), PipeDream's
    ``max (FW + BW)`` over the ranks and links: the orders' time per micro-batch as ``m -> inf`` without links, a
    lower bound of it with them (see the module docstring)."""
    ranks = np.bincount(times.rank, weights=np.add(np.add(times.f, times.i), times.w))
    return float(max([ranks.max(initial=0.0), *times.link_loads().values()]))


def task_inputs(a: Action, last: int) -> list[tuple[int, str, int]]:
    """The tasks ``a`` reads: the previous stage's forward, the next stage's gradient and its own forward, its ``I``."""
    s, j = a.stage, a.microbatch
    if a.kind == "F":
        return [(s - 1, "F", j)] if s > 0 else []
    if a.kind == "W":
        return [(s, "I", j)]
    return [(s, "F", j), *([(s + 1, a.kind, j)] if s < last else [])]


class TaskGraph:
    """The tasks of the ranks' orders and of the transfers' hops (:class:`StageTransfer`), what each waits for and
    how long it takes. A rank's task is ``(stage, kind, microbatch)``; hop ``h`` of transfer ``n`` for micro-batch
    ``j`` is ``("hop", n, h, j)``."""

    def __init__(self, times: StageTimes, orders: Sequence[Sequence[Action]]):
        self.times = times
        self.ranks = [[(a.stage, a.kind, a.microbatch) for a in o] for o in orders]
        self.back = "I" if any(a.kind == "I" for o in orders for a in o) else "B"
        self.microbatches = 1 + max((a.microbatch for o in orders for a in o), default=-1)
        self.into: dict[tuple[int, str], list[tuple[int, int]]] = {}
        for n, x in enumerate(times.transfers):
            self.into.setdefault((x.dst, x.read), []).append((n, len(x.links) - 1))
        self.hops = [("hop", n, h, j) for j in range(self.microbatches) for n, x in enumerate(times.transfers)
                     for h in range(len(x.links))]

    def needs(self, key: tuple) -> list[tuple]:
        """:func:`task_inputs`, and the last hop of every transfer the task's stage reads in its pass; a hop waits for
        the hop before it, or for the task that made its tensors."""
        if key[0] == "hop":
            _, n, h, j = key
            if h:
                return [("hop", n, h - 1, j)]
            x = self.times.transfers[n]
            return [(x.src, "F" if x.sent == "F" else self.back, j)]
        s, kind, j = key
        out = task_inputs(Action(s, kind, j), self.times.stages - 1)
        if kind != "W":
            out += [("hop", n, h, j) for n, h in self.into.get((s, "F" if kind == "F" else "B"), ())]
        return out

    def duration(self, key: tuple) -> float:
        if key[0] == "hop":
            return self.times.transfers[key[1]].times[key[2]]
        return self.times.duration(Action(*key))

    def lag(self, key: tuple) -> float:
        """The time after ``key`` ends before a task that :meth:`needs` it may start: a hop's link latency
        (:attr:`StageTransfer.latencies`), else 0."""
        return self.times.transfers[key[1]].lag(key[2]) if key[0] == "hop" else 0.0

    def ready(self, key: tuple, finish: dict[tuple, float]) -> float:
        """When ``key``'s inputs (:meth:`needs`) are there, given their ``finish`` (``inf`` while one is not)."""
        return max((finish.get(y, math.inf) + self.lag(y) for y in self.needs(key)), default=0.0)

    def link(self, hop: tuple) -> int:
        """The link a hop holds."""
        return self.times.transfers[hop[1]].links[hop[2]]

    def longest(self, queues: Sequence[Sequence[tuple]]) -> tuple[dict[tuple, float], dict[tuple, float], list[tuple]]:
        """``(start, finish, settled)`` of every task of ``queues``, each a resource's fixed order: a task starts when
        the one before it in its queue and its inputs are done (the max-plus recurrence; ``settled``: the tasks in
        the order their times were fixed). Queues that wait on each other are a :class:`SpecError`."""
        preds: dict[tuple, list[tuple]] = {}
        before: dict[tuple, tuple] = {}  # the task before it in its queue: no latency between the two
        for q in queues:
            for n, key in enumerate(q):
                preds[key] = self.needs(key) + ([q[n - 1]] if n else [])
                if n:
                    before[key] = q[n - 1]
        succ: dict[tuple, list[tuple]] = {k: [] for k in preds}
        indeg = {k: len(ps) for k, ps in preds.items()}
        for k, ps in preds.items():
            for q in ps:
                succ[q].append(k)
        ready = deque(k for k, d in indeg.items() if d == 0)
        start: dict[tuple, float] = {}
        finish: dict[tuple, float] = {}
        settled: list[tuple] = []
        while ready:
            k = ready.popleft()
            start[k] = max(self.ready(k, finish), finish[before[k]] if k in before else 0.0)
            finish[k] = start[k] + self.duration(k)
            settled.append(k)
            for v in succ[k]:
                indeg[v] -= 1
                if indeg[v] == 0:
                    ready.append(v)
        if len(settled) < len(preds):
            raise SpecError(f"pipeline schedule: the ranks' and links' orders wait on each other with "
                            f"{len(preds) - len(settled)} tasks left; no run finishes them")
        return start, finish, settled

    def link_orders(self) -> dict[int, list[tuple]]:
        """Each link's hops in the order it carries them: by the time each is ready when no link is shared (every hop
        as soon as its input is done), ties in the order those times were settled. A link one rank sends over
        carries its messages in that rank's order; where ranks share a link, the first ready goes first. The order
        never waits on itself: along any chain of waits the ready time and the settling order rise."""
        start, _, settled = self.longest([*self.ranks, *([h] for h in self.hops)])
        seq = {k: n for n, k in enumerate(settled)}
        out: dict[int, list[tuple]] = {}
        for h in sorted(self.hops, key=lambda k: (start[k], seq[k])):
            out.setdefault(self.link(h), []).append(h)
        return out

    def queues(self) -> list[list[tuple]]:
        """The ranks' orders, then each link's (:meth:`link_orders`, by link index)."""
        links = self.link_orders()
        return [*self.ranks, *(links[k] for k in sorted(links))]


def order_makespan(times: StageTimes, orders: Sequence[Sequence[Action]]) -> float:
    """The exact makespan of the ranks' fixed orders: ``C(a) = max(C(task before a on its rank), C(inputs of a)) + t(a)``.

    The max-plus recurrence, swept rank by rank as far as each rank's inputs are known (the
    longest path of the task graph); a rank order waiting on itself is a :class:`SpecError`. With
    ``times.transfers`` each link is a resource too, its hops in :meth:`TaskGraph.link_orders`' order.

    >>> t = StageTimes((0, 1), (1.0, 2.0), (3.0, 1.0), (0.0, 0.0))
    >>> order_makespan(t, rank_orders("interleaved-1f1b", 2, 1, 2))  # 0B1 runs 7..10, after 1B1 (6..7)
    10.0
    >>> sent = StageTransfer(0, 1, "F", "F", (0,), (2.0,))  # 0F1 ends at 2, its message holds the link 2..4
    >>> order_makespan(StageTimes(t.rank, t.f, t.i, t.w, (sent,)), rank_orders("interleaved-1f1b", 2, 1, 2))
    12.0
    """
    if times.transfers:
        tasks = TaskGraph(times, orders)
        return max(tasks.longest(tasks.queues())[1].values(), default=0.0)
    last = times.stages - 1
    finish: dict[tuple[int, str, int], float] = {}
    pos, clock = [0] * len(orders), [0.0] * len(orders)
    moved = True
    while moved:
        moved = False
        for k, order in enumerate(orders):
            while pos[k] < len(order):
                a = order[pos[k]]
                needs = task_inputs(a, last)
                if not all(x in finish for x in needs):
                    break
                clock[k] = max([clock[k], *(finish[x] for x in needs)]) + times.duration(a)
                finish[(a.stage, a.kind, a.microbatch)] = clock[k]
                pos[k] += 1
                moved = True
    if any(p < len(o) for p, o in zip(pos, orders)):
        raise SpecError("pipeline schedule: the ranks' orders wait on each other (a task before its inputs); "
                        "no run finishes them")
    return max(clock, default=0.0)


def unit_rows(orders: Sequence[Sequence[Action]], stages: int) -> list[list[str]]:
    """The orders as torch's schedule CSV rows: one cell per unit time step, ``""`` while a rank waits.

    >>> unit_rows(rank_orders("zb-h1", 2, 1, 2), 2)
    [['0F0', '0F1', '', '0I0', '0W0', '0I1', '0W1'], ['', '1F0', '1I0', '1F1', '1I1', '1W0', '1W1']]
    """
    finish: dict[tuple[int, str, int], int] = {}
    pos, free = [0] * len(orders), [0] * len(orders)
    rows: list[list[str]] = [[] for _ in orders]
    moved = True
    while moved:
        moved = False
        for r, order in enumerate(orders):
            while pos[r] < len(order):
                a = order[pos[r]]
                needs = task_inputs(a, stages - 1)
                if not all(x in finish for x in needs):
                    break
                start = max([free[r], *(finish[x] for x in needs)])
                rows[r] += [""] * (start - len(rows[r])) + [str(a)]
                finish[(a.stage, a.kind, a.microbatch)] = free[r] = start + 1
                pos[r] += 1
                moved = True
    return rows


def stash_peaks(times: StageTimes, orders: Sequence[Sequence[Action]], act: Sequence[float]
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(peak micro-batches in flight per stage, peak stashed bytes per rank)`` along the ranks' orders.

    A stage's micro-batch is stashed from its ``F`` until its ``B``, or its ``W`` when the backward is split.

    >>> t = StageTimes((0, 1, 0, 1), (1.0,) * 4, (1.0,) * 4, (0.0,) * 4)
    >>> n, peak = stash_peaks(t, rank_orders("interleaved-1f1b", 2, 2, 4), [1.0] * 4)
    >>> n.tolist(), peak.tolist()
    ([4, 3, 2, 1], [5.0, 3.0])
    """
    act = np.asarray(act, float)
    inflight = np.zeros(times.stages, dtype=np.int64)
    peak = np.zeros(times.stages, dtype=np.int64)
    rank_peak = np.zeros(len(orders))
    for k, order in enumerate(orders):
        release = "W" if any(a.kind == "W" for a in order) else "B"
        held = 0.0
        for a in order:
            if a.kind == "F":
                inflight[a.stage] += 1
                held += act[a.stage]
                peak[a.stage] = max(peak[a.stage], inflight[a.stage])
                rank_peak[k] = max(rank_peak[k], held)
            elif a.kind == release:
                inflight[a.stage] -= 1
                held -= act[a.stage]
    return peak, rank_peak


def stage_inflight(schedule: str, stages: int, microbatches: int) -> np.ndarray:
    """Micro-batches each stage of a ``stages``-stage pipeline holds at its peak in ``schedule``'s order
    (:func:`stash_peaks`), one stage per rank (two per rank in a V under :data:`FOLDS`, ``p = stages / 2``):
    ``min(2 (p - s) - 1, m)`` in ``interleaved-1f1b`` (torch's warm-up of ``2 (p - 1 - s)`` forwards),
    ``min(p, m)`` on every stage in ``zb-h1`` (rank ``s`` holds its first ``s`` micro-batches until their
    deferred ``W``). :class:`SpecError` where the order refuses ``m`` or the stages.

    >>> stage_inflight("interleaved-1f1b", 3, 8).tolist(), stage_inflight("zb-h1", 3, 8).tolist()
    ([5, 3, 1], [3, 3, 3])
    >>> stage_inflight("zbv", 4, 8).tolist()  # rank 0 holds stages 0 and 3 (4 + 1), rank 1 stages 1 and 2 (3 + 2)
    [4, 3, 2, 1]
    """
    if schedule not in ORDERS:
        raise SpecError(f"stage_inflight: schedule {schedule!r} is not one of {list(ORDERS)}")
    per = FOLDS.get(schedule, 1)
    if stages % per:
        raise SpecError(f"stage_inflight: {schedule} runs {per} stages per rank; {stages} stages do not fold")
    zero = (0.0,) * stages
    times = StageTimes(tuple(layout(schedule, stages // per, stages)), zero, zero, zero)
    return stash_peaks(times, rank_orders(schedule, stages // per, per, microbatches), [0.0] * stages)[0]


__all__ = [
    "FOLDS",
    "ORDERS",
    "SPLIT",
    "Action",
    "StageTimes",
    "StageTransfer",
    "TaskGraph",
    "check_round_robin",
    "check_step",
    "layout",
    "order_makespan",
    "rank_orders",
    "rounds",
    "runs",
    "stage_inflight",
    "stash_peaks",
    "steady_state",
    "task_inputs",
    "unit_rows",
    "whole",
]
