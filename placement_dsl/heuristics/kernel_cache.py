"""numba's on-disk cache of the kernels, read without numba, and the background process that fills it.

A kernel declared with ``cache=True`` is compiled once and then loaded from an index file (``.nbi``) and data
files (``.nbc``) that numba writes beside the source in ``__pycache__`` (an installed package whose folder is not
writable: under the user's cache folder, ``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba``; anywhere else when
``NUMBA_CACHE_DIR`` is set). Compiling every kernel a method reaches takes 40-70 s on a loaded machine, far more
than a time limit of a few seconds, so a call with a limit asks :func:`cached` first (a ``stat`` and a read of one
small file, milliseconds, no numba) and, when the cache is cold, runs its kernels in Python
(:func:`.jit.limited`) while :func:`compile_in_background` starts a detached, low-priority process that compiles
them (``python -m placement_dsl.heuristics.warm_kernels METHOD ...``): the next process finds them compiled.

:data:`ENV` chooses: ``background`` (the default) or ``compile`` (compile in the calling process, as without a
limit; the project's test suite sets it, so that its many processes never start compiles of their own unless a test
asks for them).
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

ENV = "PLACEMENT_DSL_COLD_KERNELS"
POLICIES = ("background", "compile")
HERE = Path(__file__).resolve().parent
LOCK = "placement_dsl-kernels.lock"  # held by the one process compiling kernels into a cache folder
NICE = 10  # the background compile's niceness: behind the calls, yet not starved on a machine that is never idle
WANTED = "placement_dsl-kernels.wanted"  # the kernels and argument types calls ran in Python (want())


class Limited:
    """The calls under a time limit this process is in (:func:`limited`)."""

    methods: ClassVar[list[str]] = []  # their methods, outermost first
    cold: ClassVar[bool] = False  # kernels run in Python to the end of the outermost call: their cache was cold
    at: ClassVar[float] = math.inf  # the outermost call's deadline (time.monotonic())


@contextlib.contextmanager
def limited(method: str, seconds: float | None) -> Iterator[None]:
    """A call of ``method`` with a time limit of ``seconds`` (``None``: none, and nothing changes): should it reach
    a kernel that would compile and find that kernel's cache cold (:func:`.jit.cold_start`), kernels run in Python
    to the end of the outermost block, stopped at its deadline, while a background process compiles them;
    compiling in the call would spend most of its limit."""
    if seconds is None:
        yield
        return
    if not Limited.methods:
        Limited.at = time.monotonic() + max(float(seconds), 0.0)
    Limited.methods.append(method)
    try:
        yield
    finally:
        Limited.methods.pop()
        if not Limited.methods:
            Limited.cold = False
            Limited.at = math.inf


def policy() -> str:
    """What a call with a time limit does with kernels whose cache is cold: ``background`` or ``compile``."""
    given = os.environ.get(ENV, "").strip().lower()
    if given in POLICIES:
        return given
    return "background"


def folder(source: str | os.PathLike[str]) -> Path:
    """The folder where numba caches the kernels of the file ``source`` (numba's own order of locations:
    ``NUMBA_CACHE_DIR``, a writable ``__pycache__`` beside the source, the user's cache folder)."""
    import hashlib  # only where kernels are looked up: most commands never load one

    parent = Path(os.path.abspath(source)).parent
    sub = f"{parent.name}_{hashlib.sha1(str(parent).encode()).hexdigest()}"
    given = os.environ.get("NUMBA_CACHE_DIR")
    if given:
        return Path(given, sub)
    tree = parent / "__pycache__"
    if _writable(tree):
        return tree
    home = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(home, "numba", sub)


def _writable(path: Path) -> bool:
    if path.is_dir():
        return os.access(path, os.W_OK | os.X_OK)
    return not path.exists() and os.access(path.parent, os.W_OK | os.X_OK)


@functools.lru_cache(maxsize=256)
def _digest(path: str, mtime: float, size: int) -> bytes:
    import hashlib

    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).digest()


def source_digest(source: str | os.PathLike[str]) -> bytes:
    """The SHA-256 of the file ``source``: numba's stamp of a cache index's freshness."""
    st = os.stat(source)
    return _digest(os.fspath(source), st.st_mtime, st.st_size)


