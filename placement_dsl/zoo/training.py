"""Training graphs: the backward pass mirrored from a forward graph (Tarnawski et al. §5.3, App. B)."""
from __future__ import annotations

from collections.abc import Sequence

from ..graph import Op
from .costs import round_significant


def with_backward(ops: Sequence[Op], edges: Sequence[tuple[str, str]]) -> tuple[list[Op], list[tuple[str, str]]]:
    """Append the backward pass of a forward graph (Tarnawski et al. §5.3, App. B).

    Each forward op ``v`` gets a backward op ``v.grad`` with ``work = 2 * work(v)`` (the
    gradients with respect to inputs and to weights each cost about one forward pass; a measured
    time in ``v.attrs["backward_work"]``, per device kind, replaces it there),
    ``param_bytes = param_bytes(v)`` (the weight gradient), ``out_bytes = sum_{u -> v}
    out_bytes(u)`` (the gradients of ``v``'s inputs) and ``activation_bytes = out_bytes``.
    Edges: every forward edge ``u -> v`` is mirrored as ``v.grad -> u.grad``, and ``v -> v.grad``
    carries the stashed activation. ``v`` and ``v.grad`` share the colocation group of ``v``
    (its ``group`` if set, else its name).
    """
    by_name = {op.name: op for op in ops}
    preds: dict[str, list[str]] = {op.name: [] for op in ops}
    for u, v in edges:
        preds[v].append(u)
    forward = [op.model_copy(update={"group": op.group or op.name}) for op in ops]
    backward = []
    for op in reversed(forward):
        grad_bytes = sum(by_name[u].out_bytes for u in preds[op.name])
        work = {**{k: round_significant(2.0 * t) for k, t in op.work.items()}, **op.attrs.get("backward_work", {})}
        backward.append(Op(name=f"{op.name}.grad", work=work,
                           param_bytes=op.param_bytes, out_bytes=grad_bytes, activation_bytes=grad_bytes,
                           backward=True, group=op.group, attrs=op.attrs))
    grad_edges = [(f"{v}.grad", f"{u}.grad") for u, v in edges] + [(op.name, f"{op.name}.grad") for op in ops]
    return forward + backward, list(edges) + grad_edges
