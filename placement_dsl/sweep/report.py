"""Reports from a sweep's store, in the forms of Archer et al. (ICML 2024).

* Tables 1 and 3: per testbed family (``pipedream`` ~ Table 1, ``regal`` ~ Table 3), level and
  ``k``, the geometric mean over graphs of ``bound / best upper bound``, where the best upper
  bound of an instance is the least objective any of its tasks found (the heuristics, and the
  placements ``certify`` found while bounding), and the bound is the best available at that
  level (its own or an earlier level's, as in Archer's captions); the levels' own bounds are
  reported beside when they differ. A level without a bound on an instance (failed, skipped,
  none proved) is left out of its mean, not counted as 0; ``count`` says how many graphs
  entered it.
* Table 2: per heuristic and ``k``, the geometric mean of ``objective / simple`` (Lemma 3.3).
* Fig. 4: running time against graph size, a panel per ``k`` (:mod:`placement_dsl.sweep.figures`).
* ``instances.csv``: one row per (graph, k), every level's bound, ratio, status and seconds
  and every heuristic's objective, ratio and seconds; ``report.md`` with the pictures.
"""
from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..files import atomic_open, cannot_write, check_writable, write_atomic
from .store import DONE, FAILED, Store
from .tasks import LEVEL, METHOD

ARCHER_NAMES = {"simple": "simple (Lemma 3.3)", "superblock": "superblock (§3.2, Archer's 'bottleneck')",
                "guess": "guess (§3.3, Archer's 'bottleneck-guess')", "exact": "exact"}
"""Row labels of the levels: the level's own name first (what ``--levels`` takes; ``bottleneck`` is a cost
model here), the paper's column name beside it."""
ARCHER_TABLES = {"pipedream": "Table 1 (production models)", "regal": "Table 3 (REGAL)"}
ALL = "all"


def geomean(values: list[float]) -> float | None:
    """Geometric mean (``None`` for no values); values are floored at 1e-12."""
    if not values:
        return None
    return math.exp(sum(math.log(max(v, 1e-12)) for v in values) / len(values))


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or not math.isfinite(den) or den <= 0:
        return None
    return num / den


# ---------------------------------------------------------------------------- instances
def instances(rows: list[dict[str, Any]], levels: list[str]) -> list[dict[str, Any]]:
    """One dict per (graph, k): size, family, best upper bound and who found it, every level and method.

    ``levels`` is the hierarchy's order: a level's ``best_ratio`` is the best ratio of it and
    the levels before it that ran on the instance (the best bound available at that rung), or
    ``None`` when the level itself proved no bound.
    """
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["graph"], row["k"])].append(row)
    order = sorted(groups, key=lambda key: (key[1], key[0]))
    out = [_instance(graph, k, groups[(graph, k)]) for graph, k in order]
    for inst in out:
        best = None
        for level in (lv for lv in levels if lv in inst["levels"]):
            cell = inst["levels"][level]
            if cell["ratio"] is not None:
                best = cell["ratio"] if best is None else max(best, cell["ratio"])
            cell["best_ratio"] = None if cell["ratio"] is None else best
    return out


