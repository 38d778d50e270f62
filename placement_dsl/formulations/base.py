"""The step a formulation is made of, and the steps a problem's terms contribute."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..blocks.base import BlockTemplate, resolve
from ..problem import Problem


@dataclass(frozen=True)
class Step:
    """Build ``template`` into a block named ``template.name``; ``term`` is the spec term it realizes."""

    template: BlockTemplate
    term: Any = None


def term_steps(problem: Problem, formulation: str) -> list[Step]:
    """One step per template the problem's terms name for ``formulation`` (duplicates removed)."""
    return [Step(resolve(ref), term) for term, ref in problem.templates(formulation)]
