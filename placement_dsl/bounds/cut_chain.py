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
state. Each feasibility check is ``O(pairs * lines)`` array steps and ``O(states)`` Python steps.

Host devices beside the accelerators (:class:`Hosts`) pay no transfers, and compute at least ``rho`` times the
accelerators' time of what they hold: a host holds a run of cut ops where its hull's host time and ``rho`` times its
parts of the blocks beside it fit in ``T``, or up to ``T / rho`` of a block's work inside it. A state also counts
the hosts used; the chain passes with at most ``k`` accelerators and at most the hosts there are.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .block_cuts import BlockPrices


@dataclass(frozen=True)
class Hosts:
    """``count`` host devices: each computes at least ``rho`` times the accelerators' time of any set of ops (the
    least ratio over the ops; at least 1, so that a host's run is among the chain's), pays no transfers, and takes
    ``hull[i]`` (the least host time of the hull of run ``i``) for a run of cut ops."""

    count: int
    rho: float
    hull: np.ndarray


class Chain:
    """The runs of cut ops ``f..l``, sorted by ``f`` then ``l`` (those of ``f``, ``l = f, f + 1, ...``, are
    ``starts[f]`` to ``starts[f + 1]``), each one's ``base = hull + c``, and the blocks' prices, with what every
    ``T`` reads of them worked out once: per block, the least of ``x + E(x)`` and where it is, the least of ``y +
    L(y)``, and the lines that bound ``y`` from above (``1 + slope > 0``; the others padded)."""

    def __init__(self, base: np.ndarray, starts: np.ndarray, prices: BlockPrices, hosts: Hosts | None = None) -> None:
        self.base, self.starts, self.prices, self.hosts = base, starts, prices, hosts
        self.enter_at, self.enter_least = _least(prices.enter_slope, prices.enter_level, prices.work)
        self.leave_least = _least(prices.leave_slope, prices.leave_level, prices.work)[1]
        rise = 1.0 + prices.leave_slope
        up = rise > 0
        self.up_level = np.where(up, prices.leave_level, -np.inf)
        self.up_inverse = np.where(up, 1.0 / np.where(up, rise, 1.0), 1.0)


def fits(chain: Chain, T: float, k: int) -> bool:
    """Whether ``k`` accelerators (and the chain's hosts), each under the max load ``T``, hold the graph (module
    docstring). A state ``best[f, j, u]``: block ``f`` reached with ``j`` accelerators and ``u`` hosts."""
    p = chain.prices
    r = len(chain.starts) - 1
    work = p.work
    cap = np.clip(T - p.inner, 0.0, work)  # the most a device inside the block holds
    h, rho = (0, 1.0) if chain.hosts is None else (chain.hosts.count, chain.hosts.rho)
    host_cap = T / rho  # the most of a block's work a host inside it holds
    best = np.full((r + 1, k + 1, h + 1), -np.inf)
    best[0, 0, 0] = 0.0
    for f in range(r):
        lo, hi = int(chain.starts[f]), int(chain.starts[f + 1])
        if hi == lo:
            continue
        base = T - chain.base[lo:hi]
        for u in range(h + 1):
            ahead = -math.inf
            for j, held in enumerate(best[f, :, u].tolist()):
                if held <= ahead:  # no more than a state with fewer devices holds: dominated (or no state)
                    continue
                ahead = held
                for q in range(h - u + 1):  # hosts inside block f, then accelerators
                    rest = work[f] - held - q * host_cap
                    for m in range(k - j + 1):
                        need = max(0.0, rest - m * cap[f])
                        if j + m < k:  # the next run on an accelerator
                            col = best[f + 1:f + 1 + hi - lo, j + m + 1, u + q]
                            np.maximum(col, _most(chain, f + 1, base - _entering(chain, f, need)), out=col)
                        if u + q < h:  # ... or on a host
                            col = best[f + 1:f + 1 + hi - lo, j + m, u + q + 1]
                            np.maximum(col, _host_most(chain, f + 1, T - chain.hosts.hull[lo:hi] - rho * need), out=col)
                        if need <= 0 or cap[f] <= 0:
                            break
    for q in range(h + 1):
        rest = work[r] - best[r] - q * host_cap
        inside = np.where(rest <= 0, 0, np.ceil(rest / cap[r]) if cap[r] > 0 else np.inf)
        if (np.arange(k + 1)[:, None] + inside <= k)[:, :h + 1 - q].any():
            return True
    return False


def _host_most(chain: Chain, b: int, s: np.ndarray) -> np.ndarray:
    """The most ``y`` of the blocks ``b, b + 1, ...`` a host holds with ``s`` of its time left: ``s / rho``, at most
    their work (``-inf`` where ``s < 0``)."""
    work = chain.prices.work[b:b + len(s)]
    return np.where(s >= 0, np.minimum(work, s / chain.hosts.rho), -math.inf)


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