def cached(kernel: Any) -> bool:
    """Whether ``kernel`` (a :class:`.jit.Kernel`) loads from numba's cache: not cached by numba at all
    (``cache=False``: nothing on disk to wait for), or its index file exists and carries the digest of the
    source as it is now (a stale index, of an older source, is cold)."""
    if not kernel.options.get("cache"):
        return True
    code = kernel.py_func.__code__
    source = code.co_filename
    stem = Path(source).stem
    name = f"{stem}.{kernel.__qualname__}-{code.co_firstlineno}.py{sys.version_info[0]}{sys.version_info[1]}"
    try:
        data = (folder(source) / f"{name}.nbi").read_bytes()
        return source_digest(source) in data
    except OSError:
        return False


def _cache_home() -> Path:
    return folder(HERE / "jit.py")


def wanted_file() -> Path:
    """Where calls that ran their kernels in Python list what the background compile should compile: one JSON
    line per kernel and argument types (:func:`want`)."""
    return _cache_home() / WANTED


_WANTED: set[str] = set()  # the lines this process has written


def want(kernel: Any, args: tuple[Any, ...]) -> None:
    """Note that ``kernel`` ran in Python on arguments of these types, for the background compile (nothing when
    a type is not one :func:`arg_type` describes: such a kernel compiles where it is first called)."""
    try:
        line = json.dumps({"module": kernel.__module__, "kernel": kernel.__qualname__,
                           "args": [arg_type(a) for a in args]})
    except TypeError:
        return
    if line in _WANTED:
        return
    _WANTED.add(line)
    try:
        home = _cache_home()
        home.mkdir(parents=True, exist_ok=True)
        fd = os.open(home / WANTED, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def arg_type(value: Any) -> list[Any]:
    """A kernel argument's numba type, as JSON: ``["array", dtype, ndim, layout, writable]``, ``["scalar",
    dtype]``, ``["bool"]``, ``["none"]``, ``["tuple", [...]]``; :class:`TypeError` for anything else."""
    if isinstance(value, np.ndarray):
        layout = "C" if value.flags.c_contiguous else "F" if value.flags.f_contiguous else "A"
        return ["array", value.dtype.str, value.ndim, layout, bool(value.flags.writeable)]
    if isinstance(value, (bool, np.bool_)):
        return ["bool"]
    if isinstance(value, int):
        return ["scalar", "<i8"]
    if isinstance(value, float):
        return ["scalar", "<f8"]
    if isinstance(value, (np.integer, np.floating)):
        return ["scalar", value.dtype.str]
    if value is None:
        return ["none"]
    if isinstance(value, tuple):
        return ["tuple", [arg_type(v) for v in value]]
    raise TypeError(f"no numba type for {type(value).__name__}")


@contextlib.contextmanager
def holding_lock() -> Iterator[bool]:
    """The cache folder's lock, taken without waiting: whether this process holds it (``False``: another does)."""
    import fcntl

    home = _cache_home()
    try:
        home.mkdir(parents=True, exist_ok=True)
        fd = os.open(home / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def compiling() -> bool:
    """Whether a process is compiling kernels into this cache folder now (it holds the lock)."""
    with holding_lock() as mine:
        return not mine


def wait_compiled(until: float, poll: float = 0.25) -> bool:
    """Wait while a process compiles kernels into the cache folder (:func:`compiling`), until ``until`` (a
    :func:`time.monotonic` reading) at the latest: whether none compiles now. A call whose methods were stopped
    running their kernels in Python (:class:`.base.ColdKernels`) runs them again compiled once it returns ``True``."""
    while compiling():
        if time.monotonic() + poll >= until:
            return False
        time.sleep(poll)
    return True


def compile_in_background() -> bool:
    """Start a detached process that compiles (and caches) the kernels listed in :func:`wanted_file`, unless one is
    running already; never waits for it. The process runs at a low priority, in a session of its own, with its
    output discarded; it is the grandchild of this one (the child in between exits at once and is reaped here), so
    it never lingers as a zombie of a long-lived caller. Whether a process was started."""
    if compiling():
        return False
    root = str(HERE.parents[1])
    env = {**os.environ, ENV: "compile", "PYTHONPATH": os.pathsep.join(
        [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])}
    argv = [sys.executable, "-m", "placement_dsl.heuristics.warm_kernels"]
    try:
        pid = os.fork()
    except OSError:
        return False
    if pid == 0:  # the child: start the grandchild and leave at once
        try:
            os.setsid()
            if os.fork() == 0:
                _become_worker(argv, env)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    return True


def _become_worker(argv: list[str], env: dict[str, str]) -> None:
    """In the grandchild: low priority (:data:`NICE`), no terminal output, then the worker's program."""
    try:
        os.nice(NICE)
    except OSError:
        pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, 65536)
    os.execve(argv[0], argv, env)
