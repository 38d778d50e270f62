"""The command line's own process ends when its command is done, without the interpreter's teardown."""
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_the_command_line_s_process_skips_the_interpreter_s_teardown_and_keeps_its_output_and_status():
    # a large model's teardown ran 12 s past a 60 s limit on a loaded machine; atexit stands in for it here
    done = _run("""
        import atexit, sys
        atexit.register(lambda: print("teardown ran"))
        from placement_dsl.cli import main
        sys.argv = ["placement-dsl", "zoo"]
        sys.exit(main())
    """)
    assert done.returncode == 0, done.stderr
    assert "transformer-small" in done.stdout and "teardown ran" not in done.stdout


def test_a_child_process_still_running_is_stopped_when_the_command_line_ends():
    done = _run("""
        import multiprocessing, sys, time
        from placement_dsl.cli import main
        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(600,), daemon=True)
        child.start()
        print(child.pid, flush=True)
        sys.argv = ["placement-dsl", "zoo"]
        sys.exit(main())
    """)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[0])
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_a_call_with_its_own_arguments_returns_its_status_to_the_caller():
    done = _run("""
        from placement_dsl.cli import main
        code = main(["zoo"])
        print("returned", code)
    """)
    assert done.returncode == 0 and "returned 0" in done.stdout


def test_a_semaphore_still_held_is_no_leak_when_the_command_line_ends():
    # a spawned pool's queues hold semaphores; ending without teardown left them to the resource tracker's warning
    done = _run("""
        import multiprocessing, sys
        from placement_dsl.cli import main
        lock = multiprocessing.get_context("spawn").Lock()
        sys.argv = ["placement-dsl", "zoo"]
        sys.exit(main())
    """)
    assert done.returncode == 0 and "transformer-small" in done.stdout
    assert "leaked semaphore" not in done.stderr, done.stderr


def holding_pyomo(seconds: float) -> None:
    """A child's work that loads Pyomo (whose import makes a lock) and outlasts its deadline."""
    import time

    import pyomo.environ  # noqa: F401

    time.sleep(seconds)


def test_a_spawned_child_stopped_at_its_deadline_or_when_done_leaves_no_leaked_semaphore():
    # the spawned pool's worker registered Pyomo's lock with the resource tracker it shares with the parent; stopped
    # by its pool (at a deadline, or while ending) it never unregistered it: "leaked semaphore objects" at exit
    done = _run("""
        import time
        from placement_dsl import testing
        from placement_dsl.cpsat import available, isolated
        from placement_dsl.deadline import BudgetSpent
        from placement_dsl.solve import solve
        try:
            isolated(__import__("tests.cli.test_process_exit", fromlist=["x"]).holding_pyomo, 120,
                     until=time.monotonic() + 1.0)
        except BudgetSpent:
            print("stopped")
        if available():
            problem, _ = testing.makespan_fork()
            print(solve(problem, solver="cpsat", time_limit=10, warm_start="list").status)
    """)
    assert done.returncode == 0 and "stopped" in done.stdout, done.stderr
    assert "leaked" not in done.stderr, done.stderr
