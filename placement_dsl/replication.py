"""Replicated stages and routed transfers: the pieces of the cost model for training pipelines.

Replication (Tarnawski et al. App. C.2; PipeDream's hybrid of pipeline and data parallelism)
---------------------------------------------------------------------------------------------
A stage (the ops on one device ``d``) may run on ``r`` devices, its *replica set*: ``d`` and
``r - 1`` devices holding no ops. Each replica processes every ``r``-th sample, so the stage's
per-sample load is divided by ``r``; after each sample the replicas synchronize the stage's
weights with a ring all-reduce, which sends ``2 (r - 1) / r`` of the parameter bytes over the
ring's slowest link (reduce-scatter, then all-gather)::

    sync = ALLREDUCE_FACTOR * (r - 1) / r * param_bytes / B_ring,   ALLREDUCE_FACTOR = 2

(App. C.2 writes the same term with factor 1, counting each byte once; PipeDream's recurrence
and a ring all-reduce both send it twice.) The replicated load is ``load / r + sync``, or
``max(load / r, sync)`` with overlapped communication (App. C.1), as :func:`replicated` says;
the DP over ideals and the IP use the same factor.

Replica sets are given per device as a count (the stage's device and the next ``r - 1``
devices in pipeline order) or as device names.

Routes (Tarnawski App. C.3, hierarchical clusters)
-------------------------------------------------
On a routed cluster (:attr:`placement_dsl.cluster.Cluster.routed`) a tensor from stage ``A`` to
stage ``B`` moves at :func:`set_bandwidth` of their replica sets: every replica exchanges with
its best-connected replica of the other stage and the slowest such pairing sets the rate. The
receiver pays ``bytes / bw`` once per tensor; the sender pays once per tensor at the slowest
route to its consumer stages (one multicast, Archer eq. 1's "once per boundary").
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import SpecError
from .graph import unique_pairs

if TYPE_CHECKING:
    from .cluster import Cluster

ALLREDUCE_FACTOR = 2.0

ReplicaSpec = Sequence[int] | np.ndarray | Mapping[str, Any] | None


# ---------------------------------------------------------------------------- replica sets
def replica_sets(cluster: Cluster, assign: np.ndarray, replicas: ReplicaSpec) -> tuple[tuple[int, ...], ...]:
    """Each device's replica set (itself first); devices holding no ops and replicating none get ``(d,)``.

    ``replicas`` is ``None`` (no replication), one count per device, or ``{device: count or
    [device names]}``. A count ``r`` on device ``d`` means devices ``d, d+1, ..., d+r-1``.
    Replica devices must hold no ops, serve one stage only and be of the stage's kind.
    """
    D = cluster.size
    sets: list[tuple[int, ...]] = [(d,) for d in range(D)]
    if replicas is None:
        return tuple(sets)
    for d, members in _requested(cluster, replicas).items():
        sets[d] = members
    _check_sets(cluster, assign, sets)
    return tuple(sets)


def _requested(cluster: Cluster, replicas: ReplicaSpec) -> dict[int, tuple[int, ...]]:
    """``{device: replica set}`` for the devices whose count is above one."""
    D = cluster.size
    if isinstance(replicas, Mapping):
        items = []
        for name, value in replicas.items():
            if name not in cluster.index:
                raise SpecError(f"replicas name unknown device {name!r}; devices are {list(cluster.names)}")
            items.append((cluster.index[name], value))
    else:
        counts = np.asarray(replicas)
        if counts.shape != (D,):
            raise SpecError(f"replicas: need one count per device ({D}), got shape {counts.shape}")
        items = list(enumerate(counts.tolist()))
    out: dict[int, tuple[int, ...]] = {}
    for d, value in items:
        members = _members(cluster, d, value)
        if len(members) > 1:
            out[d] = members
    return out


def _members(cluster: Cluster, d: int, value: Any) -> tuple[int, ...]:
    name = cluster.names[d]
    if isinstance(value, (str, bytes)) or not isinstance(value, (int, np.integer, Sequence)):
        raise SpecError(f"replicas of {name!r}: give a count or a list of device names, got {value!r}")
    if isinstance(value, Sequence):
        unknown = [x for x in value if x not in cluster.index]
        if unknown:
            raise SpecError(f"replicas of {name!r} name unknown devices {unknown}")
        rest = [cluster.index[x] for x in value if x != name]
        return (d, *dict.fromkeys(rest))
    r = int(value)
    if isinstance(value, bool) or r < 1:
        raise SpecError(f"replicas of {name!r}: count must be a whole number >= 1, got {value!r}")
    if d + r > cluster.size:
        raise SpecError(f"replicas of {name!r}: {r} replicas need devices {name!r}.. up to index {d + r - 1}, "
                        f"but the cluster has {cluster.size} devices")
    return tuple(range(d, d + r))


def _check_sets(cluster: Cluster, assign: np.ndarray, sets: list[tuple[int, ...]]) -> None:
    used = np.bincount(assign, minlength=cluster.size) > 0
    owner: dict[int, int] = {}
    for d, members in enumerate(sets):
        if len(members) == 1:
            continue
        name = cluster.names[d]
        if not used[d]:
            raise SpecError(f"replicas: device {name!r} holds no ops, so it has no stage to replicate")
        for e in members[1:]:
            other = cluster.names[e]
            if used[e]:
                raise SpecError(f"replicas: device {other!r} holds ops, so it cannot replicate {name!r}'s stage")
            if e in owner:
                raise SpecError(f"replicas: device {other!r} replicates both {cluster.names[owner[e]]!r} and {name!r}")
            if cluster.devices[e].kind != cluster.devices[d].kind or cluster.host[e]:
                raise SpecError(f"replicas: device {other!r} (kind {cluster.devices[e].kind!r}) cannot replicate "
                                f"{name!r} (kind {cluster.devices[d].kind!r}); use non-host devices of its kind")
            owner[e] = d


def replica_owner(sets: Sequence[tuple[int, ...]]) -> np.ndarray:
    """For every device, the device whose stage it runs (itself unless it is a replica)."""
    owner = np.arange(len(sets))
    for d, members in enumerate(sets):
        owner[list(members[1:])] = d
    return owner


def replicas_dict(cluster: Cluster, sets: Sequence[tuple[int, ...]]) -> dict[str, list[str]]:
    """``{stage device: [its replica devices]}`` for the replicated stages (JSON-ready)."""
    return {cluster.names[d]: [cluster.names[e] for e in m] for d, m in enumerate(sets) if len(m) > 1}


# ---------------------------------------------------------------------------- costs
def replicated(overlap: str, load: np.ndarray, sync: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Per-sample load of stages on ``r`` replicas (App. C.2): ``load / r + sync`` or ``max(load / r, sync)``."""
    share = load / r
    return share + sync if overlap == "none" else np.maximum(share, sync)


