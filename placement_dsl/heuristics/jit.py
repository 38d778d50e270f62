"""Compiled kernels that are loaded only when they pay: :func:`njit` is ``numba.njit`` deferred.

Importing numba and loading a module's cached kernels costs about a second of CPU per process, far more than
the heuristics spend on a graph of a few dozen ops. So a kernel declared here is a :class:`Kernel`: a plain
Python function until the first call that wants speed. Inside :func:`interpreted` (the command line enters
it for workloads of at most :data:`SMALL_OPS` ops) kernels run as the Python functions they are written as,
and numba is never imported; any other call compiles (or loads from numba's on-disk cache) every kernel
declared so far, and from then on every kernel is numba's dispatcher, the module globals included, so that
compiled code calls compiled code. Both paths run the same code, so they give the same answers
(``tests/heuristics/test_jit.py`` checks the DP's objective and split both ways).

:data:`objmode` is ``numba.objmode`` the same way: a context manager that does nothing in Python.

A call with a time limit (:func:`.kernel_cache.limited`, entered by :func:`.base.run`) never compiles on a cold
cache: where a kernel it is about to compile is not in numba's on-disk cache, its kernels run in Python and a
background process compiles them, with the argument types the call used, for the next process (:func:`cold_start`).
"""
from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from .. import deadline
from ..cluster import Cluster
from ..errors import PlacementError
from ..graph import Graph, Op
from . import kernel_cache
from .base import ColdKernels, TimeLimitReached, run

# Workloads of at most this many ops run their kernels in Python. Measured (the DP on 4 stages, CPU seconds of
# the search with numba's load, Python / compiled): 32 ops 0.2-0.5 / 0.8-0.9; 64 ops 0.6-2.5 / 1.0-1.2 (the
# wider the graph, the more ideals); 128 ops 1.4 / 1.0. SliceGraph pays back later (256 ops: 0.2 / 0.8).
SMALL_OPS = 32
# The DP over ideals runs in Python, whatever the op count, while its lattice is at most PYTHON_WORK ideals x
# device-count states and PYTHON_IDEALS ideals (:func:`by_work`; its pairs grow with the ideals, not the states).
# In Python it runs a level of ideals per numpy step (:mod:`.ideal_rows`), its cost about the square of the ideals.
# Measured (CPU s of the DP, Python / compiled with numba's load, load 8-12 on 2 cores): bert24 30 x 14 0.05 /
# 0.06; ResNet-50 242 x 14 0.16 / -; BERT-L3 inference 1,428 x 8 0.63 / 0.72. Measured again with the level steps
# of :mod:`.ideal_rows` (CPU s of the whole process, Python / compiled, load 5-8): BERT-L3 training 2,774 x 8 0.81 /
# 1.09; GNMT 17,914 x 14 5.5 / 1.25; generated DAGs (test_ideal_count.layered, blocks of parallel chains) 2,502 /
# 3,752 / 4,098 / 6,252 ideals 0.55 / 0.60 / 0.68 / 1.27 against 0.92 / 0.86 / 1.05 / 1.08 on 8 states, the same
# order on 4 and 16, and 2,502 x 32 / 1,252 x 51 states 0.47 / 0.34 against 0.73 / 0.74; random DAGs of 2,605-3,618
# ideals 1.4-3.7 against 2.1-5.8. The lines sit below the crossing (4,000-6,000 ideals), where the ideals are
# counted, not sampled (:func:`.ideal_lattice.lattice_size_ok`).
PYTHON_WORK = 64_000
PYTHON_IDEALS = 4_000
# ... and its ideals times the contracted DAG's nodes at most PYTHON_NODE_IDEALS: enumerating the ideals and
# summing over them in Python take about that many steps (a 1,500-op chain's 1,501 ideals: 2.0 s of CPU in
# Python, 1.5 s of it enumerating; 0.7 s compiled; BERT-L3 inference 128 x 1,428).
PYTHON_NODE_IDEALS = 400_000
# by_work() starts in Python on graphs of at most this many ops (contraction and the lattice's first ideals
# in Python cost milliseconds there).
BY_WORK_OPS = 2_000
# seconds past a call's deadline that a kernel run in Python because numba's cache was cold may still take (a
# method's best-so-far or fallback, built after its deadline, runs kernels too); then it is stopped
PYTHON_GRACE = 2.0
# seconds between looks at numba's cache while a kernel runs in Python because it was cold: the background compile
# of feasible_split (host slicing) took 5-10 s, while one probe of it in Python on cnn-20000 beside a CPU took more
# than 30 s, so a call kept in Python to its end returned the greedy fallback where the compiled DP proves the optimum
WARM_POLL = 1.0