def _instance(graph: str, k: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    done = [r for r in rows if r["status"] == DONE]
    ub, ub_by = math.inf, None
    for r in done:
        if r["ub"] is not None and r["ub"] < ub:
            ub, ub_by = r["ub"], r["name"] if r["kind"] == METHOD else r["record"].get("detail", {}).get("ub_by")
    first = done[0] if done else rows[0]
    simple = next((r["simple"] for r in done if r["simple"] is not None), None)
    inst: dict[str, Any] = {"graph": graph, "k": k, "family": first["family"], "n": first["n"], "m": first["m"],
                            "best_ub": ub if math.isfinite(ub) else None, "best_ub_by": ub_by, "simple": simple,
                            "levels": {}, "methods": {}}
    for r in rows:
        ok = r["status"] == DONE
        if r["kind"] == LEVEL:
            status = r["record"].get("detail", {}).get("status", "done") if ok else FAILED
            inst["levels"][r["name"]] = {"bound": r["value"] if ok else None, "status": status,
                                         "ratio": _ratio(r["value"], inst["best_ub"]) if ok else None,
                                         "seconds": r["seconds"]}
        else:
            inst["methods"][r["name"]] = {"ub": r["value"] if ok else None, "status": DONE if ok else FAILED,
                                          "ratio_simple": _ratio(r["value"], simple) if ok else None,
                                          "seconds": r["seconds"]}
    return inst


# ---------------------------------------------------------------------------- tables
def _families(insts: list[dict[str, Any]]) -> list[str]:
    fams = sorted({i["family"] for i in insts if i["family"]})
    return fams + [ALL] if len(fams) > 1 else fams


def bound_rows(insts: list[dict[str, Any]], levels: list[str]) -> list[dict[str, Any]]:
    """Archer Tables 1/3: ``{family, level, k, geomean, count, geomean_own, count_own}``.

    ``geomean`` is over the best bound available at the level (Archer's "best available lower
    bound from the MIP hierarchy": the level's or an earlier one's, whichever is higher);
    ``geomean_own`` over the level's own bound, which a time-limited MIP may leave weak.
    """
    out = []
    for fam in _families(insts):
        chosen = [i for i in insts if fam == ALL or i["family"] == fam]
        for level in levels:
            for k in sorted({i["k"] for i in chosen}):
                cells = [i["levels"][level] for i in chosen if i["k"] == k and level in i["levels"]]
                best = [c["best_ratio"] for c in cells if c["best_ratio"] is not None]
                own = [c["ratio"] for c in cells if c["ratio"] is not None]
                out.append({"family": fam, "level": level, "k": k, "geomean": geomean(best), "count": len(best),
                            "geomean_own": geomean(own), "count_own": len(own)})
    return out


def ordering_rows(insts: list[dict[str, Any]], methods: list[str]) -> list[dict[str, Any]]:
    """Archer Table 2: ``{family, method, k, geomean, count}`` of objective / simple lower bound."""
    out = []
    for fam in _families(insts):
        chosen = [i for i in insts if fam == ALL or i["family"] == fam]
        for method in methods:
            for k in sorted({i["k"] for i in chosen}):
                vals = [i["methods"][method]["ratio_simple"] for i in chosen if i["k"] == k
                        and method in i["methods"] and i["methods"][method]["ratio_simple"] is not None]
                out.append({"family": fam, "method": method, "k": k, "geomean": geomean(vals), "count": len(vals)})
    return out


def summary(store: Store) -> dict[str, Any]:
    """Everything a report shows, JSON-ready: counts, provenance, the tables, instances and failures."""
    rows = store.rows()
    from ..certify import LEVELS  # run order of the levels

    levels = [lv for lv in LEVELS if any(r["kind"] == LEVEL and r["name"] == lv for r in rows)]
    methods = sorted({r["name"] for r in rows if r["kind"] == METHOD})
    insts = instances(rows, levels)
    return {"results": str(store.path), "tasks": len(rows),
            "tasks_done": sum(r["status"] == DONE for r in rows),
            "tasks_failed": sum(r["status"] == FAILED for r in rows),
            "graphs": len({r["graph"] for r in rows}), "families": _families(insts),
            "ks": sorted({r["k"] for r in rows}), "levels": levels, "methods": methods,
            "time_limits": sorted({r["time_limit"] for r in rows}),
            "code_versions": sorted({r["code_version"] for r in rows if r["code_version"]}),
            "executors": sorted({r["executor"] for r in rows if r["executor"]}),
            "bounds": bound_rows(insts, levels), "orderings": ordering_rows(insts, methods),
            "instances": insts,
            "failed": [{"task": r["key"], "attempts": r["attempts"], "error": r["error"]}
                       for r in rows if r["status"] == FAILED]}


# ---------------------------------------------------------------------------- text
def _grid(rows: list[dict[str, Any]], fam: str, what: str, names: list[str], ks: list[int],
          label: dict[str, str] | None = None, own: bool = False) -> tuple[list[str], list[list[str]]]:
    """Header and cells of one table: a row per name, a column per k (``geomean (count)``; ``own``: the
    levels' own bounds)."""
    value, count = ("geomean_own", "count_own") if own else ("geomean", "count")
    cell = {(r[what], r["k"]): r for r in rows if r["family"] == fam}
    head = [what] + [f"k={k}" for k in ks]
    body = []
    for name in names:
        cells = [(label or {}).get(name, name)]
        for k in ks:
            r = cell.get((name, k))
            cells.append("—" if r is None or r[value] is None else f"{r[value]:.4f} ({r[count]})")
        body.append(cells)
    return head, body


def _tables(s: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """Every table of the report as (title, header, rows)."""
    out = []
    for fam in s["families"]:
        if s["levels"]:
            ref = ARCHER_TABLES.get(fam, "Tables 1 and 3")
            out.append((f"bound / best upper bound, {fam} graphs (Archer {ref} form)",
                        *_grid(s["bounds"], fam, "level", s["levels"], s["ks"], ARCHER_NAMES)))
            if any(_differs(r) for r in s["bounds"] if r["family"] == fam):
                out.append((f"the levels' own bound / best upper bound, {fam} graphs",
                            *_grid(s["bounds"], fam, "level", s["levels"], s["ks"], ARCHER_NAMES, own=True)))
        if s["methods"]:
            out.append((f"upper bound / simple lower bound, {fam} graphs (Archer Table 2 form)",
                        *_grid(s["orderings"], fam, "method", s["methods"], s["ks"])))
    return out


def _differs(row: dict[str, Any]) -> bool:
    """Whether a level's own bounds differ from the best available at it (a weaker own bound somewhere)."""
    if row["count"] != row["count_own"]:
        return True
    return row["geomean"] is not None and abs(row["geomean"] - row["geomean_own"]) > 5e-5


def text(s: dict[str, Any]) -> str:
    """The summary as plain-text tables (cells: geometric mean and, in brackets, how many graphs)."""
    lines = [_headline(s)]
    for title, head, body in _tables(s):
        widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
        lines += ["", title] + ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                                          enumerate(zip(row, widths))) for row in [head, *body]]
    for f in s["failed"]:
        lines.append(f"failed: {f['task']} after {f['attempts']} attempt(s): {f['error']}")
    return "\n".join(lines)


