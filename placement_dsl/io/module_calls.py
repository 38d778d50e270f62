"""Modules a model calls several times, as every importer records them on its ops.

torch's ``pipeline()`` hooks a split point on the module *object* and cuts at each of its calls, so the
exporters need to know which modules are no single call (:func:`placement_dsl.boundaries.reused_modules`).
The importers write the same record, ``op.attrs["shared_modules"]``: each module of the op's stack that is one
object under several names or that the model calls more than once, to ``{"fqns": [every name of the object],
"calls": its calls under all of them}``. The torch importer counts calls from ``torch.export``'s module stacks;
the ONNX importer from the program order and the exporter's call names (:func:`calls_in_order`), and an object's
other names from the calls that read its parameters alike (:func:`aliases_in_order`).

A workload the importers wrote says that its record is complete (``meta["module_calls"]``, :data:`RECORD_VERSION`):
a module absent from the record is then one object called once. A file imported before the record carries none,
and nothing in it tells a tied module (one object under two names, each called once) from two modules, so
:func:`check_recorded` refuses it where the record is read (exports, ``--boundaries module``, split points).
"""
from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import Any

from ..errors import SpecError

Record = dict[str, dict[str, Any]]
RECORD_VERSION = 1
"""``meta["module_calls"]`` of a workload whose importer wrote the record (1: ``op.attrs["shared_modules"]``)."""


def calls_in_order(stacks: Sequence[Sequence[tuple[str, Hashable | None]]],
                   reads: Sequence[Collection[str]] | None = None) -> dict[str, int]:
    """The calls of each module from the ops' stacks in program order: each stack lists the modules an op runs in,
    outermost first, each with the key of its call (``None`` where the exporter does not say which call);
    ``reads``: each op's parameters (the weights it reads), where known.

    A call of a module is a maximal run of consecutive ops inside it: an op outside it (the root's own residual
    sum between two calls of a block) ends the call, and so does another key than the run's so far (the
    exporter's name of a later call). Two calls back to back with no op between them are told apart by what
    the exporters leave of them:

    * **a parameter read again**: one call of a module reads each of its weights once, so an op reading a weight
      that an op of the same module read before, in the run of a module both run in, begins a new call of the
      deepest such module (``block`` applied twice in a row: ``block.0`` reads ``block.0.weight`` again; a block
      whose child calls itself twice on its input keeps one call, the child's run having ended between the
      reads). The same module, not any: the TorchScript exporter gives equal weights one initializer (every
      fresh ``LayerNorm``'s ones), which two norms of one call then both read;
    * **a ``Sequential``'s order**: a module whose called children are numbered (``block.0``, ``block.1``: a
      ``Sequential``; a ``ModuleList`` is iterated, never called) calls each once per call, in order, so a
      child entered anew at an index not past the run's last one begins a new call of the module.

    A module that really reads one weight twice in a call, or calls a numbered child twice, counts more calls
    than it makes: the exporters then avoid a split point there, the safe side. Back-to-back calls of a module
    without weights and without numbered children that no key tells apart still count once.

    >>> calls_in_order([[("inp", None)], [("block", None), ("block.0", 0)], [], [("block", None), ("block.0", 1)]])
    {'inp': 1, 'block': 2, 'block.0': 2}
    >>> calls_in_order([[("b", None), ("b.f", 0)], [("b", 0)], [("b", None), ("b.f", 1)], [("b", 1)]])
    {'b': 2, 'b.f': 2}
    >>> calls_in_order([[("block", None)], [("block", None)]], reads=[{"block.weight"}, {"block.weight"}])
    {'block': 2}
    >>> calls_in_order([[("s", None), ("s.0", None)], [("s", None), ("s.1", None)], [("s", None), ("s.0", None)]])
    {'s': 2, 's.0': 2, 's.1': 1}
    """
    calls: dict[str, int] = {}
    previous: dict[str, Hashable | None] = {}
    seen: dict[str, set[tuple[str, str]]] = {}  # each module's parameters read in its current call, and by whom
    last_child: dict[str, int] = {}  # each module's last numbered child entered in its current call
    for k, stack in enumerate(stacks):
        paths = [path for path, _ in stack]
        params = {(paths[-1], p) for p in reads[k]} if reads is not None and paths else set()
        fresh = [path not in previous or (key is not None and previous[path] is not None and key != previous[path])
                 for path, key in stack]
        again = [d for d, path in enumerate(paths) if not fresh[d] and params & seen.get(path, set())]
        for d in range(again[-1] if again else len(stack), len(stack)):
            fresh[d] = True
        for d in range(len(stack) - 1, 0, -1):
            index = _child_index(paths[d - 1], paths[d])
            if fresh[d] and not fresh[d - 1] and index is not None and index <= last_child.get(paths[d - 1], -1):
                fresh[d - 1] = True
        current: dict[str, Hashable | None] = {}
        for d, (path, key) in enumerate(stack):
            if fresh[d]:
                calls[path] = calls.get(path, 0) + 1
                seen[path], last_child[path] = set(), -1
            seen[path] = seen.get(path, set()) | params
            current[path] = key if key is not None or fresh[d] else previous.get(path)
            index = _child_index(paths[d - 1], path) if d else None
            if index is not None:
                last_child[paths[d - 1]] = index
        previous = current
    return calls


