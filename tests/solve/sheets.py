"""Layered DAGs for generated MOIRAI sheets in the solve tests (:func:`placement_dsl.testing.moirai_sheet` writes
them out): layers of up to ``width`` tasks side by side, each task fed by one to three of the layer before."""
from __future__ import annotations

import random


def layered(rng: random.Random, tasks: int, width: int, back: float | None = None) -> tuple[list[list[int]], dict[int, set[int]]]:
    """The layers of tasks ``1..tasks`` and each task's successors: every task fed by one to three of the layer
    before, with probability ``back`` also by one two layers back (``None``: never, no draw), and every task but the
    last layer's feeding at least one of the next."""
    layers, t = [], 1
    while t <= tasks:
        w = min(tasks - t + 1, rng.randint(1, width))
        layers.append(list(range(t, t + w)))
        t += w
    succ: dict[int, set[int]] = {i: set() for i in range(1, tasks + 1)}
    for i, layer in enumerate(layers[1:], start=1):
        for j in layer:
            for p in rng.sample(layers[i - 1], min(len(layers[i - 1]), rng.choice((1, 1, 2, 3)))):
                succ[p].add(j)
            if back is not None and i >= 2 and rng.random() < back:
                succ[rng.choice(layers[i - 2])].add(j)
    for i, layer in enumerate(layers[:-1]):
        for p in layer:
            if not succ[p]:
                succ[p].add(rng.choice(layers[i + 1]))
    return layers, succ
