"""`python -m bench [--quick] [--compile] [--only NAME] [--threads N] [--out PATH]`: run the
benchmarks, print a table (figure, ratio, goal, verdict, the machine's load), write the results
as JSON (default `runs/bench/results.json`).

One thread by default (`--threads`): torch with two threads stalls on a loaded two-core
machine, and every in-process comparison alternates its sides, so both get the same one.
`defaults`, `memory` and `threads` run each side in a process of its own, at the settings users get
(`bench/defaults.py`): there `--threads` does not apply.
"""
from __future__ import annotations

import os

# before torch (imported by the benchmark modules) starts its thread pools
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from bench import (  # noqa: E402
    ROOT,
    Row,
    checker,
    cpu_kernels,
    data,
    defaults,
    diffusion,
    executor,
    first_step,
    flux,
    generate,
    gpt,
    hf_load,
    kernels,
    load_average,
    lsp,
    memory,
    nanochat,
    safetensors_load,
    sampling,
    threads,
)

BENCHMARKS = {"checker": checker, "cpu_kernels": cpu_kernels, "data": data,
              "defaults": defaults, "diffusion": diffusion, "executor": executor, "first_step": first_step, "flux": flux,
              "generate": generate, "gpt": gpt, "hf_load": hf_load, "kernels": kernels, "lsp": lsp, "memory": memory,
              "nanochat": nanochat, "safetensors": safetensors_load, "sampling": sampling,
              "threads": threads}
# benchmarks whose run() also times the torch.compile path when asked (--compile)
COMPILABLE = {"gpt"}
COLUMNS = ("benchmark", "median ms", "p90 ms", "ratio", "goal", "verdict", "load", "")


def _git_rev() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def table(rows: list[tuple[Row, str]]) -> str:
    """The rows (each with the load while its benchmark ran) as aligned columns."""
    cells = [COLUMNS] + [(r.what, r.median, r.p90, r.ratio, r.goal, r.verdict, load, r.note)
                         for r, load in rows]
    w = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS) - 1)]
    right = (False, True, True, True, False, False, True)
    lines = []
    for k, c in enumerate(cells):
        parts = [c[i].rjust(w[i]) if right[i] else c[i].ljust(w[i]) for i in range(len(w))]
        lines.append(("  ".join(parts) + "  " + c[-1]).rstrip())
        if k == 0:
            lines.append("-" * len(lines[0]))
    return "\n".join(lines)


def verdicts(rows: list[tuple[Row, str]]) -> str:
    """One closing line: how many goals are met, and the missed ones by name."""
    judged = [r for r, _ in rows if r.verdict]
    missed = [r.what.strip() for r in judged if r.verdict != "ok"]
    line = f"goals: {len(judged) - len(missed)} of {len(judged)} met"
    return line + (f"; MISSED: {'; '.join(missed)}" if missed else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="few iterations (a rough number in seconds)")
    p.add_argument("--compile", action="store_true",
                   help="also time the torch.compile path where a benchmark has one (gpt)")
    p.add_argument("--only", action="append", choices=sorted(BENCHMARKS), metavar="NAME",
                   help=f"run only this benchmark ({', '.join(sorted(BENCHMARKS))}); repeatable")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="torch threads (default: %(default)s, both sides of every comparison)")
    p.add_argument("--out", default=str(ROOT / "runs" / "bench" / "results.json"),
                   help="where to write the JSON results (default: %(default)s)")
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(max(1, args.threads))
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
        # other work on the machine slows every figure; the comparisons alternate their
        # sides so that it hits both, and each benchmark records the load it ran under
        "loadavg_1m": load_average(),
    }
    print(f"tyr bench: {', '.join(names)}{' (quick)' if args.quick else ''}; "
          f"torch {meta['torch']}, {meta['torch_threads']} threads, {meta['cpus']} cpus, "
          f"load {meta['loadavg_1m']}", file=sys.stderr)
    results: dict[str, Any] = {}
    rows: list[tuple[Row, str]] = []
    t_all = time.perf_counter()
    for name in names:
        t0, load0 = time.perf_counter(), load_average()
        extra = {"compile": True} if args.compile and name in COMPILABLE else {}
        results[name] = BENCHMARKS[name].run(quick=args.quick, **extra)
        results[name]["wall_s"] = time.perf_counter() - t0
        results[name]["load"] = [load0, load_average()]
        load = "-".join(f"{x:.1f}" for x in results[name]["load"] if x is not None)
        rows.extend((row, load) for row in BENCHMARKS[name].rows(results[name]))
        print(f"  {name}: {results[name]['wall_s']:.1f} s, load {load}", file=sys.stderr)
    meta["wall_s"] = time.perf_counter() - t_all
    print(table(rows))
    print(verdicts(rows))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, **results}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} ({meta['wall_s']:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