def ring_bandwidth(members: Sequence[int], bandwidth: np.ndarray) -> float:
    """Slowest link of the ring through ``members`` in their order (``inf`` for one device)."""
    if len(members) < 2:
        return float("inf")
    a = np.asarray(members)
    b = np.roll(a, -1)
    return float(np.minimum(bandwidth[a, b], bandwidth[b, a]).min())


def sync_times(cluster: Cluster, sets: Sequence[tuple[int, ...]], param: np.ndarray) -> np.ndarray:
    """Per-sample all-reduce time of each device's stage: ``2 (r-1)/r * param / B_ring`` (0 when ``r = 1``)."""
    out = np.zeros(cluster.size)
    bw = cluster.route_bandwidth
    for d, members in enumerate(sets):
        r = len(members)
        if r > 1 and param[d] > 0:
            out[d] = ALLREDUCE_FACTOR * (r - 1) / r * param[d] / ring_bandwidth(members, bw)
    return out


def set_bandwidth(a: Sequence[int], b: Sequence[int], bandwidth: np.ndarray) -> float:
    """Rate of stage-to-stage traffic: each replica's best link to the other set, the slowest of those."""
    sub = bandwidth[np.ix_(list(a), list(b))]
    return float(min(sub.max(axis=1).min(), sub.max(axis=0).min()))