_KERNELS: list[Kernel] = []
_PACKAGE = __name__.split(".")[0]


class _State:
    compiled: bool = False  # numba imported and every kernel declared so far compiled
    interpreted: int = 0  # depth of interpreted() blocks
    tentative: int = 0  # of those, entered by by_work() and left as soon as note_work() finds the work large


_RUNNING = threading.local()  # .inside: a kernel runs in Python on this thread (its callees skip the errstate)


class _ObjMode:
    """``numba.objmode`` in Python: the block simply runs."""

    def __call__(self, **types: str) -> contextlib.nullcontext:
        return contextlib.nullcontext()


_OBJMODE = _ObjMode()
objmode: Any = _OBJMODE


class Kernel:
    """A kernel's Python function and its ``numba.njit`` options; called, it runs compiled or in Python."""

    def __init__(self, fn: Callable[..., Any], options: dict[str, Any]) -> None:
        self.py_func = fn
        self.options = options
        self.dispatcher: Any = None
        self._numba_compile: Callable[..., Any] | None = None  # the dispatcher's own compile (compile_all())
        self._uncached: set[tuple[Any, ...]] = set()  # argument types found neither compiled nor in numba's cache
        self.in_python: Callable[..., Any] = fn  # what runs in Python (:meth:`python`: a numpy version)
        self.restartable = False  # writes none of its arguments: a run in Python may be dropped and run compiled
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__module__ = fn.__module__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args: Any) -> Any:
        if self.dispatcher is not None:
            return self.dispatcher(*args)
        if kernel_cache.Limited.cold and not _State.interpreted and warmed(self):
            return self(*args)
        if _State.interpreted or kernel_cache.Limited.cold:
            return self.run_python(*args)
        if kernel_cache.Limited.methods and cold_start(self):
            return self(*args)
        compile_all()
        return self.dispatcher(*args)

    def run_python(self, *args: Any) -> Any:
        """The kernel run in Python (its callees as they are: Python, or compiled once loaded). Where it runs
        because numba's cache was cold (:func:`cold_start`, :meth:`_compile_or_python`), it is stopped at the
        call's deadline (:func:`_stopped_at`) with :class:`~.base.TimeLimitReached`: Python may be far slower."""
        if getattr(_RUNNING, "inside", False):  # a kernel's callee: the outermost call set the errstate
            return self.in_python(*args)
        cold = bool(kernel_cache.Limited.methods) and not _State.interpreted  # not Python by design (small work)
        if kernel_cache.Limited.cold:  # what a background compile should compile for the next call
            kernel_cache.want(self, args)
        _RUNNING.inside = True
        try:
            with np.errstate(over="ignore"), _stopped_at(kernel_cache.Limited.at if cold else math.inf, self,
                                                         lambda: self.cached_for(args)):
                return self.in_python(*args)  # numba's integers wrap silently (the bitsets' hashes rely on it)
        except _Warmed:  # the background compile cached it meanwhile: kernels are compiled from here on
            _leave_cold()
            self._uncached.clear()  # numba's dispatch looks at its cache again (_compile_or_python)
        finally:
            _RUNNING.inside = False
        return self(*args)

    def _compile_or_python(self, *args: Any, **kws: Any) -> Any:
        """numba's dispatcher meets argument types it has no code for and asks what to call: inside a call with a
        time limit (policy ``background``), where numba's cache has none for them either, the kernel in Python
        (compiled in the background for the next process); else numba's compiled (or loaded) code."""
        if kernel_cache.Limited.methods and kernel_cache.policy() == "background":
            try:
                sig = tuple(self.dispatcher.typeof_pyval(a) for a in args)
            except TimeLimitReached:  # the deadline's timer rang here (a callee of a kernel run in Python): not a
                raise  # reason to compile, which would take the seconds the timer ended
            except Exception:  # noqa: BLE001 - numba cannot type them: its own compile says why
                return self._numba_compile(*args, **kws)
            if sig not in self._uncached:
                if self._in_cache(sig):
                    return self._numba_compile(*args, **kws)
                self._uncached.add(sig)
                kernel_cache.want(self, args)
                kernel_cache.compile_in_background()
            return self._run_given  # numba calls what this returns with the arguments (its compiled entry point)
        return self._numba_compile(*args, **kws)

    def _run_given(self, *args: Any) -> Any:
        """:meth:`run_python` on the arguments numba's dispatcher passes: an argument the caller left to its default
        comes as numba's ``OmittedArg``, which Python code cannot compare (gpipe-split's tables, which leave their
        deadline out, failed on a cold cache); it is given its default."""
        from numba.core.dispatcher import OmittedArg  # loaded: numba's dispatcher is calling

        return self.run_python(*(a.value if isinstance(a, OmittedArg) else a for a in args))

    def cached_for(self, args: tuple[Any, ...]) -> bool:
        """Whether numba's on-disk cache now holds the kernel's code: before numba is loaded, for any argument
        types (:func:`.kernel_cache.cached`); after, for those of ``args``."""
        if self.dispatcher is None:
            return kernel_cache.cached(self)
        return self._in_cache(tuple(self.dispatcher.typeof_pyval(a) for a in args))

    def _in_cache(self, sig: tuple[Any, ...]) -> bool:
        """Whether numba's on-disk cache holds the dispatcher's code for argument types ``sig`` (``True`` when
        unsure)."""
        try:
            d = self.dispatcher
            key = d._cache._index_key(sig, d.targetctx.codegen())
            return key in d._cache._cache_file._load_index()
        except TimeLimitReached:
            raise
        except Exception:  # noqa: BLE001 - numba's internals moved, or no cache: compile as numba would
            return True

    def python(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Decorator: ``fn`` runs in place of the kernel's loops when kernels run in Python (the same result to
        the bit, with numpy's whole-array steps: loops over every ideal cost seconds in the interpreter)."""
        self.in_python = fn
        return fn

    @property
    def signatures(self) -> list[Any]:
        """The compiled signatures (none while the kernel has not been compiled)."""
        return [] if self.dispatcher is None else self.dispatcher.signatures

    def __repr__(self) -> str:
        state = "compiled" if self.dispatcher is not None else "not compiled"
        return f"<kernel {self.__module__}.{self.__qualname__} ({state})>"


def njit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """``numba.njit`` deferred (same options): a :class:`Kernel`, or numba's dispatcher once kernels are compiled."""
    def wrap(f: Callable[..., Any]) -> Any:
        kernel = Kernel(f, options)
        _KERNELS.append(kernel)
        if _State.compiled:
            import numba

            _dispatch(kernel, numba)
            return kernel.dispatcher
        return kernel
    return wrap if fn is None else wrap(fn)


def python_version(kernel: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the function runs in place of ``kernel`` when kernels run in Python (:meth:`Kernel.python`);
    nothing where ``kernel`` is numba's dispatcher already (declared after :func:`compile_all`)."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        return kernel.python(fn) if isinstance(kernel, Kernel) else fn
    return wrap


@contextlib.contextmanager
def _stopped_at(at: float, kernel: Kernel, ready: Callable[[], bool]) -> Iterator[None]:
    """Within the block, :class:`~.base.ColdKernels` (a :class:`~.base.TimeLimitReached`) is raised once
    ``time.monotonic()`` passes ``at`` plus :data:`PYTHON_GRACE` (what a method does past its deadline: its
    fallback's kernels). A timer signal, so that a Python loop reading no clock is stopped too: on the main thread
    only, and only where nothing else uses the timer. For a :attr:`Kernel.restartable` kernel the timer also rings
    every :data:`WARM_POLL` seconds and raises :class:`_Warmed` once ``ready()`` (the background compile has cached
    the kernel)."""
    if not math.isfinite(at) or threading.current_thread() is not threading.main_thread():
        yield
        return
    message = (f"the time limit passed while kernel {kernel.__qualname__} ran in Python (numba's cache was cold; "
               "a background process compiles the kernels for the next run)")
    left = at + PYTHON_GRACE - time.monotonic()
    if left <= 0:
        raise ColdKernels(message)
    if signal.getitimer(signal.ITIMER_REAL)[0] > 0 or signal.getsignal(signal.SIGALRM) not in (
            signal.SIG_DFL, signal.SIG_IGN, None):
        yield  # the timer is someone else's
        return

    poll = kernel.restartable

    def ring(signum: int, frame: Any) -> None:
        remaining = at + PYTHON_GRACE - time.monotonic()
        if remaining <= 0:
            raise ColdKernels(message)
        if poll and ready():
            raise _Warmed
        signal.setitimer(signal.ITIMER_REAL, min(remaining, WARM_POLL))

    signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, min(left, WARM_POLL) if poll else left)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)


