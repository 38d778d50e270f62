"""Shared fixtures: the reference data in ../shared/data (tests skip cleanly without it)."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ../shared/data; skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


@pytest.fixture(scope="session")
def dnn_partitioning(shared_data: Path) -> Path:
    path = shared_data / "dnn-partitioning"
    if not path.is_dir():
        pytest.skip("../shared/data/dnn-partitioning is not present")
    return path
