"""A pipeline run's calibration as a file: :func:`write_calibration` writes a :class:`~placement_dsl.calibrate.RunCosts`
as JSON (:func:`calibration_dict`), :func:`read_calibration` reads it back, as ``import --calibration`` does.

Version 2 holds each schedule's compute factor (``schedule_scales``) beside the factor of the schedules not measured
apart (``scale``); a version-1 file (no ``version``) holds ``scale`` alone, which then prices every schedule.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from .calibrate import LinkTime, RunCosts
from .cluster import ACCELERATOR
from .errors import SpecError
from .files import write_atomic
from .simulate import RUN_SCHEDULES

CALIBRATION_FIELDS = ("scale", "op_ms", "stage_ms", "overhead_ms")
"""The fitted and measured terms a calibration file holds beside its ``kind``, ``link`` and ``schedule_scales``."""
CALIBRATION_VERSION = 2  # 2: each schedule's compute factor (``schedule_scales``); 1 (no ``version``): one for all


def calibration_dict(costs: RunCosts, kind: str = ACCELERATOR, note: str = "") -> dict[str, object]:
    """``costs`` as the JSON object :func:`read_calibration` reads: the device ``kind`` its times are for, the compute
    factor (of schedules not measured apart) and each schedule's, the time per op and per stage, the runtime's time
    per task and the link (``bandwidth`` null when unbounded). The slowdown is a property of the machine's load during
    the run, not of the runtime: not kept.

    >>> calibration_dict(RunCosts(scale=1.25, op_ms=0.02, scales=(("gpipe", 1.3),)))["schedule_scales"]
    {'gpipe': 1.3}
    """
    bandwidth = costs.link.bandwidth
    out: dict[str, object] = {"version": CALIBRATION_VERSION, "kind": kind,
                              **{f: float(getattr(costs, f)) for f in CALIBRATION_FIELDS},
                              "schedule_scales": {s: float(c) for s, c in costs.scales},
                              "link": {"latency_ms": costs.link.latency_ms,
                                       "bandwidth": bandwidth if bandwidth < math.inf else None}}
    return {**out, "note": note} if note else out


def write_calibration(costs: RunCosts, path: str | Path, kind: str = ACCELERATOR, note: str = "") -> None:
    """Write :func:`calibration_dict` to ``path`` (atomically), for ``import --calibration`` and
    :func:`read_calibration`."""
    write_atomic(path, json.dumps(calibration_dict(costs, kind, note), indent=2) + "\n")


def read_calibration(path: str | Path) -> tuple[RunCosts, str]:
    """The :class:`RunCosts` (slowdown 1) and the device kind of a file :func:`write_calibration` wrote; a file of
    version 1 (one compute factor) gives its factor to every schedule. A file that is not one, of a later version,
    or a field that is no finite number >= 0 (a factor > 0) or no schedule, is refused naming the file and field."""
    source = str(path)
    try:
        data = json.loads(Path(path).read_text())
    except OSError as err:
        raise SpecError(f"cannot read calibration {source!r}: {err.strerror}") from None
    except ValueError as err:
        raise SpecError(f"calibration {source!r} is not valid JSON: {err}") from None
    if not isinstance(data, dict) or "scale" not in data:
        raise SpecError(f"calibration {source!r}: expected an object with {list(CALIBRATION_FIELDS)}, 'kind' and "
                        "'link', as a pipeline run's calibration writes it")
    version = data.get("version", 1)
    if version not in range(1, CALIBRATION_VERSION + 1) or isinstance(version, bool):
        raise SpecError(f"{source}: field 'version' must be 1 to {CALIBRATION_VERSION} (a later placement_dsl wrote "
                        f"it?), got {version!r}")
    known = {"version", "kind", "link", "note", "schedule_scales", *CALIBRATION_FIELDS}
    unknown = sorted(set(data) - known)  # a misspelt term ("op_msec") would otherwise read as 0
    if unknown:
        raise SpecError(f"{source}: unknown field {unknown[0]!r} (a calibration holds {sorted(known)})")
    unknown = sorted(set(data.get("link") or {}) - {"latency_ms", "bandwidth"}) if isinstance(data.get("link"), dict) \
        else []
    if unknown:
        raise SpecError(f"{source}: unknown field 'link.{unknown[0]}' (the link holds latency_ms and bandwidth)")
    terms = {f: _calibration_number(data.get(f, 0.0), f"{source}: field {f!r}") for f in CALIBRATION_FIELDS}
    scales = data.get("schedule_scales") or {}
    if not isinstance(scales, dict) or not set(scales) <= set(RUN_SCHEDULES):
        raise SpecError(f"{source}: field 'schedule_scales' must map schedules of {list(RUN_SCHEDULES)} to compute "
                        f"factors, got {scales!r}")
    terms.update({f"schedule_scales.{s}": _calibration_number(c, f"{source}: field 'schedule_scales.{s}'")
                  for s, c in scales.items()})
    zero = [f for f in ("scale", *(f"schedule_scales.{s}" for s in scales)) if not terms[f] > 0]
    if zero:
        raise SpecError(f"{source}: field {zero[0]!r} must be > 0, got {terms[zero[0]]!r}")
    link = data.get("link") or {}
    if not isinstance(link, dict):
        raise SpecError(f"{source}: field 'link' must be an object with latency_ms and bandwidth, got {link!r}")
    latency = _calibration_number(link.get("latency_ms", 0.0), f"{source}: field 'link.latency_ms'")
    bandwidth = link.get("bandwidth")
    bandwidth = math.inf if bandwidth is None else _calibration_number(bandwidth, f"{source}: field 'link.bandwidth'")
    if not bandwidth > 0:
        raise SpecError(f"{source}: field 'link.bandwidth' must be > 0 (null: unbounded), got {link['bandwidth']!r}")
    kind = data.get("kind", ACCELERATOR)
    if not isinstance(kind, str) or not kind:
        raise SpecError(f"{source}: field 'kind' must be a device kind's name, got {kind!r}")
    return RunCosts(terms["scale"], LinkTime(latency, bandwidth), terms["overhead_ms"], 1.0, terms["stage_ms"],
                    terms["op_ms"], tuple((s, terms[f"schedule_scales.{s}"]) for s in scales)), kind


def _calibration_number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise SpecError(f"{where} must be a finite number >= 0, got {value!r}")
    return float(value)


__all__ = ["CALIBRATION_FIELDS", "CALIBRATION_VERSION", "calibration_dict", "read_calibration", "write_calibration"]