class _Warmed(Exception):  # not an error: a kernel run in Python is dropped for its compiled code
    """Raised inside a :attr:`Kernel.restartable` kernel run in Python once :func:`warmed` switched to compiled
    kernels; :meth:`Kernel.run_python` runs it again, compiled."""


class _Poll:
    last: float = -math.inf  # when warmed() last looked at numba's cache (time.monotonic())


def warmed(kernel: Kernel) -> bool:
    """Inside a call whose kernels run in Python because their cache was cold (:func:`cold_start`): whether
    ``kernel`` has since been cached (by the background compile) — then the call's kernels are compiled (loaded)
    from here on, those not cached yet running in Python where numba meets them (:meth:`Kernel._compile_or_python`).
    Looks at the cache at most every :data:`WARM_POLL` seconds (a ``stat`` and a small read)."""
    if _State.compiled or not kernel_cache.Limited.cold:
        return False
    now = time.monotonic()
    if now - _Poll.last < WARM_POLL:
        return False
    _Poll.last = now
    if not kernel_cache.cached(kernel):
        return False
    _leave_cold()
    return True


def _leave_cold() -> None:
    """The call's kernels are compiled (loaded from numba's cache) from here on."""
    kernel_cache.Limited.cold = False
    compile_all()


def restartable(kernel: Any) -> Any:
    """Mark ``kernel`` as writing none of its arguments (it returns what it computes): run in Python because its
    cache was cold, it is dropped and run again compiled as soon as the background compile has cached it
    (:func:`warmed`, looked at by the deadline's timer every :data:`WARM_POLL` seconds), rather than run to its end
    in Python. Returns ``kernel``."""
    if isinstance(kernel, Kernel):
        kernel.restartable = True
    return kernel


