"""Modules a model calls several times, as every importer records them on its ops.

torch's ``pipeline()`` hooks a split point on the module *object* and cuts at each of its calls, so the
exporters need to know which modules are no single call (:func:`placement_dsl.boundaries.reused_modules`).
The importers write the same record, ``op.attrs["shared_modules"]``: each module of the op's stack that is one
object under several names or that the model calls more than once, to ``{"fqns": [every name of the object],
"calls": its calls under all of them}``. The torch importer counts calls from ``torch.export``'s module stacks;
the ONNX importer from the program order and the exporter's call names (:func:`calls_in_order`).

A workload the importers wrote says that its record is complete (``meta["module_calls"]``, :data:`RECORD_VERSION`):
a module absent from the record is then one object called once. A file imported before the record carries none,
and nothing in it tells a tied module (one object under two names, each called once) from two modules, so
:func:`check_recorded` refuses it where the record is read (exports, ``--boundaries module``, split points).
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from ..errors import SpecError

Record = dict[str, dict[str, Any]]
RECORD_VERSION = 1
"""``meta["module_calls"]`` of a workload whose importer wrote the record (1: ``op.attrs["shared_modules"]``)."""


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


def check_recorded(ops: Sequence[Any], meta: Mapping[str, Any], source: str) -> None:
    """Refuse a workload whose ops carry module stacks (``op.attrs["nn_module_stack"]``) but that no importer of the
    record wrote: neither ``meta["module_calls"]`` nor any op's ``shared_modules`` (a file imported between the two
    holds its record). Its absence would read as "every module called once": a split at a module the model calls
    twice, or at one of a tied object's names, cuts the model into more stages than planned.

    >>> from placement_dsl.graph import Op
    >>> old = [Op(name="a", work=1.0, attrs={"nn_module_stack": ["h"], "module": "h"})]
    >>> check_recorded(old, {}, "old.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    placement_dsl.errors.SpecError: old.json: imported before placement_dsl recorded the modules ...: re-import ...
    >>> check_recorded([Op(name="a", work=1.0, attrs={"nn_module_stack": ["h"]})], {"module_calls": 1}, "new.json")
    """
    version = meta.get("module_calls")
    if version is not None and (isinstance(version, bool) or version not in range(1, RECORD_VERSION + 1)):
        raise SpecError(f"{source}: meta 'module_calls' must be 1 to {RECORD_VERSION} (a later placement_dsl wrote "
                        f"it?), got {version!r}")
    stacked = any(op.attrs.get("nn_module_stack") for op in ops)
    if version is None and stacked and not any(op.attrs.get("shared_modules") for op in ops):
        raise SpecError(f"{source}: imported before placement_dsl recorded the modules a model calls several times "
                        "or under several names (meta 'module_calls'): re-import the model with 'placement-dsl "
                        "import' to export it or cut it at module boundaries")


def on_op(stack: Sequence[str], shared: Mapping[str, dict[str, Any]]) -> Record:
    """The part of ``shared`` an op whose module stack is ``stack`` carries (empty: the op records nothing)."""
    return {path: dict(shared[path]) for path in stack if path in shared}
