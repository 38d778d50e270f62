"""MOIRAI (Zhang et al.) sample sheets: the makespan MILP, CP-SAT and LNS against list scheduling, the best single
device, and the paper's MILP as published.

    python benchmarks/bench_moirai.py [--time-limit 300] [--congestion port] [--data ../shared/data/moirai]

For every ``.xls`` sheet, one row per method: makespan (the cost model's, of the method's own
schedule), proven bound, gap, seconds, and whether the schedule passes
:func:`~placement_dsl.schedule.check_schedule`:

* ``milp`` — the ``schedule`` formulation (eq. 4-8, each pair's order a disjunction written as big-M rows
  from the data), HiGHS, warm-started with list scheduling;
* ``cpsat`` — :func:`~placement_dsl.solve.solve` with ``solver="cpsat"``, hinted with list scheduling;
* ``lns`` — the ``schedule-lns`` heuristic (CP-SAT windows);
* ``list``, ``cpop``, ``one device`` — HEFT with memory-aware device choice, Topcuoglu's CPOP, and
  the best single device;
* ``schedule-ls`` — the critical-chain local search from the better of list and CPOP;
* ``closed-form bound`` — :func:`~placement_dsl.bounds.makespan.makespan_bounds` (critical path,
  path with transfers, work over devices, segments), the bound of the heuristics' rows;
* ``paper milp`` — eq. (4)-(8) exactly as printed (direct and indirect successors in 4a, one
  big-M pair per device in 6 and 8, ``M^s = M^l = M^r = 1e5`` as in MOIRAI's released code),
  solved cold by HiGHS. Its answer is checked like every other: on millisecond data the
  constant big-M lets the solver's tolerances (``1e5 * 1e-6 = 0.1``) hide overlaps.

The paper's anchor: example-1's optimum is 30. A second table reports operator fusion (MOIRAI
Alg. 1) on the zoo's typed graphs (the sheets carry no operator types).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pyomo.environ as pyo
from common import SHARED_DATA, fmt, markdown_head, markdown_row, require

from placement_dsl import zoo
from placement_dsl.bounds.makespan import makespan_bounds
from placement_dsl.coarsen import coarsen
from placement_dsl.constraints import Congestion, Memory
from placement_dsl.cpsat import available
from placement_dsl.errors import InfeasibleError
from placement_dsl.heuristics import run
from placement_dsl.io import moirai
from placement_dsl.objectives import Makespan
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.result import relative_gap
from placement_dsl.schedule import Schedule, check_schedule, transfer_tasks
from placement_dsl.solve import solve
from placement_dsl.solvers import SolveOptions, solve_model

PAPER_OPTIMUM = {"example-1": 30.0}
PAPER_M = 1e5  # M^s = M^l = M^r in MOIRAI's released code


def row(sheet: str, method: str, makespan, bound, seconds: float, valid, note: str = "") -> None:
    markdown_row([sheet, method, fmt(makespan, ".6g"), fmt(bound, ".6g"), fmt(relative_gap(makespan, bound), ".2%"),
                  fmt(seconds, ".1f"), valid, note])


# ---------------------------------------------------------------------------- the paper's MILP
def _closure(graph) -> list[tuple[int, int]]:
    reach = np.zeros((graph.n, graph.n), dtype=bool)
    for u in graph.topo[::-1].tolist():
        for v in graph.successors(u).tolist():
            reach[u, v] = True
            reach[u] |= reach[v]
    return [(int(i), int(j)) for i, j in zip(*np.nonzero(reach))]


def paper_model(problem: Problem) -> tuple[pyo.ConcreteModel, list[int], list[tuple[int, int, int]]]:
    """Eq. (4)-(8) as printed: operators N and flows (zero-work ops with a transfer matrix) of the augmented DAG."""
    g, c = problem.graph, problem.cluster
    K, times = range(c.size), c.times(g)
    ops = [i for i in range(g.n) if g.ops[i].attrs.get("moirai") == "operator"]
    flows = [(q, int(g.predecessors(q)[0]), int(g.successors(q)[0])) for q in range(g.n)
             if g.ops[q].attrs.get("moirai") == "communication"]
    pc = {q: np.asarray(g.ops[q].attrs["transfer_time"], dtype=float) for q, _, _ in flows}
    closure = _closure(g)
    ordered = set(closure)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(ops, K, domain=pyo.Binary)
    m.S = pyo.Var(range(g.n), domain=pyo.NonNegativeReals)
    m.C = pyo.Var(range(g.n), domain=pyo.NonNegativeReals)
    m.z = pyo.Var([q for q, _, _ in flows], domain=pyo.Binary)
    m.u = pyo.Var([(q, a, b) for q, _, _ in flows for a in K for b in K if a != b], domain=pyo.Binary)
    m.cmax = pyo.Var(domain=pyo.NonNegativeReals)
    m.rows = pyo.ConstraintList()
    for i in ops:
        m.rows.add(m.cmax >= m.C[i])                                                    # (4)
        m.rows.add(m.C[i] == m.S[i] + sum(float(times[i, k]) * m.x[i, k] for k in K))  # (4b)
        m.rows.add(sum(m.x[i, k] for k in K) == 1)                                      # (4c)
    for i, j in closure:
        m.rows.add(m.C[i] <= m.S[j])                                                    # (4a)
    for k in K:                                                                         # (5)
        m.rows.add(sum(float(g.param_bytes[i]) * m.x[i, k] for i in ops) <= float(c.memory[k]))
    _paper_overlap(m, ops, ordered, K)
    _paper_flows(m, flows, pc, K)
    _paper_congestion(m, flows, ordered, K)
    m.goal = pyo.Objective(expr=m.cmax)
    return m, ops, flows


def _paper_overlap(m, ops, ordered, K) -> None:
    m.delta = pyo.Var([(i, j) for i in ops for j in ops if i < j and (i, j) not in ordered and (j, i) not in ordered],
                      domain=pyo.Binary)
    for i, j in m.delta.index_set():                                                    # (6)
        for k in K:
            same = PAPER_M * (2 - m.x[i, k] - m.x[j, k])
            m.rows.add(m.S[i] >= m.C[j] - PAPER_M * m.delta[i, j] - same)
            m.rows.add(m.S[j] >= m.C[i] - PAPER_M * (1 - m.delta[i, j]) - same)


def _paper_flows(m, flows, pc, K) -> None:
    for q, i, j in flows:                                                               # (7)
        for k in K:
            m.rows.add(m.z[q] >= m.x[i, k] - m.x[j, k])
            m.rows.add(m.z[q] >= m.x[j, k] - m.x[i, k])
            m.rows.add(m.z[q] <= 2 - m.x[i, k] - m.x[j, k])
        m.rows.add(sum(m.u[q, a, b] for a in K for b in K if a != b) == m.z[q])
        for a in K:
            for b in K:
                if a != b:
                    m.rows.add(m.u[q, a, b] >= m.x[i, a] + m.x[j, b] - 1)
                    m.rows.add(m.u[q, a, b] <= m.x[i, a])
                    m.rows.add(m.u[q, a, b] <= m.x[j, b])
        m.rows.add(m.C[q] == m.S[q] + sum(float(pc[q][a, b]) * m.u[q, a, b] for a in K for b in K if a != b))


def _paper_congestion(m, flows, ordered, K) -> None:
    pairs = [(f, h) for f in flows for h in flows if f[0] < h[0] and (f[0], h[0]) not in ordered
             and (h[0], f[0]) not in ordered]
    m.delta_q = pyo.Var([(f[0], h[0]) for f, h in pairs], domain=pyo.Binary)
    for (q, a, b), (r, c_, d) in pairs:                                                 # (8)
        both = PAPER_M * (2 - m.z[q] - m.z[r])
        for k in K:
            for sign in (1, -1):  # both leave k, then both enter k
                side = PAPER_M * (sign * (m.x[a, k] + m.x[c_, k] - m.x[b, k] - m.x[d, k]) - 2)
                m.rows.add(m.S[q] >= m.C[r] - PAPER_M * m.delta_q[q, r] - both + side)
                m.rows.add(m.S[r] >= m.C[q] - PAPER_M * (1 - m.delta_q[q, r]) - both + side)


def paper_milp(problem: Problem, time_limit: float) -> tuple[float | None, float | None, float, str]:
    """Solve the paper's MILP cold; the makespan its schedule really has, its bound, seconds, and the check."""
    t0 = time.perf_counter()
    m, ops, flows = paper_model(problem)
    out = solve_model(m, "highs", SolveOptions(time_limit=max(time_limit - (time.perf_counter() - t0), 1.0)))
    seconds = time.perf_counter() - t0
    if not out.has_solution:
        return None, out.bound, seconds, out.status.value
    g, c = problem.graph, problem.cluster
    assign = np.zeros(g.n, dtype=np.int64)
    for i in ops:
        assign[i] = max(range(c.size), key=lambda k: m.x[i, k].value)
    for q, i, _ in flows:
        assign[q] = assign[i]
    start = np.array([m.S[v].value for v in range(g.n)])
    for q, i, _ in flows:
        start[q] = m.C[i].value  # the flow node's own instant: when its producer completes
    placement = Placement(g, c, assign)
    flow = {q for q, _, _ in flows}  # a flow's transfer starts at S_q; the sheets' plain edges move nothing, at C_u
    moves = {(u, d): float(m.S[u].value if u in flow else m.C[u].value)
             for u, d in zip(*(x.tolist() for x in transfer_tasks(placement)[:2]))}
    makespan, bad = check_schedule(placement, Schedule(np.maximum(start, 0.0), moves), "port")
    verdict = "passes" if not bad else (f"fails: {len(bad)} violations, e.g. {bad[0]}; its placement list-scheduled: "
                                        f"{problem.evaluate(placement).objective:.6g}")
    return makespan, out.bound, seconds, f"{out.status.value}, claims {out.objective:.6g}; {verdict}"


