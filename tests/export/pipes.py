"""Running an exported torch-pipelining plan with torch's own ``pipeline()`` in one process, against the model."""
from __future__ import annotations

import copy


def outputs(y) -> tuple:
    """A model's or a pipe's outputs as a flat tuple (a pipe wraps a single output in one)."""
    y = y if isinstance(y, tuple) else (y,)
    return y[0] if len(y) == 1 and isinstance(y[0], tuple) else y


def runs_as_planned(model, x, spec: dict, atol: float = 1e-6) -> None:
    """torch splits ``model`` at ``spec["split_spec"]`` into ``spec["num_stages"]`` stages whose output is the
    unsplit model's on ``x``."""
    import torch
    from torch.distributed.pipelining import SplitPoint, pipeline

    split = {point: SplitPoint[where.upper()] for point, where in spec["split_spec"].items()}
    pipe = pipeline(copy.deepcopy(model), (x,), split_spec=split)
    with torch.no_grad():
        got, want = outputs(pipe(x)), outputs(model(x))
    assert pipe.num_stages == spec["num_stages"], spec
    assert len(got) == len(want) and all(torch.allclose(a, b, atol=atol) for a, b in zip(got, want)), spec
