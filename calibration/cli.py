"""The command line: ``python -m calibration [--report | --check] [--data DIR] [--verbose]``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from calibration.checks import must_show_checks
from calibration.data import DATA_DIR, CalibrationDataError, load_series
from calibration.fit import fit
from calibration.presets import write_presets
from calibration.report import write_report

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status (0 ok, 1 a must-show check failed, 2 no data)."""
    ap = argparse.ArgumentParser(
        prog="python -m calibration",
        description="Fit the spr-a1000 presets to MLC loaded-latency curves and validate them.",
    )
    ap.add_argument("--data", default=None, help=f"calibration folder (default {DATA_DIR})")
    ap.add_argument(
        "--report",
        action="store_true",
        help="regenerate docs/validation.md and docs/img/ from the shipped presets (no fit)",
    )
    ap.add_argument(
        "--check", action="store_true", help="print the must-show checks; exit 1 if one fails"
    )
    ap.add_argument("--verbose", action="store_true", help="print the optimiser's progress")
    args = ap.parse_args(argv)
    try:
        series = load_series(args.data)
    except CalibrationDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.report:
        print(f"wrote {write_report(args.data)}")
        return 0
    if args.check:
        checks = must_show_checks(series)
        for c in checks:
            tag = "met" if c.ok else ("NOT MET" if c.required else "not met (extra)")
            print(f"[{tag}] {c.name}: {c.value} (target {c.target})")
        return 0 if all(c.ok for c in checks if c.required) else 1
    dram, cxl = fit(series, verbose=args.verbose, data=args.data)
    for p in write_presets(dram, cxl):
        print(f"wrote {p}")
    return 0
