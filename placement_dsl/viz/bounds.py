"""The certificate over time: the best proven lower bound and the best placement's objective.

The points come from the ``certify`` progress reports (:mod:`placement_dsl.progress`), one
after each level and one after the upper-bound heuristics (which follow the free levels), each timed; without a recording
they are rebuilt from the certificate's table (levels end one after another).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..certify import Certificate, LevelStatus, certify
from ..problem import Problem
from ..progress import Event, Recorder, reporting
from .common import pyplot, save


@dataclass(frozen=True)
class Point:
    """After ``level`` ended at ``seconds``: the best bound and the best objective (``inf`` before any)."""

    seconds: float
    level: str
    lower: float
    upper: float

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "level": self.level, "lower": self.lower,
                "upper": self.upper if math.isfinite(self.upper) else None}


def from_events(events: Sequence[Event]) -> list[Point]:
    """The points of recorded ``certify`` reports (fields ``level``, ``bound``, ``best``)."""
    return [Point(e.seconds, str(e.fields.get("level", "")), float(e.fields.get("bound", 0.0)),
                  float(e.fields.get("best", math.inf))) for e in events if e.task == "certify"]


def from_certificate(cert: Certificate) -> list[Point]:
    """Points rebuilt from the table: levels end one after another, the bound is the running best."""
    points, t, lower = [], 0.0, 0.0
    for row in cert.levels:
        t += row.seconds
        if row.bound is not None and row.status is not LevelStatus.NOT_APPLICABLE and row.bound <= cert.objective:
            lower = max(lower, row.bound)
        points.append(Point(t, row.level, lower, cert.objective))
    return points


def certify_over_time(problem: Problem, **options: Any) -> tuple[Certificate, list[Point]]:
    """:func:`~placement_dsl.certify.certify` with its progress recorded: the certificate and its points."""
    with reporting(Recorder()) as rec:
        cert = certify(problem, **options)
    points = from_events(rec.events) or from_certificate(cert)
    return cert, points


def draw(points: Sequence[Point], path: str | Path, title: str = "") -> Path:
    """Step lines of the lower and upper bound against seconds, each point named by its level."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    xs = [p.seconds for p in points]
    ups = [p.upper if math.isfinite(p.upper) else math.nan for p in points]
    ax.step(xs, ups, where="post", color="#e15759", marker="o", label="upper bound (best placement)")
    ax.step(xs, [p.lower for p in points], where="post", color="#4e79a7", marker="s", label="lower bound")
    for p in points:
        ax.annotate(p.level, (p.seconds, p.lower), textcoords="offset points", xytext=(3, -12), fontsize=7)
    ax.set_xlabel("seconds")
    ax.set_ylabel("objective (ms)")
    ax.legend(loc="lower right")
    last = points[-1] if points else None
    gap = "" if last is None or not math.isfinite(last.upper) or last.upper <= 0 else \
        f": gap {max(last.upper - last.lower, 0.0) / last.upper:.2%}"
    ax.set_title(title or f"certificate over time{gap}")
    return save(fig, path)
