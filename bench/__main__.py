"""`python -m bench [--quick] [--compile] [--only NAME] [--out PATH]`: run the benchmarks, print a table,
write the results as JSON (default `runs/bench/results.json`)."""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import (ROOT, checker, data, diffusion, executor, flux, gpt, kernels, nanochat,
                   safetensors_load)

BENCHMARKS = {"checker": checker, "data": data, "diffusion": diffusion, "executor": executor,
              "flux": flux, "gpt": gpt, "kernels": kernels, "nanochat": nanochat,
              "safetensors": safetensors_load}
# benchmarks whose run() also times the torch.compile path when asked (--compile)
COMPILABLE = {"gpt"}


def _git_rev() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def _table(rows: list[tuple[str, str, str, str]]) -> str:
    head = ("benchmark", "median ms", "p90 ms", "")
    all_rows = [head, *rows]
    w = [max(len(r[i]) for r in all_rows) for i in range(3)]
    lines = []
    for k, r in enumerate(all_rows):
        lines.append(f"{r[0]:<{w[0]}}  {r[1]:>{w[1]}}  {r[2]:>{w[2]}}  {r[3]}".rstrip())
        if k == 0:
            lines.append("-" * (sum(w) + 4 + 2 + max(len(r[3]) for r in all_rows)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="few iterations (a rough number in seconds)")
    p.add_argument("--compile", action="store_true",
                   help="also time the torch.compile path where a benchmark has one (gpt)")
    p.add_argument("--only", action="append", choices=sorted(BENCHMARKS), metavar="NAME",
                   help=f"run only this benchmark ({', '.join(sorted(BENCHMARKS))}); repeatable")
    p.add_argument("--out", default=str(ROOT / "runs" / "bench" / "results.json"),
                   help="where to write the JSON results (default: %(default)s)")
    args = p.parse_args(argv)

    import torch

    names = args.only or list(BENCHMARKS)
    meta: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git": _git_rev(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "quick": args.quick,
        "compile": args.compile,
        # other load on the machine makes the absolute numbers noisy; the alternating
        # executor comparison is meant to keep the ratio fair anyway
        "loadavg_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    print(f"tyr bench: {', '.join(names)}{' (quick)' if args.quick else ''}; "
          f"torch {meta['torch']}, {meta['torch_threads']} threads, {meta['cpus']} cpus, "
          f"load {meta['loadavg_1m']}",
          file=sys.stderr)
    results: dict[str, Any] = {}
    rows = []
    for name in names:
        t0 = time.perf_counter()
        extra = {"compile": True} if args.compile and name in COMPILABLE else {}
        results[name] = BENCHMARKS[name].run(quick=args.quick, **extra)
        results[name]["wall_s"] = time.perf_counter() - t0
        rows.extend(BENCHMARKS[name].rows(results[name]))
        print(f"  {name}: {results[name]['wall_s']:.1f} s", file=sys.stderr)
    print(_table(rows))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, **results}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
