"""The parity suite of one kernel contract, with its fixtures written as safetensors.

`python -m pytyr.kernels.suite --suite NAME --fixtures DIR [--scale real] [--trials N]`
runs the contract's deterministic cases (and N randomized trials), prints one line per case
and writes each case to `DIR/NAME/<index>-<kind>.safetensors`: the inputs, the output
gradients fed in, the kernel's outputs and gradients and the reference's, with the seed,
dims, dtype and options in the metadata. A vendored reference runner can recompute them
(`scripts/gpu/test_parity_suite.sh`). Exit status 1 when any case fails. `--list` prints
the suite names.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

from pytyr.kernels import contracts
from pytyr.kernels.contract import DTYPE_NAMES, Case
from pytyr.kernels.parity import Report, run_case
from pytyr.safetensors import write_file


def _metadata(report: Report) -> dict[str, str]:
    case = report.case
    return {"suite": report.contract, "case": case.id, "seed": str(case.seed),
            "kind": case.kind, "dtype": DTYPE_NAMES[case.dtype], "dims": json.dumps(case.dims),
            "options": json.dumps(case.options), "ok": str(report.ok).lower(),
            "checks": json.dumps([c.__dict__ for c in report.checks])}


def _ratio(check) -> float:
    """How much of its bound a check used (inf: any error against a zero bound)."""
    if check.bound:
        return check.err / check.bound
    return math.inf if check.err else 0.0


def write_fixture(report: Report, path: Path) -> None:
    tensors = {k: v.detach().cpu().contiguous() for k, v in report.tensors.items()}
    write_file(tensors, path, _metadata(report))


def run_suite(name: str, scale: str, trials: int, fixtures: Path | None, device: str,
              out=None) -> bool:
    """Run one contract's cases; True when every case is within tolerance."""
    out = out or sys.stdout
    contract = contracts()[name]
    cases: list[Case] = contract.fixtures(scale) + contract.trials(scale, trials)
    if fixtures is not None:
        (fixtures / name).mkdir(parents=True, exist_ok=True)
    failed = 0
    for i, case in enumerate(cases):
        start = time.perf_counter()
        report = run_case(contract, case, device, keep=fixtures is not None)
        ms = (time.perf_counter() - start) * 1e3
        worst = max(report.checks, key=_ratio)
        print(f"{'ok  ' if report.ok else 'FAIL'} {name} [{case.id}] worst {worst.what}: "
              f"{worst.err:.3g} (bound {worst.bound:.3g}) {ms:.0f} ms", file=out)
        for line in report.lines():
            print("     " + line, file=out)
        failed += not report.ok
        if fixtures is not None:
            write_fixture(report, fixtures / name / f"{i:03d}-{case.kind}.safetensors")
    print(f"{name}: {len(cases) - failed} passed, {failed} failed", file=out)
    return failed == 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pytyr.kernels.suite", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--list", action="store_true", help="print the suite names and stop")
    p.add_argument("--suite", action="append", help="a contract's name (repeatable; all)")
    p.add_argument("--scale", choices=("small", "real"), default="small")
    p.add_argument("--trials", type=int, default=0, help="randomized trials per suite")
    p.add_argument("--fixtures", type=Path, help="write each case as safetensors under here")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)
    names = list(contracts())
    if args.list:
        print("\n".join(names))
        return 0
    unknown = [s for s in args.suite or [] if s not in names]
    if unknown:
        p.error(f"unknown suite {unknown[0]!r}; the suites are {', '.join(names)}")
    if args.trials < 0:
        p.error(f"--trials must be >= 0, got {args.trials}")
    ok = True
    for name in args.suite or names:
        ok &= run_suite(name, args.scale, args.trials, args.fixtures, args.device)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
