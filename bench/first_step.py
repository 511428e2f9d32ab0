"""Time to the first step: from a command's start to its first training step done, `make
train`'s command against a plain PyTorch script of the same recipe, each a fresh process.

- `tyr`: `tyr train examples/gpt/GPT.lean --model gpt` (the Lean check, the graph, the thread
  choice, the engine), its output read as it comes: the time is when `step 1/` is printed;
- `plain`: a script as nanoGPT's `train.py` starts: import torch, read `train.bin` and
  `val.bin` (the same cached corpus, `np.memmap`), build `bench/nanogpt.py`'s GPT of the
  same config, `torch.optim.AdamW`, estimate the loss of both splits over `eval_iters`
  batches (nanoGPT's `estimate_loss` at iteration 0, as the recipe's evaluation at step 0),
  then one batch, forward, backward, step; it prints `step 1`
  (tyr with `train.max_iters=20`: a log file gets a line every twentieth of the run, so the
  first step is printed; nothing before the first step depends on the run's length).

Both at torch's default threads with the environment cleared of thread settings, as users
start them; sides alternate, the order flipped every pair, after a warm-up pair (the files in
the page cache, the imports compiled). `ratio` is plain/tyr (median of the per-pair ratios):
the goal (issue 35) is tyr's time within 1.5× of the plain script's, a ratio >= 1/1.5.

Standalone: `python -m bench.first_step [--quick]`.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from typing import Any

from bench import ROOT, Row, judge
from bench.standalone import standalone

GOAL = 1 / 1.5
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
_PLAIN = """
import json, sys
import numpy as np
import torch
from bench.nanogpt import GPT, GPTConfig
cfg = json.load(open(sys.argv[1]))
c, t = cfg["model"]["c"], cfg["train"]
torch.manual_seed(t.get("seed", 1337))
splits = {s: np.memmap(f"{sys.argv[2]}/{s}.bin", dtype=np.uint16, mode="r")
          for s in ("train", "val")}
def get_batch(split):
    data = splits[split]
    ix = torch.randint(len(data) - c["block"], (t["batch"],))
    x = torch.stack([torch.from_numpy(data[i:i + c["block"]].astype(np.int64)) for i in ix])
    y = torch.stack([torch.from_numpy(data[i + 1:i + 1 + c["block"]].astype(np.int64))
                     for i in ix])
    return x, y
model = GPT(GPTConfig.from_tyr(c))
opt = torch.optim.AdamW(model.parameters(), lr=t["lr"])
model.eval()
with torch.no_grad():  # nanoGPT's estimate_loss at iteration 0
    for split in splits:
        losses = [model(*get_batch(split))[1].item() for _ in range(t["eval_iters"])]
model.train()
x, y = get_batch("train")
_, loss = model(x, y)
loss.backward()
opt.step()
print(f"step 1: loss {loss.item():.4f}", flush=True)
"""


def _until(argv: list[str], mark: str, env: dict[str, str]) -> float:
    """Seconds from `argv`'s start until a line of its output starts with `mark`; the
    process is then stopped."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith(mark):
                return time.perf_counter() - t0
        raise RuntimeError(f"{argv[:4]} ended ({proc.wait()}) before '{mark}'")
    finally:
        proc.kill()
        proc.wait()


def run(quick: bool = False, pairs: int | None = None) -> dict[str, Any]:
    """Both sides in alternating processes; JSON-serialisable results."""
    from pytyr.data.shakespeare import prepare  # the corpus `char_lm` reads, cached

    config = ROOT / "examples" / "gpt" / "config.json"
    corpus = prepare(ROOT / "data" / "cache" / "shakespeare_char").cache_dir
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    out = ROOT / "runs" / "bench" / "first-step"
    sides = {
        "tyr": ([str(ROOT / ".venv" / "bin" / "tyr"), "train", "examples/gpt/GPT.lean",
                 "--model", "gpt", "--set", f"out={out}", "--set", "train.max_iters=20",
                 "--overwrite"], "step 1/"),
        "plain": ([sys.executable, "-c", _PLAIN, str(config), str(corpus)], "step 1"),
    }
    got: dict[str, list[float]] = {k: [] for k in sides}
    for i in range((pairs or (2 if quick else 5)) + 1):  # the first pair warms up
        for name in (list(sides) if i % 2 == 0 else list(reversed(sides))):
            argv, mark = sides[name]
            seconds = _until(argv, mark, env)
            if i:
                got[name].append(seconds)
    ratio = statistics.median(p / t for t, p in zip(got["tyr"], got["plain"]))
    return {"tyr_s": got["tyr"], "plain_s": got["plain"], "ratio": ratio}


def rows(r: dict[str, Any]) -> list[Row]:
    tyr, plain = sorted(r["tyr_s"]), sorted(r["plain_s"])
    return [Row("time to the first step, make train's command (tyr)",
                f"{statistics.median(tyr):.2f}", f"{tyr[-1]:.2f}", **judge(r["ratio"], GOAL),
                note="s from start to step 1 done (plain/tyr; goal: tyr within 1.5x)"),
            Row("time to the first step, a plain nanoGPT script (plain)",
                f"{statistics.median(plain):.2f}", f"{plain[-1]:.2f}")]


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.first_step [--quick]`: rows then JSON."""
    return standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
