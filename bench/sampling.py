"""Sampling from the GPT of `make train` (`examples/gpt/GPT.lean`, its `config.json`): what
`tyr sample` and the closing sample do, against plain greedy decoding with and without a KV
cache, hand-written on nanoGPT's modules (`bench/nanogpt.py`, the same weights).

Sides, each `max_new` greedy tokens after a one-token prompt over the 64-position context:

- `tyr`: `generate_cached` through the `RunModel` of `tyr sample` over `gptStep` (prefill,
  then one token a step over the typed key/value caches; at 64 tokens the last 32 are
  prefilled again), its graphs built in an untimed first round;
- `plain cached`: the same schedule in plain PyTorch: per-layer key/value caches written in
  place, SDPA over the filled positions;
- `plain`: nanoGPT's `generate`: the whole context (cropped to 64) through the model for
  every token.

Rounds alternate the sides (the order swapped every round) so that a change in the machine's
speed hits all. Reported: tokens/s each, `tyr / plain cached` (goal >= 1.0) and
`tyr / plain` (no goal: the cache's gain), whether the cached sides pick the same tokens,
and the first call's time of `tyr` (its graphs built, what a fresh `tyr sample` pays).
"""
from __future__ import annotations

import json
import sys
import time
from typing import Any

import torch
import torch.nn.functional as F

from bench import ROOT, Row, judge, summarize
from bench.nanogpt import GPT, GPTConfig, load_from_tyr
from bench.standalone import standalone

GOAL_RATIO = 1.0
LEAN = ROOT / "examples" / "gpt" / "GPT.lean"
CONFIG = ROOT / "examples" / "gpt" / "config.json"


def values() -> dict[str, Any]:
    c = json.loads(CONFIG.read_text(encoding="utf-8"))["model"]["c"]
    return {**c, "vocab": 75}  # the Shakespeare corpus's characters


def build(c: dict[str, Any], seed: int = 0) -> tuple[Any, GPT]:
    """The Tyr `RunModel` of `gptLogits` holding seeded weights, and the plain GPT with
    copies of them."""
    from pytyr.pipeline import LeanModels, module_from_graph
    from pytyr.train.model import RunModel

    source = LeanModels(LEAN)
    module = module_from_graph(source.graph("gptLogits", {"c": c, "b": 1, "t": 4}), seed=seed)
    plain = GPT(GPTConfig.from_tyr(c)).eval()
    load_from_tyr(plain, module)
    return RunModel(source, "gptLogits", {"c": c}, module.state_dict()), plain