def _dispatch(kernel: Kernel, numba: Any) -> None:
    """Make ``kernel``'s numba dispatcher; where no compiled code fits a call's arguments it asks
    :meth:`Kernel._compile_or_python` (numba calls ``_compile_for_args`` then)."""
    kernel.dispatcher = numba.njit(**kernel.options)(kernel.py_func)
    kernel._numba_compile = kernel.dispatcher._compile_for_args
    kernel.dispatcher._compile_for_args = kernel._compile_or_python


def compile_all() -> None:
    """Import numba, make every declared kernel numba's dispatcher, and put the dispatchers (and
    ``numba.objmode``) in place of the kernels in the package's modules, so compiled code finds compiled code."""
    if _State.compiled:
        return
    import numba

    shim = _OBJMODE
    for kernel in _KERNELS:
        if kernel.dispatcher is None:
            _dispatch(kernel, numba)
    _State.compiled = True
    for name, module in list(sys.modules.items()):
        if module is None or not (name == _PACKAGE or name.startswith(_PACKAGE + ".")):
            continue
        space = vars(module)
        for key, value in list(space.items()):
            if isinstance(value, Kernel):
                space[key] = value.dispatcher
            elif value is shim:
                space[key] = numba.objmode


_LOADED: set[str] = set()  # the methods load_kernels() ran


