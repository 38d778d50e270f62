"""Whether ``k`` devices under a max load ``T`` can hold a graph, as a chain of runs of cut ops and the blocks between.

In a contiguous placement (:mod:`.cut_stages`) the devices holding cut ops hold consecutive runs ``f..l`` of them,
in order; every other device lies inside one block. The block between two consecutive runs, ``[.., l]`` and
``[l + 1, ..]``, is shared by the device ending at ``l`` (an ideal of it: ``y`` of its work), the device
starting at ``l + 1`` (a filter: ``x``) and the devices inside it, each holding at most ``T - inner`` (its least
price, :class:`.block_cuts.BlockPrices`). A device of run ``f..l`` carries::

    hull(f, l) + c(f, l) + x + E_f(x) + y + L_{l+1}(y) <= T

with ``c`` its hull's tensors and ``E``, ``L`` the most of the lines under its prices for the parts it holds
of the blocks beside the hull: convex, so ``x + E(x)`` and ``y + L(y)`` are too. Scanning the runs along the
chain, a state is the block reached and the devices used so far, its value the most of that block the last
device may hold (holding more of it never hurts the next device): ``best[f, j]``. The next device, with ``m``
devices inside block ``f``, must hold ``x >= need = work_f - best[f, j] - m cap_f`` of it, at the least
``A_f(need) = min_{x >= need} x + E_f(x)``, and may then hold the most ``y`` with ``y + L(y) <= T - hull - c -
A_f(need)`` of the block after its run. ``T`` passes when the last block is covered with at most ``k`` devices.
States dominated by one with fewer devices and at least as much held are dropped, so a block without ops keeps one
state. Every device holds at most ``T`` of work (its prices are at least 0), so the devices left after a state hold at
most ``T`` each: a state whose blocks ahead hold more work than that cannot end the chain, nor can a run that leaves
more behind it (:class:`Frame`). Dropping them changes no answer, and near the least max load that passes they are
nearly all: the runs worth trying end near a multiple of ``T`` in work, and only the states a few of those reach stay.
Each feasibility check is ``O(pairs * lines)`` array steps and ``O(states)`` Python steps over those.

Host devices beside the accelerators (:class:`Hosts`) pay no transfers, and take at least the least host time of
the accelerators' work they hold in each block (:mod:`.host_prices`, each op at its own host time, faster than the
accelerators' or not): a host holds a run of cut ops where its hull's host time and those of its parts of the blocks
beside it fit in ``T``, or the most of a block's work inside it that its prices hold within ``T``. A state also
counts the hosts used; the chain passes with at most ``k`` accelerators and at most the hosts there are.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from .block_cuts import BlockPrices
from .host_prices import HostPrices

TOLERANCE = 1e-7  # relative slack of the work a device holds in :class:`Frame` (dropping fewer states is exact too)


@dataclass(frozen=True)
class Runs:
    """Runs of cut ops ``f..l``, sorted by ``f`` then ``l``: those of ``f``, ``l = first[f], first[f] + 1, ...``,
    are ``starts[f]`` to ``starts[f + 1]``, each with its ``cost`` (a time: its hull's and its transfers')."""

    starts: np.ndarray
    first: np.ndarray
    cost: np.ndarray


@dataclass(frozen=True)
class Hosts:
    """``count`` host devices: each pays no transfers, takes ``runs.cost`` (the least host time of the hull) for
    each run of cut ops it may hold, and at least ``prices`` (a group per block) for its parts of the blocks."""

    count: int
    prices: HostPrices
    runs: Runs


@dataclass(frozen=True)
class Frame:
    """The work around the blocks: ``before[b]`` of every op before block ``b`` (``b = 0..r``), ``through[b]`` of
    those and block ``b``'s, ``total`` the graph's; ``k`` accelerators and ``hosts`` hosts, each host holding at
    most ``host_work(T)`` of the accelerators' work within ``T`` (``T`` by default). A device of the chain holds at
    most ``T`` of work, so ``j`` accelerators and ``u`` hosts hold at most ``j T + u host_work(T)``."""

    before: np.ndarray
    through: np.ndarray
    total: float
    k: int
    hosts: int = 0
    host_work: Callable[[float], float] = float  # by default a host holds at most T, as an accelerator

    def slack(self, T: float) -> float:
        return TOLERANCE * (self.total + (self.k + self.hosts) * T)

    def first_blocks(self, T: float) -> np.ndarray:
        """``[j, u]``: the first block from which the devices left after ``j`` accelerators and ``u`` hosts can
        hold the rest of the graph (the work after the block at most ``(k - j) T + (hosts - u) host_work(T)``)."""
        j, u = np.arange(self.k + 1)[:, None], np.arange(self.hosts + 1)[None, :]
        room = (self.k - j) * T + (self.hosts - u) * self.host_work(T)
        return np.searchsorted(self.through, self.total - room - self.slack(T), side="left")

    def first_runs(self, T: float) -> tuple[np.ndarray, np.ndarray]:
        """Per cut op ``f``, the first ``l`` of a run ``f..l`` some chain under ``T`` holds on an accelerator, and
        on a host (``r`` where none): the devices before it hold the work before block ``f``, those after it the
        work after block ``l + 1``; the most the devices left after the run's hold, with ``a`` hosts before it and
        the fewest accelerators beside them that hold the rest."""
        r = len(self.before) - 1
        if T <= 0:
            return np.arange(r), np.arange(r) if self.hosts else np.full(r, r)
        held = np.maximum(self.before[:-1] - self.slack(T), 0.0)  # by the devices before the run's
        host = self.host_work(T)
        on_acc, on_host = np.full(r, -np.inf), np.full(r, -np.inf)
        for a in range(self.hosts + 1):
            accelerators = np.ceil(np.maximum(held - a * host, 0.0) / T)  # before the run's device
            left = self.k - accelerators  # ... and after, with the run's device one of them or a host
            on_acc = np.maximum(on_acc, np.where(left >= 1, (left - 1) * T + (self.hosts - a) * host, -np.inf))
            if a < self.hosts:
                on_host = np.maximum(on_host, np.where(left >= 0, left * T + (self.hosts - a - 1) * host, -np.inf))
        index = np.arange(r)
        return tuple(np.maximum(np.searchsorted(self.through, self.total - room - self.slack(T), side="left") - 1,
                                index) for room in (on_acc, on_host))


class Chain:
    """The runs of cut ops an accelerator of some chain may hold (:meth:`Frame.first_runs`), each one's ``cost = hull
    + c``, the blocks' prices and the :class:`Frame`, with what every ``T`` reads of them worked out once: per block,
    the least of ``x + E(x)`` and where it is, the least of ``y + L(y)``, and the lines that bound ``y`` from above
    (``1 + slope > 0``; the others padded). A price is at least 0 (a sum of tensors' times): a line at level 0 joins
    each block's, so that a device never holds more than ``T`` of work."""

    def __init__(self, runs: Runs, prices: BlockPrices, frame: Frame, hosts: Hosts | None = None) -> None:
        prices = _nonnegative(prices)
        self.runs, self.prices, self.frame, self.hosts = runs, prices, frame, hosts
        self.enter_at, self.enter_least = _least(prices.enter_slope, prices.enter_level, prices.work)
        self.leave_least = _least(prices.leave_slope, prices.leave_level, prices.work)[1]
        rise = 1.0 + prices.leave_slope
        up = rise > 0
        self.up_level = np.where(up, prices.leave_level, -np.inf)
        self.up_inverse = np.where(up, 1.0 / np.where(up, rise, 1.0), 1.0)


def _nonnegative(p: BlockPrices) -> BlockPrices:
    """The prices with a line at level 0, slope 0 on each side of every block."""
    rows = len(p.work)
    zero = np.zeros((rows, 1))
    return replace(p, enter_slope=np.hstack([p.enter_slope, zero]), enter_level=np.hstack([p.enter_level, zero]),
                   leave_slope=np.hstack([p.leave_slope, zero]), leave_level=np.hstack([p.leave_level, zero]))


def fits(chain: Chain, T: float, k: int) -> bool:
    """Whether ``k`` accelerators (and the chain's hosts), each under the max load ``T``, hold the graph (module
    docstring). A state ``best[f, j, u]``: block ``f`` reached with ``j`` accelerators and ``u`` hosts; only the
    blocks some state reached are visited, and only the states and runs that can end the chain."""
    p = chain.prices
    r = len(chain.runs.starts) - 1
    work = p.work
    cap = np.clip(T - p.inner, 0.0, work)  # the most a device inside the block holds
    h = 0 if chain.hosts is None else chain.hosts.count
    blocks = np.arange(r + 1)
    host_cap = np.zeros(r + 1) if h == 0 else np.minimum(chain.hosts.prices.work_within(blocks, T), work)  # the most
    # of a block's work a host inside it holds
    ends = chain.frame.first_blocks(T).tolist()  # [j][u]: the first block from which j, u devices used can end
    best = np.full((r + 1, k + 1, h + 1), -np.inf)
    best[0, 0, 0] = 0.0
    reached = bytearray(r + 1)
    reached[0] = 1

    def step(runs: Runs, f: int, dest: tuple[int, int], value: Callable[[int, int, int], np.ndarray]) -> None:
        """The runs from cut op ``f`` into the states ``dest`` (devices used) of the blocks after them: the most
        ``value(block, lo, hi)`` of runs ``lo..hi`` holds there, where the devices left can end the chain."""
        lo, hi = int(runs.starts[f]), int(runs.starts[f + 1])
        start = int(runs.first[f]) + 1  # the block after the first run
        lo = max(lo, lo + ends[dest[0]][dest[1]] - start)
        if lo < hi:
            start += lo - int(runs.starts[f])
            col = best[start:start + hi - lo, dest[0], dest[1]]
            np.maximum(col, value(start, lo, hi), out=col)
            reached[start:start + hi - lo] = b"\x01" * (hi - lo)

    f = reached.find(1)
    while 0 <= f < r:
        for u in range(h + 1):
            ahead = -math.inf
            for j, held in enumerate(best[f, :, u].tolist()):
                if held <= ahead:  # no more than a state with fewer devices holds: dominated (or no state)
                    continue
                ahead = held
                if f < ends[j][u]:  # the devices left cannot hold the blocks ahead (nor with more used)
                    continue
                for q in range(h - u + 1):  # hosts inside block f, then accelerators
                    rest = work[f] - held - q * host_cap[f]
                    for m in range(k - j + 1):
                        need = max(0.0, rest - m * cap[f])
                        if j + m < k:  # the next run on an accelerator
                            enter = _entering(chain, f, need)
                            step(chain.runs, f, (j + m + 1, u + q),
                                 lambda b, lo, hi, e=enter: _most(chain, b, T - chain.runs.cost[lo:hi] - e))
                        if u + q < h:  # ... or on a host
                            enter = float(chain.hosts.prices.time_for(f, need))
                            step(chain.hosts.runs, f, (j + m, u + q + 1),
                                 lambda b, lo, hi, e=enter: _host_most(chain, b, T - chain.hosts.runs.cost[lo:hi] - e))
                        if need <= 0 or cap[f] <= 0:
                            break
        f = reached.find(1, f + 1)
    for q in range(h + 1):
        rest = work[r] - best[r] - q * host_cap[r]
        inside = np.where(rest <= 0, 0, np.ceil(rest / cap[r]) if cap[r] > 0 else np.inf)
        if (np.arange(k + 1)[:, None] + inside <= k)[:, :h + 1 - q].any():
            return True
    return False


def _host_most(chain: Chain, b: int, s: np.ndarray) -> np.ndarray:
    """The most ``y`` of the blocks ``b, b + 1, ...`` a host holds with ``s`` of its time left (its prices'), at
    most their work (``-inf`` where ``s < 0``)."""
    work = chain.prices.work[b:b + len(s)]
    return np.where(s >= 0, np.minimum(work, chain.hosts.prices.work_within(np.arange(b, b + len(s)), s)), -math.inf)


def _entering(chain: Chain, b: int, need: float) -> float:
    """``A_b(need) = min over need <= x <= work_b of x + E_b(x)``: convex, so the least value where ``need`` is
    at most its place, else its value at ``need``."""
    if need <= chain.enter_at[b]:
        return float(chain.enter_least[b])
    p = chain.prices
    return need + float(np.max(p.enter_level[b] + p.enter_slope[b] * need))


def _most(chain: Chain, b: int, s: np.ndarray) -> np.ndarray:
    """``Y(s) = max {y in [0, work] : y + L(y) <= s}`` of the blocks ``b, b + 1, ...`` for the ``s`` in order
    (``-inf`` where no ``y`` passes): none below the least of ``y + L(y)``; else the work, or less where a line
    ``level + (1 + slope) y <= s`` with ``1 + slope > 0`` bounds ``y`` (the lines bounding it below or not at all
    pass wherever the least does: the set of ``y`` that pass is an interval)."""
    rows = slice(b, b + len(s))
    top = ((s[:, None] - chain.up_level[rows]) * chain.up_inverse[rows]).min(axis=1)
    return np.where(s >= chain.leave_least[rows], np.minimum(chain.prices.work[rows], top), -math.inf)


def _least(slope: np.ndarray, level: np.ndarray, work: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, where ``h(x) = x + max_q(level + slope x)`` is least on ``[0, work]`` and that least: among the
    ends and the lines' crossings (``h`` is convex and piecewise linear; the padded lines never cross)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        cross = (level[:, :, None] - level[:, None, :]) / (slope[:, None, :] - slope[:, :, None])
    cross = cross.reshape(len(work), -1)
    cross = np.where(np.isfinite(cross), np.clip(cross, 0.0, work[:, None]), 0.0)
    xs = np.concatenate([np.zeros((len(work), 1)), work[:, None], cross], axis=1)
    h = xs + np.max(level[:, None, :] + slope[:, None, :] * xs[:, :, None], axis=2)
    at = np.argmin(h, axis=1)
    rows = np.arange(len(work))
    return xs[rows, at], h[rows, at]