class PlainCache:
    """Greedy decoding of a plain `GPT` over per-layer key/value caches of `block`
    positions, with Tyr's schedule: a prompt's prefill, one token a step, and at `block`
    tokens the last `block // 2` prefilled again."""

    def __init__(self, model: GPT, block: int):
        cfg = model.config
        self.model, self.block = model, block
        self.heads, self.hs = cfg.n_head, cfg.n_embd // cfg.n_head
        shape = (cfg.n_layer, 1, self.heads, block, self.hs)
        self.k, self.v = torch.zeros(shape), torch.zeros(shape)
        self.length = 0

    def _attend(self, i: int, attn: Any, x: torch.Tensor, start: int) -> torch.Tensor:
        t = x.shape[1]
        q, k, v = attn.c_attn(x).split(attn.n_embd, dim=2)
        q, k, v = (z.view(1, t, self.heads, self.hs).transpose(1, 2) for z in (q, k, v))
        self.k[i, :, :, start:start + t] = k
        self.v[i, :, :, start:start + t] = v
        end = start + t
        y = F.scaled_dot_product_attention(q, self.k[i, :, :, :end], self.v[i, :, :, :end],
                                           is_causal=t > 1)  # a prefill starts at 0
        return attn.c_proj(y.transpose(1, 2).reshape(1, t, attn.n_embd))

    def _run(self, ids: list[int], start: int) -> torch.Tensor:
        tr = self.model.transformer
        idx = torch.tensor([ids])
        x = tr.wte(idx) + tr.wpe(torch.arange(start, start + len(ids)))
        for i, blk in enumerate(tr.h):
            x = x + self._attend(i, blk.attn, blk.ln_1(x), start)
            x = x + blk.mlp(blk.ln_2(x))
        self.length = start + len(ids)
        return self.model.lm_head(tr.ln_f(x[:, -1]))[0]

    @torch.no_grad()
    def generate(self, prompt: list[int], max_new: int) -> list[int]:
        ids = list(prompt[-self.block:])
        logits = self._run(ids, 0)
        for k in range(max_new):
            ids.append(int(logits.argmax()))
            if k + 1 == max_new:
                break
            if self.length < self.block:
                logits = self._run(ids[-1:], self.length)
            else:
                logits = self._run(ids[-(self.block // 2):], 0)
        return ids


@torch.no_grad()
def plain_uncached(model: GPT, prompt: list[int], max_new: int, block: int) -> list[int]:
    """nanoGPT's `generate` at temperature 0: the cropped context through the model."""
    idx = torch.tensor([prompt])
    for _ in range(max_new):
        logits, _ = model(idx[:, -block:])
        idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx[0].tolist()


def bench_decode(*, max_new: int, rounds: int) -> dict[str, Any]:
    from pytyr.train.tasks.lm.kvcache import generate_cached

    c = values()
    block, prompt = c["block"], [0]
    factory, plain = build(c)
    sides = {
        "tyr": lambda: generate_cached(factory, "gptStep", prompt, max_new, 0.0, block=block),
        "plain cached": lambda: PlainCache(plain, block).generate(prompt, max_new),
        "plain": lambda: plain_uncached(plain, prompt, max_new, block),
    }
    times: dict[str, list[float]] = {side: [] for side in sides}
    tokens: dict[str, list[int]] = {}
    first = 0.0
    for r in range(rounds + 1):  # round 0 builds Tyr's graphs and warms every side
        for side in (list(sides) if r % 2 else list(sides)[::-1]):
            t0 = time.perf_counter()
            tokens[side] = sides[side]()
            dt = time.perf_counter() - t0
            if r:
                times[side].append(dt)
            elif side == "tyr":
                first = dt
    speed = {side: max_new / summarize(ts)["median_ms"] * 1e3 for side, ts in times.items()}
    return {"max_new": max_new, "block": block, "rounds": rounds,
            "tokens_per_s": speed, "first_call_s": first,
            "ratio_cached": speed["tyr"] / speed["plain cached"],
            "ratio_uncached": speed["tyr"] / speed["plain"],
            "same_tokens": tokens["tyr"] == tokens["plain cached"]}


def run(*, quick: bool = False) -> dict[str, Any]:
    return {"benchmark": "sampling", "goal_ratio": GOAL_RATIO, "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "decode": bench_decode(max_new=100 if quick else 500, rounds=2 if quick else 5)}


def rows(result: dict[str, Any]) -> list[Row]:
    d = result["decode"]
    speed = d["tokens_per_s"]
    what = f"gpt sample [{d['max_new']} tokens, greedy, {result['threads']} thread(s)]"
    return [
        Row(f"{what}: tyr / plain cached", **judge(d["ratio_cached"], result["goal_ratio"]),
            note=f"tyr {speed['tyr']:,.0f} tok/s, plain cached {speed['plain cached']:,.0f}; "
                 f"same tokens: {d['same_tokens']}"),
        Row(f"{what}: tyr / plain uncached", ratio=f"{d['ratio_uncached']:.2f}",
            note=f"plain uncached {speed['plain']:,.0f} tok/s; tyr's first call "
                 f"{d['first_call_s']:.2f} s (graphs built)"),
    ]


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.sampling [--quick]`: this benchmark alone, rows then JSON."""
    return standalone(sys.modules[__name__], argv)


if __name__ == "__main__":
    sys.exit(main())