def aliases_in_order(stacks: Sequence[Sequence[str]], ops: Sequence[tuple[str, Collection[str]]]) -> dict[str, list[str]]:
    """The module paths that are one object under several names, from what an exported program leaves of them:
    ``stacks`` the modules each op runs in (program order), ``ops`` each op's type and the parameters it reads
    directly (initializers it names as inputs).

    The ``torch.export``-based ONNX exporter names each call by the name it was reached through (``self.dec =
    self.enc`` called as ``enc`` then as ``dec``: scopes ``enc`` and ``dec``) and gives the object's parameters one
    initializer (``dec.weight``), which both calls read. So two modules, neither inside the other, whose ops run
    the same op types reading the same parameters in the same order, with the same submodules, are one object.
    Two modules sharing a weight but computing otherwise (an embedding's lookup and a tied LM head's product)
    are not; two modules that share every weight and compute alike (``b.weight = a.weight`` on two bias-free
    Linears) read as one object: the exporters then avoid a split point there, the safe side. A module reading
    no parameter directly is never an alias. Both exporters give equal weights (every fresh ``LayerNorm``'s
    ones) one initializer, which the other norms read directly (dynamo) or through ``Identity`` nodes
    (TorchScript): the caller leaves such weights out of ``ops`` (one value in every element).

    >>> aliases_in_order([["enc"], ["mid"], ["dec"]], [("Gemm", {"dec.weight"}), ("Relu", ()), ("Gemm", {"dec.weight"})])
    {'dec': ['dec', 'enc'], 'enc': ['dec', 'enc']}
    """
    sig: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for stack, (kind, reads) in zip(stacks, ops):
        for path in stack:
            sig.setdefault(path, []).append((kind, tuple(sorted(reads))))
    groups: dict[tuple, list[str]] = {}
    for path, seq in sig.items():
        if any(reads for _, reads in seq):
            inner = tuple(sorted(p[len(path):] for p in sig if p.startswith(path + ".")))
            groups.setdefault((tuple(seq), inner), []).append(path)
    out: dict[str, list[str]] = {}
    for paths in groups.values():
        apart = [p for p in paths if not any(q != p and (p.startswith(q + ".") or q.startswith(p + ".")) for q in paths)]
        if len(apart) > 1:
            out.update({p: sorted(apart) for p in apart})
    return dict(sorted(out.items()))


def _child_index(parent: str, path: str) -> int | None:
    """The index of ``path`` as a numbered child of ``parent`` (``block.1`` of ``block``: 1), else ``None``."""
    rest = path[len(parent) + 1:] if path.startswith(parent + ".") else ""
    return int(rest) if rest.isdigit() else None


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
