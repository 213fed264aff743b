"""Shared test helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "calibration"


@pytest.fixture(scope="session")
def calibration_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(
            f"calibration data not found at {SHARED} (../shared/calibration beside the project)"
        )
    return SHARED