# ---------------------------------------------------------------------------- the rows
def sheet_rows(path: Path, limit: float, congestion: str, threads: int) -> None:
    w = moirai.load(path)
    problem = Problem(w.graph, w.cluster, Makespan(), [Memory(), Congestion(congestion)])
    model, name = problem.cost_model(), path.stem
    t0 = time.perf_counter()
    bounds = makespan_bounds(w.graph, w.cluster)
    row(name, "closed-form bound", None, bounds["bound"], time.perf_counter() - t0, "—",
        ", ".join(f"{k} {v:.6g}" for k, v in bounds.items() if k != "bound"))
    bound = bounds["bound"]
    t0 = time.perf_counter()
    listed = run("list", w.graph, w.cluster, model=model)
    row(name, "list", listed.objective, bound, time.perf_counter() - t0, problem.is_valid(listed.placement))
    cpop = run("cpop", w.graph, w.cluster, model=model)
    row(name, "cpop", cpop.objective, bound, cpop.seconds, problem.is_valid(cpop.placement))
    best = min((listed, cpop), key=lambda r: r.objective)
    ls = run("schedule-ls", w.graph, w.cluster, model=model, start=best.placement, time_limit=limit)
    row(name, "schedule-ls", ls.objective, bound, ls.seconds, problem.is_valid(ls.placement),
        f"from {best.method}: {ls.info['moves']} moves, local optimum {ls.info['local_optimum']}")
    try:
        single = run("one-device-best", w.graph, w.cluster, model=model)
        row(name, "one device", single.objective, bound, single.seconds, True, single.info.get("device", ""))
    except InfeasibleError:
        row(name, "one device", None, None, 0.0, "—", "no device holds every op")
    r = solve(problem, "schedule", time_limit=limit, warm_start="list", threads=threads)
    row(name, "milp", r.objective, r.bound, r.seconds, r.evaluation.valid,
        f"{r.status.value}, start accepted: {r.start_accepted}")
    if available():
        r = solve(problem, solver="cpsat", time_limit=limit, threads=threads, warm_start="list")
        row(name, "cpsat", r.objective, r.bound, r.seconds, r.evaluation.valid, r.status.value)
        t0 = time.perf_counter()
        lns = run("schedule-lns", w.graph, w.cluster, model=model, time_limit=limit, threads=threads)
        row(name, "lns", lns.objective, bound, time.perf_counter() - t0, problem.is_valid(lns.placement),
            f"{lns.info['improvements']} improvements in {lns.info['steps']} steps")
    makespan, bound, seconds, note = paper_milp(problem, limit)
    row(name, "paper milp", makespan, bound, seconds, note.endswith("passes"), note)
    if name in PAPER_OPTIMUM:
        row(name, "paper optimum", PAPER_OPTIMUM[name], None, 0.0, "—", "MOIRAI's MILP")


def fusion_rows() -> None:
    for name in zoo.names():
        if name.endswith("-train") or name.startswith("regal"):
            continue
        report = coarsen(zoo.get(name).graph).report()
        markdown_row([name, report["ops"], report["coarse_ops"], fmt(report["reduction"], ".1%"),
                      ", ".join(f"{k} x{v}" for k, v in report["fused"].items()) or "—"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=SHARED_DATA / "moirai")
    ap.add_argument("--time-limit", type=float, default=300.0, help="seconds per method and sheet")
    ap.add_argument("--congestion", default="port", choices=["port", "channel", "none"])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    sheets = sorted(require(args.data).glob("*.xls"), key=lambda p: p.stat().st_size)
    markdown_head(["sheet", "method", "makespan", "bound", "gap", "s", "valid", "note"])
    for path in sheets:
        sheet_rows(path, args.time_limit, args.congestion, args.threads)
    print()
    markdown_head(["zoo graph", "ops", "fused ops", "reduction", "chains fused"])
    fusion_rows()


if __name__ == "__main__":
    main()
