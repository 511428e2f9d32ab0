"""The main job's quality bar: the Lean GPT vs a plain nanoGPT-style model, same recipe.

`python -m bench.recipe` trains the plain PyTorch model (`bench/nanogpt.py`) with nanoGPT's CPU
recipe on the same Shakespeare text, batches and seed as `tyr train examples/gpt/GPT.lean`
(the same engine and `char_lm` task, `pytyr.train`), and compares its final validation loss with the Tyr run's
(`--tyr-metrics runs/gpt/metrics.json`, or trains the Tyr model too with `--train-tyr`).
The issue's bar: Tyr's val loss ≤ 1.92 and within 0.03 of the plain model's.

`python -m bench.recipe --wall` times the two runs as users start them, one after the other,
each a process of its own: `make train`'s command (`tyr train examples/gpt/GPT.lean --model
gpt`: the entry point, the thread policy, fused AdamW) and the plain model as nanoGPT runs on
a CPU (torch's default threads, torch's default AdamW), the environment cleared of thread
settings for both; wall time (`make train`'s includes its checks and the sample it writes at
the end), peak RSS, the training loop's tokens/s, final val loss and the load sampled through
each run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.nanogpt import GPT, GPTConfig

CONFIG = Path(__file__).resolve().parent.parent / "examples" / "gpt" / "config.json"


def _final_val(metrics: dict[str, Any]) -> float:
    return float(metrics["history"]["evals"][-1]["val"])


THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")


def timed_run(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run `cmd` to its end: wall seconds, exit status, peak RSS (MB: the process's own
    `ru_maxrss`, from `wait4`), the 1-minute load every 5 s."""
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(5.0):
            loads.append(os.getloadavg()[0])

    watcher = threading.Thread(target=sample, daemon=True)
    t0 = time.perf_counter()
    watcher.start()
    try:
        proc = subprocess.Popen(cmd, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        done.set()
        watcher.join()
    return {"wall_s": time.perf_counter() - t0, "rc": proc.returncode, "load": loads,
            "rss_mb": usage.ru_maxrss / 1024}


def wall(args: argparse.Namespace, cfg: dict[str, Any]) -> dict[str, Any]:
    """`make train`'s command and the plain nanoGPT run of the same recipe, timed."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    iters = [f"{k}={v}" for k, v in _shorter(cfg["train"], args.iters).items()]
    iters = [x for kv in iters for x in ("--set", f"train.{kv}")]
    tyr_out, plain_out = args.out / "wall-tyr", args.out / "wall-plain"
    tyr_bin = str(Path(sys.executable).parent / "tyr")
    # the benchmark's own directories: each run replaces the last one's
    config = ["--config", str(args.config)]  # both sides: examples/gpt/config.json by default
    runs = {"tyr": timed_run([tyr_bin, "train", "examples/gpt/GPT.lean", "--model", "gpt",
                              *config, "--set", f"out={tyr_out}", *iters, "--overwrite"], env)}
    runs["plain"] = timed_run([sys.executable, "-m", "bench.recipe", "--plain-only", *config,
                               "--out", str(plain_out), *(
                                   ["--iters", str(args.iters)] if args.iters else [])], env)
    for side, out in (("tyr", tyr_out), ("plain", plain_out / "plain")):
        metrics = out / "metrics.json"
        ok = runs[side]["rc"] == 0 and metrics.is_file()  # not an earlier run's figures
        m = json.loads(metrics.read_text()) if ok else None
        runs[side]["val"] = _final_val(m) if m else None
        runs[side]["tokens_per_s"] = m.get("tokens_per_s") if m else None  # the loop alone
    return runs


def _shorter(train: dict[str, Any], iters: int | None) -> dict[str, int]:
    """The `train` keys that make the recipe `iters` long (its warmup shortened to fit)."""
    if not iters:
        return {}
    return {"max_iters": iters, "lr_decay_iters": iters,
            "warmup_iters": min(train.get("warmup_iters", 0), iters // 20)}


def _clock(s: float) -> str:
    return f"{int(s // 60)} min {s % 60:.0f} s"


def train_plain(cfg: dict[str, Any], out: Path, progress: bool) -> float:
    """Train the plain model with Tyr's one engine on the config's task: any `nn.Module`
    whose forward takes the task's inputs and returns (logits, loss) trains the same way."""
    import torch

    from pytyr.config import load_dataclass
    from pytyr.train.engine import Engine
    from pytyr.train.settings import TrainConfig
    from pytyr.train.task import TaskContext
    from pytyr.train.tasks import task_class, task_options

    train = load_dataclass(TrainConfig, {**cfg["train"], "device": "cpu"}, "recipe",
                           prefix="train.")
    cls = task_class(cfg["task"], "recipe")
    task = cls(task_options(cls, cfg["task"], "recipe"), TaskContext(train.batch, train.seed))
    task.prepare()
    torch.manual_seed(train.seed)
    model = GPT(GPTConfig.from_tyr(cfg["model"]["c"]))
    Engine(model, task, train, ["idx", "targets"], out, row_tokens=task.sizes()["seq"]).run(
        progress=progress)
    return _final_val(json.loads((out / "metrics.json").read_text()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.recipe", description=__doc__.split("\n")[0])
    p.add_argument("--config", type=Path, default=CONFIG)
    p.add_argument("--tyr-metrics", type=Path, default=Path("runs/gpt/metrics.json"))
    p.add_argument("--train-tyr", action="store_true", help="train the Lean model first")
    p.add_argument("--out", type=Path, default=Path("runs/bench/recipe"))
    p.add_argument("--iters", type=int, help="override train.max_iters (and lr_decay_iters)")
    p.add_argument("-q", "--quiet", action="store_true")
    p.add_argument("--wall", action="store_true",
                   help="time `make train` and the plain nanoGPT run, each in its own process")
    p.add_argument("--plain-only", action="store_true",
                   help="train only the plain model as nanoGPT does on a CPU (torch's threads, "
                        "torch's default AdamW)")
    args = p.parse_args(argv)
    cfg = json.loads(args.config.read_text())
    cfg["train"].update(_shorter(cfg["train"], args.iters))
    if args.plain_only:
        import torch

        # nanoGPT on a CPU: torch's own thread count, AdamW without `fused`
        cfg["train"].update(threads=torch.get_num_threads(), fused=False)
        val = train_plain(cfg, args.out / "plain", progress=not args.quiet)
        print(f"plain val loss {val:.4f}")
        return 0
    if args.wall:
        runs = wall(args, cfg)
        n = cfg["train"]["max_iters"]
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "wall.json").write_text(json.dumps({"iters": n, **runs}, indent=1))
        for side, what in (("tyr", "make train (tyr train examples/gpt/GPT.lean)"),
                           ("plain", "plain nanoGPT, torch's threads and AdamW")):
            r = runs[side]
            load = f"load {min(r['load']):.1f}-{max(r['load']):.1f}" if r["load"] else ""
            val = f"val {r['val']:.4f}" if r["val"] is not None else f"exit {r['rc']}"
            loop = f", the loop {r['tokens_per_s']:,.0f} tok/s" if r["tokens_per_s"] else ""
            print(f"{what}: {_clock(r['wall_s'])} for {n} iters{loop}, {val}, peak RSS "
                  f"{r['rss_mb']:.0f} MB, {load}")
        print(f"plain/tyr wall time: {runs['plain']['wall_s'] / runs['tyr']['wall_s']:.2f} "
              f"(goal >= 1.0); tyr/plain peak RSS: "
              f"{runs['tyr']['rss_mb'] / runs['plain']['rss_mb']:.2f} (goal <= 1.05)")
        return 0 if all(r["rc"] == 0 for r in runs.values()) else 1
    if args.train_tyr:
        from pytyr.pipeline import LeanModels
        from pytyr.train.run import train

        cfg_tyr = {**cfg, "out": str(args.out / "tyr")}
        train(LeanModels("examples/gpt/GPT.lean"), "gpt", cfg_tyr, str(args.config),
              progress=not args.quiet)
        args.tyr_metrics = args.out / "tyr" / "metrics.json"
    tyr_val = _final_val(json.loads(args.tyr_metrics.read_text()))
    plain_val = train_plain(cfg, args.out / "plain", progress=not args.quiet)
    result = {"tyr_val": tyr_val, "plain_val": plain_val, "diff": tyr_val - plain_val,
              "bar_val": 1.92, "bar_diff": 0.03,
              "ok": tyr_val <= 1.92 and abs(tyr_val - plain_val) <= 0.03}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "result.json").write_text(json.dumps(result, indent=1))
    print(f"val loss after {cfg['train']['max_iters']} iters: tyr {tyr_val:.4f}, plain "
          f"{plain_val:.4f}, difference {tyr_val - plain_val:+.4f} "
          f"(bar: tyr ≤ 1.92 and |diff| ≤ 0.03: {'met' if result['ok'] else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