def routed_transfers(graph: Any, cluster: Cluster, assign: np.ndarray,
                     sets: Sequence[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Transfer *times* (in_fw, in_bw, out_fw, out_bw) per device on a routed cluster.

    The receiver pays ``bytes / bw`` once per (tensor, device); the sender once per tensor at
    its slowest route; the pass is the producer's. Host devices pay nothing.
    """
    D = cluster.size
    dev = assign
    cross = dev[graph.src] != dev[graph.dst]
    pairs = unique_pairs(graph.src[cross], dev[graph.dst[cross]])
    stage_bw = np.array([[set_bandwidth(sets[a], sets[b], cluster.route_bandwidth) if a != b else np.inf
                          for b in range(D)] for a in range(D)])
    u, b = pairs[:, 0], pairs[:, 1]
    a = dev[u]
    size = graph.out_bytes[u].astype(float)
    with np.errstate(divide="ignore"):  # an unreachable route (bandwidth 0) takes inf, a zero-byte tensor nothing
        t = np.divide(size, stage_bw[a, b], out=np.zeros_like(size), where=size > 0)
    worst = np.zeros(graph.n)
    np.maximum.at(worst, u, t)
    senders = np.unique(u)
    res = []
    for who, times, producers in ((b, t, u), (dev[senders], worst[senders], senders)):
        for backward in (False, True):
            mask = graph.backward[producers] == backward
            res.append(np.bincount(who[mask], weights=times[mask], minlength=D))
    paying = ~cluster.host
    in_fw, in_bw, out_fw, out_bw = (np.where(paying, x, 0.0) for x in res)  # a host's inf is not its own
    return in_fw, in_bw, out_fw, out_bw


def pair_shares(ra: int, rb: int) -> list[tuple[int, int, float]]:
    """``(x, y, share)``: the share of the samples replica ``x`` of a stage on ``ra`` replicas sends replica ``y`` of
    one on ``rb``, each replica taking every ``r``-th sample (sample ``i`` on ``i mod r``): ``1 / lcm(ra, rb)`` for the
    pairs with ``x = y mod gcd(ra, rb)``, none for the others.

    >>> pair_shares(2, 1), pair_shares(2, 2)
    ([(0, 0, 0.5), (1, 0, 0.5)], [(0, 0, 0.5), (1, 1, 0.5)])
    """
    g = math.gcd(ra, rb)
    share = g / (ra * rb)  # 1 / lcm
    return [(x, y, share) for x in range(ra) for y in range(rb) if (x - y) % g == 0]


def replica_link_loads(graph: Any, cluster: Cluster, assign: np.ndarray,
                       sets: Sequence[tuple[int, ...]]) -> tuple[np.ndarray, np.ndarray, list[tuple[str, int, int]]]:
    """Per link of ``cluster``, the time per sample it carries under replicated stages, forward and backward
    (the producer's pass), and ``(what, a, b)`` for bytes that have no route from device ``a`` to ``b``:

    * a tensor from stage ``A`` to stage ``B`` goes from each replica of ``A`` to the replicas of ``B`` that take
      the same samples (:func:`pair_shares`), each pair's share of its bytes over every link of that pair's route
      (none between a replica and itself);
    * a stage on ``r > 1`` replicas all-reduces its parameters in a ring through its replicas in their order:
      each replica sends the next ``ALLREDUCE_FACTOR (r - 1) / r`` of the parameter bytes per sample over its
      route, in the backward pass, as its devices' rows charge it (:func:`sync_times`).
    """
    fw, bw = np.zeros(len(cluster.links)), np.zeros(len(cluster.links))
    unrouted: list[tuple[str, int, int]] = []

    def carry(side: np.ndarray, a: int, b: int, size: float, what: str) -> None:
        if a == b or size <= 0:
            return
        route = cluster.route_links[a][b]
        if route is None:
            unrouted.append((what, a, b))
            return
        for k in route:
            side[k] += size / cluster.links[k].bandwidth

    dev = np.asarray(assign)
    cross = dev[graph.src] != dev[graph.dst]
    pairs = {(int(u), int(d)) for u, d in zip(graph.src[cross].tolist(), dev[graph.dst[cross]].tolist())}
    for u, d in sorted(pairs):
        a, b = sets[int(dev[u])], sets[d]
        side = bw if graph.backward[u] else fw
        for x, y, share in pair_shares(len(a), len(b)):
            carry(side, a[x], b[y], share * float(graph.out_bytes[u]), f"op {graph.names[u]!r}'s output")
    param = np.bincount(dev, weights=graph.param_bytes, minlength=cluster.size)
    for d, members in enumerate(sets):
        r = len(members)
        if r > 1 and param[d] > 0:
            for x in range(r):
                carry(bw, members[x], members[(x + 1) % r], ALLREDUCE_FACTOR * (r - 1) / r * param[d],
                      f"the all-reduce of {cluster.names[d]!r}'s stage")
    return fw, bw, unrouted


def replica_routes(cluster: Cluster, sets: Sequence[tuple[int, ...]], a: int, b: int) -> list[tuple[int, ...]]:
    """The routes (link indices) of a tensor from stage device ``a`` to stage device ``b``: one per pair of their
    replicas that exchange samples (:func:`pair_shares`; one pair without replicas), none between a device and
    itself or where no chain of links joins the two."""
    out = []
    for x, y, _ in pair_shares(len(sets[a]), len(sets[b])):
        route = cluster.route_links[sets[a][x]][sets[b][y]]
        if sets[a][x] != sets[b][y] and route is not None:
            out.append(tuple(route))
    return out