def load_kernels(methods: Iterable[str]) -> None:
    """Compile (or load from numba's cache) the kernels each of ``methods`` (heuristics' names) reaches, once per
    process, by running it on a three-op chain on two accelerators and a CPU: what a process does before it forks
    children that run those methods (certify's heuristics, a sweep's tasks), so that each child finds them loaded
    instead of importing numba and loading the same cache again (1.5-2 s of CPU each). A method that declines the
    chain has loaded what it reached.

    Where the cache is cold (none of the kernels declared so far is cached, :mod:`.kernel_cache`) and its policy is
    ``background``, nothing is compiled here (a minute of a caller's budget): the children run their kernels in
    Python and have them compiled in the background (:func:`.kernel_cache.limited`)."""
    todo = [m for m in methods if m not in _LOADED]
    if not _State.compiled and kernel_cache.policy() == "background" and cache_cold():
        return
    compile_all()
    if not todo:
        return
    g = Graph([Op(name="a", work=2.0, out_bytes=1.0), Op(name="b", work=1.0, out_bytes=1.0), Op(name="c", work=2.0)],
              [("a", "b"), ("b", "c")], name="warm-up")
    cluster = Cluster.accelerators(2, cpus=1)
    for method in todo:
        _LOADED.add(method)
        try:
            run(method, g, cluster, time_limit=5.0)
        except PlacementError:
            pass


def warm(ops: int, methods: Iterable[str]) -> None:
    """Load the compiled kernels of ``methods`` once, here (:func:`load_kernels`), before a call runs them in forked
    children: each child would otherwise import numba and load the same cached kernels again (1.5-2 s of CPU each,
    four or more children per certification; on a loaded machine, most of a level's share). Nothing for a graph of
    ``ops`` small enough that its kernels run in Python (:func:`small`), or where Python kernels are asked for."""
    if python_kernels() or small(ops):
        return
    load_kernels(methods)


KERNEL_LOAD_CPU = 0.45
"""CPU seconds that loading one search's compiled kernels from numba's cache takes (numba's import, 0.23 s of it, and
the cached code; PipeDream's path on GPT-3 of 2,044-20,111 ops: 0.31-0.42 s, run on a three-op chain). A forked child
that has to load them pays this before its search: the path's child on 20,111 ops onto 16 stages took 0.88 s of CPU,
0.49 s with them loaded before the fork (0.47 s in the parent itself), so each retry and each search after it paid it
again and was stopped at its share with nothing."""


def warm_within(ops: int, method: str, seconds: float) -> None:
    """Load ``method``'s compiled kernels here (:func:`warm`: once per process, only from numba's cache) before the
    first child that runs it is forked, where its share of ``seconds`` holds the load on this machine as loaded now
    (:data:`KERNEL_LOAD_CPU` times :func:`~placement_dsl.deadline.contention`); the load's time comes out of that
    share, as it would in the child."""
    if seconds >= KERNEL_LOAD_CPU * deadline.contention():
        warm(ops, (method,))


def python_kernels() -> bool:
    """Whether kernels not yet compiled run in Python here (inside :func:`interpreted`, or a small workload's
    command)."""
    return bool(_State.interpreted or kernel_cache.Limited.cold) and not _State.compiled


def is_compiled() -> bool:
    """Whether numba has been loaded and the kernels compiled in this process."""
    return _State.compiled


