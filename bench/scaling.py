"""Data-parallel scaling of nanochat training under torchrun: tokens/s per process count.

`python -m bench.scaling [--sizes 1 2] [--steps 20] [--repeats 2] [--config FILE] [--out DIR]`
(what `scripts/nanochat/bench_distributed.sh` runs). Each size N trains the model of the
config for `steps` optimizer steps with N processes and the config's global batch (strong
scaling: N ranks split the same batch, each with OMP_NUM_THREADS threads, 1 by default), and
reads the engine's tokens/s from the run's `metrics.json`. The sizes alternate, in the
opposite order every repeat, so drift in the machine's load hits every size; the median per
size is reported with the speed-up and the scaling efficiency (speed-up / (N / first N))
against the first size, as a table, `scaling.csv` and `scaling.png` in `--out`.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import ROOT

LEAN = "examples/nanochat/NanoChat.lean"


def run_size(n: int, steps: int, config: str, out: Path, torchrun: str, threads: int) -> float:
    """tokens/s of one `tyr train` with `n` processes (its run directory is `out`)."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    cmd = [torchrun, "--standalone", f"--nproc_per_node={n}", "-m", "pytyr.cli", "train", LEAN,
           "--model", "nanochat", "--config", config, "-q", "--set", f"out={out}",
           "--set", f"train.max_iters={steps}", "--set", f"train.eval_interval={steps}",
           "--set", "train.schedule=constant", "--set", "train.lr_decay_iters=1000000",
           "--set", "train.eval_iters=1", "--set", f"train.checkpoint_interval={steps}",
           "--set", "sample.max_new_tokens=0"]
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"bench.scaling: {n} processes failed ({res.returncode}):\n"
                         f"{res.stdout[-2000:]}\n{res.stderr[-4000:]}")
    return float(json.loads((out / "metrics.json").read_text())["tokens_per_s"])


def measure(sizes: list[int], steps: int, repeats: int, config: str, out: Path,
            torchrun: str, threads: int) -> list[dict[str, Any]]:
    speeds: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(repeats):
        for n in (sizes if r % 2 == 0 else sizes[::-1]):
            speeds[n].append(run_size(n, steps, config, out / f"run-{n}", torchrun, threads))
            print(f"  {n} process(es), repeat {r + 1}: {speeds[n][-1]:,.0f} tokens/s",
                  file=sys.stderr)
    base_n, base = sizes[0], statistics.median(speeds[sizes[0]])
    rows = []
    for n in sizes:
        tps = statistics.median(speeds[n])
        rows.append({"processes": n, "tokens_per_s": tps, "speedup": tps / base,
                     "efficiency": tps / base / (n / base_n), "runs": speeds[n]})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'processes':>9}  {'tokens/s':>10}  {'speed-up':>8}  {'efficiency':>10}"]
    for r in rows:
        lines.append(f"{r['processes']:>9}  {r['tokens_per_s']:>10,.0f}  "
                     f"{r['speedup']:>7.2f}x  {r['efficiency']:>9.0%}")
    return "\n".join(lines)


def save(rows: list[dict[str, Any]], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(out / "scaling.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["processes", "tokens_per_s", "speedup", "efficiency", "runs"])
        for r in rows:
            w.writerow([r["processes"], f"{r['tokens_per_s']:.1f}", f"{r['speedup']:.3f}",
                        f"{r['efficiency']:.3f}", " ".join(f"{x:.1f}" for x in r["runs"])])
    fig, ax = plt.subplots(figsize=(5.5, 3.5), dpi=120)
    ns = [r["processes"] for r in rows]
    ax.bar([str(n) for n in ns], [r["tokens_per_s"] for r in rows], color="tab:blue")
    ax.set_xlabel("processes")
    ax.set_ylabel("tokens/s")
    ax2 = ax.twinx()
    ax2.plot([str(n) for n in ns], [r["efficiency"] * 100 for r in rows], "o-",
             color="tab:orange")
    ax2.set_ylabel("scaling efficiency (%)")
    ax2.set_ylim(0, 110)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(out / "scaling.png")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 2])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--config", default="examples/nanochat/config.json")
    p.add_argument("--out", default="runs/bench/scaling")
    p.add_argument("--torchrun", default=shutil.which("torchrun") or "torchrun")
    p.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    a = p.parse_args(argv)
    if any(n < 1 for n in a.sizes) or a.steps < 1 or a.repeats < 1:
        p.error("sizes, steps and repeats must be positive")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = measure(a.sizes, a.steps, a.repeats, a.config, out, a.torchrun, a.threads)
    print(table(rows))
    save(rows, out, f"nanochat ({Path(a.config).name}), {a.threads} thread(s) per process")
    (out / "scaling.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out / 'scaling.csv'}, {out / 'scaling.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
