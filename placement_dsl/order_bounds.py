"""The closed form of the ranks' orders: lower bounds of their exact makespan, messages over links included.

The exact makespan of torch's orders is the max-plus recurrence (:func:`placement_dsl.pipeline_orders.order_makespan`);
its task graph (:class:`~placement_dsl.pipeline_orders.TaskGraph`) holds the ranks' tasks and, on a cluster with
links, each message's hops. Each form below is the length of a family of paths of that graph, so never above the
recurrence, and :func:`closed_form_makespan` is the largest of them:

* **fill, work and drain** (the ``T`` of :mod:`placement_dsl.pipeline_orders`): micro-batch 0 reaches rank ``k``'s
  first stage through the forwards before it and, on links, each boundary's forward message hop by hop (a stage of
  the pipeline of its own); rank ``k`` runs its order to its last input gradient, which reaches stage 0 through the
  backwards and backward messages after it, and rank 0 runs its tail. On equal stages without links: Megatron's
  ``m v (f + b) + (p - 1)(f + b)``, ZB-H1's ``m (f + i + w) + (p - 1)(f + i - w)``.
* **links**: a link carries every micro-batch's hops one at a time (``m`` times its time per micro-batch), after the
  first hop's message is made (micro-batch 0's fill up to it), and the last hop's message is still read after it.
* **queued**: the ranks' orders with each link's hops in the orders the links are known to keep without sorting them
  (:func:`known_queues`): a link's first hops of the messages one rank sends in that rank's order (their
  tasks end in it), and a message's later hops in micro-batch order. Each is a sub-order of the link's order
  (:meth:`~placement_dsl.pipeline_orders.TaskGraph.link_orders`), so this is the recurrence with some of a link's
  waits left out: where every link carries the first hops of one rank's messages (a link per ordered pair of ranks,
  whatever the virtual stages sharing it) it is the recurrence itself. A rank whose order keeps ``w`` micro-batches
  in flight runs at least one round trip of a micro-batch through the stages after it and back, messages and their
  queues included, per ``w`` micro-batches: where that round trip outlasts the work of the micro-batches in flight,
  this is what binds, not a rank's work nor a link's.

Each costs one pass over the orders' tasks (the exact recurrence two, and a sort of the hops: the links' orders).
What none holds is the order between messages of different senders on one link (a ring's or a server's link that
several ranks' messages cross), which only the sort gives: there the recurrence stays above them. Formerly the last
family took each message as a delay with no link shared, and missed the queue of a link's messages: 10.9 % under
the recurrence at ``m = 64`` under interleaved 1F1B on generated pipelines (``benchmarks/bench_schedules.py
--random-links``, docs/training.md), 3.4 % under ZB-H1, 0.8 % under ZBV; 10 % too with a link per message. Without
links it is the fill-work-drain form alone.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .pipeline_orders import Action, StageTimes, TaskGraph


def closed_form_makespan(times: StageTimes, orders: Sequence[Sequence[Action]]) -> float:
    """The largest of the module's closed forms: never above :func:`~placement_dsl.pipeline_orders.order_makespan`."""
    if not any(orders):
        return 0.0
    tasks = TaskGraph(times, orders)
    return max(fill_work_drain(times, orders), links(tasks), queued(tasks))


def known_queues(tasks: TaskGraph) -> list[list[tuple]]:
    """Sub-orders of every link's order known without sorting its hops: the first hops one rank sends over a link in
    the order its tasks making them run (where one task sends two messages over it, each message's own), and each
    message's later hops by micro-batch. Every hop is in one."""
    times, back = tasks.times, tasks.back
    pos = {key: n for rank in tasks.ranks for n, key in enumerate(rank)}
    groups: dict[tuple, list[tuple]] = {}
    for hop in tasks.hops:
        _, n, h, _ = hop
        x = times.transfers[n]
        groups.setdefault(("sent", x.links[0], times.rank[x.src]) if h == 0 else ("hop", n, h), []).append(hop)
    out: list[list[tuple]] = []
    for key, hops in groups.items():
        made = {(times.transfers[n].src, times.transfers[n].sent) for n in {hop[1] for hop in hops}}
        if key[0] == "sent" and len(made) == len({hop[1] for hop in hops}):

            def sender(hop: tuple) -> int:
                x = times.transfers[hop[1]]
                return pos[(x.src, "F" if x.sent == "F" else back, hop[3])]

            out.append(sorted(hops, key=sender))
        else:
            for n in sorted({hop[1] for hop in hops}):
                out.append(sorted((hop for hop in hops if hop[1] == n), key=lambda hop: hop[3]))
    return out


