"""Writing files safely: every file the package writes goes through :func:`atomic_open`.

A writer never opens its target (or a fixed ``<target>.tmp``) for writing: a planted symlink of
that name would be written through, and a full disk or a kill would leave half a file. It
writes a fresh temporary file beside the target, created exclusively, fsyncs it and renames
it over the target, so the target is the old file or the whole new one. Commands check their
output paths with :func:`check_writable` before the work whose answer goes there.

JSON the package writes is standard JSON (:func:`dumps_strict`): never Python's ``NaN`` or ``Infinity``, which strict
parsers refuse; a non-finite number is ``null``.
"""
from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from enum import Enum
from pathlib import Path, PurePath
from typing import IO, Any

import numpy as np

from .errors import SpecError


def cannot_write(path: str | PurePath, reason: str) -> SpecError:
    """The one-line error of an output file that cannot be written: ``cannot write 'x.json': <reason>``."""
    return SpecError(f"cannot write {str(path)!r}: {reason}")


def check_writable(path: str | PurePath) -> Path:
    """``path`` as a :class:`~pathlib.Path` if a file can be created there, else a :class:`SpecError` saying why.

    Called before the work whose answer goes to ``path``, so that a typo costs no solve: the
    directory must exist and be writable, and ``path`` must not be a directory. A full disk
    shows only when writing (:func:`atomic_open`).

    >>> check_writable("/nonexistent-dir/out.json")
    Traceback (most recent call last):
    ...
    placement_dsl.errors.SpecError: cannot write '/nonexistent-dir/out.json': directory '/nonexistent-dir' does not exist
    """
    out = Path(path)
    folder = out.parent
    if out.is_dir():
        raise cannot_write(out, "it is a directory; give a file name")
    if _special(out):
        if not os.access(out, os.W_OK):
            raise cannot_write(out, "permission denied")
        return out
    if not folder.exists():
        raise cannot_write(out, f"directory {str(folder)!r} does not exist")
    if not folder.is_dir():
        raise cannot_write(out, f"{str(folder)!r} is not a directory")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise cannot_write(out, f"directory {str(folder)!r} is not writable")
    return out


@contextmanager
def atomic_open(path: str | PurePath, mode: str = "w", **options: Any) -> Iterator[IO[Any]]:
    """A new file that replaces ``path`` only once everything was written to disk.

    The text goes to a fresh temporary file in ``path``'s directory, created exclusively
    (``O_EXCL``, so a planted file or symlink of that name is never written through), is
    flushed and fsynced, gets the permissions of the file it replaces (else those a new file
    would get), and is renamed over
    ``path`` (``os.replace``: a symlink at ``path`` itself is replaced, not followed). On any
    error the temporary file is removed, ``path`` is left as it was, and the error is a
    :class:`SpecError` naming ``path`` (or the exception raised inside the block).

    >>> import tempfile, os
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with atomic_open(os.path.join(d, "a.txt")) as fh:
    ...         _ = fh.write("hello")
    ...     sorted(os.listdir(d)), open(os.path.join(d, "a.txt")).read()
    (['a.txt'], 'hello')
    """
    out = Path(path)
    if "b" not in mode:
        options.setdefault("encoding", "utf-8")  # JSON, CSV and markdown are UTF-8 whatever the locale
    if _special(out):
        yield from _in_place(out, mode, options)
        return
    import tempfile  # only where a file is written: its import (shutil, bz2, lzma) is a sixth of the start-up's

    try:
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    except OSError as err:
        raise cannot_write(out, err.strerror or str(err)) from None
    try:
        with os.fdopen(fd, mode, **options) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _permissions(out))
        os.replace(tmp, out)
        _sync_folder(out.parent)
    except OSError as err:
        _remove(tmp)
        raise cannot_write(out, err.strerror or str(err)) from None
    except BaseException:
        _remove(tmp)
        raise


def write_atomic(path: str | PurePath, data: str | bytes) -> None:
    """Write ``data`` (text or bytes) to ``path`` through :func:`atomic_open`."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as fh:
        fh.write(data)


def _special(path: Path) -> bool:
    """Whether ``path`` (followed through symlinks) is something other than a regular file or a directory."""
    try:
        kind = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(kind) or stat.S_ISDIR(kind))


def _in_place(out: Path, mode: str, options: dict[str, Any]) -> Iterator[IO[Any]]:
    """:func:`atomic_open`'s body for a device or pipe: opened and written as it is."""
    try:
        fh = open(out, mode, **options)  # noqa: SIM115 (closed below, the error named)
    except OSError as err:
        raise cannot_write(out, err.strerror or str(err)) from None
    try:
        with fh:
            yield fh
    except OSError as err:
        raise cannot_write(out, err.strerror or str(err)) from None


def _remove(tmp: str) -> None:
    with suppress(OSError):
        os.unlink(tmp)


def _permissions(out: Path) -> int:
    """The mode bits of the regular file ``out`` replaces, else those of a new file under the umask."""
    try:
        held = os.lstat(out)
    except OSError:
        held = None
    if held is not None and stat.S_ISREG(held.st_mode):
        return stat.S_IMODE(held.st_mode)
    return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask: from ``/proc`` where it shows, else by setting it and back."""
    try:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1], 8) for line in fh if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every system opens a directory)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def jsonable(value: Any, finite: bool = True) -> Any:
    """``value`` as plain JSON types: numpy arrays -> lists, numpy scalars -> Python, enums -> their value.

    With ``finite`` (the default) ``inf``/``nan`` become ``None`` so that strict JSON (no
    ``Infinity``/``NaN``) can always be written. Mappings, sequences and sets are converted
    recursively (sets sorted); objects with a ``to_dict`` method are converted through it; any
    other object raises :class:`TypeError` naming its type.

    >>> import numpy as np
    >>> jsonable({"a": np.arange(2), "b": np.float64("inf"), 3: {np.int64(1)}})
    {'a': [0, 1], 'b': None, 3: [1]}
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, Enum):
        return jsonable(value.value, finite)
    if isinstance(value, (int, float, np.generic)):
        return _scalar(value, finite)
    return _container(value, finite)


def _container(value: Any, finite: bool) -> Any:
    """:func:`jsonable` of arrays, mappings, sequences, sets, paths and objects with ``to_dict``."""
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist(), finite)
    if isinstance(value, Mapping):
        return {_key(k): jsonable(v, finite) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return [jsonable(v, finite) for v in sorted(value, key=repr)]
    if isinstance(value, (list, tuple)):
        return [jsonable(v, finite) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    if callable(getattr(value, "to_dict", None)):
        return jsonable(value.to_dict(), finite)
    raise TypeError(f"cannot write a {type(value).__name__} as JSON: {value!r:.80}")


def _scalar(value: Any, finite: bool) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and finite and not math.isfinite(value):
        return None
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return jsonable(value, finite)


def _key(key: Any) -> Any:
    """A mapping key JSON accepts: strings and Python numbers as they are, anything else as text."""
    if isinstance(key, np.generic):
        key = key.item()
    if isinstance(key, Enum):
        key = key.value
    return key if isinstance(key, (str, int, float, bool)) or key is None else str(key)


def dumps_strict(value: Any, **options: Any) -> str:
    """Standard JSON text of ``value`` (see :func:`jsonable`); never ``NaN`` or ``Infinity``.

    >>> dumps_strict({"x": float("nan"), "y": [1.5]})
    '{"x": null, "y": [1.5]}'
    """
    return json.dumps(jsonable(value), allow_nan=False, **options)
