"""Mutation scores of the core modules against the tests that own them (mutmut 3).

For each module: copy the working tree to a scratch directory (the clone itself is never
mutated, so it is safe to run while others use it), let mutmut mutate that one module, run
the owning tests against every mutant within a per-module time budget, and print

    module  mutants  killed  survived  timeout  no-tests  unchecked  score

where score = killed / (killed + survived + timeout + suspicious): the share of the mutants
that some selected test exercises which a test also catches. "no-tests" mutants sit in code
no selected test runs; "unchecked" ones were still queued when the budget ran out.

Why mutmut: it runs the tests in-process and forks per mutant after one warm-up, so a mutant
costs its tests' time, not a fresh interpreter importing Pyomo, HiGHS and numba (several
seconds each with cosmic-ray's subprocess-per-mutant runner), and it runs only the tests
that reach the mutated function. That shapes the scratch copy: the Pyomo-solver tests are
deselected (``-k``; Pyomo's legacy interfaces write to a stream mutmut's runner has closed),
and for the solver and block modules every solve runs in the test process, since mutmut only
sees which tests reach a function there and the guard solves in a child process by default (the
guard's overrun tests, which need that child, are deselected).

Install (not a test extra: it brings textual, libcst and friends)::

    pip install 'mutmut>=3.8'                      # into the project's virtual environment
    # or, leaving the environment untouched:
    pip install --target /tmp/mutmut-lib 'mutmut>=3.8'
    python benchmarks/bench_mutation.py --mutmut-path /tmp/mutmut-lib
    # (then delete pytest, _pytest, pluggy, packaging, iniconfig and pygments from /tmp/mutmut-lib
    # so that the environment's own pytest is used)

Usage::

    python benchmarks/bench_mutation.py [--modules solvers/base.py ...] [--budget 600] [--ref HEAD]
                                        [--sample 40 --seed 0] [--max-children 2] [--keep] [--show-survivors]
                                        [--recheck 120]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "placement_dsl"
# Pyomo's legacy solver interfaces fail under mutmut's in-process runner (closed output stream); the
# guard's overrun tests need a child process to stop them (their workers sleep 60 s), and a worker that
# dies on purpose would take pytest down with it in the test process
NO_PYOMO_SOLVERS = ["-k", ("not appsi_highs and not scip_direct and not pyomo and not guard_stops and not worse_answer"
                           " and not note_of_a_second_solve")]
# mutmut maps a mutant to the tests that reach it in the test process, but the guard solves in a
# child process: in the scratch copy every solve runs in-process (the guard's layer 1 only)
IN_PROCESS = '''

# added by benchmarks/bench_mutation.py: solve in the test process, where mutmut sees what reaches the solvers
import pytest as _bench_pytest


@_bench_pytest.fixture(autouse=True)
def _bench_solve_in_process(monkeypatch):
    from placement_dsl.solvers import guard

    monkeypatch.setattr(guard, "can_isolate", lambda: False)
'''

# the block templates' owners: structure counts, binding instances solved by every formulation, known optima
BLOCK_TESTS = ["tests/blocks/test_blocks.py", "tests/problem/test_binding.py", "tests/cost/test_evaluate_loads.py",
               "tests/heuristics/test_ideals_linearized.py", "tests/formulations/test_exact.py",
               "tests/blocks/test_gpipe.py", "tests/blocks/test_warm_start.py", "tests/blocks/test_colocation.py",
               "tests/blocks/test_chain.py", "tests/blocks/test_transfer.py", "tests/blocks/test_contiguity.py",
               "tests/blocks/test_base.py", "tests/blocks/test_units.py"]
# module (under placement_dsl/) -> (tests that own it, extra pytest arguments)
MODULES: dict[str, tuple[list[str], list[str]]] = {
    # the cost model's replication, routing, memory-per-schedule and latency paths are checked in their own files
    "evaluate.py": (["tests/cost/test_evaluate.py", "tests/cost/test_evaluate_loads.py",
                     "tests/heuristics/test_ideals_linearized.py", "tests/formulations/test_exact.py",
                     "tests/cost/test_evaluate_verdicts.py",
                     "tests/core/test_replication.py::test_replicated_load_is_share_plus_ring_allreduce",
                     "tests/core/test_replication.py::test_hierarchical_cluster_routes_transfers_by_level",
                     "tests/core/test_replication.py::test_replicas_pair_with_their_server_and_sync_over_the_slowest_ring_link",
                     "tests/cost/test_training_memory.py::test_training_memory_term_reaches_the_cost_model_and_binds",
                     "tests/heuristics/test_latency.py::test_noncontiguous_split_is_cut_into_contiguous_subgraphs",
                     "tests/heuristics/test_latency.py::test_subgraphs_of_one_accelerator_run_in_order_and_count_against_q",
                     "tests/heuristics/test_latency.py::test_invocations_that_wait_on_each_other_are_a_named_violation"], []),
    # one solve for every backend: the start's check and fallback, the status folding, optimality claims the
    # solver's own numbers contradict (stand-in backends), the cutoff's cap on the bound
    "solvers/dispatch.py": (["tests/solvers/test_solvers.py", "tests/solvers/test_highs.py"], NO_PYOMO_SOLVERS),
    # the status tables entry by entry, classify, the options' checks; HiGHS's callbacks through short solves
    "solvers/base.py": (["tests/solvers/test_solvers.py", "tests/solvers/test_highs.py"], NO_PYOMO_SOLVERS),
    "solvers/highs.py": (["tests/solvers/test_solvers.py", "tests/solvers/test_highs.py"], NO_PYOMO_SOLVERS),
    # SCIP's event handler, limits, start and end (its library misbehaves in mutmut's forked runner: use --recheck)
    "solvers/scip.py": (["tests/solvers/test_solvers.py", "tests/solvers/test_scip.py"],
                        ["-k", "scip and not scip_direct"]),
    # stand-ins for the solver and its results, and the Pyomo-interface tests (Pyomo's plugins fail in
    # mutmut's forked runner: use --recheck)
    "solvers/pyomo_generic.py": (["tests/solvers/test_pyomo_generic.py", "tests/solvers/test_solvers.py"],
                                 ["-k", "pyomo or appsi_highs or scip_direct or options"]),
    # Lemma 3.3 and its replicated form (hand-computed values; the brute-force property of
    # test_certify_replicated.py is left out: it runs the DP per example)
    "bounds/simple.py": (["tests/bounds/test_bounds.py",
                          "tests/certify/test_certify_replicated.py::test_replicated_simple_bound_on_the_replicated_chain",
                          "tests/bounds/test_simple.py"], []),
    "bounds/pigeonhole.py": (["tests/bounds/test_pigeonhole.py", "tests/bounds/test_pigeonhole_units.py"], []),
    # the packing bound: its bin search and the bound against brute force (the packing case of the
    # structured draws shared with the pigeonhole bound), hand-computed kills
    "bounds/packing.py": (["tests/bounds/test_packing.py",
                           "tests/bounds/test_pigeonhole.py::test_never_above_the_brute_force_optimum[packing]",
                           "tests/bounds/test_packing_search.py"], []),
    # the stage-cut bound against brute force and hand-made cases; certify's MTPP runs (a chain MIP per
    # seed, about 20 s each, the only owners of the problem-level entry) are left to the kills file
    "bounds/local.py": (["tests/bounds/test_stage_cut.py", "tests/bounds/test_local.py"],
                        ["-k", "not certify_stage_cut_and_chain"]),
    # the ancestor/descendant bound and its position windows against the DAG-ordered placements by brute force
    "bounds/combinatorial.py": (["tests/bounds/test_bounds.py", "tests/bounds/test_combinatorial.py"], []),
    # MOIRAI's makespan bounds on hand-made graphs and a shared workload (the coarse LNS run, 11 s, left out)
    "bounds/makespan.py": (["tests/zoo/test_moirai_scale.py", "tests/bounds/test_makespan.py"],
                           ["-k", "not coarse_lns"]),
    # the latency critical path: hand-made cases, pins, brute force and certify's latency levels
    "bounds/latency.py": (["tests/certify/test_certify_latency.py", "tests/bounds/test_latency.py"], []),
    # the DP over ideals (Tarnawski et al.): its Python driver; the numba kernels are decorated
    # functions, which mutmut leaves alone (docs/mutation.md)
    "heuristics/ideals.py": (["tests/heuristics/test_ideals.py", "tests/heuristics/test_ideals_memory.py",
                              "tests/heuristics/test_ideal_feasible.py"],
                             ["-k", "not table1"]),
    # the templates' shared machinery: Context (model units), links, build order, warm values
    "blocks/base.py": (BLOCK_TESTS, NO_PYOMO_SOLVERS),
    "blocks/assignment.py": (BLOCK_TESTS, NO_PYOMO_SOLVERS),
    "blocks/transfer.py": (BLOCK_TESTS, NO_PYOMO_SOLVERS),
    "blocks/load.py": (BLOCK_TESTS, NO_PYOMO_SOLVERS),
    "blocks/objective.py": (BLOCK_TESTS, NO_PYOMO_SOLVERS),
    # contiguity (Tarnawski eq. 13) and DAG order: the binding instances where each changes the optimum
    "blocks/order.py": (BLOCK_TESTS, NO_PYOMO_SOLVERS),
    "blocks/chain.py": (["tests/formulations/test_chain.py", "tests/cost/test_evaluate_loads.py",
                         "tests/heuristics/test_ideals_linearized.py", "tests/formulations/test_exact.py",
                         "tests/blocks/test_gpipe.py", "tests/blocks/test_warm_start.py",
                         "tests/blocks/test_colocation.py", "tests/blocks/test_chain.py",
                         "tests/blocks/test_transfer.py", "tests/blocks/test_contiguity.py",
                         "tests/blocks/test_base.py", "tests/blocks/test_units.py"],
                        ["-k", "not bert24"]),
    # Archer's superblock relaxations and Tarnawski's host superblocks: their bounds against brute force,
    # and each relaxation solved against its own definition enumerated (where a dropped row shows)
    "blocks/superblock.py": (["tests/formulations/test_relaxations.py",
                              "tests/blocks/test_superblock_templates.py"], NO_PYOMO_SOLVERS),
    # the cluster-level templates: routed transfers (App. C.3), replicated stages (App. C.2), memory per schedule
    "blocks/routes.py": (["tests/core/test_replication.py", "tests/core/test_cluster.py",
                          "tests/blocks/test_routes.py"],
                         NO_PYOMO_SOLVERS),
    "blocks/replication.py": (["tests/core/test_replication.py", "tests/certify/test_certify_replicated.py",
                               "tests/blocks/test_replication.py"], NO_PYOMO_SOLVERS),
    # (certify's replicated levels run against the clock, which mutmut's tracing slows past its limit)
    "blocks/training.py": (["tests/cost/test_training_memory.py", "tests/blocks/test_training.py"],
                           ["-k", f"{NO_PYOMO_SOLVERS[1]} and not replication_widens"]),
    # Tarnawski's latency IP (§4, Figs. 3-4): its optima against brute force for one, two and any number of
    # subgraphs per accelerator, every valid placement as an exact warm start (HiGHS only: SCIP's library
    # misbehaves in mutmut's forked runner)
    "blocks/latency.py": (["tests/formulations/test_latency_ip.py"], ["-k", "not scip"]),
    # the latency IP's cuts (longest paths, run flows, device order): valid at every start, exact with them,
    # and certify's latency levels
    "blocks/latency_cuts.py": (["tests/formulations/test_latency_ip.py",
                                "tests/certify/test_certify_latency.py"], ["-k", "not scip"]),
    # MOIRAI's schedule MILP (eq. 4-8): its optima against the exhaustive list schedules, every template's values
    # against its rows (HiGHS only, as above; CP-SAT and the LNS do not build these templates)
    "blocks/schedule.py": (["tests/formulations/test_schedule_milp.py"], ["-k", "not scip and not cpsat and not lns"]),
    # the data the latency and schedule templates share: bounds, levels, warm times, tasks and pairs
    "blocks/latency_data.py": (["tests/formulations/test_latency_ip.py",
                                "tests/certify/test_certify_latency.py"], ["-k", "not scip"]),
    "blocks/schedule_data.py": (["tests/formulations/test_schedule_milp.py"],
                                ["-k", "not scip and not cpsat and not lns"]),
    "blocks/schedule_warm.py": (["tests/formulations/test_schedule_milp.py"],
                                ["-k", "not scip and not cpsat and not lns"]),
}
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped", 36: "timeout",
          -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout", None: "not checked"}


def working_tree_files() -> list[Path]:
    """Tracked and untracked (not ignored) files of the clone, as in its working tree."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                         capture_output=True).stdout.decode()
    return [Path(p) for p in out.split("\0") if p and (ROOT / p).is_file()]


