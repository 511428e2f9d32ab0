"""The main job's quality bar: the Lean GPT vs a plain nanoGPT-style model, same recipe.

`python -m bench.recipe` trains the plain PyTorch model (`bench/nanogpt.py`) with nanoGPT's CPU
recipe on the same Shakespeare text, batches and seed as `tyr train examples/gpt/GPT.lean`
(the same engine and `char_lm` task, `pytyr.train`), and compares its final validation loss with the Tyr run's
(`--tyr-metrics runs/gpt/metrics.json`, or trains the Tyr model too with `--train-tyr`).
The issue's bar: Tyr's val loss ≤ 1.92 and within 0.03 of the plain model's.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.nanogpt import GPT, GPTConfig

CONFIG = Path(__file__).resolve().parent.parent / "examples" / "gpt" / "config.json"


def _final_val(metrics: dict[str, Any]) -> float:
    return float(metrics["history"]["evals"][-1]["val"])


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
    args = p.parse_args(argv)
    cfg = json.loads(args.config.read_text())
    if args.iters:
        cfg["train"].update(max_iters=args.iters, lr_decay_iters=args.iters)
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
