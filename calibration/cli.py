"""The command line.

``python -m calibration [--report | --check] [--data DIR] [--verbose]`` fits and checks
the shipped presets (no subcommand). Three subcommands turn a user's own machine and
workload into model inputs (docs/your-machine.md):

- ``python -m calibration probe [--root DIR] [-o machine.yaml] [--snapshot DIR2]``: the
  host's memory nodes as a hardware file (:mod:`calibration.probe`);
- ``python -m calibration mlc LOG... [--node NAME] [--machine FILE] [-o FILE]``: a node
  fitted to MLC ``--loaded_latency`` logs (:mod:`calibration.mlc`);
- ``python -m calibration damon RECORD [--gbps X] [-o tenant.yaml]``: a tenant from a
  DAMON record (:mod:`calibration.damon`).

Bad input gives one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from calibration import damon, mlc
from calibration.checks import must_show_checks
from calibration.data import DATA_DIR, CalibrationDataError, load_series
from calibration.fit import fit
from calibration.presets import write_presets
from calibration.probe import ProbeError, probe
from calibration.report import write_report
from envs.errors import report_error

__all__ = ["main"]


SUBCOMMANDS = ("probe", "mlc", "damon")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status (0 ok, 1 a must-show check failed, 2 no data
    or bad input)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in SUBCOMMANDS:
        return _subcommand(args_list[0], args_list[1:])
    ap = argparse.ArgumentParser(
        prog="python -m calibration",
        description="Fit the spr-a1000 presets to MLC loaded-latency curves and validate them. "
        "Subcommands for your own machine and workload: probe, mlc, damon "
        "(python -m calibration probe --help).",
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
    args = ap.parse_args(args_list)
    try:
        series = load_series(args.data)
    except CalibrationDataError as exc:
        return report_error(exc)
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


def _probe_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m calibration probe",
        description="Describe this Linux host's memory nodes as a hardware file (read only).",
    )
    ap.add_argument("--root", default="/", help="read the host's files under DIR (default /)")
    ap.add_argument("-o", "--output", default=None, help="write the machine here (default stdout)")
    ap.add_argument("--name", default="probed", help="the machine's name (default probed)")
    ap.add_argument(
        "--snapshot",
        default=None,
        metavar="DIR2",
        help="copy the files read into DIR2 (a new folder) to probe elsewhere with --root DIR2",
    )
    args = ap.parse_args(argv)
    try:
        text, host = probe(args.root, args.output, args.snapshot, args.name)
    except (ProbeError, OSError) as exc:
        return report_error(exc)
    if args.output is None:
        sys.stdout.write(text)
    else:
        kinds = ", ".join(f"node{n.id} {n.kind}" for n in host.nodes)
        print(f"wrote {args.output} ({kinds})")
    if args.snapshot is not None:
        print(f"copied the files read to {args.snapshot}")
    return 0


def _subcommand(name: str, argv: list[str]) -> int:
    if name == "probe":
        return _probe_main(argv)
    if name == "mlc":
        return mlc.main(argv)
    return damon.main(argv)