def scratch_copy(dest: Path, ref: str | None) -> None:
    """The working tree (``ref`` None) or a commit's tree, copied to ``dest``."""
    if ref is not None:
        archive = subprocess.run(["git", "archive", "--format=tar", ref], cwd=ROOT, check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
        return
    for rel in working_tree_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)


def write_config(dest: Path, modules: list[str], tests: list[str], extra: list[str],
                 timeout_multiplier: float) -> None:
    """mutmut's configuration for modules that share their owning tests, in the scratch copy's setup.cfg;
    ``timeout_multiplier``: a mutant's CPU limit is twice that many times its tests' own time (mutmut's 15
    lets a mutant that loops forever, such as ``t -= 1`` in a walk along a path, hold a child ~8 minutes)."""
    pyproject = dest / "pyproject.toml"
    if pyproject.exists() and "[tool.mutmut]" in pyproject.read_text():
        raise SystemExit("pyproject.toml has a [tool.mutmut] section, which would override this benchmark's setup")

    def lines(values: list[str]) -> str:
        return "".join(f"\n    {v}" for v in values)

    tests = [t for t in tests if (dest / t.split("::")[0]).exists()]  # --ref: a commit before a test file existed
    if any(module.startswith(("solvers/", "blocks/")) for module in modules):
        with open(dest / "tests" / "conftest.py", "a") as fh:
            fh.write(IN_PROCESS)
    (dest / "setup.cfg").write_text(
        "[mutmut]\n"
        f"source_paths = {PACKAGE}\n"
        f"only_mutate ={lines([f'{PACKAGE}/{module}' for module in modules])}\n"
        f"pytest_add_cli_args_test_selection ={lines(tests)}\n"
        f"pytest_add_cli_args ={lines(['-p', 'no:cacheprovider', *extra])}\n"
        f"timeout_multiplier = {timeout_multiplier}\n"
        "use_git_change_detection = false\n")