def _headline(s: dict[str, Any]) -> str:
    limits = ", ".join(f"{t:g}" for t in s["time_limits"]) or "-"
    return (f"{s['tasks_done']} tasks done, {s['tasks_failed']} failed; {s['graphs']} graphs "
            f"({', '.join(f for f in s['families'] if f != ALL) or '-'}), k = {', '.join(map(str, s['ks'])) or '-'}, "
            f"time limit {limits} s; code {', '.join(s['code_versions']) or '-'}")


# ---------------------------------------------------------------------------- files
def write_csv(s: dict[str, Any], path: Path) -> Path:
    """``instances.csv``: a row per (graph, k); level and method columns are prefixed by their names."""
    fields = ["graph", "family", "n", "m", "k", "best_ub", "best_ub_by", "simple"]
    fields += [f"{lv}_{c}" for lv in s["levels"] for c in ("bound", "ratio", "best_ratio", "status", "seconds")]
    fields += [f"{m}_{c}" for m in s["methods"] for c in ("ub", "ratio_simple", "status", "seconds")]
    with atomic_open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for inst in s["instances"]:
            row = {f: inst.get(f) for f in fields[:8]}
            for group in ("levels", "methods"):
                for name, cells in inst[group].items():
                    row.update({f"{name}_{c}": v for c, v in cells.items()})
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return path


def markdown(s: dict[str, Any], pictures: dict[str, str]) -> str:
    """``report.md``: headline, the tables, the pictures, the failures and the files."""
    lines = ["# Sweep report", "", f"Results: `{s['results']}`", "", _headline(s) + ".", "",
             "Cells: geometric mean over graphs, and in brackets how many graphs entered it."]
    for title, head, body in _tables(s):
        lines += ["", f"## {title[0].upper()}{title[1:]}", "", "| " + " | ".join(head) + " |",
                  "|" + "---|" * len(head)] + ["| " + " | ".join(row) + " |" for row in body]
    for title, name in pictures.items():
        lines += ["", f"## {title}", "", f"![{title}]({name})"]
    if s["failed"]:
        lines += ["", "## Failed tasks", "", "| task | attempts | error |", "|---|---|---|"]
        lines += [f"| {f['task']} | {f['attempts']} | {str(f['error']).replace('|', '/')} |" for f in s["failed"]]
    lines += ["", "Per instance: [instances.csv](instances.csv)", ""]
    return "\n".join(lines)


def write_report(store: Store, out: Path) -> tuple[dict[str, Any], list[Path]]:
    """Write ``instances.csv``, the figures (when matplotlib is installed) and ``report.md`` into ``out``."""
    s = summary(store)
    return s, write_files(s, out)


def check_report_dir(out: Path) -> Path:
    """``out`` if the report's directory can be made or written, else a :class:`SpecError` saying why."""
    if out.exists() and not out.is_dir():
        raise cannot_write(out, "it is not a directory; give a directory for the report's files")
    if out.is_dir():
        return check_writable(out / "report.md").parent
    folder = next(p for p in out.parents if p.exists())
    if not folder.is_dir():
        raise cannot_write(out, f"{str(folder)!r} is not a directory")
    check_writable(folder / out.name)
    return out


def write_files(s: dict[str, Any], out: Path) -> list[Path]:
    """The report files of summary ``s`` in ``out`` (created if missing): the CSV, the figures, ``report.md``."""
    from .figures import write_figures

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise cannot_write(out, err.strerror or str(err)) from None
    files = [write_csv(s, out / "instances.csv")]
    pictures = write_figures(s, out)
    files += [out / name for name in pictures.values()]
    write_atomic(out / "report.md", markdown(s, pictures))
    return files + [out / "report.md"]
