"""A cold kernel cache never spends a call's time limit compiling (:mod:`placement_dsl.heuristics.kernel_cache`):
the call runs its kernels in Python while a detached process compiles them for the next one."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from placement_dsl.heuristics import jit, kernel_cache
from placement_dsl.heuristics.base import TimeLimitReached

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 5.0


def _env(cache: Path, policy: str | None = "background") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != kernel_cache.ENV}
    env.update(NUMBA_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    if policy:
        env[kernel_cache.ENV] = policy
    return env


COMPILED_PRIORITY_ORDER = ("import numpy as np\nfrom placement_dsl.heuristics import jit, kernel_cache\n"
                           "from placement_dsl.heuristics.kernels import priority_order\n"
                           "jit.compile_all()\nkernel_cache.compile_in_background = lambda: False\n"
                           "args = (-np.arange(4.0), np.array([0, 1, 2, 3, 3]), np.array([1, 2, 3]), "
                           "np.array([0, 1, 1, 1]))\n")
"""A script's start: kernels compiled (numba loaded), no background compile, and arguments for priority_order."""


def _printed(code: str, cache: Path, policy: str | None = "background") -> list[str]:
    """What ``code`` prints, run in a fresh process with numba's cache in ``cache``, word by word."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env=_env(cache, policy), check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.split()


def _solve(cache: Path, method: str) -> tuple[float, subprocess.CompletedProcess]:
    cmd = [sys.executable, "-m", "placement_dsl.cli", "solve", "zoo:bert-large-ops", "--method", method,
           "--stages", "4", "--time-limit", f"{LIMIT:g}", "--json"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(cache), cwd=ROOT, timeout=300, check=False)
    return time.monotonic() - t0, proc


def _wait_for_background_compile(cache: Path, seconds: float = 240.0) -> None:
    """Until the background compile into ``cache`` has started and ended (it holds the cache's lock meanwhile)."""
    import fcntl

    end = time.monotonic() + seconds
    path = None
    while time.monotonic() < end:
        found = list(cache.glob(f"*/{kernel_cache.LOCK}"))
        path = found[0] if found else None
        if path is not None:
            fd = os.open(path, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if not list(cache.glob(f"*/{kernel_cache.WANTED}")):  # taken, and the list it compiled is gone
                    return
            except OSError:
                pass
            finally:
                os.close(fd)
        time.sleep(0.5)
    pytest.fail(f"the background compile into {cache} did not end within {seconds:.0f} s")


def test_a_cold_cache_runs_python_kernels_within_the_limit_and_warms_the_cache_for_the_next_run(tmp_path):
    cache = tmp_path / "numba"
    wall, proc = _solve(cache, "polish")
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["valid"] and answer["objective"] > 0
    assert wall <= LIMIT + 5.0, f"a cold first run took {wall:.1f} s against a {LIMIT:g} s limit"
    assert "background process compiles them" in proc.stderr
    wanted = [json.loads(s) for s in next(cache.glob(f"*/{kernel_cache.WANTED}")).read_text().splitlines()]
    assert {w["kernel"] for w in wanted} >= {"group_moves"}  # what the run called, with its argument types
    _wait_for_background_compile(cache)
    wall, proc = _solve(cache, "polish")
    assert proc.returncode == 0, proc.stderr
    assert "not compiled yet" not in proc.stderr and "compiling" not in proc.stderr  # the cache is warm
    assert json.loads(proc.stdout)["valid"]
    assert not list(cache.glob(f"*/{kernel_cache.WANTED}"))  # nothing ran in Python: no second background compile


def test_the_cache_is_read_where_numba_writes_it(tmp_path):
    """numba (0.5x and later) keeps a ``NUMBA_CACHE_DIR`` cache in ``<folder>_<sha1 of the folder's path>``, not
    in a mirror of the source's path: a kernel numba has just cached must read as cached."""
    code = ("import numpy as np\nfrom placement_dsl.heuristics import kernel_cache\n"
            "from placement_dsl.heuristics.kernels import priority_order\nfrom placement_dsl.cli.options import _cached\n"
            "before = kernel_cache.cached(priority_order)\n"
            "priority_order(-np.arange(4.0), np.array([0, 1, 2, 3, 3]), np.array([1, 2, 3]), np.array([0, 1, 1, 1]))\n"
            "print(before, kernel_cache.cached(priority_order), _cached(priority_order))")
    assert _printed(code, tmp_path, policy="compile") == ["False", "True", "True"]


def test_a_stale_index_is_cold(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    source = tmp_path / "mod.py"
    source.write_text("def k(x):\n    return x\n")
    namespace: dict[str, object] = {}
    exec(compile(source.read_text(), str(source), "exec"), namespace)  # noqa: S102 - a kernel from a file of ours
    kernel = jit.Kernel(namespace["k"], {"cache": True})
    folder = kernel_cache.folder(source)
    folder.mkdir(parents=True)
    index = folder / f"mod.k-1.py{sys.version_info[0]}{sys.version_info[1]}.nbi"
    index.write_bytes(b"header" + kernel_cache.source_digest(source) + b"overloads")
    assert kernel_cache.cached(kernel)
    source.write_text("def k(x):\n    return x + 1\n")
    os.utime(source, (time.time() + 5, time.time() + 5))
    assert not kernel_cache.cached(kernel)
    assert kernel_cache.cached(jit.Kernel(namespace["k"], {}))  # not cached by numba: nothing to wait for


def test_the_policy_is_background_unless_asked(monkeypatch):
    """The suite sets the policy to compile (tests/conftest.py); a user's process compiles in the background."""
    assert kernel_cache.policy() == "compile"
    monkeypatch.delenv(kernel_cache.ENV)
    assert kernel_cache.policy() == "background"
    monkeypatch.setenv(kernel_cache.ENV, "Compile ")
    assert kernel_cache.policy() == "compile"


def _children() -> set[int]:
    """This process's child processes, zombies included (Linux: /proc)."""
    me, out = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me:
                out.add(int(entry))
    return out


def test_a_background_compile_leaves_no_child_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    before = _children()
    assert kernel_cache.compile_in_background()
    assert _children() <= before  # the child in between was reaped, and the worker is not ours (a pytest worker
    # may have children of other tests, so the test compares the sets rather than asking for none)
    for _ in range(100):  # the worker takes the lock; a second one is not started meanwhile
        if kernel_cache.compiling():
            break
        time.sleep(0.1)
    assert kernel_cache.compiling() and not kernel_cache.compile_in_background()


def test_argument_types_are_described_for_numba_and_others_refused():
    a = np.zeros((2, 3))
    assert kernel_cache.arg_type(a) == ["array", "<f8", 2, "C", True]
    assert kernel_cache.arg_type(a[:, 1])[3] == "A"
    assert kernel_cache.arg_type((1, 2.0, True, None)) == ["tuple", [["scalar", "<i8"], ["scalar", "<f8"], ["bool"],
                                                                     ["none"]]]
    assert kernel_cache.arg_type(np.int32(3)) == ["scalar", "<i4"]
    with pytest.raises(TypeError):
        kernel_cache.arg_type([1, 2])


def test_a_kernel_run_in_python_for_a_cold_cache_is_stopped_at_the_call_s_deadline(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))

    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:  # ten seconds, whatever the call's deadline
            pass
        return seconds

    kernel = jit.Kernel(spin, {"cache": True})
    t0 = time.monotonic()
    with kernel_cache.limited("spin", 0.2), pytest.raises(TimeLimitReached, match="ran in Python"):
        monkeypatch.setattr(kernel_cache.Limited, "cold", True)
        kernel(10.0)
    assert time.monotonic() - t0 < 0.2 + jit.PYTHON_GRACE + 1.5
    assert kernel_cache.Limited.at == np.inf and not kernel_cache.Limited.methods


def test_compiled_kernels_meeting_uncached_argument_types_run_them_in_python_under_a_limit(tmp_path):
    """Once numba is loaded (the first kernel was cached), a kernel whose argument types numba's cache lacks runs in
    Python under a time limit, listed for the background compile, instead of compiling in the call."""
    code = (COMPILED_PRIORITY_ORDER + "with kernel_cache.limited('slicegraph', 30.0):\n    order = priority_order(*args)\n"
            "print(order.tolist(), len(priority_order.signatures),\n"
            "      kernel_cache.wanted_file().read_text().count('priority_order'))\n")
    assert _printed(code, tmp_path) == ["[0,", "1,", "2,", "3]", "0", "1"]


def test_a_kernel_whose_caller_leaves_a_default_out_runs_in_python_with_the_default(tmp_path):
    """numba's dispatcher passes an argument left to its default as its ``OmittedArg``: handed to the kernel run in
    Python it reached the kernel's code (gpipe-split's tables, whose deadline is left out, ended the command with a
    TypeError, exit 70, on a cold cache)."""
    code = ("from placement_dsl import testing\nfrom placement_dsl.cluster import Cluster\n"
            "from placement_dsl.heuristics import jit, kernel_cache\nfrom placement_dsl.heuristics.base import run\n"
            "jit.compile_all()\nkernel_cache.compile_in_background = lambda: False\n"
            "r = run('gpipe-split', testing.chain_graph([3, 1, 4, 1, 5, 9, 2, 6]), Cluster.stages(2), time_limit=30.0)\n"
            "print(r.objective, r.valid)\n")
    assert _printed(code, tmp_path) == ["18.0", "True"]


def test_the_deadline_ringing_while_a_kernel_is_dispatched_stops_the_call_instead_of_compiling(tmp_path):
    """The deadline's timer can ring while numba dispatches a callee of a kernel run in Python (the dispatch reads
    the argument types in Python): that is the call's end, not a reason to compile in it. Caught as "numba cannot
    type them", it compiled in the call: ``pipeline`` on a 2,044-op graph with a 5 s limit took 25 s."""
    code = (COMPILED_PRIORITY_ORDER + "from placement_dsl.heuristics.base import TimeLimitReached\n"
            "import sys\ntypeof, rang = priority_order.dispatcher.typeof_pyval, []\n"
            "def ring(value):  # once, in the package's hook (not numba's own typing), as a timer rings\n"
            "    frame, ours = sys._getframe(1), False\n"
            "    while frame is not None:\n"
            "        ours, frame = ours or frame.f_code.co_name == '_compile_or_python', frame.f_back\n"
            "    if ours and not rang:\n        rang.append(1)\n        raise TimeLimitReached('the time limit passed')\n"
            "    return typeof(value)\n"
            "priority_order.dispatcher.typeof_pyval = ring\n"
            "try:\n    with kernel_cache.limited('slicegraph', 30.0):\n        priority_order(*args)\n"
            "    print('answered')\nexcept TimeLimitReached:\n    print('stopped')\n"
            "print(len(priority_order.signatures))\n")
    assert _printed(code, tmp_path) == ["stopped", "0"]



def test_the_work_balanced_slicing_under_a_limit_runs_python_kernels_on_a_cold_cache(tmp_path):
    """certify builds the work-balanced slicing in its own process before its levels: on a cold cache it compiled
    its kernels there (6 s of a cold 60 s ``bounds`` on gpt3-2000); under the call's limit they run in Python (O(n +
    m) loops) and numba is not even loaded."""
    code = ("from placement_dsl import testing\nfrom placement_dsl.cluster import Cluster\n"
            "from placement_dsl.evaluate import CostModel\nfrom placement_dsl.heuristics import jit, kernel_cache\n"
            "from placement_dsl.heuristics.fallback import spread_split\n"
            "kernel_cache.compile_in_background = lambda: False\n"
            "g = testing.chain_graph([3, 1, 4, 1, 5, 9, 2, 6])\n"
            "p = spread_split(g, Cluster.accelerators(2), CostModel(), 30.0)\n"
            "import sys\nprint(p.source, sorted(set(p.assign.tolist())), jit.is_compiled(), 'numba' in sys.modules)\n")
    assert _printed(code, tmp_path) == ["balanced", "[0,", "1]", "False", "False"]


def test_the_fallback_split_under_a_deadline_runs_python_kernels_on_a_cold_cache(tmp_path):
    """A solve builds its fallback split before its start (held_split), under a deadline but outside any method's
    run: on a cold cache its work-balanced slicing compiled every kernel there, 11-13 s before a 30 s throughput solve
    of GPT-3's 217 ops at load 7, and the start's race then had too little left to finish pipedream's path DP (the
    answer: greedy's 12.744, where the path DP finds 7.611). Its deadline is a time limit: numba is not loaded."""
    code = ("from placement_dsl import testing\nfrom placement_dsl.cluster import Cluster\n"
            "from placement_dsl.deadline import Deadline\nfrom placement_dsl.evaluate import CostModel\n"
            "from placement_dsl.heuristics import jit, kernel_cache\n"
            "from placement_dsl.heuristics.fallback import fallback\n"
            "kernel_cache.compile_in_background = lambda: False\n"
            "g = testing.chain_graph([3, 1, 4, 1, 5, 9, 2, 6])\n"
            "r = fallback('fallback', g, Cluster.accelerators(2), CostModel(), 'held', deadline=Deadline(30.0))\n"
            "import sys\nprint(r.info['fallback'], jit.is_compiled(), 'numba' in sys.modules)\n")
    assert _printed(code, tmp_path) == ["balanced", "False", "False"]


def test_the_work_balanced_slicing_of_a_short_call_runs_python_kernels_whatever_the_cache(tmp_path):
    """A short certify builds the slicing in its own process without loading numba (1.2 s at load 7 on 20,000 ops,
    where the loops take 0.2 s): here even a policy that compiles in the call loads nothing."""
    code = ("from placement_dsl import testing\nfrom placement_dsl.cluster import Cluster\n"
            "from placement_dsl.evaluate import CostModel\nfrom placement_dsl.heuristics import jit\n"
            "from placement_dsl.heuristics.fallback import spread_split\n"
            "g = testing.chain_graph([3, 1, 4, 1, 5, 9, 2, 6])\n"
            "p = spread_split(g, Cluster.accelerators(2), CostModel(), 30.0, python=True)\n"
            "import sys\nprint(p.source, jit.is_compiled(), 'numba' in sys.modules)\n")
    assert _printed(code, tmp_path, policy="compile") == ["balanced", "False", "False"]



SPIN = '''from placement_dsl.heuristics import jit


@jit.njit(cache=True)
def spin(n):
    total = 0
    for i in range(n):
        total += i % 7
    return total


jit.restartable(spin)
'''


def test_a_restartable_kernel_in_python_gives_way_to_its_compiled_code_once_the_cache_has_it(tmp_path):
    """A call with a limit that found the cache cold ran its kernels in Python to its end, even after the background
    compile had cached them in seconds: one probe of the host slicing in Python outlasted the DP's share on
    cnn-20000 beside a CPU (33 s of a 60 s limit, the greedy fallback, where compiled the DP proves the optimum). A
    kernel marked restartable (it writes none of its arguments) is dropped for its compiled code once it is cached.
    Here the cache is filled by another process while the call runs the kernel in Python."""
    (tmp_path / "spinmod.py").write_text(SPIN)
    env = _env(tmp_path / "cache", "compile")
    env["PYTHONPATH"] += os.pathsep + str(tmp_path)
    n = 1_000_000_000  # a minute or more in Python, a second compiled
    cold = ("import time\nimport spinmod\nfrom placement_dsl.heuristics import jit, kernel_cache\n"
            "kernel_cache.compile_in_background = lambda: False\nt0 = time.monotonic()\n"
            "with kernel_cache.limited('spin', 300.0):\n"
            f"    value = spinmod.spin({n})\n"
            "print(value, jit.is_compiled(), time.monotonic() - t0)\n")
    warm = "import time\ntime.sleep(2.0)\nimport spinmod\nprint(spinmod.spin(10))\n"
    compiling = subprocess.Popen([sys.executable, "-c", warm], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    out = subprocess.run([sys.executable, "-c", cold], capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**env, kernel_cache.ENV: "background"}, check=False)
    assert compiling.communicate(timeout=300)[0].split() == ["24"]
    assert out.returncode == 0, out.stdout + out.stderr
    value, compiled, wall = out.stdout.split()
    assert int(value) == n // 7 * 21 + sum(range(n % 7))
    assert compiled == "True"
    assert float(wall) < 20.0, f"the kernel ran {float(wall):.0f} s: it stayed in Python"