def queued(tasks: TaskGraph) -> float:
    """The recurrence with each link's hops in the sub-orders :func:`known_queues` gives, not its whole order."""
    if not tasks.hops:
        return 0.0
    return max(tasks.longest([*tasks.ranks, *known_queues(tasks)])[1].values())


def _hops(times: StageTimes, back: bool) -> np.ndarray:
    """Per stage ``s``, the hops and the links' latencies of the message into it from ``s - 1`` (forward) or from
    ``s + 1`` (``back``) that the stage's task reads (0 where the two stages share a rank or no tensor crosses)."""
    out = np.zeros(times.stages)
    for x in times.transfers:
        if (x.sent, x.read, x.dst - x.src) == (("B", "B", -1) if back else ("F", "F", 1)):
            out[x.dst] = sum(x.times) + sum(x.latencies)
    return out


def fill_work_drain(times: StageTimes, orders: Sequence[Sequence[Action]]) -> float:
    """``max_k [fill_k + A_k + max(R_k, drain_k)]`` (see :mod:`placement_dsl.pipeline_orders`), the messages between
    the stages on the fill's and the drain's way included."""
    f, ahead, into = np.asarray(times.f, float), _hops(times, back=False), _hops(times, back=True)
    tails = []
    for order in orders:
        last = max(n for n, a in enumerate(order) if a.kind in "BI")
        tails.append((last, sum(times.duration(a) for a in order[last + 1:])))
    best = 0.0
    for order, (last, rest) in zip(orders, tails):
        first = order[0].stage
        back = order[last]
        grad = np.asarray(times.i, float) if back.kind == "I" else np.add(times.i, times.w)
        drain = float(grad[:back.stage].sum() + into[:back.stage].sum())
        drain += tails[times.rank[0]][1] if back.stage > 0 else 0.0
        busy = sum(times.duration(a) for a in order[:last + 1])
        fill = float(f[:first].sum() + ahead[1:first + 1].sum())
        best = max(best, fill + busy + max(rest, drain))
    return best


def links(tasks: TaskGraph) -> float:
    """Per link: micro-batch 0's way to the earliest hop it carries, every micro-batch's hops over it one at a time,
    then the shortest way from a hop it carries to the end of the message's reader."""
    transfers = tasks.times.transfers
    if not transfers:
        return 0.0
    head: dict[tuple, float] = {}  # micro-batch 0 alone: the end of each task and hop at the earliest

    def end(key: tuple) -> float:
        if key not in head:
            head[key] = tasks.duration(key) + max((end(y) + tasks.lag(y) for y in tasks.needs(key)), default=0.0)
        return head[key]

    back = tasks.back
    first: dict[int, float] = {}
    after: dict[int, float] = {}
    for n, x in enumerate(transfers):
        reader = tasks.duration((x.dst, "F" if x.read == "F" else back, 0))
        for h, lk in enumerate(x.links):
            first[lk] = min(first.get(lk, np.inf), end(("hop", n, h, 0)) - x.times[h])
            after[lk] = min(after.get(lk, np.inf), sum(x.times[h + 1:]) + sum(x.latencies[h:]) + reader)
    m = tasks.microbatches
    return max(first[lk] + m * load + after[lk] for lk, load in tasks.times.link_loads().items())


__all__ = ["closed_form_makespan", "fill_work_drain", "known_queues", "links", "queued"]
