"""Which of an ONNX model's initializers are one parameter of the model, for the ONNX importer's ``param_bytes``.

An exporter may write one parameter as several initializers. The dynamo exporter folds a weight's ``Transpose`` into a
new initializer: a tied head's transpose of the embedding beside the embedding itself (:func:`folded_copies`), and a
``Linear``'s transposed weight once per call of the module, ``val_0``, ``val_2``... for one ``l.weight`` called four
times (:func:`call_copies`). Equal values alone prove nothing (an untrained model's distinct layers are often equal
copies, and the exporters give equal tensors one initializer anyway): each rule asks the graph for the evidence that
the tensors are one parameter, and reads values only to confirm it.

Values are read from the model or its external data (:func:`.onnx_file.values`); an inline initializer over
:data:`.onnx_file.SMALL` bytes, whose values the importer does not read, is never found a copy, and counts as a
parameter of its own.
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .onnx_file import values

PARAMETER = re.compile(r"^[A-Za-z_]\w*(\.\w+)+$")  # a module's weight, 'block.0.weight' (not 'onnx::Mul_3', 'val_2')


def one_value(init: Any) -> bool:
    """Every element of the initializer is one value (a fresh norm's ones or zeros): both exporters give equal
    weights one initializer whichever modules hold them, so its readers are no evidence of one module object. An
    initializer whose values were not read (over :data:`.onnx_file.SMALL` bytes) is taken as varied."""
    from onnx import TensorProto, numpy_helper

    if init.data_location == TensorProto.EXTERNAL:
        return False
    try:
        values_ = numpy_helper.to_array(init)
    except Exception:  # noqa: BLE001 - values the reader cannot decode say nothing either way
        return False
    return bool(values_.size) and bool((values_ == values_.flat[0]).all())


class _Values:
    """Initializers' values, each read once (``None``: not read, or one value throughout: no evidence)."""

    def __init__(self, folder: Path | None):
        self.folder, self.read = folder, {}

    def __call__(self, init: Any) -> Any:
        if init.name not in self.read:
            got = values(init, self.folder)
            self.read[init.name] = None if got is None or not got.size or (got == got.flat[0]).all() else got
        return self.read[init.name]


def folded_copies(graph: Any, folder: Path | None) -> dict[str, str]:
    """Initializers an exporter folded from a parameter, by name -> the parameter's: one without a module's name
    whose values are the named one's, its axes permuted (the dynamo exporter folds a tied head's ``Transpose`` of
    the embedding into a second initializer, ``val_90 [32, 100]`` beside ``head.weight [100, 32]``). Values are read
    for such pairs only (same type, same dims in some order, two axes or more, not one value throughout)."""
    named = [init for init in graph.initializer if PARAMETER.match(init.name) and len(init.dims) >= 2]
    of = _Values(folder)
    out: dict[str, str] = {}
    for init in graph.initializer:
        dims = tuple(int(d) for d in init.dims)
        if PARAMETER.match(init.name) or len(dims) < 2 or len(dims) > 4:
            continue
        for param in named:
            if param.data_type != init.data_type or sorted(param.dims) != sorted(dims):
                continue
            mine, theirs = of(init), of(param)
            if mine is None or theirs is None:
                continue
            if any(np.array_equal(theirs.transpose(p), mine) for p in itertools.permutations(range(len(dims)))
                   if tuple(theirs.shape[a] for a in p) == dims):
                out[init.name] = param.name
                break
    return out


def call_copies(graph: Any, reads: Sequence[tuple[str | None, frozenset[str]]], calls: Mapping[str, int],
                folder: Path | None) -> dict[str, str]:
    """Initializers the dynamo exporter folded from one weight once per call of its module, by name -> the first's.

    ``reads``: per op in program order, the innermost module it runs in (``None``: not known) and the initializers
    it reads; ``calls``: the calls of each module (:func:`.module_calls.calls_in_order`). Initializers without a
    module's name, of one type and dims (two axes or more), read only inside one module ``M`` are one parameter
    where their values are equal and there are no more of them than ``M`` has calls: a module object holds its
    weights, each call computes the same transpose of them, and a module path names one object. Readers in two
    modules (``ls.0`` and ``ls.1``, an untrained model's equal layers) are two parameters, and so are equal tensors
    that one call of ``M`` reads (its calls fewer than the copies)."""
    where: dict[str, set[str | None]] = {}
    for path, names in reads:
        for name in names:
            where.setdefault(name, set()).add(path)
    groups: dict[tuple[str, int, tuple[int, ...]], list[Any]] = {}
    for init in graph.initializer:
        dims = tuple(int(d) for d in init.dims)
        paths = where.get(init.name, set())
        if PARAMETER.match(init.name) or len(dims) < 2 or len(paths) != 1 or None in paths:
            continue
        groups.setdefault((next(iter(paths)), init.data_type, dims), []).append(init)
    of = _Values(folder)
    out: dict[str, str] = {}
    for (path, _, _), inits in groups.items():
        classes: list[list[Any]] = []
        for init in inits if 1 < len(inits) else ():
            mine = of(init)
            same = None if mine is None else next((c for c in classes if np.array_equal(of(c[0]), mine)), None)
            if same is None:
                classes.append([init])
            else:
                same.append(init)
        for members in classes:
            if 1 < len(members) <= calls.get(path, 1) and of(members[0]) is not None:
                out.update({init.name: members[0].name for init in members[1:]})
    return out
