"""The least time a host takes to hold a given part of the accelerators' work, per group of ops (a block of
:mod:`.cut_stages`, or the whole graph).

A host holding ops of a group whose accelerator times sum to ``x`` takes at least ``H(x)``: the group's ops
taken by their host time per unit of accelerator time, least first, the last one in part (a fractional knapsack).
``H`` is piecewise linear, convex and increasing, ``0`` at ``0`` and infinite past the work of the ops a host runs;
its inverse ``X(s)`` is the most accelerator work a host holds within ``s``. Measured profiles price small ops
below the accelerators' time on a CPU (launch overhead): one least ratio over all ops would price every op at it,
where ``H`` prices each at its own.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class HostPrices:
    """Group ``g``'s breakpoints are ``first[g] .. last[g]``: ``work`` and ``time`` their accelerator work and host
    time summed from the first group's (nondecreasing over all groups; within a group the work increases)."""

    first: np.ndarray
    last: np.ndarray
    work: np.ndarray
    time: np.ndarray

    def time_for(self, group: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``H_g(x)``, per ``group`` and ``x``: ``0`` where ``x <= 0``, ``inf`` past the group's work."""
        group, x = np.broadcast_arrays(np.asarray(group), np.asarray(x, dtype=float))
        a, b = self.first[group], self.last[group]
        target = self.work[a] + x
        i = np.clip(np.searchsorted(self.work, target, side="left"), a + 1, np.maximum(b, a + 1))
        i = np.minimum(i, len(self.work) - 1)
        lo_w, hi_w, lo_t, hi_t = self.work[i - 1], self.work[i], self.time[i - 1], self.time[i]
        with np.errstate(divide="ignore", invalid="ignore"):
            inside = lo_t + (hi_t - lo_t) * np.clip((target - lo_w) / (hi_w - lo_w), 0.0, 1.0)
        over = x > self.work[b] - self.work[a]
        return np.where(x <= 0, 0.0, np.where(over, np.inf, inside - self.time[a]))

    def work_within(self, group: np.ndarray, s: np.ndarray) -> np.ndarray:
        """``X_g(s)``, the most accelerator work of ``group``'s ops a host holds within ``s`` (``-inf`` where
        ``s < 0``)."""
        group, s = np.broadcast_arrays(np.asarray(group), np.asarray(s, dtype=float))
        a, b = self.first[group], self.last[group]
        target = self.time[a] + s
        i = np.searchsorted(self.time, target, side="right")  # the first breakpoint past ``s``
        full = i > b
        i = np.clip(i, a + 1, np.maximum(b, a + 1))
        i = np.minimum(i, len(self.time) - 1)
        lo_w, hi_w, lo_t, hi_t = self.work[i - 1], self.work[i], self.time[i - 1], self.time[i]
        with np.errstate(divide="ignore", invalid="ignore"):
            inside = lo_w + (hi_w - lo_w) * np.clip((target - lo_t) / (hi_t - lo_t), 0.0, 1.0)
        most = np.where(full | (b == a), self.work[b], inside) - self.work[a]
        return np.where(s < 0, -np.inf, most)


def host_prices(group: np.ndarray, groups: int, acc: np.ndarray, host: np.ndarray) -> HostPrices:
    """The prices of ``groups`` groups, op ``v`` in ``group[v]`` (none where negative) with accelerator time
    ``acc[v]`` and host time ``host[v]``. Ops without accelerator time add nothing a host must hold; ops no host
    runs (``inf``) are left out (a host holds none of them: its most work only grows)."""
    keep = (group >= 0) & (acc > 0) & np.isfinite(host)
    g, a, h = group[keep], acc[keep], host[keep]
    order = np.lexsort((h / a, g))
    g, a, h = g[order], a[order], h[order]
    counts = np.bincount(g, minlength=groups)
    first = np.concatenate([[0], np.cumsum(counts + 1)])[:-1]  # each group's zero point, then its ops
    in_sorted = np.concatenate([[0], np.cumsum(counts)])[:-1]  # where each group's ops start in the order
    position = first[g] + 1 + np.arange(len(g)) - in_sorted[g]
    step_w, step_t = np.zeros(len(g) + groups), np.zeros(len(g) + groups)
    step_w[position], step_t[position] = a, h
    return HostPrices(first, first + counts, np.cumsum(step_w), np.cumsum(step_t))