@contextlib.contextmanager
def interpreted(enabled: bool = True) -> Iterator[None]:
    """Within the block (when ``enabled``), kernels not yet compiled run in Python and numba stays unloaded;
    kernels already compiled stay compiled."""
    _State.interpreted += bool(enabled)
    try:
        yield
    finally:
        _State.interpreted -= bool(enabled)


def small(ops: int) -> bool:
    """Whether a workload of ``ops`` ops is small enough for Python kernels (:data:`SMALL_OPS`)."""
    return ops <= SMALL_OPS


@contextlib.contextmanager
def scope() -> Iterator[None]:
    """A command's extent: :func:`note_workload` inside it holds until the block ends."""
    depth = _State.interpreted
    try:
        yield
    finally:
        _State.interpreted = depth


@contextlib.contextmanager
def by_work(ops: int) -> Iterator[None]:
    """Within the block, kernels not yet compiled run in Python until :func:`note_work` reports more work than
    :data:`PYTHON_WORK`; from then on they are compiled (loaded from numba's cache). For a call on a graph of at
    most :data:`BY_WORK_OPS` ops, where nothing decided already (compiled kernels, :func:`interpreted`)."""
    enter = not _State.compiled and not _State.interpreted and not kernel_cache.Limited.cold and ops <= BY_WORK_OPS
    if enter:
        _State.interpreted += 1
        _State.tentative += 1
    try:
        yield
    finally:
        if enter and _State.tentative:
            _State.interpreted -= 1
            _State.tentative -= 1


def tentative() -> bool:
    """Whether kernels run in Python only until the work is found large (inside :func:`by_work`)."""
    return bool(_State.tentative) and not _State.compiled


def note_work(units: float, ideals: float = 0.0, nodes: int = 0) -> bool:
    """The work ahead is ``units`` (the DP: ideals x device-count states) over ``ideals`` ideals of a DAG of ``nodes``
    nodes: above :data:`PYTHON_WORK`, :data:`PYTHON_IDEALS` or :data:`PYTHON_NODE_IDEALS`, leave the Python kernels
    of :func:`by_work` (the next kernel call compiles). Whether kernels still run in Python."""
    if _State.tentative and (units > PYTHON_WORK or ideals > python_ideals(nodes)):
        _State.interpreted -= _State.tentative
        _State.tentative = 0
    return python_kernels()


def python_ideals(nodes: int) -> int:
    """The most ideals of a DAG of ``nodes`` nodes that :func:`by_work` keeps in Python."""
    return min(PYTHON_IDEALS, PYTHON_NODE_IDEALS // max(1, nodes))


def note_workload(ops: int) -> None:
    """The command works on a workload of ``ops`` ops: if it is :func:`small`, kernels run in Python until the
    enclosing :func:`scope` ends (or for good, outside one)."""
    if small(ops):
        _State.interpreted += 1


# ---------------------------------------------------------------------------- a cold cache under a time limit
def cache_cold() -> bool:
    """Whether none of the kernels declared so far loads from numba's on-disk cache (a fresh install, a new cache
    folder, or sources changed since they were compiled)."""
    kernels = [k for k in _KERNELS if k.options.get("cache")]
    return bool(kernels) and not any(kernel_cache.cached(k) for k in kernels)


def cold_start(kernel: Kernel) -> bool:
    """Inside :func:`.kernel_cache.limited`, where ``kernel`` is about to be compiled: when it is not in numba's
    cache and the policy is ``background``, run kernels in Python instead to the end of the call, and start a
    background compile of the kernels it calls, with the argument types it calls them with
    (:func:`.kernel_cache.want`). Whether kernels now run in Python."""
    if _State.compiled or kernel_cache.policy() != "background" or kernel_cache.cached(kernel):
        return False
    kernel_cache.Limited.cold = True
    kernel_cache.compile_in_background()
    return True


def cold() -> bool:
    """Whether kernels run in Python because their cache was cold (inside :func:`.kernel_cache.limited`)."""
    return kernel_cache.Limited.cold and not _State.compiled
