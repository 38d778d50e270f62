"""Tarnawski et al. Fig. 6: the max-load (throughput) IP over accelerators and CPUs."""
from __future__ import annotations

from ..blocks import Assignment, TensorCut
from ..blocks.base import BlockTemplate
from ..problem import Problem
from ..training_terms import TrainingMemory
from .base import Auto, Formulation, Kind, register
from .rules import BASE
from .training import training_memory


def _skeleton(problem: Problem) -> list[BlockTemplate]:
    return [Assignment(), TensorCut(form="commio")]


THROUGHPUT = register(Formulation("throughput", Kind.EXACT, _skeleton, {TrainingMemory: training_memory}, parent=BASE,
                                  auto=Auto(rank=0), doc="""
Tarnawski Fig. 6: one-hot ``x_{vi}`` (14), ``CommIn``/``CommOut`` (15-19), loads (20-21), ``MaxLoad``.
Contiguity (Lemma 4.1, z variables) only when :class:`Contiguous` is among the terms — otherwise
the non-contiguous variant of §5.2; training loads split forward/backward (§5.3) for PipeDream or
GPipe objectives. ``formulation="auto"``'s last choice (:class:`Auto` rank 0)."""))