def run_mutmut(dest: Path, budget: float, max_children: int, env: dict[str, str], log: Path,
               names: list[str] = ()) -> tuple[float, bool]:
    """Run ``mutmut run`` (on ``names`` only, if given) in ``dest`` for at most ``budget`` seconds; (seconds, finished)."""
    t0 = time.monotonic()
    with open(log, "a") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children), *names],
                                cwd=dest, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=budget)
            return time.monotonic() - t0, True
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)  # mutmut stops its workers and keeps the results so far
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return time.monotonic() - t0, False


def results(dest: Path, module: str) -> dict[str, str]:
    meta = dest / "mutants" / PACKAGE / f"{module}.meta"
    if not meta.exists():
        return {}
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    return {name: STATUS.get(code, "suspicious") for name, code in codes.items()}


def show(dest: Path, env: dict[str, str], name: str) -> str:
    done = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=dest, env=env, capture_output=True,
                          text=True, check=False)
    return "\n".join(line for line in done.stdout.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---"))


def recheck(dest: Path, env: dict[str, str], names: list[str], tests: list[str], extra: list[str],
            limit: float) -> dict[str, str]:
    """Each mutant in a fresh pytest process with a wall limit, the mutant switched on by name through
    mutmut's trampoline (``MUTANT_UNDER_TEST``): for owners that do not survive mutmut's forked runner
    (SCIP's library after a fork, Pyomo's solver plugins) or mutants that hang it."""
    out = {}
    path = os.pathsep.join(filter(None, [str(dest / "mutants"), env.get("PYTHONPATH", "")]))
    for name in names:
        run_env = dict(env, MUTANT_UNDER_TEST=name, PYTHONPATH=path)
        try:
            done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests, *extra],
                                  cwd=dest / "mutants", env=run_env, capture_output=True, timeout=limit, check=False)
            out[name] = {0: "survived", 1: "killed"}.get(done.returncode, "suspicious")
        except subprocess.TimeoutExpired:
            out[name] = "timeout"
        print(f"  rechecked {name}: {out[name]}", file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", nargs="+", default=list(MODULES), choices=list(MODULES))
    ap.add_argument("--budget", type=float, default=600.0, help="seconds per mutmut run (modules sharing their tests share one), mutant generation included")
    ap.add_argument("--max-children", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    ap.add_argument("--ref", help="mutate this commit's tree (e.g. HEAD) instead of the working tree")
    ap.add_argument("--mutmut-path", help="a directory holding mutmut (pip install --target), put on PYTHONPATH")
    ap.add_argument("--sample", type=int, help="check a random sample of this many mutants per run (the rest "
                    "count as unchecked) instead of going through them in file order until the budget ends")
    ap.add_argument("--seed", type=int, default=0, help="random seed of --sample")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copies (their mutants/ and logs)")
    ap.add_argument("--show-survivors", action="store_true", help="print the diff of every surviving mutant")
    ap.add_argument("--timeout-multiplier", type=float, default=15.0, metavar="F",
                    help="a mutant's CPU limit is 2 F times its tests' time (mutmut's default 15; 3 keeps a mutant "
                    "that loops forever to a minute or so)")
    ap.add_argument("--recheck", type=float, metavar="SECONDS",
                    help="rerun every judged mutant mutmut did not kill in a fresh pytest process, this many "
                    "seconds at most each, and report those verdicts (see recheck())")
    args = ap.parse_args()

    env = dict(os.environ)
    env.pop("HYPOTHESIS_PROFILE", None)  # the derandomized ci profile: a mutant's verdict must not depend on luck
    if args.mutmut_path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [args.mutmut_path, env.get("PYTHONPATH", "")]))
    if subprocess.run([sys.executable, "-c", "import mutmut"], env=env, capture_output=True, check=False).returncode:
        raise SystemExit("mutmut is not importable; install it as this script's docstring says")

    print(f"{'module':<24}{'mutants':>8}{'killed':>8}{'survived':>9}{'timeout':>8}{'no-tests':>9}"
          f"{'unchecked':>10}{'score':>8}{'seconds':>9}")
    runs: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}  # modules with the same owners share a run
    for module in args.modules:
        tests, extra = MODULES[module]
        runs.setdefault((tuple(tests), tuple(extra)), []).append(module)
    for (tests, extra), modules in runs.items():
        dest = Path(tempfile.mkdtemp(prefix=f"bench_mutation_{modules[0].replace('/', '_')}_"))
        try:
            scratch_copy(dest, args.ref)
            write_config(dest, modules, list(tests), list(extra), args.timeout_multiplier)
            names: list[str] = []
            if args.sample:  # generate the mutants and the test map (a probe name matches none), then draw
                seconds, _ = run_mutmut(dest, args.budget, args.max_children, env, dest / "mutmut.log",
                                        ["bench_mutation_probe_matches_no_mutant"])
                every = sorted(name for module in modules for name in results(dest, module))
                names = random.Random(args.seed).sample(every, min(args.sample, len(every)))
                print(f"  sampled {len(names)} of {len(every)} mutants of {', '.join(modules)} (seed {args.seed})",
                      flush=True)
            more, finished = run_mutmut(dest, args.budget - (seconds if args.sample else 0.0), args.max_children,
                                        env, dest / "mutmut.log", names)
            seconds = more + (seconds if args.sample else 0.0)
            for module in modules:
                status = results(dest, module)
                if args.recheck and status:
                    skip = ("killed", "no tests")
                    if any(v not in ("not checked", "no tests") for v in status.values()) or args.sample:
                        skip += ("not checked",)  # else mutmut judged none (its clean run failed): judge them all
                    again = [n for n, v in sorted(status.items()) if v not in skip]
                    t0 = time.monotonic()
                    status.update(recheck(dest, env, again, list(tests), list(extra), args.recheck))
                    seconds += time.monotonic() - t0
                report(module, status, seconds, finished)
                if not status:
                    print(f"  mutmut produced no results; its log: {dest / 'mutmut.log'}", file=sys.stderr)
                    args.keep = True
                if args.show_survivors:
                    for name, s in sorted(status.items()):
                        if s == "survived":
                            diff = show(dest, env, name).splitlines()
                            print(f"  survived {name}\n" + "\n".join(f"    {line}" for line in diff), flush=True)
        finally:
            if args.keep:
                print(f"  scratch copy kept: {dest}", file=sys.stderr)
            else:
                shutil.rmtree(dest, ignore_errors=True)


def report(module: str, status: dict[str, str], seconds: float, finished: bool) -> None:
    """One row of the table (``seconds`` is the whole run's, shared by the modules mutated in it)."""
    count = {s: sum(v == s for v in status.values())
             for s in ("killed", "survived", "timeout", "no tests", "not checked", "suspicious")}
    judged = count["killed"] + count["survived"] + count["timeout"] + count["suspicious"]
    score = f"{count['killed'] / judged:.1%}" if judged else "-"
    print(f"{module:<24}{len(status):>8}{count['killed']:>8}{count['survived']:>9}{count['timeout']:>8}"
          f"{count['no tests']:>9}{count['not checked']:>10}{score:>8}{seconds:>8.0f}"
          + ("" if finished else "  (budget reached)"), flush=True)

if __name__ == "__main__":
    main()
