"""What every benchmark shares: where the reference data is, the papers' tables, formatting.

The reference data is read from ``../shared/data`` beside the repository; it is never copied here.
"""
from __future__ import annotations

import csv
import math
import sys
from pathlib import Path
from typing import Any

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DNN = SHARED_DATA / "dnn-partitioning"


def require(path: Path) -> Path:
    """``path``, or exit with a clear message when the reference data is absent."""
    if not path.exists():
        sys.exit(f"reference data not found at {path} (expected ../shared/data beside the repository)")
    return path


def paper_table(name: str = "paper_throughput.csv") -> dict[str, dict[str, str]]:
    """A paper table of ``../shared/data/dnn-partitioning`` keyed by its ``file`` column (``#`` lines skipped)."""
    with require(DNN / name).open() as fh:
        return {row["file"]: row for row in csv.DictReader(line for line in fh if not line.startswith("#"))}


def input_key(path: Path) -> str:
    """The ``file`` key of a throughput input in the paper's tables."""
    return f"{path.parent.parent.name}/{path.parent.name}/{path.name}"


def throughput_inputs(paper: dict[str, dict[str, str]], quick: bool = False) -> list[Path]:
    """Tarnawski et al.'s throughput inputs, smallest first (``quick``: the three smallest)."""
    paths = sorted(require(DNN / "throughput-inputs").glob("*/*.json"), key=lambda p: int(paper[input_key(p)]["nodes"]))
    return paths[:3] if quick else paths


def fmt(value: Any, spec: str = ".2f", none: str = "—") -> str:
    """A number for a table; ``none`` for missing or non-finite values."""
    return none if value is None or (isinstance(value, float) and not math.isfinite(value)) else format(value, spec)


def markdown_head(head: list[str]) -> None:
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head), flush=True)


def markdown_row(cells: list[Any]) -> None:
    print("| " + " | ".join(map(str, cells)) + " |", flush=True)
