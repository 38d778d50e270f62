"""Stage boundaries only between modules: each module's ops colocated, so a runtime can cut there.

A pipeline runtime splits a model between modules (``torch.distributed.pipelining`` split
points, Megatron's layers; see :mod:`placement_dsl.export`). :class:`Boundaries` writes that as a
term: the ops of each module at ``depth`` dotted parts of their path (``op.attrs["module"]``, set
by the ONNX and ``torch.export`` importers) share a device. It is a :class:`~.constraints.Colocate`,
so every formulation and heuristic that keeps colocation groups (the DP over ideals, SliceGraph,
the IPs; with memory) keeps it; with :class:`~.constraints.DagOrder` and contiguity the stages
are runs of whole modules in execution order.

Ops of no module, and a container's own glue ops (a reshape between its children, whose path
is shorter than ``depth`` and encloses other modules), stay free.

>>> from placement_dsl.graph import Graph, Op
>>> ops = [Op(name=n, work=1, attrs={"module": m}) for n, m in [("a", "h.0.x"), ("b", "h.0.y"), ("c", "h.1.x")]]
>>> Boundaries.modules(depth=2).resolve(Graph(ops, [("a", "b"), ("b", "c")]))
[['a', 'b']]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .constraints import Colocate
from .errors import SpecError
from .graph import Graph

if TYPE_CHECKING:
    from .cluster import Cluster


def _prefix(path: str, depth: int | None) -> str:
    return path if depth is None else ".".join(path.split(".")[:depth])


@dataclass(frozen=True)
class Boundaries(Colocate):
    """Stage boundaries only between modules at ``depth`` (``None``: top-level modules, depth 1).

    Parameters
    ----------
    depth
        Dotted parts of the module path naming a module (1: top-level modules).
    shared
        Share variables (default) or write equalities, as :class:`~.constraints.Colocate`.
    """

    depth: int | None = None

    def __post_init__(self) -> None:
        if self.depth is not None and (not isinstance(self.depth, int) or self.depth < 1):
            raise SpecError(f"Boundaries.modules: depth must be an integer >= 1, got {self.depth!r}")

    @classmethod
    def modules(cls, depth: int | None = None, shared: bool = True) -> Boundaries:
        """Boundaries only between the modules at ``depth`` (default: the top-level ones)."""
        return cls(depth=depth, shared=shared)

    def resolve(self, graph: Graph) -> list[list[str]]:
        """The ops of each module at ``depth``, in op order; groups of one op are left out."""
        depth = self.depth or 1
        paths = [str(op.attrs.get("module") or "") for op in graph.ops]
        containers = {_prefix(p, k) for p in paths if p for k in range(1, p.count(".") + 1)}
        groups: dict[str, list[str]] = {}
        for op, path in zip(graph.ops, paths):
            if not path or (path.count(".") + 1 < depth and path in containers):
                continue
            groups.setdefault(_prefix(path, depth), []).append(op.name)
        return [g for g in groups.values() if len(g) > 1]

    def validate(self, graph: Graph, cluster: Cluster) -> None:
        if not any(op.attrs.get("module") for op in graph.ops):
            raise SpecError(f"Boundaries.modules: graph {graph.name!r} has no module paths (op.attrs['module']); "
                            f"import the model with 'placement-dsl import' (ONNX or torch.export)")
