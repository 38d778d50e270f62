"""Modules a model calls several times, as every importer records them on its ops.

torch's ``pipeline()`` hooks a split point on the module *object* and cuts at each of its calls, so the
exporters need to know which modules are no single call (:func:`placement_dsl.boundaries.reused_modules`).
The importers write the same record, ``op.attrs["shared_modules"]``: each module of the op's stack that is one
object under several names or that the model calls more than once, to ``{"fqns": [every name of the object],
"calls": its calls under all of them}``. The torch importer counts calls from ``torch.export``'s module stacks;
the ONNX importer from the program order and the exporter's call names (:func:`calls_in_order`).
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

Record = dict[str, dict[str, Any]]


def calls_in_order(stacks: Sequence[Sequence[tuple[str, Hashable | None]]]) -> dict[str, int]:
    """The calls of each module from the ops' stacks in program order: each stack lists the modules an op runs in,
    outermost first, each with the key of its call (``None`` where the exporter does not say which call).

    A call of a module is a maximal run of consecutive ops inside it: an op outside it (the root's own residual
    sum between two calls of a block) ends the call, and so does another key than the run's so far (the
    exporter's name of a later call). Two calls back to back with no op between them and no key that tells them
    apart count once.

    >>> calls_in_order([[("inp", None)], [("block", None), ("block.0", 0)], [], [("block", None), ("block.0", 1)]])
    {'inp': 1, 'block': 2, 'block.0': 2}
    >>> calls_in_order([[("b", None), ("b.f", 0)], [("b", 0)], [("b", None), ("b.f", 1)], [("b", 1)]])
    {'b': 2, 'b.f': 2}
    """
    calls: dict[str, int] = {}
    previous: dict[str, Hashable | None] = {}
    for stack in stacks:
        current: dict[str, Hashable | None] = {}
        for path, key in stack:
            known = previous.get(path)
            if path not in previous or (key is not None and known is not None and key != known):
                calls[path] = calls.get(path, 0) + 1
                known = None
            current[path] = key if key is not None else known
        previous = current
    return calls


def record(calls: Mapping[str, int], names: Mapping[str, Sequence[str]] | None = None) -> Record:
    """The record of the modules called more than once or under several names: each name to ``{"fqns": [...],
    "calls": n}``. ``names`` gives a module's other names (the same object), ``calls`` its calls under all of
    them."""
    names = names or {}
    out: Record = {}
    for path, n in calls.items():
        fqns = sorted({path, *names.get(path, ())})
        if n > 1 or len(fqns) > 1:
            out[path] = {"fqns": fqns, "calls": int(n)}
    return out


def on_op(stack: Sequence[str], shared: Mapping[str, dict[str, Any]]) -> Record:
    """The part of ``shared`` an op whose module stack is ``stack`` carries (empty: the op records nothing)."""
    return {path: dict(shared[path]) for path in stack if path in shared}
